"""Actionability constraints, one object per dataset (after actionable-recourse's ActionSet)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError


@dataclass(frozen=True)
class ActionSet:
    """Per encoded feature: may it change, may it only increase, and its value range.

    ``immutable`` and ``increasing`` are boolean masks; ``lower``/``upper`` are bounds
    (use -inf/inf for none). :meth:`project` maps any proposal onto the feasible set.
    """

    immutable: np.ndarray
    increasing: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def unconstrained(cls, n_features: int) -> ActionSet:
        """No constraint at all (the paper's A^p = R^d)."""
        z = np.zeros(n_features, dtype=bool)
        return cls(z, z.copy(), np.full(n_features, -np.inf), np.full(n_features, np.inf))

    @classmethod
    def from_preprocessor(cls, pre, *, bounds: bool = True) -> ActionSet:
        """Masks and ranges learned by a fitted :class:`~recourse_privacy.data.Preprocessor`."""
        n = int(pre.n_features_out_)
        lo = np.asarray(pre.lower_, dtype=np.float64) if bounds else np.full(n, -np.inf)
        hi = np.asarray(pre.upper_, dtype=np.float64) if bounds else np.full(n, np.inf)
        return cls(np.asarray(pre.immutable_mask_, bool), np.asarray(pre.increasing_mask_, bool), lo, hi)

    @property
    def n_features(self) -> int:
        return int(self.immutable.shape[0])

    @property
    def mutable(self) -> np.ndarray:
        return ~self.immutable

    def check(self, n_features: int) -> None:
        """Raise where the action set does not match the model's feature count."""
        if self.n_features != n_features:
            raise InvalidInputError(f"action set covers {self.n_features} features; the data has {n_features}")

    def project(self, X_cf: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Feasible version of ``X_cf`` for factuals ``X`` (numpy)."""
        out = np.where(self.immutable, X, X_cf)
        out = np.where(self.increasing, np.maximum(out, X), out)
        return np.clip(out, np.minimum(self.lower, X), np.maximum(self.upper, X))

    def violations(self, X_cf: np.ndarray, X: np.ndarray, tol: float = 1e-8) -> np.ndarray:
        """Number of violated constraints per row."""
        changed_immutable = (np.abs(X_cf - X) > tol) & self.immutable
        decreased = (X_cf < X - tol) & self.increasing
        out_of_range = (X_cf < self.lower - tol) | (X_cf > self.upper + tol)
        return (changed_immutable | decreased | out_of_range).sum(axis=1)
