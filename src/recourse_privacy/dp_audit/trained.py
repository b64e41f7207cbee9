"""End-to-end audits of recourse releases with *trained* neighbours, many-run and one-run.

Many-run (Jagielski, Ullman and Oprea 2020): the model is trained on D and on D' = D plus one
canary row, recourse for a fixed query (the canary itself) is released through the full mechanism
(training, then the recourse method, then its noise), and a test reads the whole release: the
move x' - x, hence its direction, its length and the score it encodes. The statistic is the
absolute cosine between the move and the canary's direction, fixed before any run.

Canary: an outlier at the declared norm bound, ``canary_norm * e_1``, on a coordinate no other row
uses (so only the canary pins the weight on it), labelled 0 (no other row says what its label
should be: the label the model can only learn from it).

One-run (Steinke, Nasr and Jagielski, NeurIPS 2023, "Privacy auditing with one (1) training
run"): m canaries ``canary_norm * e_i`` on their own coordinates, each included with probability
1/2, one training run; the auditor scores every canary by the same statistic of its own
released recourse, guesses "in" for the k highest scores and "out" for the k lowest, and counts
correct guesses v of r = 2k. For an epsilon-DP release the number correct is stochastically
dominated by Binomial(r, e^eps / (1 + e^eps)) (their Theorem 3.1 with delta = 0), so the
smallest epsilon under which P[Bin(r, p_eps) >= v] reaches beta is a 1 - beta lower bound.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from recourse_privacy.dp_audit.bounds import DistinguishingExperiment
from recourse_privacy.dp_audit.experiments import CANARY_PARAMS, dpm_canary_data, register_mechanism
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Float
from recourse_privacy.validation import RandomState, as_generator, check_positive_float, check_positive_int

__all__ = ["RELEASES", "OneRunAudit", "one_run_audit", "one_run_bound", "trained_experiment"]


def _logistic(epsilon, data_norm, seed):
    from recourse_privacy.models import make_model

    return make_model("logistic")


def _dp_logistic(epsilon, data_norm, seed):
    from recourse_privacy.models.dp import DPLogisticModel

    return DPLogisticModel(epsilon=epsilon, data_norm=data_norm, regularize_for_budget=False, random_state=seed)


def _dp_logistic_budget(epsilon, data_norm, seed):
    from recourse_privacy.models.dp import DPLogisticModel

    return DPLogisticModel(epsilon=epsilon, data_norm=data_norm, regularize_for_budget=True, random_state=seed)


#: a broken twin's DP logistic regression runs at this many times the claimed epsilon (its noise that much smaller)
BROKEN_EPSILON_FACTOR = 10.0

_BROKEN = "BROKEN on purpose (the audit must flag it): "


def _broken(model_of):
    def build(epsilon, data_norm, seed):
        return model_of(BROKEN_EPSILON_FACTOR * epsilon, data_norm, seed)

    return build


def _laplace(epsilon, seed):
    from diffprivlib.accountant import BudgetAccountant

    from recourse_privacy.defenses.laplace import LaplaceRecourse

    return LaplaceRecourse(epsilon=epsilon, random_state=seed, accountant=BudgetAccountant())


def _linear(epsilon, seed):
    from recourse_privacy.recourse.registry import make_recourse

    return make_recourse("linear")


def _scfe(epsilon, seed):
    from recourse_privacy.recourse.registry import make_recourse

    return make_recourse("scfe")


#: name -> (model builder, recourse builder, whether training is deterministic, what the claim covers)
RELEASES: dict[str, tuple[Callable, Callable, bool, str]] = {
    "lr": (
        _logistic,
        _laplace,
        True,
        "plain Laplace Recourse over a non-private logistic regression (claimed "
        "epsilon-DP per query by Huang et al. 2023)",
    ),
    "dpm-logistic": (
        _dp_logistic,
        _linear,
        False,
        "exact linear recourse over the DP logistic regression with C as given (regularize_for_budget=False)",
    ),
    "dpm-logistic-budget": (
        _dp_logistic_budget,
        _linear,
        False,
        "exact linear recourse over the DP logistic regression as it runs by default (regularised to keep "
        "epsilon / 2: DPLogisticModel(regularize_for_budget=True))",
    ),
    "dpm-lr": (_dp_logistic_budget, _laplace, False, "Laplace Recourse over the DP logistic regression as it runs"),
    "dpm-scfe": (_dp_logistic_budget, _scfe, False, "SCFE (Wachter et al.) over the DP logistic regression as it runs"),
}
# the broken twins of the DP model's releases (positive controls of ``audit --dp-audit``): the same pipeline with the
# DP logistic regression run at BROKEN_EPSILON_FACTOR x epsilon, its noise that much smaller (as DP-SGD's twin divides
# its noise multiplier by 10)
for _name in ("dpm-logistic", "dpm-logistic-budget", "dpm-lr"):
    _m, _r, _det, _what = RELEASES[_name]
    RELEASES[f"{_name}-broken"] = (
        _broken(_m),
        _r,
        _det,
        f"{_BROKEN}the DP logistic regression run at {BROKEN_EPSILON_FACTOR:g} x epsilon (noise / "
        f"{BROKEN_EPSILON_FACTOR:g}); otherwise {_what}",
    )


def _check_release(name: str) -> tuple:
    if name not in RELEASES:
        raise InvalidInputError(f"release must be one of {', '.join(RELEASES)}; got {name!r}")
    return RELEASES[name]


def _check_canary(canary_norm: float | None, data_norm: float) -> float:
    data_norm = check_positive_float(data_norm, "data_norm")
    c = data_norm if canary_norm is None else check_positive_float(canary_norm, "canary_norm")
    if c > data_norm * (1 + 1e-12):
        raise InvalidInputError(
            f"canary_norm {c:g} lies outside the declared data norm {data_norm:g} (data_norm): "
            "the DP claim covers only rows of norm <= data_norm"
        )
    return c


def _abs_cosine(moves: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """|cos(move_i, e_i)| row by row (0 for a zero move)."""
    norms = np.linalg.norm(moves, axis=1)
    return np.abs(np.einsum("ij,ij->i", moves, directions)) / np.where(norms > 0, norms, 1.0)


def trained_experiment(
    release: str,
    epsilon: float,
    *,
    n_rows: int = 200,
    n_features: int = 2,
    data_norm: float = 1.0,
    canary_norm: float | None = None,
    data_seed: int = 0,
) -> DistinguishingExperiment:
    """Many-run audit of ``release`` on D vs D' = D + canary, both trained; claim ``epsilon``.

    D is ``n_rows - 1`` rows of :func:`dpm_canary_data` (first coordinate zero); the canary is
    ``canary_norm * e_1`` labelled 0 (default norm: ``data_norm``, the worst case the claim
    allows; a larger one raises). One run = one training (for the non-private model of ``lr``,
    training is deterministic and done once per neighbour) + the recourse of the canary.
    """
    model_of, recourse_of, deterministic, what = _check_release(release)
    epsilon = check_positive_float(epsilon, "epsilon")
    c = _check_canary(canary_norm, data_norm)
    X, y, _ = dpm_canary_data(n_rows, n_features, data_norm, data_seed)
    X_d, y_d = X[1:], y[1:]
    x_c = np.zeros((1, n_features))
    x_c[0, 0] = c
    data = ((X_d, y_d), (np.vstack([X_d, x_c]), np.append(y_d, 0)))
    e_c = x_c / c

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        Xw, yw = data[which]
        seeds = rng.integers(0, 2**31 - 1, size=(n, 2))
        moves = np.empty((n, n_features))
        with warnings.catch_warnings(), threadpool_limits(limits=1):
            warnings.simplefilter("ignore")
            fixed = model_of(epsilon, data_norm, 0).fit(Xw, yw) if deterministic else None
            for i in range(n):  # one training per run: the mechanism is the whole pipeline
                model = fixed if deterministic else model_of(epsilon, data_norm, int(seeds[i, 0])).fit(Xw, yw)
                res = recourse_of(epsilon, int(seeds[i, 1])).generate(model, x_c)
                moves[i] = res.counterfactuals[0] - x_c[0]
        return _abs_cosine(moves, np.repeat(e_c, n, axis=0))

    return DistinguishingExperiment(
        name=f"trained:{release}",
        sample=sample,
        claimed_epsilon=epsilon,
        statistic="|cos(x' - x, canary direction)| of the canary's released recourse",
        neighbours=f"D: {n_rows - 1} trained rows x {n_features} features; D' = D + canary {c:g} * e_1 labelled 0 "
        f"(both trained); {what}",
    )


# ----------------------------------------------------------------------------- one run


def one_run_bound(n_guesses: int, n_correct: int, beta: float = 0.05) -> float:
    """Steinke et al. (2023), delta = 0: the smallest eps with P[Bin(r, e^eps/(1+e^eps)) >= v] >= beta."""
    from scipy.stats import binom

    r, v = int(n_guesses), int(n_correct)
    if r < 1 or not 0 <= v <= r:
        raise InvalidInputError(f"need 0 <= n_correct <= n_guesses and n_guesses >= 1; got {v} of {r}")

    def tail(eps: float) -> float:
        return float(binom.sf(v - 1, r, 1.0 / (1.0 + np.exp(-eps))))

    if tail(0.0) >= beta:
        return 0.0
    lo, hi = 0.0, 60.0
    if tail(hi) < beta:
        return hi
    for _ in range(100):  # bisection: tail is increasing in eps
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) < beta else (lo, mid)
    return lo


@dataclass(frozen=True)
class OneRunAudit:
    """The one-run audit's outcome: guesses, correct guesses, the lower bound and the verdict."""

    release: str
    claimed_epsilon: float
    epsilon_lower_bound: float
    n_canaries: int
    n_included: int
    n_guesses: int
    n_correct: int
    beta: float
    seconds: float

    @property
    def violates_claim(self) -> bool:
        """True when the audited lower bound exceeds the claimed epsilon."""
        return self.epsilon_lower_bound > self.claimed_epsilon

    @property
    def verdict(self) -> str:
        return "VIOLATES the claim" if self.violates_claim else "consistent with the claim"

    def to_dict(self) -> dict:
        return {**asdict(self), "violates_claim": self.violates_claim, "verdict": self.verdict}


def one_run_audit(
    release: str,
    epsilon: float,
    *,
    n_canaries: int = 1000,
    n_guess: int | None = None,
    n_rows: int = 200,
    data_norm: float = 1.0,
    canary_norm: float | None = None,
    beta: float = 0.05,
    random_state: RandomState = 0,
) -> OneRunAudit:
    """One training run with ``n_canaries`` canaries, each included with probability 1/2 (see the module docstring).

    The model is epsilon-DP in each canary for the whole release (DPM releases), so the bound
    applies with the model's epsilon. Plain LR claims epsilon only per query; its whole release
    (one query per canary) is not covered by that claim, which this audit then tests as written.
    ``n_guess`` canaries are guessed "in" and as many "out" (default: a quarter of them each).
    """
    model_of, recourse_of, _, _ = _check_release(release)
    epsilon = check_positive_float(epsilon, "epsilon")
    m = check_positive_int(n_canaries, "n_canaries", minimum=4)
    k = m // 4 if n_guess is None else check_positive_int(n_guess, "n_guess")
    if 2 * k > m:
        raise InvalidInputError(f"n_guess {k} x 2 exceeds n_canaries {m}")
    c = _check_canary(canary_norm, data_norm)
    if not 0 < beta < 1:
        raise InvalidInputError(f"beta must lie strictly between 0 and 1; got {beta!r}")
    start = time.perf_counter()
    rng = as_generator(random_state)
    X, y, _ = dpm_canary_data(n_rows, 2, data_norm, 0)
    d = 2 + m  # canary i lives on its own coordinate 2 + i
    X_d = np.zeros((n_rows - 1, d))
    X_d[:, 1] = X[1:, 1]
    canaries = c * np.eye(d)[2:]
    included = rng.random(m) < 0.5
    Xw = np.vstack([X_d, canaries[included]])
    yw = np.append(y[1:], np.zeros(int(included.sum()), dtype=np.int64))
    seeds = rng.integers(0, 2**31 - 1, size=2)
    from threadpoolctl import threadpool_limits

    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        model = model_of(epsilon, data_norm, int(seeds[0])).fit(Xw, yw)
        res = recourse_of(epsilon, int(seeds[1])).generate(model, canaries)  # every canary queried once
    scores = _abs_cosine(res.counterfactuals - canaries, canaries / c)
    order = np.argsort(scores, kind="stable")
    guess_out, guess_in = order[:k], order[m - k :]
    correct = int(included[guess_in].sum() + (~included[guess_out]).sum())
    return OneRunAudit(
        release=release,
        claimed_epsilon=epsilon,
        epsilon_lower_bound=one_run_bound(2 * k, correct, beta),
        n_canaries=m,
        n_included=int(included.sum()),
        n_guesses=2 * k,
        n_correct=correct,
        beta=float(beta),
        seconds=time.perf_counter() - start,
    )


def _trained_builder(name: str) -> Callable[..., DistinguishingExperiment]:
    def build(epsilon: float, **params) -> DistinguishingExperiment:
        return trained_experiment(name, epsilon, **params)

    build.__qualname__ = f"trained_experiment[{name}]"
    return build


for _name, (_m, _r, _det, _what) in RELEASES.items():
    register_mechanism(
        f"trained-{_name}",
        description=f"{_what}: D vs D' = D + an outlier canary at the norm bound, both trained, the whole release",
        params={**CANARY_PARAMS, "canary_norm": Float(0, 1e6, low_open=True, optional=True)},
    )(_trained_builder(_name))
