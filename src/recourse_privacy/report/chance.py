"""What chance gives an audit: the smallest effects its sample size can detect, and several attacks tested at once.

:func:`detectable_effects` says what a "no measurable leakage" rules out; :func:`family_wise` tests the
counted attacks together, both arms of each (Holm 1979), so that luck over k attacks is held at 5%. No markup here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from recourse_privacy.metrics.exposure import holm
from recourse_privacy.metrics.intervals import minimum_detectable_auc, minimum_detectable_tpr
from recourse_privacy.metrics.membership import auc_null_pvalue, tpr_null_pvalue
from recourse_privacy.report.assessment import LOW_FPR, AttackAssessment, percent

__all__ = ["Detectable", "FamilyWise", "detectable_effects", "family_wise"]


@dataclass(frozen=True)
class Detectable:
    """What this audit's sample size can detect: the minimum detectable effects.

    ``auc``: the smallest true AUC whose interval excludes 0.5 with probability ``power`` (nan: none can be);
    ``tpr``: per FPR key, the smallest true TPR at that FPR whose Clopper-Pearson interval lies above
    the threshold's FPR interval with probability ``power`` (nan: none can be)
    (:func:`~recourse_privacy.metrics.intervals.minimum_detectable_auc`, ``minimum_detectable_tpr``).
    Both shrink like 1 / sqrt(n).
    """

    n_members: int
    n_nonmembers: int
    auc: float
    tpr: Mapping[str, float]
    power: float
    alpha: float
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "tpr", MappingProxyType(dict(self.tpr)))


def detectable_effects(
    n_members: int, n_nonmembers: int, fpr_keys: Iterable[str] = ("0.1", LOW_FPR, "0.001"), *, power: float = 0.95
) -> Detectable:
    """The minimum detectable AUC and TPR at each FPR for ``n_members`` and ``n_nonmembers`` targets, with a sentence."""
    alpha = 0.05
    auc = minimum_detectable_auc(n_members, n_nonmembers, alpha=alpha, power=power)
    tpr = {k: minimum_detectable_tpr(n_members, n_nonmembers, float(k), alpha=alpha, power=power) for k in fpr_keys}
    low = tpr.get(LOW_FPR)
    low_txt = f", or a TPR of {percent(low)} at FPR 1%" if low is not None and math.isfinite(low) else ""
    if not math.isfinite(auc):  # no AUC below 1 is detectable: say so, never a figure above 1
        text = (
            f"With {n_members} members and {n_nonmembers} non-members, no attack is detected with probability "
            f"{percent(power)} (95% intervals), however strong: none is detectable at this sample size."
        )
    else:
        text = (
            f"With {n_members} members and {n_nonmembers} non-members, an attack with a true AUC of "
            f"{format(auc, '.3f')}{low_txt}, would have been detected with probability {percent(power)} "
            "(95% intervals); a weaker leak can go unnoticed at this sample size, so “no measurable leakage” "
            "rules out leaks at least this strong, not every leak."
        )
    return Detectable(int(n_members), int(n_nonmembers), auc, tpr, power, alpha, text)


# --------------------------------------------------------------------------- several attacks at once


@dataclass(frozen=True)
class FamilyWise:
    """The attacks tested together, so that luck over several attacks (and both arms of each) is held at ``alpha``.

    Per attack: ``p_auc``, the two-sided Mann-Whitney p-value of its AUC against 0.5
    (:func:`~recourse_privacy.metrics.membership.auc_null_pvalue`); ``p_tpr``, the one-sided p-value of its
    TPR at 1% FPR (:func:`~recourse_privacy.metrics.membership.tpr_null_pvalue`; nan where not recorded);
    ``p_values``, the attack's own p-value over both arms (Bonferroni: twice the smaller, at most 1; the
    AUC's alone without a TPR one; nan without sample sizes). ``p_holm``: Holm's (1979) step-down
    adjustment of ``p_values`` over the ``k`` attacks that have one; ``survivors``: the attacks whose
    adjusted p-value is below ``alpha``, in the verdict's order.
    """

    k: int
    p_auc: Mapping[str, float]
    p_tpr: Mapping[str, float]
    p_values: Mapping[str, float]
    p_holm: Mapping[str, float]
    survivors: tuple[str, ...]
    alpha: float
    text: str

    def __post_init__(self) -> None:
        for name in ("p_auc", "p_tpr", "p_values", "p_holm"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))


def _tpr_p(a: AttackAssessment) -> float:
    """The TPR arm's p-value: k1 = TPR x n1 members above the threshold of FPR <= 1%, which can go down until
    k0 = floor(0.01 n0) non-members exceed it (never the FPR the TPR was first reached at: a data-chosen k0
    would be optimistic); nan without the TPR or the sizes."""
    if not a.sizes_known or a.tpr_low_fpr is None:
        return math.nan
    k1 = round(a.tpr_low_fpr * a.n_members)
    k0 = math.floor(float(LOW_FPR) * a.n_nonmembers + 1e-9)
    if not 0 <= k1 <= a.n_members or k0 >= a.n_nonmembers:
        return math.nan
    return tpr_null_pvalue(k1, a.n_members, k0, a.n_nonmembers)


def family_wise(candidates: list[AttackAssessment], alpha: float = 0.05) -> FamilyWise | None:
    """Holm's correction of the counted attacks' tests (both arms each); None with fewer than two attacks to test."""
    p_auc = {
        a.name: auc_null_pvalue(a.auc, a.n_members, a.n_nonmembers) if a.auc is not None and a.sizes_known else math.nan
        for a in candidates
    }
    p_tpr = {a.name: _tpr_p(a) for a in candidates}
    p = {
        n: pa if math.isnan(p_tpr[n]) or math.isnan(pa) else min(1.0, 2.0 * min(pa, p_tpr[n]))
        for n, pa in p_auc.items()
    }
    k = sum(1 for v in p.values() if not math.isnan(v))
    if k < 2:
        return None
    adj = dict(zip(p, (float(x) for x in holm(list(p.values()))), strict=True))
    survivors = tuple(n for n in p if adj[n] < alpha)
    detected = [a.name for a in candidates if a.significant]
    lead = (
        f"With {k} attacks checked at once, the chance that at least one leaves chance by luck alone is up to about "
        f"{min(100, round(100 * alpha * k))}% (twice that where both the AUC and the TPR at 1% FPR are tested). "
        "Tested together (each attack's AUC against 0.5 and its TPR at 1% FPR against chance, the smaller "
        f"p-value doubled, then Holm's (1979) correction over the attacks), that chance is held at {percent(alpha)}: "
    )
    if survivors:
        named = ", ".join(f"{n} (adjusted p {adj[n]:.2g})" for n in survivors)
        dropped = [n for n in detected if n not in survivors]
        tail = f"; {', '.join(dropped)} detect(s) leakage only without it" if dropped else ""
        text = lead + f"{named} still leave(s) chance{tail}."
    elif detected:
        text = lead + (
            "no attack leaves chance once corrected, so the leakage found rests on single tests and may be "
            "luck; more targets would settle it."
        )
    else:
        text = lead + "no attack leaves chance, corrected or not."
    return FamilyWise(k, p_auc, p_tpr, p, adj, survivors, alpha, text)
