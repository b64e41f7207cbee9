"""The audit's verdict in plain words, and the statistics behind it: no markup here.

:func:`assess_attack` places one attack's AUC against the band within which random
guessing stays ~95% of the time (Mann-Whitney null variance,
:func:`~recourse_privacy.metrics.membership.auc_null_halfwidth`); :func:`compare_with_bound`
sets each attack's balanced accuracy beside Theorem 2's bound of a DP defense
(Pawelczyk et al. 2023); :func:`make_verdict` puts them together into a :class:`Verdict`
that the HTML report (or anyone else) lays out. The explanation is plain text (Unicode,
no HTML): the renderer escapes it.

This module reads an :class:`~recourse_privacy.audit.result.AuditResult`'s attributes and
never imports the audit package at run time (the audit imports the report).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from recourse_privacy.metrics.membership import auc_null_halfwidth, theorem2_bound

if TYPE_CHECKING:  # the audit layer imports the report: type hints only
    from recourse_privacy.audit.result import AuditResult
    from recourse_privacy.audit.summaries import AttackResult, DPSummary

__all__ = [
    "CONTROL_NAMES",
    "LOW_FPR",
    "AttackAssessment",
    "BoundCheck",
    "BoundComparison",
    "Verdict",
    "assess_attack",
    "compare_with_bound",
    "make_verdict",
    "tpr_reliable",
    "verdict_of",
]

#: attack names treated as a random-guessing control: shown, but not used for the verdict
CONTROL_NAMES = frozenset({"random", "random-guess", "random_guess", "baseline-random"})

#: the FPR key the verdict reads the strongest attack at (TPR at 1% FPR)
LOW_FPR = "0.01"

#: a Theorem 2 bound at or above this rules nothing out
_VACUOUS = 0.9995


# --------------------------------------------------------------------------- helpers


def _float(x: Any) -> float | None:
    """A finite float, or None for missing / non-numeric / non-finite values."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(x: Any) -> int | None:
    f = _float(x)
    return int(f) if f is not None and f == int(f) else None


def _g(x: float, spec: str) -> str:
    return format(x, spec)


def tpr_reliable(attack: AttackResult, key: str) -> bool | None:
    """Whether the TPR at FPR ``key`` is resolvable: the attack's own flag, else n_nonmembers >= 1/FPR."""
    r = attack.tpr_at_fpr_reliable.get(key)
    if isinstance(r, bool):
        return r
    f, n0 = _float(key), _int(attack.n_nonmembers)
    if n0 and f:
        return n0 >= math.ceil(1.0 / f - 1e-9)
    return None


# --------------------------------------------------------------------------- one attack


@dataclass(frozen=True)
class AttackAssessment:
    """One attack's AUC against random guessing.

    ``halfwidth`` is the ~95% null band 0.5 ± halfwidth (None without sample sizes);
    ``significant`` is True when the AUC lies outside it, None when that is unknown;
    ``reversed`` when it is significant *below* 0.5 (leakage in the opposite direction).
    """

    name: str
    auc: float | None
    balanced_accuracy: float | None
    tpr_low_fpr: float | None
    n_members: int | None
    n_nonmembers: int | None
    halfwidth: float | None
    significant: bool | None
    is_control: bool

    @property
    def reversed(self) -> bool:
        """Significant with an AUC below 0.5."""
        return bool(self.significant) and self.auc is not None and self.auc < 0.5

    @property
    def strength(self) -> tuple[float, float]:
        """Sort key of the strongest attack: TPR at 1% FPR, then AUC (missing values last)."""
        return (self.tpr_low_fpr if self.tpr_low_fpr is not None else -1.0, self.auc if self.auc is not None else -1.0)


def assess_attack(attack: AttackResult) -> AttackAssessment:
    """Compare ``attack``'s AUC with the ~95% band of random guessing for its sample sizes."""
    auc = _float(attack.auc)
    n1, n0 = _int(attack.n_members), _int(attack.n_nonmembers)
    hw = auc_null_halfwidth(n1, n0) if n1 and n0 and n1 > 0 and n0 > 0 else None
    sig = None if auc is None or hw is None else abs(auc - 0.5) > hw
    return AttackAssessment(
        name=str(attack.name),
        auc=auc,
        balanced_accuracy=_float(attack.balanced_accuracy),
        tpr_low_fpr=_float(attack.tpr_at_fpr.get(LOW_FPR)),
        n_members=n1,
        n_nonmembers=n0,
        halfwidth=hw,
        significant=sig,
        is_control=str(attack.name).strip().lower() in CONTROL_NAMES,
    )


# --------------------------------------------------------------------------- DP bound


@dataclass(frozen=True)
class BoundCheck:
    """One attack's balanced accuracy beside the bound: status is within / above / vacuous / unknown."""

    attack: str
    balanced_accuracy: float | None
    status: str

    @property
    def above(self) -> bool:
        """The measured BA exceeds a non-vacuous bound."""
        return self.status == "above"


@dataclass(frozen=True)
class BoundComparison:
    """Theorem 2 of Pawelczyk et al. 2023 against the measured attacks.

    If the recourse is (ε, 0)-DP, no attacker's balanced accuracy exceeds
    1/2 + (1 − e^−ε)/2 = ``bound``; ``source`` says where the bound came from; ``total_bound``
    is the bound at the total ε of every recourse released (basic composition) when it
    differs. ``checks`` has one row per attack; ``direction_check`` the Laplace Recourse
    direction attack, which the guarantee does not cover.
    """

    defense: str
    bound: float | None
    source: str
    epsilon_per_query: float | None
    epsilon_total: float | None
    total_bound: float | None
    checks: tuple[BoundCheck, ...] = ()
    direction_check: BoundCheck | None = None

    @property
    def vacuous(self) -> bool:
        """The bound is (close to) 1: it rules nothing out."""
        return self.bound is not None and self.bound >= _VACUOUS

    @property
    def exceeded(self) -> tuple[str, ...]:
        """Names of the attacks whose BA is above the (non-vacuous) bound."""
        return tuple(c.attack for c in self.checks if c.above)


def _bound_of(eps: float | None) -> float | None:
    if eps is None:
        return None
    try:
        return theorem2_bound(eps)
    except ValueError:
        return None


def _check(name: str, ba: float | None, bound: float, vacuous: bool) -> BoundCheck:
    if ba is None:
        status = "unknown"
    elif vacuous:
        status = "vacuous"
    elif ba <= bound:
        status = "within"
    else:
        status = "above"
    return BoundCheck(attack=name, balanced_accuracy=ba, status=status)


def compare_with_bound(dp: DPSummary, attacks: Iterable[AttackResult]) -> BoundComparison:
    """Set each attack's balanced accuracy beside Theorem 2's bound for the defense ``dp``.

    The bound is the one the audit reported (``dp.ba_bound``); when missing it is computed
    from ε per query, else from the total ε. An attack is "above" when its BA exceeds a
    non-vacuous bound (the measured BA is a maximum over thresholds and noisy, so a small
    excess is expected now and then; a large one suggests the guarantee does not hold).
    """
    eps_q = _float(getattr(dp, "epsilon_per_query", None))
    eps_t = _float(getattr(dp, "epsilon_total", None))
    bound = _float(getattr(dp, "ba_bound", None))
    bq, bt = _bound_of(eps_q), _bound_of(eps_t)
    source = "as reported by the audit"
    if bound is None:
        if bq is not None:
            bound, source = bq, f"computed from ε per query = {_g(eps_q, '.4g')}"
        elif bt is not None:
            bound, source = bt, f"computed from total ε = {_g(eps_t, '.4g')}"
    elif bq is not None and abs(bq - bound) < 1e-6:
        source = f"from ε per query = {_g(eps_q, '.4g')}"
    elif bt is not None and abs(bt - bound) < 1e-6:
        source = f"from total ε = {_g(eps_t, '.4g')}"
    total_bound = bt if bt is not None and bound is not None and abs(bt - bound) > 1e-6 else None
    defense = str(getattr(dp, "defense", "") or "")
    if bound is None:
        return BoundComparison(defense, None, "no valid ε was reported", eps_q, eps_t, None)
    vacuous = bound >= _VACUOUS
    checks = tuple(_check(str(a.name), _float(a.balanced_accuracy), bound, vacuous) for a in attacks)
    da = getattr(dp, "direction_attack", None)
    direction = (
        _check("direction (released move direction)", _float(getattr(da, "balanced_accuracy", None)), bound, vacuous)
        if da is not None
        else None
    )
    return BoundComparison(defense, bound, source, eps_q, eps_t, total_bound, checks, direction)


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Verdict:
    """The plain-words verdict of an audit.

    ``level`` is "leak" (some attack's AUC is outside the band of random guessing),
    "noleak" (every attack inside it), "undetermined" (sample sizes missing) or "none" (no
    attack with an AUC). ``attack`` names the strongest attack (by TPR at 1% FPR, then AUC;
    random-guessing controls are not counted); ``explanation`` is its plain-text reasoning,
    one sentence per item. ``assessments`` has every attack, controls included.
    """

    level: str
    headline: str
    explanation: tuple[str, ...]
    attack: str | None = None
    auc: float | None = None
    tpr_at_1pct_fpr: float | None = None
    achieved_fpr: float | None = None
    tpr_reliable: bool | None = None
    band_halfwidth: float | None = None
    significant: tuple[str, ...] = ()
    controls: tuple[str, ...] = ()
    assessments: Mapping[str, AttackAssessment] = field(default_factory=dict)
    dp: BoundComparison | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "explanation", tuple(self.explanation))
        object.__setattr__(self, "assessments", MappingProxyType(dict(self.assessments)))

    @property
    def leakage(self) -> bool:
        """Leakage was detected."""
        return self.level == "leak"

    @property
    def text(self) -> str:
        """Headline and explanation as one paragraph of plain text."""
        return " ".join((self.headline, *self.explanation))


def _pct(x: float) -> str:
    """0.035 -> '3.5%'."""
    return format(100.0 * x, ".3g") + "%"


def make_verdict(attacks: Mapping[str, AttackResult], dp: DPSummary | None = None) -> Verdict:
    """The verdict of the attacks ``attacks`` (name -> AttackResult), with the DP defense ``dp`` if any.

    Leakage is "detected" when some non-control attack's AUC lies outside 0.5 ± the ~95%
    null half-width for its numbers of members and non-members (below 0.5 counts too: the
    membership is revealed in the opposite direction). The explanation reads the strongest
    attack at 1% FPR, warns of the multiple comparisons, and names attacks above the
    Theorem 2 bound of a DP defense.
    """
    assessed = {str(name): assess_attack(a) for name, a in attacks.items()}
    comparison = compare_with_bound(dp, attacks.values()) if dp is not None else None
    scored = [a for a in assessed.values() if a.auc is not None]
    if not scored:
        why = "The audit reports no attack with an AUC, so leakage could not be assessed."
        return Verdict("none", "No verdict.", (why,), assessments=assessed, dp=comparison)
    candidates = [a for a in scored if not a.is_control] or scored
    controls = [a for a in scored if a.is_control and a not in candidates]
    sig = [a for a in candidates if a.significant]
    unknown = [a for a in candidates if a.significant is None]
    best = max(candidates, key=lambda a: a.strength)
    src = {str(n): a for n, a in attacks.items()}[best.name]

    if sig:
        level, head = "leak", "Leakage detected."
    elif unknown:
        level, head = "undetermined", "Leakage could not be fully assessed."
    else:
        level, head = "noleak", "No measurable leakage."

    parts: list[str] = []
    t01 = best.tpr_low_fpr
    ach = _float(src.achieved_fpr.get(LOW_FPR))
    rel = tpr_reliable(src, LOW_FPR)
    if t01 is not None:
        ach_txt = f"; achieved FPR {_g(ach, '.2g')}" if ach is not None else ""
        rel_txt = (
            f" (unreliable: only {best.n_nonmembers} non-members, at least 100 are needed to resolve a 1% FPR)"
            if rel is False
            else ""
        )
        parts.append(
            f"The strongest attack, {best.name}, reaches a true-positive rate (TPR) of {_g(t01, '.3g')} "
            f"at a 1% false-positive rate (FPR ≤ 0.01{ach_txt}){rel_txt} with AUC {_g(best.auc, '.3f')}; "
            "random guessing gives TPR 0.01 at 1% FPR and AUC 0.5."
        )
        parts.append(
            f"A TPR at 1% FPR of {_g(t01, '.3g')} means the attacker identifies {_pct(t01)} of "
            "members while wrongly flagging 1% of non-members."
        )
    else:
        parts.append(
            f"The strongest attack by AUC, {best.name}, has AUC {_g(best.auc, '.3f')} "
            "(random guessing: 0.5); no TPR at 1% FPR was reported."
        )

    hws = [a.halfwidth for a in candidates if a.halfwidth is not None]
    band = max(hws) if hws else None
    if band is not None:
        n_txt = (
            f" with {best.n_members} members and {best.n_nonmembers} non-members"
            if best.n_members and best.n_nonmembers
            else ""
        )
        if sig:
            names = ", ".join(
                f"{a.name} (AUC {_g(a.auc, '.3f')})" for a in sorted(sig, key=lambda a: -abs(a.auc - 0.5))
            )
            parts.append(
                f"{len(sig)} of {len(candidates)} attack(s) have an AUC outside the band "
                f"0.5 ± {_g(band, '.2g')} within which random guessing stays 95% of the time{n_txt}: "
                f"{names}."
            )
            below = [a for a in sig if a.reversed]
            if below:
                parts.append(
                    "An AUC significantly below 0.5 ("
                    + ", ".join(a.name for a in below)
                    + ") is also leakage: membership is revealed, but in the direction opposite to "
                    "that attack's convention."
                )
        else:
            parts.append(
                f"Every attack's AUC is within 0.5 ± {_g(band, '.2g')}, the ~95% band of random guessing{n_txt}."
            )
        if len(candidates) > 1:
            k = len(candidates)
            parts.append(
                f"With {k} attacks checked at once, the chance that at least one falls outside the "
                f"band by luck alone is up to about {min(100, 5 * k)}%."
            )
    if unknown:
        parts.append(
            "Sample sizes were missing for "
            + ", ".join(a.name for a in unknown)
            + ", so their AUC could not be compared with the noise of random guessing."
        )
    if controls:
        parts.append(
            "The " + ", ".join(a.name for a in controls) + " attack is a random-guessing control and "
            "is not counted in this verdict (its numbers show the noise level of this audit)."
        )
    dpv = getattr(dp, "verdict", None) if dp is not None else None
    if dpv is not None:  # the audit's own worst case over the attacks the claim covers, against the tight bound
        defense = f"the {dp.defense} defense"
        paper = _float(getattr(dp, "ba_bound_paper", None))
        paper_txt = f"; Pawelczyk et al. (2023)'s Theorem 2 would allow {_g(paper, '.4f')}" if paper is not None else ""
        parts.append(
            f"Under {defense}, the worst case over the {len(dpv.covered)} attack(s) the DP claim covers is "
            f"{dpv.attack} (balanced accuracy {_g(dpv.balanced_accuracy, '.4f')}, 95% lower confidence bound "
            f"{_g(dpv.ba_lower_confidence, '.4f')}), against the tight bound {_g(dpv.ba_bound, '.4f')} "
            f"(e^ε/(1+e^ε) at ε = {_g(dp.selected_epsilon, '.4g')}, twice the claim because targets are the "
            f"rejected points){paper_txt}: "
            + (
                "the claim is refuted for this release."
                if dpv.exceeds
                else "consistent with the claim, which is not a proof of privacy."
            )
        )
    if comparison is not None and comparison.bound is not None and not comparison.vacuous:
        defense = f"the {comparison.defense} defense" if comparison.defense else "the DP defense"
        if dpv is not None:
            pass  # the audit's own verdict above (covered attacks, confidence bound) is the statement to read
        elif comparison.exceeded:
            parts.append(
                f"Under {defense}, "
                + ", ".join(comparison.exceeded)
                + f" exceed(s) the DP bound of {_g(comparison.bound, '.4f')} on balanced accuracy "
                "(the tight form of Theorem 2 of Pawelczyk et al. 2023): see the differential-privacy "
                "section."
            )
        elif any(c.status == "within" for c in comparison.checks):
            parts.append(
                f"Under {defense}, every attack's balanced accuracy is within Theorem 2's bound of "
                f"{_g(comparison.bound, '.4f')} (Pawelczyk et al. 2023)."
            )
    return Verdict(
        level=level,
        headline=head,
        explanation=tuple(parts),
        attack=best.name,
        auc=best.auc,
        tpr_at_1pct_fpr=t01,
        achieved_fpr=ach,
        tpr_reliable=rel,
        band_halfwidth=band,
        significant=tuple(a.name for a in sig),
        controls=tuple(a.name for a in controls),
        assessments=assessed,
        dp=comparison,
    )


def verdict_of(result: AuditResult) -> Verdict:
    """The verdict of an audit result (its attacks and, if any, its DP defense)."""
    return make_verdict(result.attacks, result.dp)
