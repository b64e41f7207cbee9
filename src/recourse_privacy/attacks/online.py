"""Online likelihood-ratio attacks: LiRA's two-sided test (Carlini et al. 2022) on recourse and on scores.

The reference models train on random halves of the adversary's pool and the targets
(:func:`~recourse_privacy.attacks.shadow.run_shadow_models` with ``online=True``), so every target
has statistics under models that trained on it (in) and models that did not (out). Each target's
in- and out-statistics are fitted with normals N(mu_in, sigma_in^2), N(mu_out, sigma_out^2) and the
score is the log likelihood ratio log p(s | in) - log p(s | out) of its statistic s under the owner's
model (Carlini et al. 2022, Algorithm 1). Two-sided: no direction to decide, and nothing read of the
targets' membership. CFD-LRT-online reads s = log c(x, x'); Loss-LRT-online the logit-scaled confidence.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.distance import _TINY, _rejected, no_reference_reason
from recourse_privacy.attacks.lrt import fit_reference, two_sided_scores
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.errors import AttackUnavailableError, InvalidInputError
from recourse_privacy.models.base import logit_confidence

__all__ = ["cfd_lrt_online_attack", "loss_lrt_online_attack", "online_lr"]


def online_lr(
    stat: np.ndarray,
    ref: np.ndarray,
    usable: np.ndarray,
    keep: np.ndarray,
    *,
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
) -> tuple[np.ndarray, dict]:
    """Two-sided LR scores of ``stat`` from the reference values ``ref`` (targets x models).

    ``keep[i, k]``: target i was in model k's training set; only entries where ``usable`` holds
    are fitted. ``variance="global"`` pools one in- and one out-variance over all targets (LiRA's
    fixed variance); a target with a single in- (or out-) value keeps it as its center.
    """
    keep = np.asarray(keep, dtype=bool)
    if keep.shape != np.shape(ref):
        raise InvalidInputError(f"keep has shape {keep.shape}; the reference values {np.shape(ref)}")
    usable = np.asarray(usable, dtype=bool)
    fit = {"center": center, "variance": variance, "center_min_count": 1}
    in_ref = fit_reference(ref, usable & keep, **fit)
    out_ref = fit_reference(ref, usable & ~keep, **fit)
    conventions = {
        "center": center,
        "variance": variance,
        "cdf": cdf,
        "n_shadow": int(keep.shape[1]),
        "setting": "online (reference models trained on halves of the pool and the targets)",
        "mean_in_references": float((usable & keep).sum(axis=1).mean()) if len(keep) else 0.0,
        "mean_out_references": float((usable & ~keep).sum(axis=1).mean()) if len(keep) else 0.0,
        "targets_on_fallback_in_reference": in_ref.n_fallback,
        "targets_on_fallback_out_reference": out_ref.n_fallback,
        "direction_source": "none needed: two-sided likelihood ratio log p(s | in) - log p(s | out)",
        "score": "log likelihood ratio",  # per target: what exposure.csv reports as its log_lr
    }
    return two_sided_scores(stat, in_ref, out_ref, cdf=cdf), conventions


def _online(shadow: ShadowData | None, name: str) -> ShadowData:
    if shadow is None or shadow.keep_targets is None:
        raise InvalidInputError(f"attack {name!r} needs online reference models (ShadowData.keep_targets)")
    return shadow


def cfd_lrt_online_attack(
    cfd: np.ndarray,
    shadow: ShadowData,
    *,
    name: str = "cfd-lrt-online",
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
) -> AttackScores:
    """Online two-sided LRT on log c(x, x'): in- and out-fits over the reference models that reject x."""
    shadow = _online(shadow, name)
    log_t = np.log(np.maximum(np.asarray(cfd, dtype=np.float64), _TINY))
    ref_mask, _ = _rejected(shadow)
    log_ref = np.log(np.maximum(shadow.cfd_targets, _TINY))
    try:
        scores, conventions = online_lr(
            log_t, log_ref, ref_mask, shadow.keep_targets, center=center, variance=variance, cdf=cdf
        )
    except AttackUnavailableError:  # say why in the game's terms when recourse moved (almost) nobody
        moved = ref_mask & np.isfinite(log_ref)
        if int(moved.sum()) >= 2:  # enough moved in all, too few in one half: fit_reference's reason stands
            raise
        raise AttackUnavailableError(no_reference_reason(shadow, moved, online=True)) from None
    conventions["statistic"] = "log c(x, x') under reference models that reject x"
    return AttackScores(name, scores, "greater", conventions)


def loss_lrt_online_attack(
    conf: np.ndarray,
    shadow: ShadowData,
    *,
    name: str = "loss-lrt-online",
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
) -> AttackScores:
    """Online two-sided LRT on the logit-scaled confidence log(p_y / (1 - p_y)) (LiRA, Carlini et al. 2022)."""
    shadow = _online(shadow, name)
    scores, conventions = online_lr(
        conf,
        shadow.conf_targets,
        np.ones_like(shadow.conf_targets, dtype=bool),
        shadow.keep_targets,
        center=center,
        variance=variance,
        cdf=cdf,
    )
    conventions["statistic"] = "logit-scaled confidence of the true label"
    return AttackScores(name, scores, "greater", conventions)


@register_attack(
    "cfd-lrt-online",
    description="online two-sided LRT on log c(x, x'): in- and out-fits per target from reference models "
    "trained on halves of the pool and the targets (LiRA, Carlini et al. 2022); variance as configured",
    needs=("online_shadow", "shadow_recourse"),
)
def _cfd_lrt_online(inputs: AttackInputs) -> AttackScores:
    o = inputs.lrt
    return cfd_lrt_online_attack(inputs.cfd, inputs.online_shadow, center=o.center, variance=o.variance, cdf=o.cdf)


@register_attack(
    "loss-lrt-online",
    description="online two-sided LRT on the logit-scaled confidence (LiRA, Carlini et al. 2022)",
    needs=("online_shadow",),
    signal="score",
)
def _loss_lrt_online(inputs: AttackInputs) -> AttackScores:
    o = inputs.lrt
    return loss_lrt_online_attack(
        logit_confidence(inputs.model, inputs.X, inputs.y),
        inputs.online_shadow,
        center=o.center,
        variance=o.variance,
        cdf=o.cdf,
    )
