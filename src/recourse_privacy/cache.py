"""A content-addressed store of trained models and recourse outputs, shared by audits and grid cells.

The owner's model and the adversary's shadow models of a dataset are the same for every recourse
method of a grid (Pawelczyk et al. 2023, Table 2: three recourse methods per dataset), and a
repeated audit recomputes the same recourse. This store keeps each such result once, under a
key that is the SHA-256 of everything it was computed from (the exact training rows, the model's
class and parameters, the seed, the method configuration and the query points, the package
version, a digest of the package's sources and :data:`CACHE_FORMAT`), so that a lookup can never return a result
of other inputs or of other code.

Entries are numpy ``.npz`` files of plain arrays, read with ``allow_pickle=False``: the store may
be shared, and nothing in it is ever unpickled. Each entry carries its key and the SHA-256 of its
own arrays, both checked on every read; a truncated, altered or foreign entry is counted as
``corrupt``, removed and recomputed, never trusted (a digest guards against damage, not against
someone who can write the directory: share it only with people you trust). Writes go to a
temporary file in the same directory and are renamed into place (``os.replace``), so a process
killed at any moment leaves the complete entry or none. Two processes that need the same missing
entry (two cells of a grid) take an ``flock`` on the key: one computes, the other waits and reads
(counted as a hit); the kernel releases the lock of a killed process.

Location: ``cache_dir`` / ``--cache-dir``, else ``$RECOURSE_PRIVACY_CACHE``, else
``$XDG_CACHE_HOME/recourse-privacy/artifacts`` (``~/.cache/...``); ``off`` disables the cache.

Ownership: the store marks its directory with :data:`MARKER` (a small JSON file with the marker's
format) when it first writes into an absent or empty directory, and refuses a non-empty directory
without it (:class:`~recourse_privacy.errors.InvalidInputError` naming ``--cache-dir`` and
``$RECOURSE_PRIVACY_CACHE``); a store of before the marker is recognised by its layout alone and
marked. :meth:`ArtifactCache.clear` removes only the files of that layout (entries
``<kind>/<2 hex>/<key>.npz``, their temporary files, ``locks/<kind>-<key>.lock``, the last-run
record): a file of anyone else's, even inside the directory, is left where it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.provenance import code_version, sha256_arrays, sha256_json

__all__ = [
    "CACHE_ENV",
    "CACHE_FORMAT",
    "MARKER",
    "ArtifactCache",
    "CacheInfo",
    "RoleStats",
    "Uncacheable",
    "artifact_key",
    "canonical",
    "default_artifact_dir",
    "open_cache",
    "resolve_cache_dir",
]

CACHE_ENV = "RECOURSE_PRIVACY_CACHE"
#: bump when the layout of an entry or the numbers of a cached computation change (training, recourse);
#: 2: MLPModel.fit trains through the stacked trainer (stop 34), so its networks moved at float32 rounding;
#: 3: decoding snaps every data value back (stop 41: a deployed model's recourse searched through the decode moved),
#: and DiCE and CADEX hold a row's missing values inside their search
CACHE_FORMAT = 3
#: values of ``cache_dir`` / ``$RECOURSE_PRIVACY_CACHE`` that turn the cache off
OFF = ("off", "none", "0", "false", "no")
#: entries larger than this are not stored (e.g. 5,000 counterfactuals of 7,000 features): recomputed each time
DEFAULT_MAX_ENTRY_BYTES = 64 * 2**20
LAST_RUN = "last-run.json"
_TMP = ".tmp"
#: the file that marks a directory as this store's (JSON: what it is and the marker's format)
MARKER = ".recourse-privacy-cache"
MARKER_FORMAT = 1
_LOCKS = "locks"
# the store's own files, by their place in its layout (what clear() may remove)
_KIND = r"[A-Za-z0-9-]+"  # as path() allows
_ENTRY = re.compile(r"(?P<key>[A-Za-z0-9]+)\.npz|\.(?P<tmpkey>[A-Za-z0-9]+)\.\d+\.[0-9a-f]{8}" + re.escape(_TMP))
_LOCK = re.compile(_KIND + r"-[A-Za-z0-9]+\.lock")
_ROOT_FILES = re.compile(
    rf"{re.escape(LAST_RUN)}|\.{re.escape(LAST_RUN)}\.\d+{re.escape(_TMP)}|\.{re.escape(MARKER)}\.\d+\.[0-9a-f]{{8}}{re.escape(_TMP)}"
)


class Uncacheable(Exception):
    """A value that has no canonical, content-complete description (the computation is not cached)."""


def canonical(value: Any) -> Any:
    """A JSON-able description of ``value`` that determines it completely, arrays by their SHA-256.

    Numbers, strings, None, lists, dicts with string keys, numpy arrays and scalars, and
    dataclasses (by class name and fields) are described; anything else raises
    :class:`Uncacheable` (its ``repr`` might omit what changes the result).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"__float__": repr(value)}  # exact, and nan / inf survive JSON
    if isinstance(value, np.generic):
        return canonical(value.item())
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise Uncacheable("an object array")
        return {"__array__": sha256_arrays(value)}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise Uncacheable("a mapping with non-string keys")
        return {k: canonical(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        cls = type(value)
        return {
            "__class__": f"{cls.__module__}.{cls.__qualname__}",
            **{f.name: canonical(getattr(value, f.name)) for f in fields(value)},
        }
    raise Uncacheable(f"a {type(value).__name__}")


def artifact_key(kind: str, *parts: Any) -> str:
    """The key of an entry: SHA-256 of ``kind``, the cache format, the code (version and sources' digest) and
    ``parts`` (canonical)."""
    return sha256_json([kind, CACHE_FORMAT, code_version(), *(canonical(p) for p in parts)])


def default_artifact_dir() -> Path:
    """``$XDG_CACHE_HOME/recourse-privacy/artifacts``, or ``~/.cache/recourse-privacy/artifacts``."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "recourse-privacy" / "artifacts"


def resolve_cache_dir(cache_dir: str | Path | None = None) -> Path | None:
    """The cache directory: ``cache_dir``, else ``$RECOURSE_PRIVACY_CACHE``, else the user cache; None when off."""
    for value in (cache_dir, os.environ.get(CACHE_ENV)):
        if value is None or str(value).strip() == "":
            continue
        return None if str(value).strip().lower() in OFF else Path(value).expanduser()
    return default_artifact_dir()


def open_cache(cache: ArtifactCache | str | Path | bool | None = None) -> ArtifactCache | None:
    """An :class:`ArtifactCache` from an instance, a directory, ``"off"``/False (None), or None (the default place).

    A directory is created and marked (:meth:`ArtifactCache.claim`), or refused when it is another's.
    """
    if isinstance(cache, ArtifactCache):
        return cache
    if cache is False:
        return None
    path = resolve_cache_dir(None if cache is True else cache)
    return ArtifactCache(path).claim() if path is not None else None


@dataclass
class RoleStats:
    """Lookups of one role (e.g. ``shadow models``): hits, misses, corrupt entries, and where the time went."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # entries found damaged or foreign: removed and recomputed (also counted as misses)
    too_large: int = 0  # results computed but not stored (over the entry size limit)
    compute_seconds: float = 0.0
    load_seconds: float = 0.0

    @property
    def hit_rate(self) -> float | None:
        n = self.hits + self.misses
        return self.hits / n if n else None

    def add(self, other: RoleStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["compute_seconds"] = round(d["compute_seconds"], 3)
        d["load_seconds"] = round(d["load_seconds"], 3)
        d["hit_rate"] = None if self.hit_rate is None else round(self.hit_rate, 4)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> RoleStats:
        return cls(**{f.name: d.get(f.name, 0) for f in fields(cls)})


def merge_stats(*stats: Mapping[str, Mapping]) -> dict[str, dict]:
    """The sum of several ``stats_dict()`` results (e.g. the cells of a run), role by role."""
    total: dict[str, RoleStats] = {}
    for s in stats:
        for role, d in (s or {}).items():
            total.setdefault(role, RoleStats()).add(RoleStats.from_dict(d))
    return {role: total[role].to_dict() for role in sorted(total)}


@dataclass(frozen=True)
class CacheInfo:
    """What ``recourse-privacy cache info`` prints: where, how many entries of each kind, their size, the last run."""

    root: str
    entries: dict[str, int]
    bytes: int
    last_run: dict | None


class ArtifactCache:
    """The store at ``root`` (see the module docstring); ``stats`` counts this object's lookups by role."""

    def __init__(self, root: str | Path, *, max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES):
        self.root = Path(root).expanduser()
        self.max_entry_bytes = int(max_entry_bytes)
        self.stats: dict[str, RoleStats] = {}
        self._marked = False
        self._counting = threading.Lock()  # the worlds' queries may look up from two threads at once

    def __repr__(self) -> str:
        return f"ArtifactCache({str(self.root)!r})"

    def child(self) -> ArtifactCache:
        """The same store with fresh counters (for a worker process; :meth:`merge` its ``stats_dict()`` back)."""
        return ArtifactCache(self.root, max_entry_bytes=self.max_entry_bytes)

    def merge(self, stats: Mapping[str, Mapping]) -> None:
        """Add another object's ``stats_dict()`` to this one's counters."""
        for role, d in stats.items():
            self._count(role, RoleStats.from_dict(d))

    def stats_dict(self) -> dict[str, dict]:
        """The counters by role, JSON-ready (with each role's hit rate)."""
        with self._counting:
            return {role: self.stats[role].to_dict() for role in sorted(self.stats)}

    def _role(self, role: str) -> RoleStats:
        with self._counting:
            return self.stats.setdefault(role, RoleStats())

    def _count(self, role: str, more: RoleStats) -> None:
        """Add ``more`` to ``role``'s counters, under a lock (``+=`` on a field is not atomic across threads)."""
        stats = self._role(role)
        with self._counting:
            stats.add(more)

    # ------------------------------------------------------------------ the directory's marker
    def is_marked(self) -> bool:
        """Whether the directory carries this store's :data:`MARKER`."""
        return (self.root / MARKER).is_file()

    def owns_directory(self) -> bool:
        """Whether the store may write into (and clear) its directory: absent, empty, marked, or a store of
        before the marker (every file where the layout puts one)."""
        if not self.root.exists() or self.is_marked():
            return True
        if not self.root.is_dir():
            return False
        # another claimer (a thread of this audit, another process) may mark it while the files are listed: the
        # marker then shows up as a file outside the layout, and the directory is ours after all
        return all(_is_own_file(self.root, p) for p in _files(self.root)) or self.is_marked()

    def claim(self) -> ArtifactCache:
        """Create and mark the directory (absent, empty, or a store of before the marker); refuse another's.

        Raises :class:`~recourse_privacy.errors.InvalidInputError` naming the directory, ``--cache-dir``
        and ``$RECOURSE_PRIVACY_CACHE`` for a non-empty directory the store did not create. Safe under
        concurrent callers: the marker is written to a temporary file and renamed into place.
        """
        if self._marked or self.is_marked():
            self._marked = True
            return self
        if not self.owns_directory():
            raise _refusal(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{MARKER}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_TMP}"
        try:
            tmp.write_text(json.dumps({"what": "recourse-privacy artifact cache", "marker_format": MARKER_FORMAT}))
            os.replace(tmp, self.root / MARKER)
        finally:
            tmp.unlink(missing_ok=True)
        self._marked = True
        return self

    # ------------------------------------------------------------------ entries
    def path(self, kind: str, key: str) -> Path:
        """Where the entry ``key`` of ``kind`` lives: ``root/kind/<2 hex>/<key>.npz``."""
        if not key.isalnum() or not kind.replace("-", "").isalnum():
            raise ValueError(f"bad cache kind or key {kind!r} / {key!r}")
        return self.root / kind / key[:2] / f"{key}.npz"

    def get(self, kind: str, key: str, role: str | None = None) -> dict[str, np.ndarray] | None:
        """The arrays of a trusted entry, else None (a damaged or foreign one is removed and counted ``corrupt``)."""
        path = self.path(kind, key)
        t0 = time.perf_counter()
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {name: f[name] for name in f.files}
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            arrays = None
        ok = (
            arrays is not None
            and str(arrays.pop("_key", "")) == key
            and str(arrays.pop("_digest", "")) == _digest(arrays)
        )
        if not ok:
            if role is not None:
                self._count(role, RoleStats(corrupt=1))
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        if role is not None:
            self._count(role, RoleStats(load_seconds=time.perf_counter() - t0))
        return arrays

    def put(self, kind: str, key: str, arrays: Mapping[str, np.ndarray]) -> bool:
        """Store ``arrays`` under ``key`` atomically; False (nothing written) when larger than ``max_entry_bytes``."""
        arrays = {name: np.asarray(a) for name, a in arrays.items()}
        if sum(a.nbytes for a in arrays.values()) > self.max_entry_bytes:
            return False
        path = self.path(kind, key)
        self.claim()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}{_TMP}"
        try:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays, _key=np.array(key), _digest=np.array(_digest(arrays)))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return True

    @contextlib.contextmanager
    def _locked(self, kind: str, keys: Sequence[str]) -> Iterator[None]:
        """Hold the locks of ``keys`` (taken in sorted order, so two holders never deadlock)."""
        lock_dir = self.root / _LOCKS
        self.claim()
        lock_dir.mkdir(parents=True, exist_ok=True)
        fds = []
        try:
            for key in sorted(set(keys)):
                fd = os.open(lock_dir / f"{kind}-{key[:32]}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            for fd in reversed(fds):
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def get_or_compute(
        self, kind: str, key: str, compute: Callable[[], Mapping[str, np.ndarray]], role: str
    ) -> dict[str, np.ndarray]:
        """The entry ``key``, computed by ``compute()`` (and stored) where absent; counted under ``role``."""
        return self.get_or_compute_many(kind, [key], lambda todo: [compute()], role)[0]

    def get_or_compute_many(
        self,
        kind: str,
        keys: Sequence[str],
        compute: Callable[[list[int]], Sequence[Mapping[str, np.ndarray]]],
        role: str,
    ) -> list[dict[str, np.ndarray]]:
        """Entries for every key; ``compute(missing positions)`` returns the missing ones, in one call.

        While it computes, this process holds the missing keys' locks: another process needing
        one of them waits, then reads it (a hit) instead of computing it twice.
        """
        seconds, too_large = 0.0, 0
        out: list[dict | None] = [self.get(kind, k, role) for k in keys]
        todo = [i for i, v in enumerate(out) if v is None]
        if todo:
            with self._locked(kind, [keys[i] for i in todo]):
                for i in todo:  # written by another process while this one waited
                    out[i] = self.get(kind, keys[i], role)
                todo = [i for i, v in enumerate(out) if v is None]
                if todo:
                    t0 = time.perf_counter()
                    computed = list(compute(todo))
                    seconds = time.perf_counter() - t0
                    for i, arrays in zip(todo, computed, strict=True):
                        out[i] = {name: np.asarray(a) for name, a in arrays.items()}
                        if not self.put(kind, keys[i], out[i]):
                            too_large += 1
        more = RoleStats(hits=len(keys) - len(todo), misses=len(todo), too_large=too_large, compute_seconds=seconds)
        self._count(role, more)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ the whole store
    def _entries(self) -> Iterator[Path]:
        if self.root.is_dir():
            for kind in sorted(self.root.iterdir()):
                if kind.is_dir() and kind.name != _LOCKS:
                    yield from kind.glob("*/*.npz")

    def info(self) -> CacheInfo:
        """Entries per kind, total bytes, and the hit rates of the last run recorded here."""
        entries: dict[str, int] = {}
        size = 0
        for path in self._entries():
            kind = path.parent.parent.name
            entries[kind] = entries.get(kind, 0) + 1
            with contextlib.suppress(OSError):
                size += path.stat().st_size
        return CacheInfo(str(self.root), dict(sorted(entries.items())), size, self.last_run())

    def clear(self) -> tuple[int, int]:
        """Remove the store's own files (entries, temporary files, locks, the last-run record) and the
        directories they leave empty; returns (files, bytes) removed.

        Files anywhere else in the directory are kept. Raises
        :class:`~recourse_privacy.errors.InvalidInputError` for a non-empty directory the store did not
        create (no :data:`MARKER`, and files outside its layout).
        """
        if not self.root.is_dir():
            return 0, 0
        if not self.owns_directory():
            raise _refusal(self.root)
        n = size = 0
        for p in _files(self.root):
            if p.is_symlink() or not _is_own_file(self.root, p):
                continue
            with contextlib.suppress(OSError):
                s = p.stat().st_size
                p.unlink()
                n, size = n + 1, size + s
        for top, dirs, _ in os.walk(self.root, topdown=False):
            for d in dirs:
                with contextlib.suppress(OSError):
                    (Path(top) / d).rmdir()  # only the empty ones go (a symlink is not a directory to rmdir)
        return n, size

    def write_last_run(self, what: str, stats: Mapping[str, Mapping]) -> None:
        """Record the counters of a finished run (``cache info`` prints them); never raises."""
        record = {"what": what, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "stats": dict(stats)}
        with contextlib.suppress(OSError, InvalidInputError):
            self.claim()
            tmp = self.root / f".{LAST_RUN}.{os.getpid()}{_TMP}"
            tmp.write_text(json.dumps(record, indent=1))
            os.replace(tmp, self.root / LAST_RUN)

    def last_run(self) -> dict | None:
        """The last run's record, or None."""
        try:
            record = json.loads((self.root / LAST_RUN).read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None


def _files(root: Path) -> Iterator[Path]:
    """Every file (and link) under ``root``, without following links to directories."""
    for top, dirs, names in os.walk(root):
        top_path = Path(top)
        yield from (top_path / name for name in names)
        yield from (top_path / d for d in dirs if (top_path / d).is_symlink())


def _is_own_file(root: Path, path: Path) -> bool:
    """Whether ``path`` (a file under ``root``) sits where the store writes its files, by the layout alone."""
    parts = path.relative_to(root).parts
    if len(parts) == 1:
        return _ROOT_FILES.fullmatch(parts[0]) is not None
    if len(parts) == 2:
        return parts[0] == _LOCKS and _LOCK.fullmatch(parts[1]) is not None
    if len(parts) != 3 or parts[0] == _LOCKS or not re.fullmatch(_KIND, parts[0]):
        return False
    m = _ENTRY.fullmatch(parts[2])
    return m is not None and (m["key"] or m["tmpkey"])[:2] == parts[1]


def _refusal(root: Path) -> InvalidInputError:
    return InvalidInputError(
        f"the cache directory {str(root)!r} is not empty and was not created by recourse-privacy (no {MARKER} "
        f"file), so it is left untouched: name the cache's own directory, or a new or empty one, with --cache-dir or "
        f"${CACHE_ENV}"
    )


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    names = sorted(arrays)
    return sha256_arrays(np.frombuffer("\0".join(names).encode(), np.uint8), *(arrays[n] for n in names))
