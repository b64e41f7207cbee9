"""The numbers of a DP verdict, in one place: every bound a claim implies, and the attacks set beside it.

:func:`dp_bounds` computes, once, at audit time, the bounds on balanced accuracy (BA) that an
(epsilon, delta)-DP claim implies; :func:`dp_bound_rows` names each of them (:class:`DPBound`:
its formula, the epsilon and delta it is evaluated at, its value, the attacks it is compared
with); :func:`compare_with_bound` sets the attacks the claim covers beside the verdict's bound.
The terminal and the HTML report only render these objects, so they cannot disagree. Plain
text here (Unicode, no markup).

The bounds: the tight bound of the hypothesis-testing region of DP (Kairouz, Oh and Viswanath
2015), e^eps / (1 + e^eps) at delta = 0, and Theorem 2 of Pawelczyk et al. (2023),
1/2 + (1 - e^-eps)/2, looser. The verdict's bound is the tight one at the epsilon of the
*selected* targets (the points the model rejects: conditioning on that decision doubles epsilon,
:func:`~recourse_privacy.metrics.selected_target_privacy`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from recourse_privacy.defenses.accounting import dp_ba_bound
from recourse_privacy.metrics.membership import selected_target_privacy, theorem2_bound, tight_ba_bound
from recourse_privacy.results.summaries import AttackResult, DPSummary

__all__ = [
    "SELECTION",
    "BoundCheck",
    "BoundComparison",
    "DPBound",
    "ba_lower_confidence",
    "compare_with_bound",
    "dp_bound_rows",
    "dp_bounds",
]

#: a bound at or above this rules nothing out
VACUOUS = 0.9995

SELECTION = (
    "the targets are the points the owner's model rejects, and every BA is measured on them only. "
    "Conditioning an (eps, delta)-DP release on an event that the release itself decides (the model's "
    "rejection) can multiply the likelihood ratio by up to e^eps, so the bound that covers the measured "
    "BA is the tight bound at selected_epsilon = 2 eps (for delta > 0: 2 eps + log(p/(p - delta)) and "
    "selected_delta = delta e^eps/(p - delta), p the rejected share); ba_bound_tight is the bound for an "
    "attacker scored on every point (the rejection being part of the release)"
)


def dp_bounds(epsilon: float, delta: float, selected_share: float) -> dict:
    """The DPSummary bound fields for an (epsilon, delta)-DP claim measured on the selected (rejected) targets."""
    eps_sel, delta_sel = selected_target_privacy(epsilon, delta, selected_share)
    return {
        "ba_bound": tight_ba_bound(eps_sel, delta_sel),
        "ba_bound_paper": dp_ba_bound(epsilon, delta),
        "ba_bound_tight": tight_ba_bound(epsilon, delta),
        "selected_epsilon": eps_sel,
        "selected_delta": delta_sel,
        "selection": SELECTION,
    }


def ba_lower_confidence(result: AttackResult, alpha: float) -> float:
    """A 1 - ``alpha`` lower confidence bound on an attack's true best-threshold BA.

    The measured BA is a maximum over thresholds of (TPR - FPR + 1)/2, biased upwards on finite
    samples (a random score reaches 0.53-0.54 on a thousand targets). By the two-sample
    Kolmogorov-Smirnov (DKW) inequality, sup |(F0 - F1) - (F0 - F1)_true| <= c sqrt((n1 + n0)/(n1 n0))
    with probability 1 - alpha for c = sqrt(ln(2/alpha)/2), so the true BA is at least the measured
    one minus half of that.
    """
    n1, n0 = result.n_members, result.n_nonmembers
    c = float(np.sqrt(np.log(2.0 / alpha) / 2.0))
    return result.balanced_accuracy - c * float(np.sqrt((n1 + n0) / (n1 * n0))) / 2.0


# --------------------------------------------------------------------------- the named bounds


@dataclass(frozen=True)
class DPBound:
    """One bound on balanced accuracy implied by a DP claim.

    ``key`` is "verdict" (the bound the verdict compares the covered attacks with), "tight" or
    "theorem2"; ``applies_to`` names the attacks compared with it (the verdict's only).
    """

    key: str
    name: str
    formula: str
    epsilon: float
    delta: float
    value: float
    applies_to: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """One line, the same in the terminal and the HTML report."""
        d = f", δ = {self.delta:.3g}" if self.delta else ""
        return f"{self.name}: {self.formula} at ε = {self.epsilon:.4g}{d} = {self.value:.4f}"


def _tight_formula(delta: float) -> str:
    return "e^ε/(1 + e^ε)" if not delta else "1/2 + δ/2 + (1 − δ)(e^ε − 1)/(2(e^ε + 1))"


def _theorem2_formula(delta: float) -> str:
    return "1/2 + (1 − e^−ε)/2" + (" + δ e^−ε/2" if delta else "")


def _float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def dp_bound_rows(dp: DPSummary) -> tuple[DPBound, ...]:
    """Every bound recorded in ``dp``, named, the verdict's first; () for a summary without them (schema 1)."""
    eps_sel, bound = _float(dp.selected_epsilon), _float(dp.ba_bound)
    eps, delta = _float(dp.bound_epsilon), _float(dp.delta) or 0.0
    if eps_sel is None or bound is None:
        return ()
    verdict = dp.verdict
    covered = verdict.covered if verdict is not None else ()
    delta_sel = _float(dp.selected_delta) or 0.0
    rows = [
        DPBound("verdict", "tight bound on the rejected targets (the verdict's)", _tight_formula(delta_sel), eps_sel,
                delta_sel, bound, covered),
    ]  # fmt: skip
    tight, paper = _float(dp.ba_bound_tight), _float(dp.ba_bound_paper)
    if eps is not None and tight is not None:
        rows.append(DPBound("tight", "tight bound on every point", _tight_formula(delta), eps, delta, tight))
    if eps is not None and paper is not None:
        rows.append(
            DPBound("theorem2", "Theorem 2 of Pawelczyk et al. (2023)", _theorem2_formula(delta), eps, delta, paper)
        )
    return tuple(rows)


# --------------------------------------------------------------------------- attacks beside the bound


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
    """The attacks a DP claim covers against the bound the verdict uses.

    ``bound`` is the verdict's bound (``row``, named with its formula and epsilon, when the audit
    recorded it; else Theorem 2 of Pawelczyk et al. 2023, computed from ε per query or in total,
    as ``source`` says); ``total_bound`` is Theorem 2 at the total ε of every recourse released
    (basic composition) when it differs. ``checks`` has one row per covered attack;
    ``not_covered`` names the attacks whose signal the claim does not protect (not compared);
    ``direction_check`` is the Laplace Recourse direction attack, which the guarantee does not cover.
    """

    defense: str
    bound: float | None
    source: str
    epsilon_per_query: float | None
    epsilon_total: float | None
    total_bound: float | None
    checks: tuple[BoundCheck, ...] = ()
    direction_check: BoundCheck | None = None
    row: DPBound | None = None
    not_covered: tuple[str, ...] = ()

    @property
    def vacuous(self) -> bool:
        """The bound is (close to) 1: it rules nothing out."""
        return self.bound is not None and self.bound >= VACUOUS

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


def _fallback_bound(dp: DPSummary, eps_q: float | None, eps_t: float | None) -> tuple[float | None, str]:
    """The bound of a summary that names none (files of schema 1): as reported, else Theorem 2 at ε."""
    bound = _float(dp.ba_bound)
    bq, bt = _bound_of(eps_q), _bound_of(eps_t)
    if bound is None:
        if bq is not None:
            return bq, f"computed from ε per query = {eps_q:.4g}"
        if bt is not None:
            return bt, f"computed from total ε = {eps_t:.4g}"
        return None, "no valid ε was reported"
    if bq is not None and abs(bq - bound) < 1e-6:
        return bound, f"from ε per query = {eps_q:.4g}"
    if bt is not None and abs(bt - bound) < 1e-6:
        return bound, f"from total ε = {eps_t:.4g}"
    return bound, "as reported by the audit"


def compare_with_bound(dp: DPSummary, attacks: Iterable[AttackResult]) -> BoundComparison:
    """Set the balanced accuracy of each attack the claim of ``dp`` covers beside the verdict's bound.

    With the bounds the audit records (:func:`dp_bound_rows`), the bound is the verdict's and the
    attacks are those its claim covers (``dp.verdict.covered``): e.g. Laplace Recourse protects
    the released recourse, not the model's scores, so the loss attacks are listed as not covered.
    A summary without them is compared as before (every attack, Theorem 2). An attack is "above"
    when its BA exceeds a non-vacuous bound (the measured BA is a maximum over thresholds and
    noisy, so a small excess is expected now and then; a large one suggests the guarantee fails).
    """
    eps_q = _float(dp.epsilon_per_query)
    eps_t = _float(dp.epsilon_total)
    rows = dp_bound_rows(dp)
    row = rows[0] if rows else None
    attacks = list(attacks)
    not_covered: tuple[str, ...] = ()
    if row is not None:
        bound, source = row.value, row.text
        verdict = dp.verdict
        if verdict is not None:
            covered = set(row.applies_to)
            not_covered = tuple(str(a.name) for a in attacks if str(a.name) not in covered)
            attacks = [a for a in attacks if str(a.name) in covered]
    else:
        bound, source = _fallback_bound(dp, eps_q, eps_t)
    bt = _bound_of(eps_t)
    total_bound = bt if bt is not None and bound is not None and abs(bt - bound) > 1e-6 else None
    defense = str(dp.defense or "")
    if bound is None:
        return BoundComparison(defense, None, source, eps_q, eps_t, None)
    vacuous = bound >= VACUOUS
    checks = tuple(_check(str(a.name), _float(a.balanced_accuracy), bound, vacuous) for a in attacks)
    da = dp.direction_attack
    direction = (
        _check("direction (released move direction)", _float(da.balanced_accuracy), bound, vacuous)
        if da is not None
        else None
    )
    return BoundComparison(
        defense, bound, source, eps_q, eps_t, total_bound, checks, direction, row=row, not_covered=not_covered
    )
