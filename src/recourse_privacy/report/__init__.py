"""Self-contained HTML report of a membership-inference audit."""
from __future__ import annotations

from recourse_privacy.report.html import write_html_report

__all__ = ["write_html_report"]
