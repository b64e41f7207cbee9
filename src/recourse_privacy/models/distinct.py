"""A row-wise model evaluated once per distinct row of a batch.

Black-box recourse (Growing Spheres, C-CHVAE, FACE's candidates) projects its candidates onto the
action set: integer features are rounded and one-hot groups hold one category, so a batch repeats
many rows (on COMPAS with one-hot and integer columns, 72% of Growing Spheres' candidates). A tree
ensemble or a user's pipeline costs microseconds to tens of microseconds a row; finding the repeats costs
about a tenth of a microsecond where there are none.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["MIN_ROWS", "MAX_DISTINCT_SHARE", "distinct_rows", "on_distinct_rows"]

#: batches shorter than this are evaluated as they are
MIN_ROWS = 256
#: where more than this share of a batch's rows are distinct, it is evaluated as it is
MAX_DISTINCT_SHARE = 0.9
#: the seed of the random projection rows are grouped by (fixed: the same grouping every run)
_PROBE_SEED = 20261126


def distinct_rows(X: np.ndarray, max_share: float = 1.0) -> tuple[np.ndarray, np.ndarray] | None:
    """``(first, inverse)``: each distinct row's first occurrence and, per row, its distinct row; None where
    more than ``max_share`` of the rows are distinct.

    ``X[first][inverse]`` equals ``X`` as numbers (``-0.0`` and ``0.0`` alike). The rows are grouped by one
    fixed random projection (one matrix-vector product and a sort of n numbers, cheap enough to spend on a
    batch without repeats), and the grouping is then checked entry by entry; should two different rows
    ever share a projection, the rows are grouped by their bytes instead (``np.unique`` of each row as one
    opaque value, after adding 0.0, which turns ``-0.0`` into ``0.0``), so the answer is always exact.
    """
    rows = np.ascontiguousarray(X).reshape(len(X), -1)
    probe = np.random.default_rng(_PROBE_SEED).standard_normal(rows.shape[1])
    h = rows @ probe
    ordered = np.sort(h)  # counting the distinct projections first halves the cost of a batch without repeats
    if 1 + np.count_nonzero(ordered[1:] != ordered[:-1]) > max_share * len(rows):
        return None
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not np.array_equal(rows[first[inverse]], rows):  # a shared projection (or NaN): group by bytes
        if rows.dtype.kind == "f":
            rows = rows + 0.0
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        if len(first) > max_share * len(rows):
            return None
        inverse = inverse.reshape(-1)
    return first, inverse


def on_distinct_rows(fn: Callable[[np.ndarray], np.ndarray], X: np.ndarray) -> np.ndarray:
    """``fn(X)``, with ``fn`` called on the distinct rows of ``X`` only and its values scattered back.

    The same result as ``fn(X)`` wherever ``fn`` maps each row on its own, deterministically (a fitted
    classifier's scores); batches under :data:`MIN_ROWS` rows, or with more than
    :data:`MAX_DISTINCT_SHARE` of them distinct, go to ``fn`` whole.
    """
    if len(X) < MIN_ROWS or X.ndim != 2:
        return fn(X)
    grouped = distinct_rows(X, MAX_DISTINCT_SHARE)
    if grouped is None:
        return fn(X)
    first, inverse = grouped
    return np.asarray(fn(X[first]))[inverse]
