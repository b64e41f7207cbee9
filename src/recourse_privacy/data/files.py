"""Where a named dataset's file is read from, and its checked download.

A dataset read from a file declares, in its :func:`~recourse_privacy.data.registry.register_dataset`
decorator, the file name and, for a public file, its ``url``, its ``sha256`` and (for a zip
archive) the ``member`` to extract: this module reads them from the registry entry, so a new
dataset is one declaration and there is no separate list of sources or checksums.

Files are read from a data directory, chosen as

1. the ``data_dir`` argument, else
2. the environment variable ``RECOURSE_PRIVACY_DATA``, else
3. the user cache ``$XDG_CACHE_HOME/recourse-privacy`` (or ``~/.cache/recourse-privacy``).

A public file absent there (and from the cache) is downloaded, when ``download=True``, from its
``url`` into the cache: written to a temporary file, checked against its ``sha256``, then
renamed into place. A file with a declared ``sha256`` is checked whenever it is read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recourse_privacy.data.dataset import ChecksumError
from recourse_privacy.data.registry import DATASETS, lookup
from recourse_privacy.errors import InvalidInputError, MissingFileError
from recourse_privacy.provenance import sha256_file

__all__ = [
    "ENV_VAR",
    "RemoteFile",
    "dataset_file",
    "default_cache_dir",
    "fetch_file",
    "remote_file",
    "resolve_data_dir",
    "source_url",
    "verify_file",
]

ENV_VAR = "RECOURSE_PRIVACY_DATA"

# The URL opener, module-level so that tests can replace it (monkeypatch) to work offline.
_urlopen: Callable[..., Any] = urllib.request.urlopen
_DOWNLOAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class RemoteFile:
    """A data file as its dataset declares it: name, public URL (None: local only), zip member, SHA-256."""

    filename: str
    url: str | None
    member: str | None
    sha256: str | None


def remote_file(filename: str) -> RemoteFile | None:
    """The declaration of ``filename`` by the registered dataset that reads it (None: no dataset reads it)."""
    for entry in DATASETS.entries():
        if entry.meta.get("file") == filename:
            return RemoteFile(filename, entry.meta.get("url"), entry.meta.get("member"), entry.meta.get("sha256"))
    return None


def default_cache_dir() -> Path:
    """The user cache directory: ``$XDG_CACHE_HOME/recourse-privacy`` or ``~/.cache/...``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "recourse-privacy"


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The directory to read real datasets from: argument, else env var, else the cache."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return default_cache_dir()


def _public(filename: str) -> RemoteFile:
    """The declaration of a file that has a public source, else an error naming the known ones."""
    remote = remote_file(filename)
    if remote is None or remote.url is None:
        known = sorted(e.meta["file"] for e in DATASETS.entries() if e.meta.get("url"))
        raise InvalidInputError(f"no public source known for {filename!r}; known: {known}")
    return remote


def source_url(filename: str) -> str:
    """The public URL a data file is downloaded from."""
    url = _public(filename).url
    assert url is not None  # _public checked it
    return url


def verify_file(path: Path) -> Path:
    """``path`` if its SHA-256 is the one its dataset declares, else a :class:`ChecksumError`.

    Runs whenever a data file is read, not only after a download; the hash is computed once
    per file and modification time (:func:`~recourse_privacy.provenance.sha256_file`).
    """
    remote = remote_file(path.name)
    if remote is None or remote.sha256 is None:
        raise MissingFileError(f"no registered dataset declares a SHA-256 for {path.name!r}")
    actual = sha256_file(path)
    if actual != remote.sha256:
        raise ChecksumError(
            f"{path} has SHA-256 {actual}, but its dataset declares {remote.sha256}: the file is corrupted or "
            f"was edited. Delete it (it is downloaded again) or restore the original; to audit a modified "
            f"table on purpose, pass it as --data FILE --target COLUMN"
        )
    return path


def _not_found_message(remote: RemoteFile, looked_in: list[Path], reason: str = "") -> str:
    where = " or ".join(str(p) for p in dict.fromkeys(looked_in))
    msg = (
        f"{remote.filename} not found in {where}. Put it in a directory and pass data_dir=... or set "
        f"the environment variable {ENV_VAR} to that directory"
    )
    if remote.url is not None:
        fetch = f"{remote.url} (extract {remote.member} from the zip)" if remote.member else remote.url
        msg += f"; you can fetch it by hand from {fetch} (cache directory: {default_cache_dir()})"
    msg += "."
    if reason:
        msg += f" Automatic download failed: {reason}"
    return msg


def _download(remote: RemoteFile, cache_dir: Path) -> Path:
    """Download ``remote`` into ``cache_dir`` via a temp file; verify SHA-256; rename."""
    filename, url, member = remote.filename, remote.url, remote.member
    assert url is not None and remote.sha256 is not None  # register_dataset requires both together
    cache_dir.mkdir(parents=True, exist_ok=True)
    dest = cache_dir / filename
    tmp_paths: list[Path] = []

    def new_tmp(suffix: str) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{filename}.", suffix=suffix, dir=cache_dir)
        os.close(fd)
        tmp_paths.append(Path(name))
        return Path(name)

    try:
        raw = new_tmp(".part")
        with _urlopen(url, timeout=_DOWNLOAD_TIMEOUT) as response, open(raw, "wb") as out:
            shutil.copyfileobj(response, out)
        payload = raw
        if member is not None:
            payload = new_tmp(".extract")
            with zipfile.ZipFile(raw) as zf:
                names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == member]
                if not names:
                    raise MissingFileError(f"{member} is not inside the archive {url}")
                with zf.open(names[0]) as src, open(payload, "wb") as out:
                    shutil.copyfileobj(src, out)
        actual = sha256_file(payload)
        if actual != remote.sha256:
            raise ChecksumError(
                f"checksum mismatch for {filename} downloaded from {url}: SHA-256 is {actual}, "
                f"expected {remote.sha256}; the download was discarded"
            )
        os.replace(payload, dest)
    finally:
        for p in tmp_paths:
            p.unlink(missing_ok=True)
    return dest


def fetch_file(filename: str, data_dir: str | Path | None = None, *, download: bool = True) -> Path:
    """Path of a public data file: from the data directory, else the cache, else downloaded.

    Raises FileNotFoundError (naming the file, the directories searched, the environment
    variable and the public URL) when it is absent and ``download`` is False or the download
    fails, and :class:`ChecksumError` when the file has the wrong SHA-256.
    """
    remote = _public(filename)
    looked_in = [resolve_data_dir(data_dir), default_cache_dir()]
    for directory in looked_in:
        if (directory / filename).is_file():
            return verify_file(directory / filename)
    if not download:
        raise MissingFileError(_not_found_message(remote, looked_in) + " (Not downloaded: download=False.)")
    try:
        return _download(remote, looked_in[1])
    except ChecksumError:
        raise
    except (OSError, zipfile.BadZipFile) as err:  # URLError is an OSError
        reason = getattr(err, "reason", None) or err
        raise MissingFileError(_not_found_message(remote, looked_in, str(reason))) from err


def _local_file(remote: RemoteFile, data_dir: str | Path | None) -> Path:
    """A file with no public source (a third party's dataset): the data directory, else the cache."""
    looked_in = list(dict.fromkeys((resolve_data_dir(data_dir), default_cache_dir())))
    for directory in looked_in:
        path = directory / remote.filename
        if path.is_file():
            return verify_file(path) if remote.sha256 is not None else path
    raise MissingFileError(_not_found_message(remote, looked_in))


def dataset_file(name: str, data_dir: str | Path | None = None, *, download: bool = True) -> Path | None:
    """The verified file a named dataset is read from, or None for generated data (synthetic, scikit-learn's)."""
    entry = lookup(name)
    if entry.meta.get("source") != "file":
        return None
    remote = RemoteFile(entry.meta["file"], entry.meta.get("url"), entry.meta.get("member"), entry.meta.get("sha256"))
    if remote.url is not None:
        return fetch_file(remote.filename, data_dir, download=download)
    return _local_file(remote, data_dir)
