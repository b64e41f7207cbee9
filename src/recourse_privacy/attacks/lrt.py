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

from recourse_privacy.errors import AttackUnavailableError, InvalidInputError

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
    n: np.ndarray | None = None  # reference values behind each row's fit (for the Student-t predictive scale)


def fit_reference(
    ref: np.ndarray,
    mask: np.ndarray,
    *,
    center: str = "mean",
    variance: str = "per-example",
    min_count: int = 2,
    center_min_count: int | None = None,
) -> GaussianReference:
    """MLE fit of each row of ``ref`` (targets x shadows) over the entries where ``mask`` holds.

    ``variance="per-example"``: each row's own MLE variance (Algorithm 1, line 11);
    ``"global"``: one pooled within-row variance for all rows. ``center`` is the row's mean
    (the MLE) or median. Rows with fewer than ``min_count`` usable entries fall back to the
    pooled center and variance; per-example sigmas are floored at 1e-3 of the pooled one.
    ``center_min_count`` (default ``min_count``) lowers the count a row needs to keep its own
    center: with 1, a row of one value is centred on it, with the pooled variance (LiRA with few
    reference models, Carlini et al. 2022).
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
        raise AttackUnavailableError(
            "the shadow models gave fewer than 2 usable (finite) reference values: train more shadow models "
            "(--shadow-models), or check that recourse can move the targets (immutable columns, bounds)"
        )
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
    centred = used if center_min_count is None else counts >= max(int(center_min_count), 1)
    mu = np.where(used | centred, mu, pooled_mu)
    if variance == "per-example":
        sigma = np.sqrt(sq / np.maximum(counts, 1))
        sigma = np.where(used, np.maximum(sigma, 1e-3 * pooled_sigma), pooled_sigma)
        dof = np.where(used, counts - 1, max(total - int(used.sum()), 1))
    else:
        sigma = np.full(ref.shape[0], pooled_sigma)
        dof = np.full(ref.shape[0], max(total - int(used.sum()), 1))
    n = np.where(used, counts, total).astype(np.float64)
    return GaussianReference(mu, sigma, dof.astype(np.float64), int((~used).sum()), n)


def lrt_scores(
    stat: np.ndarray, reference: GaussianReference, *, direction: str = "greater", cdf: str = "normal"
) -> np.ndarray:
    """Log-CDF score of ``stat`` under ``reference``: log P(Z <= stat) for 'greater', log P(Z >= stat) for 'less'."""
    if cdf not in CDFS:
        raise InvalidInputError(f"cdf must be one of {CDFS}; got {cdf!r}")
    if direction not in ("greater", "less"):
        raise InvalidInputError(f"direction must be 'greater' or 'less'; got {direction!r}")
    scale = _scale(reference, cdf)
    z = np.clip((np.asarray(stat, dtype=np.float64) - reference.mu) / scale, -_Z_CLIP, _Z_CLIP)
    if direction == "less":
        z = -z
    if cdf == "normal":
        return _stats().norm.logcdf(z)
    return _stats().t.logcdf(z, df=reference.dof)


def _scale(reference: GaussianReference, cdf: str) -> np.ndarray:
    """The scale of the fitted distribution: sigma (normal), or the Student-t predictive scale of one new value."""
    if cdf != "t" or reference.n is None:
        return reference.sigma
    # the predictive distribution of one new value: t(dof) with scale s sqrt(1 + 1/n), s the unbiased
    # estimate (MLE sigma^2 x n_used / dof; n_used = n for a row's own fit, the pooled count otherwise)
    n = np.maximum(reference.n, 1.0)
    return reference.sigma * np.sqrt(
        np.maximum(n, reference.dof + 1) / np.maximum(reference.dof, 1.0) * (1.0 + 1.0 / n)
    )


def log_density(stat: np.ndarray, reference: GaussianReference, *, cdf: str = "normal") -> np.ndarray:
    """Log density of ``stat`` under ``reference`` (normal, or the Student-t predictive of :func:`lrt_scores`)."""
    if cdf not in CDFS:
        raise InvalidInputError(f"cdf must be one of {CDFS}; got {cdf!r}")
    scale = _scale(reference, cdf)
    z = np.clip((np.asarray(stat, dtype=np.float64) - reference.mu) / scale, -_Z_CLIP, _Z_CLIP)
    dens = _stats().norm.logpdf(z) if cdf == "normal" else _stats().t.logpdf(z, df=reference.dof)
    return dens - np.log(scale)


def two_sided_scores(
    stat: np.ndarray, in_ref: GaussianReference, out_ref: GaussianReference, *, cdf: str = "normal"
) -> np.ndarray:
    """LiRA's online test (Carlini et al. 2022, Algorithm 1): log p(stat | in) - log p(stat | out).

    Two-sided: a statistic far from the out-fit in either tail, and close to the in-fit, scores
    high, so the test needs no direction.
    """
    return log_density(stat, in_ref, cdf=cdf) - log_density(stat, out_ref, cdf=cdf)


@dataclass(frozen=True)
class DirectionDecision:
    """The direction chosen on the adversary's shadow game, with the evidence for it.

    ``fallback`` is True when the shadow AUC lies within its null band 0.5 +/- ``null_halfwidth``
    (or could not be measured): the game shows no signal, so the direction is the paper's
    (``direction``) rather than a coin flip of the game's noise.
    """

    direction: str
    shadow_auc: float
    n_pseudo_targets: int
    null_halfwidth: float = float("nan")
    fallback: bool = False
    n_out_references: int = 0

    def describe(self) -> str:
        if not np.isfinite(self.shadow_auc):  # e.g. one out-reference per pseudo-target: no game to play
            return (
                f"the paper's direction ({self.direction}): the shadow game could not be played "
                f"({self.n_out_references} out-references per pseudo-target; more reference models give it one)"
            )
        game = (
            f"AUC {self.shadow_auc:.4f} of the 'greater' direction on {self.n_pseudo_targets} pseudo-targets "
            f"of the adversary's own shadow game ({self.n_out_references} out-references each), null band "
            f"0.5 +/- {self.null_halfwidth:.4f}"
        )
        if self.fallback:
            return f"the paper's direction ({self.direction}): the shadow game shows no signal ({game})"
        return f"shadow calibration: {game}"


def equal_out_references(out: np.ndarray, n_keep: int, rng: np.random.Generator) -> np.ndarray:
    """Keep exactly ``n_keep`` of each row's True entries of ``out`` (chosen at random, seeded); vectorized."""
    keys = np.where(out, rng.random(out.shape), np.inf)
    rank = keys.argsort(axis=1).argsort(axis=1)
    return out & (rank < n_keep)


def _common_out_count(keep: np.ndarray, target_mask: np.ndarray) -> tuple[np.ndarray, int]:
    """(out-shadows among the others per (point, k), the common number of out-references of the game).

    The fewest out-shadows of any pseudo-target; raised to 2 (a per-example fit needs two) when at least
    half the pseudo-members and half the pseudo-non-members have two, the others then taking no part.
    """
    counts = (~keep).sum(axis=1)[:, None] - (~keep)
    in_game = target_mask & (counts >= 1)
    n_out = int(counts[in_game].min()) if in_game.any() else 0
    if 0 < n_out < 2 and all(
        np.mean(counts[in_game & (keep == lab)] >= 2) >= 0.5 for lab in (True, False) if (in_game & (keep == lab)).any()
    ):
        n_out = 2
    return counts, n_out


def _stratified_auc(labels: list[np.ndarray], scores: list[np.ndarray], z: float) -> tuple[float, float]:
    """(AUC, null half-width) of the game, stratified by shadow; (nan, nan) where no shadow has both labels.

    Each shadow's game has its own scale (its own ||w||, its own clamping spike), so pooling the scores of
    all shadows would mix those scales with the labels; the AUC is the mean of the per-shadow AUCs weighted
    by n1 n0, and its null band the matching combination of Mann-Whitney variances.
    """
    from sklearn.metrics import roc_auc_score  # ~1 s: imported on first use, so the CLI starts fast

    aucs, weights, variances = [], [], []
    for lab, sc in zip(labels, scores):
        n1, n0 = int(lab.sum()), int((~lab).sum())
        if n1 and n0:
            aucs.append(roc_auc_score(lab, sc))
            weights.append(n1 * n0)
            variances.append((n1 + n0 + 1) / (12.0 * n1 * n0))
    if not aucs:
        return float("nan"), float("nan")
    w = np.asarray(weights, dtype=np.float64) / np.sum(weights)
    return float(w @ np.asarray(aucs)), float(z * np.sqrt(w**2 @ np.asarray(variances)))


def calibrate_direction(
    stat: np.ndarray,
    target_mask: np.ndarray,
    ref_mask: np.ndarray,
    keep: np.ndarray,
    *,
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
    default: str = "greater",
    z: float = 1.96,
    random_state=0,
) -> DirectionDecision:
    """Decide the test's direction from data the adversary owns (never from the targets' labels).

    ``stat``, masks and ``keep`` are (n_points, n_shadows) over the adversary's calibration
    points. Each shadow k in turn plays the target model: its pseudo-targets are the points in
    ``target_mask[:, k]``, labelled member where ``keep[:, k]``; each is scored against the other
    shadows that did not train on it; the AUC is taken per shadow and averaged (weights n1 n0).
    Every pseudo-target gets the same number of out-shadows
    (the smallest number any of them has, drawn at random among its own): a pseudo-member is out
    of one more of the other shadows than a pseudo-non-member, and that alone shifts the game's
    AUC on data with no signal. The direction whose AUC is >= 0.5 wins unless the AUC lies within
    its null band 0.5 +/- z sqrt(sum_k w_k^2 (n1k + n0k + 1) / (12 n1k n0k)) (Mann-Whitney per
    shadow); then ``default`` (the paper's direction) is kept and ``fallback`` is set.
    """
    from recourse_privacy.validation import as_generator

    if default not in ("greater", "less"):
        raise InvalidInputError(f"default must be 'greater' or 'less'; got {default!r}")
    stat = np.asarray(stat, dtype=np.float64)
    keep = np.asarray(keep, dtype=bool)
    target_mask = np.asarray(target_mask, dtype=bool)
    n_shadow = stat.shape[1]
    if n_shadow < 2:
        raise InvalidInputError("direction calibration needs at least 2 shadow models")
    rng = as_generator(random_state)
    counts, n_out = _common_out_count(keep, target_mask)
    scores, labels = [], []
    for k in range(n_shadow):
        rows = target_mask[:, k] & (counts[:, k] >= n_out)
        if not rows.any() or n_out < 1:
            continue
        others = np.arange(n_shadow) != k
        out = equal_out_references(~keep[rows][:, others], n_out, rng)
        mask = out & np.asarray(ref_mask, dtype=bool)[rows][:, others]
        if (mask & np.isfinite(stat[rows][:, others])).sum() < 2:  # this shadow's game has no usable reference
            continue
        ref = fit_reference(stat[rows][:, others], mask, center=center, variance=variance)
        scores.append(lrt_scores(stat[rows, k], ref, direction="greater", cdf=cdf))
        labels.append(keep[rows, k])
    n_pseudo = int(sum(len(lab) for lab in labels))
    auc, half = _stratified_auc(labels, scores, z)
    if not np.isfinite(auc):
        return DirectionDecision(default, float("nan"), n_pseudo, float("nan"), True, n_out)
    if abs(auc - 0.5) <= half:
        return DirectionDecision(default, auc, n_pseudo, half, True, n_out)
    return DirectionDecision("greater" if auc > 0.5 else "less", auc, n_pseudo, half, False, n_out)


def resolve_direction(
    direction: str,
    conventions: dict,
    stat: np.ndarray,
    target_mask: np.ndarray,
    ref_mask: np.ndarray,
    keep: np.ndarray,
    *,
    default: str = "greater",
    **fit,
) -> str:
    """``direction`` as given, or decided on the shadow game when "auto"; records where it came from.

    ``conventions`` gains ``direction_source``, ``shadow_auc``, ``shadow_auc_null_halfwidth`` and
    ``direction_fallback`` (True when the game showed no signal, or there is one reference model
    and so no game, and ``default`` was kept).
    """
    if direction != "auto":
        conventions["direction_source"] = "fixed by the caller"
        conventions["direction_fallback"] = False
        return direction
    if np.shape(keep)[1] < 2:  # one reference model plays no shadow game: the paper's direction
        conventions["direction_source"] = f"the paper's direction ({default}): one reference model, no shadow game"
        conventions["direction_fallback"] = True
        return default
    decision = calibrate_direction(stat, target_mask, ref_mask, keep, default=default, **fit)
    conventions["direction_source"] = decision.describe()
    conventions["shadow_auc"] = decision.shadow_auc
    conventions["shadow_auc_null_halfwidth"] = decision.null_halfwidth
    conventions["direction_fallback"] = decision.fallback
    conventions["n_out_references"] = decision.n_out_references
    return decision.direction
