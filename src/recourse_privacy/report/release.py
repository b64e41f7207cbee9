"""The release threat in an audit's outputs: release.csv, the report's section and the CLI's table.

Renders a :class:`~recourse_privacy.attacks.release_report.ReleaseSummary` and computes nothing; copied
training records are named by their row id only, never by their values.
"""

from __future__ import annotations

from pathlib import Path

from recourse_privacy.attacks.release_report import ReleaseSummary
from recourse_privacy.report.markup import escape as _e

__all__ = ["CSV_COLUMNS", "release_section", "release_table", "write_release_csv"]

#: release.csv's columns, in order (the issue's eight, then the TPR's interval)
CSV_COLUMNS = (
    "method",
    "attack",
    "auc",
    "auc_low",
    "auc_high",
    "tpr_at_1pct_fpr",
    "exact_copies",
    "copied_members",
    "tpr_low",
    "tpr_high",
    "tied_share",
)
#: copied row ids shown in the report (all of them are in metrics.json)
MAX_IDS_SHOWN = 50


def write_release_csv(summary: ReleaseSummary, out_dir: str | Path) -> Path:
    """release.csv: one row per released-set attack."""
    import pandas as pd

    out = Path(out_dir)
    frame = pd.DataFrame([r.to_dict() for r in summary.rows], columns=list(CSV_COLUMNS))
    tmp = out / "release.csv.tmp"
    frame.to_csv(tmp, index=False)
    tmp.replace(out / "release.csv")
    return out / "release.csv"


def _ids(summary: ReleaseSummary) -> str:
    ids = summary.copied_row_ids
    shown = ", ".join(str(i) for i in ids[:MAX_IDS_SHOWN])
    return shown + (f" &hellip; ({len(ids) - MAX_IDS_SHOWN} more in metrics.json)" if len(ids) > MAX_IDS_SHOWN else "")


def _power(row) -> str:
    note = row.power_note()
    if not note:
        return ""
    return f"<br><strong>{_e(note)}</strong>" if row.no_power else f'<br><span class="small">{_e(note)}</span>'


def release_section(summary: ReleaseSummary | None, queries=()) -> str:
    """HTML: the released-set attacks beside the query attacks (``queries``: QueryPoints) for the same method."""
    if summary is None:
        return ""
    parts = [
        "<h3>A published set of counterfactuals (no queries)</h3>",
        f"<p>{_e(summary.method)} answered {_e(summary.applicants)}; {summary.n_published} valid counterfactuals "
        f"were published{' with their factuals' if summary.with_factuals else ''}. The adversary holds them and its "
        "own pool as the reference, and never queries the model.</p>",
    ]
    warning = summary.warning()
    if warning:
        parts.append(
            f'<p class="warning"><strong>Warning:</strong> {_e(warning)}. Copied rows (ids): {_ids(summary)}.</p>'
        )
    rows = [
        f"<tr><td>released set</td><td>{_e(r.attack)}</td><td>0</td><td>{r.auc:.3f} [{r.auc_low:.3f}, {r.auc_high:.3f}]"
        f"{_power(r)}</td><td>{r.tpr_at_1pct_fpr:.3f} [{r.tpr_low:.3f}, {r.tpr_high:.3f}]</td></tr>"
        for r in summary.rows
    ]
    rows += [
        f"<tr><td>queries ({_e(p.access)})</td><td>{_e(p.attack)}</td><td>{p.queries_per_target:g}</td>"
        f"<td>{p.auc:.3f}</td><td>{p.tpr_at_1pct:.3f} [{p.tpr_low:.3f}, {p.tpr_high:.3f}]</td></tr>"
        for p in queries
        if p.queries_per_target > 0 and p.access != "decisions"
    ]
    parts.append(
        "<table><tr><th>adversary</th><th>attack</th><th>owner queries per target</th><th>AUC (95% interval)</th>"
        f"<th>TPR at FPR 1%</th></tr>{''.join(rows)}</table>"
    )
    parts.append(
        f'<p class="small">exact copies: {summary.exact_copies} released counterfactuals equal a training row; '
        f"{summary.copied_members} targets among the copied rows.</p>"
    )
    if summary.anonymeter:
        risk_rows = "".join(
            f"<tr><td>{_e(a.risk)}</td><td>{a.value:.3f} [{a.low:.3f}, {a.high:.3f}]</td><td>{a.n_attacks}</td>"
            f"<td>{_e(a.detail)}</td></tr>"
            for a in summary.anonymeter
        )
        parts.append(
            "<p><strong>Anonymeter</strong> (Giomi et al. 2023): the released set as synthetic data, the training "
            "rows as original, the non-members as control.</p><table><tr><th>risk</th><th>value (95% interval)</th>"
            f"<th>attacks</th><th>detail</th></tr>{risk_rows}</table>"
        )
    notes = [n for n in (summary.anonymeter_note, *summary.notes) if n]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return "\n".join(parts)


def release_table(summary: ReleaseSummary):
    """The CLI's rich table of the released-set attacks."""
    from rich.table import Table

    table = Table(title=f"Released set of {summary.n_published} counterfactuals ({summary.method}): no queries")
    for col in ("attack", "AUC [95%]", "TPR at FPR 1%", "exact copies", "copied members"):
        table.add_column(col, justify="right")
    for r in summary.rows:
        note = r.power_note()
        table.add_row(
            r.attack,
            f"{r.auc:.3f} [{r.auc_low:.3f},\u00a0{r.auc_high:.3f}]" + (f"\n{note}" if note else ""),
            f"{r.tpr_at_1pct_fpr:.3f}",
            str(r.exact_copies),
            str(r.copied_members),
        )
    return table
