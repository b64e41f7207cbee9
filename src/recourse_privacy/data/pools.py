"""Disjoint row pools for a membership-inference audit.

The audit of Pawelczyk et al. (2023, section 6.1) draws, from one population, the model
owner's training set (the *members*), fresh draws that were not trained on (the
*non-members*) and the adversary's own public pool (used to train shadow models). The three
pools are disjoint and come from one seeded permutation of the rows.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import RandomState, as_generator

__all__ = ["Pools", "split_pools", "as_generator"]


@dataclass(frozen=True)
class Pools:
    """Row indices (int64) of three disjoint pools drawn from one dataset."""

    members: np.ndarray
    nonmembers: np.ndarray
    adversary: np.ndarray

    @property
    def sizes(self) -> dict[str, int]:
        """Number of rows in each pool."""
        return {
            "members": len(self.members),
            "nonmembers": len(self.nonmembers),
            "adversary": len(self.adversary),
        }


def _check_size(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{name} must be at least 1, got {value}")
    return int(value)


def split_pools(
    n_rows: int,
    n_members: int,
    n_nonmembers: int | None = None,
    n_adversary: int | None = None,
    *,
    random_state: RandomState = None,
) -> Pools:
    """Draw disjoint member, non-member and adversary pools of row indices.

    ``n_nonmembers`` and ``n_adversary`` default to ``n_members``. One seeded permutation of
    ``range(n_rows)`` is cut into the three pools (in this order), so the same seed gives
    the same pools. Raises ValueError when a size is below 1 or the pools need more rows
    than ``n_rows``.
    """
    n_rows = _check_size(n_rows, "n_rows")
    n_members = _check_size(n_members, "n_members")
    n_nonmembers = n_members if n_nonmembers is None else _check_size(n_nonmembers, "n_nonmembers")
    n_adversary = n_members if n_adversary is None else _check_size(n_adversary, "n_adversary")
    total = n_members + n_nonmembers + n_adversary
    if total > n_rows:
        raise InvalidInputError(
            f"pools need {total} rows (members {n_members} + non-members {n_nonmembers} + "
            f"adversary {n_adversary}) but the dataset has {n_rows}; lower --n-members "
            f"(at most {n_rows // 3} with equal pools)"
        )
    perm = as_generator(random_state).permutation(n_rows).astype(np.int64, copy=False)
    a, b = n_members, n_members + n_nonmembers
    return Pools(
        members=perm[:a].copy(),
        nonmembers=perm[a:b].copy(),
        adversary=perm[b:total].copy(),
    )
