"""The move-direction attack on Laplace Recourse (Huang et al. 2023): its released moves are parallel to w.

Every counterfactual of Laplace Recourse is x' = x + t w / ||w||^2, so the direction
u = w / ||w|| of the (non-private) model is read off any released move; its sign comes from the
adversary's labelled pool (favourable rows project higher). Scoring a target by -u.x ranks the
targets exactly as their non-private distance to the boundary |w.x + b| / ||w|| (all targets are
rejected), whatever the epsilon of the noisy score.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.recourse.base import RecourseResult


def move_direction(recourse: RecourseResult, X_pool: np.ndarray, y_pool: np.ndarray) -> np.ndarray | None:
    """The unit direction of the longest released move, signed so favourable pool rows project higher.

    None when no target moved.
    """
    D = recourse.counterfactuals - recourse.factuals
    norms = np.linalg.norm(D, axis=1)
    if not len(norms) or norms.max() == 0:
        return None
    u = D[int(np.argmax(norms))] / norms.max()
    if np.mean(X_pool[y_pool == 1] @ u) < np.mean(X_pool[y_pool == 0] @ u):
        u = -u
    return u


def direction_attack(recourse: RecourseResult, X_pool: np.ndarray, y_pool: np.ndarray) -> AttackScores | None:
    """Score targets by -u.x with u read off the released moves (None when no target moved)."""
    u = move_direction(recourse, X_pool, y_pool)
    if u is None:
        return None
    return AttackScores(
        "lr-direction",
        -(recourse.factuals @ u),
        "greater",
        {
            "statistic": "-u.x with u = w/||w|| read off the released counterfactual moves",
            "direction_source": "the adversary's labelled pool (favourable rows project higher on u)",
        },
    )


@register_attack(
    "lr-direction",
    description="Laplace Recourse's released moves are parallel to w: rank targets by "
    "-u.x with u read off any move (Huang et al. 2023's mechanism, attacked)",
)
def _lr_direction(inputs: AttackInputs) -> AttackScores:
    scores = direction_attack(inputs.recourse, inputs.X_pool, inputs.y_pool)
    if scores is None:  # nothing moved: no information, a constant score
        return AttackScores("lr-direction", np.zeros(inputs.n_targets), "n/a", {"statistic": "no released move"})
    return scores
