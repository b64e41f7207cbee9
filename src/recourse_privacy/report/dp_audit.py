"""The audit report's empirical DP bound: the claim beside the audited lower bounds, each method named.

Renders a :class:`~recourse_privacy.dp_audit.defense_audit.DPAuditEvidence` (``audit --dp-audit``)
as a section of the HTML report: the claimed epsilon, each method's 1 - alpha lower bound
(Clopper-Pearson, Jagielski et al. 2020; one-run, Steinke, Nasr and Jagielski 2023; one-run f-DP,
Mahloujifar, Melis and Chaudhuri 2024) with its assumptions and runs, and the verdict.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # dp_audit shares the report's layer; the section only reads the evidence
    from recourse_privacy.dp_audit.defense_audit import DPAuditEvidence

__all__ = ["dp_audit_html", "number_text"]


def number_text(x: float | None, spec: str = ".3f") -> str:
    """A number as the report and the CLI print it (an epsilon bound: three decimals), "n/a" for None (a bound that
    is not finite at the delta)."""
    return "n/a" if x is None else format(x, spec)


def _control_html(evidence: DPAuditEvidence) -> str:
    """The positive control's sentence: what the same test gives on the known-broken twin, or that none exists."""
    e = html.escape
    c = evidence.control
    if c is None:
        return (
            "<p><strong>Power not measured:</strong> no known-broken twin of this mechanism is registered, so "
            "nothing shows that this test, at these runs, would catch a mechanism that breaks the claim.</p>"
        )
    outcome = (
        "it refutes the claim, so the test has the power to catch that failure here"
        if c.caught
        else "it does not refute the claim either, so a bound below the claim here is no evidence of privacy"
    )
    return (
        f"<p><strong>Positive control:</strong> the same test on <code>{e(c.mechanism)}</code> ({e(c.broken)}) at "
        f"{c.n_trials} runs per neighbour gives &epsilon; &ge; <strong>{number_text(c.epsilon_lower_bound)}</strong> "
        f"({e(c.method)}): {outcome}.</p>"
    )


def _reads(evidence: DPAuditEvidence) -> str:
    """Which bounds the verdict reads: the two without an assumption on the trade-off curve, or (a Gaussian design)
    Clopper-Pearson and the one-run f-DP bound, whose assumption the design meets (its row says why)."""
    if "one_run_fdp" in evidence.decided_by:
        return (
            "The verdict reads the many-run Clopper-Pearson bound and the one-run f-DP bound, each at alpha / 2: this "
            "design's trade-off curve is Gaussian, as the f-DP bound assumes (its row says why)."
        )
    return "The verdict reads the two bounds without an assumption on the trade-off curve, each at alpha / 2."


def dp_audit_html(evidence: DPAuditEvidence | None) -> str:
    """The section's HTML ("" without evidence), then each part's (``evidence.parts``); every string escaped."""
    if evidence is None:
        return ""
    return _evidence_html(evidence) + "".join(_evidence_html(p) for p in evidence.parts)


def _evidence_html(evidence: DPAuditEvidence) -> str:
    """One audited mechanism: the headline, the bounds' table, the control and the source."""
    e = html.escape
    claim = evidence.claimed_epsilon
    rows = "".join(
        f'<tr><td>{e(b.name)}</td><td class="num">{number_text(claim, ".4g")}</td>'
        f'<td class="num"><strong>{number_text(b.epsilon_lower_bound)}</strong></td>'
        f'<td class="num">{number_text(b.mu_lower_bound)}</td><td class="num">{number_text(1 - b.alpha, ".3g")}</td>'
        f"<td>{'decides the verdict' if b.method in evidence.decided_by else 'shown, not deciding'}</td>"
        f"<td>{e(b.runs)}</td><td>{e(b.assumptions)}</td></tr>"
        for b in evidence.bounds
    )
    best = evidence.strongest
    if evidence.role:  # a part of the audit: its own bound and verdict, and why it is audited
        head = (
            f"<h4>Also audited: <code>{e(evidence.mechanism)}</code></h4><p>{e(evidence.role[:1].upper())}"
            f"{e(evidence.role[1:])}. Mechanism: {e(evidence.description)}. Empirical lower bound &epsilon; &ge; "
            f"<strong>{number_text(best.epsilon_lower_bound)}</strong> ({e(best.name)}) at the claim "
            f"{number_text(claim, '.4g')}: <strong>{e(evidence.verdict)}</strong>.</p>"
        )
    else:
        also = f" The verdict is the worst of this test and {len(evidence.parts)} more below." if evidence.parts else ""
        head = (
            "<h3>Empirical audit of the claim</h3>"
            f"<p>{e(evidence.subject)} <strong>{e(evidence.defense)}</strong>, mechanism "
            f"<code>{e(evidence.mechanism)}</code> ({e(evidence.description)}). Claimed &epsilon; = "
            f"<strong>{number_text(claim, '.4g')}</strong> (&delta; = {number_text(evidence.delta, '.3g')}); empirical lower bound "
            f"&epsilon; &ge; <strong>{number_text(best.epsilon_lower_bound)}</strong> ({e(best.name)}): "
            f"<strong>{e(evidence.verdict)}</strong>.{also}</p>"
        )
    return (
        head + "<table><tr><th>method</th><th>claimed &epsilon;</th><th>&epsilon; &ge;</th><th>&mu; &ge;</th>"
        "<th>confidence</th><th>role</th><th>runs</th><th>valid when</th></tr>"
        + rows
        + "</table>"
        + _control_html(evidence)
        + f'<p class="small">{e(evidence.source)}; {evidence.seconds:.0f} s. A bound above the claim refutes it '
        "(at the stated confidence); a bound below it finds nothing wrong, which is not a proof of privacy. "
        + _reads(evidence)
        + "</p>"
    )
