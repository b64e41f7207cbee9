"""Min-max scaling with PUBLIC bounds (domain knowledge), never the data's own min and max.

Paper 003 (Pentyala et al. 2023, sec. 5.1) scales every continuous feature with an assumed
public minimum and maximum so that the sensitivity of each feature is bounded; reading the
bounds from the data would leak the extreme records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_choice, check_matrix

__all__ = ["UNIT_BOX_TOL", "PublicScaler", "check_unit_box", "outside_unit_box"]


@dataclass(frozen=True)
class PublicScaler:
    """x -> (x - lower) / (upper - lower) per feature, with declared public ``lower``/``upper``."""

    lower: np.ndarray
    upper: np.ndarray
    feature_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        lo, hi = np.asarray(self.lower, np.float64).ravel(), np.asarray(self.upper, np.float64).ravel()
        if lo.shape != hi.shape or not len(lo):
            raise InvalidInputError(
                f"public bounds: lower and upper must be 1-d of one length; got {lo.shape}, {hi.shape}"
            )
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or (hi <= lo).any():
            raise InvalidInputError("public bounds: every feature needs finite lower < upper")
        if self.feature_names and len(self.feature_names) != len(lo):
            raise InvalidInputError(f"public bounds: {len(self.feature_names)} names for {len(lo)} features")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @property
    def n_features(self) -> int:
        return int(self.lower.shape[0])

    def transform(self, X, *, out_of_bounds: str = "raise") -> np.ndarray:
        """Scale ``X`` to [0, 1]^d; values outside the public bounds raise (or are clipped with ``"clip"``)."""
        X = check_matrix(X, n_features=self.n_features)
        check_choice(out_of_bounds, "out_of_bounds", ("raise", "clip"))
        Z = (X - self.lower) / (self.upper - self.lower)
        return check_unit_box(Z, out_of_bounds=out_of_bounds, names=self.feature_names)

    def inverse_transform(self, Z) -> np.ndarray:
        """Back to the original units."""
        Z = check_matrix(Z, n_features=self.n_features)
        return self.lower + Z * (self.upper - self.lower)


#: how far outside [0, 1] (after scaling by the public bounds) a value may lie and still count as inside (rounding)
UNIT_BOX_TOL = 1e-9


def outside_unit_box(Z: np.ndarray, tol: float = UNIT_BOX_TOL) -> np.ndarray:
    """(n, d) mask of the values of ``Z`` outside [0, 1] by more than ``tol``."""
    return (Z < -tol) | (Z > 1 + tol)


def check_unit_box(
    Z: np.ndarray, *, out_of_bounds: str = "raise", names=(), tol: float = UNIT_BOX_TOL, method: str = "privrecourse"
) -> np.ndarray:
    """``Z`` if it lies in [0, 1]^d (the declared public bounds after scaling); clip or raise otherwise.

    The error names each remedy in the CLI's syntax first (``method`` is the recourse method's
    registered name, for ``--method-param``), then as the Python keyword.
    """
    bad = outside_unit_box(Z, tol)
    if bad.any():
        if out_of_bounds == "clip":
            return np.clip(Z, 0.0, 1.0)
        cols = np.flatnonzero(bad.any(axis=0))
        label = [names[c] if names else f"feature {c}" for c in cols[:5]]
        raise InvalidInputError(
            f"{int(bad.any(axis=1).sum())} rows have features outside the declared public bounds ({', '.join(label)}); "
            "declare wider public bounds from domain knowledge (--schema FILE or --bounds COL=LO:HI; Python: "
            f"bounds=(lower, upper)), or clip the rows into them with --method-param {method}.out_of_bounds=clip "
            "(Python: out_of_bounds='clip'); bounds read from the data (--bounds-from-data) are not covered by the "
            "DP guarantee"
        )
    return np.clip(Z, 0.0, 1.0)
