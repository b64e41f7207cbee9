"""Exact recourse for linear models: the closed-form minimum-cost move across the boundary."""

from __future__ import annotations

import numpy as np

from recourse_privacy.hyperparams import Float
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, check_norm, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse


@register_recourse("linear", description="exact closed-form recourse for linear models", needs=("linear",), cost=0.1)
class LinearRecourse:
    """Closed-form recourse for a linear logit w.x + b (Pawelczyk et al. 2023 sec. 6.3; Huang et al. 2023 sec. 4.2.1).

    ``norm="l2"`` projects onto the hyperplane w.x + b = margin along w restricted to the
    mutable features: x' = x + (margin - w.x - b) / ||w_m||^2 * w_m, at L2 cost
    |w.x + b - margin| / ||w_m||_2. ``norm="l1"`` moves only the mutable feature with the
    largest |w_j|, at L1 cost |w.x + b - margin| / max|w_m| (the L1-optimal solution).
    ``margin`` (a logit, default 1e-6) puts x' just on the accepted side so that it is valid
    in floating point. Points already accepted are returned unchanged. Only immutability is
    honoured exactly: bounds and monotone directions have no closed form here.

    With an ``action_set`` that has one-hot groups, "exact" covers this search space: at
    most one mutable group switched to another of its levels (every level of every group,
    enumerated for all rows at once), plus the closed-form move above on the mutable
    features outside the groups; the cheapest in ``norm`` (group change and continuous move
    together) wins. Integer features move continuously here; the driver
    (:func:`~recourse_privacy.recourse.base.generate_recourse`) rounds them and repairs rows
    that rounding pushed back across the boundary, so the released cost may exceed the
    optimum by up to one integer step per feature.
    """

    #: closed form: cheaper to compute again than to hash its query points (recourse_privacy.cache)
    cache_results = False

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {"margin": Float(0, 1e6)}

    def __init__(self, *, norm: str = "l2", margin: float = 1e-6, action_set: ActionSet | None = None):
        self.norm = check_norm(norm)
        self.margin = margin
        self.action_set = action_set

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X`` under the linear ``model``."""
        return generate_recourse(self, model, X, info={"norm": self.norm, "margin": self.margin})

    def _search(self, model, X: np.ndarray, state=None) -> SearchOutput:
        """The closed-form move of every row (rows already accepted get a zero move)."""
        w = np.asarray(model.coef_, dtype=np.float64)
        mutable = self.action_set.mutable if self.action_set is not None else np.ones_like(w, dtype=bool)
        w_m = np.where(mutable, w, 0.0)
        gap = self.margin - model.decision_function(X)  # > 0 where a move is needed
        need = gap > 0
        if self.action_set is not None and self.action_set.groups:
            return SearchOutput(self._with_groups(X, w, gap, need))
        delta = np.zeros_like(X)
        if self.norm == "l2":
            sq = float(w_m @ w_m)
            if sq > 0:
                delta = np.outer(np.where(need, gap, 0.0) / sq, w_m)
        else:
            j = int(np.argmax(np.abs(w_m)))
            if w_m[j] != 0:
                delta[:, j] = np.where(need, gap, 0.0) / w_m[j]
        return SearchOutput(X + delta)

    def _with_groups(self, X: np.ndarray, w: np.ndarray, gap: np.ndarray, need: np.ndarray) -> np.ndarray:
        """Cheapest of: no switch or one group switched to one level, each plus the closed-form continuous move."""
        a = self.action_set
        w_c = np.where(a.mutable & ~a.in_group, w, 0.0)
        configs = [(None, None)]  # (group, level vector)
        for g in a.groups:
            if a.immutable[g.index].any():
                continue
            levels = [np.where(np.arange(g.size) == k, g.on, g.off) for k in range(g.size)]
            configs += [(g, v) for v in levels + ([g.off] if g.allow_none else [])]
        n = len(X)
        dz = np.zeros((n, len(configs)))  # change of the logit from the group switch
        group_cost = np.zeros((n, len(configs)))
        for c, (g, v) in enumerate(configs):
            if g is not None:
                step = v - X[:, g.index]
                dz[:, c] = step @ w[g.index]
                group_cost[:, c] = (step**2).sum(axis=1) if self.norm == "l2" else np.abs(step).sum(axis=1)
        rest = np.maximum(gap[:, None] - dz, 0.0)  # logit still to gain on the continuous features
        scale = float(np.sqrt(w_c @ w_c)) if self.norm == "l2" else float(np.abs(w_c).max(initial=0.0))
        if scale > 0:
            move = rest / scale
        else:
            move = np.where(rest > 0, np.inf, 0.0)
        cost = np.sqrt(group_cost + move**2) if self.norm == "l2" else group_cost + move
        best = np.argmin(cost, axis=1)
        out = X.copy()
        for c, (g, v) in enumerate(configs):
            rows = np.flatnonzero(need & (best == c) & np.isfinite(cost[:, c]))
            if g is not None and len(rows):
                out[np.ix_(rows, g.index)] = v
        r = np.where(need & np.isfinite(cost[np.arange(n), best]), rest[np.arange(n), best], 0.0)
        if scale > 0 and self.norm == "l2":
            out += np.outer(r / scale**2, w_c)
        elif scale > 0:
            j = int(np.argmax(np.abs(w_c)))
            out[:, j] += r / w_c[j]
        return out
