"""The per-record and per-group exposure of an audit: ``exposure.csv``, ``groups.csv`` and the report's sections.

Only renders and writes: the numbers are computed by :mod:`recourse_privacy.metrics.exposure`
(and put together by the audit). The most exposed records are named by their row in the data,
never by their feature values.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from recourse_privacy.metrics.exposure import GROUP_TEST, RANKING_RULE, ExposureSummary, GroupExposure
from recourse_privacy.results.audit import AuditRecord

__all__ = ["deployed_html", "exposure_html", "groups_frame", "groups_html", "question_html", "write_exposure"]


def _table_files(table: pd.DataFrame, out: Path, stem: str) -> dict[str, Path]:
    files = {stem: out / f"{stem}.csv"}
    table.to_csv(files[stem], index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return files
    files[f"{stem}_parquet"] = out / f"{stem}.parquet"
    table.to_parquet(files[f"{stem}_parquet"], index=False)
    return files


def groups_frame(groups: tuple[GroupExposure, ...]) -> pd.DataFrame:
    """One row per (column, value, attack), the intervals as ``_low`` / ``_high`` columns."""
    rows = []
    for g in groups:
        d = asdict(g)
        auc_ci, tpr_ci = d.pop("auc_ci"), d.pop("tpr_ci")
        d.update(auc_low=auc_ci[0], auc_high=auc_ci[1], tpr_low=tpr_ci[0], tpr_high=tpr_ci[1])
        rows.append(d)
    return pd.DataFrame(rows)


def write_exposure(result: AuditRecord, out_dir: str | Path) -> dict[str, Path]:
    """Write ``exposure.csv`` (and ``.parquet`` with pyarrow) and, with group columns, ``groups.csv``."""
    out = Path(out_dir)
    files: dict[str, Path] = {}
    table = result.arrays.exposure if result.arrays is not None else None
    if table is not None:
        files.update(_table_files(table, out, "exposure"))
    if result.groups:
        files["groups"] = out / "groups.csv"
        groups_frame(result.groups).to_csv(files["groups"], index=False)
    return files


def _num(x: float, spec: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _ci(pair, spec: str = ".3f") -> str:
    lo, hi = pair
    return "" if math.isnan(lo) or math.isnan(hi) else f' <span class="ci">[{_num(lo, spec)}, {_num(hi, spec)}]</span>'


def question_html(result: AuditRecord) -> str:
    """The header line saying which question the audit answers."""
    if result.deployed is not None:
        text = (
            "Question answered: <b>this deployed model</b>. The fitted model as loaded (never refitted) is attacked "
            "on its real training rows (members) and held-out rows (non-members)."
        )
    else:
        text = (
            "Question answered: <b>this recipe, re-trained</b>. A fresh model is trained by the recipe on members "
            "the audit draws (Pawelczyk et al. 2023's game); the verdict is about that sibling model."
        )
    return f'<p class="subtitle">{text}</p>'


def deployed_html(result: AuditRecord) -> str:
    """The as-deployed draw: sides, candidates, label shares, reference sizing, and the online note."""
    d = result.deployed
    if d is None:
        return ""
    rows = [
        ("membership from", d.membership_from),
        ("deployed training rows / holdout rows", f"{d.train_rows} / {d.holdout_rows}"),
        ("candidates drawn (members / non-members)", f"{d.member_candidates} / {d.nonmember_candidates}"),
        ("targets the model rejects (members / non-members)", f"{d.member_targets} / {d.nonmember_targets}"),
        (
            "favourable-label share: training / holdout / member candidates / non-member candidates",
            " / ".join(
                _num(x)
                for x in (
                    d.positive_share_train,
                    d.positive_share_holdout,
                    d.positive_share_member_candidates,
                    d.positive_share_nonmember_candidates,
                )
            ),
        ),
        ("rows that are not targets (the reference models' pool)", d.reference_pool_rows),
        ("rows each reference model trains on", f"{d.reference_rows_each} (share {d.reference_fraction:.3f})"),
        ("sized like the deployed training set", "yes" if d.sized_like_deployed else "no (the data do not allow)"),
        ("smallest AUC detectable with probability 95%", _num(d.minimum_detectable_auc)),
    ]
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    online = (
        "<p>The online attacks train reference models with each target in half of them (LiRA's keep matrix, "
        "Carlini et al. 2022), as an auditor who holds the rows may; the offline attacks' references never "
        "saw a target.</p>"
        if d.online_references_include_targets
        else "<p>Every reference model is a clone of the recipe trained only on rows that are not targets.</p>"
    )
    return f"<h2>The deployed model's rows</h2><table>{body}</table>{online}"


def exposure_html(summary: ExposureSummary | None) -> str:
    """The ten most exposed members by row id and, per attack, the members identified at FPR 1% and 0.1%."""
    if summary is None:
        return ""
    top = "".join(
        f'<tr><td class="num">{r.row}</td><td class="num">{_num(r.percentile, ".2f")}</td>'
        f'<td class="num">{_num(r.score, ".4g")}</td></tr>'
        for r in summary.most_exposed
    )
    by_attack: dict[str, dict[float, object]] = {}
    for i in summary.identified:
        by_attack.setdefault(i.attack, {})[i.fpr] = i
    fprs = sorted({i.fpr for i in summary.identified}, reverse=True)
    head = "".join(f"<th>members identified at FPR {f:g} (FPR reached)</th>" for f in fprs)
    ident = "".join(
        f"<tr><th>{html.escape(name)}</th>"
        + "".join(
            f'<td class="num">{v[f].n_identified} of {v[f].n_members} ({_num(v[f].achieved_fpr, ".4f")})</td>'
            for f in fprs
        )
        + "</tr>"
        for name, v in by_attack.items()
    )
    return (
        "<h2>Exposure of single records</h2>"
        f"<p>The ten members most exposed to <b>{html.escape(summary.ranking_attack)}</b> ({html.escape(RANKING_RULE)}), "
        "by row in the data; percentile: the share of non-members' scores below the member's. Every target "
        "is in <code>exposure.csv</code>.</p>"
        f"<table><tr><th>row</th><th>percentile among non-members</th><th>score</th></tr>{top}</table>"
        "<p>Members identified at a fixed FPR: the threshold is read off the non-members' scores alone "
        "(member if score &ge; threshold), never from the members'.</p>"
        f"<table><tr><th>attack</th>{head}</tr>{ident}</table>"
        f'<p class="small">{html.escape(summary.note)}</p>'
    )


def groups_html(groups: tuple[GroupExposure, ...], attack: str | None) -> str:
    """The group table of one attack (every attack is in ``groups.csv``), flagged groups marked."""
    rows = [g for g in groups if g.attack == attack]
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{html.escape(g.column)}</td><td>{html.escape(g.value)}</td>"
        f'<td class="num">{g.n_members} / {g.n_nonmembers}</td>'
        f'<td class="num">{_num(g.auc)}{_ci(g.auc_ci)}</td>'
        f'<td class="num">{_num(g.tpr)}{_ci(g.tpr_ci)}</td>'
        f'<td class="num">{_num(g.auc_rest)}</td><td class="num">{_num(g.p_holm, ".3g")}</td>'
        f"<td{' class=above' if g.flagged else ''}>{'above the rest' if g.flagged else ''}</td></tr>"
        for g in rows
    )
    return (
        f"<h2>Exposure by group</h2><p>Attack <b>{html.escape(attack)}</b> (every attack is in "
        "<code>groups.csv</code>); AUC with its bootstrap interval, TPR at FPR 0.01 with its Clopper-Pearson "
        f"interval (95%). Test: {html.escape(GROUP_TEST)}, within each column.</p>"
        "<table><tr><th>column</th><th>value</th><th>members / non-members</th><th>AUC</th><th>TPR@0.01</th>"
        f"<th>AUC of the rest</th><th>p (Holm)</th><th>flag</th></tr>{body}</table>"
    )
