"""Confidence intervals and minimum detectable effects: coverage under the null, exact edges, 1/sqrt(n)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import betaincinv
from scipy.stats import binomtest, norm
from sklearn.metrics import roc_auc_score

from recourse_privacy.dp_audit import clopper_pearson as dp_clopper_pearson
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics import (
    attack_metrics,
    bootstrap_auc,
    clopper_pearson,
    minimum_detectable_auc,
    minimum_detectable_tpr,
    paired_auc_difference,
    tpr_detected,
)


def _binomial_tolerance(p: float, n: int, sigmas: float = 4.0) -> float:
    """Half-width of a `sigmas`-sigma band on a share of n Bernoulli(p) outcomes."""
    return sigmas * math.sqrt(p * (1 - p) / n)


# --------------------------------------------------------------------------- Clopper-Pearson


def test_clopper_pearson_is_shared_not_duplicated():
    assert dp_clopper_pearson is clopper_pearson  # dp_audit re-exports the metrics layer's helper


@pytest.mark.parametrize("n", [1, 7, 100, 5000])
def test_clopper_pearson_edges_zero_and_all_successes(n):
    a = 0.05
    lo, hi = clopper_pearson(0, n, a)
    assert lo == 0.0 and hi == pytest.approx(1 - (a / 2) ** (1 / n), rel=1e-10)  # P[X = 0] = (1 - p)^n = a/2
    lo, hi = clopper_pearson(n, n, a)
    assert hi == 1.0 and lo == pytest.approx((a / 2) ** (1 / n), rel=1e-10)
    k = n // 2
    ref = binomtest(k, n).proportion_ci(confidence_level=1 - a, method="exact")
    assert clopper_pearson(k, n, a) == pytest.approx((ref.low, ref.high), abs=1e-12)


# --------------------------------------------------------------------------- bootstrap AUC


def test_bootstrap_replicates_are_exact_aucs_and_seeded():
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(300), np.zeros(200)].astype(int)
    scores = np.round(rng.normal(size=500) + 0.4 * labels, 1)  # many ties
    lo, hi = bootstrap_auc(labels, scores, seed=3)
    point = roc_auc_score(labels, scores)
    assert lo < point < hi
    assert bootstrap_auc(labels, scores, seed=3) == (lo, hi)  # same seed, same interval
    assert bootstrap_auc(labels, scores, seed=4) != (lo, hi)
    # The paired difference of an attack with itself is exactly 0 in every replicate.
    same = paired_auc_difference(labels, scores, scores, seed=3)
    assert (same.difference, same.ci_low, same.ci_high) == (0.0, 0.0, 0.0)
    # Against negated scores: AUC(a) - AUC(-a) = 2 AUC(a) - 1 in every replicate.
    neg = paired_auc_difference(labels, scores, -scores, seed=3)
    assert neg.difference == pytest.approx(2 * point - 1)
    assert (neg.ci_low, neg.ci_high) == pytest.approx((2 * lo - 1, 2 * hi - 1))


def test_bootstrap_auc_covers_one_half_under_the_null():
    """Under no leakage the 95% interval contains 0.5 in ~95% of seeded repetitions (binomial tolerance)."""
    reps, n = 300, 120
    rng = np.random.default_rng(12)
    labels = np.r_[np.ones(n), np.zeros(n)].astype(int)
    covered = [
        lo <= 0.5 <= hi
        for lo, hi in (bootstrap_auc(labels, rng.normal(size=2 * n), n_boot=400, seed=r) for r in range(reps))
    ]
    share = float(np.mean(covered))
    # the percentile bootstrap runs a little short of its level at small n: allow 1 point below 0.95
    assert 0.94 - _binomial_tolerance(0.95, reps) <= share <= 0.95 + _binomial_tolerance(0.95, reps)


def test_bootstrap_auc_covers_the_true_auc_with_signal():
    reps, n, shift = 200, 150, 0.5
    true_auc = norm.cdf(shift / math.sqrt(2))  # binormal, equal variances
    rng = np.random.default_rng(5)
    labels = np.r_[np.ones(n), np.zeros(n)].astype(int)
    hits = [
        lo <= true_auc <= hi
        for lo, hi in (
            bootstrap_auc(labels, rng.normal(size=2 * n) + shift * labels, n_boot=400, seed=r) for r in range(reps)
        )
    ]
    share = float(np.mean(hits))
    assert 0.94 - _binomial_tolerance(0.95, reps) <= share <= 0.95 + _binomial_tolerance(0.95, reps)


def test_bootstrap_is_fast_enough_for_ten_thousand_targets():
    # not a timing test: the work is one rank pass and (replicates x levels) cumulative sums
    rng = np.random.default_rng(1)
    labels = np.r_[np.ones(5000), np.zeros(5000)].astype(int)
    lo, hi = bootstrap_auc(labels, rng.normal(size=10_000), n_boot=1000, seed=0)
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(10_001 / (12 * 5000 * 5000)), rel=0.15)


def test_bootstrap_input_errors():
    with pytest.raises(InvalidInputError, match="members and non-members"):
        bootstrap_auc(np.ones(5, dtype=int), np.arange(5.0))
    with pytest.raises(InvalidInputError, match="finite"):
        bootstrap_auc(np.r_[1, 0], np.r_[np.nan, 0.0])
    with pytest.raises(InvalidInputError, match="alpha"):
        bootstrap_auc(np.r_[1, 0], np.r_[1.0, 0.0], alpha=0)


# --------------------------------------------------------------------------- TPR at low FPR


def test_tpr_and_threshold_fpr_intervals_under_the_null():
    """The achieved FPR's upper end bounds the chosen threshold's true FPR, and the TPR rule is a 5% test."""
    reps, n, target = 400, 400, 0.05
    rng = np.random.default_rng(8)
    labels = np.r_[np.ones(n), np.zeros(n)].astype(int)
    above, detected = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(reps):
            s = rng.uniform(size=2 * n)  # true FPR of "score >= t" is 1 - t
            m = attack_metrics(labels, s, (target,), n_bootstrap=0).tpr_at_fpr["0.05"]
            thr = np.sort(s[labels == 1])[::-1][round(m.tpr * n) - 1] if m.tpr > 0 else 1.0
            above.append(1 - thr > m.fpr_ci[1])
            detected.append(tpr_detected(m.ci[0], m.fpr_ci[1]))
            assert m.ci[0] <= m.tpr <= m.ci[1] and m.fpr_ci[0] <= m.achieved_fpr <= m.fpr_ci[1]
    assert np.mean(above) <= 0.025 + _binomial_tolerance(0.025, reps)
    assert np.mean(detected) <= 0.05 + _binomial_tolerance(0.05, reps)


# --------------------------------------------------------------------------- minimum detectable effects


def test_minimum_detectable_auc_shrinks_like_one_over_sqrt_n():
    z = norm.ppf(0.975) + norm.ppf(0.95)
    assert minimum_detectable_auc(800, 800) == pytest.approx(0.5 + z * math.sqrt(1601 / (12 * 800 * 800)))
    for n in (200, 1000, 5000):
        ratio = (minimum_detectable_auc(4 * n, 4 * n) - 0.5) / (minimum_detectable_auc(n, n) - 0.5)
        assert ratio == pytest.approx(0.5, abs=1e-3)
    assert minimum_detectable_auc(800, 800, power=0.8) < minimum_detectable_auc(800, 800)


def test_minimum_detectable_auc_is_detected_with_its_power():
    """Simulated: at the MDE, the AUC leaves the null band in ~95% of datasets."""
    reps, n = 400, 400
    mde = minimum_detectable_auc(n, n)
    shift = math.sqrt(2) * norm.ppf(mde)  # binormal shift with true AUC = mde
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(n), np.zeros(n)].astype(int)
    crit = 0.5 + norm.ppf(0.975) * math.sqrt((2 * n + 1) / (12 * n * n))
    rate = np.mean([roc_auc_score(labels, rng.normal(size=2 * n) + shift * labels) > crit for _ in range(reps)])
    # the standard error shrinks slightly away from 0.5 (Hanley and McNeil 1982): at least the power
    assert rate >= 0.95 - _binomial_tolerance(0.95, reps)


def test_minimum_detectable_tpr_inverts_the_binomial_and_shrinks():
    n1, n0, f = 2000, 1500, 0.01
    t = minimum_detectable_tpr(n1, n0, f)
    _, u = clopper_pearson(math.floor(f * n0), n0)
    lows, _ = clopper_pearson(np.arange(n1 + 1), n1)
    k = int(np.flatnonzero(lows > u)[0])
    assert t == pytest.approx(betaincinv(k, n1 - k + 1, 0.95))
    draws = np.random.default_rng(0).binomial(n1, t, size=20_000)
    assert np.mean(lows[draws] > u) == pytest.approx(0.95, abs=0.01)  # detected with probability `power`
    # the excess over the FPR shrinks like 1/sqrt(n) (up to the integer counts)
    ratio = (minimum_detectable_tpr(32_000, 32_000, f) - f) / (minimum_detectable_tpr(8000, 8000, f) - f)
    assert 0.4 <= ratio <= 0.55
    assert math.isnan(minimum_detectable_tpr(5, 5, 0.01))  # 5 members can never show a TPR above the FPR's bound
