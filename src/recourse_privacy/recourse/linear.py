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
    in floating point. Points already accepted are returned unchanged.

    With an ``action_set`` the move stays in its box, exactly: each feature j may move by
    delta_j in [l_j, u_j] (0 for an immutable feature, l_j >= 0 for an increase-only one, the
    range widened to hold the factual as :meth:`ActionSet.project` does). The L2 optimum of
    min ||delta|| s.t. w.delta >= gap in that box is delta_j = clip(lambda w_j, l_j, u_j) for
    the smallest lambda >= 0 that closes the gap (KKT; w.clip(lambda w, l, u) is nondecreasing
    in lambda, found by bisection for all rows at once, on the side that closes it). The L1
    optimum is the fractional knapsack: the features by decreasing |w_j|, each moved to its
    bound until the gap closes. A row whose box cannot close the gap gets the largest move the
    box allows, and the model rejects it (invalid).

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
        if self.action_set is not None and _has_box(self.action_set):
            lo, hi = _move_box(self.action_set, X)
            move = _box_move_l2 if self.norm == "l2" else _box_move_l1
            return SearchOutput(X + move(w, np.where(need, gap, 0.0), lo, hi))
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


def _has_box(a: ActionSet) -> bool:
    """Whether ``a`` constrains a move beyond immutability (a range or an increase-only feature)."""
    return bool(a.increasing.any() or np.isfinite(a.lower).any() or np.isfinite(a.upper).any())


def _move_box(a: ActionSet, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the interval [lo, hi] (lo <= 0 <= hi) each feature may move by under ``a`` (as ActionSet.project)."""
    lo = np.minimum(a.lower, X) - X
    hi = np.maximum(a.upper, X) - X
    lo = np.where(a.increasing, 0.0, lo)
    return np.where(a.immutable, 0.0, lo), np.where(a.immutable, 0.0, hi)


def _box_move_l2(w: np.ndarray, gap: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """delta = clip(lambda w, lo, hi), with the smallest lambda >= 0 whose logit gain w.delta reaches ``gap``."""

    def gain(lam):
        return (np.clip(lam[:, None] * w, lo, hi) * w).sum(axis=1)

    bound = np.where(w > 0, hi, np.where(w < 0, lo, 0.0))  # how far each feature may help
    with np.errstate(divide="ignore", invalid="ignore"):  # lambda where each feature reaches its bound
        reach = np.where(w != 0, bound / np.where(w != 0, w, 1.0), 0.0)
    free = np.isinf(reach)  # no bound in the helpful direction
    top = np.max(np.where(free, 0.0, reach), axis=1, initial=0.0)
    # past every bound only the free features still gain, lambda * their sum of w_j^2: enough lambda for any gap
    sq_free = (np.where(free, w * w, 0.0)).sum(axis=1)
    top = top + np.where(sq_free > 0, gap / np.where(sq_free > 0, sq_free, 1.0), 0.0)
    low, high = np.zeros(len(gap)), np.where(gap > 0, top * (1 + 1e-12) + 1e-300, 0.0)
    for _ in range(200):  # bisection: high always closes the gap where the box can
        mid = 0.5 * (low + high)
        ok = gain(mid) >= gap
        high, low = np.where(ok, mid, high), np.where(ok, low, mid)
        if np.all(high - low <= 1e-15 * np.maximum(high, 1e-300)):
            break
    return np.where((gap > 0)[:, None], np.clip(high[:, None] * w, lo, hi), 0.0)


def _box_move_l1(w: np.ndarray, gap: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The fractional knapsack: features by decreasing |w_j|, each to its bound, until the gain reaches ``gap``."""
    order = np.argsort(-np.abs(w), kind="stable")
    step = np.where(w > 0, hi, np.where(w < 0, lo, 0.0))[:, order]  # the full move of each feature that helps
    cap = step * w[order]  # its logit gain (>= 0)
    before = np.zeros_like(cap)  # gain of the features ahead of it (inf after a free one)
    before[:, 1:] = np.cumsum(cap, axis=1)[:, :-1]
    with np.errstate(invalid="ignore", divide="ignore"):  # inf - inf, inf / inf where a free feature is passed
        share = np.clip((gap[:, None] - before) / np.where(cap > 0, cap, 1.0), 0.0, 1.0)
        share = np.where(cap > 0, share, 0.0)
        share = np.where(np.isinf(step), np.where(gap[:, None] > before, 1.0, 0.0), share)
        moved = np.where(np.isinf(step), np.where(share > 0, (gap[:, None] - before) / w[order], 0.0), share * step)
    delta = np.zeros_like(moved)
    delta[:, order] = np.nan_to_num(moved, nan=0.0, posinf=0.0, neginf=0.0)
    return delta
