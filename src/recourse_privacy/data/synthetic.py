"""Synthetic data of Shokri et al. (2021) as used by Pawelczyk et al. (2023, section 6.1).

For ``d`` features, each class gets its own random vertex of the hypercube
``{-class_sep, +class_sep}^d`` (two distinct vertices), and its points are unit-variance
isotropic Gaussians centred there. This is scikit-learn's ``make_classification`` with one
cluster per class and only informative features, written out so that it runs in one shot
with a numpy Generator at the sizes of the paper (n = 15000, d = 7000: 840 MB of float64).
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.data.domain import synthetic_domain
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import RandomState, as_generator

__all__ = ["SYNTHETIC_DESCRIPTION", "make_synthetic", "synthetic_centers"]

#: the description of the ``synthetic`` dataset (each Dataset adds its n, d and options)
SYNTHETIC_DESCRIPTION = (
    "Two Gaussian classes around random hypercube vertices (Shokri et al. 2021; Pawelczyk et al. 2023)"
)

_CHUNK_ROWS = 1024  # rows shifted at a time, to keep temporaries small


def _draw_centers(rng: np.random.Generator, n_features: int, class_sep: float) -> np.ndarray:
    while True:  # rejection: two distinct vertices (only matters for tiny d)
        signs = rng.integers(0, 2, size=(2, n_features), dtype=np.int8)
        if (signs[0] != signs[1]).any():
            break
    return np.where(signs == 1, class_sep, -class_sep).astype(np.float64)


def _validate(n_features: int, class_sep: float) -> None:
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral):
        raise InvalidInputError(f"n_features must be an int, got {type(n_features).__name__}")
    if n_features < 1:
        raise InvalidInputError(f"n_features must be at least 1, got {n_features}")
    if not np.isfinite(class_sep) or class_sep <= 0:
        raise InvalidInputError(f"class_sep must be a positive number, got {class_sep}")


def synthetic_centers(n_features: int, *, class_sep: float = 1.0, random_state: RandomState = None) -> np.ndarray:
    """The two class centres (rows 0 and 1, shape (2, n_features)) that
    :func:`make_synthetic` uses for the same ``n_features``, ``class_sep`` and int seed."""
    _validate(n_features, class_sep)
    return _draw_centers(as_generator(random_state), int(n_features), float(class_sep))


def make_synthetic(
    n_samples: int,
    n_features: int,
    *,
    class_sep: float = 1.0,
    flip_y: float = 0.0,
    random_state: RandomState = None,
    dtype: str = "float64",
) -> Dataset:
    """Two Gaussian classes around two random hypercube vertices (Shokri et al. 2021).

    ``dtype`` "float32" stores each value as the float64 draw rounded to float32 (relative error at most
    2^-24, the same draws and labels as "float64"): half the memory of the frame, which is the largest
    array of an audit at d = 7,000 (20,000 x 7,000: 1.1 GB in float64). Every reader widens it to
    float64 exactly (:class:`~recourse_privacy.data.Preprocessor`).

    Class 0 gets ``n_samples // 2`` rows and class 1 the rest; row order is shuffled. Each
    row is its class's vertex in ``{-class_sep, +class_sep}^d`` plus standard normal noise
    (float64, columns ``x0..x{d-1}``). Like scikit-learn's ``make_classification``, a
    fraction ``flip_y`` of rows then gets a label drawn uniformly from {0, 1} (so about
    half of those actually change). The same int seed gives the same data.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral):
        raise InvalidInputError(f"n_samples must be an int, got {type(n_samples).__name__}")
    if n_samples < 2:
        raise InvalidInputError(f"n_samples must be at least 2 (one row per class), got {n_samples}")
    _validate(n_features, class_sep)
    if not 0.0 <= flip_y <= 1.0:
        raise InvalidInputError(f"flip_y must be in [0, 1], got {flip_y}")
    if dtype not in ("float64", "float32"):
        raise InvalidInputError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    n, d = int(n_samples), int(n_features)

    rng = as_generator(random_state)
    centers = _draw_centers(rng, d, float(class_sep))
    n0 = n // 2
    labels = np.ones(n, dtype=np.int64)
    labels[:n0] = 0
    labels = rng.permutation(labels)  # the shuffle: class of each (already random) row
    if dtype == "float64":
        X = rng.standard_normal((n, d))  # the only n x d allocation
        for start in range(0, n, _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, n)
            X[start:stop] += centers[labels[start:stop]]
    else:  # drawn in float64 row chunks (the same stream as one draw), each rounded into the float32 frame
        X = np.empty((n, d), dtype=np.float32)
        for start in range(0, n, _CHUNK_ROWS):
            stop = min(start + _CHUNK_ROWS, n)
            X[start:stop] = rng.standard_normal((stop - start, d)) + centers[labels[start:stop]]
    y = labels
    if flip_y > 0:
        flip = rng.random(n) < flip_y
        y = labels.copy()
        y[flip] = rng.integers(0, 2, size=int(flip.sum()))

    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)], copy=False)
    return Dataset(
        name="synthetic",
        X=frame,
        y=y,
        target="y",
        description=(f"{SYNTHETIC_DESCRIPTION}: n={n}, d={d}, class_sep={class_sep}, flip_y={flip_y}"),
        domain=synthetic_domain(d, float(class_sep)),
    )
