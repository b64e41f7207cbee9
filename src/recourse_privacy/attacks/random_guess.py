"""Random guessing: the baseline every attack must beat."""

from __future__ import annotations

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.validation import as_generator, derive_seed


def random_attack(n_targets: int, random_state=None) -> AttackScores:
    """Uniform scores: at any threshold, predicts member with probability alpha = FPR = TPR."""
    return AttackScores(
        "random",
        as_generator(random_state).random(n_targets),
        "n/a",
        {"statistic": "uniform random number", "direction_source": "none"},
    )


@register_attack("random", description="random guessing: uniform scores", signal="none")
def _random(inputs: AttackInputs) -> AttackScores:
    return random_attack(inputs.n_targets, derive_seed(inputs.seed, 5))
