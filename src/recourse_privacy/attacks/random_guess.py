"""Random guessing: the baseline every attack must beat."""
from __future__ import annotations


from recourse_privacy._validation import as_generator
from recourse_privacy.attacks.base import AttackScores


def random_attack(n_targets: int, random_state=None) -> AttackScores:
    """Uniform scores: at any threshold, predicts member with probability alpha = FPR = TPR."""
    return AttackScores("random", as_generator(random_state).random(n_targets), "n/a",
                        {"statistic": "uniform random number", "direction_source": "none"})
