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
processes (several sessions, workers, services) lives in a :class:`BudgetLedger`: an SQLite file
whose check-and-spend is one ``BEGIN IMMEDIATE`` transaction (a database-wide write lock), so
that processes hammering one budget never overspend it, and whose committed spends survive a
``kill -9`` (SQLite's journal rolls back a transaction interrupted half-way).
"""

from __future__ import annotations

import copy
import math
import os
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.metrics import theorem2_bound
from recourse_privacy.validation import check_delta, check_matrix
from recourse_privacy.validation import check_epsilon as _check_epsilon

#: epsilon is kept in integer units of 1e-9 in the ledger, so that sums are exact (no float drift)
_UNITS = 10**9


def _units(epsilon: float, *, up: bool) -> int:
    x = epsilon * _UNITS
    return math.ceil(x - 1e-6) if up else math.floor(x + 1e-6)


class BudgetLedger:
    """A privacy budget shared between threads and processes: an SQLite file of every spend.

    :meth:`spend` checks the remaining budget and records the spend in one exclusive
    transaction; a spend that would exceed ``budget`` raises :class:`BudgetExceededError` and
    records nothing. Amounts are kept in integer units of 1e-9 epsilon (costs rounded up, the
    budget down), so the total never exceeds the budget through rounding. Opening an existing
    ledger with another ``budget`` is an error (a budget is fixed when the ledger is created).
    """

    def __init__(self, path: str | Path, budget: float, *, timeout: float = 60.0):
        self.path = Path(path)
        self.budget = _check_epsilon(budget, "budget")
        self.timeout = float(timeout)
        self._budget_units = _units(self.budget, up=False)
        self._local = threading.local()
        con = self._connect()
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'budget_units'").fetchone()
        except sqlite3.OperationalError:  # a new ledger: no table yet
            row = None
        if row is not None:
            self._check_budget(row[0])
            return
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            con.execute(
                "CREATE TABLE IF NOT EXISTS spends (id INTEGER PRIMARY KEY, units INTEGER NOT NULL, "
                "pid INTEGER, at REAL)"
            )
            row = con.execute("SELECT value FROM meta WHERE key = 'budget_units'").fetchone()
            if row is None:
                con.execute("INSERT INTO meta VALUES ('budget_units', ?)", (self._budget_units,))
            else:
                self._check_budget(row[0])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _check_budget(self, stored_units: int) -> None:
        if stored_units != self._budget_units:
            raise InvalidInputError(
                f"the ledger {self.path} holds a budget of epsilon {stored_units / _UNITS:g}, not "
                f"{self.budget:g}; a budget is fixed when its ledger is created"
            )

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
                con.execute("PRAGMA synchronous = FULL")
            except (sqlite3.Error, OSError) as err:
                raise InvalidInputError(f"cannot open the budget ledger {self.path}: {err}") from None
            self._local.con, self._local.pid = con, os.getpid()
        return con

    def spend(self, epsilon: float) -> float:
        """Record a spend of ``epsilon`` if it fits in the budget, atomically; return the total spent after it."""
        cost = _units(_check_epsilon(epsilon, "epsilon", allow_zero=True), up=True)
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")  # the database's write lock: one check-and-spend at a time
        try:
            spent = con.execute("SELECT COALESCE(SUM(units), 0) FROM spends").fetchone()[0]
            if spent + cost > self._budget_units:
                con.execute("ROLLBACK")
                raise BudgetExceededError(
                    f"privacy budget exceeded: asked for epsilon {epsilon:g}, but the budget is epsilon "
                    f"{self.budget:g} and {spent / _UNITS:g} is already spent ({(self._budget_units - spent) / _UNITS:g}"
                    f" remains; ledger {self.path}); nothing was released"
                )
            con.execute("INSERT INTO spends (units, pid, at) VALUES (?, ?, ?)", (cost, os.getpid(), time.time()))
            con.execute("COMMIT")
        except BudgetExceededError:
            raise
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return (spent + cost) / _UNITS

    @property
    def spent(self) -> float:
        """Total epsilon spent, by every process."""
        return self._connect().execute("SELECT COALESCE(SUM(units), 0) FROM spends").fetchone()[0] / _UNITS

    @property
    def n_spends(self) -> int:
        """Number of recorded spends."""
        return int(self._connect().execute("SELECT COUNT(*) FROM spends").fetchone()[0])

    @property
    def remaining(self) -> float:
        return max(self._budget_units / _UNITS - self.spent, 0.0)

    def __getstate__(self) -> dict:  # picklable: a process opens its own connection
        return {"path": self.path, "budget": self.budget, "timeout": self.timeout}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["budget"], timeout=state["timeout"])


class RecourseSession:
    """Answer recourse queries for ``model`` with ``method`` until ``budget`` epsilon is spent.

    ``method`` is a recourse method that spends from an ``accountant`` attribute
    (:class:`~recourse_privacy.defenses.laplace.LaplaceRecourse`); the session works on a
    shallow copy wired to its own accountant, so the caller's object is left unchanged (the
    noise stream is shared). ``delta`` is the accountant's delta ceiling (0: pure epsilon-DP);
    composition is basic (see the module docstring). ``answer`` checks and spends under a lock,
    so threads sharing the session cannot overspend it; ``ledger`` (a path or a
    :class:`BudgetLedger`) shares the budget with other processes: every batch is first spent
    there, atomically, and refused whole if it does not fit.
    """

    def __init__(
        self, method, model, *, budget: float, delta: float = 0.0, ledger: str | Path | BudgetLedger | None = None
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
        self.ledger = (
            ledger if isinstance(ledger, BudgetLedger) or ledger is None else BudgetLedger(ledger, self.budget)
        )

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
