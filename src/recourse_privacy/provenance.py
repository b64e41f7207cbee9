"""Content-addressed keys and provenance: what a number was computed from, so a cache is never stale.

Every cache entry and store record of the package is keyed by the content it depends on (the
data file's SHA-256, the configuration, the package version), never by a path, and carries a
checksum of its own content that is verified whenever it is read: a mismatch is recomputed,
never used. :class:`Provenance` is what ``metrics.json`` records about where its numbers came
from (data source and SHA-256, package version, platform).

Hashing a file is cheap after the first time: :func:`sha256_file` remembers each file's hash
per (path, size, modification time), so a file is re-read only when it changed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Provenance",
    "code_version",
    "content_key",
    "package_version",
    "platform_string",
    "processor_string",
    "sha256_arrays",
    "sha256_file",
    "sha256_json",
    "source_digest",
]

_FILE_HASHES: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, computed once per (path, size, modification time)."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _LOCK:
        if key in _FILE_HASHES:
            return _FILE_HASHES[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with _LOCK:
        _FILE_HASHES[key] = digest
    return digest


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    return str(o)


def sha256_json(obj: Any) -> str:
    """The SHA-256 of ``obj`` as canonical JSON (sorted keys, no whitespace); numpy values converted."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=_json_default, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_arrays(*arrays: np.ndarray) -> str:
    """The SHA-256 of arrays' dtypes, shapes and bytes (C order), in the order given."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        try:  # the array's own bytes, without the copy tobytes() makes (the same bytes: the same digest)
            h.update(memoryview(a.reshape(-1)).cast("B"))
        except (TypeError, ValueError, NotImplementedError):  # dtypes the buffer protocol lacks
            h.update(a.tobytes())
    return h.hexdigest()


def package_version() -> str:
    """The installed recourse-privacy version."""
    from recourse_privacy import __version__

    return str(__version__)


@functools.lru_cache(maxsize=4)
def source_digest(root: str | None = None) -> str:
    """SHA-256 (16 hex digits) of the Python sources under ``root`` (default: this package), by relative path.

    Computed once per process (about 200 files, 15 ms). A key of the version alone would let a store serve a
    result the code no longer computes whenever the code changes between releases (a checkout, an edit).
    """
    root = Path(root) if root is not None else Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def code_version() -> str:
    """The version and the sources' digest, e.g. ``0.9.0+src.7e461f5327da4c14``: what the stores' keys read."""
    return f"{package_version()}+src.{source_digest()}"


def platform_string() -> str:
    """Python version and platform, e.g. ``CPython 3.11.9 Linux-6.1-x86_64``."""
    return f"{platform.python_implementation()} {platform.python_version()} {platform.platform(terse=True)}"


def _cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else :func:`platform.processor` ("" when unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def processor_string() -> str:
    """The CPU the numbers were computed on, e.g. ``AMD EPYC, 2 CPUs; torch 2.13.0, CPU kernels AVX2``.

    A network's float32 kernels differ between CPU instruction sets (torch picks AVX2 or AVX-512 at run time), and
    an MLP's thousands of Adam steps amplify the rounding: the same seed gives the same numbers on one kind of host,
    not across them (docs/performance.md, "Stop 47"). torch is named only where this process already loaded it.
    """
    import os

    text = f"{_cpu_model() or 'unknown CPU'}, {os.cpu_count()} CPUs"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            text += f"; torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}"
        except Exception:  # noqa: BLE001 - an old torch without the query: the version alone
            text += f"; torch {torch.__version__}"
    return text


def content_key(*parts: Any) -> str:
    """A 16-hex-digit key of ``parts`` (JSON-able values) and the code (:func:`code_version`)."""
    return sha256_json([code_version(), *parts])[:16]


@dataclass(frozen=True)
class Provenance:
    """Where an audit's numbers came from.

    ``data_source`` is the file read (a path) or the generator's name (``synthetic``);
    ``data_sha256`` the SHA-256 of that file's bytes (None for generated data, whose
    configuration determines it); ``package_version`` and ``platform`` the software it ran on, and
    ``source_digest`` (:func:`source_digest`) which sources of that version: two runs of one version
    between commits differ there ("" in records written before it was kept); ``processor``
    (:func:`processor_string`) the CPU and torch's kernels, on which a network's figures depend ("" before stop 48).
    """

    data_source: str
    data_sha256: str | None
    package_version: str
    platform: str
    python: str = sys.version.split()[0]
    source_digest: str = ""
    processor: str = ""

    @classmethod
    def current(cls, data_source: str, data_sha256: str | None) -> Provenance:
        """Provenance of numbers computed now, by this process, from ``data_source``."""
        return cls(
            data_source=str(data_source),
            data_sha256=data_sha256,
            package_version=package_version(),
            platform=platform_string(),
            source_digest=source_digest(),
            processor=processor_string(),
        )

    def to_dict(self) -> dict:
        return asdict(self)
