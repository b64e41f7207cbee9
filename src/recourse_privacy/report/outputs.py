"""Write an audit's files: metrics.json, the log-log ROC, the distance histogram and the HTML report."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from recourse_privacy import strict_json
from recourse_privacy.dp_audit.defense_audit import DPAuditEvidence
from recourse_privacy.metrics.plots import plot_roc_loglog, plot_score_histogram
from recourse_privacy.report.counterfactuals import write_counterfactuals
from recourse_privacy.report.exposure import write_exposure
from recourse_privacy.report.html import audit_label, write_html_report
from recourse_privacy.report.threats import write_threat_outputs
from recourse_privacy.results.audit import AuditRecord

__all__ = ["write_metrics_json", "write_outputs"]


def write_metrics_json(result: AuditRecord, path: str | Path, *, dp_audit: DPAuditEvidence | None = None) -> Path:
    """Write ``result.to_dict()`` to ``path`` atomically (a temporary file renamed into place).

    ``dp_audit`` (``audit --dp-audit``) is written as the block ``dp_audit``: the mechanism audited, the claim,
    every method's lower bound and the verdict, so that a script reading the JSON sees what the report shows."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    record = result.to_dict()
    if dp_audit is not None:
        record["dp_audit"] = dp_audit.to_dict()
    tmp.write_text(strict_json.dumps(record, indent=2))
    tmp.replace(path)
    return path


def write_outputs(
    result: AuditRecord, out_dir: str | Path, *, dp_audit: DPAuditEvidence | None = None
) -> Mapping[str, str]:
    """Write metrics.json, roc.png, cfd_histogram.png, report.html, exposure.csv, (with group columns)
    groups.csv and (a user's data) counterfactuals.csv into ``out_dir``; return their paths.

    ``dp_audit``: the empirical audit of the defense's mechanism (``audit --dp-audit``), shown in the report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = result.config
    title = audit_label(result)
    member = result.is_member == 1
    # first: a failing plot cannot lose the numbers
    metrics = write_metrics_json(result, out / "metrics.json", dp_audit=dp_audit)
    files = {
        "roc": plot_roc_loglog(
            {n: (result.is_member, s.scores) for n, s in result.scores.items()}, out / "roc.png", title=title
        ),
        "cfd_histogram": plot_score_histogram(
            result.cfd[member],
            result.cfd[~member],
            out / "cfd_histogram.png",
            xlabel=f"counterfactual distance ({cfg.distance})",
            title=title,
        ),
        "metrics": metrics,
    }
    threat_files = write_threat_outputs(result.threats, out, title)
    files.update(threat_files)
    table = result.arrays.counterfactuals if result.arrays is not None else None
    if table is not None:
        files.update(write_counterfactuals(table, out))
    files.update(write_exposure(result, out))
    files["report"] = write_html_report(
        result,
        out,
        images={
            "Log-log ROC of every attack against random guessing": files["roc"],
            "Counterfactual distances of members and non-members": files["cfd_histogram"],
            **{
                caption: threat_files[key]
                for key, caption in (
                    ("extraction_plot", "Fidelity of extracted copies against queries (95% interval over repeats)"),
                    ("queries_plot", "Membership attacks: TPR at FPR 1% against owner queries per target"),
                )
                if key in threat_files
            },
        },
        dp_audit=dp_audit,
    )
    return {k: str(v) for k, v in files.items()}
