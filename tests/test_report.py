"""The report: the verdict's statistics on crafted attacks, the HTML of real audits, the histogram."""

from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace

import numpy as np
import pytest

from recourse_privacy.audit import AttackResult, AuditConfig, AuditResult, run_audit
from recourse_privacy.metrics import (
    auc_null_halfwidth,
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
    i_attacks = text.index("<h2>Attacks</h2>")
    assert i_verdict < i_roc < i_attacks
    assert text.index("<h2>") == i_attacks  # no section before the verdict and ROC
    verdict = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.DOTALL).group(1)
    v = verdict_of(result)
    assert v.headline in verdict and v.attack in verdict
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
    assert "Pawelczyk et al. 2023" not in text.lower() and "Huang et al. 2023" not in text.lower()
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
    for name in ATTACK_NAMES:
        assert f"<td>{name}</td>" in dp
    assert "direction (released move direction)" in dp  # Laplace Recourse's direction attack
    assert "What is private." in dp  # the mechanism's own statement of its guarantee
    assert "Huang et al. 2023" in dp
    assert "1.0000" in dp  # total epsilon over every recourse: the bound is vacuous
    v = verdict_of(result)
    assert v.dp is not None and v.dp.exceeded == ()
    verdict_div = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.DOTALL).group(1)
    tight = np.exp(2.0) / (1 + np.exp(2.0))  # the tight bound at the selected-target epsilon 2 x 1
    assert f"the tight bound {tight:.4f}" in verdict_div and result.dp.verdict.attack in verdict_div
    assert f"{bound:.4f}" in verdict_div  # Pawelczyk et al.'s Theorem 2 beside it
    # The spike of clamped distances is named on the histogram and the report embeds it.
    assert result.dp.clamped_share > 0.05


def test_laplace_report_flags_an_attack_above_the_bound(laplace_run, tmp_path):
    result, _ = laplace_run
    attacks = dict(result.attacks)
    attacks["loss"] = dataclasses.replace(attacks["loss"], balanced_accuracy=0.95)
    text = _render(dataclasses.replace(result, attacks=attacks), tmp_path)
    dp = _section(text, "Differential privacy")
    assert dp.count("above bound") == 1
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


def _attack(name, auc, *, n1=1000, n0=1000, ba=None, tpr01=None):
    keys = ("0.1", "0.01", "0.001")
    t01 = 0.01 + max(auc - 0.5, 0.0) / 4 if tpr01 is None else tpr01
    return AttackResult(
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
    assert v.level == "leak" and v.headline == "Leakage detected."
    assert v.attack == "loss-lrt" and v.auc == pytest.approx(0.7)
    assert v.significant == ("loss-lrt",)
    assert "identifies 6% of members while wrongly flagging 1% of non-members" in v.text
    assert v.controls == ("random",) and "random-guessing control" in v.text


def test_verdict_strongest_attack_is_by_tpr_at_one_percent_fpr():
    v = make_verdict(_attacks(_attack("cfd", 0.8, tpr01=0.02), _attack("cfd-lrt", 0.6, tpr01=0.2)))
    assert v.attack == "cfd-lrt" and v.tpr_at_1pct_fpr == pytest.approx(0.2)
    assert set(v.significant) == {"cfd", "cfd-lrt"}


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
    dp = SimpleNamespace(
        defense="laplace", epsilon_per_query=0.1, epsilon_total=50.0, ba_bound=bound, direction_attack=None
    )
    attacks = _attacks(_attack("loss", 0.9, ba=0.82), _attack("cfd", 0.51, ba=0.52))
    cmp = compare_with_bound(dp, attacks.values())
    assert cmp.bound == pytest.approx(bound) and "per query" in cmp.source
    assert {c.attack: c.status for c in cmp.checks} == {"loss": "above", "cfd": "within"}
    assert cmp.exceeded == ("loss",) and cmp.total_bound == pytest.approx(theorem2_bound(50.0))
    v = make_verdict(attacks, dp)
    assert v.dp == cmp and "loss exceed(s) the DP bound" in v.text


def test_dp_bound_computed_when_missing_and_vacuous_bound():
    dp = SimpleNamespace(defense="dpm", epsilon_per_query=0.1, epsilon_total=None, ba_bound=None)
    cmp = compare_with_bound(dp, [_attack("loss", 0.9, ba=0.82)])
    assert cmp.bound == pytest.approx(theorem2_bound(0.1)) and cmp.source.startswith("computed")
    assert cmp.exceeded == ("loss",)
    vac = compare_with_bound(
        SimpleNamespace(defense="dpm", epsilon_per_query=20.0, epsilon_total=20.0, ba_bound=theorem2_bound(20.0)),
        [_attack("loss", 0.9, ba=0.99)],
    )
    assert vac.vacuous and vac.checks[0].status == "vacuous" and vac.exceeded == ()
    none = compare_with_bound(
        SimpleNamespace(defense="x", epsilon_per_query=None, epsilon_total=None, ba_bound=None), [_attack("loss", 0.9)]
    )
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
