"""Exposure of single records and of groups of records to a membership-inference attack.

Per record: where a target's score falls among the non-members' scores (its percentile), and
whether it is identified at a fixed FPR, the threshold read off the non-members' scores alone
("member if score >= t", the largest TPR among thresholds whose FPR is at most the target, as
:func:`~recourse_privacy.metrics.membership.tpr_at_fpr` reads it; never from member labels).

Per group (the targets sharing a value of a column): the attack's AUC with the stratified
bootstrap interval and its TPR at FPR 1% with the Clopper-Pearson interval
(:mod:`recourse_privacy.metrics.intervals`), and a test of whether the group's AUC is above the
rest's: the two AUCs are of disjoint targets, hence independent, so
z = (AUC_g - AUC_rest) / sqrt(V_g + V_rest) with DeLong et al.'s (1988) variance of each AUC,
one-sided p = 1 - Phi(z); the p-values of a column's groups are Holm-corrected (Holm 1979), and
a group is flagged where its corrected p-value is below alpha.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import _auc, bootstrap_auc, check_alpha
from recourse_privacy.metrics.membership import attack_metrics, fpr_key

__all__ = [
    "RANKING_PREFERENCE",
    "RANKING_RULE",
    "SIGNAL_PREFERENCE",
    "ExposedRecord",
    "ExposureSummary",
    "GroupExposure",
    "IdentifiedMembers",
    "delong_variance",
    "group_exposure",
    "holm",
    "identified_at_fpr",
    "nonmember_percentiles",
    "preferred_attack",
]

#: the order in which the report's ranking attack, the verdict's lead attack of each signal and the score attack
#: a recourse attack is compared with are chosen among those that ran (:func:`preferred_attack`), fixed before any
#: score is seen (never the targets' AUC, which reads their membership labels): recourse attacks before score attacks
#: (the audit is of recourse), reference-model tests before plain thresholds, online before offline (Carlini
#: et al. 2022; Zarifzadeh et al. 2024). An attack not listed (a plugin) follows the listed ones of its signal.
RANKING_PREFERENCE = (
    "rmia-cfd-online",
    "cfd-lrt-online",
    "rmia-cfd",
    "cfd-lrt",
    "cfd-lrt-per-example",
    "cfd-lrt-global",
    "lr-reconstruction",
    "lr-direction",
    "cfd",
    "loss-lrt-online",
    "loss-lrt",
    "loss",
    "label-only",
)
#: the signals in the order the lead attack is taken from (an attack of another recorded signal follows them,
#: a control, signal "none", comes last)
SIGNAL_PREFERENCE = ("distance", "score")
RANKING_RULE = (
    "the first that ran of a fixed preference order (recourse attacks before score attacks, reference-model "
    "tests before thresholds, online before offline), never the targets' AUC: choosing by it would read their "
    "membership labels; each attack's scores are ranked in its own calibrated direction, never flipped"
)


def preferred_attack(signals: Mapping[str, str], signal: str | None = None) -> str | None:
    """The lead attack among ``signals`` (attack name -> the signal it reads): the first that ran of a fixed order.

    Signals in :data:`SIGNAL_PREFERENCE` order (recourse before scores, then other signals, controls last),
    within a signal :data:`RANKING_PREFERENCE` (an unlisted attack, a plugin, after the listed ones, in the
    order given). With ``signal``, only the attacks reading it compete. The rule reads the names and signals
    alone, never a metric measured on the targets: the max over attacks of an AUC measured with the
    targets' membership labels is optimistic (the winner's curse). None when no attack competes.
    """
    names = [n for n in signals if signal is None or signals[n] == signal]
    if not names:
        return None
    order = {n: i for i, n in enumerate(RANKING_PREFERENCE)}
    by_signal = {s: i for i, s in enumerate(SIGNAL_PREFERENCE)}

    def key(n: str) -> tuple[int, int, int]:
        s = signals[n]
        return (3 if s == "none" else by_signal.get(s, 2), order.get(n, len(order)), names.index(n))

    return min(names, key=key)


#: the group test's name, as the report and groups.csv print it
GROUP_TEST = "one-sided z-test of the group's AUC against the rest's (DeLong variances), Holm-corrected"


def _split(scores, is_member) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(is_member).astype(bool)
    if s.shape != m.shape or s.ndim != 1:
        raise InvalidInputError(f"scores {s.shape} and membership {m.shape} must be 1-D of one length")
    if not (~m).any():
        raise InvalidInputError("no non-members: percentiles and thresholds are read off the non-members' scores")
    return s, m


def nonmember_percentiles(scores, is_member) -> np.ndarray:
    """Each target's percentile (0-100) among the non-members' scores: the share below it, ties counting half."""
    s, m = _split(scores, is_member)
    ref = np.sort(s[~m])
    below = np.searchsorted(ref, s, side="left")
    at_or_below = np.searchsorted(ref, s, side="right")
    return 100.0 * (below + 0.5 * (at_or_below - below)) / len(ref)


def identified_at_fpr(scores, is_member, fpr: float) -> tuple[np.ndarray, float, float]:
    """(flag per target, threshold, FPR reached): "member if score >= threshold", with at most ``fpr`` of the
    non-members at or above the threshold (the lowest such threshold among the targets' scores; +inf when
    none qualifies). Only the non-members' scores set the threshold."""
    s, m = _split(scores, is_member)
    ref = np.sort(s[~m])
    allowed = math.floor(fpr * len(ref) * (1 + 1e-12))
    candidates = np.unique(s)[::-1]  # thresholds from the highest score down
    n_at_or_above = len(ref) - np.searchsorted(ref, candidates, side="left")
    ok = np.flatnonzero(n_at_or_above <= allowed)
    # n_at_or_above grows as the threshold falls: the qualifying thresholds are a prefix
    threshold = float(candidates[ok[-1]]) if len(ok) else math.inf
    flags = s >= threshold
    return flags, threshold, float((flags & ~m).sum() / len(ref))


def holm(pvalues) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values (nan entries are left out of the count and stay nan)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full_like(p, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    order = idx[np.argsort(p[idx], kind="stable")]
    k = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        out[i] = running
    return out


def delong_variance(scores, is_member) -> float:
    """DeLong et al.'s (1988) variance of the AUC: var(V10)/n1 + var(V01)/n0 of the placement values."""
    s, m = _split(scores, is_member)
    pos, neg = np.sort(s[m]), np.sort(s[~m])
    n1, n0 = len(pos), len(neg)
    if n1 < 2 or n0 < 2:
        return math.nan
    v10 = (np.searchsorted(neg, s[m], "left") + np.searchsorted(neg, s[m], "right")) / (2.0 * n0)
    v01 = 1.0 - (np.searchsorted(pos, s[~m], "left") + np.searchsorted(pos, s[~m], "right")) / (2.0 * n1)
    return float(v10.var(ddof=1) / n1 + v01.var(ddof=1) / n0)


@dataclass(frozen=True)
class GroupExposure:
    """One value of a group column: its targets, the attack's AUC and TPR at ``fpr`` with intervals, the test."""

    column: str
    value: str
    attack: str
    n_members: int
    n_nonmembers: int
    auc: float
    auc_ci: tuple[float, float]
    fpr: float
    tpr: float
    tpr_ci: tuple[float, float]
    auc_rest: float
    p_value: float  # one-sided, the group's AUC above the rest's
    p_holm: float
    flagged: bool
    test: str = GROUP_TEST


def group_exposure(
    column: str,
    values,
    scores,
    is_member,
    *,
    attack: str,
    fpr: float = 0.01,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[GroupExposure, ...]:
    """Per value of ``values`` (one per target): counts, AUC and TPR at ``fpr`` with 1 - ``alpha`` intervals,
    and the group-versus-rest test (module docstring), Holm-corrected over this column's testable groups.

    A group without two members and two non-members (or whose rest lacks them) gets nan numbers and no test.
    """
    alpha = check_alpha(alpha)
    s, m = np.asarray(scores, dtype=np.float64), np.asarray(is_member).astype(bool)
    vals = np.asarray([str(v) for v in values], dtype=object)
    if vals.shape != s.shape:
        raise InvalidInputError(f"column {column!r}: {vals.shape[0]} values for {s.shape[0]} targets")
    z = NormalDist()
    rows = []
    for value in sorted(set(vals.tolist())):
        g = vals == value
        n1, n0 = int((g & m).sum()), int((g & ~m).sum())
        r1, r0 = int((~g & m).sum()), int((~g & ~m).sum())
        nan2 = (math.nan, math.nan)
        auc = tpr = auc_rest = p = math.nan
        auc_ci = tpr_ci = nan2
        if n1 >= 2 and n0 >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # few non-members at this FPR: the interval says so
                met = attack_metrics(m[g].astype(int), s[g], (fpr,), n_bootstrap=0, alpha=alpha)
            auc, tpr, tpr_ci = met.auc, met.tpr_at_fpr[fpr_key(fpr)].tpr, met.tpr_at_fpr[fpr_key(fpr)].ci
            auc_ci = bootstrap_auc(m[g].astype(int), s[g], n_boot=n_boot, alpha=alpha, seed=seed)
            if r1 >= 2 and r0 >= 2:
                auc_rest = _auc(s[~g], m[~g])
                var = delong_variance(s[g], m[g]) + delong_variance(s[~g], m[~g])
                diff = auc - auc_rest
                p = 1.0 - z.cdf(diff / math.sqrt(var)) if var > 0 else (0.0 if diff > 0 else 1.0)
        rows.append([value, n1, n0, auc, auc_ci, tpr, tpr_ci, auc_rest, p])
    adjusted = holm([r[-1] for r in rows])
    return tuple(
        GroupExposure(
            column=column,
            value=value,
            attack=attack,
            n_members=n1,
            n_nonmembers=n0,
            auc=float(auc),
            auc_ci=tuple(float(x) for x in auc_ci),
            fpr=float(fpr),
            tpr=float(tpr),
            tpr_ci=tuple(float(x) for x in tpr_ci),
            auc_rest=float(auc_rest),
            p_value=float(p),
            p_holm=float(q),
            flagged=bool(q < alpha),
        )
        for (value, n1, n0, auc, auc_ci, tpr, tpr_ci, auc_rest, p), q in zip(rows, adjusted)
    )


@dataclass(frozen=True)
class IdentifiedMembers:
    """How many members one attack identifies at ``fpr``, the threshold read off the non-members' scores."""

    attack: str
    fpr: float
    n_identified: int
    n_members: int
    threshold: float
    achieved_fpr: float


@dataclass(frozen=True)
class ExposedRecord:
    """A member among the most exposed: its row in the data, its percentile among non-members and its score."""

    row: int
    percentile: float
    score: float


@dataclass(frozen=True)
class ExposureSummary:
    """The report's per-record block: the most exposed members under ``ranking_attack`` and the counts per attack."""

    ranking_attack: str
    most_exposed: tuple[ExposedRecord, ...]
    identified: tuple[IdentifiedMembers, ...]
    likelihood_ratio_attacks: tuple[str, ...]
    note: str
