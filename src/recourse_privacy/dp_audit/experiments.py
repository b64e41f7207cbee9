"""Ready-made distinguishing experiments for the empirical epsilon audit (:mod:`recourse_privacy.dp_audit.bounds`).

``MECHANISMS``: Laplace Recourse on the worst-case neighbouring probabilities (Huang et al. 2023,
sec. 4.2.2), a deliberately broken Laplace Recourse (noise scale divided by 10), and diffprivlib's
objective-perturbation logistic regression (DPM) on two datasets that differ in the label of one
canary row.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from recourse_privacy.defenses.laplace import LaplaceRecourse, noisy_probability
from recourse_privacy.dp_audit.bounds import DistinguishingExperiment, EpsilonAudit
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Choice, Float, Int, Param, check_params
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.models.dp import DPLogisticModel
from recourse_privacy.registry import Registry
from recourse_privacy.validation import (
    MAX_SEED,
    RandomState,
    as_generator,
    check_positive_float,
    check_positive_int,
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
    name: str = "laplace-score",
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
    noise_sens = (
        sensitivity if noise_sensitivity is None else check_positive_float(noise_sensitivity, "noise_sensitivity")
    )
    probs = (float(p), float(p) + sensitivity)
    if not (0.0 <= probs[0] and probs[1] <= 1.0):
        raise InvalidInputError(f"p and p + sensitivity must lie in [0, 1]; got p={p!r}, sensitivity={sensitivity!r}")
    if release not in ("probability", "recourse"):
        raise InvalidInputError(f"release must be 'probability' or 'recourse'; got {release!r}")
    neighbours = f"predicted probability {probs[0]:g} (D) vs {probs[1]:g} (D')"

    if release == "probability":

        def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
            return noisy_probability(np.full(n, probs[which]), epsilon, sensitivity=noise_sens, random_state=rng)

        statistic = "noisy probability"
    else:
        models = tuple(_FixedLinearModel(_logit(q)) for q in probs)

        def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
            from diffprivlib.accountant import BudgetAccountant

            X = np.zeros((n, 1))
            lr = LaplaceRecourse(
                epsilon=epsilon, sensitivity=noise_sens, accountant=BudgetAccountant(), random_state=rng
            )
            res = lr.generate(models[which], X)
            return (np.asarray(res.counterfactuals, dtype=np.float64) - X)[:, 0]

        statistic = "signed counterfactual step s - f'(x)"
    return DistinguishingExperiment(
        name=name, sample=sample, claimed_epsilon=epsilon, statistic=statistic, neighbours=neighbours
    )


def broken_laplace_experiment(epsilon: float, *, factor: float = 10.0, **params) -> DistinguishingExperiment:
    """Laplace Recourse with the noise scale divided by ``factor`` while still claiming ``epsilon``.

    The noise is calibrated to sensitivity 1/factor, but neighbouring probabilities differ by 1,
    so the true epsilon is ``factor`` times the claim: the audit must catch it.
    """
    factor = check_positive_float(factor, "factor")
    return laplace_experiment(
        epsilon, noise_sensitivity=params.pop("sensitivity", 1.0) / factor, name="laplace-score-broken", **params
    )


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
        raise InvalidInputError(f"statistic must be 'logit' or 'cfd'; got {statistic!r}")
    X, y, y_prime = dpm_canary_data(n_rows, n_features, data_norm, data_seed)
    labels = (y, y_prime)
    query = X[:1]

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        import warnings

        if model_factory is None:
            factory = DPLogisticModel
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
        name="dpm-logistic-label-flip",
        sample=sample,
        claimed_epsilon=epsilon,
        statistic="logit at the canary" if statistic == "logit" else "recourse distance of the canary",
        neighbours=f"{n_rows} rows x {n_features} features, canary data_norm*e_1 labelled 1 (D) vs 0 (D')",
    )


#: name -> builder(epsilon, **params) -> DistinguishingExperiment: the mechanisms ``audit-dp`` audits, each
#: registered where it is defined (here the scalar ones; :mod:`~recourse_privacy.dp_audit.trained` the
#: trained-neighbour releases); ``recourse-privacy list mechanism`` shows them
MECHANISMS: Registry[Callable[..., DistinguishingExperiment]] = Registry(
    "DP-audit mechanism",
    builtins=(
        "recourse_privacy.dp_audit.experiments",
        "recourse_privacy.dp_audit.trained",
        "recourse_privacy.dp_audit.releases",
    ),
)


def register_mechanism(name: str, *, description: str, params: dict[str, Param] | None = None, replace: bool = False):
    """Decorator: register a builder ``(epsilon, **params) -> DistinguishingExperiment`` for ``audit-dp``.

    ``params``: the keyword parameters a user may pass (``audit-dp --param KEY=VALUE``), their types and
    ranges (:mod:`recourse_privacy.hyperparams`), checked before any run.
    """
    return MECHANISMS.register(name, description=description, replace=replace, params=dict(params or {}))


#: the canary data's parameters (:func:`dpm_canary_data`), shared by the experiments that train on it
CANARY_PARAMS = {
    "n_rows": Int(4, 100_000),
    "n_features": Int(2, 1000),
    "data_norm": Float(0, 1e6, low_open=True),
    "data_seed": Int(0, MAX_SEED),
}
_LAPLACE_PARAMS = {
    "sensitivity": Float(0, 1, low_open=True),
    "noise_sensitivity": Float(0, 1e6, low_open=True, optional=True),
    "p": Float(0, 1),
    "release": Choice("probability", "recourse"),
}

register_mechanism(
    "laplace-score",
    description="the scalar Laplace mechanism on LR's score only: one query, hand-set probabilities 0 vs 1 (not "
    "the release: see trained-lr)",
    params=_LAPLACE_PARAMS,
)(laplace_experiment)
register_mechanism(
    "laplace-score-broken",
    description="laplace-score with the noise scale divided by 10",
    params={
        **{k: v for k, v in _LAPLACE_PARAMS.items() if k != "noise_sensitivity"},  # it sets the noise itself
        "factor": Float(0, 1e6, low_open=True),
    },
)(broken_laplace_experiment)
register_mechanism(
    "dpm-logistic-label-flip",
    description="diffprivlib DP logistic regression, canary label flip, the logit at the canary",
    params={
        **CANARY_PARAMS,
        "statistic": Choice("logit", "cfd"),
        **{k: v for k, v in DPLogisticModel.PARAMS.items() if k not in ("epsilon", "data_norm")},
    },
)(dpm_logistic_experiment)


#: names before the trained-neighbour audits existed: they audited the score, not the release
RENAMED = {
    "laplace": "laplace-score",
    "laplace-broken": "laplace-score-broken",
    "dpm-logistic": "dpm-logistic-label-flip",
}


def make_experiment(name: str, epsilon: float, **params) -> DistinguishingExperiment:
    """The distinguishing experiment registered as ``name`` for a mechanism claimed ``epsilon``-DP."""
    if name in RENAMED:
        raise InvalidInputError(
            f"mechanism {name!r} is now {RENAMED[name]!r} (it audits "
            f"{MECHANISMS.get(RENAMED[name]).description}); the whole release with trained neighbours is "
            "audited by trained-lr, trained-dpm-logistic, trained-dpm-lr, trained-dpm-scfe"
        )
    if name not in MECHANISMS:
        raise InvalidInputError(f"mechanism must be one of {sorted(MECHANISMS)}; got {name!r}")
    check_mechanism_params(name, params)
    return MECHANISMS.get(name).obj(epsilon, **params)


def check_mechanism_params(name: str, params: dict) -> None:
    """Refuse a parameter ``name`` does not take, or one outside its range, naming the ones it takes (before any run)."""
    accepted = MECHANISMS.get(name).meta.get("params", {})
    unknown = [k for k in params if k not in accepted]
    if unknown:
        takes = "; ".join(f"{k}: {p.describe()}" for k, p in accepted.items()) or "none"
        raise InvalidInputError(
            f"mechanism {name!r} has no parameter {unknown[0]!r} (--param); its parameters are {takes}"
        )
    check_params(f"mechanism {name!r} (--param)", params, accepted)


def audit_dp(
    name: str, epsilon: float, *, n_trials: int, alpha: float = 0.05, random_state: RandomState = 0, **params
) -> EpsilonAudit:
    """Audit the registered mechanism ``name`` at claimed ``epsilon`` (what ``audit-dp`` runs)."""
    return make_experiment(name, epsilon, **params).audit(n_trials=n_trials, alpha=alpha, random_state=random_state)
