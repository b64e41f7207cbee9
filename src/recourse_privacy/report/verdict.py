"""The audit's verdict in plain words, and the statistics behind it: no markup here.

:func:`~recourse_privacy.report.assessment.assess_attack` sets one attack's AUC and TPR at 1% FPR, with
their intervals, against random guessing; :func:`make_verdict` answers the analyst's question in three parts: what the
model's own scores leak (the attacks of signal "score"), what the recourse leaks (signal
"distance"), and whether recourse leaks *beyond* the scores (the rule is in its docstring), and
says what the sample size can detect and which attacks survive being tested together
(:mod:`recourse_privacy.report.chance`); a DP defense's bounds and
the attacks its claim covers come from :mod:`recourse_privacy.report.dp_verdict`. A :class:`Verdict` is what the HTML report (or anyone else) lays out. The explanation is plain text (Unicode,
no HTML): the renderer escapes it.

This module reads the typed result of :mod:`recourse_privacy.results`, which sits below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from recourse_privacy.metrics.exposure import RANKING_RULE, preferred_attack
from recourse_privacy.report.assessment import (
    LOW_FPR,
    AttackAssessment,
    assess_attack,
    finite_float,
    percent,
    signal_of,
    tpr_reliable,
)
from recourse_privacy.report.chance import Detectable, FamilyWise, detectable_effects, family_wise
from recourse_privacy.report.dp_verdict import BoundCheck, BoundComparison, compare_with_bound, dp_bound_rows
from recourse_privacy.results.audit import AuditRecord
from recourse_privacy.results.summaries import AttackResult, DPSummary, RecourseSummary

__all__ = [
    "LOW_FPR",
    "SIGNAL_LABELS",
    "AttackAssessment",
    "BeyondFinding",
    "BoundCheck",
    "BoundComparison",
    "Detectable",
    "FamilyWise",
    "SignalFinding",
    "Verdict",
    "LEAD_RULE",
    "assess_attack",
    "compare_with_bound",
    "detectable_effects",
    "family_wise",
    "lead_attack",
    "make_verdict",
    "signal_of",
    "tpr_reliable",
    "verdict_of",
]

# --------------------------------------------------------------------------- the two questions

#: what each signal is called in the verdict
SIGNAL_LABELS = MappingProxyType({"score": "the model's own scores", "distance": "recourse"})


def _auc_txt(a: AttackAssessment) -> str:
    ci = f" [{format(a.auc_ci[0], '.3f')}, {format(a.auc_ci[1], '.3f')}]" if a.auc_ci is not None else ""
    return f"AUC {format(a.auc, '.3f')}{ci}"


def _tpr_txt(a: AttackAssessment, achieved: float | None) -> str:
    ci = f" [{percent(a.tpr_ci[0])}, {percent(a.tpr_ci[1])}]" if a.tpr_ci is not None else ""
    fpr = f"; achieved FPR {percent(achieved)}" if achieved is not None else ""
    fpr += f", at most {percent(a.fpr_ci[1])}" if a.fpr_ci is not None else ""
    return (
        f"TPR {percent(a.tpr_low_fpr)}{ci} at FPR ≤ 1% ({fpr.lstrip('; ')})"
        if fpr
        else f"TPR {percent(a.tpr_low_fpr)}{ci} at FPR ≤ 1%"
    )


@dataclass(frozen=True)
class SignalFinding:
    """One question of the verdict: what the attacks reading one signal (the scores, the recourse) detect.

    ``attacks`` are the attacks reading ``signal``; ``detected`` those whose AUC or TPR at 1% FPR
    leaves chance (:class:`AttackAssessment`); ``lead`` the attack whose numbers the finding states:
    the first of them in a fixed order (:func:`lead_attack`), never the one of best AUC or TPR on the
    targets, whose numbers would be optimistic (chosen with the targets' membership labels);
    ``level`` is "leak", "noleak" or "undetermined" (sample sizes missing).
    """

    signal: str
    label: str
    attacks: tuple[str, ...]
    detected: tuple[str, ...]
    lead: str | None
    level: str
    text: str

    @property
    def leaks(self) -> bool:
        """Leakage was detected through this signal."""
        return self.level == "leak"


#: how the verdict chooses the attack whose numbers it states, in the report's words
LEAD_RULE = (
    "The attack each statement names (the lead attack) is " + RANKING_RULE + "; the other attacks' detections are "
    "listed by name."
)


def lead_attack(group: Iterable[AttackAssessment]) -> AttackAssessment | None:
    """The lead attack of ``group``: the first of a fixed order (:func:`~recourse_privacy.metrics.exposure.preferred_attack`).

    Reads the attacks' names and signals only: the one of best AUC or TPR would be chosen with the
    targets' membership labels, and its numbers would be optimistic (the winner's curse). None when empty.
    """
    by_name = {a.name: a for a in group}
    name = preferred_attack({n: a.signal for n, a in by_name.items()})
    return None if name is None else by_name[name]


def _numbers(a: AttackAssessment, achieved: Mapping[str, float | None]) -> str:
    """An attack's AUC and TPR at 1% FPR with their intervals, in words."""
    return f"{_auc_txt(a)}" + (f" and {_tpr_txt(a, achieved[a.name])}" if a.tpr_low_fpr is not None else "")


def _signal_finding(signal: str, group: list[AttackAssessment], achieved: Mapping[str, float | None]) -> SignalFinding:
    label = SIGNAL_LABELS.get(signal, signal)
    names = tuple(a.name for a in group)
    if not group:
        return SignalFinding(signal, label, (), (), None, "none", f"{label.capitalize()}: no attack read this signal.")
    detected = [a for a in group if a.significant]
    lead = lead_attack(group)
    what = _numbers(lead, achieved)
    if detected:
        level = "leak"
        text = (
            f"{label.capitalize()}: leakage detected by {len(detected)} of {len(group)} attack(s) "
            f"({', '.join(a.name for a in detected)}). The lead attack, {lead.name}, has {what}"
        )
        if lead.tpr_low_fpr is not None and lead.significant:
            text += (
                f": it identifies {percent(lead.tpr_low_fpr)} of members while wrongly flagging "
                f"{percent(achieved[lead.name]) if achieved[lead.name] is not None else '1%'} of non-members"
            )
        text += "." if lead.significant else "; it does not itself leave chance."
        rev = [a.name for a in detected if a.reversed]
        if rev:
            text += (
                " An AUC significantly below 0.5 (" + ", ".join(rev) + ") is also leakage: membership is "
                "revealed, but in the direction opposite to that attack's convention."
            )
    elif any(a.significant is None for a in group):
        level = "undetermined"
        text = f"{label.capitalize()}: could not be fully assessed; the lead attack, {lead.name}, has {what}."
    else:
        level = "noleak"
        text = f"{label.capitalize()}: no measurable leakage. The lead attack, {lead.name}, has {what}"
        outs = []
        if lead.auc_ci is not None:
            outs.append(f"an AUC above {format(lead.auc_ci[1], '.3f')}")
        if lead.tpr_ci is not None:
            outs.append(f"a TPR above {percent(lead.tpr_ci[1])} at that FPR")
        text += f"; these intervals rule out {' and '.join(outs)} for it (95%)." if outs else "."
    return SignalFinding(signal, label, names, tuple(a.name for a in detected), lead.name, level, text)


@dataclass(frozen=True)
class BeyondFinding:
    """The analyst's question: does recourse leak membership beyond what the model's scores already leak?

    ``outcome``: "beyond" (recourse adds measurable leakage), "not-beyond" (recourse leaks, but not
    measurably more than the scores), "no-recourse-leak", "no-score-attack" (recourse leaks; no score
    attack to compare with), "no-recourse-attack" or "unknown" (no paired comparison recorded).
    ``attack`` is the distance attack behind the statement, ``versus`` the score attack it is set
    against; ``auc_difference`` and ``ci`` their paired AUC difference and its interval; ``by`` says
    which rule decided ("auc", "tpr" or "").
    """

    outcome: str
    text: str
    attack: str | None = None
    versus: str | None = None
    auc_difference: float | None = None
    ci: tuple[float, float] | None = None
    by: str = ""

    @property
    def beyond(self) -> bool:
        """Recourse adds measurable leakage beyond the model's scores."""
        return self.outcome == "beyond"


def _diff_txt(v: Any) -> str:
    """A recorded AUC difference with its interval: "0.080 [0.050, 0.110]"."""
    return f"{format(v.auc_difference, '.3f')} [{format(v.ci_low, '.3f')}, {format(v.ci_high, '.3f')}]"


def _versus_finding(outcome: str, text: str, attack: str, v: Any, by: str = "") -> BeyondFinding:
    """The finding behind a paired AUC comparison ``v`` (an attack's ``versus_scores``)."""
    return BeyondFinding(outcome, text, attack, v.attack, v.auc_difference, (v.ci_low, v.ci_high), by)


def _beyond(
    attacks: Mapping[str, AttackResult],
    scores: SignalFinding,
    recourse: SignalFinding,
    assessed: Mapping[str, AttackAssessment],
) -> BeyondFinding:
    if not recourse.attacks:
        return BeyondFinding("no-recourse-attack", "No attack read the recourse, so what it adds was not measured.")
    if not recourse.leaks:
        return BeyondFinding(
            "no-recourse-leak", "Recourse adds no measurable leakage: no attack reading the counterfactuals detects it."
        )
    if not scores.attacks:
        return BeyondFinding(
            "no-score-attack",
            f"Recourse leaks ({', '.join(recourse.detected)}), but no attack read the model's scores, so whether it "
            "leaks beyond them was not measured.",
            attack=recourse.lead,
        )
    # one comparison, fixed before any score was seen: the lead recourse attack against the lead score attack
    # (recorded at audit time), never the recourse attack whose comparison came out best on these targets
    a = assessed[recourse.lead]
    v = attacks[a.name].versus_scores
    if a.reversed:
        return BeyondFinding("unknown", _no_paired_text(recourse, a, v), attack=a.name)
    paired = v is not None and finite_float(v.ci_low) is not None and finite_float(v.ci_high) is not None
    # rule (a): the paired interval of AUC(lead recourse attack) - AUC(lead score attack) lies above 0
    if a.significant and paired and v.ci_low > 0:
        text = (
            f"Recourse leaks beyond the model's scores: {a.name}'s AUC exceeds that of {v.attack}, {_choice(v)}, "
            f"by {_diff_txt(v)} (paired bootstrap on the same targets, 95%)."
        )
        return _versus_finding("beyond", text, a.name, v, "auc")
    # rule (b): at 1% FPR, the lead recourse attack's TPR interval lies above every score attack's
    score_tprs = [assessed[n] for n in scores.attacks if assessed[n].tpr_ci is not None]
    if a.significant and a.tpr_ci is not None and score_tprs and len(score_tprs) == len(scores.attacks):
        top = max(score_tprs, key=lambda s: s.tpr_ci[1])  # the highest upper end: the comparison every one passes
        if a.tpr_ci[0] > top.tpr_ci[1]:
            return BeyondFinding(
                "beyond",
                f"Recourse leaks beyond the model's scores at low FPR: at FPR ≤ 1%, {a.name} identifies "
                f"{percent(a.tpr_low_fpr)} [{percent(a.tpr_ci[0])}, {percent(a.tpr_ci[1])}] of members, more than any score "
                f"attack could there ({top.name}: at most {percent(top.tpr_ci[1])}, 95%).",
                a.name,
                top.name,
                by="tpr",
            )
    if not paired:
        return BeyondFinding("unknown", _no_paired_text(recourse, a, v), attack=a.name)
    quiet = "" if a.significant else f" (the lead recourse attack {a.name} does not itself leave chance)"
    text = (
        f"Recourse leaks, but not measurably more than the model's scores{quiet}: {a.name}'s AUC "
        f"minus that of {v.attack}, {_choice(v)}, is {_diff_txt(v)} (paired bootstrap, 95%): "
        + (
            f"it beats that score attack by at most {format(v.ci_high, '.3f')} AUC."
            if round(v.ci_high, 3) > 0
            else "that score attack is at least as strong."
        )
    )
    return _versus_finding("not-beyond", text, a.name, v)


def _choice(v: Any) -> str:
    """How the score attack of a recorded comparison was chosen ("" in files of schema 1 reads as the old rule)."""
    return str(getattr(v, "choice_text", "") or "")


def _no_paired_text(recourse: SignalFinding, lead: AttackAssessment, v: Any) -> str:
    """Why no paired comparison with the scores decides "beyond": say which case, never guess the schema."""
    if lead.reversed:  # the lead attack scores members the wrong way round (AUC significantly below 0.5)
        return (
            f"Recourse's lead attack, {lead.name}, leaves chance only reversed (AUC below 0.5, members scored as "
            "non-members), so no paired comparison with the model's scores applies and whether recourse leaks "
            "beyond them is not known."
        )
    if v is not None:
        return (
            f"Recourse leaks ({', '.join(recourse.detected)}), but the paired comparison of its lead attack, "
            f"{lead.name}, with the model's scores is undefined (no finite bootstrap interval), so whether it leaks "
            "beyond them is not known."
        )
    return (
        f"Recourse leaks ({', '.join(recourse.detected)}), but this file records no paired comparison of its lead "
        f"attack, {lead.name}, with the model's scores, so whether it leaks beyond them is not known."
    )


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Verdict:
    """The plain-words verdict of an audit.

    ``level`` is "leak" (some attack leaves chance: its AUC interval excludes 0.5, or its TPR at 1%
    FPR lies above the FPR's interval), "noleak", "undetermined" (sample sizes missing) or "none"
    (no attack with an AUC). ``attack`` names the lead attack behind the headline (the lead recourse
    attack where the headline is about recourse, the lead score attack where it is about the scores,
    else the first of the fixed order; :func:`lead_attack`, never the attack of best AUC or TPR on the
    targets; controls, the attacks of signal "none", are not counted), and ``auc`` etc. are its numbers;
    ``explanation`` is its plain-text reasoning, one sentence per item. ``assessments`` has every
    attack, controls included.

    The analyst's question is answered in three parts: ``scores`` (what the model's own scores
    leak: the attacks of signal "score"), ``recourse`` (what the attacks reading the counterfactuals
    detect: signal "distance") and ``beyond`` (does recourse leak beyond the scores; see
    :func:`make_verdict` for the rule). ``detectable`` says what this sample size can detect, and
    ``family_wise`` which attacks still leave chance when all are tested together, both arms of each (Holm 1979).
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
    scores: SignalFinding | None = None
    recourse: SignalFinding | None = None
    beyond: BeyondFinding | None = None
    detectable: Detectable | None = None
    family_wise: FamilyWise | None = None
    few_answers: bool = False  # recourse answered under FEW_ANSWERS of the targets (verdict_of): no all-clear colour
    not_run: str = ""  # the attacks asked for that could not run, with their reasons (verdict_of)

    def __post_init__(self) -> None:
        object.__setattr__(self, "explanation", tuple(self.explanation))
        object.__setattr__(self, "assessments", MappingProxyType(dict(self.assessments)))

    @property
    def incomplete(self) -> bool:
        """An attack asked for could not run: the report gives no all-clear colour."""
        return bool(self.not_run)

    @property
    def leakage(self) -> bool:
        """Leakage was detected."""
        return self.level == "leak"

    @property
    def text(self) -> str:
        """Headline and explanation as one paragraph of plain text."""
        return " ".join((self.headline, *self.explanation))


def _headline(level: str, scores: SignalFinding, recourse: SignalFinding, beyond: BeyondFinding) -> str:
    if beyond.outcome == "beyond":
        return "Recourse leaks membership beyond what the model's scores already leak."
    if beyond.outcome == "not-beyond":
        return "Recourse leaks membership, but not measurably more than the model's own scores."
    if beyond.outcome in ("no-score-attack", "unknown"):
        return "Recourse leaks membership."
    if scores.leaks:
        return "The model's scores leak membership; recourse adds no measurable leakage." + (
            "" if recourse.attacks else " (Recourse was not attacked.)"
        )
    if level == "leak":
        return "Leakage detected."
    if level == "undetermined":
        return "Leakage could not be fully assessed."
    return "No measurable leakage."


def make_verdict(attacks: Mapping[str, AttackResult], dp: DPSummary | None = None) -> Verdict:
    """The verdict of the attacks ``attacks`` (name -> AttackResult), with the DP defense ``dp`` if any.

    An attack detects leakage when its AUC's 95% interval excludes 0.5 (below counts too: the
    membership is revealed in the opposite direction; without an interval, when the AUC lies
    outside 0.5 ± the Mann-Whitney null half-width) or when its TPR's Clopper-Pearson interval at
    1% FPR lies above the interval of the FPR its threshold reached (each a 5% test).

    The attacks are split by the signal they read (:func:`signal_of`): the model's own scores
    ("score": loss, loss-lrt ...) and the recourse ("distance": cfd, cfd-lrt ...); "none" attacks
    are controls, shown but not counted. The headline answers whether recourse leaks membership
    *beyond* the scores, by this rule: recourse adds measurable leakage when some distance attack
    detects leakage (above chance) AND either (a) the paired bootstrap interval of its AUC minus the
    AUC of the lead score attack (recorded at audit time as ``versus_scores``, the same
    resampled targets for both) lies above 0, or (b) at 1% FPR the lower end of its TPR's interval
    exceeds the upper end of every score attack's. The recourse attack is the lead one (the first of a
    fixed order that ran, :func:`lead_attack`) and the score attack the lead score attack, so the
    comparison is fixed before any score is seen: never the pair that came out best on these targets.
    Both are comparisons of single attacks: a
    recourse attack weaker than the score attacks whose information is complementary is not
    detected as "beyond". Each statement names the attack behind it; the explanation ends with what
    the sample size can detect (:func:`detectable_effects`) and the DP bound of a defense.
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
    src = {str(n): a for n, a in attacks.items()}
    achieved = {n: finite_float(a.achieved_fpr.get(LOW_FPR)) for n, a in src.items()}

    if sig:
        level = "leak"
    elif unknown:
        level = "undetermined"
    else:
        level = "noleak"
    scores = _signal_finding("score", [a for a in candidates if a.signal == "score"], achieved)
    recourse = _signal_finding("distance", [a for a in candidates if a.signal == "distance"], achieved)
    beyond = _beyond(src, scores, recourse, assessed)
    head = _headline(level, scores, recourse, beyond)
    best = _headline_attack(candidates, scores, recourse, beyond)

    parts: list[str] = [scores.text, recourse.text, beyond.text]
    parts += _other_signals([a for a in candidates if a.signal not in SIGNAL_LABELS])
    rel = tpr_reliable(src[best.name], LOW_FPR)
    caveats, detectable, fw = _caveats(best, rel, candidates, unknown, controls)
    parts += caveats + [LEAD_RULE] + (_dp_texts(dp, comparison) if dp is not None else [])
    hws = [a.halfwidth for a in candidates if a.halfwidth is not None]
    band = max(hws) if hws else None
    t01, ach = best.tpr_low_fpr, achieved[best.name]
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
        scores=scores,
        recourse=recourse,
        beyond=beyond,
        detectable=detectable,
        family_wise=fw,
    )


def _headline_attack(
    candidates: list[AttackAssessment], scores: SignalFinding, recourse: SignalFinding, beyond: BeyondFinding
) -> AttackAssessment:
    """The lead attack behind the headline: recourse's where it speaks of recourse, the scores' where of them."""
    by_name = {a.name: a for a in candidates}
    if beyond.outcome in ("beyond", "not-beyond", "no-score-attack", "unknown") and recourse.lead is not None:
        return by_name[recourse.lead]
    if scores.leaks and scores.lead is not None:
        return by_name[scores.lead]
    return lead_attack(candidates)


def _other_signals(other: list[AttackAssessment]) -> list[str]:
    """The sentence on attacks of no recorded signal (counted in the overall level only)."""
    if not other:
        return []
    return [
        "Attacks of no recorded signal ("
        + ", ".join(a.name for a in other)
        + ") count in the overall level only"
        + (
            ": " + ", ".join(a.name for a in other if a.significant) + " detect(s) leakage."
            if any(a.significant for a in other)
            else "."
        )
    ]


def _caveats(
    best: AttackAssessment,
    rel: bool | None,
    candidates: list[AttackAssessment],
    unknown: list[AttackAssessment],
    controls: list[AttackAssessment],
) -> tuple[list[str], Detectable | None, FamilyWise | None]:
    """What chance gives, what the sample size can detect, multiple testing, missing sizes and the controls."""
    parts = []
    chance = "Random guessing gives AUC 0.5 and TPR = FPR (1% at FPR 1%)."
    if rel is False:
        chance += (
            f" TPR at 1% FPR is unreliable here: only {best.n_nonmembers} non-members, at least 100 are needed "
            "to resolve a 1% FPR."
        )
    parts.append(chance)
    n1, n0 = best.n_members, best.n_nonmembers
    detectable = detectable_effects(n1, n0) if best.sizes_known else None
    if detectable is not None:
        parts.append(detectable.text)
    fw = family_wise(candidates)
    if fw is not None:
        parts.append(fw.text)
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
    return parts, detectable, fw


def _dp_texts(dp: DPSummary, comparison: BoundComparison | None) -> list[str]:
    """The DP defense's sentence: the audit's own verdict where recorded, else the attacks beside the bound."""
    dpv = dp.verdict
    if dpv is not None:  # the audit's own worst case over the attacks the claim covers, against the tight bound
        rows = {r.key: r for r in dp_bound_rows(dp)}
        paper = rows.get("theorem2")
        paper_txt = f"; {paper.text} would allow more" if paper is not None else ""
        bound_txt = rows["verdict"].text if "verdict" in rows else f"the tight bound {format(dpv.ba_bound, '.4f')}"
        return [
            f"Under the {dp.defense} defense, the worst case over the {len(dpv.covered)} attack(s) the DP claim "
            f"covers is {dpv.attack} (balanced accuracy {format(dpv.balanced_accuracy, '.4f')}, 95% lower confidence "
            f"bound {format(dpv.ba_lower_confidence, '.4f')}), against the {bound_txt} (ε twice the claim because "
            f"the targets are the rejected points){paper_txt}: "
            + (
                "the claim is refuted for this release."
                if dpv.exceeds
                else "consistent with the claim, which is not a proof of privacy."
            )
        ]
    if comparison is None or comparison.bound is None or comparison.vacuous:
        return []
    defense = f"the {comparison.defense} defense" if comparison.defense else "the DP defense"
    if comparison.exceeded:
        return [
            f"Under {defense}, "
            + ", ".join(comparison.exceeded)
            + f" exceed(s) the DP bound of {format(comparison.bound, '.4f')} on balanced accuracy "
            "(the tight form of Theorem 2 of Pawelczyk et al. 2023): see the differential-privacy "
            "section."
        ]
    if any(c.status == "within" for c in comparison.checks):
        return [
            f"Under {defense}, every attack's balanced accuracy is within Theorem 2's bound of "
            f"{format(comparison.bound, '.4f')} (Pawelczyk et al. 2023)."
        ]
    return []


#: below this share of targets answered validly, the verdict says how little recourse was given
FEW_ANSWERS = 0.5


def verdict_of(result: AuditRecord) -> Verdict:
    """The verdict of an audit result (its attacks and, if any, its DP defense). Where recourse answered fewer
    than :data:`FEW_ANSWERS` of the targets validly, the headline and the recourse finding say so first: a
    method that gives no recourse reveals nothing through it, and helps no applicant either. An attack asked for
    that could not run (``attacks_not_run``) is named, with its reason, after the findings, and the verdict
    loses its all-clear colour (:attr:`Verdict.incomplete`)."""
    verdict = _with_few_answers(make_verdict(result.attacks, result.dp), result.recourse)
    not_run = dict(result.attacks_not_run)
    if not not_run:
        return verdict
    said = " ".join(f"{name}, asked for, was not run: {why}." for name, why in not_run.items())
    note = f"{said} What this verdict says rests on the attacks that ran."
    return replace(verdict, explanation=(*verdict.explanation, note), not_run=note)


def _with_few_answers(verdict: Verdict, rec: RecourseSummary | None) -> Verdict:
    """``verdict`` with the note that recourse answered few targets, where it did (:func:`verdict_of`)."""
    if rec is None or not rec.n or rec.validity >= FEW_ANSWERS or verdict.recourse is None:
        return verdict
    note = (
        f"Recourse ({rec.method}) answered only {percent(rec.validity)} of the {rec.n} targets with a counterfactual "
        "the model accepts: where it gives no valid answer it reveals nothing through recourse, and helps no "
        "applicant either; what follows about recourse covers the answers it gave."
    )
    finding = replace(verdict.recourse, text=note + " " + verdict.recourse.text)
    headline = f"{verdict.headline.rstrip('.')} (recourse answered only {percent(rec.validity)} of the targets)."
    explanation = tuple(finding.text if p == verdict.recourse.text else p for p in verdict.explanation)
    return replace(verdict, headline=headline, recourse=finding, explanation=explanation, few_answers=True)
