"""Recourse method ``coordinate``: move one feature, the one that reaches the favourable class soonest.

A black-box method (it only calls ``model.predict``), batched over all rows: for steps
t = step, 2 * step, ..., max_steps * step it tries x +/- t e_j for every mutable feature j at
once and stops a row at the first t that the model accepts; bisection then shrinks each accepted
move towards the boundary and the shortest is kept. Its L1 (and L2) cost is the size of that one
move. Each step scores rows x 2d candidates of d features: meant for tens of features, not thousands.
"""

from __future__ import annotations

import time

import numpy as np

from recourse_privacy.recourse import ActionSet, RecourseResult, check_supports, register_recourse
from recourse_privacy.validation import check_matrix


@register_recourse(
    "coordinate",
    description="black-box: the smallest move along one feature that the model "
    "accepts (grid of steps, then bisection); example plugin",
)
class CoordinateRecourse:
    """Smallest accepted move along a single feature; rows with no such move keep their factual (invalid)."""

    def __init__(
        self, *, step: float = 0.1, max_steps: int = 100, n_bisect: int = 20, action_set: ActionSet | None = None
    ):
        self.step, self.max_steps, self.n_bisect = float(step), int(max_steps), int(n_bisect)
        self.action_set = action_set

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X`` (rows the model already accepts are returned unchanged)."""
        check_supports(self, model)  # raises if the model lacks something this method needs (here: nothing)
        t0 = time.perf_counter()
        X = check_matrix(X, n_features=model.n_features_in_)
        n, d = X.shape
        aset = self.action_set or ActionSet.unconstrained(d)
        # candidate moves: +e_j for every mutable j, -e_j for every mutable j that may decrease
        plus, minus = np.flatnonzero(aset.mutable), np.flatnonzero(aset.mutable & ~aset.increasing)
        moves = np.concatenate([np.eye(d)[plus], -np.eye(d)[minus]])  # (m, d)
        X_cf, n_iter = X.copy(), np.zeros(n, dtype=np.int64)
        todo = np.flatnonzero(model.predict(X) == 0) if n else np.zeros(0, dtype=int)
        n_iter[todo] = -1
        for k in range(1, self.max_steps + 1):
            if not len(todo) or not len(moves):
                break
            cand = self._moved(X[todo], np.full((len(todo), len(moves)), k * self.step), moves, aset)  # (r, m, d)
            ok = (model.predict(cand.reshape(-1, d)) == 1).reshape(len(todo), len(moves))
            hit = ok.any(axis=1)
            rows, ok = todo[hit], ok[hit]
            # bisect every accepted move of these rows in ((k - 1) * step, k * step], keep the shortest
            lo, hi = np.full(ok.shape, (k - 1) * self.step), np.full(ok.shape, k * self.step)
            for _ in range(self.n_bisect):
                mid = (lo + hi) / 2
                acc = (model.predict(self._moved(X[rows], mid, moves, aset).reshape(-1, d)) == 1).reshape(ok.shape)
                hi, lo = np.where(acc, mid, hi), np.where(acc, lo, mid)
            hi[~ok] = np.inf
            best = hi.argmin(axis=1)
            X_cf[rows] = aset.project(X[rows] + hi[np.arange(len(rows)), best, None] * moves[best], X[rows])
            n_iter[rows] = k
            todo = todo[~hit]
        valid = model.predict(X_cf) == 1 if n else np.zeros(0, dtype=bool)
        return RecourseResult(
            X,
            X_cf,
            valid,
            self.name,
            n_iter=n_iter,
            seconds=time.perf_counter() - t0,
            info={"step": self.step, "max_steps": self.max_steps, "n_bisect": self.n_bisect},
        )

    @staticmethod
    def _moved(X, t, moves, aset):
        """Rows of ``X`` (r, d) moved by ``t[i, j]`` along ``moves[j]``, projected onto the action set: (r, m, d)."""
        return aset.project(X[:, None, :] + t[..., None] * moves[None], X[:, None, :])
