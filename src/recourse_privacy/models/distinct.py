"""A row-wise model evaluated once per distinct row of a batch.

Black-box recourse (Growing Spheres, C-CHVAE, FACE's candidates) projects its candidates onto the
action set: integer features are rounded and one-hot groups hold one category, so a batch repeats
many rows (on COMPAS with one-hot and integer columns, 72% of Growing Spheres' candidates). A tree
ensemble or a user's pipeline costs tens of microseconds a row, finding the repeats well under one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["MIN_ROWS", "MAX_DISTINCT_SHARE", "distinct_rows", "on_distinct_rows"]

#: batches shorter than this are evaluated as they are
MIN_ROWS = 256
#: where more than this share of a batch's rows are distinct, it is evaluated as it is
MAX_DISTINCT_SHARE = 0.9


def distinct_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: the index of each distinct row's first occurrence and, per row, its distinct row.

    ``X[first][inverse]`` equals ``X`` as numbers. Rows are compared by their bytes (a row viewed as
    one opaque value, far cheaper than ``np.unique(axis=0)``) after adding 0.0, which turns ``-0.0``
    (a rounded small negative) into ``0.0``: the two compare equal in any classifier's arithmetic.
    """
    Xc = np.ascontiguousarray(X)
    if Xc.dtype.kind == "f":
        Xc = Xc + 0.0
    rows = Xc.reshape(len(Xc), -1)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def on_distinct_rows(fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray) -> np.ndarray:
    """``fn(X)``, with ``fn`` called on the distinct rows of ``X`` only and its values scattered back.

    The same result as ``fn(X)`` wherever ``fn`` maps each row on its own, deterministically (a fitted
    classifier's scores); batches under :data:`MIN_ROWS` rows, or with more than
    :data:`MAX_DISTINCT_SHARE` of them distinct, go to ``fn`` whole.
    """
    if len(X) < MIN_ROWS or X.ndim != 2:
        return fn(X)
    first, inverse = distinct_rows(X)
    if len(first) > MAX_DISTINCT_SHARE * len(X):
        return fn(X)
    return np.asarray(fn(X[first]))[inverse]
