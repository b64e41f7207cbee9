"""Running an experiment spec: every cell through one seam, resumable after any crash.

:func:`run_spec` expands a spec into cells, skips the cells whose record is already in the
store, and runs the others with :func:`run_cell` on a backend:

* ``local``: joblib (loky) worker processes on this machine, ``n_jobs`` of them (default:
  the number of cores); with ``n_jobs=1`` the cells run in this process.
* ``ray``: one Ray task per cell (``num_cpus=threads_per_cell``); connects to ``address``
  when given (a cluster, e.g. ``ray://head:10001`` or ``auto``), else uses the Ray already
  initialised in this process, else starts a local Ray.

A cell is seeded by its configuration only (:class:`AuditConfig` ``seed``) and runs with
``threads_per_cell`` torch / BLAS threads on both backends, so a spec gives the same numbers
on either. Each cell's audit runs in ``DIR/runs/<hash>/``, where the audit caches every
finished shadow model: a cell killed halfway resumes from its last shadow model.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recourse_privacy.audit import AuditConfig, data_provenance, run_audit
from recourse_privacy.cache import merge_stats, open_cache, resolve_cache_dir
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.experiments.spec import Cell, ExperimentSpec, load_spec
from recourse_privacy.experiments.store import ResultStore, atomic_write_bytes, atomic_write_json
from recourse_privacy.processes import cap_to_cpus, exit_with_parent, usable_cpus
from recourse_privacy.provenance import content_key, sha256_json
from recourse_privacy.validation import check_output_dir, check_positive_int

__all__ = ["BACKENDS", "RunSummary", "cell_content_key", "run_cell", "run_report", "run_spec", "RichProgress"]

BACKENDS = ("local", "ray")

#: progress callback: (event, cell label or None, details). Events: "start" (total, done),
#: "stage" (stage, done, total), "finished" (seconds), "failed" (error), "end" (summary).
ProgressCallback = Callable[[str, "str | None", dict], None]


@dataclass
class RunSummary:
    """What one :func:`run_spec` call did."""

    spec: str
    out_dir: Path
    backend: str
    n_cells: int
    n_skipped: int  # cells already finished before this run
    computed: list[str] = field(default_factory=list)  # hashes of the cells this run computed
    failed: list[tuple[str, str]] = field(default_factory=list)  # (cell label, error)
    shared: list[str] = field(default_factory=list)  # cells another runner computed while this one waited
    invalid: list[tuple[str, str]] = field(default_factory=list)  # cells the spec dropped (on_invalid: skip)
    seconds: float = 0.0
    summary_path: Path | None = None
    cache_dir: str | None = None  # the artifact cache the cells used (None: off)
    report: dict = field(default_factory=dict)  # run_report(): per cell and per stage times, cache hit rates

    @property
    def n_computed(self) -> int:
        return len(self.computed)

    @property
    def n_failed(self) -> int:
        return len(self.failed)


# ---------------------------------------------------------------------- one cell
PROGRESS_FILE = ".progress.json"


class _FileReporter:
    """Picklable stage reporter of a worker: overwrites ``runs/<hash>/.progress.json``; never raises.

    The driver polls these files, so stage progress needs no extra process or actor (and
    nothing lingers after a ``kill -9``); a Ray worker without the driver's filesystem just
    shows no stages.
    """

    def __init__(self, path: str):
        self.path = path

    def __call__(self, stage: str, done: int, total: int) -> None:
        import json

        try:
            tmp = f"{self.path}.{os.getpid()}.part"
            with open(tmp, "w") as f:
                json.dump({"stage": stage, "done": int(done), "total": int(total)}, f)
            os.replace(tmp, self.path)
        except Exception:  # progress must never fail a cell
            pass


_exit_with_parent = exit_with_parent  # a local worker exits when the driver dies (recourse_privacy.processes)


def cell_content_key(config: AuditConfig) -> str:
    """What a cell's record is keyed by: its configuration, its data's SHA-256 and the package version."""
    return content_key(config.digest(), data_provenance(config).data_sha256)


def run_cell(
    config: dict,
    labels: dict,
    spec_name: str,
    root: str,
    reporter: Callable | None = None,
    threads: int = 1,
    parent_pid: int | None = None,
    spec_digest: str | None = None,
    wait: bool = False,
    cache_dir: str | None = None,
) -> dict:
    """Run one cell's audit in ``root/runs/<hash>/`` and write its record to ``root/cells/<hash>.json``.

    Returns the record (``status`` "complete"), or ``status`` "failed" with the error; an
    existing trusted record computed from the same content is returned with ``shared``: True (a stale or
    altered one is recomputed). While it computes, the cell's lock is held: another runner's
    ``run_cell`` returns ``status`` "busy" at once, or, with ``wait``, waits for the lock and
    then returns the record the other runner wrote (``shared``: True). ``threads`` caps torch
    and BLAS threads, so that the numbers do not depend on the machine's core count.
    ``reporter`` None writes the audit's stages to ``runs/<hash>/.progress.json`` for the
    driver to poll; a local worker given ``parent_pid`` exits when that process dies.
    ``cache_dir``: the artifact cache (:mod:`recourse_privacy.cache`; ``"off"`` for none, None for
    the default) whose trained models and recourse the cell shares with the others; the record's
    ``cache`` holds the cell's hits and misses.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    store = ResultStore(root)
    cfg = AuditConfig.from_dict(config)
    cell_hash = cfg.digest()
    label = " ".join([*(f"{a}={v}" for a, v in labels.items()), f"seed={cfg.seed}"])
    t0 = time.perf_counter()
    try:
        key = cell_content_key(cfg)
    except Exception as err:  # the data is missing or corrupted: the cell fails by name
        return {
            "hash": cell_hash,
            "label": label,
            "status": "failed",
            "error": f"{type(err).__name__}: {err}",
            "seconds": 0.0,
        }
    existing = store.read(cell_hash, key)
    if existing is not None:  # finished since the driver listed its cells (another runner)
        return {**existing, "shared": True}
    _exit_with_parent(parent_pid)
    with store.cell_lock(cell_hash, wait=wait) as mine:
        if not mine:
            return {"hash": cell_hash, "label": label, "status": "busy"}
        existing = store.read(cell_hash, key)  # written by the runner that held the lock
        if existing is not None:
            return {**existing, "shared": True}
        job = _CellJob(store, cfg, cell_hash, key, dict(labels), label, spec_name, spec_digest, threads, t0, cache_dir)
        return _compute_cell(job, reporter)


@dataclass(frozen=True)
class _CellJob:
    """What one cell's computation needs, once ``run_cell`` holds its lock and found no record."""

    store: ResultStore
    cfg: AuditConfig
    cell_hash: str
    key: str
    labels: dict
    label: str
    spec_name: str
    spec_digest: str | None
    threads: int
    t0: float
    cache_dir: str | None


def _compute_cell(job: _CellJob, reporter: Callable | None) -> dict:
    """Run the cell's audit with ``job.threads`` torch and BLAS threads and write its record; a failure is returned."""
    from threadpoolctl import threadpool_limits

    from recourse_privacy.models.torch_utils import torch_threads

    store, cfg, cell_hash, threads = job.store, job.cfg, job.cell_hash, job.threads
    if reporter is None:
        run_dir = store.run_dir(cell_hash)
        run_dir.mkdir(parents=True, exist_ok=True)
        reporter = _FileReporter(str(run_dir / PROGRESS_FILE))
    try:
        artifacts = open_cache(job.cache_dir)
        with torch_threads(threads), threadpool_limits(limits=threads):
            result = run_audit(cfg, store.run_dir(cell_hash), progress=reporter, cache=artifacts or "off")
        record = {
            "hash": cell_hash,
            "content_key": job.key,
            "spec": job.spec_name,
            "spec_digest": job.spec_digest,
            "labels": job.labels,
            "label": job.label,
            "group_label": " ".join(f"{a}={v}" for a, v in job.labels.items()) or "(single cell)",
            "config": cfg.to_dict(),
            "metrics": result.to_dict(),
            "seconds": round(time.perf_counter() - job.t0, 3),
            "threads": threads,
            "cache": artifacts.stats_dict() if artifacts is not None else None,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "host": socket.gethostname(),
            "status": "complete",
        }
        store.write(record)
        return store.read(cell_hash) or {**record, "complete": True}
    except Exception as err:  # a failed cell is reported, the others go on
        return {
            "hash": cell_hash,
            "label": job.label,
            "status": "failed",
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(),
            "seconds": round(time.perf_counter() - job.t0, 3),
        }


# ---------------------------------------------------------------------- progress display
class RichProgress:
    """A progress callback drawing rich bars: one for the cells, one per running cell's stage."""

    def __init__(self, console=None):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=True)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self.cells_task = None
        self.running: dict[str, Any] = {}
        self.lock = threading.Lock()

    def __enter__(self):
        self.bar.start()
        return self

    def __exit__(self, *exc):
        self.bar.stop()

    def __call__(self, event: str, label: str | None, info: dict) -> None:
        with self.lock:
            if event == "start":
                self.cells_task = self.bar.add_task("cells", total=info["total"], completed=info["done"])
            elif event == "stage":
                text = f"  {label}: {info['stage']}"
                if label not in self.running:
                    self.running[label] = self.bar.add_task(text, total=info["total"])
                self.bar.update(self.running[label], description=text, completed=info["done"], total=info["total"])
            elif event in ("finished", "failed"):
                task = self.running.pop(label, None)
                if task is not None:
                    self.bar.remove_task(task)
                if self.cells_task is not None:
                    self.bar.advance(self.cells_task)
                if event == "failed":
                    self.console.print(f"[red]cell {label} failed:[/] {info['error']}", highlight=False)


# ---------------------------------------------------------------------- backends
class _ProgressPoller:
    """Driver side of :class:`_FileReporter`: polls the running cells' progress files in a thread."""

    def __init__(self, store: ResultStore, cells: list[Cell], on_stage, interval: float = 0.5):
        self.paths = {c.hash: store.run_dir(c.hash) / PROGRESS_FILE for c in cells}
        self.on_stage, self.interval = on_stage, interval
        self.seen: dict[str, tuple] = {}
        self.t0 = time.time()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="progress-poller", daemon=True)

    def forget(self, cell_hash: str) -> None:
        self.paths.pop(cell_hash, None)

    def _poll(self) -> None:
        import json

        for cell_hash, path in list(self.paths.items()):
            try:
                st = path.stat()
                if st.st_mtime < self.t0 - 1:  # left by an earlier, killed run
                    continue
                key = (st.st_mtime_ns, st.st_size)
                if self.seen.get(cell_hash) == key:
                    continue
                info = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            self.seen[cell_hash] = key
            if cell_hash in self.paths:
                self.on_stage((cell_hash, info["stage"], info["done"], info["total"]))

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self._poll()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=2)


def estimated_cost(config: AuditConfig) -> float:
    """A rough relative cost of one cell, to start the costliest first (longest-processing-time order).

    Counterfactuals computed, times the recourse method's registered ``cost`` per counterfactual:
    the owner's targets once, and again in each shadow world. Only the order of cells uses it.
    """
    from recourse_privacy.recourse.registry import RECOURSE_METHODS

    try:
        cost = float(RECOURSE_METHODS.get(config.recourse).meta.get("cost", 1.0))
    except Exception:  # noqa: BLE001 - an unknown method fails in its cell, by name; here it only sorts
        cost = 1.0
    targets = config.n_members + (config.n_nonmembers if config.n_nonmembers is not None else config.n_members)
    return cost * targets * (1 + config.shadow_models)


def _local(
    cells: list[Cell],
    args: Callable,
    n_jobs: int,
    threads: int,
    store: ResultStore,
    on_stage,
    on_result,
    opts: dict,
) -> None:
    if n_jobs == 1 or len(cells) == 1:
        for cell in cells:
            report = (lambda c: lambda stage, done, total: on_stage((c.hash, stage, done, total)))(cell)
            on_result(cell, run_cell(*args(cell), reporter=report, threads=threads, **opts))
        return
    from joblib import Parallel, delayed

    by_hash = {c.hash: c for c in cells}
    with _ProgressPoller(store, cells, on_stage) as poller:
        par = Parallel(n_jobs=min(n_jobs, len(cells)), return_as="generator_unordered")
        jobs = (delayed(run_cell)(*args(c), threads=threads, parent_pid=os.getpid(), **opts) for c in cells)
        for rec in par(jobs):
            poller.forget(rec["hash"])
            on_result(by_hash[rec["hash"]], rec)


def _ray(
    cells: list[Cell],
    args: Callable,
    n_jobs: int | None,
    address: str | None,
    threads: int,
    store: ResultStore,
    on_stage,
    on_result,
    opts: dict,
) -> None:
    try:
        import ray
    except ImportError:
        raise InvalidInputError("backend 'ray' needs Ray: pip install 'recourse-privacy[ray]'") from None

    started = False
    if address is not None or not ray.is_initialized():
        init = {"address": address} if address is not None else ({"num_cpus": n_jobs} if n_jobs else {})
        try:
            ray.init(**init, include_dashboard=False, ignore_reinit_error=True, logging_level="WARNING")
        except Exception as err:  # noqa: BLE001 - Ray raises many kinds (ConnectionError, ValueError, RuntimeError)
            where = f"the Ray cluster at --address {address!r}" if address is not None else "a local Ray"
            hint = (
                "give the address of a running cluster (ray://HOST:10001 needs `pip install 'ray[client]'`; "
                "HOST:6379 from a node of the cluster), or leave --address out for a local Ray"
                if address is not None
                else "use --backend local"
            )
            raise InvalidInputError(
                f"could not start {where}: {str(err).strip().rstrip('.') or type(err).__name__}; {hint}"
            ) from None
        started = True
    try:
        task = ray.remote(num_cpus=threads)(run_cell)
        pending: dict[Any, Cell] = {}
        todo = iter(cells)
        limit = n_jobs or len(cells)

        def submit() -> bool:
            cell = next(todo, None)
            if cell is None:
                return False
            pending[task.remote(*args(cell), threads=threads, **opts)] = cell
            return True

        with _ProgressPoller(store, cells, on_stage) as poller:
            while len(pending) < limit and submit():
                pass
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    cell = pending.pop(ref)
                    try:
                        rec = ray.get(ref)
                    except Exception as err:  # the task's worker died, or Ray failed it
                        rec = {"hash": cell.hash, "status": "failed", "error": f"{type(err).__name__}: {err}"}
                    poller.forget(cell.hash)
                    on_result(cell, rec)
                    submit()
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------- the run
def run_spec(
    spec: ExperimentSpec | str | Path,
    out_dir: str | Path,
    backend: str = "local",
    address: str | None = None,
    n_jobs: int | None = None,
    progress: bool | ProgressCallback = True,
    threads_per_cell: int = 1,
    cache_dir: str | Path | None = None,
) -> RunSummary:
    """Run every unfinished cell of ``spec`` and store one record per cell in ``out_dir``.

    ``backend`` "local" (joblib processes, ``n_jobs`` default: cores) or "ray" (``address``
    of a cluster, else a local Ray). ``progress``: True for rich bars, False for none, or a
    callback ``(event, cell_label, details)``. Cells already in the store are skipped; a
    rerun after a crash computes only the missing ones. ``cache_dir``: the artifact cache the
    cells share (:mod:`recourse_privacy.cache`: trained models and recourse computed once for
    the whole grid; ``"off"`` for none; None: ``$RECOURSE_PRIVACY_CACHE``, else the user cache).
    Returns a :class:`RunSummary`; ``summary.json`` and ``summary.md`` in ``out_dir`` hold the
    per-cell, per-stage times and the cache's hit rates (:func:`run_report`).
    """
    if not isinstance(spec, ExperimentSpec):
        spec = load_spec(spec)
    n_jobs, threads_per_cell = _checked_resources(backend, address, n_jobs, threads_per_cell)
    t0 = time.perf_counter()
    cache_path = resolve_cache_dir(cache_dir)
    if cache_path is not None:  # a directory that is not the cache's is refused before any cell runs
        open_cache(cache_path)
    store = ResultStore(check_output_dir(out_dir))
    store.clean_temp()
    store.save_spec(spec.to_dict())
    opts = {
        "spec_digest": sha256_json(spec.to_dict())[:16],
        "cache_dir": str(cache_path) if cache_path is not None else "off",
    }
    cells = spec.cells
    todo = _unfinished_costliest_first(store, cells)
    summary = RunSummary(spec.name, store.root, backend, len(cells), len(cells) - len(todo), invalid=spec.skipped)
    summary.cache_dir = str(cache_path) if cache_path is not None else None
    labels = {c.hash: c.label for c in cells}
    display = RichProgress() if progress is True else None
    callback: ProgressCallback = display if display is not None else (progress or (lambda *a: None))

    def on_stage(item) -> None:
        cell_hash, stage, d, total = item
        callback("stage", labels.get(cell_hash, cell_hash), {"stage": stage, "done": d, "total": total})

    busy: list[Cell] = []
    on_result = _result_handler(store, summary, callback, busy)

    def args(cell: Cell) -> tuple:
        return (cell.config.to_dict(), dict(cell.labels), spec.name, str(store.root))

    if display is not None:
        display.__enter__()
    try:
        callback("start", None, {"total": len(cells), "done": summary.n_skipped})
        if todo:
            if backend == "local":
                _local(todo, args, n_jobs or usable_cpus(), threads_per_cell, store, on_stage, on_result, opts)
            else:
                _ray(todo, args, n_jobs, address, threads_per_cell, store, on_stage, on_result, opts)
            for cell in busy:  # computed by another runner meanwhile: wait for its record
                on_result(cell, run_cell(*args(cell), threads=threads_per_cell, wait=True, **opts))
        _finish_run(summary, store, cells, cache_path, t0)
        callback("end", None, {"summary": summary})
    finally:
        if display is not None:
            display.__exit__(None, None, None)
    return summary


def _checked_resources(
    backend: str, address: str | None, n_jobs: int | None, threads_per_cell: int
) -> tuple[int | None, int]:
    """Refuse a bad backend, address or count by name; cap ``n_jobs`` and threads to this machine's CPUs."""
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if n_jobs is not None:
        check_positive_int(n_jobs, "n_jobs")
    check_positive_int(threads_per_cell, "threads_per_cell")
    if address is not None and backend != "ray":
        raise InvalidInputError("--address is for --backend ray")
    if address is None:  # this machine's CPUs (a cluster's are its own)
        threads_per_cell = cap_to_cpus(threads_per_cell, "threads_per_cell")[0]
        if n_jobs is not None:
            n_jobs = cap_to_cpus(n_jobs, "n_jobs")[0]
    return n_jobs, threads_per_cell


def _unfinished_costliest_first(store: ResultStore, cells: list[Cell]) -> list[Cell]:
    """The cells without a record, costliest first, so that the last cell to start is a short one
    (ties keep the spec's order)."""

    def finished(cell: Cell) -> bool:
        try:
            return store.read(cell.hash, cell_content_key(cell.config)) is not None
        except Exception:  # noqa: BLE001 - data missing: the cell runs and fails by name
            return False

    return sorted((c for c in cells if not finished(c)), key=lambda c: -estimated_cost(c.config))


def _result_handler(
    store: ResultStore, summary: RunSummary, callback: ProgressCallback, busy: list[Cell]
) -> Callable[[Cell, dict], None]:
    """``on_result(cell, record)``: store a cell's record (or its failure) and count it in ``summary``;
    a cell another runner is computing goes to ``busy``, to be waited for."""

    def on_result(cell: Cell, rec: dict) -> None:
        if rec.get("status") == "busy":  # another runner computes it; waited for below
            busy.append(cell)
            return
        if rec.get("shared"):
            summary.shared.append(cell.hash)
            callback("finished", cell.label, {"seconds": rec.get("seconds")})
            return
        if rec.get("status") == "complete" or rec.get("complete") is True:
            if not store.is_done(cell.hash):  # a remote worker without our filesystem
                store.write(rec)
            summary.computed.append(cell.hash)
            callback("finished", cell.label, {"seconds": rec.get("seconds")})
        else:
            store.write_failure(cell.hash, {"label": cell.label, **{k: v for k, v in rec.items() if k != "hash"}})
            summary.failed.append((cell.label, rec.get("error", "unknown error")))
            callback("failed", cell.label, {"error": rec.get("error", "unknown error")})

    return on_result


def _finish_run(summary: RunSummary, store: ResultStore, cells: list[Cell], cache_path, t0: float) -> None:
    """Write the store's summary, the run's report (summary.json / .md) and the cache's last-run note."""
    if store.records():
        summary.summary_path = store.write_summary()
    summary.seconds = round(time.perf_counter() - t0, 3)
    summary.report = run_report(summary, store, cells)
    _write_report(summary.report, store.root)
    if cache_path is not None and summary.computed:
        open_cache(cache_path).write_last_run(f"run {summary.spec} ({store.root})", summary.report["cache"]["stats"])


# ---------------------------------------------------------------------- the run's report
#: the audit's stages in the order they run (audit/pipeline.py's clock)
STAGES = ("data", "owner model", "recourse", "shadow models", "attacks")
REPORT_FILES = ("summary.json", "summary.md")


def run_report(summary: RunSummary, store: ResultStore, cells: list[Cell]) -> dict:
    """Where a run's time went: each cell's wall time and audit stages, and the artifact cache's hits and misses.

    A cell's ``status`` is ``computed`` (by this run), ``shared`` (by another runner while this one
    waited), ``earlier run`` (its record was already in the store), ``failed`` or ``missing``. The
    totals (stage seconds, cache counters) are over the cells this run computed.
    """
    computed, shared = set(summary.computed), set(summary.shared)
    failed = {label for label, _ in summary.failed}
    rows = []
    for cell in cells:
        rec = store.read(cell.hash)
        if rec is None:
            rows.append(
                {"cell": cell.label, "hash": cell.hash, "status": "failed" if cell.label in failed else "missing"}
            )
            continue
        status = "computed" if cell.hash in computed else "shared" if cell.hash in shared else "earlier run"
        rows.append(
            {
                "cell": cell.label,
                "hash": cell.hash,
                "status": status,
                "seconds": rec.get("seconds"),
                "stages": dict(rec["metrics"].get("timing_seconds") or {}),
                "cache": rec.get("cache"),
            }
        )
    mine = [r for r in rows if r["status"] == "computed"]
    stages: dict[str, float] = {}
    for r in mine:
        for name, sec in r["stages"].items():
            stages[name] = round(stages.get(name, 0.0) + float(sec), 3)
    return {
        "spec": summary.spec,
        "backend": summary.backend,
        "wall_seconds": summary.seconds,
        "n_cells": summary.n_cells,
        "n_computed": summary.n_computed,
        "n_earlier": summary.n_skipped,
        "n_failed": summary.n_failed,
        "stage_seconds": stages,
        "cache": {"dir": summary.cache_dir, "stats": merge_stats(*(r["cache"] or {} for r in mine))},
        "cells": rows,
    }


def report_tables(report: dict) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """The report as two tables of strings: (header, rows) per cell and stage; (header, rows) per cache role."""
    names = [s for s in STAGES if any(s in r.get("stages", {}) for r in report["cells"])]
    names += sorted({s for r in report["cells"] for s in r.get("stages", {})} - {*names, "total"})

    def sec(v) -> str:
        return "" if v is None else f"{float(v):,.1f}"

    def hits(stats: dict | None) -> str:
        if not stats:
            return ""
        h = sum(s["hits"] for s in stats.values())
        return f"{h}/{h + sum(s['misses'] for s in stats.values())}"

    header = ["cell", "status", "seconds", *names, "cache hits/lookups"]
    rows = [
        [
            r["cell"],
            r["status"],
            sec(r.get("seconds")),
            *(sec(r.get("stages", {}).get(n)) for n in names),
            hits(r.get("cache")),
        ]
        for r in report["cells"]
    ]
    mine = [r for r in report["cells"] if r["status"] == "computed"]
    rows.append(
        [
            f"sum over the {len(mine)} computed cell(s)",
            "",
            sec(sum(r.get("seconds") or 0.0 for r in mine)),
            *(sec(report["stage_seconds"].get(n)) for n in names),
            hits(report["cache"]["stats"]),
        ]
    )
    cache_header = ["role", "hits", "misses", "hit rate", "corrupt", "not stored", "compute s", "load s"]
    cache_rows = [
        [
            role,
            str(s["hits"]),
            str(s["misses"]),
            "" if s["hit_rate"] is None else f"{s['hit_rate']:.0%}",
            str(s["corrupt"]),
            str(s["too_large"]),
            sec(s["compute_seconds"]),
            sec(s["load_seconds"]),
        ]
        for role, s in report["cache"]["stats"].items()
    ]
    return header, rows, cache_header, cache_rows


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def report_markdown(report: dict) -> str:
    """``summary.md``: the run's wall time, a table of cells x stages (seconds), and the cache's hit rates."""
    header, rows, cache_header, cache_rows = report_tables(report)
    cache = report["cache"]["dir"] or "off"
    text = [
        f"# {report['spec']}: where the time went",
        "",
        f"Wall time {report['wall_seconds']:,.1f} s ({report['backend']} backend); {report['n_cells']} cells: "
        f"{report['n_computed']} computed, {report['n_earlier']} finished in an earlier run, {report['n_failed']} "
        f"failed. Seconds per cell and audit stage ('shadow models' includes their recourse); a cell's seconds "
        f"include any wait for another cell computing a shared model. Artifact cache: {cache}.",
        "",
        _markdown_table(header, rows),
        "",
    ]
    if cache_rows:
        text += ["## Artifact cache (cells computed in this run)", "", _markdown_table(cache_header, cache_rows), ""]
    return "\n".join(text)


def _write_report(report: dict, root: Path) -> None:
    atomic_write_json(root / REPORT_FILES[0], report)
    atomic_write_bytes(root / REPORT_FILES[1], report_markdown(report).encode())
