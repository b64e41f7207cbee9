"""The offline one-sided likelihood-ratio test shared by CFD-LRT and Loss-LRT.

Pawelczyk et al. 2023, Algorithm 1 (lines 10-12): fit N(mu_out, sigma_out^2) to a statistic (log c(x, x')
for CFD-LRT; the logit-scaled confidence for Loss-LRT) of each target under shadow models
that never saw it, and score the target by where its own statistic falls in that fit. The
score is the log of the normal (or Student-t) CDF in the decided direction, so that it keeps
its precision far in the tails, where low-FPR operating points are read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from recourse_privacy.errors import InvalidInputError

CENTERS = ("mean", "median")
VARIANCES = ("per-example", "global")
CDFS = ("normal", "t")
_Z_CLIP = 1e6


def _stats():
    """scipy.stats, imported on first use (it costs ~0.5 s; the CLI's --help stays fast)."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class GaussianReference:
    """Per-target out-distribution: center, standard deviation, degrees of freedom."""

    mu: np.ndarray
    sigma: np.ndarray
    dof: np.ndarray
    n_fallback: int


def fit_reference(ref: np.ndarray, mask: np.ndarray, *, center: str = "mean", variance: str = "per-example",
                  min_count: int = 2) -> GaussianReference:
    """MLE fit of each row of ``ref`` (targets x shadows) over the entries where ``mask`` holds.

    ``variance="per-example"``: each row's own MLE variance (Algorithm 1, line 11);
    ``"global"``: one pooled within-row variance for all rows. ``center`` is the row's mean
    (the MLE) or median. Rows with fewer than ``min_count`` usable entries fall back to the
    pooled center and variance; per-example sigmas are floored at 1e-3 of the pooled one.
    """
    if center not in CENTERS:
        raise InvalidInputError(f"center must be one of {CENTERS}; got {center!r}")
    if variance not in VARIANCES:
        raise InvalidInputError(f"variance must be one of {VARIANCES}; got {variance!r}")
    ref = np.asarray(ref, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool) & np.isfinite(ref)
    counts = mask.sum(axis=1)
    total = int(counts.sum())
    if total < 2:
        raise InvalidInputError("the shadow models gave fewer than 2 usable reference values; train more shadow models")
    r0 = np.where(mask, ref, 0.0)
    row_mean = r0.sum(axis=1) / np.maximum(counts, 1)
    sq = np.where(mask, (ref - row_mean[:, None]) ** 2, 0.0).sum(axis=1)
    pooled_mu = r0.sum() / total
    used = counts >= min_count
    pooled_var = sq[used].sum() / max(int(counts[used].sum()), 1) if used.any() else np.var(ref[mask])
    pooled_sigma = float(np.sqrt(pooled_var)) or 1e-12
    if center == "mean":
        mu = row_mean
    else:
        with np.errstate(all="ignore"):
            mu = np.nanmedian(np.where(mask, ref, np.nan), axis=1) if ref.shape[1] else row_mean
    mu = np.where(used, mu, pooled_mu)
    if variance == "per-example":
        sigma = np.sqrt(sq / np.maximum(counts, 1))
        sigma = np.where(used, np.maximum(sigma, 1e-3 * pooled_sigma), pooled_sigma)
        dof = np.where(used, counts - 1, max(total - int(used.sum()), 1))
    else:
        sigma = np.full(ref.shape[0], pooled_sigma)
        dof = np.full(ref.shape[0], max(total - int(used.sum()), 1))
    return GaussianReference(mu, sigma, dof.astype(np.float64), int((~used).sum()))


def lrt_scores(stat: np.ndarray, reference: GaussianReference, *, direction: str = "greater",
               cdf: str = "normal") -> np.ndarray:
    """Log-CDF score of ``stat`` under ``reference``: log P(Z <= stat) for 'greater', log P(Z >= stat) for 'less'."""
    if cdf not in CDFS:
        raise InvalidInputError(f"cdf must be one of {CDFS}; got {cdf!r}")
    if direction not in ("greater", "less"):
        raise InvalidInputError(f"direction must be 'greater' or 'less'; got {direction!r}")
    z = np.clip((np.asarray(stat, dtype=np.float64) - reference.mu) / reference.sigma, -_Z_CLIP, _Z_CLIP)
    if direction == "less":
        z = -z
    if cdf == "normal":
        return _stats().norm.logcdf(z)
    return _stats().t.logcdf(z, df=reference.dof)


@dataclass(frozen=True)
class DirectionDecision:
    """The direction chosen on the adversary's shadow game, with the evidence for it."""

    direction: str
    shadow_auc: float
    n_pseudo_targets: int

    def describe(self) -> str:
        return (f"shadow calibration: AUC {self.shadow_auc:.4f} of the 'greater' direction on "
                f"{self.n_pseudo_targets} pseudo-targets of the adversary's own shadow game")


def calibrate_direction(stat: np.ndarray, target_mask: np.ndarray, ref_mask: np.ndarray, keep: np.ndarray, *,
                        center: str = "mean", variance: str = "per-example", cdf: str = "normal") -> DirectionDecision:
    """Decide the test's direction from data the adversary owns (never from the targets' labels).

    ``stat``, masks and ``keep`` are (n_points, n_shadows) over the adversary's calibration
    points. Each shadow k in turn plays the target model: its pseudo-targets are the points in
    ``target_mask[:, k]``, labelled member where ``keep[:, k]``; each is scored against the other
    shadows that did not train on it. The direction whose AUC on this game is >= 0.5 wins.
    """
    stat = np.asarray(stat, dtype=np.float64)
    keep = np.asarray(keep, dtype=bool)
    n_shadow = stat.shape[1]
    if n_shadow < 2:
        raise InvalidInputError("direction calibration needs at least 2 shadow models")
    scores, labels = [], []
    for k in range(n_shadow):
        rows = np.asarray(target_mask[:, k], dtype=bool)
        if not rows.any():
            continue
        others = np.arange(n_shadow) != k
        mask = (np.asarray(ref_mask, dtype=bool) & ~keep)[rows][:, others]
        ref = fit_reference(stat[rows][:, others], mask, center=center, variance=variance)
        scores.append(lrt_scores(stat[rows, k], ref, direction="greater", cdf=cdf))
        labels.append(keep[rows, k])
    y = np.concatenate(labels) if labels else np.zeros(0, bool)
    if y.size == 0 or y.all() or not y.any():
        return DirectionDecision("greater", float("nan"), int(y.size))
    from sklearn.metrics import roc_auc_score  # ~1 s: imported on first use, so the CLI starts fast

    auc = float(roc_auc_score(y, np.concatenate(scores)))
    return DirectionDecision("greater" if auc >= 0.5 else "less", auc, int(y.size))


def resolve_direction(direction: str, conventions: dict, stat: np.ndarray, target_mask: np.ndarray,
                      ref_mask: np.ndarray, keep: np.ndarray, **fit) -> str:
    """``direction`` as given, or decided on the shadow game when "auto"; records where it came from."""
    if direction != "auto":
        conventions["direction_source"] = "fixed by the caller"
        return direction
    decision = calibrate_direction(stat, target_mask, ref_mask, keep, **fit)
    conventions["direction_source"] = decision.describe()
    conventions["shadow_auc"] = decision.shadow_auc
    return decision.direction
