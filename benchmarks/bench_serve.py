"""Load and fault benchmark of ``recourse-privacy serve`` on loopback (issue 27, item 5).

Publishes privrecourse, dpc and dpm bundles of ``--dataset`` (``--methods``), starts the server
as a subprocess per bundle, and measures with client threads (httpx, keep-alive):

- single-applicant requests per second and p50 / p99 latency at 1, 8 and 32 concurrent clients;
- applicants per second through ``/v1/recourse/batch`` (batches of 1,000, 2 clients);
- kill -9 under load with a Laplace bundle: after the restart the ledger's total is at least
  the epsilon of the answers the clients received and never above the key's budget; on the
  SQLite ledger and (``--postgres``) on a PostgreSQL server started in a temporary directory
  (``initdb`` / ``pg_ctl``; as ``nobody`` through ``runuser`` when run as root).

The clients run on the same machine as the server and take CPU from it (and share one GIL):
on a small machine the numbers are a lower bound. Usage::

    python benchmarks/bench_serve.py --dataset adult --seconds 5 --workers 1 [--ledger-sync normal] [--postgres]
        [--search-precision float32]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres():
    """A PostgreSQL server in a temporary directory: (url, stop function), or (None, reason)."""
    import glob
    import shutil

    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True) or [shutil.which("initdb") or ""]
    if not bins[0] or not os.path.exists(bins[0]):
        return None, "PostgreSQL is not installed (no initdb)"
    bindir = os.path.dirname(bins[0])
    prefix = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
    d = Path(tempfile.mkdtemp(prefix="rp-pg-"))
    os.chmod(d, 0o777)
    port = _port()
    subprocess.run([*prefix, f"{bindir}/initdb", "-D", str(d / "data"), "-A", "trust", "-U", "rp"], check=True,
                   capture_output=True)  # fmt: skip
    opts = f"-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=on"
    subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", str(d / "data"), "-o", opts, "-l", str(d / "log"), "-w",
                    "start"], check=True, capture_output=True)  # fmt: skip

    def stop():
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", str(d / "data"), "-m", "immediate", "stop"],
                       capture_output=True)  # fmt: skip
        shutil.rmtree(d, ignore_errors=True)

    return f"postgresql://rp@127.0.0.1:{port}/postgres", stop


def _start(bundle, keys, ledger, workers, precision: str = "float64") -> tuple[subprocess.Popen, str]:
    import httpx

    port = _port()
    extra = ["--search-precision", precision] if precision != "float64" else []  # DPC's search (serve's option)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "recourse_privacy.cli",
            "serve",
            str(bundle),
            "--port",
            str(port),
            "--api-keys",
            str(keys),
            "--ledger",
            str(ledger),
            "--workers",
            str(workers),
            "--log-file",
            os.devnull,
            "--compile-cache",
            str(Path(bundle).parent / "xla"),  # beside the bundles: never the user's cache
            *extra,
        ],  # fmt: skip
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # a DPC server compiles its search before it answers (seconds; more under load)
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the server did not start")


def _cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of every live process of the process group ``pgid`` (the server and its workers),
    read from ``/proc`` (Linux; NaN elsewhere): the server's own cost per answer, whatever the machine's load."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    try:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:  # field 5 of stat: the process group
                total += (int(fields[11]) + int(fields[12])) / tick  # fields 14, 15: utime, stime
    except OSError:
        return float("nan")
    return total


def _stop(proc, sig=signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(30)


def _applicants(ds, n, seed=0):
    rng = np.random.default_rng(seed)
    rows = ds.X.iloc[rng.choice(len(ds.X), n, replace=False)]
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for _, r in rows.iterrows()]


def _load(url, key, docs, clients, seconds, path="/v1/recourse", field="applicant"):
    """Requests/s and p50 / p99 latency of ``clients`` threads posting for ``seconds``.

    The clients (httpx, keep-alive) and the JSON bodies are made before the clock starts, and
    the threads start together at a barrier: making 32 httpx clients takes seconds on a loaded
    machine, which an earlier version of this harness counted in the window.
    """
    import json

    import httpx

    bodies = [json.dumps({field: d}).encode() for d in docs]
    headers = {"X-API-Key": key, "Content-Type": "application/json"}
    conns = [httpx.Client(timeout=60, headers=headers) for _ in range(clients)]
    lat, errors = [], []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    window = {}

    def run(i):
        mine, c, j = [], conns[i], i
        barrier.wait()
        stop = window["stop"]
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            r = c.post(url + path, content=bodies[j % len(bodies)])
            mine.append(time.perf_counter() - t0)
            if r.status_code != 200:
                errors.append(r.status_code)
            j += clients
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    window["stop"] = t0 + seconds
    barrier.wait()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    for c in conns:
        c.close()
    lat = np.asarray(lat) * 1000
    return len(lat) / wall, float(np.percentile(lat, 50)), float(np.percentile(lat, 99)), len(errors), len(lat)


def _kill9(ds, tmp, workers, ledger, label):
    import httpx

    from recourse_privacy.service.bundle import publish
    from recourse_privacy.service.keys import KeyStore, hash_key
    from recourse_privacy.service.ledger import open_ledger

    eps, n_budget = 0.1, 400
    if not (tmp / "laplace" / "manifest.json").exists():
        publish(ds, method="laplace", epsilon=eps, out=tmp / "laplace", bounds={"hours-per-week": (0, 100)})
    key = KeyStore(tmp / f"lk-{label.split()[0]}.json").add("load", budget=n_budget * eps)
    docs = _applicants(ds, 200, 1)
    received = []

    def clients(url, stop_after):
        stop = threading.Event()

        def run(i):
            with httpx.Client(timeout=10, headers={"X-API-Key": key}) as c:
                j = i
                while not stop.is_set():
                    try:
                        r = c.post(url + "/v1/recourse", json={"applicant": docs[j % len(docs)]})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 429:
                        return
                    if r.status_code == 200:
                        received.append(r.json()["epsilon_spent"])
                    j += 8

        ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        while len(received) < stop_after and any(t.is_alive() for t in ts):
            time.sleep(0.002)
        return stop, ts

    proc, url = _start(tmp / "laplace", tmp / f"lk-{label.split()[0]}.json", ledger, workers)
    stop, ts = clients(url, 150)
    _stop(proc, signal.SIGKILL)
    stop.set()
    for t in ts:
        t.join()
    kid = hash_key(key)[:16]
    first, held = open_ledger(ledger).account(kid), sum(received)
    proc, url = _start(tmp / "laplace", tmp / f"lk-{label.split()[0]}.json", ledger, workers)
    _, ts = clients(url, 10**9)
    for t in ts:
        t.join()
    _stop(proc)
    final = open_ledger(ledger).account(kid)
    print(f"\nkill -9 under load, {label} ledger (Laplace, epsilon 0.1 per answer, key budget 40 = 400 answers, "
          f"{workers} worker(s)):")  # fmt: skip
    print(f"  at the kill: ledger epsilon {first.spent:g} ({first.answers} answers) >= held by clients {held:g}: "
          f"{first.spent >= held - 1e-9}")  # fmt: skip
    print(f"  after the restart, run to refusal: ledger epsilon {final.spent:g} ({final.answers} answers), "
          f"clients received {sum(received):g}; never above the budget 40: {final.spent <= 40 + 1e-9}")  # fmt: skip


def _compare_dpc(ds, tmp: Path, n: int) -> None:
    """The answers of ``n`` seeded applicants with DPC's compiled search and with its numpy reference, compared as the
    JSON the server sends (same bundle, same applicants)."""
    import dataclasses
    import json
    from types import SimpleNamespace

    from recourse_privacy.service.bundle import load_bundle

    b = load_bundle(tmp / "dpc")
    apps = b.schema.parse_many(_applicants(ds, n, 2), "applicants")
    compiled = b.answer(apps)
    reference = dataclasses.replace(b, graph=SimpleNamespace(search=b.graph.search_numpy)).answer(apps)
    same = sum(json.dumps(x) == json.dumps(y) for x, y in zip(compiled, reference))
    rejected = sum(x["decision"] == "rejected" for x in reference)
    print(f"\nDPC's compiled search against its numpy reference: {same} of {n} answers byte-identical as JSON "
          f"({rejected} rejected applicants, each searched)")  # fmt: skip
    for i, (x, y) in enumerate(zip(compiled, reference)):
        if json.dumps(x) != json.dumps(y):
            cx, cy = x.get("counterfactual") or {}, y.get("counterfactual") or {}
            diff = {k: (cx[k], cy.get(k)) for k in cx if cx[k] != cy.get(k)}
            print(f"  applicant {i}: counterfactual values that differ (compiled, numpy): {diff}; "
                  f"changes {x['reasons']} / {y['reasons']}")  # fmt: skip


def _profile_batch(ds, tmp: Path, method: str, reps: int = 15, precision: str = "float64") -> None:
    """Where a 1,000-applicant batch's CPU goes in the server's code, without HTTP: the body's JSON and schema check,
    the search, and the answers' JSON text (as ``answer_json`` writes it, and as objects encoded by ``json.dumps``,
    the way before it). Process CPU (every thread: the search runs on XLA's and the search threads), the least of
    ``reps`` runs (the one the other jobs' load disturbed least)."""
    import json

    from recourse_privacy.service.bundle import load_bundle

    b = load_bundle(tmp / method, random_state=0, search_precision=precision if method == "dpc" else "float64")
    b.warm()
    body = json.dumps({"applicants": _applicants(ds, 500) * 2}).encode()  # the load test's batch
    a = b.schema.parse_many(json.loads(body)["applicants"])
    Z = b.schema.encode(a)
    Zr = Z[b.model.predict(Z) == 0]

    def cpu(f) -> float:
        f()
        best = float("inf")
        for _ in range(reps):
            t0 = time.process_time()
            f()
            best = min(best, time.process_time() - t0)
        return best * 1000

    parse = cpu(lambda: b.schema.parse_many(json.loads(body)["applicants"]))
    search = cpu(lambda: b._counterfactuals(Zr))
    text = cpu(lambda: b.answer_json(a))
    objects = cpu(lambda: json.dumps({"answers": b.answer(a)}, separators=(",", ":")))
    print(f"\n{method}: CPU ms per batch of 1,000 ({len(Zr)} rejected, searched), least of {reps} runs, no HTTP:")
    print(f"  JSON body + schema check {parse:.1f}; search {search:.1f}; answer_json (search included) {text:.1f}, "
          f"so {text - search:.1f} besides the search; answer objects + json.dumps {objects:.1f} "
          f"({objects - search:.1f} besides the search)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--methods", default="privrecourse,dpc,dpm")
    ap.add_argument("--ledger-sync", default="full", choices=("full", "normal"), help="the SQLite ledger's synchronous")
    ap.add_argument("--postgres", action="store_true", help="also kill -9 on a PostgreSQL ledger")
    ap.add_argument("--no-kill", action="store_true", help="skip the kill -9 checks")
    ap.add_argument("--compare-dpc", type=int, default=0, metavar="N",
                    help="also answer N seeded applicants with DPC's compiled and numpy searches and compare the JSON")  # fmt: skip
    ap.add_argument("--no-load", action="store_true", help="skip the servers' load cells (with --profile-batch)")
    ap.add_argument("--profile-batch", action="store_true",
                    help="also split a 1,000-applicant batch's server CPU into parse, search and answer text (no HTTP)")  # fmt: skip
    ap.add_argument("--work", help="publish the bundles into this folder, or reuse those already there (a before / "
                    "after comparison on the same bundles; DPC's takes a minute to publish)")  # fmt: skip
    ap.add_argument("--search-precision", default="float64", choices=("float64", "float32"),
                    help="DPC's servers and profile: serve --search-precision")  # fmt: skip
    args = ap.parse_args()
    from recourse_privacy.data import load_dataset
    from recourse_privacy.service.bundle import publish
    from recourse_privacy.service.keys import KeyStore

    ds = load_dataset(args.dataset)
    tmp = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-serve-"))
    tmp.mkdir(parents=True, exist_ok=True)
    key = KeyStore(tmp / "keys.json").add(f"bench-{os.getpid()}", budget=1.0)  # a new name each run (--work)
    docs = _applicants(ds, 500)
    sync = "" if args.ledger_sync == "full" else "?synchronous=normal"
    print(f"dataset {args.dataset}, {args.workers} worker(s), {os.cpu_count()} CPUs, {args.seconds:g} s per cell, "
          f"SQLite ledger synchronous={args.ledger_sync}")  # fmt: skip
    print(f"uptime: {Path('/proc/loadavg').read_text().split()[:3] if Path('/proc/loadavg').exists() else '?'}; "
          "CPU ms/answer: the server's CPU time (all its processes) per applicant answered")  # fmt: skip
    print(f"{'bundle':<14}{'clients':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'CPU ms/answer':>15}")
    for method in args.methods.split(","):
        t0 = time.perf_counter()
        if not (tmp / method / "manifest.json").exists():
            publish(ds, method=method, epsilon=1.0, out=tmp / method, bounds={"hours-per-week": (0, 100)})
            print(f"  (published {method} in {time.perf_counter() - t0:.0f} s)", flush=True)
        if args.no_load:
            continue
        t0 = time.perf_counter()
        precision = args.search_precision if method == "dpc" else "float64"
        proc, url = _start(
            tmp / method, tmp / "keys.json", f"sqlite:///{tmp / method}.db{sync}", args.workers, precision
        )
        print(f"  ({method}: the server answered /health {time.perf_counter() - t0:.1f} s after its start)", flush=True)
        try:
            _load(url, key, docs, 8, 0.5)  # unmeasured: the first requests' one-time costs (imports, caches)
            _load(url, key, [docs[:100]], 1, 0.5, "/v1/recourse/batch", "applicants")
            for c in map(int, args.clients.split(",")):
                cpu0 = _cpu_seconds(proc.pid)
                rps, p50, p99, err, n = _load(url, key, docs, c, args.seconds)
                ms = (_cpu_seconds(proc.pid) - cpu0) / max(n, 1) * 1000
                print(f"{method:<14}{c:>8}{rps:>9.0f}{p50:>9.1f}{p99:>9.1f}{err:>8}{ms:>15.2f}", flush=True)
            batches = [docs * 2][0][:1000]
            cpu0 = _cpu_seconds(proc.pid)
            rps, p50, p99, err, n = _load(url, key, [batches], 2, args.seconds, "/v1/recourse/batch", "applicants")
            ms = (_cpu_seconds(proc.pid) - cpu0) / max(n * len(batches), 1) * 1000
            print(f"{method:<14}{'batch':>8}{rps * 1000:>9.0f}{p50:>9.1f}{p99:>9.1f}{err:>8}{ms:>15.3f}  (applicants/s, "
                  "batches of 1,000, 2 clients)")  # fmt: skip
        finally:
            _stop(proc)
    if args.profile_batch:
        for method in args.methods.split(","):
            _profile_batch(ds, tmp, method, precision=args.search_precision)
    if args.compare_dpc and "dpc" in args.methods.split(","):
        _compare_dpc(ds, tmp, args.compare_dpc)
    if args.no_kill:
        return
    _kill9(ds, tmp, args.workers, f"sqlite:///{tmp / 'lk.db'}{sync}", f"SQLite (synchronous={args.ledger_sync})")
    if args.postgres:
        url, stop = _postgres()
        if url is None:
            print(f"\nkill -9 on PostgreSQL skipped: {stop}")
            return
        try:
            _kill9(ds, tmp, args.workers, url, "PostgreSQL")
        finally:
            stop()


if __name__ == "__main__":
    main()
