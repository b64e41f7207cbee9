"""ROC-based measures of membership-inference attack success.

Conventions (stated here once and repeated in every report, because "why does my
number not match the paper?" is the most common question about these metrics):

* ``labels``: 1 = member (in the training set), 0 = non-member.
* ``scores``: higher = more likely a member. An attack whose statistic points the
  other way (e.g. the LOSS attack, member if loss <= tau) must negate it first.
* ROC curve: :func:`sklearn.metrics.roc_curve` with ``drop_intermediate=False``,
  i.e. one point per distinct score, rule "member if score >= threshold".
* TPR at a fixed FPR: the largest TPR among ROC points whose FPR is <= the target,
  with no interpolation between points; the FPR actually achieved is reported too.
  With fewer than ``1/target`` non-members the number is flagged unreliable.
* Ties: targets with the same score share one ROC point (no random tie-breaking), so a spike of
  tied scores (Laplace Recourse's clamp) is one jump; TPR at a fixed FPR is read at the last point
  before the jump and can lie below the random line (TPR < FPR) there. That is the convention, not
  a leak or an anti-leak; breaking the ties at random would put that point on the diagonal.
* Balanced accuracy: the best (TPR + 1 - FPR) / 2 over all thresholds, i.e. the
  attacker is assumed to know the optimal threshold, as in Pawelczyk et al. (2023).
* AUC: :func:`sklearn.metrics.roc_auc_score` (ties count one half).
* Confidence intervals (:mod:`recourse_privacy.metrics.intervals`): the AUC's is a seeded stratified
  percentile bootstrap; the TPR's at each FPR an exact Clopper-Pearson interval on the members, and
  the achieved FPR's one on the non-members (the threshold is read off the non-members, so its
  FPR is an estimate too). All at 95% unless ``alpha`` says otherwise.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import DEFAULT_BOOTSTRAP, bootstrap_auc, check_alpha, clopper_pearson
from recourse_privacy.validation import check_delta, check_interval, check_positive_float

__all__ = [
    "RocCurve",
    "TprAtFpr",
    "AttackMetrics",
    "LowFprWarning",
    "roc",
    "auc",
    "balanced_accuracy",
    "tpr_at_fpr",
    "theorem2_bound",
    "tight_ba_bound",
    "selected_target_privacy",
    "attack_metrics",
    "auc_null_halfwidth",
    "auc_null_pvalue",
    "tpr_null_pvalue",
    "fpr_key",
    "DEFAULT_FPRS",
]

DEFAULT_FPRS: tuple[float, ...] = (0.1, 0.01, 0.001)


class LowFprWarning(UserWarning):
    """TPR at a target FPR was requested with too few non-members to resolve that FPR."""


@dataclass(frozen=True)
class RocCurve:
    """A ROC curve: one point per distinct score threshold ("member if score >= threshold")."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray


@dataclass(frozen=True)
class TprAtFpr:
    """TPR read at a target FPR without interpolation, with the FPR actually achieved.

    ``reliable`` is False when there were fewer than ``1/target_fpr`` non-members, so
    that the target FPR is finer than the smallest non-zero FPR the data can show. ``ci`` is the
    exact (Clopper-Pearson) interval of the TPR on the members, ``fpr_ci`` that of the achieved
    FPR on the non-members (its upper end bounds the true FPR of the threshold the data chose).
    """

    target_fpr: float
    tpr: float
    achieved_fpr: float
    reliable: bool
    ci: tuple[float, float] = (math.nan, math.nan)
    fpr_ci: tuple[float, float] = (math.nan, math.nan)


@dataclass(frozen=True)
class AttackMetrics:
    """All the summary numbers of one attack on one member/non-member split.

    ``auc_ci`` is the AUC's bootstrap interval at ``ci_level`` from ``n_bootstrap`` replicates
    (nan ends when ``n_bootstrap`` is 0); each :class:`TprAtFpr` carries its own intervals.
    """

    auc: float
    balanced_accuracy: float
    tpr_at_fpr: dict[str, TprAtFpr] = field(default_factory=dict)
    n_members: int = 0
    n_nonmembers: int = 0
    auc_ci: tuple[float, float] = (math.nan, math.nan)
    ci_level: float = 0.95
    n_bootstrap: int = 0

    def to_dict(self) -> dict:
        """Plain JSON-ready dict: numbers keyed by ``format(fpr, "g")`` strings, intervals as [lo, hi]."""
        return {
            "auc": float(self.auc),
            "balanced_accuracy": float(self.balanced_accuracy),
            "tpr_at_fpr": {k: float(v.tpr) for k, v in self.tpr_at_fpr.items()},
            "achieved_fpr": {k: float(v.achieved_fpr) for k, v in self.tpr_at_fpr.items()},
            "tpr_at_fpr_reliable": {k: bool(v.reliable) for k, v in self.tpr_at_fpr.items()},
            "n_members": int(self.n_members),
            "n_nonmembers": int(self.n_nonmembers),
            "auc_ci": [float(x) for x in self.auc_ci],
            "tpr_at_fpr_ci": {k: [float(x) for x in v.ci] for k, v in self.tpr_at_fpr.items()},
            "achieved_fpr_ci": {k: [float(x) for x in v.fpr_ci] for k, v in self.tpr_at_fpr.items()},
            "ci_level": float(self.ci_level),
            "n_bootstrap": int(self.n_bootstrap),
        }


# --------------------------------------------------------------------------- validation


def _sk():
    """sklearn.metrics, imported on first use (it costs ~1 s, keep package import fast)."""
    from sklearn import metrics as skm

    return skm


def _validate(labels: ArrayLike, scores: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Check labels/scores and return them as (int8 labels, float64 scores)."""
    y = np.asarray(labels)
    s = np.asarray(scores)
    if y.ndim != 1:
        raise InvalidInputError(f"labels must be 1-D, got an array of shape {y.shape}")
    if s.ndim != 1:
        raise InvalidInputError(f"scores must be 1-D, got an array of shape {s.shape}")
    if y.shape[0] != s.shape[0]:
        raise InvalidInputError(
            f"scores has length {s.shape[0]} but labels has length {y.shape[0]}; "
            "they must be aligned one score per labelled example"
        )
    if y.dtype == bool:
        y = y.astype(np.int8)
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise InvalidInputError(f"labels must be numeric 0 (non-member) / 1 (member), got dtype {y.dtype}")
    bad = ~np.isin(y, (0, 1))
    if bad.any():
        found = np.unique(y[bad])[:5].tolist()
        raise InvalidInputError(
            "labels must contain only 0 (non-member) and 1 (member); "
            f"found {int(bad.sum())} other value(s), e.g. {found}"
        )
    y = y.astype(np.int8)
    n1 = int(y.sum())
    n0 = int(y.shape[0] - n1)
    if n1 == 0 or n0 == 0:
        raise InvalidInputError(
            f"labels must contain both members (1) and non-members (0); got {n1} member(s) and {n0} non-member(s)"
        )
    if s.dtype == bool or not (np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)):
        raise InvalidInputError(f"scores must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64)
    nonfinite = ~np.isfinite(s)
    if nonfinite.any():
        raise InvalidInputError(
            f"scores must be finite: found {int(nonfinite.sum())} non-finite value(s) "
            f"(NaN: {int(np.isnan(s).sum())}, +/-inf: {int(np.isinf(s).sum())}) "
            f"out of {s.shape[0]}; attacks must produce finite scores"
        )
    return y, s


def _validate_fpr(fpr: float) -> float:
    try:
        f = float(fpr)
    except (TypeError, ValueError):
        raise InvalidInputError(f"fpr must be a number in (0, 1], got {fpr!r}") from None
    if not math.isfinite(f) or not 0.0 < f <= 1.0:
        raise InvalidInputError(f"fpr must be a number in (0, 1], got {fpr!r}")
    return f


def fpr_key(fpr: float) -> str:
    """The dict key used for a target FPR: ``format(fpr, "g")`` (0.1 -> "0.1", 0.001 -> "0.001")."""
    return format(float(fpr), "g")


# --------------------------------------------------------------------------- metrics


def roc(labels: ArrayLike, scores: ArrayLike) -> RocCurve:
    """ROC curve of "member if score >= threshold" over every distinct score.

    Uses ``sklearn.metrics.roc_curve(drop_intermediate=False)``; the first point is
    (0, 0) at threshold +inf. Raises ValueError on invalid labels or scores.
    """
    y, s = _validate(labels, scores)
    fpr, tpr, thr = _sk().roc_curve(y, s, pos_label=1, drop_intermediate=False)
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=thr)


def auc(labels: ArrayLike, scores: ArrayLike) -> float:
    """Area under the ROC curve (``sklearn.metrics.roc_auc_score``; ties count 1/2).

    0.5 is random guessing, 1.0 perfect separation, 0.0 perfectly reversed scores.
    """
    y, s = _validate(labels, scores)
    return float(_sk().roc_auc_score(y, s))


def _balanced_accuracy_from_curve(curve: RocCurve) -> float:
    return float(np.max((curve.tpr + 1.0 - curve.fpr) / 2.0))


def balanced_accuracy(labels: ArrayLike, scores: ArrayLike) -> float:
    """Best balanced accuracy (TPR + 1 - FPR) / 2 over all thresholds.

    This is the paper's BA: the attacker is assumed to know the optimal threshold,
    so it is optimistic for the attacker and never below 0.5 (the trivial thresholds).
    """
    return _balanced_accuracy_from_curve(roc(labels, scores))


def _tpr_at_fpr_from_curve(
    curve: RocCurve, target: float, n_nonmembers: int, n_members: int = 0, alpha: float = 0.05
) -> TprAtFpr:
    # Points with FPR <= target (a tiny relative tolerance absorbs float rounding of k/n0).
    mask = curve.fpr <= target * (1.0 + 1e-12)
    # The (0, 0) point at threshold +inf always satisfies the mask.
    tprs = curve.tpr[mask]
    fprs = curve.fpr[mask]
    best = float(tprs.max())
    # Among the points reaching the best TPR, report the smallest FPR that attains it.
    achieved = float(fprs[tprs == best].min())
    needed = math.ceil(1.0 / target - 1e-9)
    reliable = n_nonmembers >= needed
    if not reliable:
        warnings.warn(
            LowFprWarning(
                f"TPR at FPR {fpr_key(target)} is unreliable: there are only {n_nonmembers} "
                f"non-members, but at least {needed} are needed to resolve an FPR of "
                f"{fpr_key(target)} (the smallest non-zero FPR here is "
                f"1/{n_nonmembers} = {1.0 / n_nonmembers:.3g})"
            ),
            stacklevel=3,
        )
    ci = fpr_ci = (math.nan, math.nan)
    if n_members > 0 and n_nonmembers > 0:  # counts behind the rates (k / n exactly, up to rounding)
        ci = clopper_pearson(round(best * n_members), n_members, alpha)
        fpr_ci = clopper_pearson(round(achieved * n_nonmembers), n_nonmembers, alpha)
    return TprAtFpr(target_fpr=target, tpr=best, achieved_fpr=achieved, reliable=reliable, ci=ci, fpr_ci=fpr_ci)


def tpr_at_fpr(labels: ArrayLike, scores: ArrayLike, fpr: float) -> TprAtFpr:
    """TPR at a target FPR: the largest TPR among ROC points with FPR <= ``fpr``.

    No interpolation between ROC points; ``achieved_fpr`` is the smallest FPR at which
    that TPR is reached. Warns :class:`LowFprWarning` and sets ``reliable=False`` when
    there are fewer than ``1/fpr`` non-members.
    """
    target = _validate_fpr(fpr)
    y, s = _validate(labels, scores)
    fp, tp, thr = _sk().roc_curve(y, s, pos_label=1, drop_intermediate=False)
    n0 = int((y == 0).sum())
    return _tpr_at_fpr_from_curve(RocCurve(fp, tp, thr), target, n0, int(y.shape[0] - n0))


def theorem2_bound(epsilon: float) -> float:
    """Theorem 2 of Pawelczyk et al. (2023): BA of any attacker <= 1/2 + (1 - e^-eps)/2.

    Holds when the recourse mechanism is (epsilon, 0)-differentially private in the
    training data. ``epsilon`` must be finite and > 0 (ValueError otherwise).
    """
    eps = check_positive_float(epsilon, "epsilon")
    return 0.5 + (1.0 - math.exp(-eps)) / 2.0


def tight_ba_bound(epsilon: float, delta: float = 0.0) -> float:
    """The tight bound on any attacker's balanced accuracy against an (epsilon, delta)-DP release.

    BA <= 1/2 + delta/2 + (1 - delta) (e^eps - 1) / (2 (e^eps + 1)), which is e^eps / (1 + e^eps)
    for delta = 0 (the hypothesis-testing region of DP: Kairouz, Oh and Viswanath 2015). It is
    attained by randomized response, so no smaller bound holds for every epsilon-DP mechanism;
    Pawelczyk et al. (2023)'s Theorem 2, 1/2 + (1 - e^-eps)/2 (:func:`theorem2_bound`), is looser
    (0.697 against 0.622 at epsilon 0.5). Capped at 1.
    """
    eps = check_positive_float(epsilon, "epsilon")
    delta = check_delta(delta)
    # (e^eps - 1) / (e^eps + 1) = tanh(eps / 2): no overflow at large epsilon
    return min(1.0, 0.5 + delta / 2.0 + (1.0 - delta) * math.tanh(eps / 2.0) / 2.0)


def selected_target_privacy(epsilon: float, delta: float = 0.0, selected_share: float = 1.0) -> tuple[float, float]:
    """(epsilon, delta) of the release *conditioned on the target being selected* by the DP output.

    The audit's targets are the points the owner's model rejects. Under DPM that decision is
    itself part of the epsilon-DP output, and the attacks are measured only on the selected
    (rejected) targets: a test between the two conditional distributions P[. | rejected, D] and
    P[. | rejected, D']. Conditioning on an event E of probability p (under the neighbour without
    the target) multiplies the likelihood ratio by at most P[E | D'] / P[E | D] <= e^eps p / (p -
    delta), so the conditional release is (2 eps + log(p / (p - delta)), delta e^eps / (p - delta))-DP.
    For delta = 0 this is (2 epsilon, 0), whatever p. ``selected_share`` is p, estimated by the
    share of rejected points (only used when delta > 0; it must exceed delta).
    """
    eps = check_positive_float(epsilon, "epsilon")
    delta = check_delta(delta)
    if delta == 0:
        return 2.0 * eps, 0.0
    p = check_interval(selected_share, "selected_share", delta, 1.0, closed="right")
    return 2.0 * eps + math.log(p / (p - delta)), min(1.0, delta * math.exp(eps) / (p - delta))


def auc_null_halfwidth(n_members: int, n_nonmembers: int, z: float = 1.96) -> float:
    """Half-width of the two-sided band for AUC under "no leakage" (AUC = 0.5).

    Uses the Mann-Whitney null variance (n1 + n0 + 1) / (12 n1 n0), so with
    ``z=1.96`` an AUC outside 0.5 +/- the returned value is significant at ~5%.
    """
    n1, n0 = int(n_members), int(n_nonmembers)
    if n1 <= 0 or n0 <= 0:
        raise InvalidInputError(f"n_members and n_nonmembers must be positive, got {n1} and {n0}")
    return float(z) * math.sqrt((n1 + n0 + 1) / (12.0 * n1 * n0))


def auc_null_pvalue(auc_value: float, n_members: int, n_nonmembers: int) -> float:
    """Two-sided p-value of an AUC against "no leakage" (AUC = 0.5), Mann-Whitney's normal approximation.

    Under the null the members' and non-members' scores are exchangeable and the AUC (Mann-Whitney's
    U / (n1 n0)) has mean 1/2 and variance (n1 + n0 + 1) / (12 n1 n0) (Mann and Whitney 1947); ties
    only shrink that variance, so without a tie correction the p-value is conservative.
    p = erfc(|AUC - 1/2| / (sd sqrt 2)), the same test as :func:`auc_null_halfwidth`'s band.
    """
    sd = auc_null_halfwidth(n_members, n_nonmembers, z=1.0)
    a = float(auc_value)
    if not 0.0 <= a <= 1.0:
        raise InvalidInputError(f"auc must lie in [0, 1], got {auc_value!r}")
    return float(math.erfc(abs(a - 0.5) / (sd * math.sqrt(2.0))))


def tpr_null_pvalue(k_members: int, n_members: int, k_nonmembers: int, n_nonmembers: int) -> float:
    """One-sided p-value of a TPR at a fixed FPR against "no leakage": ``k_members`` of ``n_members`` above a
    threshold that ``k_nonmembers`` of ``n_nonmembers`` exceed.

    The threshold sits just above the (k0 + 1)-th highest non-member, so the members above it are those
    ranked before that non-member. Without leakage every order of the pooled scores is equally likely, and
    that count is negative hypergeometric: the red balls (members) drawn before the (k0 + 1)-th blue one
    (``scipy.stats.nhypergeom(n1 + n0, n1, k0 + 1)``). p = P(count >= k1), exact but for ties.
    """
    k1, n1, k0, n0 = int(k_members), int(n_members), int(k_nonmembers), int(n_nonmembers)
    if n1 <= 0 or n0 <= 0 or not 0 <= k1 <= n1 or not 0 <= k0 < n0:
        raise InvalidInputError(
            f"need 0 <= k_members <= n_members and 0 <= k_nonmembers < n_nonmembers, got {k1}/{n1} and {k0}/{n0}"
        )
    from scipy.stats import nhypergeom

    return float(min(1.0, nhypergeom.sf(k1 - 1, n1 + n0, n1, k0 + 1)))


def attack_metrics(
    labels: ArrayLike,
    scores: ArrayLike,
    fprs: Sequence[float] = DEFAULT_FPRS,
    *,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    alpha: float = 0.05,
) -> AttackMetrics:
    """AUC, best-threshold balanced accuracy and TPR at each FPR in ``fprs``, with 1 - ``alpha`` intervals.

    The TPR dict is keyed by ``format(fpr, "g")``; see :func:`tpr_at_fpr` for how each
    value is read (and the :class:`LowFprWarning` on too few non-members). The AUC's interval is
    a stratified percentile bootstrap of ``n_bootstrap`` replicates seeded with ``seed``
    (:func:`~recourse_privacy.metrics.intervals.bootstrap_auc`; 0 replicates: no interval, nan ends);
    the TPRs' and achieved FPRs' are exact Clopper-Pearson intervals.
    """
    targets = [_validate_fpr(f) for f in fprs]
    alpha = check_alpha(alpha)
    n_bootstrap = int(n_bootstrap)
    if n_bootstrap < 0:
        raise InvalidInputError(f"n_bootstrap must be >= 0 (0: no AUC interval), got {n_bootstrap}")
    y, s = _validate(labels, scores)
    fp, tp, thr = _sk().roc_curve(y, s, pos_label=1, drop_intermediate=False)
    curve = RocCurve(fp, tp, thr)
    n1 = int(y.sum())
    n0 = int(y.shape[0] - n1)
    tprs = {fpr_key(t): _tpr_at_fpr_from_curve(curve, t, n0, n1, alpha) for t in targets}
    auc_ci = bootstrap_auc(y, s, n_boot=n_bootstrap, alpha=alpha, seed=seed) if n_bootstrap else (math.nan, math.nan)
    return AttackMetrics(
        auc=float(_sk().roc_auc_score(y, s)),
        balanced_accuracy=_balanced_accuracy_from_curve(curve),
        tpr_at_fpr=tprs,
        n_members=n1,
        n_nonmembers=n0,
        auc_ci=auc_ci,
        ci_level=1.0 - alpha,
        n_bootstrap=n_bootstrap,
    )
