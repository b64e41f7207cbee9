"""Loss-based baselines: Loss thresholding (Yeom et al. 2018) and offline Loss-LRT (Carlini et al. 2022)."""

from __future__ import annotations

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.lrt import fit_reference, lrt_scores, resolve_direction
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.models.base import logit_confidence, per_example_loss


def loss_attack(loss: np.ndarray) -> AttackScores:
    """Member if the loss of the true label is <= tau (Pawelczyk et al. 2023, eq. 2); the score is -loss."""
    return AttackScores(
        "loss",
        -np.asarray(loss, dtype=np.float64),
        "less",
        {
            "statistic": "binary cross-entropy of the true label",
            "direction_source": "fixed by Yeom et al. (members have lower loss)",
        },
    )


def loss_lrt_attack(
    conf: np.ndarray,
    shadow: ShadowData,
    *,
    direction: str = "auto",
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
) -> AttackScores:
    """Offline one-sided LRT on the logit-scaled confidence log(p_y / (1 - p_y)) (Carlini et al., offline).

    Each target's reference: the shadow models that never trained on it (:attr:`ShadowData.out_targets`).
    """
    ref = fit_reference(shadow.conf_targets, shadow.out_targets, center=center, variance=variance)
    conventions = {
        "statistic": "logit-scaled confidence of the true label",
        "center": center,
        "variance": variance,
        "cdf": cdf,
        "n_shadow": shadow.n_shadow,
        "references": shadow.offline_references,
    }
    direction = resolve_direction(
        direction,
        conventions,
        shadow.conf_calib,
        shadow.rejected_calib & shadow.game_calib[:, None],
        np.ones_like(shadow.conf_calib, dtype=bool),
        shadow.keep_calib,
        center=center,
        variance=variance,
        cdf=cdf,
    )
    return AttackScores("loss-lrt", lrt_scores(conf, ref, direction=direction, cdf=cdf), direction, conventions)


@register_attack(
    "loss",
    description="threshold on the model's loss of the true label: member if loss <= tau (Yeom et al. 2018)",
    signal="score",
)
def _loss(inputs: AttackInputs) -> AttackScores:
    return loss_attack(per_example_loss(inputs.model, inputs.X, inputs.y))


@register_attack(
    "loss-lrt",
    description="offline one-sided LRT on the logit-scaled confidence (Carlini et al. 2022)",
    needs=("shadow_models",),
    signal="score",
    reads_out_targets=True,
)
def _loss_lrt(inputs: AttackInputs) -> AttackScores:
    o = inputs.lrt
    return loss_lrt_attack(
        logit_confidence(inputs.model, inputs.X, inputs.y),
        inputs.shadow,
        variance=o.variance,
        center=o.center,
        cdf=o.cdf,
    )
