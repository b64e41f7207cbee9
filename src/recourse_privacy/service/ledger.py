"""The service's spend ledger: per API key, the epsilon spent and the answers given, one transaction per request.

:meth:`SpendLedger.spend` checks a key's budget and query cap and records the request's spend in
one transaction, or records nothing and raises :class:`Refusal` (``reason`` ``budget`` or
``query_cap``, with the budget, the spent and the asked). The server spends *before* it computes
the answer (and draws any noise), so a client never holds an answer the ledger has not
committed: after a ``kill -9`` the ledger's total is at least the sum of the answers clients
received, and never above a budget.

Backends, chosen by the URL:

- a path or ``sqlite:///PATH`` (the default): an SQLite file in WAL mode with
  ``synchronous = FULL``; a spend is one ``BEGIN IMMEDIATE`` transaction (the database's write
  lock, as :class:`~recourse_privacy.defenses.accounting.BudgetLedger`), so threads, workers and
  processes on one machine can never overspend together, and a committed spend survives a crash;
- ``postgresql://...``: PostgreSQL through psycopg, for several servers on several machines; a
  spend locks the key's row (``SELECT ... FOR UPDATE``) inside one transaction.

Amounts are integer units of 1e-9 epsilon (:func:`~recourse_privacy.defenses.accounting._units`:
costs rounded up, budgets down), so sums are exact.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from recourse_privacy.defenses.accounting import _UNITS, _units
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError

__all__ = ["Refusal", "SpendLedger", "open_ledger"]


class Refusal(RecoursePrivacyError):
    """A spend that does not fit: ``reason`` is ``budget`` or ``query_cap``."""

    def __init__(self, reason: str, *, budget, spent, asked, unit: str):
        self.reason, self.budget, self.spent, self.asked, self.unit = reason, budget, spent, asked, unit
        what = "privacy budget" if reason == "budget" else "query cap"
        super().__init__(f"{what} exceeded: the {what} is {budget:g} {unit}, {spent:g} spent, {asked:g} asked")

    def to_dict(self) -> dict:
        return {
            "error": str(self),
            "reason": self.reason,
            "budget": self.budget,
            "spent": self.spent,
            "asked": self.asked,
            "unit": self.unit,
        }


@dataclass(frozen=True)
class Account:
    """A key's totals: epsilon spent and answers given."""

    spent: float
    answers: int


class SpendLedger:
    """The interface: :meth:`spend`, :meth:`account`, :meth:`total`."""

    url: str

    def spend(self, key_id: str, *, epsilon_each: float, n: int, budget: float, cap: int | None) -> Account:
        raise NotImplementedError

    def account(self, key_id: str) -> Account:
        raise NotImplementedError

    def total(self) -> Account:
        raise NotImplementedError

    @staticmethod
    def _check(spent_u: int, answers: int, cost_u: int, n: int, budget: float, cap: int | None) -> None:
        if cap is not None and answers + n > cap:
            raise Refusal("query_cap", budget=cap, spent=answers, asked=n, unit="answers")
        if spent_u + cost_u > _units(budget, up=False):
            raise Refusal("budget", budget=budget, spent=spent_u / _UNITS, asked=cost_u / _UNITS, unit="epsilon")


class SQLiteLedger(SpendLedger):
    """The embedded ledger: one SQLite file shared by every worker on this machine."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0):
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self.timeout = float(timeout)
        self._local = threading.local()
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(
                "CREATE TABLE IF NOT EXISTS accounts (key TEXT PRIMARY KEY, units INTEGER NOT NULL, "
                "answers INTEGER NOT NULL)"
            )
            con.execute(
                "CREATE TABLE IF NOT EXISTS spends (id INTEGER PRIMARY KEY, key TEXT NOT NULL, units INTEGER NOT NULL, "
                "answers INTEGER NOT NULL, pid INTEGER, at REAL)"
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
                con.execute("PRAGMA journal_mode = WAL")
                con.execute("PRAGMA synchronous = FULL")
            except (sqlite3.Error, OSError) as err:
                raise InvalidInputError(f"cannot open the ledger {self.path}: {err}") from None
            self._local.con, self._local.pid = con, os.getpid()
        return con

    def spend(self, key_id: str, *, epsilon_each: float, n: int, budget: float, cap: int | None) -> Account:
        cost = _units(epsilon_each * n, up=True)
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")  # the write lock: one check-and-spend at a time, across processes
        try:
            row = con.execute("SELECT units, answers FROM accounts WHERE key = ?", (key_id,)).fetchone()
            spent, answers = row if row else (0, 0)
            self._check(spent, answers, cost, n, budget, cap)
            con.execute(
                "INSERT INTO accounts VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET units = units + excluded.units, "
                "answers = answers + excluded.answers",
                (key_id, cost, n),
            )
            con.execute(
                "INSERT INTO spends (key, units, answers, pid, at) VALUES (?, ?, ?, ?, ?)",
                (key_id, cost, n, os.getpid(), time.time()),
            )
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return Account((spent + cost) / _UNITS, answers + n)

    def account(self, key_id: str) -> Account:
        row = self._connect().execute("SELECT units, answers FROM accounts WHERE key = ?", (key_id,)).fetchone()
        return Account(row[0] / _UNITS, row[1]) if row else Account(0.0, 0)

    def total(self) -> Account:
        u, a = (
            self._connect().execute("SELECT COALESCE(SUM(units), 0), COALESCE(SUM(answers), 0) FROM spends").fetchone()
        )
        return Account(u / _UNITS, a)


class PostgresLedger(SpendLedger):
    """The shared ledger of several servers: PostgreSQL, a row lock per key and spend."""

    def __init__(self, url: str):
        import psycopg

        self.url = url
        self._psycopg = psycopg
        self._local = threading.local()
        with self._connect().transaction():
            con = self._connect()
            con.execute("SELECT pg_advisory_xact_lock(27270027)")  # several servers creating the tables at once
            con.execute(
                "CREATE TABLE IF NOT EXISTS rp_accounts (key TEXT PRIMARY KEY, units BIGINT NOT NULL, "
                "answers BIGINT NOT NULL)"
            )
            con.execute(
                "CREATE TABLE IF NOT EXISTS rp_spends (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, "
                "units BIGINT NOT NULL, answers BIGINT NOT NULL, pid INTEGER, at DOUBLE PRECISION)"
            )

    def _connect(self):
        con = getattr(self._local, "con", None)
        if con is None or con.closed or getattr(self._local, "pid", None) != os.getpid():
            try:
                con = self._psycopg.connect(self.url, autocommit=True)
            except self._psycopg.Error as err:
                raise InvalidInputError(f"cannot open the ledger {_redact(self.url)}: {err}") from None
            self._local.con, self._local.pid = con, os.getpid()
        return con

    def spend(self, key_id: str, *, epsilon_each: float, n: int, budget: float, cap: int | None) -> Account:
        cost = _units(epsilon_each * n, up=True)
        con = self._connect()
        with con.transaction():
            con.execute("INSERT INTO rp_accounts VALUES (%s, 0, 0) ON CONFLICT (key) DO NOTHING", (key_id,))
            spent, answers = con.execute(
                "SELECT units, answers FROM rp_accounts WHERE key = %s FOR UPDATE", (key_id,)
            ).fetchone()
            self._check(spent, answers, cost, n, budget, cap)
            con.execute(
                "UPDATE rp_accounts SET units = units + %s, answers = answers + %s WHERE key = %s", (cost, n, key_id)
            )
            con.execute(
                "INSERT INTO rp_spends (key, units, answers, pid, at) VALUES (%s, %s, %s, %s, %s)",
                (key_id, cost, n, os.getpid(), time.time()),
            )
        return Account((spent + cost) / _UNITS, answers + n)

    def account(self, key_id: str) -> Account:
        row = self._connect().execute("SELECT units, answers FROM rp_accounts WHERE key = %s", (key_id,)).fetchone()
        return Account(row[0] / _UNITS, int(row[1])) if row else Account(0.0, 0)

    def total(self) -> Account:
        u, a = (
            self._connect()
            .execute("SELECT COALESCE(SUM(units), 0), COALESCE(SUM(answers), 0) FROM rp_spends")
            .fetchone()
        )
        return Account(int(u) / _UNITS, int(a))


def _redact(url: str) -> str:
    """The URL without its password."""
    import re

    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def open_ledger(url: str | Path) -> SpendLedger:
    """A path or ``sqlite:///PATH`` (SQLite), or ``postgresql://...`` / ``postgres://...`` (PostgreSQL)."""
    text = str(url)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresLedger(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        raise InvalidInputError(f"--ledger {text!r}: use a file path, sqlite:///PATH or postgresql://...")
    if not text:
        raise InvalidInputError("--ledger: empty path")
    return SQLiteLedger(text)
