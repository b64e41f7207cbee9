"""Input checks shared by every public entry point; errors name what was wrong."""
from __future__ import annotations

import numbers

import numpy as np


def check_matrix(X, name: str = "X", *, n_features: int | None = None) -> np.ndarray:
    """Return ``X`` as a finite 2-D float64 array, or raise a ValueError naming ``name``."""
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"{name} has {arr.shape[1]} features; the model expects {n_features}")
    bad = ~np.isfinite(arr)
    if bad.any():
        cols = np.unique(np.nonzero(bad)[1])[:10].tolist()
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN or infinite values (feature columns {cols}); "
            "impute or drop them first"
        )
    return arr


def check_binary_labels(y, name: str = "y", *, n: int | None = None) -> np.ndarray:
    """Return ``y`` as a 1-D int64 array of 0/1 labels, or raise a ValueError naming ``name``."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} labels but there are {n} rows")
    values = np.unique(arr)
    if not np.isin(values, [0, 1]).all():
        raise ValueError(f"{name} must be binary 0/1; found values {values[:10].tolist()}")
    return arr.astype(np.int64)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_positive_float(value, name: str) -> float:
    """Return ``value`` as a finite float > 0 or raise a ValueError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number; got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return v


RandomState = int | np.integer | np.random.Generator | None


def as_generator(random_state: RandomState = None) -> np.random.Generator:
    """Turn ``random_state`` (None, an int or a ``numpy.random.Generator``) into a Generator.

    An int seeds a fresh PCG64 generator, so the same int always gives the same numbers; a
    Generator is used as is (and advanced); None gives fresh OS entropy.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
        raise TypeError(
            "random_state must be None, an int or a numpy.random.Generator, "
            f"got {type(random_state).__name__}"
        )
    if random_state < 0:
        raise ValueError(f"random_state must be a non-negative int, got {random_state}")
    return np.random.default_rng(int(random_state))


def derive_seed(random_state, *keys: int) -> int:
    """A reproducible 32-bit seed derived from ``random_state`` and integer ``keys``."""
    base = random_state if isinstance(random_state, numbers.Integral) else as_generator(random_state).integers(2**31)
    return int(np.random.SeedSequence([int(base), *map(int, keys)]).generate_state(1)[0])
