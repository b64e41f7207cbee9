"""The :class:`Dataset` container and :class:`ChecksumError`; no dependency on any loader.

Every loader (the built-in ones in :mod:`~recourse_privacy.data.datasets`, the generator in
:mod:`~recourse_privacy.data.synthetic`, :func:`~recourse_privacy.data.load_tabular` and a
third party's registered loader) returns a :class:`Dataset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recourse_privacy.errors import InvalidInputError

__all__ = ["ChecksumError", "Dataset"]


class ChecksumError(InvalidInputError):
    """A data file's SHA-256 differs from the one its dataset declares (register_dataset(sha256=...))."""


@dataclass(frozen=True)
class Dataset:
    """A binary classification dataset with the feature constraints recourse must respect.

    ``X`` holds the raw features (label removed): categorical columns as strings (object
    dtype), numeric ones as float64. ``y`` is int64 0/1 with 1 = favourable outcome.
    ``immutable`` names raw columns recourse must not change; ``increasing`` raw columns
    that may only increase. ``label_values`` are the original (favourable, unfavourable)
    values of the label column, where it had other values than 0/1 (a user's table); the
    audit trains a user's own estimator with them. ``domain``: the public metadata the private
    recourse methods take their bounds from (:mod:`~recourse_privacy.data.domain`). Construction checks the shapes, the 0/1 labels and that every
    named column exists (an :class:`~recourse_privacy.errors.InvalidInputError` otherwise).
    """

    name: str
    X: pd.DataFrame
    y: np.ndarray
    target: str
    categorical: tuple[str, ...] = ()
    immutable: tuple[str, ...] = ()
    increasing: tuple[str, ...] = ()
    description: str = ""
    label_values: tuple | None = None
    #: public domain metadata (:class:`~recourse_privacy.data.domain.Domain`): documented bounds,
    #: categories, immutability and direction per feature; None where none is declared
    domain: object = None

    def __post_init__(self) -> None:
        if not isinstance(self.X, pd.DataFrame):
            raise InvalidInputError(f"Dataset.X must be a pandas DataFrame, got {type(self.X).__name__}")
        y = np.asarray(self.y)
        if y.ndim != 1 or len(y) != len(self.X):
            raise InvalidInputError(f"Dataset {self.name!r}: y has shape {y.shape} but X has {len(self.X)} rows")
        if len(y) and not np.isin(y, (0, 1)).all():
            bad = pd.unique(y[~np.isin(y, (0, 1))])[:5]
            raise InvalidInputError(f"Dataset {self.name!r}: y must be 0/1, found values {list(bad)}")
        object.__setattr__(self, "y", y.astype(np.int64, copy=False))
        if self.target in self.X.columns:
            raise InvalidInputError(f"Dataset {self.name!r}: the label column {self.target!r} is in X")
        columns = set(map(str, self.X.columns))
        for field in ("categorical", "immutable", "increasing"):
            names = tuple(getattr(self, field))
            object.__setattr__(self, field, names)
            unknown = [c for c in names if c not in columns]
            if unknown:
                raise InvalidInputError(
                    f"Dataset {self.name!r}: {field} names unknown columns {unknown}; "
                    f"columns are {list(self.X.columns)}"
                )

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self.X)

    @property
    def n_features(self) -> int:
        """Number of raw feature columns (before any encoding)."""
        return self.X.shape[1]

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Raw feature column names, in order."""
        return tuple(map(str, self.X.columns))

    def subset(self, indices: Sequence[int] | np.ndarray) -> Dataset:
        """The rows ``indices`` (positions) as a new Dataset with a fresh 0..n-1 index."""
        idx = np.asarray(indices, dtype=np.int64)
        return Dataset(
            name=self.name,
            X=self.X.iloc[idx].reset_index(drop=True),
            y=self.y[idx],
            target=self.target,
            categorical=self.categorical,
            immutable=self.immutable,
            increasing=self.increasing,
            description=self.description,
            label_values=self.label_values,
            domain=self.domain,
        )
