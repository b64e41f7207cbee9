"""Model extraction through a recourse API, against a query budget: fidelity of a copy after N queries.

The adversary sends queries; for each it receives the decision and a counterfactual toward the
other decision (a failed search is reported as such and gives no point). Every call to the API is
one query. The surrogates, a registry like the attacks':

- ``base``: the decisions alone (labels only; Tramer et al. 2016's equation-free retraining);
- ``cf``: the decisions and each counterfactual, labelled with the decision it claims
  (Aivodji, Bolot and Gambs 2020);
- ``dualcf``: half the budget on queries, half on the counterfactual of each counterfactual, a pair
  straddling the boundary from both sides (Wang, Qian, Xu, Li and Huang 2022, DualCF);
- ``cca``: the ``cf`` transfer set with the counterfactual clamping loss (Dissanayake and Dutta
  2024; :mod:`~recourse_privacy.attacks.cca`).

Every surrogate is the same small ReLU network (hidden layers 20 and 10, Dissanayake and Dutta's
choice) trained the same way (:func:`~recourse_privacy.attacks.cca.fit_surrogates`), so the
surrogates differ only in what the answers give them. Fidelity is the share of points on which
the copy and the owner's model agree, on held-out data (never queried) and on uniform samples of
the public domain; each (surrogate, budget) is repeated with fresh queries and its mean reported
with a 95% Student-t interval over the repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.attacks.cca import TransferSet, fit_surrogates
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.registry import Registry
from recourse_privacy.validation import as_generator, check_matrix, check_positive_int, derive_seed

__all__ = [
    "DEFAULT_BUDGETS",
    "SURROGATES",
    "ApiAnswers",
    "ExtractionCurve",
    "ExtractionPoint",
    "NegatedModel",
    "extraction_curve",
    "register_surrogate",
]

DEFAULT_BUDGETS = (20, 50, 100, 200, 400, 1000)
HIDDEN_LAYERS = (20, 10)


@dataclass(frozen=True)
class ApiAnswers:
    """The API's answers for queries ``X``: decisions, counterfactuals (and validity), and, where asked,
    the counterfactual of each counterfactual (DualCF's second query)."""

    X: np.ndarray
    decision: np.ndarray
    cf: np.ndarray
    cf_ok: np.ndarray
    ccf: np.ndarray | None = None
    ccf_ok: np.ndarray | None = None


#: name -> builder(answers, rows, budget) -> TransferSet, where ``rows`` are the adversary's query order
Builder = Callable[[ApiAnswers, np.ndarray, int], TransferSet]
SURROGATES: Registry[Builder] = Registry("surrogate", needs_vocabulary=("counterfactuals", "dual"))


def register_surrogate(name: str, *, description: str, needs=()):
    """Decorator: register ``builder(answers, rows, budget) -> TransferSet`` as extraction surrogate ``name``."""
    return SURROGATES.register(name, description=description, needs=needs)


def _with_cfs(a: ApiAnswers, q: np.ndarray, *, clamp: bool, dual: bool) -> TransferSet:
    d = a.decision[q]
    X, y, c = [a.X[q]], [d], [np.zeros(len(q), bool)]
    ok = a.cf_ok[q]
    X.append(a.cf[q][ok])
    y.append(1 - d[ok])
    c.append(np.full(int(ok.sum()), clamp))
    if dual:
        ok2 = ok & a.ccf_ok[q]
        X.append(a.ccf[q][ok2])
        y.append(d[ok2])
        c.append(np.full(int(ok2.sum()), clamp))
    return TransferSet(np.vstack(X), np.concatenate(y), np.concatenate(c))


@register_surrogate("base", description="the decisions alone: labels only (no counterfactuals)")
def _base(a: ApiAnswers, rows: np.ndarray, budget: int) -> TransferSet:
    q = rows[:budget]
    return TransferSet(a.X[q], a.decision[q], np.zeros(len(q), bool))


@register_surrogate(
    "cf",
    description="decisions and counterfactuals, each labelled with the decision it claims (Aivodji et al. 2020)",
    needs=("counterfactuals",),
)
def _cf(a: ApiAnswers, rows: np.ndarray, budget: int) -> TransferSet:
    return _with_cfs(a, rows[:budget], clamp=False, dual=False)


@register_surrogate(
    "dualcf",
    description="half the queries ask for the counterfactual of a counterfactual (Wang et al. 2022, DualCF)",
    needs=("counterfactuals", "dual"),
)
def _dualcf(a: ApiAnswers, rows: np.ndarray, budget: int) -> TransferSet:
    return _with_cfs(a, rows[: max(budget // 2, 1)], clamp=False, dual=True)


@register_surrogate(
    "cca",
    description="counterfactuals fitted with the clamping loss: only penalised on the wrong side of 0.5 "
    "(Dissanayake and Dutta 2024)",
    needs=("counterfactuals",),
)
def _cca(a: ApiAnswers, rows: np.ndarray, budget: int) -> TransferSet:
    return _with_cfs(a, rows[:budget], clamp=True, dual=False)


class NegatedModel(BaseClassifier):
    """A fitted binary model with its classes swapped: recourse toward the unfavourable class with the
    same method (the counterfactual of an accepted query, DualCF's second query)."""

    def __init__(self, inner):
        self.inner = inner
        self.n_features_in_ = inner.n_features_in_
        self.fitted_ = True
        self.is_linear = bool(getattr(inner, "is_linear", False))
        self.is_differentiable = bool(getattr(inner, "is_differentiable", False))
        if self.is_linear:
            self.coef_ = -np.asarray(inner.coef_, dtype=np.float64)
            self.intercept_ = -float(inner.intercept_)

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Minus the inner model's logit."""
        return -np.asarray(self.inner.decision_function(X), dtype=np.float64)

    def search_logits(self, X: np.ndarray) -> np.ndarray:
        """Minus the inner model's search logits."""
        return -np.asarray(self.inner.search_logits(X), dtype=np.float64)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """1 where the inner model says 0: the classes swapped (ties at logit 0 stay with the inner model's 1)."""
        return 1 - np.asarray(self.inner.predict(X))

    def shifted_logits(self, X, offsets):
        """The inner model's, negated (same error bound)."""
        out = self.inner.shifted_logits(X, offsets)
        return None if out is None else (-out[0], out[1])

    def affine_logits(self, H, A, a0, h_err):
        """The inner model's, negated (same error bound)."""
        out = self.inner.affine_logits(H, A, a0, h_err)
        return None if out is None else (-out[0], out[1])

    def torch_module(self):
        """The inner network with its output negated."""
        import torch

        inner = self.inner.torch_module()

        class _Neg(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = inner

            def forward(self, x):
                return -self.m(x)

        return _Neg().eval()


@dataclass(frozen=True)
class ExtractionPoint:
    """One surrogate at one query budget: fidelity (held-out) with its 95% interval over repeats, accuracy,
    and fidelity on uniform samples of the public domain (nan without one)."""

    attack: str
    queries: int
    fidelity: float
    fidelity_low: float
    fidelity_high: float
    accuracy: float
    domain_fidelity: float = float("nan")
    domain_fidelity_low: float = float("nan")
    domain_fidelity_high: float = float("nan")
    n_repeats: int = 0

    def to_dict(self) -> dict:
        """The CSV / JSON row."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ExtractionCurve:
    """Fidelity against queries for every surrogate, and the query caps they imply."""

    points: tuple[ExtractionPoint, ...]
    n_holdout: int
    n_domain: int
    conventions: Mapping[str, str] = field(default_factory=dict)

    def best_at(self, queries: int) -> ExtractionPoint:
        """The strongest surrogate (highest held-out fidelity) at a budget."""
        return max((p for p in self.points if p.queries == queries), key=lambda p: p.fidelity)

    @property
    def budgets(self) -> tuple[int, ...]:
        """The query budgets, ascending."""
        return tuple(sorted({p.queries for p in self.points}))

    def queries_for(self, level: float) -> int | None:
        """The fewest queries at which some surrogate's mean held-out fidelity reaches ``level`` (None: not reached)."""
        hits = [p.queries for p in self.points if p.fidelity >= level]
        return min(hits) if hits else None

    def sentence(self) -> str:
        """The report's headline: after N queries a copy agrees with the model on X% of applicants."""
        n = self.budgets[-1]
        b = self.best_at(n)
        caps = []
        for level in (0.9, 0.95):
            q = self.queries_for(level)
            if q is None:
                caps.append(f"{level:.0%} not reached in {n}")
            elif q == self.budgets[0]:
                caps.append(f"{level:.0%} fidelity already at the smallest budget tried ({q}): try smaller ones")
            else:
                caps.append(f"{level:.0%} fidelity after {q} queries")
        return (
            f"after {n} queries a copy ({b.attack}) agrees with your model on {b.fidelity:.1%} of applicants "
            f"(95% interval {b.fidelity_low:.1%} to {b.fidelity_high:.1%}); {'; '.join(caps)}: a recourse "
            "service should cap each client below the first of these"
        )

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {
            "points": [p.to_dict() for p in self.points],
            "n_holdout": self.n_holdout,
            "n_domain": self.n_domain,
            "queries_for_90": self.queries_for(0.9),
            "queries_for_95": self.queries_for(0.95),
            "sentence": self.sentence(),
            "conventions": dict(self.conventions),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> ExtractionCurve:
        """Inverse of :meth:`to_dict`."""
        pts = tuple(ExtractionPoint(**{k: (np.nan if v is None else v) for k, v in p.items()}) for p in d["points"])
        return cls(pts, int(d["n_holdout"]), int(d["n_domain"]), dict(d.get("conventions", {})))


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval over repeats (the mean alone for one repeat)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    m = float(v.mean())
    if len(v) < 2:
        return m, m, m
    h = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return m, max(m - h, 0.0), min(m + h, 1.0)


def extraction_curve(
    answer: Callable[[np.ndarray, bool], ApiAnswers],
    n_pool: int,
    target_predict: Callable[[np.ndarray], np.ndarray],
    X_holdout: np.ndarray,
    y_holdout: np.ndarray,
    *,
    X_domain: np.ndarray | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    surrogates: Sequence[str] = ("base", "cf", "dualcf", "cca"),
    repeats: int = 5,
    epochs: int = 300,
    random_state=None,
) -> tuple[ExtractionCurve, Callable[[np.ndarray], np.ndarray]]:
    """Fidelity against queries (module docstring); also the best surrogate at the largest budget
    (its ``predict_proba``, for attribute inference).

    ``answer(rows, dual)``: the API's answers for the adversary's pool rows ``rows`` (indices
    into its pool of ``n_pool`` rows), with the counterfactuals of the counterfactuals where ``dual``.
    Each repeat draws the queries afresh from the pool; the answers of a row are asked once and
    reused by every repeat and budget that queries it.
    """
    budgets = sorted({check_positive_int(b, "query budget") for b in budgets})
    repeats = check_positive_int(repeats, "repeats")
    for s in surrogates:
        SURROGATES.check(s)
    if budgets[-1] > n_pool:
        raise InvalidInputError(f"a budget of {budgets[-1]} queries exceeds the adversary's {n_pool} pool rows")
    X_holdout = check_matrix(X_holdout, "X_holdout")
    rng = as_generator(derive_seed(random_state, 43))
    orders = [rng.permutation(n_pool)[: budgets[-1]] for _ in range(repeats)]
    needed = np.unique(np.concatenate(orders))
    dual = any("dual" in SURROGATES.get(s).needs for s in surrogates)
    ans = answer(needed, dual)
    pos = np.full(n_pool, -1)
    pos[needed] = np.arange(len(needed))
    target_hold = np.asarray(target_predict(X_holdout))
    target_dom = np.asarray(target_predict(X_domain)) if X_domain is not None else None
    points, fitted = [], {}
    y_holdout = np.asarray(y_holdout)
    for b in budgets:  # one batched fit per budget: the sets of a budget have similar lengths (little padding)
        sets = [SURROGATES.get(s).obj(ans, pos[order], b) for s in surrogates for order in orders]
        fitted[b] = fit_surrogates(sets, HIDDEN_LAYERS, epochs=epochs, random_state=derive_seed(random_state, b))
        pred_hold = fitted[b].predict(X_holdout).reshape(len(surrogates), repeats, -1)
        pred_dom = fitted[b].predict(X_domain).reshape(len(surrogates), repeats, -1) if X_domain is not None else None
        for i, s in enumerate(surrogates):
            fid = _interval((pred_hold[i] == target_hold).mean(1))
            acc = float((pred_hold[i] == y_holdout).mean())
            dom = _interval((pred_dom[i] == target_dom).mean(1)) if pred_dom is not None else (np.nan,) * 3
            points.append(ExtractionPoint(s, b, *fid, acc, *dom, n_repeats=repeats))
    curve = ExtractionCurve(
        tuple(points),
        len(X_holdout),
        0 if X_domain is None else len(X_domain),
        {
            "query": "one API call: a decision and a counterfactual toward the other decision (dualcf: half the "
            "budget asks for the counterfactual of a counterfactual)",
            "surrogate": f"ReLU MLP {HIDDEN_LAYERS}, full-batch Adam, {epochs} epochs (Dissanayake and Dutta 2024)",
            "fidelity": "share of points where the surrogate's decision equals the model's; mean and 95% "
            f"Student-t interval over {repeats} repeats of fresh queries",
            "holdout": "the non-member pool (never queried)",
            "domain": "uniform samples of the public domain metadata (numeric: uniform in [lower, upper]; "
            "categorical: a uniform level)",
        },
    )
    best = curve.best_at(budgets[-1])
    k = list(surrogates).index(best.attack) * repeats  # its first repeat
    return curve, lambda X, f=fitted[budgets[-1]], k=k: f.predict_proba(X, k)
