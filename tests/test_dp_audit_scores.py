"""The scores-in auditor (dp_audit.canary_scores) and its bounds (dp_audit.fdp): closed forms, validity
on simulated canaries of known Gaussian DP, the CLI, and the cross-check with jax_privacy's auditor.

Validity: a mechanism of known privacy is simulated, canary scores N(mu, 1) when included and
N(0, 1) when not (each canary included with probability 1/2, as the one-run bounds require); its
true epsilon at delta is that of mu-GDP. A valid 1 - alpha lower bound exceeds it in at most a
fraction alpha of runs, so the number of exceeding runs out of n is at most Binomial(n, alpha); the
tests fail above that distribution's 0.999 quantile (a valid method fails with probability < 1e-3).
"""

from __future__ import annotations

import dataclasses
import json
import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy.stats import binom
from typer.testing import CliRunner

from recourse_privacy.cli import app
from recourse_privacy.dp_audit.bounds import epsilon_lower_bound
from recourse_privacy.dp_audit.canary_scores import METHODS, audit_scores, guess_grid, read_scores_csv
from recourse_privacy.dp_audit.fdp import (
    gdp_delta,
    gdp_epsilon,
    gdp_mu_from_rates,
    gdp_mu_lower_bound,
    one_run_fdp_mu,
    steinke_epsilon,
    steinke_p_value,
)
from recourse_privacy.dp_audit.trained import one_run_bound

ALPHA, DELTA = 0.05, 1e-5


def _separated(n_in: int = 250, n_out: int = 250):
    """Members score 1000 + i, non-members i: perfectly separated."""
    return np.r_[1000.0 + np.arange(n_in), np.arange(float(n_out))], np.r_[np.ones(n_in, int), np.zeros(n_out, int)]


def _write(path, scores, member, header="score,member"):
    path.write_text(header + "\n" + "".join(f"{s},{m}\n" for s, m in zip(scores, member)))
    return path


# ----------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-3, 0.1])
def test_gdp_epsilon_inverts_the_gdp_delta_curve(mu, delta):
    eps = gdp_epsilon(mu, delta)
    if eps == 0:
        assert gdp_delta(mu, 0.0) <= delta
    else:
        assert gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-8)
        assert gdp_delta(mu, eps * 0.99) > delta  # delta(eps) decreases


def test_gdp_epsilon_edges():
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    assert gdp_epsilon(1.0, 0.0) == math.inf  # a Gaussian mechanism is not pure DP
    assert gdp_delta(1.0, 0.0) == pytest.approx(2 * 0.6914624612740131 - 1)  # 2 Phi(1/2) - 1
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.377178, abs=1e-6)


def test_gdp_mu_from_rates():
    assert float(gdp_mu_from_rates(0.5, 0.5)) == 0.0
    assert float(gdp_mu_from_rates(0.6, 0.6)) == 0.0  # clipped: no evidence
    assert float(gdp_mu_from_rates(1.0, 0.0)) == 0.0  # the empty test
    # FPR 0.1587, FNR 0.5 is the trade-off of mu = 1 at the threshold 1 (Phi(-1) = 0.1587)
    assert float(gdp_mu_from_rates(0.15865525393145707, 0.5)) == pytest.approx(1.0, abs=1e-12)
    # the bound uses the Clopper-Pearson upper ends, as epsilon_lower_bound does
    h = 1 - (ALPHA / 2) ** (1 / 100)  # FP = FN = 0 of 100: the upper end solves (1 - h)^100 = alpha / 2
    assert gdp_mu_lower_bound(0, 100, 0, 100) == pytest.approx(2 * NormalDist().inv_cdf(1 - h), abs=1e-9)


def test_steinke_at_delta_0_is_the_existing_one_run_bound():
    for r, v in [(500, 500), (500, 300), (100, 80), (40, 20)]:
        assert steinke_epsilon(1000, r, v, alpha=ALPHA, delta=0.0) == one_run_bound(r, v, ALPHA)
    # all r guesses right: p_eps^r = alpha, eps = logit(alpha^(1/r)) = 5.1144 at r = 500
    p = ALPHA ** (1 / 500)
    assert steinke_epsilon(500, 500, 500, alpha=ALPHA) == pytest.approx(math.log(p / (1 - p)), abs=1e-8)


def test_steinke_p_value_with_delta():
    # the delta term only adds; it vanishes at delta 0; the p-value grows with eps
    base = steinke_p_value(1.0, 1000, 200, 150)
    assert steinke_p_value(1.0, 1000, 200, 150, delta=1e-4) > base
    assert [steinke_p_value(e, 1000, 200, 150, 1e-5) for e in (0.5, 1, 2)] == sorted(
        steinke_p_value(e, 1000, 200, 150, 1e-5) for e in (0.5, 1, 2)
    )
    assert steinke_epsilon(1000, 200, 150, delta=1e-3) < steinke_epsilon(1000, 200, 150, delta=0.0)


def test_one_run_fdp_mu_properties():
    assert one_run_fdp_mu(1000, 200, 100) == 0.0  # chance
    mus = [one_run_fdp_mu(1000, 200, c) for c in (120, 150, 180, 200)]
    assert mus == sorted(mus) and mus[0] >= 0 and mus[-1] > 1
    assert one_run_fdp_mu(1000, 200, 180, alpha=0.01) < one_run_fdp_mu(1000, 200, 180, alpha=0.1)
    # f-DP reads the whole trade-off curve: tighter than Steinke's at the same guesses (Mahloujifar et al.)
    assert gdp_epsilon(one_run_fdp_mu(1000, 200, 180), DELTA) > steinke_epsilon(1000, 200, 180, delta=DELTA)


def test_guess_grid():
    assert guess_grid(500) == (250, 125, 62, 31, 15, 7, 3, 1)
    assert guess_grid(3) == (1,)


# ----------------------------------------------------------------------------- the auditor


def test_perfectly_separated_250_in_250_out():
    s, m = _separated()
    audit = audit_scores(s, m, guesses=250, delta=0.0, alpha=ALPHA)
    assert [b.method for b in audit.bounds] == list(METHODS)
    one = audit["one_run"]
    assert one.details["n_correct"] == one.details["n_guesses"] == 500
    assert one.epsilon_lower_bound == pytest.approx(5.1144, abs=1e-4)  # the figure
    assert audit["one_run_fdp"].epsilon_lower_bound is None and audit["one_run_fdp"].mu_lower_bound > 1
    assert audit["gdp"].epsilon_lower_bound is None and "delta = 0" in audit["gdp"].details["note"]
    assert (
        audit["clopper_pearson"].details["false_positives"] == audit["clopper_pearson"].details["false_negatives"] == 0
    )
    for b in audit.bounds:
        assert b.confidence == 1 - ALPHA and b.assumptions and b.formula and b.reference
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.epsilon_lower_bound = 0.0
    d = json.loads(json.dumps(audit.to_dict()))
    assert set(d["methods"]) == set(METHODS) and d["methods"]["one_run"]["confidence"] == 0.95
    # at delta > 0 the GDP methods convert their mu, and the default K pays a Bonferroni factor of 8
    audit = audit_scores(s, m, delta=DELTA)
    assert audit["one_run"].details["alpha_per_K"] == pytest.approx(ALPHA / 8)
    assert audit["one_run"].epsilon_lower_bound < 5.1144
    assert audit["one_run_fdp"].epsilon_lower_bound == pytest.approx(
        gdp_epsilon(audit["one_run_fdp"].mu_lower_bound, DELTA)
    )


def test_tied_scores_are_broken_at_random_not_by_row_order():
    # all scores equal and the members listed first: a tie-break by row order would guess perfectly
    m = np.r_[np.ones(200, int), np.zeros(200, int)]
    audit = audit_scores(np.zeros(400), m, guesses=100, delta=DELTA)
    assert all(b.epsilon_lower_bound == 0 for b in audit.bounds)
    assert 60 < audit["one_run"].details["n_correct"] < 140


def test_reversed_scores_are_found_by_the_split_methods():
    s, m = _separated()
    audit = audit_scores(-s, m, delta=DELTA)
    assert audit["clopper_pearson"].details["side"] == "<=" and audit["clopper_pearson"].epsilon_lower_bound > 3
    assert audit["one_run"].epsilon_lower_bound == 0  # higher = member is the one-run convention


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"member": [0, 1, 2, 0, 1]}, "member must be 0 or 1"),
        ({"member": [0, 1, 1, 1, 1]}, "too few canaries"),
        ({"scores": [0, 1, np.nan, 0, 1]}, "NaN"),
        ({"scores": [0, 1]}, "score has 2 values but member has 5"),
        ({"guesses": 3}, "guesses .--guesses. 3: .* need 6 canaries"),
        ({"guesses": 0}, "guesses .--guesses. must be an integer >= 1"),
        ({"delta": 1.0}, "delta .--delta. must be a number in"),
        ({"alpha": 0.0}, "alpha must lie"),
    ],
)
def test_audit_scores_rejects_bad_input(kwargs, match):
    args = {"scores": [0.1, 0.2, 0.3, 0.4, 0.5], "member": [0, 0, 1, 1, 0], **kwargs}
    with pytest.raises(ValueError, match=match):
        audit_scores(args.pop("scores"), args.pop("member"), **args)


@pytest.mark.parametrize(
    "text,match",
    [
        ("", "empty"),
        ("score,label\n1,0\n", "no column member"),
        ("value,label\n1,0\n", "no column score or member"),
        ("score,member\n1,0\nabc,1\n", "column score, line 3: 'abc' is not a number"),
        ("score,member\n1,0\ninf,1\n", "column score, line 3: 'inf' is not a finite number"),
        ("score,member\n1,0\n2,yes\n", "column member, line 3: 'yes' must be 0 or 1"),
        ("score,member\n1,0\n2\n", "line 3: 1 fields"),
    ],
)
def test_read_scores_csv_errors_name_column_and_line(tmp_path, text, match):
    f = tmp_path / "s.csv"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_scores_csv(f)


def test_read_scores_csv_reads_extra_columns_and_float_labels(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text("id, member ,score\na,1.0,0.5\nb,0,-2\n\n")
    s, m = read_scores_csv(f)
    assert s.tolist() == [0.5, -2.0] and m.tolist() == [1, 0]


# ----------------------------------------------------------------------------- the CLI


def test_cli_scores_writes_one_entry_per_method(tmp_path):
    f = _write(tmp_path / "sep.csv", *_separated())
    out = tmp_path / "a.json"
    res = CliRunner().invoke(
        app, ["audit-dp", "--scores", str(f), "--guesses", "250", "--delta", "0", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "5.1144" in res.output and "500 of 500" in res.output
    d = json.loads(out.read_text())
    assert list(d["methods"]) == list(METHODS)
    assert d["methods"]["one_run"]["epsilon_lower_bound"] == pytest.approx(5.1144, abs=1e-4)
    assert d["guesses"] == 250 and d["delta"] == 0.0


@pytest.mark.parametrize(
    "args,match",
    [
        (["--guesses", "0"], "--guesses"),
        (["--guesses", "251"], "--guesses"),
        (["--delta", "1.5"], "--delta"),
        (["--delta", "-1"], "--delta"),
        (["--alpha", "2"], "alpha"),
        (["--one-run", "100"], "--one-run and --param apply"),
    ],
)
def test_cli_scores_bad_options_exit_2(tmp_path, args, match):
    f = _write(tmp_path / "sep.csv", *_separated())
    res = CliRunner().invoke(app, ["audit-dp", "--scores", str(f), *args])
    assert res.exit_code == 2 and match in res.output, res.output


def test_cli_scores_bad_files_exit_2(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["audit-dp", "--scores", str(tmp_path / "nope.csv")])
    assert res.exit_code == 2 and "--scores" in res.output and "no such file" in res.output
    f = _write(tmp_path / "bad.csv", [1, 2, 3], [0, 1, 1], header="score,included")
    res = runner.invoke(app, ["audit-dp", "--scores", str(f)])
    assert res.exit_code == 2 and "no column member" in res.output
    f = _write(tmp_path / "few.csv", [1, 2, 3], [0, 1, 1])
    res = runner.invoke(app, ["audit-dp", "--scores", str(f)])
    assert res.exit_code == 2 and "too few canaries" in res.output
    res = runner.invoke(app, ["audit-dp", "--mechanism", "laplace-score", "--delta", "1e-5"])
    assert res.exit_code == 2 and "--guesses and --delta apply to --scores" in res.output


# ----------------------------------------------------------------------------- validity on simulated canaries


def _simulate(mu: float, m: int, rng: np.random.Generator):
    member = (rng.random(m) < 0.5).astype(int)
    return rng.normal(mu * member, 1.0), member


def exceed_counts(mus, n_runs: int, m: int, seed: int = 0, *, jax: bool = False) -> dict:
    """{(method, mu): runs whose bound exceeds mu-GDP's eps at DELTA}, ours (and jax_privacy's)."""
    rng = np.random.default_rng(seed)
    counts = {}
    for mu in mus:
        truth = gdp_epsilon(mu, DELTA)
        for _ in range(n_runs):
            s, member = _simulate(mu, m, rng)
            audit = audit_scores(s, member, delta=DELTA, alpha=ALPHA, random_state=int(rng.integers(2**31)))
            found = {b.method: b.epsilon_lower_bound for b in audit.bounds}
            if jax:
                from jax_privacy.auditing import CanaryScoreAuditor

                a = CanaryScoreAuditor(s[member == 1], s[member == 0])
                found["jax:clopper_pearson"] = a.epsilon_clopper_pearson(ALPHA, DELTA)
                found["jax:one_run"] = a.epsilon_one_run(ALPHA, DELTA)
                found["jax:one_run_fdp"] = a.epsilon_one_run_fdp(ALPHA, DELTA)
                found["jax:gdp"] = a.epsilon_from_gdp(ALPHA, DELTA)
            for method, eps in found.items():
                counts[method, mu] = counts.get((method, mu), 0) + int(eps > truth + 1e-9)
    return counts


def _check_rates(counts: dict, n_runs: int, methods) -> None:
    limit = binom.ppf(0.999, n_runs, ALPHA)
    bad = {k: v for k, v in counts.items() if k[0] in methods and v > limit}
    assert not bad, f"exceed counts above {limit:.0f} of {n_runs}: {bad}"


def test_bounds_are_valid_on_simulated_gaussian_canaries():
    # 4 x 40 runs of 200 canaries, about 4 s; the large version is test_exceed_rates_large (slow)
    counts = exceed_counts((0.0, 0.5, 1.0, 2.0), 40, 200, seed=1)
    _check_rates(counts, 40, METHODS)
    pooled = {meth: sum(v for (k, _), v in counts.items() if k == meth) for meth in METHODS}
    assert max(pooled.values()) <= binom.ppf(0.999, 160, ALPHA), pooled


@pytest.mark.slow
def test_exceed_rates_large(capsys):
    mus, n, m = (0.0, 0.5, 1.0, 2.0, 3.0), 200, 300
    counts = exceed_counts(mus, n, m, seed=2)
    with capsys.disabled():
        print(f"\nexceed rates, {n} runs of {m} canaries per mu, alpha {ALPHA}, delta {DELTA}:")
        for meth in METHODS:
            print(f"  {meth:18s}" + "  ".join(f"mu={mu:g}: {counts[meth, mu] / n:.3f}" for mu in mus))
    _check_rates(counts, n, METHODS)


# ----------------------------------------------------------------------------- cross-check with jax_privacy


def _jax():
    return pytest.importorskip(
        "jax_privacy.auditing", reason="jax_privacy not importable: pip install -c constraints.txt '.[crosscheck]'"
    )


def _cases(seed: int = 0):
    rng = np.random.default_rng(seed)
    for mu, n in ((0.5, 400), (1.0, 300), (2.0, 200), (3.0, 500)):
        s, member = _simulate(mu, n, rng)
        for q in (0.5, 0.8, 0.95):
            yield s, member, float(np.quantile(s, q))


def agreement(delta: float = DELTA) -> dict:
    """Max |ours - jax_privacy's| per shared method on the same score arrays and the same test."""
    auditing = _jax()
    diffs = {"clopper_pearson": 0.0, "one_run": 0.0, "one_run_fdp": 0.0, "gdp": 0.0}
    for s, member, t in _cases():
        a = auditing.CanaryScoreAuditor(s[member == 1], s[member == 0])
        fixed = auditing.Explicit(t)
        n1, n0 = int(member.sum()), int((1 - member).sum())
        fn, fp = int(np.sum(s[member == 1] < t)), int(np.sum(s[member == 0] >= t))
        ours = epsilon_lower_bound(fp, n0, fn, n1, delta=delta, alpha=ALPHA)
        theirs = a.epsilon_clopper_pearson(ALPHA, delta, one_sided=False, threshold_strategy=fixed)
        diffs["clopper_pearson"] = max(diffs["clopper_pearson"], abs(ours - theirs))
        # their one-run guesses are one-sided: every score >= t guessed in, no guess out
        r, v = fp + n1 - fn, n1 - fn
        ours = steinke_epsilon(s.size, r, v, alpha=ALPHA, delta=delta)
        diffs["one_run"] = max(diffs["one_run"], abs(ours - a.epsilon_one_run(ALPHA, delta, threshold_strategy=fixed)))
        ours = gdp_epsilon(one_run_fdp_mu(s.size, r, v, alpha=ALPHA), delta)
        theirs = a.epsilon_one_run_fdp(ALPHA, delta, threshold_strategy=fixed)
        diffs["one_run_fdp"] = max(diffs["one_run_fdp"], abs(ours - theirs))
    # GDP: no explicit threshold in jax_privacy; on separated scores its Bonferroni over the 3 vertices
    # of the ROC hull (2 x 3 one-sided bounds) has one informative test, FP = FN = 0
    for n_in, n_out in ((50, 50), (250, 250), (100, 400)):
        s, member = _separated(n_in, n_out)
        a = auditing.CanaryScoreAuditor(s[member == 1], s[member == 0])
        ours = gdp_epsilon(gdp_mu_lower_bound(0, n_out, 0, n_in, alpha=ALPHA / 3), delta)
        diffs["gdp"] = max(diffs["gdp"], abs(ours - a.epsilon_from_gdp(ALPHA, delta)))
    return diffs


def test_agreement_with_jax_privacy(capsys):
    diffs = agreement()
    with capsys.disabled():
        print("\nmax |ours - jax_privacy| on the same scores and test:", {k: f"{v:.1e}" for k, v in diffs.items()})
    assert all(v < 1e-3 for v in diffs.values()), diffs


def test_jax_privacy_gdp_exceeds_the_truth_at_mu_0():
    # documented in docs/dp-audit.md: epsilon_from_gdp takes |Phi^-1(1-FPR_hi) - Phi^-1(FNR_hi)| over the
    # thresholds; a negative value (FPR_hi + FNR_hi > 1: no evidence at all) counts as evidence, so at
    # mu = 0 (true eps 0) it reports eps > 0 in nearly every run; ours reports 0
    auditing = _jax()
    rng = np.random.default_rng(3)
    theirs = ours = 0
    for _ in range(20):
        s, member = _simulate(0.0, 300, rng)
        theirs += auditing.CanaryScoreAuditor(s[member == 1], s[member == 0]).epsilon_from_gdp(ALPHA, DELTA) > 0
        ours += audit_scores(s, member, delta=DELTA)["gdp"].epsilon_lower_bound > 0
    assert theirs >= 15 and ours <= binom.ppf(0.999, 20, ALPHA)


@pytest.mark.slow
def test_exceed_rates_jax_privacy(capsys):
    _jax()
    mus, n, m = (0.0, 0.5, 1.0, 2.0), 100, 200
    counts = exceed_counts(mus, n, m, seed=4, jax=True)
    names = sorted({k for k, _ in counts})
    with capsys.disabled():
        print(f"\nexceed rates, {n} runs of {m} canaries per mu, alpha {ALPHA}, delta {DELTA}:")
        for meth in names:
            print(f"  {meth:22s}" + "  ".join(f"mu={mu:g}: {counts[meth, mu] / n:.3f}" for mu in mus))
    _check_rates(counts, n, METHODS)  # ours must pass; jax_privacy's are reported


def test_cli_one_run_audit_takes_the_neighbours_norm_bound_from_param(tmp_path, monkeypatch):
    """``--one-run`` audits the release at the ``--param`` rows, data_norm and canary the many-run audit has (it ran
    at data_norm 1 whatever was given: where the service's regularised model is the plain one)."""
    import recourse_privacy.dp_audit as dp_audit

    seen = {}
    real = dp_audit.one_run_audit

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(dp_audit, "one_run_audit", spy)
    out = tmp_path / "a.json"
    args = ["audit-dp", "--mechanism", "trained-dpm-logistic-budget", "--epsilon", "2", "--trials", "100",
            "--param", "data_norm=5", "--param", "n_features=10", "--param", "n_rows=150", "--one-run", "200",
            "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert seen["data_norm"] == 5 and seen["n_rows"] == 150 and "n_features" not in seen
    # what it leaves to the many-run audit is said, not dropped silently
    assert "n_features apply to the many-run audit only" in " ".join(res.output.split())
    assert json.loads(out.read_text())["one_run"]["n_canaries"] == 200
