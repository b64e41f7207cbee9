"""The reconstruction attack on Laplace Recourse (Huang et al. 2023): rebuild the model, then CFD-LRT.

Every counterfactual Laplace Recourse releases is x' = x + (s - f'(x)) w / ||w||^2 (s the public
target score, f' the noisy score), so from public information alone the adversary rebuilds:

- u = w / ||w||: the direction of any released move, signed so that the favourable rows of its
  own labelled pool project higher;
- ||w||: a clamped noisy probability (p' = 0 or 1) gives f' = -/+ 52 ln 2 = -/+ 36.04, so the
  longest released move has length (36.04 + |s|) / ||w||; at the epsilons where LR is used most
  targets are clamped. Without a clamped move, ||w|| comes from the slope of a one-feature
  logistic fit of the pool's labels on u.x;
- b: the intercept that maximises the pool's likelihood under the logit ||w|| u.x + b (one
  dimension, scipy's bounded scalar search).

Then it scores every target by the exact, non-private distance to the owner's boundary,
|u.x + b / ||w|| |, with the one-sided offline likelihood-ratio test of Pawelczyk et al. (2023,
Algorithm 1) against the same distance under its own (non-private, linear) shadow models, each
target compared with the shadows that reject it. The test's direction is decided on the
adversary's shadow game (:func:`~recourse_privacy.attacks.lrt.resolve_direction`). The noisy
score does not enter: whatever epsilon, this attack reaches the undefended CFD-LRT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.direction import move_direction
from recourse_privacy.attacks.lrt import fit_reference, lrt_scores, resolve_direction
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.recourse.base import RecourseResult

#: the noisy score of a clamped p' (Laplace Recourse clips p' to [2^-52, 1 - 2^-52] before the logit): public
CLAMP_SCORE = float(np.log1p(-(2.0**-52)) - np.log(2.0**-52))
_TINY = 1e-12


@dataclass(frozen=True)
class RebuiltModel:
    """The owner's linear model as rebuilt from the release: unit direction, norm and intercept."""

    u: np.ndarray
    norm: float
    intercept: float
    norm_source: str

    def distance(self, X: np.ndarray) -> np.ndarray:
        """|w.x + b| / ||w||: the exact L2 distance to the rebuilt boundary."""
        return np.abs(X @ self.u + self.intercept / self.norm)


def _fit_intercept(z: np.ndarray, y: np.ndarray, slope: float) -> float:
    """The b maximising the pool's Bernoulli likelihood under the logit slope * z + b."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_expit

    t = slope * z
    sign = np.where(y == 1, 1.0, -1.0)

    def nll(b: float) -> float:
        return -float(log_expit(sign * (t + b)).sum())

    span = float(np.abs(t).max()) + 50.0
    return float(minimize_scalar(nll, bounds=(-span, span), method="bounded", options={"xatol": 1e-10}).x)


def rebuild_linear_model(recourse: RecourseResult, X_pool: np.ndarray, y_pool: np.ndarray) -> RebuiltModel | None:
    """u, ||w|| and b of the owner's model from LR's released moves and the adversary's pool (None: nothing moved)."""
    u = move_direction(recourse, X_pool, y_pool)
    if u is None:
        return None
    lengths = np.linalg.norm(recourse.counterfactuals - recourse.factuals, axis=1)
    s = float(recourse.info.get("target_logit", 0.0))
    z = X_pool @ u
    # a clamped move is the longest possible; several equal maxima (to 1e-9) show the spike is there
    longest = float(lengths.max())
    at_spike = np.isclose(lengths, longest, rtol=1e-9, atol=0.0).sum()
    if at_spike >= 2:
        norm = (CLAMP_SCORE + abs(s)) / longest
        source = f"the clamping spike: {int(at_spike)} moves of length (36.04 + |s|) / ||w||"
    else:
        from sklearn.linear_model import LogisticRegression

        fit = LogisticRegression(C=1e6, max_iter=1000).fit(z[:, None], y_pool)
        norm = max(float(fit.coef_[0, 0]), _TINY)
        source = "the slope of a one-feature logistic fit of the pool on u.x (no clamped move released)"
    return RebuiltModel(u=u, norm=norm, intercept=_fit_intercept(z, y_pool, norm), norm_source=source)


def reconstruction_attack(
    recourse: RecourseResult,
    X: np.ndarray,
    shadow: ShadowData,
    X_pool: np.ndarray,
    y_pool: np.ndarray,
    *,
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
    seed: int = 0,
) -> AttackScores:
    """CFD-LRT on the rebuilt non-private distance of every target (see the module docstring)."""
    rebuilt = rebuild_linear_model(recourse, X_pool, y_pool)
    if rebuilt is None or shadow.margin_targets is None or not np.any(shadow.margin_targets):
        return AttackScores(
            "lr-reconstruction",
            np.zeros(len(X)),
            "n/a",
            {"statistic": "no released move or no linear shadow model: nothing to rebuild"},
        )
    d = rebuilt.distance(X)
    ref_mask = shadow.rejected_targets & (shadow.margin_targets > 0) & shadow.out_targets
    ref = fit_reference(np.log(np.maximum(shadow.margin_targets, _TINY)), ref_mask, center=center, variance=variance)
    conventions = {
        "statistic": "log |u.x + b/||w|| |: the non-private distance rebuilt from the release (u from a move, "
        "||w|| from " + rebuilt.norm_source + ", b fitted on the adversary's pool), against the "
        "same distance under the adversary's shadow models that reject x",
        "center": center,
        "variance": variance,
        "cdf": cdf,
        "n_shadow": shadow.n_shadow,
        "rebuilt_norm": rebuilt.norm,
        "rebuilt_intercept": rebuilt.intercept,
        "targets_on_fallback_reference": ref.n_fallback,
    }
    calib_mask = shadow.rejected_calib & (shadow.margin_calib > 0)
    direction = resolve_direction(
        "auto",
        conventions,
        np.log(np.maximum(shadow.margin_calib, _TINY)),
        calib_mask & shadow.game_calib[:, None],
        calib_mask,
        shadow.keep_calib,
        center=center,
        variance=variance,
        cdf=cdf,
        random_state=seed,
    )
    scores = lrt_scores(np.log(np.maximum(d, _TINY)), ref, direction=direction, cdf=cdf)
    return AttackScores("lr-reconstruction", scores, direction, conventions)


@register_attack(
    "lr-reconstruction",
    description="Laplace Recourse attacked: rebuild u, ||w|| and b from the "
    "released moves and the adversary's pool, then CFD-LRT on the exact distance (Pawelczyk et al. "
    "2023, Algorithm 1, against Huang et al. 2023's mechanism)",
    needs=("shadow_models",),
    reads_out_targets=True,
)
def _lr_reconstruction(inputs: AttackInputs) -> AttackScores:
    o = inputs.lrt
    return reconstruction_attack(
        inputs.recourse,
        inputs.X,
        inputs.shadow,
        inputs.X_pool,
        inputs.y_pool,
        center=o.center,
        variance=o.variance,
        cdf=o.cdf,
        seed=inputs.seed,
    )
