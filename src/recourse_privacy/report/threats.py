"""The threats beyond membership in an audit's outputs: extraction.csv, two figures and the report's section.

Renders a :class:`~recourse_privacy.attacks.threat_report.ThreatReport` and computes nothing: the
sentences come from the typed result (the query caps, what recourse adds over labels alone).
"""

from __future__ import annotations

from pathlib import Path

from recourse_privacy.attacks.threat_report import ThreatReport
from recourse_privacy.report.markup import escape as _e

__all__ = ["plot_extraction", "plot_queries", "threats_section", "write_threat_outputs"]

#: extraction.csv's columns, in order (the issue's six first, then the public domain's)
CSV_COLUMNS = (
    "attack",
    "queries",
    "fidelity",
    "fidelity_low",
    "fidelity_high",
    "accuracy",
    "domain_fidelity",
    "domain_fidelity_low",
    "domain_fidelity_high",
    "n_repeats",
)


def _figure(size=(6.0, 4.0)):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def plot_extraction(report: ThreatReport, path: str | Path, title: str = "") -> Path:
    """Fidelity against queries per surrogate, with the 95% interval over repeats as a band (log x)."""
    from recourse_privacy.metrics.plots import plain_text

    fig = _figure()
    ax = fig.add_subplot()
    names = dict.fromkeys(p.attack for p in report.extraction.points)
    for name in names:
        pts = sorted((p for p in report.extraction.points if p.attack == name), key=lambda p: p.queries)
        q = [p.queries for p in pts]
        line = ax.plot(q, [p.fidelity for p in pts], marker="o", label=name)[0]
        ax.fill_between(
            q, [p.fidelity_low for p in pts], [p.fidelity_high for p in pts], alpha=0.2, color=line.get_color()
        )
    for level in (0.9, 0.95):
        ax.axhline(level, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("queries to the recourse API")
    ax.set_ylabel("fidelity on held-out applicants")
    ax.set_title(plain_text(title or "model extraction from counterfactuals"), fontsize=9)
    ax.legend()
    out = Path(path)
    fig.savefig(out, format="png", dpi=150)
    return out


def plot_queries(report: ThreatReport, path: str | Path, title: str = "") -> Path:
    """TPR at FPR 1% against owner queries per target for the membership attacks (log x), intervals as bars."""
    from recourse_privacy.metrics.plots import plain_text

    fig = _figure()
    ax = fig.add_subplot()
    names = dict.fromkeys(p.attack for p in report.queries if p.queries_per_target > 0)
    for i, name in enumerate(names):
        pts = sorted((p for p in report.queries if p.attack == name), key=lambda p: p.queries_per_target)
        x = [p.queries_per_target for p in pts]
        y = [p.tpr_at_1pct for p in pts]
        err = [
            [v - p.tpr_low for v, p in zip(y, pts, strict=True)],
            [p.tpr_high - v for v, p in zip(y, pts, strict=True)],
        ]
        ax.errorbar(x, y, yerr=err, marker="osD^v<>p"[i % 8], capsize=3, alpha=0.8, label=f"{name} ({pts[0].access})")
    ax.axhline(0.01, color="grey", lw=0.8, ls=":", label="random guessing")
    ax.set_xscale("log")
    ax.set_xlabel("owner queries per target")
    ax.set_ylabel("TPR at FPR 1%")
    ax.set_title(plain_text(title or "membership: what each attack gets for its queries"), fontsize=9)
    ax.legend(fontsize=8)
    out = Path(path)
    fig.savefig(out, format="png", dpi=150)
    return out


def write_threat_outputs(report: ThreatReport | None, out_dir: str | Path, title: str = "") -> dict[str, Path]:
    """extraction.csv and extraction.png (with the extraction threat), queries.png (with a query curve)."""
    import pandas as pd

    if report is None:
        return {}
    out = Path(out_dir)
    files: dict[str, Path] = {}
    if report.extraction is not None:
        frame = pd.DataFrame(report.extraction_rows(), columns=list(CSV_COLUMNS))
        tmp = out / "extraction.csv.tmp"
        frame.to_csv(tmp, index=False)
        tmp.replace(out / "extraction.csv")
        files["extraction_csv"] = out / "extraction.csv"
        files["extraction_plot"] = plot_extraction(report, out / "extraction.png", title)
    if report.release is not None:
        from recourse_privacy.report.release import write_release_csv

        files["release_csv"] = write_release_csv(report.release, out)
    if any(p.queries_per_target > 0 for p in report.queries):
        files["queries_plot"] = plot_queries(report, out / "queries.png", title)
    return files


def _pct(x: float) -> str:
    return "&ndash;" if x != x else f"{x:.1%}"


def threats_section(report: ThreatReport | None) -> str:
    """The report's HTML section on extraction, attribute inference and queries ("" without threats)."""
    if report is None:
        return ""
    parts = ["<h2>Other threats: extraction, attribute inference, queries</h2>"]
    ex = report.extraction
    if ex is not None:
        q90, q95 = ex.queries_for(0.9), ex.queries_for(0.95)
        parts.append(f"<p><strong>Model extraction.</strong> {_e(ex.sentence())}.</p>")
        parts.append(
            "<p>Query cap per client: "
            + (f"90% fidelity is reached after <strong>{q90}</strong> queries" if q90 else "90% is not reached")
            + ", "
            + (f"95% after <strong>{q95}</strong>" if q95 else "95% not reached")
            + f" (the largest budget tried: {ex.budgets[-1]}).</p>"
        )
        rows = "".join(
            f"<tr><td>{_e(p.attack)}</td><td>{p.queries}</td><td>{_pct(p.fidelity)} "
            f"[{_pct(p.fidelity_low)}, {_pct(p.fidelity_high)}]</td><td>{_pct(p.accuracy)}</td>"
            f"<td>{_pct(p.domain_fidelity)} [{_pct(p.domain_fidelity_low)}, {_pct(p.domain_fidelity_high)}]</td></tr>"
            for p in ex.points
        )
        parts.append(
            "<table><tr><th>surrogate</th><th>queries</th><th>fidelity (held-out, 95% interval)</th>"
            f"<th>accuracy</th><th>fidelity on domain samples</th></tr>{rows}</table>"
        )
        conv = "".join(f"<li>{_e(k)}: {_e(v)}</li>" for k, v in ex.conventions.items())
        parts.append(f'<ul class="small">{conv}</ul>')
    if report.attribute is not None:
        parts.append(f"<p><strong>Attribute inference.</strong> {_e(report.attribute.sentence())}.</p>")
        a = report.attribute
        parts.append(
            f'<p class="small">members {_pct(a.member_accuracy)}, non-members {_pct(a.nonmember_accuracy)}; '
            f"label-only baseline (majority value per label) {_pct(a.label_baseline_accuracy)}; balanced accuracy "
            f"{a.balanced_accuracy:.3f}; {a.n_targets} targets; values {_e(', '.join(a.values))}.</p>"
        )
    if report.queries:
        over = report.recourse_over_labels()
        if over:
            parts.append(f"<p><strong>Recourse over labels alone.</strong> {_e(over)}.</p>")
        rows = "".join(
            f"<tr><td>{_e(p.attack)}</td><td>{_e(p.access)}</td><td>{p.queries_per_target:g}</td>"
            f"<td>{p.auc:.3f}</td><td>{p.tpr_at_1pct:.3f} [{p.tpr_low:.3f}, {p.tpr_high:.3f}]</td></tr>"
            for p in report.queries
        )
        parts.append(
            "<table><tr><th>attack</th><th>access</th><th>owner queries per target</th><th>AUC</th>"
            f"<th>TPR at FPR 1%</th></tr>{rows}</table>"
        )
    if report.release is not None:
        from recourse_privacy.report.release import release_section

        parts.append(release_section(report.release, report.queries))
    if report.notes:
        parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes) + "</ul>")
    return "\n".join(parts)
