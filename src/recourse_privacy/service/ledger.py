"""The service's spend ledger: per API key, the epsilon spent and the answers given, one transaction per request.

:meth:`SpendLedger.spend` checks a key's budget and query cap and records the request's spend in
one transaction, or records nothing and raises :class:`Refusal` (``reason`` ``budget`` or
``query_cap``, with the budget, the spent and the asked). :meth:`SpendLedger.spend_many` does the
same for many requests in ONE transaction (each checked in order against the running totals),
and :class:`GroupCommitter` gathers the concurrent requests of a server process into such groups
(group commit: one fsync per group, not per request). Answers that spend 0 epsilon
(post-processing of a DP artefact) are recorded the same way: they count against the query cap. The server spends *before* it computes
the answer (and draws any noise), so a client never holds an answer the ledger has not
committed: after a ``kill -9`` the ledger's total is at least the sum of the answers clients
received, and never above a budget.

Backends, chosen by the URL:

- a path or ``sqlite:///PATH`` (the default): an SQLite file in WAL mode with
  ``synchronous = FULL`` (``sqlite:///PATH?synchronous=normal``: no fsync per commit; safe
  against a kill -9 of the server, not against an OS crash or power loss: :func:`open_ledger`); a spend is one ``BEGIN IMMEDIATE`` transaction (the database's write
  lock, as :class:`~recourse_privacy.accounting.QueryLedger`), so threads, workers and
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

__all__ = ["GroupCommitter", "Refusal", "SpendLedger", "SpendRequest", "open_ledger"]


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


@dataclass(frozen=True)
class SpendRequest:
    """One request's spend: ``n`` answers at ``epsilon_each`` for the key ``key_id`` (its ``budget`` and ``cap``)."""

    key_id: str
    epsilon_each: float
    n: int
    budget: float
    cap: int | None


class SpendLedger:
    """The interface: :meth:`spend_many` (one transaction), :meth:`spend`, :meth:`account`, :meth:`total`."""

    url: str

    def spend_many(self, requests: list[SpendRequest]) -> list[Account | Refusal]:
        """Check and record the ``requests`` in order in ONE transaction: per request its key's new totals, or the
        :class:`Refusal` (nothing recorded for it). Committed before it returns."""
        raise NotImplementedError

    def spend(self, key_id: str, *, epsilon_each: float, n: int, budget: float, cap: int | None) -> Account:
        """One request's spend; raises :class:`Refusal`."""
        (out,) = self.spend_many([SpendRequest(key_id, epsilon_each, n, budget, cap)])
        if isinstance(out, Refusal):
            raise out
        return out

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

    @classmethod
    def _decide(cls, requests: list[SpendRequest], totals: dict[str, tuple[int, int]]):
        """Within the transaction: each request checked against its key's running totals (``totals`` updated).

        Returns the outcomes (Account or Refusal) and the rows to record: (key, units, answers).
        """
        outcomes: list[Account | Refusal] = []
        rows = []
        for r in requests:
            spent, answers = totals[r.key_id]
            cost = _units(r.epsilon_each * r.n, up=True)
            try:
                cls._check(spent, answers, cost, r.n, r.budget, r.cap)
            except Refusal as refusal:
                outcomes.append(refusal)
                continue
            totals[r.key_id] = (spent + cost, answers + r.n)
            outcomes.append(Account((spent + cost) / _UNITS, answers + r.n))
            rows.append((r.key_id, cost, r.n))
        return outcomes, rows


class SQLiteLedger(SpendLedger):
    """The embedded ledger: one SQLite file shared by every worker on this machine."""

    def __init__(self, path: str | Path, *, timeout: float = 60.0, synchronous: str = "full"):
        self.path = Path(path)
        if synchronous not in _SYNC:
            raise InvalidInputError(f"--ledger ...?synchronous={synchronous}: use full (default) or normal")
        self.synchronous = synchronous
        self.url = f"sqlite:///{self.path}" + ("" if synchronous == "full" else f"?synchronous={synchronous}")
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
                con.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            except (sqlite3.Error, OSError) as err:
                raise InvalidInputError(f"cannot open the ledger {self.path}: {err}") from None
            self._local.con, self._local.pid = con, os.getpid()
        return con

    def spend_many(self, requests: list[SpendRequest]) -> list[Account | Refusal]:
        con = self._connect()
        con.execute("BEGIN IMMEDIATE")  # the write lock: one check-and-spend at a time, across processes
        try:
            keys = sorted({r.key_id for r in requests})
            totals = {k: (0, 0) for k in keys}
            marks = ",".join("?" * len(keys))
            for k, units, answers in con.execute(
                f"SELECT key, units, answers FROM accounts WHERE key IN ({marks})", keys
            ):
                totals[k] = (units, answers)
            outcomes, rows = self._decide(requests, totals)
            if rows:
                con.executemany(
                    "INSERT INTO accounts VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET units = units + "
                    "excluded.units, answers = answers + excluded.answers",
                    rows,
                )
                now, pid = time.time(), os.getpid()
                con.executemany(
                    "INSERT INTO spends (key, units, answers, pid, at) VALUES (?, ?, ?, ?, ?)",
                    [(*row, pid, now) for row in rows],
                )
            con.execute("COMMIT")  # FULL: fsynced before any answer is computed; NORMAL: in the OS's WAL file
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        return outcomes

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

    def spend_many(self, requests: list[SpendRequest]) -> list[Account | Refusal]:
        con = self._connect()
        keys = sorted({r.key_id for r in requests})  # rows locked in key order: no deadlock between servers
        with con.transaction():
            cur = con.cursor()
            cur.executemany(
                "INSERT INTO rp_accounts VALUES (%s, 0, 0) ON CONFLICT (key) DO NOTHING", [(k,) for k in keys]
            )
            totals = {
                k: (int(u), int(a))
                for k, u, a in con.execute(
                    "SELECT key, units, answers FROM rp_accounts WHERE key = ANY(%s) ORDER BY key FOR UPDATE", (keys,)
                ).fetchall()
            }
            outcomes, rows = self._decide(requests, totals)
            if rows:
                cur.executemany(
                    "UPDATE rp_accounts SET units = units + %s, answers = answers + %s WHERE key = %s",
                    [(u, a, k) for k, u, a in rows],
                )
                now, pid = time.time(), os.getpid()
                cur.executemany(
                    "INSERT INTO rp_spends (key, units, answers, pid, at) VALUES (%s, %s, %s, %s, %s)",
                    [(*row, pid, now) for row in rows],
                )
        return outcomes

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


class _Slot:
    __slots__ = ("done", "outcome", "payload", "request", "result")

    def __init__(self, request: SpendRequest, payload):
        self.request, self.payload = request, payload
        self.done, self.outcome, self.result = False, None, None


class GroupCommitter:
    """Group commit: concurrent requests of this process share one ledger transaction, then one batched answer.

    A thread that arrives while a group is being committed waits for the next group; the first
    thread of that group (the leader) takes every waiting request, records their spends in one
    :meth:`SpendLedger.spend_many` transaction (one fsync for the group), and then calls
    ``answer(payloads)`` once for the requests that were granted, before anyone gets an answer.
    So a spend is on disk before its answer (and noise) exists, and the cost of the commit and
    of the answer is shared by the requests that came together (Gray and Reuter 1993, group
    commit). ``answer`` takes the granted payloads in order and returns one result per payload.
    """

    def __init__(self, ledger: SpendLedger, answer):
        self.ledger, self.answer = ledger, answer
        self._lock = threading.Lock()  # held by the group being committed and answered
        self._queue_lock = threading.Lock()
        self._queue: list[_Slot] = []

    def submit(self, request: SpendRequest, payload) -> tuple[Account | Refusal, object]:
        """Spend for ``request`` and answer ``payload``: (the key's totals, the answer) or (the Refusal, None)."""
        slot = _Slot(request, payload)
        with self._queue_lock:
            self._queue.append(slot)
        with self._lock:
            if not slot.done:
                with self._queue_lock:
                    group, self._queue = self._queue, []
                self._run(group)
        if isinstance(slot.result, BaseException):
            raise slot.result
        return slot.outcome, slot.result

    def _run(self, group: list[_Slot]) -> None:
        try:
            outcomes = self.ledger.spend_many([s.request for s in group])
            granted = [s for s, o in zip(group, outcomes) if not isinstance(o, Refusal)]
            for s, o in zip(group, outcomes):
                s.outcome = o
            results = self.answer([s.payload for s in granted]) if granted else []
            for s, r in zip(granted, results):
                s.result = r
        except BaseException as err:  # noqa: BLE001 - every waiting request learns of it (a 500 each)
            for s in group:
                if not isinstance(s.outcome, Refusal):
                    s.result = err
        finally:
            for s in group:
                s.done = True


def _redact(url: str) -> str:
    """The URL without its password."""
    import re

    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


_SYNC = ("full", "normal")


def open_ledger(url: str | Path) -> SpendLedger:
    """A path or ``sqlite:///PATH[?synchronous=full|normal]`` (SQLite), or ``postgresql://...`` (PostgreSQL).

    ``synchronous=normal`` (WAL): a commit is written to the WAL file but not fsynced, so it
    survives a crash of the server process (``kill -9``: the operating system still writes it)
    but the last commits can be lost if the operating system crashes or the power fails; the
    default ``full`` fsyncs every commit (every group of requests) and loses nothing.
    """
    text = str(url)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresLedger(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
        text, _, query = text.partition("?")
        if query:
            name, eq, value = query.partition("=")
            if name != "synchronous" or not eq:
                raise InvalidInputError(f"--ledger {url}: the only option is ?synchronous=full|normal")
            return SQLiteLedger(text, synchronous=value.lower())
    elif "://" in text:
        raise InvalidInputError(f"--ledger {text!r}: use a file path, sqlite:///PATH or postgresql://...")
    if not text:
        raise InvalidInputError("--ledger: empty path")
    return SQLiteLedger(text)
