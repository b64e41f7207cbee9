"""What every attack returns: one membership score per target (higher = more likely member)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
            raise ValueError(f"attack {self.name!r} produced {int((~np.isfinite(s)).sum())} non-finite scores")


#: attack name -> (what it needs, description)
ATTACKS: dict[str, str] = {
    "cfd": "threshold on the counterfactual distance: member if c(x, x') >= tau (paper 000, eq. 3)",
    "cfd-lrt": "one-sided offline LRT on log c(x, x') with shadow models (paper 000, Algorithm 1); variance as configured",
    "cfd-lrt-global": "CFD-LRT with one global (pooled) variance (paper 001, after Carlini et al.)",
    "cfd-lrt-per-example": "CFD-LRT with a per-example variance (paper 001, after Carlini et al.)",
    "loss": "threshold on the model's loss of the true label: member if loss <= tau (Yeom et al.)",
    "loss-lrt": "offline one-sided LRT on the logit-scaled confidence (Carlini et al.)",
    "random": "random guessing: uniform scores",
}
LRT_ATTACKS = ("cfd-lrt", "cfd-lrt-global", "cfd-lrt-per-example", "loss-lrt")


def check_attack_names(names) -> tuple[str, ...]:
    """Validate a list of attack names; raise a ValueError naming unknown ones."""
    names = tuple(names)
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack(s) {', '.join(map(repr, unknown))}; choose from {', '.join(ATTACKS)}")
    if not names:
        raise ValueError("attacks must name at least one attack")
    return names
