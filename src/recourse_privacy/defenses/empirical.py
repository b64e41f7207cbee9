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

Ready-made distinguishing experiments (``MECHANISMS``): Laplace Recourse on the worst-case
neighbouring probabilities (Huang et al. 2023, sec. 4.2.2), a deliberately broken Laplace Recourse (noise
scale divided by 10), and diffprivlib's objective-perturbation logistic regression (DPM) on two
datasets that differ in the label of one canary row.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from recourse_privacy.validation import (
    RandomState,
    as_generator,
    check_positive_float,
    check_positive_int,
    derive_seed,
)
from recourse_privacy.models.base import BaseClassifier

#: A sampler draws a batch of ``n`` scalar outputs of the mechanism run on neighbour ``which``
#: (0: D, 1: D') with the generator ``rng``; it returns an array of shape (n,).
Sampler = Callable[[int, np.random.Generator, int], np.ndarray]


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha must lie strictly between 0 and 1; got {alpha!r}")
    return a


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not 0.0 <= d < 1.0:
        raise ValueError(f"delta must lie in [0, 1); got {delta!r}")
    return d


def clopper_pearson(k, n, alpha: float = 0.05):
    """Exact (Clopper-Pearson) two-sided 1 - ``alpha`` interval for a binomial proportion k / n.

    ``lo = Beta(alpha/2; k, n-k+1)`` (0 when k = 0) and ``hi = Beta(1-alpha/2; k+1, n-k)`` (1 when
    k = n), the interval scipy's ``binomtest(k, n).proportion_ci(method="exact")`` gives. Each
    end alone is a one-sided bound at confidence 1 - alpha/2. Vectorized over ``k`` (and ``n``);
    returns floats for scalar input, arrays otherwise.
    """
    from scipy.special import betaincinv

    alpha = _check_alpha(alpha)
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    if np.any(n_arr < 1) or np.any(n_arr != np.round(n_arr)):
        raise ValueError(f"n must be a positive integer count; got {n!r}")
    if np.any(k_arr < 0) or np.any(k_arr > n_arr) or np.any(k_arr != np.round(k_arr)):
        raise ValueError(f"k must be an integer count in [0, n]; got {k!r}")
    k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k_arr > 0, betaincinv(np.maximum(k_arr, 1.0), n_arr - k_arr + 1.0, alpha / 2.0), 0.0)
        hi = np.where(k_arr < n_arr, betaincinv(k_arr + 1.0, np.maximum(n_arr - k_arr, 1.0), 1.0 - alpha / 2.0), 1.0)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


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
    delta = _check_delta(delta)
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
        raise ValueError(f"sample returned {arr.size} outputs for neighbour {which}; expected n={n}")
    if np.isnan(arr).any():
        raise ValueError(f"sample returned {int(np.isnan(arr).sum())} NaN outputs for neighbour {which}")
    return arr


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
) -> EpsilonAudit:
    """Audit a mechanism claimed (``claimed_epsilon``, ``delta``)-DP; return an ``EpsilonAudit``.

    ``sample(which, rng, n)`` returns ``n`` scalar outputs of the mechanism on neighbour
    ``which`` (0: D, 1: D') as one batch. ``n_trials`` outputs are drawn per neighbour, each from
    its own generator derived from ``random_state``; ``selection_fraction`` of them choose the
    threshold and side that maximise the bound, the rest measure FPR/FNR of that test, turned into
    a 1 - ``alpha`` lower bound by ``epsilon_lower_bound`` (Jagielski et al. 2020).
    """
    n_trials = check_positive_int(n_trials, "n_trials", minimum=4)
    claimed_epsilon = check_positive_float(claimed_epsilon, "claimed_epsilon")
    delta = _check_delta(delta)
    alpha = _check_alpha(alpha)
    if not 0.0 < float(selection_fraction) < 1.0:
        raise ValueError(f"selection_fraction must lie strictly between 0 and 1; got {selection_fraction!r}")
    n_sel = round(n_trials * float(selection_fraction))
    n_sel = min(max(n_sel, 1), n_trials - 1)
    n_meas = n_trials - n_sel
    seed = random_state if isinstance(random_state, (int, np.integer)) else as_generator(random_state).integers(2**31)
    start = time.perf_counter()
    outs = []
    for which in (0, 1):
        rng = np.random.default_rng(derive_seed(seed, which))
        outs.append(_check_outputs(sample(which, rng, n_trials), n_trials, which))
    s0, s1 = outs
    # Selection half: best threshold and side by the bound they would give at this sample size.
    best = None
    for side, t, fp, fn, bound in _threshold_bounds(s0[:n_sel], s1[:n_sel], delta, alpha):
        i = int(np.argmax(bound))
        if best is None or bound[i] > best[2]:
            best = (side, float(t[i]), float(bound[i]))
    side, threshold, sel_bound = best
    # Measurement half: the chosen test on fresh runs.
    m0, m1 = s0[n_sel:], s1[n_sel:]
    fp, fn = _errors(m0, m1, side, threshold)
    lb = epsilon_lower_bound(fp, n_meas, fn, n_meas, delta=delta, alpha=alpha)
    return EpsilonAudit(
        mechanism=mechanism, claimed_epsilon=claimed_epsilon, epsilon_lower_bound=float(lb), delta=delta,
        alpha=alpha, side=side, threshold=threshold, fpr=fp / n_meas, fnr=fn / n_meas,
        fpr_ci=clopper_pearson(fp, n_meas, alpha), fnr_ci=clopper_pearson(fn, n_meas, alpha),
        false_positives=fp, false_negatives=fn, n_trials=n_trials, n_selection=n_sel, n_measurement=n_meas,
        selection_bound=sel_bound, statistic=statistic, neighbours=neighbours,
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

    def audit(self, *, n_trials: int, alpha: float = 0.05, random_state: RandomState = None,
              selection_fraction: float = 0.5) -> EpsilonAudit:
        """Run ``audit_mechanism`` on this experiment."""
        return audit_mechanism(
            self.sample, n_trials=n_trials, claimed_epsilon=self.claimed_epsilon, delta=self.delta, alpha=alpha,
            random_state=random_state, selection_fraction=selection_fraction, mechanism=self.name,
            statistic=self.statistic, neighbours=self.neighbours,
        )


class _FixedLinearModel(BaseClassifier):
    """A fitted one-feature linear model with a given logit at x = 0 (neighbouring 'models')."""

    is_linear = True
    is_differentiable = False

    def __init__(self, intercept: float):
        self.coef_ = np.array([1.0])
        self.intercept_ = float(intercept)
        self.n_features_in_ = 1
        self.fitted_ = True

    def fit(self, X, y):  # pragma: no cover - never refitted
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        return self._check_X(X) @ self.coef_ + self.intercept_


def _logit(p: float) -> float:
    p = min(max(p, 1e-300), 1.0 - 1e-16)
    return float(np.log(p) - np.log1p(-p))


def laplace_experiment(
    epsilon: float,
    *,
    sensitivity: float = 1.0,
    noise_sensitivity: float | None = None,
    p: float = 0.0,
    release: str = "recourse",
    name: str = "laplace",
) -> DistinguishingExperiment:
    """Laplace Recourse (Huang et al. 2023, sec. 4.2.2) on the worst-case neighbouring inputs.

    The neighbours are the predicted probabilities ``p`` (D) and ``p + sensitivity`` (D') of one
    query, the largest change the claimed sensitivity allows (0 and 1 by default). The mechanism
    adds Laplace(``noise_sensitivity`` / epsilon) noise (``noise_sensitivity`` defaults to
    ``sensitivity``; a smaller value is a broken mechanism) and clamps to [0, 1], so the outputs
    have atoms at 0 and 1. ``release="probability"`` reads the clamped noisy probability
    (``noisy_probability``); ``release="recourse"`` runs ``LaplaceRecourse.generate`` end to end on
    two one-feature linear models whose probabilities at the query are the two neighbours, and
    reads the signed step of the counterfactual along w, s - f'(x), a monotone function of the
    noisy probability (the unsigned distance |s - f'(x)| would fold p' and 1 - p' together).
    """
    epsilon = check_positive_float(epsilon, "epsilon")
    sensitivity = check_positive_float(sensitivity, "sensitivity")
    noise_sens = sensitivity if noise_sensitivity is None else check_positive_float(noise_sensitivity, "noise_sensitivity")
    probs = (float(p), float(p) + sensitivity)
    if not (0.0 <= probs[0] and probs[1] <= 1.0):
        raise ValueError(f"p and p + sensitivity must lie in [0, 1]; got p={p!r}, sensitivity={sensitivity!r}")
    if release not in ("probability", "recourse"):
        raise ValueError(f"release must be 'probability' or 'recourse'; got {release!r}")
    neighbours = f"predicted probability {probs[0]:g} (D) vs {probs[1]:g} (D')"

    if release == "probability":
        def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
            from recourse_privacy.defenses.laplace import noisy_probability

            return noisy_probability(np.full(n, probs[which]), epsilon, sensitivity=noise_sens, random_state=rng)

        statistic = "noisy probability"
    else:
        models = tuple(_FixedLinearModel(_logit(q)) for q in probs)

        def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
            from diffprivlib.accountant import BudgetAccountant

            from recourse_privacy.defenses.laplace import LaplaceRecourse

            X = np.zeros((n, 1))
            lr = LaplaceRecourse(epsilon=epsilon, sensitivity=noise_sens, accountant=BudgetAccountant(), random_state=rng)
            res = lr.generate(models[which], X)
            return (np.asarray(res.counterfactuals, dtype=np.float64) - X)[:, 0]

        statistic = "signed counterfactual step s - f'(x)"
    return DistinguishingExperiment(name=name, sample=sample, claimed_epsilon=epsilon, statistic=statistic,
                                    neighbours=neighbours)


def broken_laplace_experiment(epsilon: float, *, factor: float = 10.0, **params) -> DistinguishingExperiment:
    """Laplace Recourse with the noise scale divided by ``factor`` while still claiming ``epsilon``.

    The noise is calibrated to sensitivity 1/factor, but neighbouring probabilities differ by 1,
    so the true epsilon is ``factor`` times the claim: the audit must catch it.
    """
    factor = check_positive_float(factor, "factor")
    return laplace_experiment(epsilon, noise_sensitivity=params.pop("sensitivity", 1.0) / factor,
                              name="laplace-broken", **params)


def dpm_canary_data(n_rows: int = 200, n_features: int = 2, data_norm: float = 1.0, random_state: RandomState = 0):
    """Neighbouring training sets for auditing a DP logistic regression; returns (X, y, y_prime).

    Row 0 is the canary ``data_norm * e_1`` with label 1 in D and 0 in D' (a label flip moves the
    loss gradient by the canary's whole augmented norm for every weight vector and leaves the
    Hessian unchanged). The other rows have a zero first coordinate (so only the canary pins the
    weight on e_1), norms <= ``data_norm`` and balanced labels.
    """
    n_rows = check_positive_int(n_rows, "n_rows", minimum=4)
    n_features = check_positive_int(n_features, "n_features", minimum=2)
    data_norm = check_positive_float(data_norm, "data_norm")
    rng = as_generator(random_state)
    X = np.zeros((n_rows, n_features))
    y = np.zeros(n_rows, dtype=np.int64)
    X[0, 0] = data_norm
    y[0] = 1
    y[1:] = np.arange(n_rows - 1) % 2
    Z = rng.normal(size=(n_rows - 1, n_features - 1)) + np.where(y[1:, None] == 1, 0.5, -0.5)
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    X[1:, 1:] = Z / np.maximum(norms, 1.0) * data_norm * rng.uniform(0.25, 1.0, size=(n_rows - 1, 1))
    y_prime = y.copy()
    y_prime[0] = 0
    return X, y, y_prime


def dpm_logistic_experiment(
    epsilon: float,
    *,
    n_rows: int = 200,
    n_features: int = 2,
    data_norm: float = 1.0,
    statistic: str = "logit",
    data_seed: int = 0,
    model_factory: Callable[..., object] | None = None,
    **model_params,
) -> DistinguishingExperiment:
    """DPM (diffprivlib objective-perturbation logistic regression) on a canary label flip.

    Each run trains ``DPLogisticModel(epsilon, data_norm=...)`` (or ``model_factory(epsilon=...,
    data_norm=..., random_state=..., **model_params)``) on D or D' from ``dpm_canary_data`` and
    reads ``statistic`` at the canary: "logit" (w.x + b) or "cfd" (its recourse distance
    |w.x + b| / ||w||_2). One training per run: this sampler loops over runs (each a full DP fit).
    """
    epsilon = check_positive_float(epsilon, "epsilon")
    if statistic not in ("logit", "cfd"):
        raise ValueError(f"statistic must be 'logit' or 'cfd'; got {statistic!r}")
    X, y, y_prime = dpm_canary_data(n_rows, n_features, data_norm, data_seed)
    labels = (y, y_prime)
    query = X[:1]

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        import warnings

        if model_factory is None:
            from recourse_privacy.models.dp import DPLogisticModel as factory
        else:
            factory = model_factory
        seeds = rng.integers(0, 2**31 - 1, size=n)
        out = np.empty(n)
        import diffprivlib.models  # noqa: F401  (load the BLAS that lbfgs uses before limiting it)
        import scipy.optimize  # noqa: F401
        from threadpoolctl import threadpool_limits

        # One BLAS thread: each fit is tiny, and multi-threaded BLAS inside scipy's L-BFGS-B makes
        # it ~20x slower on a busy machine. lbfgs convergence warnings of the noisy objective are
        # expected (the perturbed objective can be unbounded in the unregularised intercept).
        with warnings.catch_warnings(), threadpool_limits(limits=1):
            warnings.simplefilter("ignore")
            for i, s in enumerate(seeds):
                m = factory(epsilon=epsilon, data_norm=data_norm, random_state=int(s), **model_params)
                m.fit(X, labels[which])
                logit = float(np.asarray(m.decision_function(query)).reshape(-1)[0])
                if statistic == "logit":
                    out[i] = logit
                else:
                    w = np.asarray(m.coef_, dtype=np.float64).reshape(-1)
                    out[i] = abs(logit) / max(float(np.linalg.norm(w)), 1e-300)
        return out

    return DistinguishingExperiment(
        name="dpm-logistic", sample=sample, claimed_epsilon=epsilon,
        statistic="logit at the canary" if statistic == "logit" else "recourse distance of the canary",
        neighbours=f"{n_rows} rows x {n_features} features, canary data_norm*e_1 labelled 1 (D) vs 0 (D')",
    )


#: name -> (builder(epsilon, **params) -> DistinguishingExperiment, description)
MECHANISMS: dict[str, tuple[Callable[..., DistinguishingExperiment], str]] = {
    "laplace": (laplace_experiment, "Laplace Recourse (Huang et al. 2023, sec. 4.2.2), probabilities 0 vs 1"),
    "laplace-broken": (broken_laplace_experiment, "Laplace Recourse with the noise scale divided by 10"),
    "dpm-logistic": (dpm_logistic_experiment, "diffprivlib DP logistic regression, canary label flip"),
}


def make_experiment(name: str, epsilon: float, **params) -> DistinguishingExperiment:
    """The distinguishing experiment registered as ``name`` for a mechanism claimed ``epsilon``-DP."""
    if name not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {sorted(MECHANISMS)}; got {name!r}")
    return MECHANISMS[name][0](epsilon, **params)


def audit_dp(name: str, epsilon: float, *, n_trials: int, alpha: float = 0.05, random_state: RandomState = 0,
             **params) -> EpsilonAudit:
    """Audit the registered mechanism ``name`` at claimed ``epsilon`` (what ``audit-dp`` runs)."""
    return make_experiment(name, epsilon, **params).audit(n_trials=n_trials, alpha=alpha, random_state=random_state)
