"""Many threads and processes hammer one privacy budget; the total spent must never exceed it.

Each of ``--processes`` processes runs ``--threads`` threads; every thread asks ``--queries``
times for ``--epsilon`` from one :class:`~recourse_privacy.accounting.QueryLedger`
(an SQLite file) of budget ``--budget``. Then ``--session-threads`` threads share one
:class:`RecourseSession` (Laplace Recourse on a logistic model) with the same ledger file
reset. Prints the queries answered, the epsilon spent and the budget.

    PYTHONPATH=src python benchmarks/bench_budget_hammer.py
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from recourse_privacy.accounting import QueryLedger
from recourse_privacy.errors import BudgetExceededError


def _worker(path: str, budget: float, eps: float, n_threads: int, n_queries: int, out) -> None:
    ledger = QueryLedger(path, budget)
    answered = [0] * n_threads

    def run(i: int) -> None:
        for _ in range(n_queries):
            try:
                ledger.spend(eps)
                answered[i] += 1
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n_threads)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    out.put(sum(answered))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--queries", type=int, default=25)
    p.add_argument("--epsilon", type=float, default=0.01)
    p.add_argument("--budget", type=float, default=2.0)
    p.add_argument("--session-threads", type=int, default=20)
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp())
    path = str(tmp / "ledger.sqlite")
    QueryLedger(path, a.budget)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    t0 = time.perf_counter()
    procs = [
        ctx.Process(target=_worker, args=(path, a.budget, a.epsilon, a.threads, a.queries, q))
        for _ in range(a.processes)
    ]
    [pr.start() for pr in procs]
    answered = sum(q.get() for _ in procs)
    [pr.join() for pr in procs]
    ledger = QueryLedger(path, a.budget)
    asked = a.processes * a.threads * a.queries
    print(
        f"ledger: {a.processes} processes x {a.threads} threads x {a.queries} queries = {asked} requests of "
        f"epsilon {a.epsilon:g}; answered {answered} (ledger rows {ledger.n_spends}); spent {ledger.spent:.9f} "
        f"of budget {a.budget:g}; over budget: {ledger.spent > a.budget}; {time.perf_counter() - t0:.1f} s"
    )

    from recourse_privacy.defenses import LaplaceRecourse, RecourseSession
    from recourse_privacy.models.registry import make_model

    X = np.random.default_rng(0).normal(size=(200, 4))
    model = make_model("logistic").fit(X, (X[:, 0] > 0).astype(int))
    session = RecourseSession(
        LaplaceRecourse(epsilon=0.1, random_state=0), model, budget=2.0, ledger=tmp / "session.sqlite"
    )
    got = []

    def ask() -> None:
        for _ in range(10):
            try:
                got.append(len(session.answer(X[:1]).valid))
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=ask) for _ in range(a.session_threads)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(
        f"session: {a.session_threads} threads x 10 queries of epsilon 0.1, budget 2.0: answered {sum(got)}, "
        f"refused {session.n_refused}, spent {session.spent:.9f}; over budget: {session.spent > 2.0}"
    )


if __name__ == "__main__":
    main()
