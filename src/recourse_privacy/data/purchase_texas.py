"""Purchase-100 and Texas-100 (Shokri et al. 2017; Nasr et al. 2018), read from local files.

They cannot be downloaded here (the authors host them; mirrored in privacytrustlab/datasets),
so the loaders read files the user puts in the data directory, in the authors' formats:

- Purchase-100: ``dataset_purchase``, comma-separated, no header, one row per customer: the
  class label (1..100) then 600 binary purchase indicators (197,324 rows in the full file);
- Texas-100: ``texas100_feats`` (comma-separated, 6,169 binary features per row) and
  ``texas100_labels`` beside it (one class label 1..100 per line; 67,330 rows in the full file).

Checks: the shape of every row, binary features, labels in 1..100, equal row counts; and, if
the user passes ``sha256=``, the file's SHA-256 (no checksum of the authors' files is recorded
in this project: we could not fetch them to compute one, see :data:`KNOWN_SHA256`). The
registered datasets ``purchase100`` / ``texas100`` are the project's binary view (``positive``
classes against the rest, default the most frequent class); :func:`read_purchase100` and
:func:`read_texas100` give the 100-class arrays for multi-class work (DPC's spec. targets).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import ChecksumError, Dataset
from recourse_privacy.data.registry import register_dataset
from recourse_privacy.errors import InvalidInputError, MissingFileError

__all__ = [
    "KNOWN_SHA256",
    "PURCHASE_FILE",
    "TEXAS_FEATS_FILE",
    "TEXAS_LABELS_FILE",
    "read_purchase100",
    "read_texas100",
]

PURCHASE_FILE = "dataset_purchase"
TEXAS_FEATS_FILE = "texas100_feats"
TEXAS_LABELS_FILE = "texas100_labels"
PURCHASE_FEATURES, TEXAS_FEATURES, N_CLASSES = 600, 6169, 100
#: SHA-256 of the authors' files; None where unknown to this project (pass sha256= to pin your copy)
KNOWN_SHA256: dict[str, str | None] = {PURCHASE_FILE: None, TEXAS_FEATS_FILE: None, TEXAS_LABELS_FILE: None}
_WHERE = (
    "download it from the authors (Shokri et al. 2017; mirrored at github.com/privacytrustlab/datasets) "
    "and put it in the data directory ($RECOURSE_PRIVACY_DATA)"
)


def _check_sha(path: Path, sha256: str | None) -> None:
    expected = sha256 or KNOWN_SHA256.get(path.name)
    if expected is None:
        return
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != expected.lower():
        raise ChecksumError(f"{path}: SHA-256 {h.hexdigest()} differs from the expected {expected}")


def _read_csv(path: Path, what: str) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{what}: {path} not found; {_WHERE}")
    try:
        return pd.read_csv(path, header=None, dtype=np.float64).to_numpy()
    except (ValueError, pd.errors.ParserError) as err:
        raise InvalidInputError(f"{path}: not a comma-separated numeric file ({err})") from None


def _check(X: np.ndarray, y: np.ndarray, n_features: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    if X.ndim != 2 or X.shape[1] != n_features:
        raise InvalidInputError(f"{path}: expected {n_features} features per row, got {X.shape[1:]}")
    if not np.isin(X, (0.0, 1.0)).all():
        raise InvalidInputError(f"{path}: features must be binary 0/1")
    if len(y) != len(X):
        raise InvalidInputError(f"{path}: {len(y)} labels for {len(X)} rows")
    if len(y) and (y.min() < 1 or y.max() > N_CLASSES or not np.all(y == np.round(y))):
        raise InvalidInputError(f"{path}: labels must be integers 1..{N_CLASSES}")
    return X, (y - 1).astype(np.int64)


def read_purchase100(path: str | Path, *, sha256: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, 600) binary, y (n,) classes 0..99) from the authors' ``dataset_purchase`` file."""
    path = Path(path)
    raw = _read_csv(path, "Purchase-100")
    _check_sha(path, sha256)
    return _check(raw[:, 1:], raw[:, 0], PURCHASE_FEATURES, path)


def read_texas100(
    path: str | Path, labels_path: str | Path | None = None, *, sha256: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, 6169) binary, y (n,) classes 0..99) from ``texas100_feats`` and ``texas100_labels`` beside it."""
    path = Path(path)
    labels_path = Path(labels_path) if labels_path else path.with_name(TEXAS_LABELS_FILE)
    X = _read_csv(path, "Texas-100 features")
    y = _read_csv(labels_path, "Texas-100 labels")
    _check_sha(path, sha256)
    if y.ndim != 2 or y.shape[1] != 1:
        raise InvalidInputError(f"{labels_path}: expected one label per line")
    return _check(X, y[:, 0], TEXAS_FEATURES, path)


def _binary_view(name: str, X: np.ndarray, y: np.ndarray, positive) -> Dataset:
    pos = (
        [int(np.bincount(y, minlength=N_CLASSES).argmax())]
        if positive is None
        else ([int(positive)] if np.isscalar(positive) else [int(p) for p in positive])
    )
    if not pos or not all(0 <= p < N_CLASSES for p in pos):
        raise InvalidInputError(f"positive must be classes 0..{N_CLASSES - 1}; got {positive!r}")
    cols = [f"f{j}" for j in range(X.shape[1])]
    return Dataset(
        name=name,
        X=pd.DataFrame(X, columns=cols),
        y=np.isin(y, pos).astype(np.int64),
        target="class",
        description=f"{name}: class(es) {sorted(set(pos))} (1) against the other classes (0)",
    )


@register_dataset(
    "purchase100",
    description="Purchase-100 (Shokri et al. 2017): 600 binary purchase features; local file only",
    source="file",
    file=PURCHASE_FILE,
    options=("positive", "sha256"),
)
def _load_purchase100(path: Path, positive: int | Sequence[int] | None = None, sha256: str | None = None) -> Dataset:
    X, y = read_purchase100(path, sha256=sha256)
    return _binary_view("purchase100", X, y, positive)


@register_dataset(
    "texas100",
    description="Texas-100 (Nasr et al. 2018): 6,169 binary hospital features; local files only",
    source="file",
    file=TEXAS_FEATS_FILE,
    options=("positive", "sha256"),
)
def _load_texas100(path: Path, positive: int | Sequence[int] | None = None, sha256: str | None = None) -> Dataset:
    X, y = read_texas100(path, sha256=sha256)
    return _binary_view("texas100", X, y, positive)
