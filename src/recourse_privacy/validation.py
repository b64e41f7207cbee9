"""Input checks shared by every public entry point; errors name what was wrong.

One function per check, in the manner of scikit-learn's ``utils.validation`` and
diffprivlib's ``check_epsilon_delta``; every failure is an
:class:`~recourse_privacy.errors.InvalidInputError` (a ``ValueError``) whose message names the
parameter, the value and what is allowed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError


def check_matrix(X, name: str = "X", *, n_features: int | None = None) -> np.ndarray:
    """Return ``X`` as a finite 2-D float64 array, or raise a ValueError naming ``name``."""
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2:
        raise InvalidInputError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}")
    if n_features is not None and arr.shape[1] != n_features:
        raise InvalidInputError(f"{name} has {arr.shape[1]} features; the model expects {n_features}")
    if np.isfinite(arr).all():  # one n x d mask alive, not two (the inverse only where something is bad)
        return arr
    bad = ~np.isfinite(arr)
    if bad.any():
        cols = np.unique(np.nonzero(bad)[1])[:10].tolist()
        raise InvalidInputError(
            f"{name} contains {int(bad.sum())} NaN or infinite values (feature columns {cols}); "
            "impute or drop them first"
        )
    return arr


def check_binary_labels(y, name: str = "y", *, n: int | None = None) -> np.ndarray:
    """Return ``y`` as a 1-D int64 array of 0/1 labels, or raise a ValueError naming ``name``."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InvalidInputError(f"{name} must be 1-D; got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise InvalidInputError(f"{name} has {arr.shape[0]} labels but there are {n} rows")
    values = np.unique(arr)
    if not np.isin(values, [0, 1]).all():
        raise InvalidInputError(f"{name} must be binary 0/1; found values {values[:10].tolist()}")
    return arr.astype(np.int64)


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` or raise a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidInputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


#: seeds are integers in [0, MAX_SEED] (numpy's SeedSequence refuses negatives; 2**63 bounds a signed 64-bit store)
MAX_SEED = 2**63 - 1


def check_seed(value, name: str = "seed") -> int:
    """Return ``value`` as an int seed in [0, 2**63) or raise naming ``name`` (``--seed``, a spec's ``seeds``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value <= MAX_SEED:
        raise InvalidInputError(f"{name} must be an integer in [0, 2**63); got {value!r}")
    return int(value)


def check_positive_float(value, name: str) -> float:
    """Return ``value`` as a finite float > 0 or raise a ValueError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a positive number; got {value!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise InvalidInputError(f"{name} must be a finite number > 0; got {value!r}")
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
            f"random_state must be None, an int or a numpy.random.Generator, got {type(random_state).__name__}"
        )
    if random_state < 0:
        raise InvalidInputError(f"random_state must be a non-negative int, got {random_state}")
    return np.random.default_rng(int(random_state))


def derive_seed(random_state, *keys: int) -> int:
    """A reproducible 32-bit seed derived from ``random_state`` and integer ``keys``."""
    base = random_state if isinstance(random_state, numbers.Integral) else as_generator(random_state).integers(2**31)
    return int(np.random.SeedSequence([int(base), *map(int, keys)]).generate_state(1)[0])


def check_epsilon(epsilon, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """Return a privacy parameter epsilon as a float: finite and > 0 (>= 0 with ``allow_zero``)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise InvalidInputError(f"{name} must be a finite number > 0; got {epsilon!r}")
    eps = float(epsilon)
    if not math.isfinite(eps) or eps < 0 or (eps == 0 and not allow_zero):
        raise InvalidInputError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0; got {epsilon!r}")
    return eps


def check_delta(delta, name: str = "delta") -> float:
    """Return a privacy parameter delta as a float in [0, 1)."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 <= float(delta) < 1:
        raise InvalidInputError(f"{name} must be a number in [0, 1); got {delta!r}")
    return float(delta)


def check_interval(value, name: str, low: float, high: float, *, closed: str = "neither") -> float:
    """Return ``value`` as a float inside (low, high); ``closed`` is 'neither', 'left', 'right' or 'both'."""
    lo_ok = (lambda v: v >= low) if closed in ("left", "both") else (lambda v: v > low)
    hi_ok = (lambda v: v <= high) if closed in ("right", "both") else (lambda v: v < high)
    left = "[" if closed in ("left", "both") else "("
    right = "]" if closed in ("right", "both") else ")"
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not (lo_ok(v) and hi_ok(v)):
        raise InvalidInputError(f"{name} must be in {left}{low:g}, {high:g}{right}; got {value!r}")
    return v


def check_choice(value, name: str, options: Iterable) -> object:
    """Return ``value`` if it is one of ``options``, else raise naming the parameter and the options."""
    options = tuple(options)
    if value not in options:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(str, options))}; got {value!r}")
    return value


def check_is_fitted(estimator, attribute: str) -> None:
    """Raise :class:`NotFittedError` where ``estimator`` lacks the fitted ``attribute`` (trailing underscore)."""
    if getattr(estimator, attribute, None) is None:
        raise NotFittedError(f"{type(estimator).__name__} is not fitted; call fit first")


def check_output_dir(path, name: str = "--out"):
    """Return ``path`` as a Path to a directory this process can write, creating it; else raise naming it.

    Runs before any long computation, so that an output directory that is a file, ``/dev/null``,
    read-only or on a missing device fails at once rather than after the work.
    """
    import os
    import tempfile
    from pathlib import Path

    try:
        p = Path(path).expanduser()
    except TypeError:
        raise InvalidInputError(f"{name} must be a directory path; got {path!r}") from None
    if p.exists() and not p.is_dir():
        raise InvalidInputError(f"{name} {str(p)!r} exists and is not a directory; give a directory to write into")
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InvalidInputError(f"{name} {str(p)!r} is not a writable directory: {err.strerror or err}") from None
    return p


def same_label(value, label) -> bool:
    """Whether ``label`` (as a user gives it: a command line's text, a JSON value) names the class ``value``: equal,
    the same text, or the same number (``--positive-label 1`` names a label stored as 1.0)."""
    if value == label or str(value) == str(label):
        return True
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.number)):
        return False
    try:
        return float(str(label)) == float(value)
    except ValueError:
        return False
