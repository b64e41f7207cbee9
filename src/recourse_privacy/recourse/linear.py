"""Exact recourse for linear models: the closed-form minimum-cost move across the boundary."""

from __future__ import annotations

import numpy as np

from recourse_privacy.hyperparams import Float
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, check_norm, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse


@register_recourse("linear", description="exact closed-form recourse for linear models", needs=("linear",))
class LinearRecourse:
    """Closed-form recourse for a linear logit w.x + b (Pawelczyk et al. 2023 sec. 6.3; Huang et al. 2023 sec. 4.2.1).

    ``norm="l2"`` projects onto the hyperplane w.x + b = margin along w restricted to the
    mutable features: x' = x + (margin - w.x - b) / ||w_m||^2 * w_m, at L2 cost
    |w.x + b - margin| / ||w_m||_2. ``norm="l1"`` moves only the mutable feature with the
    largest |w_j|, at L1 cost |w.x + b - margin| / max|w_m| (the L1-optimal solution).
    ``margin`` (a logit, default 1e-6) puts x' just on the accepted side so that it is valid
    in floating point. Points already accepted are returned unchanged. Only immutability is
    honoured exactly: bounds and monotone directions have no closed form here.
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
