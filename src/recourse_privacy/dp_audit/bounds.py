"""Empirical lower bounds on the epsilon of a DP mechanism (a privacy audit).

Jagielski, Ullman and Oprea (2020, "Auditing differentially private machine learning: how private
is private SGD?") and Nasr et al. (2021, "Adversary instantiation") audit a mechanism M claimed
(eps, delta)-DP by running it many times on two neighbouring inputs D (label 0) and D' (label 1)
and distinguishing the outputs with a test T. For every test, (eps, delta)-DP implies

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

with FPR = P[T says D' | D] and FNR = P[T says D | D']. With Clopper-Pearson upper bounds
FPR_hi, FNR_hi that hold together with probability 1 - alpha,

    eps_lb = max(log((1 - delta - FPR_hi) / FNR_hi), log((1 - delta - FNR_hi) / FPR_hi))

is a lower bound on the true epsilon with confidence 1 - alpha. The test (a threshold on a
scalar output, either side) is chosen on one half of the runs and measured on the other half, so
the search does not bias the bound. A bound above the claim refutes the claim; a bound below it
proves nothing (a pass is not a proof of privacy).

The ready-made experiments live in :mod:`recourse_privacy.dp_audit.experiments`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import check_alpha, clopper_pearson
from recourse_privacy.validation import (
    RandomState,
    as_generator,
    check_delta,
    check_positive_float,
    check_positive_int,
    derive_seed,
)

#: A sampler draws a batch of ``n`` scalar outputs of the mechanism run on neighbour ``which``
#: (0: D, 1: D') with the generator ``rng``; it returns an array of shape (n,).
Sampler = Callable[[int, np.random.Generator, int], np.ndarray]


def _bound_from_upper(fpr_hi, fnr_hi, delta: float):
    """max of the two DP inequalities solved for eps, from upper bounds on FPR and FNR; >= 0."""
    fpr_hi = np.asarray(fpr_hi, dtype=np.float64)
    fnr_hi = np.asarray(fnr_hi, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log((1.0 - delta - fpr_hi) / fnr_hi)
        b = np.log((1.0 - delta - fnr_hi) / fpr_hi)
    a = np.where(1.0 - delta - fpr_hi > 0, a, -np.inf)
    b = np.where(1.0 - delta - fnr_hi > 0, b, -np.inf)
    return np.maximum(np.maximum(a, b), 0.0)


def epsilon_lower_bound(fp, n_neg: int, fn, n_pos: int, *, delta: float = 0.0, alpha: float = 0.05):
    """Lower bound on epsilon, with confidence 1 - ``alpha``, from a test's error counts.

    ``fp`` of ``n_neg`` runs on D were called D' (false positives); ``fn`` of ``n_pos`` runs on
    D' were called D. With the upper ends FPR_hi, FNR_hi of the two-sided Clopper-Pearson
    1 - alpha intervals (each a one-sided 1 - alpha/2 bound, so both hold with probability
    >= 1 - alpha), the bound is max(log((1-delta-FPR_hi)/FNR_hi), log((1-delta-FNR_hi)/FPR_hi))
    (Jagielski et al. 2020; Nasr et al. 2021), and 0 when nothing can be claimed.
    Vectorized over ``fp`` and ``fn``.
    """
    delta = check_delta(delta)
    _, fpr_hi = clopper_pearson(fp, n_neg, alpha)
    _, fnr_hi = clopper_pearson(fn, n_pos, alpha)
    out = _bound_from_upper(fpr_hi, fnr_hi, delta)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class EpsilonAudit:
    """The result of one empirical epsilon audit.

    The test says "D'" when ``output >= threshold`` (side ">=") or ``output <= threshold``
    (side "<="); ``fpr``/``fnr`` and their Clopper-Pearson intervals are measured on the
    ``n_measurement`` runs per neighbour that played no part in choosing the test.
    """

    mechanism: str
    claimed_epsilon: float
    epsilon_lower_bound: float
    delta: float
    alpha: float
    side: str
    threshold: float
    fpr: float
    fnr: float
    fpr_ci: tuple[float, float]
    fnr_ci: tuple[float, float]
    false_positives: int
    false_negatives: int
    n_trials: int
    n_selection: int
    n_measurement: int
    selection_bound: float
    statistic: str = "output"
    neighbours: str = ""
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    @property
    def test(self) -> str:
        """The distinguishing test in words."""
        return f"say D' when {self.statistic} {self.side} {self.threshold:.6g}"

    @property
    def violates_claim(self) -> bool:
        """True when the audited lower bound exceeds the claimed epsilon."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def verdict(self) -> str:
        return "VIOLATES the claim" if self.violates_claim else "consistent with the claim"

    def to_dict(self) -> dict:
        """A JSON-ready dict, with the test and the verdict spelled out."""
        d = asdict(self)
        d["fpr_ci"] = list(self.fpr_ci)
        d["fnr_ci"] = list(self.fnr_ci)
        d["test"] = self.test
        d["violates_claim"] = self.violates_claim
        d["verdict"] = self.verdict
        d["convention"] = (
            "eps_lb = max(log((1-delta-FPR_hi)/FNR_hi), log((1-delta-FNR_hi)/FPR_hi)) with the upper ends of "
            "two-sided Clopper-Pearson (1-alpha) intervals (jointly >= 1-alpha); the threshold and side were "
            "chosen on n_selection runs per neighbour, the rates measured on n_measurement other runs"
        )
        return d


def _threshold_bounds(s0: np.ndarray, s1: np.ndarray, delta: float, alpha: float):
    """For every threshold test on the pooled outputs: (side, thresholds, fp, fn, bound) arrays.

    Candidates are all distinct output values (plus +/-inf for the empty test), so atoms (point
    masses, e.g. the clamped 0 and 1 of Laplace Recourse) are either wholly in or wholly out.
    """
    n0, n1 = s0.size, s1.size
    a0, a1 = np.sort(s0), np.sort(s1)
    values = np.unique(np.concatenate([a0, a1]))
    # Clopper-Pearson upper ends for every possible count, computed once and indexed.
    _, hi0 = clopper_pearson(np.arange(n0 + 1), n0, alpha)
    _, hi1 = clopper_pearson(np.arange(n1 + 1), n1, alpha)
    out = []
    # side ">=": say D' when s >= t. FP = #{s0 >= t}, FN = #{s1 < t}.
    t_ge = np.append(values, np.inf)
    fp = n0 - np.searchsorted(a0, t_ge, side="left")
    fn = np.searchsorted(a1, t_ge, side="left")
    out.append((">=", t_ge, fp, fn))
    # side "<=": say D' when s <= t. FP = #{s0 <= t}, FN = #{s1 > t}.
    t_le = np.insert(values, 0, -np.inf)
    fp = np.searchsorted(a0, t_le, side="right")
    fn = n1 - np.searchsorted(a1, t_le, side="right")
    out.append(("<=", t_le, fp, fn))
    return [(side, t, fp, fn, _bound_from_upper(hi0[fp], hi1[fn], delta)) for side, t, fp, fn in out]


def _errors(s0: np.ndarray, s1: np.ndarray, side: str, t: float) -> tuple[int, int]:
    if side == ">=":
        return int(np.count_nonzero(s0 >= t)), int(np.count_nonzero(s1 < t))
    return int(np.count_nonzero(s0 <= t)), int(np.count_nonzero(s1 > t))


def _check_outputs(s: np.ndarray, n: int, which: int) -> np.ndarray:
    arr = np.asarray(s, dtype=np.float64).reshape(-1)
    if arr.size != n:
        raise InvalidInputError(f"sample returned {arr.size} outputs for neighbour {which}; expected n={n}")
    if np.isnan(arr).any():
        raise InvalidInputError(f"sample returned {int(np.isnan(arr).sum())} NaN outputs for neighbour {which}")
    return arr


def max_certifiable_epsilon(n_measurement: int, delta: float = 0.0, alpha: float = 0.05) -> float:
    """The largest bound ``n_measurement`` runs per neighbour can give at confidence 1 - alpha (no errors at all)."""
    _, hi = clopper_pearson(0, int(n_measurement), alpha)
    return float(_bound_from_upper(hi, hi, delta))


def check_trials_can_refute(
    n_measurement: int, claimed_epsilon: float, delta: float = 0.0, alpha: float = 0.05, *, n_trials: int | None = None
) -> None:
    """Raise (naming ``trials``) when even a perfect test on these runs could not exceed the claim."""
    cap = max_certifiable_epsilon(n_measurement, delta, alpha)
    if cap <= claimed_epsilon:
        need = int(n_measurement)
        while max_certifiable_epsilon(need, delta, alpha) <= claimed_epsilon and need < 10**9:
            need *= 2
        total = need * (n_trials or 2 * n_measurement) // max(int(n_measurement), 1)
        raise InvalidInputError(
            f"trials: {n_trials or n_measurement} runs per neighbour ({n_measurement} measure the test) can certify "
            f"at most epsilon {cap:.3g} at confidence {1 - alpha:g}, not above the claimed {claimed_epsilon:g}: "
            f"the audit could never refute the claim; use at least about {total} trials"
        )


def audit_mechanism(
    sample: Sampler,
    *,
    n_trials: int,
    claimed_epsilon: float,
    delta: float = 0.0,
    alpha: float = 0.05,
    random_state: RandomState = None,
    selection_fraction: float = 0.5,
    mechanism: str = "mechanism",
    statistic: str = "output",
    neighbours: str = "",
    require_power: bool = True,
) -> EpsilonAudit:
    """Audit a mechanism claimed (``claimed_epsilon``, ``delta``)-DP; return an ``EpsilonAudit``.

    ``require_power`` (default) refuses runs too few for any test to exceed the claim; False runs them anyway, for
    an audit where another bound decides (the bound is then shown, and cannot refute the claim).

    ``sample(which, rng, n)`` returns ``n`` scalar outputs of the mechanism on neighbour
    ``which`` (0: D, 1: D') as one batch. ``n_trials`` outputs are drawn per neighbour, each from
    its own generator derived from ``random_state``; ``selection_fraction`` of them choose the
    threshold and side that maximise the bound, the rest measure FPR/FNR of that test, turned into
    a 1 - ``alpha`` lower bound by ``epsilon_lower_bound`` (Jagielski et al. 2020).
    """
    n_trials = check_positive_int(n_trials, "n_trials", minimum=4)
    claimed_epsilon = check_positive_float(claimed_epsilon, "claimed_epsilon")
    delta = check_delta(delta)
    alpha = check_alpha(alpha)
    if not 0.0 < float(selection_fraction) < 1.0:
        raise InvalidInputError(f"selection_fraction must lie strictly between 0 and 1; got {selection_fraction!r}")
    n_sel = round(n_trials * float(selection_fraction))
    n_sel = min(max(n_sel, 1), n_trials - 1)
    n_meas = n_trials - n_sel
    if require_power:
        check_trials_can_refute(n_meas, claimed_epsilon, delta, alpha, n_trials=n_trials)
    seed = random_state if isinstance(random_state, (int, np.integer)) else as_generator(random_state).integers(2**31)
    start = time.perf_counter()
    outs = []
    for which in (0, 1):
        rng = np.random.default_rng(derive_seed(seed, which))
        outs.append(_check_outputs(sample(which, rng, n_trials), n_trials, which))
    s0, s1 = outs
    # Selection half: best threshold and side by the bound they would give at this sample size.
    best = None
    for side, t, _fp, _fn, bound in _threshold_bounds(s0[:n_sel], s1[:n_sel], delta, alpha):
        i = int(np.argmax(bound))
        if best is None or bound[i] > best[2]:
            best = (side, float(t[i]), float(bound[i]))
    side, threshold, sel_bound = best
    # Measurement half: the chosen test on fresh runs.
    m0, m1 = s0[n_sel:], s1[n_sel:]
    fp, fn = _errors(m0, m1, side, threshold)
    lb = epsilon_lower_bound(fp, n_meas, fn, n_meas, delta=delta, alpha=alpha)
    return EpsilonAudit(
        mechanism=mechanism,
        claimed_epsilon=claimed_epsilon,
        epsilon_lower_bound=float(lb),
        delta=delta,
        alpha=alpha,
        side=side,
        threshold=threshold,
        fpr=fp / n_meas,
        fnr=fn / n_meas,
        fpr_ci=clopper_pearson(fp, n_meas, alpha),
        fnr_ci=clopper_pearson(fn, n_meas, alpha),
        false_positives=fp,
        false_negatives=fn,
        n_trials=n_trials,
        n_selection=n_sel,
        n_measurement=n_meas,
        selection_bound=sel_bound,
        statistic=statistic,
        neighbours=neighbours,
        seconds=time.perf_counter() - start,
    )


# --------------------------------------------------------------------------------------------
# Ready-made distinguishing experiments
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistinguishingExperiment:
    """A mechanism, two neighbouring inputs and the scalar statistic an auditor reads."""

    name: str
    sample: Sampler
    claimed_epsilon: float
    delta: float = 0.0
    statistic: str = "output"
    neighbours: str = ""

    def audit(
        self, *, n_trials: int, alpha: float = 0.05, random_state: RandomState = None, selection_fraction: float = 0.5
    ) -> EpsilonAudit:
        """Run ``audit_mechanism`` on this experiment."""
        return audit_mechanism(
            self.sample,
            n_trials=n_trials,
            claimed_epsilon=self.claimed_epsilon,
            delta=self.delta,
            alpha=alpha,
            random_state=random_state,
            selection_fraction=selection_fraction,
            mechanism=self.name,
            statistic=self.statistic,
            neighbours=self.neighbours,
        )
