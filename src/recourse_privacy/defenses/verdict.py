"""The verdict on a DP claim: the worst attack the claim covers, set against the bound the claim implies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from recourse_privacy.attacks.registry import ATTACKS
from recourse_privacy.report.dp_verdict import ba_lower_confidence
from recourse_privacy.results.summaries import AttackResult, DPSummary, DPVerdict

__all__ = ["dp_verdict"]


def dp_verdict(
    dp: DPSummary, attacks: Mapping[str, AttackResult], covered_signals: tuple[str, ...], *, alpha: float = 0.05
) -> DPSummary:
    """``dp`` with its verdict: the worst case over the attacks whose signal the claim covers.

    Each covered attack's BA is lowered to its 1 - alpha/K confidence bound (K the number of covered
    attacks: a union bound over them, so picking the largest is no label peek); the claim is refuted
    when the largest of these bounds exceeds ``dp.ba_bound``. The attack named is the one whose bound
    that is (ties: the higher BA, then AUC), so the numbers quoted are all that attack's.
    """
    covered = tuple(n for n in attacks if n in ATTACKS and ATTACKS.get(n).meta.get("signal") in covered_signals)
    if not covered:
        return dp
    bounds = {n: ba_lower_confidence(attacks[n], alpha / len(covered)) for n in covered}
    worst = max(covered, key=lambda n: (bounds[n], attacks[n].balanced_accuracy, attacks[n].auc))
    a = attacks[worst]
    lower = bounds[worst]
    exceeds = bool(lower > dp.ba_bound)
    text = (
        f"worst case over {len(covered)} attack(s) reading {' or '.join(covered_signals)}: {worst}, BA "
        f"{a.balanced_accuracy:.4f} (AUC {a.auc:.4f}; {1 - alpha:g} lower confidence bound {lower:.4f}) "
        f"{'>' if exceeds else '<='} the tight bound {dp.ba_bound:.4f} at selected epsilon "
        f"{dp.selected_epsilon:.4g}: "
        + (
            "the DP claim is refuted for this release"
            if exceeds
            else "consistent with the claim (not a proof of privacy)"
        )
    )
    return replace(
        dp,
        verdict=DPVerdict(
            attack=worst,
            balanced_accuracy=a.balanced_accuracy,
            auc=a.auc,
            tpr_at_fpr_001=a.tpr("0.01"),
            ba_bound=dp.ba_bound,
            exceeds=exceeds,
            covered=covered,
            text=text,
            ba_lower_confidence=lower,
        ),
    )
