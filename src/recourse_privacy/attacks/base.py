"""What every attack returns: one membership score per target (higher = more likely member)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.errors import InvalidInputError


@dataclass(frozen=True)
class AttackScores:
    """Scores of one attack on the targets, with the conventions that produced them."""

    name: str
    scores: np.ndarray
    direction: str = "greater"
    conventions: dict = field(default_factory=dict)

    def __post_init__(self):
        s = np.asarray(self.scores, dtype=np.float64)
        if s.ndim != 1 or not np.isfinite(s).all():
            raise InvalidInputError(f"attack {self.name!r} produced {int((~np.isfinite(s)).sum())} non-finite scores")
