"""Privacy-budget accounting for recourse: a session that answers queries until its budget is spent.

A :class:`RecourseSession` owns a diffprivlib ``BudgetAccountant`` with ceiling ``budget``
and passes it to its (Laplace) recourse method: every answered row spends the method's
epsilon before any noise is drawn, and a batch that would exceed the ceiling is refused
whole with :class:`~recourse_privacy.errors.BudgetExceededError` naming the budget, the spent and the
requested epsilon.

Composition: the accountant runs with ``slack = 0``, i.e. basic (sequential) composition: k
queries at epsilon each cost k * epsilon, which is exact for pure epsilon-DP mechanisms and
never optimistic. Advanced composition (Dwork, Rothblum and Vadhan 2010; Kairouz et al. 2017,
what diffprivlib applies when given a slack delta') gives
k * eps * (e^eps - 1) / (e^eps + 1) + eps * sqrt(2 k ln(1 / delta')), which only helps when
one accepts an (epsilon, delta) guarantee and asks many queries of small epsilon (k = 1000 at
eps = 0.01 with delta' = 1e-5: 1.57 instead of 10); at eps = 1 it buys little (5,000 queries:
2,650 instead of 5,000) and both are vacuous for membership. Hence basic composition, and
diffprivlib's accountant rather than dp-accounting (whose RDP/PLD accountants pay off for
subsampled Gaussian mechanisms such as DP-SGD, which Opacus accounts for itself in
:class:`~recourse_privacy.models.dp.DPMLPModel`).
"""
from __future__ import annotations

import copy

import numpy as np

from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.validation import check_delta
from recourse_privacy.validation import check_epsilon as _check_epsilon
from recourse_privacy.metrics import theorem2_bound


class RecourseSession:
    """Answer recourse queries for ``model`` with ``method`` until ``budget`` epsilon is spent.

    ``method`` is a recourse method that spends from an ``accountant`` attribute
    (:class:`~recourse_privacy.defenses.laplace.LaplaceRecourse`); the session works on a
    shallow copy wired to its own accountant, so the caller's object is left unchanged (the
    noise stream is shared). ``delta`` is the accountant's delta ceiling (0: pure epsilon-DP);
    composition is basic (see the module docstring).
    """

    def __init__(self, method, model, *, budget: float, delta: float = 0.0):
        from diffprivlib.accountant import BudgetAccountant

        if not hasattr(method, "accountant") or not hasattr(method, "epsilon"):
            raise InvalidInputError(f"method {getattr(method, 'name', method)!r} spends no privacy budget (it has no "
                             "epsilon / accountant); RecourseSession accounts for DP recourse such as LaplaceRecourse")
        self.budget = _check_epsilon(budget, "budget")
        delta = check_delta(delta)
        self.delta = delta
        self.accountant = BudgetAccountant(epsilon=self.budget, delta=delta, slack=0.0)
        self.method = copy.copy(method)
        self.method.accountant = self.accountant
        self.model = model
        self.n_queries = 0
        self.n_refused = 0

    @property
    def spent(self) -> float:
        """Total epsilon spent so far (basic composition)."""
        return float(self.accountant.total()[0])

    @property
    def remaining(self) -> float:
        """Epsilon left before queries are refused."""
        return max(self.budget - self.spent, 0.0)

    def answer(self, X: np.ndarray):
        """Recourse for every row of ``X`` (one query each), or a BudgetExceededError if the batch would exceed the budget."""
        try:
            res = self.method.generate(self.model, X)
        except BudgetExceededError:
            self.n_refused += int(np.asarray(X).shape[0]) if np.ndim(X) == 2 else 1
            raise
        self.n_queries += len(res.valid)
        return res

    def summary(self) -> dict:
        """JSON-ready budget state."""
        return {"budget": self.budget, "spent": self.spent, "remaining": self.remaining,
                "epsilon_per_query": float(self.method.epsilon), "n_queries": self.n_queries,
                "n_refused": self.n_refused, "composition": "basic (sequential): epsilon adds up over queries"}

    def __repr__(self) -> str:
        return (f"RecourseSession(method={getattr(self.method, 'name', '?')!r}, budget={self.budget:g}, "
                f"spent={self.spent:g}, queries={self.n_queries})")


def dp_ba_bound(epsilon: float, delta: float = 0.0) -> float:
    """Theorem 2 of Pawelczyk et al. 2023 (BA <= 1/2 + (1 - e^-eps)/2), extended to (epsilon, delta)-DP.

    With delta > 0, Lemma 1 of its proof becomes Pr[o | in] <= e^eps Pr[o | out] + delta, and
    the same steps give BA <= 1/2 + (1 - e^-eps)/2 + delta e^-eps / 2 (capped at 1).
    """
    delta = check_delta(delta)
    return min(1.0, theorem2_bound(epsilon) + delta * float(np.exp(-float(epsilon))) / 2.0)
