"""Counterfactual-distance attacks: CFD threshold and CFD-LRT (Pawelczyk et al. 2023, sec. 4)."""

from __future__ import annotations

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.lrt import fit_reference, lrt_scores, resolve_direction
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.errors import AttackUnavailableError

_TINY = 1e-12


def cfd_attack(cfd: np.ndarray, *, direction: str = "greater") -> AttackScores:
    """Member if c(x, x') >= tau (Pawelczyk et al. 2023, eq. 3); the score is the distance itself (or its negative)."""
    cfd = np.asarray(cfd, dtype=np.float64)
    scores = cfd if direction == "greater" else -cfd
    return AttackScores(
        "cfd",
        scores,
        direction,
        {
            "statistic": "counterfactual distance c(x, x')",
            "direction_source": "fixed by Pawelczyk et al. 2023, eq. 3 (members are farther from the boundary)"
            if direction == "greater"
            else "fixed by the caller",
        },
    )


def _rejected(shadow: ShadowData) -> tuple[np.ndarray, np.ndarray]:
    """(targets, calibration) masks: the shadow rejects the point and its recourse moved it (valid or not)."""
    if shadow.rejected_targets is None:  # built by hand without the rejection arrays: the valid ones
        return shadow.usable_targets, shadow.usable_calib
    return (shadow.rejected_targets & (shadow.cfd_targets > 0), shadow.rejected_calib & (shadow.cfd_calib > 0))


def cfd_lrt_attack(
    cfd: np.ndarray,
    shadow: ShadowData,
    *,
    name: str = "cfd-lrt",
    direction: str = "auto",
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
) -> AttackScores:
    """One-sided offline LRT on log c(x, x') (Pawelczyk et al. 2023, Algorithm 1).

    Each target's out-distribution is fitted to its log-distances under the shadow models that
    reject it (valid recourse or not, as the targets themselves are scored) and never trained on it
    (:attr:`ShadowData.out_targets`: all of them offline; half, where online reference models serve). ``direction="auto"``
    decides the tail on the adversary's own shadow game (Pawelczyk et al. 2023 found the reverse
    direction for CCHVAE).
    """
    log_t = np.log(np.maximum(np.asarray(cfd, dtype=np.float64), _TINY))
    log_ref = np.log(np.maximum(shadow.cfd_targets, _TINY))
    # both sides conditioned alike: every target the owner rejects is scored, valid recourse or not, so the
    # reference keeps every shadow that rejects it (with a non-zero distance), valid recourse or not
    ref_mask, calib_mask = _rejected(shadow)
    try:
        ref = fit_reference(log_ref, ref_mask & shadow.out_targets, center=center, variance=variance)
    except AttackUnavailableError:  # too few usable values: say why, in the game's terms
        raise AttackUnavailableError(no_reference_reason(shadow, ref_mask & np.isfinite(log_ref))) from None
    conventions = {
        "statistic": "log c(x, x') under shadow models that reject x",
        "center": center,
        "variance": variance,
        "cdf": cdf,
        "n_shadow": shadow.n_shadow,
        "references": shadow.offline_references,
        "targets_on_fallback_reference": ref.n_fallback,
    }
    direction = resolve_direction(
        direction,
        conventions,
        np.log(np.maximum(shadow.cfd_calib, _TINY)),
        calib_mask & shadow.game_calib[:, None],
        calib_mask,
        shadow.keep_calib,
        center=center,
        variance=variance,
        cdf=cdf,
    )
    return AttackScores(name, lrt_scores(log_t, ref, direction=direction, cdf=cdf), direction, conventions)


def no_reference_reason(shadow: ShadowData, moved: np.ndarray, *, online: bool = False) -> str:
    """Why an attack has no reference distribution: the reference models' recourse moved too few of the targets
    they reject (``moved``: rejected, with a finite non-zero distance). Offline, only the models that never trained
    on a target count (:attr:`ShadowData.out_targets`); online, every reference model does."""
    rejected = shadow.out_targets if shadow.rejected_targets is None else shadow.rejected_targets
    counted = np.ones(rejected.shape, dtype=bool) if online else shadow.out_targets
    pairs = "rejects a target" if online else "rejects a target it did not train on"
    return (
        f"of the {int((rejected & counted).sum())} (target, {'reference' if online else 'shadow'} model) pairs where "
        f"one of the {shadow.n_shadow} {'reference' if online else 'shadow'} models {pairs}, recourse moved the target "
        f"in {int((moved & counted).sum())} (at least 2 are needed for a reference distribution): more "
        "--shadow-models, or a recourse method that answers more of the targets"
    )


@register_attack(
    "cfd",
    description="threshold on the counterfactual distance: member if c(x, x') >= tau (Pawelczyk et al. 2023, eq. 3)",
)
def _cfd(inputs: AttackInputs) -> AttackScores:
    return cfd_attack(inputs.cfd)


def _cfd_lrt_variant(name: str, variance: str | None, description: str) -> None:
    @register_attack(name, description=description, needs=("shadow_models", "shadow_recourse"), reads_out_targets=True)
    def attack(inputs: AttackInputs) -> AttackScores:
        o = inputs.lrt
        return cfd_lrt_attack(
            inputs.cfd, inputs.shadow, name=name, variance=variance or o.variance, center=o.center, cdf=o.cdf
        )

    attack.__qualname__ = f"cfd_lrt[{name}]"


_cfd_lrt_variant(
    "cfd-lrt",
    None,
    "one-sided offline LRT on log c(x, x') with shadow models (Pawelczyk et al. "
    "2023, Algorithm 1); variance as configured",
)
_cfd_lrt_variant(
    "cfd-lrt-global",
    "global",
    "CFD-LRT with one global (pooled) variance (Huang et al. 2023, after Carlini et al. 2022)",
)
_cfd_lrt_variant(
    "cfd-lrt-per-example",
    "per-example",
    "CFD-LRT with a per-example variance (Huang et al. 2023, after Carlini et al. 2022)",
)
