"""One self-contained HTML file laying out a typed audit result.

The report is for a model-risk reviewer without a terminal: the verdict in plain words and
the log-log ROC first, then every attack's numbers, the differential-privacy bound (when a
defense is on), the other figures, the model, recourse, data and shadow models, warnings,
timing, the full configuration (collapsed) and a short guide to reading the numbers. It
only renders: the statistics behind the verdict live in :mod:`recourse_privacy.report.verdict`; the
reference blocks in :mod:`~recourse_privacy.report.blocks`, the shared markup in
:mod:`~recourse_privacy.report.markup`.
Figures are embedded as base64 data URIs; there is no external CSS and no JavaScript, and
every string is escaped.

The report reads the typed result of :mod:`recourse_privacy.results`, which sits below it.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from recourse_privacy import __version__ as version
from recourse_privacy.dp_audit.defense_audit import DPAuditEvidence
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.report.blocks import (
    HOW_TO_READ,
    config_section,
    data_section,
    data_source,
    model_section,
    recourse_section,
    shadow_section,
    timing_section,
    warnings_section,
)
from recourse_privacy.report.counterfactuals import examples_html
from recourse_privacy.report.dp_audit import dp_audit_html
from recourse_privacy.report.dp_verdict import dp_bound_rows
from recourse_privacy.report.exposure import deployed_html, exposure_html, groups_html, question_html
from recourse_privacy.report.markup import cell as _fmt
from recourse_privacy.report.markup import embed_figure
from recourse_privacy.report.markup import escape as _e
from recourse_privacy.report.markup import fpr_sort_key as _fpr_sort_key
from recourse_privacy.report.markup import is_number as _is_num
from recourse_privacy.report.markup import rows_table as _rows
from recourse_privacy.report.markup import text as _t
from recourse_privacy.report.threats import threats_section
from recourse_privacy.report.verdict import (
    LOW_FPR,
    AttackAssessment,
    BoundCheck,
    BoundComparison,
    SignalFinding,
    Verdict,
    tpr_reliable,
    verdict_of,
)
from recourse_privacy.results.audit import AuditRecord
from recourse_privacy.results.summaries import AttackResult, DPSummary

__all__ = ["audit_label", "report_title", "write_html_report"]

_EMPTY: Mapping[str, str | Path] = MappingProxyType({})


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 64em; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.5em; margin-bottom: 0.3em; }
h1 .label { font-size: 0.8em; font-weight: normal; color: #333; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.8em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
.subtitle { margin: 0 0 0.3em 0; color: #333; }
.verdict { padding: 0.8em 1em; border-left: 6px solid #888; background: #f6f6f6; margin-top: 1em; }
.verdict.leak { border-color: #c0392b; background: #fdf0ee; }
.verdict.noleak { border-color: #27ae60; background: #eef9f1; }
.verdict .headline { font-size: 1.2em; font-weight: bold; margin: 0 0 0.3em 0; }
.verdict .key { margin: 0 0 0.5em 0; }
.verdict p:last-child { margin-bottom: 0; }
.verdict ol.answers { margin: 0.3em 0 0.6em 0; padding-left: 1.4em; }
.verdict ol.answers li { margin-bottom: 0.3em; }
.ci { color: #555; font-size: 0.9em; }
p.answer { padding: 0.4em 0.8em; border-left: 4px solid #888; background: #f6f6f6; }
p.answer.leak { border-color: #c0392b; background: #fdf0ee; }
p.answer.noleak { border-color: #27ae60; background: #eef9f1; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.95em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.unreliable { background: #fff4d6; }
td.above { background: #fdf0ee; }
tr.total th, tr.total td { font-weight: bold; }
.small { font-size: 0.85em; color: #555; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figure.roc img { max-width: 34em; }
figcaption { font-size: 0.9em; color: #444; }
ul.warnings li { margin-bottom: 0.3em; }
details { margin: 0.6em 0; }
summary { cursor: pointer; color: #245; }
"""


# --------------------------------------------------------------------------- header and verdict


def _defense_label(result: AuditRecord) -> str | None:
    cfg = result.config
    if not cfg.defense or cfg.defense == "none":
        return None
    eps = f", ε = {cfg.epsilon:g}" if isinstance(cfg.epsilon, (int, float)) else ""
    return f"defense {cfg.defense}{eps}"


def audit_label(result: AuditRecord) -> str:
    """A short label of the audit: data, model, recourse and (if any) the defense with its epsilon."""
    cfg = result.config
    data = Path(data_source(result)).name if cfg.data is not None else str(cfg.dataset)
    bits = [data, cfg.model_label, str(cfg.recourse)]
    defense = _defense_label(result)
    return " / ".join(bits + ([defense] if defense else []))


def report_title(result: AuditRecord) -> str:
    """The report's title: "Recourse membership-inference audit: " and :func:`audit_label`."""
    return "Recourse membership-inference audit: " + audit_label(result)


def _subtitle(result: AuditRecord) -> str:
    cfg = result.config
    parts = [f"target column {cfg.target}"] if cfg.data is not None and cfg.target else []
    parts += [
        f"model trained: {result.model.name}",
        *([result.model.cutoff_line] if result.model.cutoff_line else []),
        f"recourse released: {result.recourse.method}",
        f"{result.n_members} members / {result.n_nonmembers} non-members attacked",
        f"seed {cfg.seed}",
    ]
    return '<p class="subtitle">' + " &middot; ".join(_e(p) for p in parts) + "</p>"


def _ci(ci: Any, spec: str, *, br: bool = False) -> str:
    """An interval as a small grey "[lo, hi]" (on its own line with ``br``; empty when missing or not finite)."""
    try:
        lo, hi = (float(x) for x in ci)
    except (TypeError, ValueError):
        return ""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f'{"<br>" if br else " "}<span class="ci">[{_e(format(lo, spec))}, {_e(format(hi, spec))}]</span>'


def _verdict_box(v: Verdict) -> str:
    css = {"leak": "leak", "noleak": "noleak"}.get(v.level, "")
    if (v.few_answers or v.incomplete) and css == "noleak":  # no all-clear colour: few answers, or an attack not run
        css = ""
    key = ""
    if v.attack is not None:
        s = v.assessments.get(v.attack)
        bits = [
            f"lead attack <strong>{_e(v.attack)}</strong> "
            '<span class="small">(first of a fixed order, not the best on these targets)</span>'
        ]
        if v.tpr_at_1pct_fpr is not None:
            rel = " (unreliable)" if v.tpr_reliable is False else ""
            ci = _ci(s.tpr_ci, ".3g") if s is not None else ""
            bits.append(f"TPR at 1% FPR <strong>{_fmt(v.tpr_at_1pct_fpr, '.3g')}</strong>{ci}{rel}")
        if v.auc is not None:
            ci = _ci(s.auc_ci, ".3f") if s is not None else ""
            bits.append(f"AUC <strong>{_fmt(v.auc, '.3f')}</strong>{ci}")
        if v.band_halfwidth is not None and (s is None or s.auc_ci is None):
            bits.append(f"random band 0.5 &plusmn; {_fmt(v.band_halfwidth, '.2g')}")
        key = '<p class="key">' + " &middot; ".join(bits) + "</p>"
    answers = [f.text for f in (v.scores, v.recourse, v.beyond) if f is not None]
    rest = [p for p in v.explanation if p not in answers and p != v.not_run]
    listed = "".join(f"<li>{_t(a)}</li>" for a in answers)
    return (
        f'<div class="verdict {css}"><p class="headline">{_e(v.headline)}</p>{key}'
        + (f'<ol class="answers">{listed}</ol>' if listed else "")
        + (f'<p class="not-run"><strong>Not run.</strong> {_t(v.not_run)}</p>' if v.not_run else "")
        + f"<p>{_t(' '.join(rest))}</p></div>"
    )


# --------------------------------------------------------------------------- the two questions


def _question_table(attacks: Mapping[str, AttackResult], v: Verdict, finding: SignalFinding) -> str:
    """The attacks of one signal: AUC and TPR at 1% FPR with their intervals, and whether each detects leakage."""
    versus = finding.signal == "distance" and any(attacks[n].versus_scores for n in finding.attacks)
    head = (
        '<tr><th>attack</th><th>AUC <span class="small">[95% interval]</span></th>'
        '<th>TPR at FPR &le; 1% <span class="small">[95% interval]</span></th>'
        '<th>achieved FPR <span class="small">[95% interval]</span></th>'
        + ('<th>AUC &minus; lead score attack\'s <span class="small">[paired 95%]</span></th>' if versus else "")
        + "<th>leakage detected?</th></tr>"
    )
    rows = []
    for name in finding.attacks:
        a, s = attacks[name], v.assessments[name]
        tpr = a.tpr_at_fpr.get(LOW_FPR)
        ach = a.achieved_fpr.get(LOW_FPR)
        by = [w for w, hit in (("AUC", s.auc_detected), ("TPR at 1% FPR", s.tpr_detected)) if hit]
        if by:
            det = "<strong>yes</strong> (" + " and ".join(by) + ")" + (" &mdash; reversed" if s.reversed else "")
        else:
            det = "unknown" if s.significant is None else "no"
        cells = [
            f"<td>{_e(name)}</td>",
            f'<td class="num">{_fmt(s.auc, ".3f")}{_ci(s.auc_ci, ".3f")}</td>',
            f'<td class="num">{_fmt(tpr, ".3g")}{_ci(s.tpr_ci, ".3g")}</td>',
            f'<td class="num">{_fmt(ach, ".2g")}{_ci(s.fpr_ci, ".2g")}</td>',
        ]
        if versus:
            vs = a.versus_scores
            cells.append(
                f'<td class="num">{_fmt(vs.auc_difference, "+.3f")}{_ci((vs.ci_low, vs.ci_high), "+.3f")} '
                f'<span class="small">vs {_e(vs.attack)}'
                + ("" if vs.choice else ", chosen by its AUC on these targets (an older file): optimistic")
                + "</span></td>"
                if vs is not None
                else '<td class="num">&mdash;</td>'
            )
        cells.append(f"<td>{det}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + head + "".join(rows) + "</table>"


def _question_sections(result: AuditRecord, v: Verdict) -> list[str]:
    """One section per question: the model's own scores, then the recourse and whether it leaks beyond them."""
    out = []
    titles = {
        "score": "Question 1: what the model&rsquo;s own scores leak",
        "distance": "Question 2: what recourse leaks, beyond the scores",
    }
    intro = {
        "score": "Attacks that read only the model&rsquo;s outputs (loss, confidence): what the model already "
        "leaks whether or not recourse is offered.",
        "distance": "Attacks that read the released counterfactuals (their distance, Pawelczyk et al. 2023): "
        "what offering recourse exposes.",
    }
    for f in (v.scores, v.recourse):
        if f is None:
            continue
        out.append(f"<h2>{titles[f.signal]}</h2>")
        out.append(f'<p class="small">{intro[f.signal]}</p>')
        out.append(_question_table(result.attacks, v, f) if f.attacks else f"<p>{_t(f.text)}</p>")
        if f.signal == "distance" and v.beyond is not None:
            css = " leak" if v.beyond.beyond else (" noleak" if v.beyond.outcome != "unknown" else "")
            out.append(f'<p class="answer{css}"><strong>Beyond the scores?</strong> {_t(v.beyond.text)}</p>')
    d = v.detectable
    if d is not None:
        keys = sorted(d.tpr, key=_fpr_sort_key)
        rows = "".join(
            f'<tr><th>TPR at FPR &le; {_e(k)}</th><td class="num">{_fmt(d.tpr[k], ".3g")}</td></tr>' for k in keys
        )
        out += [
            "<h2>What this sample size can detect</h2>",
            f"<p>{_t(d.text)}</p>",
            f"<table><tr><th>smallest true effect detected with probability {_e(format(d.power, 'g'))}</th><th></th></tr>"
            f'<tr><th>AUC</th><td class="num">{_fmt(d.auc, ".3f")}</td></tr>{rows}</table>',
            '<p class="small">An effect is detected when its 95% interval leaves chance: the AUC&rsquo;s excludes '
            "0.5; the TPR&rsquo;s at a fixed FPR lies above the interval of the FPR its threshold reached (a 5% "
            "test: each end misses with probability 2.5%). The AUC figure is 0.5 + (z<sub>0.975</sub> + "
            "z<sub>power</sub>)&middot;&radic;((n<sub>1</sub> + n<sub>0</sub> + 1) / (12&middot;n<sub>1</sub>"
            "&middot;n<sub>0</sub>)); the TPR figure inverts the binomial exactly, with the threshold&rsquo;s FPR at "
            "its worst case (floor(FPR&middot;n<sub>0</sub>) non-members above it). Both shrink like 1/&radic;n: four "
            "times the targets halve them. &ldquo;n/a&rdquo;: no TPR can be told from chance at that FPR with "
            "these numbers.</p>",
        ]
    fw = v.family_wise
    if fw is not None:
        rows = "".join(
            f'<tr><td>{_e(n)}</td><td class="num">{_fmt(fw.p_auc[n], ".2g")}</td>'
            f'<td class="num">{_fmt(fw.p_tpr[n], ".2g")}</td><td class="num">{_fmt(fw.p_values[n], ".2g")}</td>'
            f'<td class="num">{_fmt(fw.p_holm[n], ".2g")}</td>'
            f"<td>{'<strong>yes</strong>' if n in fw.survivors else 'no'}</td></tr>"
            for n in fw.p_values
        )
        out += [
            "<h2>Several attacks at once</h2>",
            f"<p>{_t(fw.text)}</p>",
            "<table><tr><th>attack</th><th>p-value: AUC against 0.5</th><th>p-value: TPR at 1% FPR</th>"
            "<th>the attack&rsquo;s (twice the smaller)</th><th>Holm-adjusted</th>"
            f"<th>below {_e(format(fw.alpha, 'g'))} once adjusted?</th></tr>{rows}</table>",
        ]
    return out


# --------------------------------------------------------------------------- attacks


def _attacks_table(attacks: Mapping[str, AttackResult], assessments: Mapping[str, AttackAssessment]) -> str:
    if not attacks:
        return '<p class="small">No attack results were reported.</p>'
    keys: list[str] = []
    for a in attacks.values():
        keys += [str(k) for k in a.tpr_at_fpr if str(k) not in keys]
    keys.sort(key=_fpr_sort_key)
    head = (
        '<tr><th>attack</th><th>reads</th><th>AUC <span class="small">[95% interval]</span></th>'
        "<th>leakage detected?</th>"
        "<th>balanced accuracy (best threshold)</th>"
        + "".join(f'<th>TPR at FPR &le; {_e(k)}<br><span class="small">(achieved FPR)</span></th>' for k in keys)
        + "<th>members / non-members</th></tr>"
    )
    rows = []
    any_unreliable = False
    for name, a in attacks.items():
        s = assessments[str(name)]
        auc_cell = _fmt(s.auc, ".3f") + _ci(s.auc_ci, ".3f", br=True)
        if s.auc_ci is None and s.halfwidth is not None and s.auc is not None:
            auc_cell += f' <span class="small">(band 0.5 &plusmn; {_fmt(s.halfwidth, ".2g")})</span>'
        if s.significant is None:
            sig_cell = "unknown"
        elif s.significant:
            sig_cell = "yes, below 0.5 (reversed)" if s.reversed else "<strong>yes, above chance</strong>"
        else:
            sig_cell = "no"
        if s.is_control:
            sig_cell += ' <span class="small">(random-guessing control)</span>'
        reads = {"distance": "recourse", "score": "model scores", "none": "nothing (control)"}.get(s.signal, s.signal)
        cells = [
            f"<td>{_e(name)}</td>",
            f"<td>{_e(reads or '?')}</td>",
            f'<td class="num">{auc_cell}</td>',
            f"<td>{sig_cell}</td>",
            f'<td class="num">{_fmt(s.balanced_accuracy, ".3f")}</td>',
        ]
        for k in keys:
            t = a.tpr_at_fpr.get(k)
            if t is None:
                cells.append('<td class="num">&mdash;</td>')
                continue
            txt = _fmt(float(t), ".3g")
            ach = a.achieved_fpr.get(k)
            if ach is not None:
                txt += f' <span class="small">({_fmt(float(ach), ".2g")})</span>'
            txt += _ci(a.tpr_at_fpr_ci.get(k), ".3g", br=True)
            if tpr_reliable(a, k) is False:
                any_unreliable = True
                cells.append(f'<td class="num unreliable" title="too few non-members for this FPR">{txt} &dagger;</td>')
            else:
                cells.append(f'<td class="num">{txt}</td>')
        cells.append(f'<td class="num">{_e(a.n_members)} / {_e(a.n_nonmembers)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = ""
    if any_unreliable:
        note = (
            '<p class="small">&dagger; Unreliable: fewer than 1/FPR non-members, so the target FPR is '
            "finer than the smallest non-zero FPR these data can show (1 / number of non-members).</p>"
        )
    return "<table>" + head + "".join(rows) + "</table>" + note


def _conventions_table(attacks: Mapping[str, AttackResult]) -> str:
    if not attacks:
        return '<p class="small">No attacks.</p>'
    cols: list[str] = []
    for a in attacks.values():
        cols += [str(k) for k in a.conventions if str(k) not in cols]
    head = (
        "<tr><th>attack</th><th>direction</th>" + "".join(f"<th>{_e(c.replace('_', ' '))}</th>" for c in cols) + "</tr>"
    )
    rows = []
    for name, a in attacks.items():
        cells = [f"<td>{_e(name)}</td>", f"<td>{_t(a.direction)}</td>"]
        for c in cols:
            v = a.conventions.get(c)
            cls = ' class="num"' if _is_num(v) else ""
            cells.append(f"<td{cls}>{_fmt(v, '.4g')}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<div style="overflow-x:auto"><table>' + head + "".join(rows) + "</table></div>"
        '<p class="small">&ldquo;greater&rdquo;: a larger statistic means &ldquo;member&rdquo; (e.g. '
        "counterfactual distance, Pawelczyk et al. 2023, eq. 3); &ldquo;less&rdquo;: a smaller one does "
        "(e.g. loss, eq. 2). Variance / center / cdf describe how likelihood-ratio attacks model the "
        "shadow-model statistics; &mdash; means not applicable or not reported.</p>"
    )


# --------------------------------------------------------------------------- differential privacy


def _status_cell(c: BoundCheck) -> str:
    return {
        "unknown": "<td>&mdash;</td>",
        "vacuous": "<td>bound vacuous</td>",
        "within": "<td>within bound</td>",
        "above": (
            '<td class="above"><strong>above bound</strong> (the measured BA is a maximum over '
            "thresholds and noisy; a large excess suggests the DP guarantee does not hold)</td>"
        ),
    }[c.status]


def _dp_bounds_table(dp: DPSummary) -> str:
    rows = dp_bound_rows(dp)
    if not rows:
        return ""
    body = "".join(
        f'<tr><td>{_e(r.name)}</td><td>{_e(r.formula)}</td><td class="num">{_fmt(r.epsilon, ".4g")}</td>'
        f'<td class="num">{_fmt(r.delta, ".3g")}</td><td class="num">{_fmt(r.value, ".4f")}</td>'
        f"<td>{_e(', '.join(r.applies_to)) or '&mdash;'}</td></tr>"
        for r in rows
    )
    return (
        "<table><tr><th>bound on balanced accuracy</th><th>formula</th><th>&epsilon;</th><th>&delta;</th>"
        "<th>value</th><th>compared with</th></tr>" + body + "</table>"
    )


def _dp_section(dp: DPSummary, cmp: BoundComparison) -> str:
    rows: list[tuple[str, Any, str]] = [
        ("defense", dp.defense, ""),
        ("mechanism", dp.mechanism, ""),
        ("ε per query (one recourse)", dp.epsilon_per_query, ".4g"),
        ("ε total (all recourses released)", dp.epsilon_total, ".4g"),
        ("δ", dp.delta, ".3g"),
    ]
    optional = (
        ("target ε of the model", dp.epsilon_target, ".4g"),
        ("privacy budget", dp.budget, ".4g"),
        ("recourse queries", dp.n_queries, ""),
        ("share of clamped scores", dp.clamped_share, ".3g"),
    )
    rows += [r for r in optional if r[1] is not None]
    out = [_rows(rows), _dp_bounds_table(dp)]
    if dp.composition:
        out.append(f'<p class="small"><strong>Composition.</strong> {_t(dp.composition)}</p>')
    if dp.guarantee:
        out.append(f"<p><strong>What is private.</strong> {_t(dp.guarantee)}</p>")
    if cmp.bound is None:
        out.append('<p class="small">No valid &epsilon; was reported, so no bound could be computed.</p>')
        return "".join(out)
    if cmp.row is not None:
        claim = f"The verdict's bound, {_e(cmp.row.text)}"
    else:
        claim = (
            "Theorem 2 (Pawelczyk et al. 2023): if the recourse mechanism is (&epsilon;, 0)-differentially "
            "private, no attacker's balanced accuracy exceeds 1/2 + (1 &minus; e<sup>&minus;&epsilon;</sup>)/2 = "
            f"<strong>{_fmt(cmp.bound, '.4f')}</strong> ({_e(cmp.source)})"
        )
    out.append(
        f"<p>{claim}." + (" This bound is vacuous (close to 1): it rules nothing out." if cmp.vacuous else "") + "</p>"
    )
    if cmp.total_bound is not None:
        out.append(
            f'<p class="small">With the total &epsilon; = {_fmt(cmp.epsilon_total, ".4g")} of every '
            f"recourse released (basic composition) Theorem 2 would give {_fmt(cmp.total_bound, '.4f')}.</p>"
        )
    checks = list(cmp.checks) + ([cmp.direction_check] if cmp.direction_check is not None else [])
    if checks:
        body = "".join(
            f'<tr><td>{_e(c.attack)}</td><td class="num">{_fmt(c.balanced_accuracy, ".3f")}</td>'
            f'<td class="num">{_fmt(cmp.bound, ".4f")}</td>{_status_cell(c)}</tr>'
            for c in checks
        )
        out.append(
            "<table><tr><th>attack</th><th>measured balanced accuracy</th><th>bound</th>"
            "<th></th></tr>" + body + "</table>"
        )
    if cmp.not_covered:
        out.append(
            f'<p class="small">Not covered by this claim, so not compared with the bound: '
            f"{_e(', '.join(cmp.not_covered))} (they read a signal the claim does not cover, or are controls).</p>"
        )
    da = dp.direction_attack
    if da is not None:
        out.append(
            f'<p class="small">Direction attack: {_t(da.what)}; AUC {_fmt(float(da.auc), ".3f")}, '
            f"TPR at 1% FPR {_fmt(da.tpr_at_fpr.get('0.01'), '.3g')}.</p>"
        )
    return "".join(out)


# --------------------------------------------------------------------------- the page


def _render(result: AuditRecord, images: Mapping[str, str | Path], dp_audit: DPAuditEvidence | None = None) -> str:
    verdict = verdict_of(result)
    problems: list[str] = []
    figures = [(str(c), p) for c, p in images.items()]
    roc_html = embed_figure(*figures[0], problems, css="roc") if figures else ""
    other_figs = "".join(embed_figure(c, p, problems) for c, p in figures[1:])
    title = report_title(result)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")

    sections = [
        f'<h1>Recourse membership-inference audit<br><span class="label">{_e(audit_label(result))}</span></h1>',
        _subtitle(result),
        question_html(result),
        f'<p class="small">Generated {_e(stamp)} by recourse-privacy {_e(version)}.</p>',
        _verdict_box(verdict),
        roc_html,
        *_question_sections(result, verdict),
        "<h2>Attacks</h2>",
        (
            f"<p>{_e(result.n_members)} members and {_e(result.n_nonmembers)} non-members (the targets the "
            "owner's model rejects) were attacked.</p>"
        ),
        _attacks_table(result.attacks, verdict.assessments),
        "<h3>Conventions of each attack</h3>",
        _conventions_table(result.attacks),
        deployed_html(result),
        exposure_html(result.exposure),
        groups_html(result.groups, result.exposure.ranking_attack if result.exposure else None),
    ]
    if result.dp is not None and verdict.dp is not None:
        sections += ["<h2>Differential privacy</h2>", _dp_section(result.dp, verdict.dp)]
    elif dp_audit is not None:  # a private recourse method's release, audited without a DP defense
        sections.append("<h2>Differential privacy</h2>")
    sections.append(dp_audit_html(dp_audit))  # audit --dp-audit: the empirical bound beside the claim
    sections.append(threats_section(result.threats))
    if other_figs:
        sections += ["<h2>Figures</h2>", other_figs]
    sections += [
        "<h2>Model</h2>",
        model_section(result),
        "<h2>Recourse</h2>",
        recourse_section(result),
        examples_html(result.arrays.counterfactuals if result.arrays is not None else None),
        "<h2>Data</h2>",
        data_section(result),
        shadow_section(result),
        "<h2>Warnings</h2>",
        warnings_section(result.warnings, problems),
        "<h2>Timing</h2>",
        timing_section(result.timing_seconds),
        "<h2>Configuration</h2>",
        config_section(result),
        "<h2>How to read these numbers</h2>",
        HOW_TO_READ,
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(s for s in sections if s)
        + "\n</body>\n</html>\n"
    )


def write_html_report(
    result: AuditRecord,
    out_dir: str | Path,
    *,
    images: Mapping[str, str | Path] = _EMPTY,
    filename: str = "report.html",
    dp_audit: DPAuditEvidence | None = None,
) -> Path:
    """Write a single self-contained HTML report of the audit ``result`` and return its path.

    ``images`` maps a caption to a PNG/JPEG/SVG file embedded as a base64 data URI; the
    first (the log-log ROC) is shown right below the verdict, the others under Figures. A
    figure that cannot be read is listed among the warnings. ``dp_audit`` (``audit --dp-audit``): the
    empirical bounds of the defense's mechanism, shown beside its claim. The report has no external CSS
    or JavaScript and escapes every string.
    """
    if not isinstance(result, AuditRecord):
        raise InvalidInputError(
            f"result must be an AuditResult (for a metrics.json dict use "
            f"AuditResult.from_dict), got {type(result).__name__}"
        )
    if not isinstance(images, Mapping):
        raise InvalidInputError(f"images must be a mapping caption -> path, got {type(images).__name__}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / filename
    path.write_text(_render(result, images, dp_audit), encoding="utf-8")
    return path
