"""Attack ``cfd-rank``: the counterfactual distance as a percentile rank among the targets.

It orders the targets exactly as ``cfd`` does (so it has the same AUC and TPR at every FPR),
but its scores lie in (0, 1] whatever the distance (l1, l2) or the data's scale, so a
threshold chosen in one audit means the same share of targets in another.
"""

from __future__ import annotations

from scipy.stats import rankdata

from recourse_privacy.attacks import AttackInputs, AttackScores, register_attack


@register_attack(
    "cfd-rank",
    description="percentile rank of the counterfactual distance among the targets (same order as cfd)",
    signal="distance",  # it reads the released recourse, not the model's scores
)
def cfd_rank(inputs: AttackInputs) -> AttackScores:
    """One score per target: the share of targets whose distance is at most its own (ties share a rank)."""
    ranks = rankdata(inputs.cfd, method="average") / max(inputs.n_targets, 1)
    return AttackScores(
        "cfd-rank",
        ranks,
        direction="greater",  # members are farther from the boundary (Pawelczyk et al. 2023, eq. 3)
        conventions={
            "statistic": "percentile rank of c(x, x') among the targets",
            "direction_source": "fixed, as cfd (Pawelczyk et al. 2023, eq. 3)",
        },
    )
