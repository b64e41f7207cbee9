"""The counterfactuals in the data's own columns and units: ``counterfactuals.csv`` and the report's examples.

The audit decodes each target's factual and counterfactual into the original columns
(:func:`~recourse_privacy.audit.stages.counterfactual_table`); here they are written out and
a few are phrased as advice a person can act on: "change income from 42 to 55".
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["example_sentences", "examples_html", "write_counterfactuals"]


def write_counterfactuals(table: pd.DataFrame, out_dir: str | Path) -> dict[str, Path]:
    """Write ``counterfactuals.csv`` (and ``counterfactuals.parquet`` where pyarrow is installed); return the paths."""
    out = Path(out_dir)
    files = {"counterfactuals": out / "counterfactuals.csv"}
    table.to_csv(files["counterfactuals"], index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return files
    files["counterfactuals_parquet"] = out / "counterfactuals.parquet"
    table.to_parquet(files["counterfactuals_parquet"], index=False)
    return files


def _value(v: object) -> str:
    if isinstance(v, float | np.floating):
        return f"{int(v)}" if float(v).is_integer() else f"{float(v):.6g}"
    return str(v)


def example_sentences(table: pd.DataFrame, k: int = 5) -> list[str]:
    """Up to ``k`` valid counterfactuals that change something, from the cheapest to the dearest
    (evenly spread over the cost ranking), each as "row R (member): change X from a to b, ...".
    """
    cost = next((c for c in table.columns if c.startswith("cost_")), None)
    rows = table[table["valid"] & (table["n_changed"] > 0)]
    if cost is not None:
        rows = rows.sort_values(cost, kind="stable")
    if len(rows) > k:
        rows = rows.iloc[np.unique(np.linspace(0, len(rows) - 1, k).round().astype(int))]
    out = []
    for _, r in rows.iterrows():
        changes = [f"{c} from {_value(r[c])} to {_value(r[f'{c}_cf'])}" for c in str(r["changed"]).split("; ")]
        who = f" ({'member' if r['member'] else 'non-member'})" if "member" in r else ""
        tail = f" ({cost.removeprefix('cost_').upper()} cost {r[cost]:.3g} in the audit's scaled units)" if cost else ""
        out.append(f"row {r['row']}{who}: change {', '.join(changes)}{tail}")
    return out


def examples_html(table: pd.DataFrame | None, k: int = 5) -> str:
    """The report's "Recourse in the data's units" section ("" without a table)."""
    if table is None:
        return ""
    sentences = example_sentences(table, k)
    items = (
        "".join(f"<li>{html.escape(s)}</li>" for s in sentences) or "<li>no valid counterfactual changes a column</li>"
    )
    return (
        "<h2>Recourse in the data's units</h2>"
        f"<p>A few of the {len(table)} counterfactuals, decoded into the original columns (all of them are in "
        "<code>counterfactuals.csv</code>):</p>"
        f"<ul>{items}</ul>"
    )
