"""Issue 29 item 5: the audit's HTML shows the empirical bound beside the claim, with the method named.

``audit --dp-audit`` audits the defense's own mechanism at the audit's epsilon
(:func:`recourse_privacy.dp_audit.defense_audit.audit_defense`) and the report renders the typed
result (:mod:`recourse_privacy.report.dp_audit`). Plain Laplace Recourse (``--defense laplace``) is
refuted at its claim by construction of the canary (the move's direction reveals the weight the
canary pins; docs/dp-audit.md), so its verdict must say so.
"""

from __future__ import annotations

import html
import json

import pytest
from typer.testing import CliRunner

from recourse_privacy.audit import AuditConfig, AuditResult, run_audit
from recourse_privacy.cli import app
from recourse_privacy.dp_audit.bounds import max_certifiable_epsilon
from recourse_privacy.dp_audit.defense_audit import DEFENSE_AUDITS, audit_defense, check_auditable, trials_for
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.report import write_html_report
from recourse_privacy.report.dp_audit import dp_audit_html
from recourse_privacy.report.outputs import write_outputs

SMALL = {"n_features": 20, "n_members": 200, "shadow_models": 2}


@pytest.fixture(scope="module")
def laplace_evidence():
    return audit_defense("laplace", "logistic", 1.0, seed=0)


def test_every_dp_defense_names_its_mechanism_and_bad_input_is_refused():
    assert check_auditable("dpm", "logistic") == "trained-dpm-flip"  # the default model, regularised
    # the model as run: the regularised DP logistic regression is audited as itself, C as given as itself (each by
    # the label flip, a replaced row: the test with power; docs/dp-audit.md)
    assert check_auditable("dpm", "logistic", 1.0, {"regularize_for_budget": True}) == "trained-dpm-flip"
    assert check_auditable("dpm", "logistic", 1.0, {"regularize_for_budget": False}) == "trained-dpm-flip-as-given"
    assert check_auditable("dpm", "mlp") == "trained-dpsgd"
    assert check_auditable("laplace", "logistic") == "trained-lr"
    assert check_auditable("dpm-laplace", "logistic") == "trained-dpm-lr"
    with pytest.raises(InvalidInputError, match="--defense"):
        check_auditable("none", "logistic")
    with pytest.raises(InvalidInputError, match="--model"):
        check_auditable("laplace", "mlp")
    assert set(DEFENSE_AUDITS) == {"dpm", "laplace", "dpm-laplace"}


def test_runs_grow_with_the_claim_until_a_bound_above_it_is_possible():
    spec = DEFENSE_AUDITS["dpm"]
    for eps in (0.5, 2.0, 5.0):
        n = trials_for(spec, eps)
        assert n >= spec.n_trials
        assert max_certifiable_epsilon(n // 2, 0.0, 0.025) > eps  # a perfect test could refute the claim
        assert n == spec.n_trials or max_certifiable_epsilon(n // 4, 0.0, 0.025) <= eps  # and no more runs
    with pytest.raises(InvalidInputError, match="--epsilon"):
        check_auditable("dpm", "logistic", 9.0)


def test_evidence_of_plain_laplace_recourse_refutes_its_claim(laplace_evidence):
    ev = laplace_evidence
    assert ev.mechanism == "trained-lr" and ev.claimed_epsilon == 1.0
    assert [b.method for b in ev.bounds] == ["clopper_pearson", "one_run", "one_run_fdp"]
    assert ev.violates_claim and ev.verdict.startswith("VIOLATES")
    assert ev.strongest.epsilon_lower_bound > ev.claimed_epsilon
    assert all(b.alpha == pytest.approx(ev.alpha / 2) for b in ev.bounds)


def _check_section(section: str, evidence) -> None:
    assert f"Claimed &epsilon; = <strong>{evidence.claimed_epsilon:.4g}</strong>" in section
    for b in evidence.bounds:
        assert html.escape(b.name) in section
        shown = "n/a" if b.epsilon_lower_bound is None else f"{b.epsilon_lower_bound:.3f}"
        assert f"<strong>{shown}</strong>" in section
    for name in ("Clopper-Pearson", "Steinke", "Mahloujifar"):
        assert name in section
    assert html.escape(evidence.verdict) in section
    if evidence.control is None:
        assert "Power not measured" in section and "Positive control" not in section
    else:
        assert f"<code>{evidence.control.mechanism}</code>" in section and "Power not measured" not in section


def test_section_shows_the_claim_beside_each_bound_with_the_method(laplace_evidence):
    _check_section(dp_audit_html(laplace_evidence), laplace_evidence)


@pytest.mark.slow
def test_html_shows_the_claim_beside_the_bound_with_the_method(laplace_evidence, tmp_path):
    result = run_audit(
        AuditConfig(**SMALL, defense="laplace", epsilon=1.0, normalize_rows=True, distance="l2"), tmp_path
    )
    without = write_html_report(result, tmp_path / "a").read_text(encoding="utf-8")
    assert "Empirical audit of the claim" not in without
    images = {"ROC": result.files["roc"]}
    text = write_html_report(result, tmp_path / "b", images=images, dp_audit=laplace_evidence).read_text(
        encoding="utf-8"
    )
    dp = text[text.index("<h2>Differential privacy</h2>") :]
    _check_section(dp[dp.index("Empirical audit of the claim") :], laplace_evidence)
    assert text.count("<img") == len(images)


def test_metrics_json_holds_the_evidence_the_report_shows(laplace_evidence, tmp_path):
    """A script reading metrics.json sees the empirical bounds, the claim and the verdict (and no block without)."""
    result = run_audit(
        AuditConfig(**SMALL, defense="laplace", epsilon=1.0, normalize_rows=True, distance="l2"), tmp_path / "run"
    )
    write_outputs(result, tmp_path / "with", dp_audit=laplace_evidence)
    write_outputs(result, tmp_path / "without")
    assert "dp_audit" not in json.loads((tmp_path / "without" / "metrics.json").read_text())
    block = json.loads((tmp_path / "with" / "metrics.json").read_text())["dp_audit"]
    ev = laplace_evidence
    assert block["mechanism"] == ev.mechanism and block["claimed_epsilon"] == ev.claimed_epsilon
    assert block["violates_claim"] is ev.violates_claim is True and block["verdict"] == ev.verdict
    by_method = {b["method"]: b for b in block["bounds"]}
    assert set(by_method) == {b.method for b in ev.bounds} and block["decided_by"] == list(ev.decided_by)
    for b in ev.bounds:
        assert by_method[b.method]["epsilon_lower_bound"] == b.epsilon_lower_bound
    # the record itself still reads back (the block is beside it, not inside a typed field)
    assert AuditResult.from_dict(json.loads((tmp_path / "with" / "metrics.json").read_text())).n_members > 0


def test_section_is_empty_without_evidence():
    assert dp_audit_html(None) == ""


def test_cli_refuses_dp_audit_without_a_dp_defense_before_any_work(tmp_path):
    res = CliRunner().invoke(app, ["audit", "--dp-audit", "--out", str(tmp_path / "o"), "--shadow-models", "2"])
    assert res.exit_code == 2
    assert "--dp-audit" in res.output and "--defense" in res.output
    assert not (tmp_path / "o" / "report.html").exists()


def test_cli_audits_the_dp_model_as_run_with_its_model_params(tmp_path):
    """``--defense dpm --model-param regularize_for_budget=false --dp-audit``: the model with C as given is the one
    audited (trained-dpm-flip-as-given), not the default's regularised one."""
    out = tmp_path / "o"
    args = ["audit", "--defense", "dpm", "--epsilon", "2", "--normalize-rows", "--model-param",
            "regularize_for_budget=false", "--dp-audit", "--n-members", "100", "--shadow-models", "2", "--cache-dir",
            "off", "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "trained-dpm-flip-as-given" in (out / "report.html").read_text()  # the report names the mechanism
    block = json.loads((out / "metrics.json").read_text())["dp_audit"]  # and so does the JSON a script reads
    assert block["mechanism"] == "trained-dpm-flip-as-given" and block["claimed_epsilon"] == 2.0
    # its positive control: the same test on the model run at 10 x epsilon, caught at the fast setting
    assert block["control"]["mechanism"] == "trained-dpm-flip-as-given-broken" and block["control"]["caught"] is True
    assert block["control"]["n_trials"] == 200 and block["verdict"].startswith("consistent")


def test_a_private_recourse_methods_claim_is_the_one_audited_and_runs_without_one_are_refused():
    """Without a DP defense, ``--dp-audit`` audits the private recourse method's own release at its own claim: the
    DP k-means nodes of PrivRecourse, DPC's autoencoder and noisy prototypes (total epsilon + epsilon_prototypes).
    A run that makes no claim (bounds read from the data, DPC as published) or one no registered experiment
    reproduces is refused with the reason, before any work."""
    from recourse_privacy.dp_audit.recourse_audit import recourse_claim

    def mechanism(recourse, **params):
        return check_auditable("none", "logistic", recourse=recourse, recourse_params=params)

    assert mechanism("privrecourse", epsilon=0.5) == "trained-privrecourse-empty"
    assert recourse_claim("privrecourse", {"epsilon": 0.5}).epsilon == 0.5
    assert mechanism("dpc", mode="hardened", epsilon=0.5) == "trained-dpc"
    assert recourse_claim("dpc", {"mode": "hardened", "epsilon": 0.5}).epsilon == 1.0  # the two halves, summed
    # the Laplace baseline's claim is for neighbours that replace a record: its experiment replaces one
    assert mechanism("privrecourse-laplace", epsilon=2.0) == "trained-privrecourse-laplace"
    assert recourse_claim("privrecourse-laplace", {"epsilon": 2.0}).n_trials == 5000
    for recourse, params, reason in [
        ("gs", {}, "claim no epsilon"),
        ("privrecourse", {"bounds": "data"}, "no DP claim"),
        ("privrecourse-laplace", {"bounds": "data"}, "no DP claim"),
        ("privrecourse", {"clustering": "convergent"}, "no registered"),
        ("dpc", {}, "faithful"),
        ("dpc", {"mode": "hardened", "epsilon": 1.0, "epsilon_prototypes": 0.5}, "splits the budget equally"),
        ("privrecourse-mst", {"epsilon": 2.0}, "audit-dp --mechanism trained-mst-rows --epsilon 2"),
    ]:
        with pytest.raises(InvalidInputError, match=reason) as info:
            mechanism(recourse, **params)
        assert "--dp-audit" in str(info.value) and "--recourse" in str(info.value)
    with pytest.raises(InvalidInputError, match="too large to refute"):
        mechanism("privrecourse", epsilon=30.0)


def test_cli_audits_privrecourse_nodes_at_the_methods_own_epsilon(tmp_path):
    out = tmp_path / "o"
    args = ["audit", "--recourse", "privrecourse", "--recourse-param", "epsilon=0.5", "--recourse-param",
            "n_clusters=20", "--dp-audit", "--n-features", "10", "--n-members", "100", "--shadow-models", "2",
            "--attacks", "cfd", "--cache-dir", "off", "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "empirical audit of trained-privrecourse-empty at claim 0.5" in res.output
    block = json.loads((out / "metrics.json").read_text())["dp_audit"]
    assert block["mechanism"] == "trained-privrecourse-empty" and block["claimed_epsilon"] == 0.5
    assert block["defense"] == "privrecourse" and block["subject"] == "Recourse method"
    assert not block["violates_claim"]  # the honest release at its claim (its bounds are 0.00 in docs/dp-audit.md)
    # the positive control: the same test catches diffprivlib's KMeans as it was at this claim and these runs
    control = block["control"]
    assert control["mechanism"] == "trained-privrecourse-empty-broken" and control["caught"] is True
    assert control["epsilon_lower_bound"] > 0.5 and control["n_trials"] == 100  # caught at the fast setting
    assert (
        block["verdict"].startswith("consistent") and "positive control trained-privrecourse-empty-broken" in res.output
    )
    page = (out / "report.html").read_text()
    assert "Recourse method <strong>privrecourse</strong>" in page
    assert page.index("<h2>Differential privacy</h2>") < page.index("Recourse method <strong>")  # under its heading


def test_a_positive_control_the_test_misses_raises_the_runs_then_makes_the_verdict_inconclusive(monkeypatch):
    """The known-broken twin is audited first, its runs doubled until the test catches it; when even the last
    doubling misses it, a bound below the claim is no evidence, and the verdict says INCONCLUSIVE, not consistent.

    The control here is the honest release itself (which no test can catch at its claim), so the doubling must run
    to its end: 100 -> 200 runs per neighbour, and the audited release then runs at 200 too.
    """
    from recourse_privacy.dp_audit.defense_audit import POSITIVE_CONTROLS, PositiveControlSpec, audit_recourse

    honest = PositiveControlSpec("trained-privrecourse-empty", doublings=1)
    monkeypatch.setitem(POSITIVE_CONTROLS, "trained-privrecourse-empty", honest)
    missed = audit_recourse("privrecourse", {"epsilon": 1.0}, seed=0)
    assert not missed.control.caught and missed.control.n_trials == 200
    assert "200 runs per neighbour" in missed.bounds[0].runs  # the audited release ran at the control's runs
    assert not missed.violates_claim and missed.verdict.startswith("INCONCLUSIVE")
    assert "no evidence of privacy" in dp_audit_html(missed)


def test_every_positive_control_is_a_registered_broken_twin_of_a_mechanism_the_audit_runs():
    from recourse_privacy.dp_audit.defense_audit import POSITIVE_CONTROLS
    from recourse_privacy.dp_audit.experiments import MECHANISMS

    audited = {
        "trained-privrecourse-empty",
        "trained-dpc",
        "trained-privrecourse-laplace",
        check_auditable("dpm", "mlp"),
        check_auditable("dpm-laplace", "logistic"),
        *(check_auditable("dpm", "logistic", 1.0, {"regularize_for_budget": r}) for r in (True, False)),
        "trained-dpm-logistic-budget",  # the add-one release tests audit-dp runs
        "trained-dpm-logistic",
    }
    assert set(POSITIVE_CONTROLS) == audited  # every mechanism --dp-audit runs but trained-lr (refuted by design)
    for name, spec in POSITIVE_CONTROLS.items():
        if name == "trained-dpm-lr":  # its twin breaks the post-processing: Laplace Recourse over a non-private model
            assert spec.twin == "trained-lr" and "non-private" in spec.broken
            continue
        assert spec.twin == f"{name}-broken" and MECHANISMS.get(spec.twin).description.startswith("BROKEN on purpose")
        if name.startswith("trained-dpm"):  # the short text says what the registered twin runs
            from recourse_privacy.dp_audit.trained import BROKEN_EPSILON_FACTOR

            shown = spec.broken or MECHANISMS.get(spec.twin).description  # what the control reports
            assert f"run at {BROKEN_EPSILON_FACTOR:g} x epsilon" in shown
            assert f"run at {BROKEN_EPSILON_FACTOR:g} x epsilon" in MECHANISMS.get(spec.twin).description


def test_laplace_recourse_over_the_dp_model_is_audited_as_a_release_and_its_model_as_a_part(tmp_path):
    """``--defense dpm-laplace``: the release test has no power against the model run at 10 x epsilon (the answer's
    own noise hides it), so the claim's model half is audited as a part by the label flip, each with a control that
    the test catches; the verdict is the worst of the two, and the report, the JSON and the CLI show both."""
    from dataclasses import replace

    ev = audit_defense("dpm-laplace", "logistic", 1.0, seed=0)
    assert ev.mechanism == "trained-dpm-lr" and ev.control.mechanism == "trained-lr" and ev.control.caught
    (part,) = ev.parts
    assert part.mechanism == "trained-dpm-flip" and part.role.startswith("the DP model the release post-processes")
    assert part.control.mechanism == "trained-dpm-flip-broken" and part.control.caught
    assert ev.verdict.startswith("consistent") and part.verdict.startswith("consistent")
    page = dp_audit_html(ev)
    assert "Also audited: <code>trained-dpm-flip</code>" in page and "1 more below" in page
    assert page.count("Positive control:") == 2
    block = ev.to_dict()
    assert block["parts"][0]["mechanism"] == "trained-dpm-flip" and block["parts"][0]["verdict"] == part.verdict
    json.dumps(block)  # metrics.json's block is plain JSON
    # the verdict is the worst of the parts: a part that refutes the claim, or whose control the test missed
    refuting = replace(part.bounds[0], epsilon_lower_bound=5.0)
    worse = replace(ev, parts=(replace(part, bounds=(refuting, *part.bounds[1:])),))
    assert worse.violates_claim and worse.verdict == "VIOLATES the claim" and not ev.violates_claim
    blind = replace(ev, parts=(replace(part, control=replace(part.control, caught=False)),))
    assert blind.verdict.startswith("INCONCLUSIVE") and "test of trained-dpm-flip at 200 runs" in blind.verdict

    out = tmp_path / "o"
    args = ["audit", "--defense", "dpm-laplace", "--epsilon", "1", "--normalize-rows", "--dp-audit", "--n-members",
            "100", "--shadow-models", "2", "--cache-dir", "off", "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "also audited, trained-dpm-flip at claim 1" in res.output and res.output.count("positive control") == 2
    saved = json.loads((out / "metrics.json").read_text())["dp_audit"]
    assert saved["verdict"].startswith("consistent") and saved["parts"][0]["control"]["caught"] is True


def test_a_gaussian_design_is_decided_by_the_f_dp_bound_which_reaches_claims_the_many_runs_cannot(monkeypatch):
    """Full-batch DP-SGD is a composition of Gaussian mechanisms in each canary, so its verdict reads the one-run f-DP
    bound (Mahloujifar et al. 2024) beside Clopper-Pearson: at a claim of 6, which 200 runs per neighbour could never
    refute, the runs stay at the fast setting, the twin (noise / 10) is caught by the f-DP bound, and the honest
    DP-SGD is consistent. Every other mechanism keeps the two assumption-free bounds."""
    from recourse_privacy.dp_audit.defense_audit import DECIDING, GAUSSIAN_DESIGNS, deciding_for

    assert set(GAUSSIAN_DESIGNS) == {"trained-dpsgd"}
    assert deciding_for("trained-dpsgd") == deciding_for("trained-dpsgd-broken") == ("clopper_pearson", "one_run_fdp")
    assert deciding_for("trained-dpm-flip") == deciding_for("trained-lr") == DECIDING
    assert max_certifiable_epsilon(100, 0.0, 0.025) < 6.0  # the many runs alone could not refute 6
    with pytest.raises(InvalidInputError, match="--epsilon"):
        check_auditable("dpm", "logistic", 9.0)
    check_auditable("dpm", "mlp", 9.0)  # DP-SGD is not refused there: its f-DP bound may still refute

    ev = audit_defense("dpm", "mlp", 6.0, seed=0)
    assert ev.decided_by == ("clopper_pearson", "one_run_fdp") and "200 runs per neighbour" in ev.bounds[0].runs
    assert "can certify at most 3.11" in ev.bounds[0].runs  # the many runs say they cannot refute this claim
    c = ev.control
    assert c.caught and c.method.startswith("one-run f-DP") and c.epsilon_lower_bound > 6.0 and c.n_trials == 200
    assert ev.verdict.startswith("consistent") and ev.strongest.epsilon_lower_bound < 6.0
    fdp = next(b for b in ev.bounds if b.method == "one_run_fdp")
    assert "holds for this design: full-batch DP-SGD" in fdp.assumptions
    page = dp_audit_html(ev)
    assert "this design's trade-off curve is Gaussian" in page and "without an assumption" not in page
