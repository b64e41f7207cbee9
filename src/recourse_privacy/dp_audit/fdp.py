"""Gaussian DP (GDP) and the one-run f-DP and (eps, delta) bounds on canary guesses.

Three pieces, each a lower bound that holds with confidence 1 - alpha:

* **GDP from a test's error rates** (Nasr et al. 2023, "Tight auditing of differentially private
  machine learning", USENIX Security; Dong, Roth and Su 2022, "Gaussian differential privacy").
  A mu-GDP mechanism admits no test with FNR < Phi(Phi^-1(1 - FPR) - mu), so with upper
  confidence bounds FPR_hi and FNR_hi, mu >= Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi).
* **The one-run f-DP bound** (Mahloujifar, Melis and Chaudhuri 2024, "Auditing f-differential
  privacy in one run"): m canaries, each included with probability 1/2, k guesses of which c are
  right. For a mechanism that is f-DP in every canary (here f the Gaussian trade-off of mu-GDP),
  their recursion over the events {T >= i}, i = c, c-1, ..., 0 (T the number of correct guesses)
  bounds from below the expected numbers of correct and incorrect guesses that P[T >= c] >= alpha
  would force; when they add up to more than the k guesses made, the claim "mu-GDP" is refuted at
  level alpha. The largest refuted mu is the bound.
* **Steinke, Nasr and Jagielski (2023)** with delta > 0 (their Theorem 5.2): for an (eps, delta)-DP
  mechanism, P[T >= v] <= F(v) + 2 m delta max_{1<=i<=v} (F(v - i) - F(v)) / i, with
  F(u) = P[Binomial(r, e^eps / (1 + e^eps)) >= u]; the largest eps that this p-value rejects at
  level alpha is the bound. With delta = 0 the second term vanishes and the bound is
  :func:`recourse_privacy.dp_audit.trained.one_run_bound`.

The conversion from mu-GDP to (eps, delta) is Corollary 2.13 of Dong, Roth and Su:
delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
"""

from __future__ import annotations

import math

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import check_alpha, clopper_pearson
from recourse_privacy.validation import check_delta

__all__ = [
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_from_rates",
    "gdp_mu_lower_bound",
    "one_run_fdp_mu",
    "steinke_epsilon",
    "steinke_p_value",
]

#: the largest mu the searches consider (mu-GDP with mu = 64 is (eps, 1e-5)-DP only for eps > 2,000)
MU_MAX = 64.0
#: the largest eps the one-run search considers (as trained.one_run_bound)
EPS_MAX = 60.0


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth and Su 2022, Corollary 2.13), computed in the log domain."""
    from scipy.special import log_ndtr

    mu, epsilon = float(mu), float(epsilon)
    if mu <= 0:
        return 0.0
    la = log_ndtr(-epsilon / mu + mu / 2)
    lb = epsilon + log_ndtr(-epsilon / mu - mu / 2)
    if lb >= la:  # rounding at huge eps: the difference is 0
        return 0.0
    return float(math.exp(la) * -math.expm1(lb - la))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest eps with mu-GDP => (eps, delta)-DP: the root of gdp_delta(mu, eps) = delta.

    0 when mu <= 0 or delta(0) = 2 Phi(mu/2) - 1 <= delta; ``inf`` when delta = 0 and mu > 0
    (a Gaussian mechanism is not eps-DP for any finite eps).
    """
    from scipy.optimize import brentq

    delta = check_delta(delta)
    mu = float(mu)
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    if delta == 0:
        return math.inf
    target = math.log(delta)

    def gap(eps: float) -> float:
        d = gdp_delta(mu, eps)
        return (math.log(d) if d > 0 else -math.inf) - target

    hi = max(1.0, mu * mu)
    while gap(hi) > 0:
        hi *= 2
    return float(brentq(gap, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_mu_from_rates(fpr_hi, fnr_hi):
    """mu >= Phi^-1(1 - FPR_hi) - Phi^-1(FNR_hi) for every test of a mu-GDP mechanism; clipped at 0.

    Vectorized. Rates of 1 give no information (the bound is then 0).
    """
    from scipy.special import ndtri

    fpr_hi = np.asarray(fpr_hi, dtype=np.float64)
    fnr_hi = np.asarray(fnr_hi, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = ndtri(1.0 - fpr_hi) - ndtri(fnr_hi)
    mu = np.where(np.isnan(mu), 0.0, mu)
    return np.maximum(mu, 0.0)


def gdp_mu_lower_bound(fp, n_neg: int, fn, n_pos: int, *, alpha: float = 0.05):
    """Nasr et al. (2023): a 1 - ``alpha`` lower bound on mu from a test's error counts.

    FPR_hi and FNR_hi are the upper ends of two-sided Clopper-Pearson 1 - alpha intervals (each a
    one-sided 1 - alpha/2 bound, so both hold together with probability >= 1 - alpha), exactly as
    :func:`recourse_privacy.dp_audit.bounds.epsilon_lower_bound` uses them. Vectorized.
    """
    _, fpr_hi = clopper_pearson(fp, n_neg, alpha)
    _, fnr_hi = clopper_pearson(fn, n_pos, alpha)
    out = gdp_mu_from_rates(fpr_hi, fnr_hi)
    return float(out) if out.ndim == 0 else out


def _check_counts(n_canaries: int, n_guesses: int, n_correct: int) -> tuple[int, int, int]:
    m, r, v = int(n_canaries), int(n_guesses), int(n_correct)
    if not (m >= 1 and 1 <= r <= m and 0 <= v <= r):
        raise InvalidInputError(
            f"need 0 <= n_correct <= n_guesses <= n_canaries and n_guesses >= 1; got {v} of {r} guesses, {m} canaries"
        )
    return m, r, v


# ----------------------------------------------------------------------------- Steinke et al. with delta


def _at_least(u, r: int, p: float):
    """P[Binomial(r, p) >= u], vectorized over u (1 for u <= 0)."""
    from scipy.special import bdtrc

    u = np.asarray(u)
    return np.where(u <= 0, 1.0, bdtrc(np.maximum(u - 1, 0), r, p))


def steinke_p_value(epsilon: float, n_canaries: int, n_guesses: int, n_correct: int, delta: float = 0.0) -> float:
    """Steinke et al. (2023), Theorem 5.2: an upper bound on P[T >= v] for an (eps, delta)-DP mechanism."""
    m, r, v = _check_counts(n_canaries, n_guesses, n_correct)
    p = 1.0 / (1.0 + math.exp(-float(epsilon)))
    tail = float(_at_least(v, r, p))
    if delta == 0 or v == 0:
        return tail
    i = np.arange(1, v + 1)
    worst = float(np.max((_at_least(v - i, r, p) - tail) / i))
    return min(1.0, tail + 2.0 * m * float(delta) * worst)


def steinke_epsilon(
    n_canaries: int, n_guesses: int, n_correct: int, *, alpha: float = 0.05, delta: float = 0.0
) -> float:
    """The largest eps that Steinke et al.'s test rejects at level ``alpha``: a 1 - alpha lower bound.

    With ``delta`` = 0 this is :func:`recourse_privacy.dp_audit.trained.one_run_bound`; with delta > 0
    the p-value of :func:`steinke_p_value` (Theorem 5.2), by bisection on [0, 60] (it increases in eps).
    """
    from recourse_privacy.dp_audit.trained import one_run_bound

    alpha = check_alpha(alpha)
    delta = check_delta(delta)
    m, r, v = _check_counts(n_canaries, n_guesses, n_correct)
    if delta == 0:
        return one_run_bound(r, v, alpha)
    if steinke_p_value(0.0, m, r, v, delta) >= alpha:
        return 0.0
    lo, hi = 0.0, EPS_MAX
    if steinke_p_value(hi, m, r, v, delta) < alpha:
        return hi
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if steinke_p_value(mid, m, r, v, delta) < alpha else (lo, mid)
    return lo


# ----------------------------------------------------------------------------- Mahloujifar et al. f-DP


def _fdp_refutes(mu: np.ndarray, m: int, k: int, c: int, alpha: float) -> np.ndarray:
    """For each mu: does "mu-GDP in every canary" make P[T >= c] >= alpha impossible? (vectorized over mu)

    Mahloujifar, Melis and Chaudhuri (2024), the recursion of their one-run audit. Write R_i and
    H_i for the expected numbers of correct and incorrect guesses on the event {T >= i}, divided
    by m. f-DP in each canary, averaged over the canaries, gives H_i >= Phi(Phi^-1(R_i) - mu); going
    from {T >= i+1} to {T >= i} adds the outcomes with exactly i correct of k guesses, which add
    i / (k - i) correct guesses per incorrect one. Starting from the least mass P[T >= c] = alpha
    allows (R_c = alpha c / m, H_c = alpha (k - c) / m), each step adds the least incorrect mass the
    constraint forces (read at the previous R, as the paper does); at i = 0 the event is certain, so
    R_0 + H_0 = k / m. A lower bound above k / m is a contradiction: the claim is refuted.
    """
    from scipy.special import ndtr, ndtri

    right = np.full(mu.shape, alpha * c / m)
    wrong = np.full(mu.shape, alpha * (k - c) / m)
    for i in range(c - 1, -1, -1):
        with np.errstate(divide="ignore"):
            forced = ndtr(ndtri(right) - mu)
        added = np.maximum(forced - wrong, 0.0)
        if not added.any():
            break  # nothing moves again: the next step reads the same R
        wrong = wrong + added
        right = np.minimum(right + added * (i / (k - i)), 1.0)
    return right + wrong > k / m


def one_run_fdp_mu(n_canaries: int, n_guesses: int, n_correct: int, *, alpha: float = 0.05) -> float:
    """A 1 - ``alpha`` lower bound on mu (Gaussian DP) from one run's guesses (Mahloujifar et al. 2024).

    The largest mu whose claim :func:`_fdp_refutes` refutes (0 if none), to about 1e-7: refutation
    only gets harder as mu grows, so the search brackets the edge and narrows it on grids of 64.
    """
    alpha = check_alpha(alpha)
    m, k, c = _check_counts(n_canaries, n_guesses, n_correct)
    if not _fdp_refutes(np.zeros(1), m, k, c, alpha)[0]:
        return 0.0
    lo, hi = 0.0, 1.0
    while _fdp_refutes(np.array([hi]), m, k, c, alpha)[0]:
        lo, hi = hi, 2 * hi
        if hi > MU_MAX:
            return MU_MAX
    while hi - lo > 1e-7:
        grid = np.linspace(lo, hi, 66)[1:-1]
        ref = _fdp_refutes(grid, m, k, c, alpha)
        n = int(np.count_nonzero(ref))  # refuted values form a prefix of the grid
        lo, hi = (grid[n - 1] if n else lo), (grid[n] if n < grid.size else hi)
    return float(lo)
