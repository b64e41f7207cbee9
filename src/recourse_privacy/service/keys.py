"""API keys: random tokens stored only as SHA-256 hashes, each with a name, a privacy budget and a query cap.

The key file is JSON (``{"format", "version", "keys": [...]}``), rewritten atomically (a
temporary file, then ``os.replace``) under an exclusive ``flock`` so that concurrent ``keys add``
never lose an entry. A key is ``rpk_`` followed by 43 URL-safe characters (256 random bits from
:mod:`secrets`): a hash of such a key cannot be reversed by guessing, so a plain SHA-256 (no
salt, no slow hash) is enough and lets the server look a key up in one dictionary access.
The server re-reads the file when it changes, so a revoked key stops working without a restart.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from recourse_privacy.errors import InvalidInputError, MissingFileError

__all__ = ["ApiKey", "KeyStore", "hash_key"]

KEYS_FORMAT = "recourse-privacy/api-keys"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


def hash_key(key: str) -> str:
    """SHA-256 hex digest of ``key``."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    """One stored key: ``id`` (the first 16 hex digits of its hash) is the ledger's account."""

    name: str
    hash: str
    budget: float
    query_cap: int | None
    created: str
    revoked: str | None = None

    @property
    def id(self) -> str:
        return self.hash[:16]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "hash": self.hash,
            "budget": self.budget,
            "query_cap": self.query_cap,
            "created": self.created,
            "revoked": self.revoked,
        }


class KeyStore:
    """The key file at ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ reading
    def load(self) -> list[ApiKey]:
        if not self.path.exists():
            return []
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("format") != KEYS_FORMAT:
                raise ValueError(f"format is {doc.get('format')!r}")
            return [ApiKey(**k) for k in doc["keys"]]
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InvalidInputError(f"{self.path} is not a recourse-privacy key file: {err}") from None

    def active(self) -> dict[str, ApiKey]:
        """Hash -> key, revoked keys left out."""
        return {k.hash: k for k in self.load() if k.revoked is None}

    # ------------------------------------------------------------------ writing
    @contextlib.contextmanager
    def _locked(self):
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, keys: list[ApiKey]) -> None:
        doc = {"format": KEYS_FORMAT, "version": 1, "keys": [k.to_dict() for k in keys]}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=2, allow_nan=False))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def add(self, name: str, *, budget: float = 0.0, query_cap: int | None = None) -> str:
        """Make a key for ``name``; store its hash; return the key (shown once, never stored)."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidInputError(
                f"key name {name!r}: 1-64 characters, letters, digits and _ . @ -, starting with a letter or digit"
            )
        budget = float(budget)
        if not math.isfinite(budget) or budget < 0:
            raise InvalidInputError(f"--budget must be a finite epsilon >= 0; got {budget!r}")
        if query_cap is not None and (isinstance(query_cap, bool) or int(query_cap) != query_cap or query_cap < 1):
            raise InvalidInputError(f"--query-cap must be a whole number >= 1; got {query_cap!r}")
        key = "rpk_" + secrets.token_urlsafe(32)
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        with self._locked():
            keys = self.load()
            if any(k.name == name and k.revoked is None for k in keys):
                raise InvalidInputError(f"an active key named {name!r} exists in {self.path}; revoke it first")
            keys.append(ApiKey(name, hash_key(key), budget, None if query_cap is None else int(query_cap), now))
            self._write(keys)
        return key

    def revoke(self, name: str) -> int:
        """Revoke every active key named ``name``; return how many."""
        if not self.path.exists():
            raise MissingFileError(f"no key file {self.path}")
        now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        with self._locked():
            keys = self.load()
            n = sum(1 for k in keys if k.name == name and k.revoked is None)
            if not n:
                raise InvalidInputError(f"no active key named {name!r} in {self.path}")
            self._write([ApiKey(**{**k.to_dict(), "revoked": now}) if k.name == name and k.revoked is None else k
                         for k in keys])  # fmt: skip
        return n
