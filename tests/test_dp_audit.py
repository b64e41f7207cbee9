"""Empirical epsilon audits (Jagielski et al. 2020): the bound, the test search, the mechanisms, the CLI.

Every statistical check runs with a fixed seed; the tolerances are derived in the comments from
the Clopper-Pearson widths at the sample sizes used.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from recourse_privacy.cli import app
from recourse_privacy.dp_audit import (
    MECHANISMS,
    audit_mechanism,
    clopper_pearson,
    dpm_canary_data,
    dpm_logistic_experiment,
    epsilon_lower_bound,
    laplace_experiment,
    make_experiment,
)

# ---------------------------------------------------------------------------- the bound itself


@pytest.mark.parametrize(
    "k,n,alpha",
    [
        (0, 10, 0.05),
        (10, 10, 0.05),
        (3, 17, 0.05),
        (250, 1000, 0.01),
        (1, 100000, 0.05),
        (99999, 100000, 0.1),
        (40, 41, 0.2),
    ],
)
def test_clopper_pearson_matches_scipy_exact_interval(k, n, alpha):
    # scipy finds the ends by root finding (relative error ~1e-6 at p ~ 1e-7); ours invert the beta
    # distribution, so the tolerance is scipy's
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    lo, hi = clopper_pearson(k, n, alpha)
    assert lo == pytest.approx(ci.low, rel=1e-5, abs=1e-15)
    assert hi == pytest.approx(ci.high, rel=1e-5, abs=1e-15)
    if k == 0:  # closed form: P(X = 0 | hi) = (1 - hi)^n = alpha / 2
        assert hi == pytest.approx(1 - (alpha / 2) ** (1 / n), rel=1e-12)


def test_clopper_pearson_is_vectorized_and_checks_input():
    k = np.array([0, 5, 50, 100])
    lo, hi = clopper_pearson(k, 100, 0.05)
    for i, kk in enumerate(k):
        assert (lo[i], hi[i]) == clopper_pearson(int(kk), 100, 0.05)
    assert np.all(lo <= k / 100) and np.all(k / 100 <= hi)
    with pytest.raises(ValueError, match="k must"):
        clopper_pearson(11, 10)
    with pytest.raises(ValueError, match="alpha"):
        clopper_pearson(1, 10, alpha=1.5)


def test_epsilon_lower_bound_is_the_formula_with_the_upper_clopper_pearson_ends():
    fp, n_neg, fn, n_pos = 120, 1000, 450, 1000
    fpr_hi = binomtest(fp, n_neg).proportion_ci(0.95, method="exact").high
    fnr_hi = binomtest(fn, n_pos).proportion_ci(0.95, method="exact").high
    expect = max(math.log((1 - fpr_hi) / fnr_hi), math.log((1 - fnr_hi) / fpr_hi))
    assert epsilon_lower_bound(fp, n_neg, fn, n_pos) == pytest.approx(expect, rel=1e-9)
    # symmetric in the two error types; delta loosens the bound
    assert epsilon_lower_bound(fn, n_pos, fp, n_neg) == pytest.approx(expect, rel=1e-9)
    assert epsilon_lower_bound(fp, n_neg, fn, n_pos, delta=0.05) < expect


@pytest.mark.parametrize("fpr,fnr", [(0.5 * math.exp(-1.0), 0.5), (0.1, 0.3), (0.02, 0.9)])
def test_epsilon_lower_bound_converges_to_the_exact_privacy_loss(fpr, fnr):
    # Exactly known rates: as n grows the CI vanishes and the bound tends to
    # max(log((1-FPR)/FNR), log((1-FNR)/FPR)) from below.
    exact = max(math.log((1 - fpr) / fnr), math.log((1 - fnr) / fpr))
    bounds = [epsilon_lower_bound(round(fpr * n), n, round(fnr * n), n) for n in (10**3, 10**5, 10**8)]
    assert bounds[0] < bounds[1] < bounds[2] <= exact + 1e-6
    assert bounds[2] == pytest.approx(exact, abs=2e-3)


def test_epsilon_lower_bound_is_zero_when_nothing_can_be_claimed():
    assert epsilon_lower_bound(500, 1000, 500, 1000) == 0.0  # a coin flip
    assert epsilon_lower_bound(900, 1000, 900, 1000) == 0.0  # worse than a coin flip
    # perfect separation: with 5 runs nothing can be claimed; with 20 exactly log((1 - h) / h), where
    # h = 1 - 0.025^(1/20) = 0.168 is the CP upper end of 0 / 20 errors
    assert epsilon_lower_bound(0, 5, 0, 5) == 0.0
    h = 1 - 0.025 ** (1 / 20)
    assert epsilon_lower_bound(0, 20, 0, 20) == pytest.approx(math.log((1 - h) / h), rel=1e-12)
    vec = epsilon_lower_bound(np.array([10, 500]), 1000, np.array([10, 500]), 1000)
    assert vec[0] == epsilon_lower_bound(10, 1000, 10, 1000) and vec[1] == 0.0


# ---------------------------------------------------------------------------- the audit procedure


def _randomized_response(eps: float):
    """Output 1 with probability e^eps / (1 + e^eps) on D', 1 / (1 + e^eps) on D: exactly eps-DP."""
    q = 1.0 / (1.0 + math.exp(eps))

    def sample(which, rng, n):
        return (rng.random(n) < (1.0 - q if which else q)).astype(float)

    return sample


def test_audit_is_nearly_tight_on_randomized_response():
    # The test "output >= 1" has FPR = FNR = q = 1/(1+e) = 0.269 and (1-FNR)/FPR = e exactly. With
    # 100,000 measurement runs per neighbour the upper CP ends sit about 1.96*sqrt(q(1-q)/1e5) = 0.0028
    # above the rates, costing log((0.731-0.0028)/(0.269+0.0028)) - 1 = -0.014; sampling noise of the
    # same size keeps the bound in [0.95, 1].
    a = audit_mechanism(_randomized_response(1.0), n_trials=200_000, claimed_epsilon=1.0, random_state=0)
    assert 0.95 <= a.epsilon_lower_bound <= 1.0
    assert (a.side, a.threshold) == (">=", 1.0)
    assert a.n_selection == a.n_measurement == 100_000
    assert a.fpr_ci[0] <= a.fpr <= a.fpr_ci[1] and not a.violates_claim


def test_test_search_on_held_out_runs_does_not_invent_privacy_loss():
    # Both neighbours give the same N(0, 1): the true epsilon is 0. Searching ~2,000 thresholds on the
    # runs that give the bound would find a spurious positive bound often; measured on held-out runs
    # a positive bound is a 1 - alpha CI failure, rare (<= 3 of 20 has probability > 0.98 at alpha 0.05).
    def same(which, rng, n):
        return rng.normal(size=n)

    audits = [audit_mechanism(same, n_trials=2000, claimed_epsilon=1.0, random_state=s) for s in range(20)]
    assert sum(a.epsilon_lower_bound > 0 for a in audits) <= 3
    assert max(a.epsilon_lower_bound for a in audits) < 0.3


def test_audit_is_reproducible_and_validates_input():
    s = _randomized_response(0.5)
    a = audit_mechanism(s, n_trials=500, claimed_epsilon=0.5, random_state=7)
    b = audit_mechanism(s, n_trials=500, claimed_epsilon=0.5, random_state=7)
    assert a.to_dict() | {"seconds": 0} == b.to_dict() | {"seconds": 0}
    with pytest.raises(ValueError, match="n_trials"):
        audit_mechanism(s, n_trials=2, claimed_epsilon=1.0)
    with pytest.raises(ValueError, match="claimed_epsilon"):
        audit_mechanism(s, n_trials=100, claimed_epsilon=-1.0)
    with pytest.raises(ValueError, match="NaN"):
        audit_mechanism(lambda w, r, n: np.full(n, np.nan), n_trials=100, claimed_epsilon=1.0)
    with pytest.raises(ValueError, match="expected n=100"):
        audit_mechanism(lambda w, r, n: np.zeros(3), n_trials=100, claimed_epsilon=1.0)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        make_experiment("nope", 1.0)
    assert set(MECHANISMS) >= {  # and the trained-neighbour audits of every private release (dp_audit/releases.py)
        "laplace-score",
        "laplace-score-broken",
        "dpm-logistic-label-flip",
        "trained-lr",
        "trained-dpm-logistic",
        "trained-dpm-logistic-budget",
        "trained-dpm-lr",
        "trained-dpm-scfe",
    }
    with pytest.raises(ValueError, match="now 'laplace-score'"):  # renamed: it audits the score, not the release
        make_experiment("laplace", 1.0)


# ---------------------------------------------------------------------------- the mechanisms


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_laplace_recourse_audit_never_exceeds_the_claim_and_comes_close(eps):
    # Neighbours p = 0 and p' = 1. The atom test "p' >= 1" is exactly tight: FPR = e^-eps / 2,
    # FNR = 1/2, (1 - FNR)/FPR = e^eps. With 10,000 measurement runs the CP ends add ~2-3% to each
    # rate, so the bound lands 0.03-0.1 below eps (measured 0.42, 0.93, 1.88): assert within 0.15.
    a = make_experiment("laplace-score", eps).audit(n_trials=20_000, random_state=0)
    assert a.epsilon_lower_bound <= eps
    assert a.epsilon_lower_bound >= eps - 0.15
    assert a.verdict == "consistent with the claim"


def test_laplace_probability_release_audit():
    a = make_experiment("laplace-score", 1.0, release="probability").audit(n_trials=20_000, random_state=1)
    assert 0.85 <= a.epsilon_lower_bound <= 1.0
    assert a.statistic == "noisy probability"


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_broken_laplace_audit_exceeds_the_claim(eps):
    # Noise scale divided by 10: the true epsilon is 10 * eps. The atom test gives FPR = e^(-10 eps)/2
    # (<= 0.0034) and FNR = 1/2; with 1,000 measurement runs FPR_hi <= 0.0088 and FNR_hi ~ 0.53, so the
    # bound is >= log(0.47 / 0.0088) = 4.0 (measured 4.7 at eps 1): far above the claim.
    a = make_experiment("laplace-score-broken", eps).audit(n_trials=2000, random_state=0)
    assert a.epsilon_lower_bound > max(2 * eps, 3.0)
    assert a.violates_claim and a.verdict == "VIOLATES the claim"


def _clamped_laplace_test_rates(side: str, t: float, b: float) -> tuple[float, float]:
    """Exact (FPR, FNR) of "say D' when p' side t" for p' = clip(p + Laplace(b), 0, 1), p = 0 (D) vs 1 (D')."""
    from scipy.stats import laplace

    assert 0.0 <= t <= 1.0
    if side == ">=":  # P(clip(p + L) >= t) = P(L >= t - p) for t in (0, 1]
        assert t > 0
        return float(laplace.sf(t, scale=b)), float(laplace.cdf(t - 1.0, scale=b))
    assert t < 1  # P(clip(p + L) <= t) = P(L <= t - p) for t in [0, 1)
    return float(laplace.cdf(t, scale=b)), float(laplace.sf(t - 1.0, scale=b))


@pytest.mark.parametrize("claim,factor", [(1.0, 1.0), (0.5, 8.0)])
def test_laplace_audit_lands_within_a_derived_margin_of_the_known_epsilon(claim, factor):
    """A positive control with a known answer: the audit must find the epsilon that is there.

    Noise for sensitivity 1 / factor on neighbouring probabilities 0 and 1 makes the mechanism
    exactly (factor * claim)-DP (factor 8: a mechanism at 8x its claim). Given the test the
    selection half chose (side, t), the measurement half's error counts are Binomial(n, FPR(t)) and
    Binomial(n, FNR(t)) with the exact rates of the clamped Laplace; the bound is monotone in the
    counts, so it lies between the bounds of the counts' 1e-6 and 1 - 1e-6 quantiles (lo, hi). The
    stated margin: with n = 10,000 measurement runs, the atom test (FPR = e^-eps / 2, FNR = 1/2) at
    its 1e-6 quantiles bounds 0.21 below eps = 1 and 0.66 below eps = 4; the audit must land no
    further below the true epsilon. At factor 8 even lo is above the claim: the claim is refuted.
    An audit that returns 0 (or never exceeds the claim) fails here.
    """
    from scipy.stats import binom

    true_eps = claim * factor
    a = laplace_experiment(claim, noise_sensitivity=1.0 / factor, release="probability").audit(
        n_trials=20_000, random_state=0
    )
    n = a.n_measurement
    fpr, fnr = _clamped_laplace_test_rates(a.side, a.threshold, 1.0 / true_eps)
    lo = epsilon_lower_bound(binom.isf(1e-6, n, fpr), n, binom.isf(1e-6, n, fnr), n)
    hi = epsilon_lower_bound(binom.ppf(1e-6, n, fpr), n, binom.ppf(1e-6, n, fnr), n)
    assert lo <= a.epsilon_lower_bound <= hi
    margin = true_eps - epsilon_lower_bound(binom.isf(1e-6, n, math.exp(-true_eps) / 2), n, binom.isf(1e-6, n, 0.5), n)
    assert margin == pytest.approx({1.0: 0.21, 4.0: 0.66}[true_eps], abs=0.01)
    assert true_eps - margin <= a.epsilon_lower_bound <= hi
    if factor > 1:
        assert lo > claim and a.violates_claim and a.verdict == "VIOLATES the claim"
    else:
        assert a.epsilon_lower_bound <= claim and not a.violates_claim


def test_dpm_canary_data_are_neighbours_within_the_norm():
    X, y, y2 = dpm_canary_data(60, 3, data_norm=2.0, random_state=0)
    assert X.shape == (60, 3)
    assert np.all(np.linalg.norm(X, axis=1) <= 2.0 + 1e-12)
    assert np.array_equal(np.nonzero(y != y2)[0], [0]) and (y[0], y2[0]) == (1, 0)
    assert np.allclose(X[0], [2.0, 0.0, 0.0]) and np.all(X[1:, 0] == 0)
    assert set(y[1:]) == {0, 1}


def test_dpm_logistic_audit_is_consistent_with_the_claim():
    a = make_experiment("dpm-logistic-label-flip", 1.0).audit(n_trials=200, random_state=0)
    assert 0.0 <= a.epsilon_lower_bound <= 1.0
    assert a.n_trials == 200 and a.statistic == "logit at the canary"


def test_dpm_audit_flags_a_model_trained_at_8x_its_claim():
    """Positive control on the package's DPLogisticModel: trained at 8x the claim, it must be flagged.

    With 12 rows the canary's label flip moves the DP model's logit far enough that 400 runs (200
    measured) refute a claim of 1 for the model trained at 8 (bound 1.65 at this seed; 1.4-1.8 over
    seeds 0-5), while the same audit of the model trained at its claim stays at or below 1 (0 here).
    So a DPLogisticModel that trained at 8x its epsilon fails the second assertion.
    """
    from recourse_privacy.models import DPLogisticModel

    def at_8x(epsilon, data_norm, random_state, **_):
        return DPLogisticModel(epsilon=8 * epsilon, data_norm=data_norm, random_state=random_state)

    loud = dpm_logistic_experiment(1.0, n_rows=12, model_factory=at_8x).audit(n_trials=400, random_state=0)
    assert loud.epsilon_lower_bound > 1.0 and loud.violates_claim
    honest = dpm_logistic_experiment(1.0, n_rows=12).audit(n_trials=400, random_state=0)
    assert honest.epsilon_lower_bound <= 1.0 and not honest.violates_claim


def test_dpm_experiment_catches_a_non_private_model():
    # The same canary experiment with plain (non-private) logistic regression: the canary's label flip
    # moves the logit deterministically, the two neighbours never overlap, and with 25 measurement
    # runs FP = FN = 0 gives log((1 - 0.137) / 0.137) = 1.8 > 1: the experiment has the power to see it.
    from recourse_privacy.models.logistic import LogisticModel

    def non_private(epsilon, data_norm, random_state, **_):
        return LogisticModel(random_state=random_state)

    a = dpm_logistic_experiment(1.0, n_rows=40, model_factory=non_private).audit(n_trials=50, random_state=0)
    assert a.false_positives == a.false_negatives == 0
    assert a.epsilon_lower_bound > 1.0 and a.violates_claim


# ---------------------------------------------------------------------------- the command line


def test_audit_dp_command(tmp_path):
    runner = CliRunner()
    out = tmp_path / "audit.json"
    res = runner.invoke(
        app,
        [
            "audit-dp",
            "--mechanism",
            "laplace-score-broken",
            "--epsilon",
            "1",
            "--trials",
            "2000",
            "--seed",
            "0",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "VIOLATES the claim" in res.output and "laplace-score-broken" in res.output
    d = json.loads(out.read_text())
    assert d["violates_claim"] and d["epsilon_lower_bound"] > 3 and d["claimed_epsilon"] == 1.0
    assert d["n_trials"] == 2000 and d["seed"] == 0 and "test" in d
    res = runner.invoke(app, ["audit-dp", "--mechanism", "laplace-score", "--epsilon", "1", "--trials", "2000"])
    assert res.exit_code == 0 and "consistent with the claim" in res.output
    res = runner.invoke(app, ["audit-dp", "--mechanism", "nope"])
    assert res.exit_code == 2 and "mechanism must be one of" in res.output


# ---------------------------------------------------------------------------- trained neighbours


def test_trained_lr_release_violates_its_claim():
    # D vs D + an outlier canary on its own coordinate: the non-private model's weight on it is 0 without the
    # canary and not with it, so the move's direction separates the neighbours in every run. 150 measurement
    # runs without error certify log((1 - h)/h), h = 1 - 0.025^(1/150) = 0.0243: 3.69 > 1.
    a = make_experiment("trained-lr", 1.0).audit(n_trials=300, random_state=0)
    h = 1 - 0.025 ** (1 / 150)
    assert a.false_positives == a.false_negatives == 0 and a.violates_claim
    assert a.epsilon_lower_bound == pytest.approx(np.log((1 - h) / h), rel=1e-9)


def test_trained_dpm_releases_are_consistent():
    for name in ("trained-dpm-logistic", "trained-dpm-lr", "trained-dpm-logistic-budget"):
        a = make_experiment(name, 1.0).audit(n_trials=200, random_state=0)
        assert a.epsilon_lower_bound <= 1.0 and not a.violates_claim


def test_trained_audits_refuse_bad_input_before_training():
    with pytest.raises(ValueError, match="canary_norm"):
        make_experiment("trained-lr", 1.0, canary_norm=2.0)  # outside the declared data_norm = 1
    with pytest.raises(ValueError, match="trials"):  # 5 measurement runs can certify at most 0.5
        make_experiment("trained-lr", 1.0).audit(n_trials=10, random_state=0)
    with pytest.raises(ValueError, match="epsilon"):
        make_experiment("trained-dpm-lr", -1.0)


def test_one_run_bound_matches_the_binomial_tail():
    from scipy.stats import binom

    from recourse_privacy.dp_audit import one_run_bound

    eps = one_run_bound(500, 400, beta=0.05)
    p = 1 / (1 + np.exp(-eps))
    assert binom.sf(399, 500, p) == pytest.approx(0.05, abs=1e-6)  # the tail reaches beta exactly at the bound
    assert one_run_bound(500, 250) == 0.0  # chance-level guessing certifies nothing
    assert one_run_bound(500, 500) > one_run_bound(500, 450) > one_run_bound(100, 90) > 0


def test_one_run_audit_catches_lr_and_passes_dpm():
    from recourse_privacy.dp_audit import one_run_audit

    lr = one_run_audit("lr", 1.0, n_canaries=400, random_state=0)
    assert lr.n_correct == lr.n_guesses == 200 and lr.violates_claim
    dpm = one_run_audit("dpm-logistic", 1.0, n_canaries=400, random_state=0)
    assert not dpm.violates_claim
