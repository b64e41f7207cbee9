"""Privacy accounting, in one place: a release's budget split and a query ledger.

Two distinct things spend privacy budget in this package, and they have distinct names:

- :class:`ReleaseBudget`: **the budget split of one release** (a PrivRecourse graph's nodes, DPC's
  autoencoder and prototypes). Every mechanism that touches the data writes one
  :class:`BudgetLine`; sequential composition adds epsilons and deltas (basic composition, Dwork
  and Roth 2014, Theorem 3.16), and a step that runs the same mechanism on disjoint parts of the
  data (the clusters of one round) is one line by parallel composition. A line may be marked
  ``dp=False``: a step that is not differentially private as run (raw counts, a released record,
  bounds read from the data); ``outside`` names the parts of the release the budget does not
  account for at all (DPC's classifier). The budget then says so instead of claiming a guarantee.
  It is a plain in-memory record, written beside the release (``to_dict``).
- :class:`QueryLedger`: **a budget spent query by query and shared between processes** (the
  recourse session of :mod:`recourse_privacy.defenses.accounting`, the recourse service): an
  SQLite file whose check-and-spend is one ``BEGIN IMMEDIATE`` transaction (a database-wide
  write lock), so that processes hammering one budget never overspend it, and whose committed
  spends survive a ``kill -9`` (SQLite's journal rolls back a transaction interrupted half-way).
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.validation import check_delta
from recourse_privacy.validation import check_epsilon as _check_epsilon

__all__ = ["BudgetLine", "QueryLedger", "ReleaseBudget"]


# ------------------------------------------------------------------------------ a release's budget split
#: relative slack for floating-point sums of budget shares (0.75 + 0.25 of eps/10, ten times)
_SLACK = 1e-9


@dataclass(frozen=True)
class BudgetLine:
    """One spend of a release: a name, its (epsilon, delta), whether it is DP as run, and a note."""

    step: str
    epsilon: float
    delta: float = 0.0
    dp: bool = True
    note: str = ""


@dataclass
class ReleaseBudget:
    """Spends of one release, checked against a cap ``(epsilon, delta)`` (``epsilon`` may be ``math.inf``: no cap).

    ``outside`` names what the release exposes that this budget does not account for (a model
    trained elsewhere, with its own guarantee); :attr:`not_covered` lists it after the lines that
    are not DP as run.
    """

    epsilon: float
    delta: float = 0.0
    allow_overspend: bool = False
    entries: list[BudgetLine] = field(default_factory=list)
    outside: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.epsilon = _epsilon_or_inf(self.epsilon, "epsilon")
        self.delta = check_delta(self.delta, "delta")
        self.outside = tuple(str(o) for o in self.outside)

    def spend(self, step: str, epsilon: float, delta: float = 0.0, *, dp: bool = True, note: str = "") -> None:
        """Record a spend; raise :class:`BudgetExceededError` when the total passes the cap."""
        eps = _epsilon_or_inf(epsilon, f"epsilon of {step}", allow_zero=True)
        dlt = check_delta(delta, f"delta of {step}")
        entry = BudgetLine(step, eps, dlt, dp, note)
        total_eps, total_delta = self.total_epsilon + eps, self.total_delta + dlt
        if not self.allow_overspend and (
            total_eps > self.epsilon * (1 + _SLACK) or total_delta > self.delta * (1 + _SLACK) + 1e-300
        ):
            raise BudgetExceededError(
                f"budget split overspends: {step!r} brings the total to (epsilon={total_eps:.6g}, "
                f"delta={total_delta:.3g}) above the cap (epsilon={self.epsilon:g}, delta={self.delta:g}); "
                "fix the split or pass allow_overspend=True to record it"
            )
        self.entries.append(entry)

    @property
    def total_epsilon(self) -> float:
        return float(sum(e.epsilon for e in self.entries))

    @property
    def total_delta(self) -> float:
        return float(sum(e.delta for e in self.entries))

    @property
    def is_dp(self) -> bool:
        """True when every recorded step is differentially private as run."""
        return all(e.dp for e in self.entries)

    @property
    def epsilon_total(self) -> float | None:
        """The epsilon the whole release is DP with (sequential composition); None when a line is not DP as run."""
        return self.total_epsilon if self.is_dp else None

    @property
    def not_covered(self) -> tuple[str, ...]:
        """What the guarantee does not cover: the lines not DP as run (with their notes), then ``outside``."""
        lines = tuple(f"{e.step} ({e.note})" if e.note else e.step for e in self.entries if not e.dp)
        return lines + self.outside

    @property
    def overspent(self) -> bool:
        return self.total_epsilon > self.epsilon * (1 + _SLACK) or self.total_delta > self.delta * (1 + _SLACK) + 1e-300

    def to_dict(self) -> dict:
        """Plain JSON-ready form: cap, entries, totals, the DP verdict and what lies outside the budget."""
        return {
            "cap": {"epsilon": self.epsilon, "delta": self.delta},
            "entries": [asdict(e) for e in self.entries],
            "total": {"epsilon": self.total_epsilon, "delta": self.total_delta},
            "is_dp": self.is_dp,
            "overspent": self.overspent,
            "outside": list(self.outside),
        }

    @classmethod
    def from_dict(cls, d: dict) -> ReleaseBudget:
        """The budget :meth:`to_dict` wrote (files written before ``outside`` existed read as empty)."""
        led = cls(d["cap"]["epsilon"], d["cap"]["delta"], allow_overspend=True, outside=tuple(d.get("outside", ())))
        led.entries = [BudgetLine(**e) for e in d["entries"]]
        return led

    def lines(self) -> list[str]:
        """Human-readable ledger lines."""
        out = [
            f"{e.step:<40} eps={e.epsilon:.4g} delta={e.delta:.3g}{'' if e.dp else '  [NOT DP as run]'}"
            + (f"  ({e.note})" if e.note else "")
            for e in self.entries
        ]
        out.append(
            f"{'total':<40} eps={self.total_epsilon:.4g} delta={self.total_delta:.3g}"
            f"  (cap eps={self.epsilon:g}, delta={self.delta:g}; {'DP' if self.is_dp else 'not DP as run'})"
        )
        out.extend(f"{'outside the budget':<40} {o}" for o in self.outside)
        return out


def _epsilon_or_inf(epsilon, name: str, *, allow_zero: bool = False) -> float:
    """A finite epsilon (> 0, or >= 0 with ``allow_zero``), or ``math.inf`` (no noise: no guarantee)."""
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and epsilon == math.inf:
        return math.inf
    return _check_epsilon(epsilon, name, allow_zero=allow_zero)


# ------------------------------------------------------------------------------ a query ledger shared by processes

#: epsilon is kept in integer units of 1e-9 in the ledger, so that sums are exact (no float drift)
_UNITS = 10**9


def _units(epsilon: float, *, up: bool) -> int:
    """epsilon in integer units, rounded up (a cost) or down (a budget), forgiving float rounding of exact multiples.

    n * eps and a budget set to n * eps may differ in their last bits (3337 * 0.01 gives 33.369999999999996 units
    of 1e-9 below 33.37 after scaling); the slack is relative (1e-12 of the amount, at least 1e-6 units), far below
    any epsilon that matters, and larger than float64's spacing at every budget up to 1e4.
    """
    x = epsilon * _UNITS
    slack = max(1e-6, abs(x) * 1e-12)
    return math.ceil(x - slack) if up else math.floor(x + slack)


class QueryLedger:
    """A query budget shared between threads and processes: an SQLite file of every spend.

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
