"""The report: the verdict's statistics on crafted attacks, the HTML of real audits, the histogram."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest

from recourse_privacy.audit import AttackResult, AuditConfig, AuditResult, DPSummary, run_audit
from recourse_privacy.metrics import (
    auc_null_halfwidth,
    minimum_detectable_auc,
    minimum_detectable_tpr,
    score_histogram_figure,
    theorem2_bound,
)
from recourse_privacy.report import (
    assess_attack,
    audit_label,
    compare_with_bound,
    make_verdict,
    verdict_of,
    write_html_report,
)
from recourse_privacy.results.summaries import VERSUS_CHOICE

SMALL = {"n_features": 20, "n_members": 200, "shadow_models": 2}
ATTACK_NAMES = ("cfd", "cfd-lrt", "loss", "loss-lrt", "random")


# --------------------------------------------------------------------------- real audits


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("default")
    return run_audit(AuditConfig(**SMALL), out), out


@pytest.fixture(scope="module")
def laplace_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("laplace")
    cfg = AuditConfig(**SMALL, defense="laplace", epsilon=1.0, normalize_rows=True, distance="l2")
    return run_audit(cfg, out), out


def _render(result, tmp_path, **kw):
    path = write_html_report(result, tmp_path, **kw)
    return path.read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.index(f"<h2>{heading}</h2>")
    end = text.find("<h2>", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_real_audit_report_layout(default_run):
    result, out = default_run
    text = (out / "report.html").read_text(encoding="utf-8")
    assert result.files["report"] == str(out / "report.html")
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text.lower() and "<link" not in text.lower()  # self-contained
    assert text.count("data:image/png;base64,") == 2  # ROC and histogram embedded
    # Verdict first, then the ROC, then the attack table; configuration collapsed.
    i_verdict = text.index('<div class="verdict')
    i_roc = text.index('<figure class="roc">')
    i_q1 = text.index("<h2>Question 1: what the model&rsquo;s own scores leak</h2>")
    i_q2 = text.index("<h2>Question 2: what recourse leaks, beyond the scores</h2>")
    i_power = text.index("<h2>What this sample size can detect</h2>")
    i_attacks = text.index("<h2>Attacks</h2>")
    assert i_verdict < i_roc < i_q1 < i_q2 < i_power < i_attacks
    assert text.index("<h2>") == i_q1  # no section before the verdict and ROC
    verdict = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.DOTALL).group(1)
    v = verdict_of(result)
    assert v.headline.replace("'", "&#x27;") in verdict and v.attack in verdict
    # Each question's table holds its own attacks (by their registered signal), with intervals.
    q1, q2 = text[i_q1:i_q2], text[i_q2:i_power]
    assert "<td>loss-lrt</td>" in q1 and "<td>cfd-lrt</td>" not in q1 and "<td>random</td>" not in q1
    assert "<td>cfd-lrt</td>" in q2 and "<td>loss</td>" not in q2 and "Beyond the scores?" in q2
    lo, hi = result.attacks["cfd-lrt"].auc_ci
    assert f"[{lo:.3f}, {hi:.3f}]" in q2 and "vs loss" in q2
    assert f"With {result.n_members} members and {result.n_nonmembers} non-members" in text[i_power:i_attacks]
    # The attacks' AUCs tested together (Holm 1979): every counted attack, controls left out.
    fw = _section(text, "Several attacks at once")
    assert i_power < text.index("<h2>Several attacks at once</h2>") < i_attacks
    assert v.family_wise is not None and v.family_wise.text.replace("'", "&#x27;") in fw
    assert set(v.family_wise.p_holm) == {n for n, a in result.attacks.items() if a.signal != "none"}
    assert "<td>random</td>" not in fw
    for name in ATTACK_NAMES:
        assert f"<td>{name}</td>" in _section(text, "Attacks")
    config = _section(text, "Configuration")
    assert "<details>" in config and "</details>" in config and "shadow models" in config
    # The Timing section reads timing_seconds (it was missing from every real report before).
    timing = _section(text, "Timing")
    assert set(result.timing_seconds) >= {"data", "owner model", "recourse", "attacks", "total"}
    assert f"{result.timing_seconds['total']:.2f}" in timing
    for stage in ("owner model", "shadow models", "attacks"):
        assert f"<th>{stage}</th>" in timing
    # Sections read typed fields.
    assert f"{result.model.train_accuracy:.4g}" in _section(text, "Model")
    assert "mean L1 cost" in _section(text, "Recourse")
    assert "<h2>Shadow models</h2>" in text
    assert "Differential privacy</h2>" not in text
    # Papers cited author-year, never by the code base's numbers.
    # (the papers' numbers in this code base: 000-004, as in shared/papers/README.md; "paper 000", "000_8c42...")
    assert re.search(r"paper\s*0\d\d|\b00[0-4]_[0-9a-f]{8}", text, re.IGNORECASE) is None
    assert "Pawelczyk et al. 2023" in text
    # The header names data, model and recourse.
    assert "synthetic / logistic / linear" in text


def test_unreliable_low_fpr_cells_marked(default_run):
    result, _ = default_run
    assert result.n_nonmembers < 1000  # so TPR at FPR 0.001 cannot be resolved
    text = write_html_report(result, default_run[1], filename="again.html").read_text()
    table = _section(text, "Attacks")
    assert table.count('class="num unreliable"') == len(result.attacks)
    assert "Unreliable: fewer than 1/FPR non-members" in table


def test_report_from_metrics_json(default_run, tmp_path):
    result, _ = default_run
    back = AuditResult.from_dict(result.to_dict())
    assert back.arrays is None
    text = _render(back, tmp_path)
    assert "<h2>Timing</h2>" in text and verdict_of(back) == verdict_of(result)


def test_html_escaping(default_run, tmp_path):
    result, _ = default_run
    evil = "<i>evil</i>"
    attacks = dict(result.attacks)
    attacks[evil] = dataclasses.replace(attacks.pop("cfd"), name=evil)
    hostile = dataclasses.replace(
        result,
        config=dataclasses.replace(result.config, dataset="<b>bold</b>"),
        attacks=attacks,
        warnings=("<script>alert(1)</script>",),
        timing_seconds={"<u>stage</u>": 1.0, "total": 1.0},
    )
    text = _render(hostile, tmp_path)
    assert "<b>bold</b>" not in text and "&lt;b&gt;bold&lt;/b&gt;" in text
    assert evil not in text and "&lt;i&gt;evil&lt;/i&gt;" in text
    assert "<u>stage</u>" not in text and "&lt;u&gt;stage&lt;/u&gt;" in text
    assert "<script" not in text.lower()


def test_header_of_a_data_file_and_a_defense(default_run, tmp_path):
    result, _ = default_run
    cfg = dataclasses.replace(
        result.config, data="/secret/dir/loans.csv", target="defaulted", defense="dpm", epsilon=2.0
    )
    text = _render(dataclasses.replace(result, config=cfg), tmp_path)
    title = re.search(r"<h1>(.*?)</h1>", text).group(1)
    assert "loans.csv" in title and "/secret/dir" not in title
    assert "defense dpm, ε = 2" in title
    assert "target column defaulted" in text
    assert audit_label(dataclasses.replace(result, config=cfg)) == "loans.csv / logistic / linear / defense dpm, ε = 2"


def test_laplace_report_has_dp_section(laplace_run):
    result, out = laplace_run
    assert result.dp is not None and result.dp.defense == "laplace"
    text = (out / "report.html").read_text(encoding="utf-8")
    assert "defense laplace, ε = 1" in re.search(r"<h1>(.*?)</h1>", text).group(1)
    dp = _section(text, "Differential privacy")
    bound = theorem2_bound(1.0)
    assert f"{bound:.4f}" in dp and "per query" in dp
    covered = result.dp.verdict.covered  # the attacks reading the recourse, which the claim covers
    for name in ATTACK_NAMES:
        assert (f"<td>{name}</td>" in dp) == (name in covered)
    assert "Not covered by this claim" in dp and "loss" in dp.split("Not covered by this claim")[1]
    assert "direction (released move direction)" in dp  # Laplace Recourse's direction attack
    assert "What is private." in dp  # the mechanism's own statement of its guarantee
    assert "Huang et al. 2023" in dp
    assert "1.0000" in dp  # total epsilon over every recourse: the bound is vacuous
    v = verdict_of(result)
    assert v.dp is not None and v.dp.exceeded == ()
    verdict_div = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.DOTALL).group(1)
    tight = np.exp(2.0) / (1 + np.exp(2.0))  # the tight bound at the selected-target epsilon 2 x 1
    assert f"at ε = 2 = {tight:.4f}" in verdict_div and result.dp.verdict.attack in verdict_div
    assert f"{bound:.4f}" in verdict_div  # Pawelczyk et al.'s Theorem 2 beside it
    # The spike of clamped distances is named on the histogram and the report embeds it.
    assert result.dp.clamped_share > 0.05


def test_laplace_report_flags_an_attack_above_the_bound(laplace_run, tmp_path):
    result, _ = laplace_run
    attacks = dict(result.attacks)
    attacks["loss"] = dataclasses.replace(attacks["loss"], balanced_accuracy=0.95)
    attacks["cfd"] = dataclasses.replace(attacks["cfd"], balanced_accuracy=0.95)
    text = _render(dataclasses.replace(result, attacks=attacks), tmp_path)
    dp = _section(text, "Differential privacy")
    # cfd reads the recourse (covered, above the bound); loss reads the scores (not covered, not compared)
    assert dp.count("above bound") == 1 and "<td>cfd</td>" in dp and "<td>loss</td>" not in dp
    verdict = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.DOTALL).group(1)
    # loss reads the model's scores, which Laplace Recourse does not claim to protect: the verdict states the
    # audit's worst case over the attacks the claim covers, not every attack above the point bound
    assert "the DP claim covers" in verdict and "exceed(s) the DP bound" not in verdict


def test_missing_image_is_reported_not_fatal(default_run, tmp_path):
    text = _render(default_run[0], tmp_path, images={"ROC": tmp_path / "nope.png"})
    assert "could not be embedded" in _section(text, "Warnings")
    assert "data:image" not in text


def test_result_not_mutated_and_dicts_refused(default_run, tmp_path):
    result, _ = default_run
    before = result.to_dict()
    write_html_report(result, tmp_path)
    assert result.to_dict() == before
    with pytest.raises(ValueError, match="AuditResult"):
        write_html_report(before, tmp_path)


# --------------------------------------------------------------------------- verdict on crafted attacks


def _attack(name, auc, *, n1=1000, n0=1000, ba=None, tpr01=None, **more):
    keys = ("0.1", "0.01", "0.001")
    t01 = 0.01 + max(auc - 0.5, 0.0) / 4 if tpr01 is None else tpr01
    return AttackResult(
        **more,
        name=name,
        auc=auc,
        balanced_accuracy=0.5 + abs(auc - 0.5) * 0.8 if ba is None else ba,
        tpr_at_fpr=dict(zip(keys, (0.1 + (auc - 0.5), t01, 0.001))),
        achieved_fpr={k: float(k) * 0.98 for k in keys},
        tpr_at_fpr_reliable={k: n0 >= round(1 / float(k)) for k in keys},
        n_members=n1,
        n_nonmembers=n0,
        direction="greater",
    )


def _attacks(*items):
    return {a.name: a for a in items}


def _dp(defense, epsilon_per_query, epsilon_total, ba_bound, **more):
    """A DP summary of a file of schema 1: the claim's epsilons and bound, none of the named bounds."""
    return DPSummary(
        defense=defense,
        mechanism="",
        epsilon_per_query=epsilon_per_query,
        epsilon_total=epsilon_total,
        delta=0.0,
        bound_epsilon=epsilon_per_query,
        ba_bound=ba_bound,
        composition="",
        **more,
    )


@pytest.mark.parametrize("tiny", [0.0, 0.002, -0.003])
def test_verdict_no_measurable_leakage_inside_the_band(tiny):
    assert abs(tiny) < auc_null_halfwidth(1000, 1000)
    v = make_verdict(
        _attacks(_attack("cfd", 0.5 + tiny), _attack("cfd-lrt", 0.5 - tiny), _attack("loss", 0.5 + tiny / 2))
    )
    assert v.level == "noleak" and v.headline == "No measurable leakage."
    assert not v.leakage and v.significant == ()
    assert v.band_halfwidth == pytest.approx(auc_null_halfwidth(1000, 1000))


def test_verdict_leakage_names_the_attack():
    v = make_verdict(_attacks(_attack("cfd", 0.52), _attack("loss-lrt", 0.7), _attack("random", 0.5)))
    assert (
        v.level == "leak" and v.headline == "The model's scores leak membership; recourse adds no measurable leakage."
    )
    assert v.attack == "loss-lrt" and v.auc == pytest.approx(0.7)
    assert v.significant == ("loss-lrt",)
    assert "identifies 6% of members while wrongly flagging 0.98% of non-members" in v.text
    assert v.controls == ("random",) and "random-guessing control" in v.text


def test_verdict_names_the_lead_attack_of_a_fixed_order_not_the_best_on_the_targets():
    # Before: the attack of best TPR at 1% FPR, then AUC, on the targets (cfd here), a choice made with the
    # targets' membership labels whose numbers are optimistic. Now the lead of the fixed order (cfd-lrt before
    # cfd) is named with its own numbers, and the other detection is listed by name.
    v = make_verdict(_attacks(_attack("cfd", 0.8, tpr01=0.2), _attack("cfd-lrt", 0.6, tpr01=0.02)))
    assert v.attack == "cfd-lrt" and v.auc == pytest.approx(0.6) and v.tpr_at_1pct_fpr == pytest.approx(0.02)
    assert set(v.significant) == {"cfd", "cfd-lrt"} and v.recourse.lead == "cfd-lrt"
    assert "leakage detected by 2 of 2 attack(s) (cfd, cfd-lrt). The lead attack, cfd-lrt, has AUC 0.600" in v.text
    assert "never the targets' AUC" in v.text  # the report says how the named attack was chosen


def test_verdict_band_edges_and_reversed_attacks():
    hw = auc_null_halfwidth(1000, 1000)
    assert make_verdict(_attacks(_attack("cfd", 0.5 + 1.2 * hw))).level == "leak"
    below = make_verdict(_attacks(_attack("cfd", 0.5 - 1.2 * hw)))
    assert below.level == "leak" and below.assessments["cfd"].reversed and "opposite" in below.text
    assert make_verdict(_attacks(_attack("cfd", 0.5 + 0.8 * hw))).level == "noleak"
    # The band narrows with more targets: the same AUC leaks with many targets, not with few.
    assert assess_attack(_attack("cfd", 0.53, n1=5000, n0=5000)).significant
    assert not assess_attack(_attack("cfd", 0.53, n1=100, n0=100)).significant


def test_verdict_ignores_a_control_and_flags_unresolvable_fpr():
    v = make_verdict(_attacks(_attack("cfd", 0.5), _attack("random", 0.9)))
    assert v.level == "noleak" and v.attack == "cfd"  # the control is not the verdict's attack
    few = make_verdict(_attacks(_attack("cfd", 0.7, n1=60, n0=50)))
    assert few.tpr_reliable is False and "only 50 non-members" in few.text


def test_verdict_undetermined_and_empty():
    v = make_verdict(_attacks(_attack("cfd", 0.7, n1=0, n0=0)))
    assert v.level == "undetermined" and "Sample sizes were missing" in v.text
    assert make_verdict({}).level == "none"
    assert make_verdict(_attacks(_attack("cfd", float("nan")))).level == "none"


def test_dp_attack_above_the_bound_is_flagged():
    bound = theorem2_bound(0.1)
    dp = _dp("laplace", 0.1, 50.0, bound)
    attacks = _attacks(_attack("loss", 0.9, ba=0.82), _attack("cfd", 0.51, ba=0.52))
    cmp = compare_with_bound(dp, attacks.values())
    assert cmp.bound == pytest.approx(bound) and "per query" in cmp.source
    assert {c.attack: c.status for c in cmp.checks} == {"loss": "above", "cfd": "within"}
    assert cmp.exceeded == ("loss",) and cmp.total_bound == pytest.approx(theorem2_bound(50.0))
    v = make_verdict(attacks, dp)
    assert v.dp == cmp and "loss exceed(s) the DP bound" in v.text


def test_dp_bound_computed_when_missing_and_vacuous_bound():
    dp = _dp("dpm", 0.1, None, None)
    cmp = compare_with_bound(dp, [_attack("loss", 0.9, ba=0.82)])
    assert cmp.bound == pytest.approx(theorem2_bound(0.1)) and cmp.source.startswith("computed")
    assert cmp.exceeded == ("loss",)
    vac = compare_with_bound(
        _dp("dpm", 20.0, 20.0, theorem2_bound(20.0)),
        [_attack("loss", 0.9, ba=0.99)],
    )
    assert vac.vacuous and vac.checks[0].status == "vacuous" and vac.exceeded == ()
    none = compare_with_bound(_dp("x", None, None, None), [_attack("loss", 0.9)])
    assert none.bound is None and none.checks == ()


# --------------------------------------------------------------------------- the distance histogram


def test_histogram_counts_show_a_spike():
    rng = np.random.default_rng(0)
    members = np.concatenate([rng.lognormal(-2, 1, 100), np.full(300, 3.93)])
    nonmembers = np.concatenate([rng.lognormal(-2, 1, 100), np.full(300, 3.93)])
    fig = score_histogram_figure(members, nonmembers, title="T")
    log_ax, lin_ax = fig.axes
    assert log_ax.get_xscale() == "log" and lin_ax.get_xscale() == "linear"
    assert log_ax.get_ylabel() == "count"
    # Counts, not densities: the bars of each panel add up to the number of values.
    heights = [p.get_height() for p in lin_ax.patches]
    assert sum(heights) == pytest.approx(members.size + nonmembers.size)
    assert max(heights) == 300  # the spike is a bar as tall as its count
    assert "600 of 800 values are exactly 3.93" in fig._suptitle.get_text()
    assert fig._suptitle.get_text().startswith("T")


# --------------------------------------------------------------------------- the analyst's question: scores vs recourse


def _ci_attack(name, signal, auc, auc_ci, tpr01, tpr_ci, versus=None, n=1000):
    """An attack with intervals, as an audit of schema 2 records it (achieved FPR 0.98%, at most 1.8%)."""
    return _attack(
        name,
        auc,
        n1=n,
        n0=n,
        tpr01=tpr01,
        signal=signal,
        auc_ci=auc_ci,
        tpr_at_fpr_ci={"0.01": tpr_ci},
        achieved_fpr_ci={"0.01": (0.0045, 0.018)},
        n_bootstrap=1000,
        versus_scores=versus,
    )


def _versus(diff, lo, hi, against="loss-lrt", choice=VERSUS_CHOICE):
    return {"attack": against, "auc_difference": diff, "ci_low": lo, "ci_high": hi, "choice": choice}


def test_verdict_no_leak_says_what_the_sample_size_rules_out():
    v = make_verdict(
        _attacks(
            _ci_attack("loss-lrt", "score", 0.51, (0.485, 0.535), 0.012, (0.006, 0.021)),
            _ci_attack("cfd-lrt", "distance", 0.505, (0.48, 0.53), 0.011, (0.005, 0.02), _versus(-0.005, -0.03, 0.02)),
            _ci_attack("random", "none", 0.56, (0.535, 0.585), 0.05, (0.04, 0.06)),
        )
    )
    assert v.level == "noleak" and v.headline == "No measurable leakage."
    assert v.scores.level == v.recourse.level == "noleak" and v.beyond.outcome == "no-recourse-leak"
    assert v.controls == ("random",)  # signal "none": a control, whatever its numbers
    assert "rule out an AUC above 0.530 and a TPR above 2% at that FPR" in v.recourse.text
    assert v.recourse.lead == "cfd-lrt" and v.scores.lead == "loss-lrt"
    d = v.detectable
    assert d.auc == pytest.approx(minimum_detectable_auc(1000, 1000))
    assert d.tpr["0.01"] == pytest.approx(minimum_detectable_tpr(1000, 1000, 0.01))
    assert f"With 1000 members and 1000 non-members, an attack with a true AUC of {d.auc:.3f}" in v.text


def test_verdict_score_leak_only():
    v = make_verdict(
        _attacks(
            _ci_attack("loss-lrt", "score", 0.70, (0.68, 0.72), 0.06, (0.045, 0.077)),
            _ci_attack("cfd", "distance", 0.51, (0.486, 0.534), 0.012, (0.006, 0.021), _versus(-0.19, -0.22, -0.16)),
        )
    )
    assert v.level == "leak" and v.scores.leaks and not v.recourse.leaks
    assert v.headline == "The model's scores leak membership; recourse adds no measurable leakage."
    assert v.scores.detected == ("loss-lrt",) and "The lead attack, loss-lrt, has AUC 0.700 [0.680, 0.720]" in v.text
    assert v.beyond.outcome == "no-recourse-leak" and not v.beyond.beyond


def test_verdict_recourse_leaks_beyond_the_scores_by_auc_or_low_fpr():
    score = _ci_attack("loss-lrt", "score", 0.60, (0.575, 0.625), 0.02, (0.012, 0.031))
    beyond = _ci_attack("cfd-lrt", "distance", 0.68, (0.655, 0.705), 0.03, (0.02, 0.043), _versus(0.08, 0.05, 0.11))
    v = make_verdict(_attacks(score, beyond))
    assert v.beyond.outcome == "beyond" and v.beyond.by == "auc" and v.beyond.attack == "cfd-lrt"
    assert v.headline == "Recourse leaks membership beyond what the model's scores already leak."
    assert (
        "cfd-lrt's AUC exceeds that of loss-lrt, the lead score attack, the first that ran of a fixed order chosen "
        "before any score was seen, by 0.080 [0.050, 0.110]" in v.text
    )
    # The same AUCs but a paired interval through 0: the low-FPR rule decides (TPR interval above the scores').
    low = _ci_attack("cfd-lrt", "distance", 0.61, (0.585, 0.635), 0.09, (0.073, 0.11), _versus(0.01, -0.01, 0.03))
    v = make_verdict(_attacks(score, low))
    assert v.beyond.outcome == "beyond" and v.beyond.by == "tpr" and v.beyond.versus == "loss-lrt"
    assert "at FPR ≤ 1%, cfd-lrt identifies 9% [7.3%, 11%] of members" in v.text


def test_verdict_recourse_leaks_but_not_beyond_the_scores():
    score = _ci_attack("loss-lrt", "score", 0.69, (0.665, 0.715), 0.017, (0.01, 0.027))
    dist = _ci_attack("cfd-lrt", "distance", 0.687, (0.66, 0.71), 0.039, (0.024, 0.061), _versus(-0.003, -0.016, 0.01))
    v = make_verdict(_attacks(score, dist))
    assert v.beyond.outcome == "not-beyond" and v.recourse.leaks and v.scores.leaks
    assert v.headline == "Recourse leaks membership, but not measurably more than the model's own scores."
    assert "beats that score attack by at most 0.010 AUC" in v.beyond.text
    # Without a score attack the question cannot be answered, and the verdict says so.
    alone = make_verdict(_attacks(dist))
    assert alone.beyond.outcome == "no-score-attack" and "no attack read the model's scores" in alone.text


def test_verdict_tpr_at_low_fpr_alone_detects_leakage():
    # AUC inside chance, but the TPR interval at 1% FPR lies above the threshold's FPR interval
    a = _ci_attack("cfd-lrt", "distance", 0.51, (0.485, 0.535), 0.05, (0.037, 0.066))
    s = assess_attack(a)
    assert s.auc_detected is False and s.tpr_detected is True and s.significant
    assert make_verdict(_attacks(a)).recourse.leaks


def test_schema_1_metrics_json_still_reads_and_gets_signals_from_the_registry(default_run, tmp_path):
    result, _ = default_run
    d = result.to_dict()
    assert d["schema_version"] == 2 and d["attacks"]["cfd"]["signal"] == "distance"
    assert set(d["attacks"]["cfd"]["versus_scores"]) >= {"attack", "auc_difference", "ci_low", "ci_high"}
    back = AuditResult.from_dict(json.loads(json.dumps(d)))
    for name, a in result.attacks.items():
        fields = ("signal", "auc_ci", "tpr_at_fpr_ci", "achieved_fpr_ci", "ci_level", "n_bootstrap", "versus_scores")
        assert [getattr(back.attacks[name], f) for f in fields] == [getattr(a, f) for f in fields]
    assert verdict_of(back) == verdict_of(result)
    old = json.loads(json.dumps(d))
    old["schema_version"] = 1
    for a in old["attacks"].values():
        for k in ("signal", "auc_ci", "tpr_at_fpr_ci", "achieved_fpr_ci", "ci_level", "n_bootstrap", "versus_scores"):
            a.pop(k, None)
    v1 = AuditResult.from_dict(old)
    assert v1.attacks["cfd"].signal == "" and math.isnan(v1.attacks["cfd"].auc_ci[0])
    assert v1.attacks["cfd"].conventions == result.attacks["cfd"].conventions  # the new keys are not conventions
    v = verdict_of(v1)
    assert v.assessments["loss-lrt"].signal == "score" and v.assessments["random"].is_control
    assert v.beyond.outcome in ("no-recourse-leak", "unknown", "no-recourse-attack")
    _render(v1, tmp_path)  # an old file still renders


def test_verdict_says_first_how_little_recourse_was_given(default_run, tmp_path):
    """A method that answered few targets validly (PrivRecourse whose every node the model accepts has no start
    node, Pentyala et al.'s Algorithm 2): the headline, the recourse finding and the explanation say how much
    was answered before any "no measurable leakage"; a method that answered most targets is stated as before."""
    result, _ = default_run
    plain = verdict_of(result)
    assert result.recourse.validity >= 0.5 and "answered only" not in plain.headline
    few = dataclasses.replace(
        result, recourse=dataclasses.replace(result.recourse, validity=0.0, n_invalid=result.recourse.n)
    )
    v = verdict_of(few)
    assert v.headline.endswith("(recourse answered only 0% of the targets).")
    assert v.recourse.text.startswith("Recourse (") and "answered only 0% of the" in v.recourse.text
    # the explanation holds the new finding where it held the old one, and nothing else changes (the HTML shows
    # the findings once, then the explanation's other sentences)
    assert v.explanation == tuple(v.recourse.text if p == plain.recourse.text else p for p in plain.explanation)
    assert v.recourse.text.endswith(plain.recourse.text) and v.level == plain.level
    page = _render(few, tmp_path)
    assert page.count("with a counterfactual the model accepts: where it gives") == 1  # the finding, once
    assert "(recourse answered only 0% of the targets)." in page  # and the headline
    assert v.few_answers and not plain.few_answers
    assert '<div class="verdict noleak">' not in page and '<div class="verdict noleak">' in _render(
        result, tmp_path / "p"
    )
