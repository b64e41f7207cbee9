"""Tables and plots of an experiment's store: mean and standard deviation over seeds per cell.

A table row is a cell of the grid without its seed: the records are grouped by every
AuditConfig field except ``seed`` (and ``n_jobs``, which changes no number), and by attack
for the attack metrics. Where the spec carries the paper's figures, each metric gets the
published value beside ours; published rows that have no cell of ours (a recourse method
this installation lacks) are listed with ours empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from recourse_privacy.experiments.spec import ExperimentSpec, _label_of, is_attack_metric, spec_from_dict
from recourse_privacy.experiments.store import ResultStore

__all__ = ["ResultTables", "result_tables", "load_store_spec", "plot_results", "print_tables", "format_value"]

_IGNORED_CONFIG = ("config.seed", "config.n_jobs")


@dataclass
class ResultTables:
    """The aggregated tables of one store.

    ``attacks``: one row per (cell, attack) with ``<metric>``, ``<metric>_sd`` and ``paper:<metric>``
    columns for the attack metrics; ``cells``: one row per cell for the cell metrics
    (``model.test_accuracy``, ...); ``n_seeds`` columns count the seeds behind each mean.
    """

    attacks: object  # pandas DataFrame
    cells: object  # pandas DataFrame
    attack_metrics: list[str]
    cell_metrics: list[str]
    spec: ExperimentSpec | None = None
    warnings: list[str] = field(default_factory=list)


def load_store_spec(out_dir: str | Path) -> ExperimentSpec | None:
    """The spec saved in a store (``spec.json``), validated against this installation, or None."""
    data = ResultStore(out_dir).load_spec_dict()
    if data is None:
        return None
    try:
        return spec_from_dict(data, str(Path(out_dir) / "spec.json"))
    except ValueError:
        return None


def _order(spec: ExperimentSpec | None, frame) -> list[str]:
    if spec is not None:
        order = list(dict.fromkeys(c.group_label for c in spec.cells))
    else:
        order = []
    return order + [g for g in dict.fromkeys(frame["cell"]) if g not in order]


def _match(fig, labels: dict, attack: str | None) -> bool:
    if (fig.attack or None) != attack:
        return False
    return all(str(labels.get(axis)) == _label_of(v) for axis, v in fig.cell.items())


def _paper_values(
    spec: ExperimentSpec | None, labels: dict, attack: str | None, metrics: list[str]
) -> tuple[dict, list]:
    """The published values for one row, from the most specific matching figure per metric."""
    out, used = {}, []
    if spec is None or spec.paper is None:
        return out, used
    figs = sorted((f for f in spec.paper.figures if _match(f, labels, attack)), key=lambda f: -len(f.cell))
    for m in metrics:
        for f in figs:
            if m in f.values:
                out[m] = "NA" if f.values[m] is None else f.values[m]
                used.append(id(f))
                break
    return out, used


_DEFAULT_METRICS = ["auc", "balanced_accuracy", "tpr_at_fpr.0.1", "tpr_at_fpr.0.01", "model.test_accuracy"]


def result_tables(
    out_dir: str | Path, spec: ExperimentSpec | None = None, metrics: list[str] | None = None
) -> ResultTables:
    """Aggregate a store's records: mean, standard deviation (ddof 1) and seed count per cell (and attack)."""
    import numpy as np
    import pandas as pd

    store = ResultStore(out_dir)
    spec = spec if spec is not None else load_store_spec(out_dir)
    frame = store.summary_frame()
    warns: list[str] = [
        f"skipped cells/{name}: {why}; its cell is left out of the tables (`recourse-privacy run` recomputes it)"
        for name, why in store.skipped()
    ]
    if metrics is None:
        metrics = list(spec.metrics) if spec is not None else list(_DEFAULT_METRICS)
    attack_metrics = [m for m in metrics if is_attack_metric(m)]
    cell_metrics = [m for m in metrics if not is_attack_metric(m)]
    if frame.empty:
        empty = pd.DataFrame()
        return ResultTables(empty, empty, attack_metrics, cell_metrics, spec, [*warns, "no finished cell in the store"])
    if frame["spec"].nunique() > 1:
        warns.append(f"the store holds cells of several specs: {', '.join(map(str, frame['spec'].unique()))}")
    for m in metrics:
        if m not in frame.columns:
            frame[m] = np.nan
            warns.append(f"metric {m!r} is in no record")
    keys = [c for c in frame.columns if c.startswith("config.") and c not in _IGNORED_CONFIG]
    axis_cols = [c for c in frame.columns if c.startswith("axis.")]
    att = _aggregate(_as_numbers(frame, attack_metrics), [*keys, "attack"], attack_metrics, axis_cols)
    att["attack"] = frame.groupby([*keys, "attack"], dropna=False, sort=False)["attack"].first().to_numpy()
    per_cell = frame.drop_duplicates("hash")
    cel = _aggregate(_as_numbers(per_cell, cell_metrics), keys, cell_metrics, axis_cols)
    if spec is not None:  # a mean over fewer seeds than the spec's says so
        short = cel[cel["n_seeds"] < len(spec.seeds)]
        warns += [
            f"cell {row['cell']}: means over {int(row['n_seeds'])} of the spec's {len(spec.seeds)} seeds"
            for _, row in short.iterrows()
        ]
    used = _add_paper_columns(att, spec, attack_metrics, axis_cols, with_attack=True)
    used |= _add_paper_columns(cel, spec, cell_metrics, axis_cols, with_attack=False)
    extra_att, extra_cel = _unmatched_paper_rows(spec, used, attack_metrics, cell_metrics)
    if extra_att:
        att = pd.concat([att, pd.DataFrame(extra_att)], ignore_index=True)
    if extra_cel:
        cel = pd.concat([cel, pd.DataFrame(extra_cel)], ignore_index=True)
    order, attack_order = _order(spec, frame), list(dict.fromkeys(frame["attack"]))
    return ResultTables(
        _sorted(att, order, attack_order),
        _sorted(cel, order, None),
        attack_metrics,
        cell_metrics,
        spec,
        warns,
    )


def _as_numbers(frame, cols: list[str]):
    """``frame`` with the metric columns ``cols`` read as numbers (anything else becomes NaN)."""
    import pandas as pd

    return frame.assign(**{m: pd.to_numeric(frame[m], errors="coerce") for m in cols})


def _aggregate(df, by: list[str], cols: list[str], axis_cols: list[str]):
    """One row per group of ``by``: the cell's label and axes, the mean and sd (ddof 1) of ``cols``, n_seeds."""
    g = df.groupby(by, dropna=False, sort=False)
    mean = g[cols].mean(numeric_only=False) if cols else g.size().to_frame("_")[[]]
    sd = g[cols].std(ddof=1) if cols else mean
    n = g["seed"].nunique()
    first = g[["cell", *axis_cols]].first()
    out = first.join(mean)
    for m in cols:
        out[f"{m}_sd"] = sd[m]
    out["n_seeds"] = n
    return out.reset_index(drop=True)


def _add_paper_columns(table, spec, metrics: list[str], axis_cols: list[str], *, with_attack: bool) -> set[int]:
    """Add a ``paper:<metric>`` column per metric (in place); return the ids of the published figures used."""
    import numpy as np
    import pandas as pd

    used: set[int] = set()
    paper_cols: dict[str, list] = {m: [] for m in metrics}
    for _, row in table.iterrows():
        labels = {c[len("axis.") :]: row[c] for c in axis_cols}
        vals, u = _paper_values(spec, labels, row["attack"] if with_attack else None, metrics)
        used.update(u)
        for m in metrics:
            paper_cols[m].append(vals.get(m, np.nan))
    for m in metrics:
        table[f"paper:{m}"] = pd.Series(paper_cols[m], index=table.index, dtype=object)
    return used


def _unmatched_paper_rows(
    spec, used: set[int], attack_metrics: list[str], cell_metrics: list[str]
) -> tuple[list[dict], list[dict]]:
    """Published rows without a cell of ours: (attack rows, cell rows), each with its paper values only."""
    extra_att: list[dict] = []
    extra_cel: list[dict] = []
    if spec is None or spec.paper is None:
        return extra_att, extra_cel
    for f in spec.paper.figures:
        if id(f) in used:
            continue
        label = " ".join(f"{a}={_label_of(f.cell[a])}" for a in spec.grid if a in f.cell) or "(single cell)"
        row = {"cell": label, "n_seeds": 0}
        row.update({f"axis.{a}": _label_of(v) for a, v in f.cell.items()})
        ms = attack_metrics if f.attack else cell_metrics
        row.update({f"paper:{m}": "NA" if f.values[m] is None else f.values[m] for m in ms if m in f.values})
        if f.attack:
            extra_att.append({**row, "attack": f.attack})
        elif any(m in f.values for m in cell_metrics):
            extra_cel.append(row)
    return extra_att, extra_cel


def _sorted(table, order: list[str], attack_order: list[str] | None):
    """Rows in the spec's cell order (cells it does not name after, in first-seen order), then attack order."""
    if table.empty:
        return table
    rank = {g: i for i, g in enumerate(order)}
    extra = {g: len(order) + i for i, g in enumerate(dict.fromkeys(table["cell"]))}
    key = table["cell"].map(lambda g: rank.get(g, extra[g]))
    cols = ["_k"]
    t = table.assign(_k=key)
    if attack_order is not None:
        a_rank = {a: i for i, a in enumerate(attack_order)}
        t["_a"] = t["attack"].map(lambda a: a_rank.get(a, len(a_rank)))
        cols.append("_a")
    return t.sort_values(cols, kind="stable").drop(columns=cols).reset_index(drop=True)


def format_value(mean, sd=None, n=None) -> str:
    """``0.5123 ± 0.0031`` (no ± with one seed); an empty string for a missing value."""
    if isinstance(mean, str):
        return mean
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    text = f"{mean:.4f}"
    if sd is not None and n is not None and n > 1 and not (isinstance(sd, float) and math.isnan(sd)):
        text += f" ± {sd:.4f}"
    return text


def print_tables(tables: ResultTables, console=None) -> None:
    """Print the tables with rich: ours (mean ± sd over seeds) and the paper's value beside each metric."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    with_paper = tables.spec is not None and tables.spec.paper is not None
    for kind, table, metrics in (
        ("attack", tables.attacks, tables.attack_metrics),
        ("cell", tables.cells, tables.cell_metrics),
    ):
        if table.empty or not metrics:
            continue
        title = ("Attacks" if kind == "attack" else "Models and recourse") + " (mean ± sd over seeds)"
        t = Table(title=title)
        t.add_column("cell", no_wrap=True)
        if kind == "attack":
            t.add_column("attack", no_wrap=True)
        # a "paper" column only beside the metrics the paper gives numbers for
        papered = {m for m in metrics if with_paper and f"paper:{m}" in table and table[f"paper:{m}"].notna().any()}
        for m in metrics:
            t.add_column(m, justify="right", no_wrap=True)
            if m in papered:
                t.add_column("paper", justify="right", style="cyan", no_wrap=True)
        t.add_column("seeds", justify="right", no_wrap=True)
        for _, row in table.iterrows():
            cells = [str(row["cell"])] + ([str(row["attack"])] if kind == "attack" else [])
            n = int(row["n_seeds"]) if row.get("n_seeds") == row.get("n_seeds") else 0
            for m in metrics:
                cells.append(format_value(row.get(m), row.get(f"{m}_sd"), n) if n else "")
                if m in papered:
                    cells.append(format_value(row.get(f"paper:{m}")))
            cells.append(str(n) if n else "-")
            t.add_row(*cells)
        console.print(t)
    for w in tables.warnings:
        console.print(f"warning: {w}", style="yellow", highlight=False)


def print_paper_notes(spec: ExperimentSpec, console=None) -> None:
    """The paper's source, its statements (for figures without numbers) and the known differences."""
    from rich.console import Console

    if spec.paper is None:
        return
    console = console or Console()
    console.print(f"\n[bold]Paper:[/] {spec.paper.source}", highlight=False)
    if spec.paper.statements:
        console.print("[bold]What the paper reports[/] (check against the table above):", highlight=False)
        for s in spec.paper.statements:
            console.print(f"  - {s}", highlight=False)
    if spec.paper.notes:
        console.print(f"[bold]Known differences:[/] {spec.paper.notes.strip()}", highlight=False)
    if spec.skipped:
        console.print(
            f"[yellow]{len(spec.skipped)} cell(s) not run here:[/] "
            + "; ".join(f"{lab} ({why})" for lab, why in spec.skipped[:6]),
            highlight=False,
        )


def _numeric(values: list[str]):
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


def plot_results(tables: ResultTables, out_dir: str | Path, metrics: list[str] | None = None) -> list[Path]:
    """One figure per (attack metric, grid axis with 2+ values): the metric against the axis.

    One line per attack and combination of the other axes, error bars = sd over seeds;
    the paper's values as open markers. Written to ``out_dir/plots/<metric>_vs_<axis>.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    spec = tables.spec
    table = tables.attacks
    if spec is None or table.empty:
        return []
    wanted = (
        metrics or [m for m in tables.attack_metrics if m in ("auc", "tpr_at_fpr.0.01")] or tables.attack_metrics[:2]
    )
    out = Path(out_dir) / "plots"
    paths = []
    axes = spec.axes
    for axis, values in axes.items():
        if len(values) < 2 or f"axis.{axis}" not in table.columns:
            continue
        xs = _numeric(values)
        xpos = {v: (xs[i] if xs is not None else i) for i, v in enumerate(values)}
        others = [a for a in axes if a != axis and f"axis.{a}" in table.columns]
        for m in wanted:
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            group_cols = ["attack", *(f"axis.{a}" for a in others)]
            for key, g in table.groupby(group_cols, dropna=False, sort=False):
                key = key if isinstance(key, tuple) else (key,)
                name = " ".join([str(key[0]), *(f"{a}={v}" for a, v in zip(others, key[1:]))])
                g = g[g[f"axis.{axis}"].isin(xpos)]
                if g.empty:
                    continue
                g = g.assign(_x=g[f"axis.{axis}"].map(xpos)).sort_values("_x")
                ours = g[g["n_seeds"] > 0]
                line = None
                if not ours.empty and ours[m].notna().any():
                    sd = ours[f"{m}_sd"].fillna(0.0) if f"{m}_sd" in ours else None
                    line = ax.errorbar(ours["_x"], ours[m], yerr=sd, marker="o", capsize=3, label=name)
                paper = pd.to_numeric(g[f"paper:{m}"], errors="coerce") if f"paper:{m}" in g else None
                if paper is not None and paper.notna().any():
                    color = line[0].get_color() if line is not None else None
                    ax.plot(
                        g["_x"], paper, linestyle="none", marker="s", mfc="none", color=color, label=f"{name} (paper)"
                    )
            if m.startswith("tpr_at_fpr."):
                fpr = float(m.split(".", 1)[1])
                ax.axhline(fpr, color="grey", linestyle=":", label=f"random (TPR = {fpr:g})")
            elif m in ("auc", "balanced_accuracy"):
                ax.axhline(0.5, color="grey", linestyle=":", label="random")
            if xs is not None:
                if min(xs) > 0 and max(xs) / min(xs) >= 20:
                    ax.set_xscale("log")
                ax.set_xticks(xs, values)
            else:
                ax.set_xticks(np.arange(len(values)), values, rotation=20)
            ax.set_xlabel(axis)
            ax.set_ylabel(m)
            ax.set_title(f"{spec.name}: {m} vs {axis}")
            handles, _ = ax.get_legend_handles_labels()
            if len(handles) <= 16:
                ax.legend(fontsize=7)
            fig.tight_layout()
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"{m}_vs_{axis}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            paths.append(path)
    return paths
