"""Self-contained HTML report of a membership-inference audit, and the verdict it leads with.

:mod:`~recourse_privacy.report.verdict` computes the verdict's statistics (the AUC band of
random guessing, the strongest attack, the DP bound comparison); :mod:`~recourse_privacy.report.html`
lays out a typed ``AuditResult``; :mod:`~recourse_privacy.report.outputs` writes an audit's files.
"""

from __future__ import annotations

from recourse_privacy.report.html import audit_label, report_title, write_html_report
from recourse_privacy.report.verdict import (
    AttackAssessment,
    BoundCheck,
    BoundComparison,
    Verdict,
    assess_attack,
    compare_with_bound,
    make_verdict,
    verdict_of,
)

__all__ = [
    "AttackAssessment",
    "BoundCheck",
    "BoundComparison",
    "Verdict",
    "assess_attack",
    "audit_label",
    "compare_with_bound",
    "make_verdict",
    "report_title",
    "verdict_of",
    "write_html_report",
]
