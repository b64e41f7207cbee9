"""The results store of an experiment: one JSON record per finished cell, written atomically.

Layout of a store directory ``DIR``::

    DIR/spec.json              the spec last run into DIR (read by ``recourse-privacy results``)
    DIR/cells/<hash>.json      one record per finished cell; hash = AuditConfig.digest()
    DIR/failed/<hash>.json     the error of a cell that raised (retried by the next run)
    DIR/runs/<hash>/           the cell's audit directory: metrics.json, plots, report, and
                               .cache/ with each finished shadow model (so a killed cell resumes)
    DIR/summary.parquet        one row per cell x attack: config columns and metrics

Guarantees: a record is written to a temporary file in the same directory, flushed and
fsynced, then renamed over its final name (``os.replace``, atomic on POSIX), so a process
killed at any moment (even ``kill -9``) leaves either the complete record or none. A record
is trusted only if it parses, its ``hash`` matches its file name and it carries the
completion marker ``"complete": true`` (written last). Leftover temporary files are ignored
and removed by the next run.

Provenance: a record (format 2) carries the ``checksum`` (SHA-256) of its own content and the
``content_key`` of what it was computed from (configuration, the data's SHA-256, the package
version and its sources' digest; :mod:`recourse_privacy.provenance`). A record whose checksum does not match
(edited by hand, damaged) or whose key differs from the cell's current one (the data file changed, the
package was upgraded or its code edited), or one of format 1 (no checksum), is not trusted: the cell is
recomputed.

Two runners on one store share the work: a runner takes ``DIR/locks/<hash>.lock`` (``flock``,
released by the kernel when its process dies, even by ``kill -9``) while it computes a cell,
and another runner skips that cell, then waits for its record instead of computing it twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from recourse_privacy import strict_json
from recourse_privacy.audit.result import AuditResult
from recourse_privacy.audit.summaries import plain
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.provenance import sha256_json

__all__ = ["ResultStore", "atomic_write_json", "RECORD_FORMAT", "flatten_record", "record_checksum"]

RECORD_FORMAT = 2  # 2: records carry their checksum and content key
_TMP_SUFFIX = ".tmp"


def _json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: temp file in the same directory, fsync, ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """:func:`atomic_write_bytes` of ``obj`` as indented strict JSON (numpy scalars converted; NaN: null and reason)."""
    return atomic_write_bytes(path, strict_json.dumps(obj, indent=1, default=_json_default).encode())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ResultStore:
    """The records of one experiment directory (see the module docstring for the layout)."""

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        self.cells_dir = self.root / "cells"
        self.failed_dir = self.root / "failed"
        self.runs_dir = self.root / "runs"

    # ------------------------------------------------------------------ paths
    def record_path(self, cell_hash: str) -> Path:
        return self.cells_dir / f"{cell_hash}.json"

    def run_dir(self, cell_hash: str) -> Path:
        """The cell's audit directory (its shadow cache lives in ``.cache/`` inside)."""
        return self.runs_dir / cell_hash

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _trusted(record: Any, cell_hash: str, content_key: str | None = None) -> bool:
        return ResultStore._distrust(record, cell_hash, content_key) is None

    @staticmethod
    def _distrust(record: Any, cell_hash: str, content_key: str | None = None) -> str | None:
        """Why a parsed record is not trusted, or None where it is."""
        if not isinstance(record, dict) or record.get("complete") is not True:
            return "incomplete (no completion marker)"
        if record.get("hash") != cell_hash:
            return f"its hash {record.get('hash')!r} is not its file name's"
        if record.get("format") != RECORD_FORMAT:
            return f"format {record.get('format')!r}, not {RECORD_FORMAT} (written by an older version)"
        if not isinstance(record.get("metrics"), dict) or not isinstance(record["metrics"].get("attacks"), dict):
            return "no metrics"
        if record.get("checksum") != record_checksum(record):
            return "its checksum does not match its content (edited or damaged)"
        if content_key is not None and record.get("content_key") != content_key:
            return "computed from other inputs (data file or package version changed)"
        return None

    def skipped(self) -> list[tuple[str, str]]:
        """(file name, why) of every record under cells/ that :meth:`records` leaves out."""
        out = []
        for path in sorted(self.cells_dir.glob("*.json")) if self.cells_dir.is_dir() else []:
            if path.name.startswith("."):
                continue
            try:
                why = self._distrust(json.loads(path.read_text()), path.stem)
            except (OSError, ValueError):
                why = "does not parse (truncated or not JSON)"
            if why is not None:
                out.append((path.name, why))
        return out

    def read(self, cell_hash: str, content_key: str | None = None) -> dict | None:
        """The cell's record if it exists and is trusted, else None.

        Trusted: it parses, has the right hash, format and completion marker, its checksum matches
        its content, and (given ``content_key``) it was computed from that content.
        """
        path = self.record_path(cell_hash)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return record if self._trusted(record, cell_hash, content_key) else None

    @contextlib.contextmanager
    def cell_lock(self, cell_hash: str, *, wait: bool = False):
        """Hold the cell's lock while computing it; yields False (without waiting) when another runner holds it.

        ``flock`` on ``locks/<hash>.lock``: the kernel releases it when the holder dies.
        """
        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_dir / f"{cell_hash}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def is_done(self, cell_hash: str) -> bool:
        return self.read(cell_hash) is not None

    def done(self) -> set[str]:
        """Hashes of every trusted record."""
        return {r["hash"] for r in self.records()}

    def records(self) -> list[dict]:
        """Every trusted record, sorted by file name (untrusted files and temp files are skipped)."""
        out = []
        if not self.cells_dir.is_dir():
            return out
        for path in sorted(self.cells_dir.glob("*.json")):
            if path.name.startswith("."):
                continue
            rec = self.read(path.stem)
            if rec is not None:
                out.append(rec)
        return out

    # ------------------------------------------------------------------ writing
    def write(self, record: dict) -> Path:
        """Write a finished cell's record atomically; the completion marker is set here, last."""
        if "hash" not in record or "metrics" not in record:
            raise InvalidInputError("a cell record needs 'hash' and 'metrics'")
        rec = {k: v for k, v in record.items() if k not in ("complete", "checksum")}
        rec["format"] = RECORD_FORMAT
        rec["complete"] = True
        rec = strict_json.loads(strict_json.dumps(rec, default=_json_default))  # the checksum of what is read back
        rec["checksum"] = record_checksum(rec)
        path = atomic_write_json(self.record_path(rec["hash"]), rec)
        (self.failed_dir / f"{rec['hash']}.json").unlink(missing_ok=True)
        return path

    def write_failure(self, cell_hash: str, info: dict) -> Path:
        """Record why a cell failed (not trusted as a result; the next run retries the cell)."""
        return atomic_write_json(self.failed_dir / f"{cell_hash}.json", {"hash": cell_hash, **info})

    def failures(self) -> list[dict]:
        out = []
        for path in sorted(self.failed_dir.glob("*.json")) if self.failed_dir.is_dir() else []:
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out

    def clean_temp(self, *, max_age_seconds: float = 86400.0) -> int:
        """Remove temporary files left by killed writers; return how many.

        A temp file of this host is removed when its writer's process is gone; one of another
        host (a shared filesystem) only when older than ``max_age_seconds``.
        """
        host, removed = _host(), 0
        for d in (self.root, self.cells_dir, self.failed_dir):
            if not d.is_dir():
                continue
            for tmp in d.glob(f".*{_TMP_SUFFIX}"):
                parts = tmp.name.rsplit(".", 4)  # .<name>.<host>.<pid>.<rand>.tmp
                try:
                    t_host, t_pid = parts[1], int(parts[2])
                except (IndexError, ValueError):
                    t_host, t_pid = "", -1
                try:
                    stale = (
                        (not _pid_alive(t_pid))
                        if t_host == host
                        else time.time() - tmp.stat().st_mtime > max_age_seconds
                    )
                    if stale:
                        tmp.unlink()
                        removed += 1
                except OSError:
                    continue
        return removed

    def save_spec(self, spec_dict: dict) -> Path:
        """Keep the spec beside the records (``spec.json``) for ``recourse-privacy results``."""
        return atomic_write_json(self.root / "spec.json", spec_dict)

    def load_spec_dict(self) -> dict | None:
        try:
            return json.loads((self.root / "spec.json").read_text())
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ the summary table
    def summary_frame(self):
        """One row per cell x attack: ``hash``, ``spec``, ``cell``, ``axis.*``, ``config.*``, ``attack``, metrics."""
        import pandas as pd

        rows = [row for rec in self.records() for row in flatten_record(rec)]
        frame = pd.DataFrame(rows)
        for col in frame.columns:  # parquet needs one type per column
            kinds = {type(v) for v in frame[col] if v is not None and not (isinstance(v, float) and v != v)}
            if len(kinds) > 1 and not kinds <= {int, float}:
                frame[col] = frame[col].map(lambda v: None if v is None else str(v))
        return frame

    def write_summary(self) -> Path:
        """Write ``summary.parquet`` atomically (pandas + pyarrow) and return its path."""
        import io

        frame = self.summary_frame()
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        return atomic_write_bytes(self.root / "summary.parquet", buf.getvalue())


def record_checksum(record: dict) -> str:
    """The SHA-256 of a record's content (every key but ``checksum``), as canonical JSON."""
    return sha256_json({k: v for k, v in record.items() if k != "checksum"})


def _config_value(v):
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def _scalars(prefix: str, d: dict) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_scalars(f"{prefix}{k}.", v))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[f"{prefix}{k}"] = v
    return out


def flatten_record(record: dict) -> list[dict]:
    """The summary rows of one record: one per attack, with the cell's config and cell metrics repeated.

    The record's metrics are read as a typed :class:`~recourse_privacy.audit.AuditResult`, so a
    record of another schema fails here, by name, rather than giving empty columns.
    """
    result = AuditResult.from_dict(record["metrics"])
    base = {
        "hash": record["hash"],
        "spec": record.get("spec"),
        "spec_digest": record.get("spec_digest"),
        "cell": record.get("group_label"),
        "seed": result.config.seed,
    }
    base.update({f"axis.{a}": v for a, v in (record.get("labels") or {}).items()})
    base.update({f"config.{k}": _config_value(v) for k, v in record["config"].items()})
    for group in (result.model, result.recourse, result.shadow, result.data):
        if group is not None:
            base.update(_scalars(f"{_GROUPS[type(group).__name__]}.", plain(group)))
    base.update(_scalars("timing_seconds.", dict(result.timing_seconds)))
    base["seconds"] = record.get("seconds")
    rows = []
    for name, a in result.attacks.items():
        row = dict(base, attack=name)
        row.update(_scalars("", a.to_dict()))
        rows.append(row)
    return rows


_GROUPS = {"ModelSummary": "model", "RecourseSummary": "recourse", "ShadowSummary": "shadow", "DataSummary": "data"}
