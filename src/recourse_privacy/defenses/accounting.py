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

Concurrency: :meth:`RecourseSession.answer` checks and spends under one lock, so concurrent
callers of one session can never spend past its budget together. A budget shared by several
processes (several sessions, workers, services) lives in a
:class:`~recourse_privacy.accounting.QueryLedger` (an SQLite file; see
:mod:`recourse_privacy.accounting`, which also holds a release's budget split,
:class:`~recourse_privacy.accounting.ReleaseBudget`).
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import numpy as np

from recourse_privacy.accounting import _UNITS, QueryLedger, _units
from recourse_privacy.deprecation import renamed_names
from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.metrics import theorem2_bound
from recourse_privacy.validation import check_delta, check_matrix
from recourse_privacy.validation import check_epsilon as _check_epsilon

# _UNITS and _units stay importable here: the recourse service's ledger counts in the same units
__all__ = ["RecourseSession", "dp_ba_bound"]


class RecourseSession:
    """Answer recourse queries for ``model`` with ``method`` until ``budget`` epsilon is spent.

    ``method`` is a recourse method that spends from an ``accountant`` attribute
    (:class:`~recourse_privacy.defenses.laplace.LaplaceRecourse`); the session works on a
    shallow copy wired to its own accountant, so the caller's object is left unchanged (the
    noise stream is shared). ``delta`` is the accountant's delta ceiling (0: pure epsilon-DP);
    composition is basic (see the module docstring). ``answer`` checks and spends under a lock,
    so threads sharing the session cannot overspend it; ``ledger`` (a path or a
    :class:`QueryLedger`) shares the budget with other processes: every batch is first spent
    there, atomically, and refused whole if it does not fit.
    """

    def __init__(
        self, method, model, *, budget: float, delta: float = 0.0, ledger: str | Path | QueryLedger | None = None
    ):
        from diffprivlib.accountant import BudgetAccountant

        if not hasattr(method, "accountant") or not hasattr(method, "epsilon"):
            raise InvalidInputError(
                f"method {getattr(method, 'name', method)!r} spends no privacy budget (it has no "
                "epsilon / accountant); RecourseSession accounts for DP recourse such as LaplaceRecourse"
            )
        self.budget = _check_epsilon(budget, "budget")
        delta = check_delta(delta)
        self.delta = delta
        # the session's exact integer count (or the shared ledger) is the authority; diffprivlib's
        # accountant, which the method spends from, only keeps the running total (its float sums
        # would refuse the 20th query of 0.1 in a budget of 2.0)
        self.accountant = BudgetAccountant(epsilon=float("inf"), delta=delta, slack=0.0)
        self._spent_units = 0
        self.method = copy.copy(method)
        self.method.accountant = self.accountant
        self.model = model
        self.n_queries = 0
        self.n_refused = 0
        self._lock = threading.RLock()
        self.ledger = ledger if isinstance(ledger, QueryLedger) or ledger is None else QueryLedger(ledger, self.budget)

    @property
    def spent(self) -> float:
        """Total epsilon spent so far (basic composition); with a ledger, by every process sharing it."""
        with self._lock:
            if self.ledger is not None:
                return self.ledger.spent
            return self._spent_units / _UNITS

    @property
    def remaining(self) -> float:
        """Epsilon left before queries are refused."""
        return max(self.budget - self.spent, 0.0)

    def answer(self, X: np.ndarray):
        """Recourse for every row of ``X`` (one query each), or a BudgetExceededError if the batch would exceed the budget."""
        # bad input is refused before anything is spent: a malformed query must not cost the caller budget
        X = check_matrix(X, "X", n_features=getattr(self.model, "n_features_in_", None))
        n = int(X.shape[0])
        with self._lock:  # check and spend as one step: concurrent callers cannot overspend
            eps = float(self.method.epsilon)
            cost = _units(n * eps, up=True)
            try:
                if self.ledger is not None and n > 0:
                    self.ledger.spend(n * eps)
                elif self._spent_units + cost > _units(self.budget, up=False):
                    spent = self._spent_units / _UNITS
                    raise BudgetExceededError(
                        f"privacy budget exceeded: the batch asks for epsilon {n * eps:g} ({n} recourse "
                        f"quer{'y' if n == 1 else 'ies'} at epsilon {eps:g}), but the budget is epsilon "
                        f"{self.budget:g} and {spent:g} is already spent ({max(self.budget - spent, 0.0):g} remains); "
                        "the batch was refused and no noise was drawn"
                    )
                res = self.method.generate(self.model, X)
            except BudgetExceededError:
                self.n_refused += n
                raise
            self._spent_units += cost
            self.n_queries += len(res.valid)
            return res

    def summary(self) -> dict:
        """JSON-ready budget state."""
        return {
            "budget": self.budget,
            "spent": self.spent,
            "ledger": None if self.ledger is None else str(self.ledger.path),
            "remaining": self.remaining,
            "epsilon_per_query": float(self.method.epsilon),
            "n_queries": self.n_queries,
            "n_refused": self.n_refused,
            "composition": "basic (sequential): epsilon adds up over queries",
        }

    def __repr__(self) -> str:
        return (
            f"RecourseSession(method={getattr(self.method, 'name', '?')!r}, budget={self.budget:g}, "
            f"spent={self.spent:g}, queries={self.n_queries})"
        )


def dp_ba_bound(epsilon: float, delta: float = 0.0) -> float:
    """Theorem 2 of Pawelczyk et al. 2023 (BA <= 1/2 + (1 - e^-eps)/2), extended to (epsilon, delta)-DP.

    With delta > 0, Lemma 1 of its proof becomes Pr[o | in] <= e^eps Pr[o | out] + delta, and
    the same steps give BA <= 1/2 + (1 - e^-eps)/2 + delta e^-eps / 2 (capped at 1).
    """
    delta = check_delta(delta)
    return min(1.0, theorem2_bound(epsilon) + delta * float(np.exp(-float(epsilon))) / 2.0)


#: the old name of the query ledger warns
__getattr__ = renamed_names(
    __name__,
    {
        "BudgetLedger": (
            "recourse_privacy.defenses.accounting.BudgetLedger is renamed recourse_privacy.accounting.QueryLedger",
            QueryLedger,
        )
    },
)
