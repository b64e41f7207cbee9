"""Counterfactual-distance attacks: CFD threshold and CFD-LRT (paper 000, sec. 4)."""
from __future__ import annotations

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.lrt import fit_reference, lrt_scores, resolve_direction
from recourse_privacy.attacks.shadow import ShadowData

_TINY = 1e-12


def cfd_attack(cfd: np.ndarray, *, direction: str = "greater") -> AttackScores:
    """Member if c(x, x') >= tau (paper 000, eq. 3); the score is the distance itself (or its negative)."""
    cfd = np.asarray(cfd, dtype=np.float64)
    scores = cfd if direction == "greater" else -cfd
    return AttackScores("cfd", scores, direction, {
        "statistic": "counterfactual distance c(x, x')",
        "direction_source": "fixed by paper 000, eq. 3 (members are farther from the boundary)"
        if direction == "greater" else "fixed by the caller",
    })


def cfd_lrt_attack(cfd: np.ndarray, shadow: ShadowData, *, name: str = "cfd-lrt", direction: str = "auto",
                   center: str = "mean", variance: str = "per-example", cdf: str = "normal") -> AttackScores:
    """One-sided offline LRT on log c(x, x') (paper 000, Algorithm 1).

    Each target's out-distribution is fitted to its log-distances under the shadow models that
    reject it with valid recourse. ``direction="auto"`` decides the tail on the adversary's own
    shadow game (paper 000 found the reverse direction for CCHVAE).
    """
    log_t = np.log(np.maximum(np.asarray(cfd, dtype=np.float64), _TINY))
    log_ref = np.log(np.maximum(shadow.cfd_targets, _TINY))
    ref = fit_reference(log_ref, shadow.usable_targets, center=center, variance=variance)
    conventions = {"statistic": "log c(x, x') under shadow models that reject x", "center": center,
                   "variance": variance, "cdf": cdf, "n_shadow": shadow.n_shadow,
                   "targets_on_fallback_reference": ref.n_fallback}
    direction = resolve_direction(direction, conventions, np.log(np.maximum(shadow.cfd_calib, _TINY)),
                                  shadow.usable_calib, shadow.usable_calib, shadow.keep_calib,
                                  center=center, variance=variance, cdf=cdf)
    return AttackScores(name, lrt_scores(log_t, ref, direction=direction, cdf=cdf), direction, conventions)
