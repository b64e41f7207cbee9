"""HTML markup shared by the report's sections: escaping, table cells, two-column tables and embedded figures.

Every string that reaches the page is escaped (:func:`escape`, or :func:`html.escape` directly).
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

__all__ = ["cell", "embed_figure", "escape", "fpr_sort_key", "is_number", "rows_table", "text"]

MIME_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
}


def escape(x: Any) -> str:
    """Escape anything for HTML text or attribute context."""
    return html.escape(str(x), quote=True)


def text(x: Any) -> str:
    """Escaped text (the package writes its citations author-year)."""
    return escape(str(x))


def cell(x: Any, spec: str = ".3g") -> str:
    """Format a value for a table cell (already escaped)."""
    if x is None:
        return "&mdash;"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return escape(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "&infin;" if x > 0 else "&minus;&infin;"
        return escape(format(x, spec))
    if isinstance(x, (list, tuple)):
        return text(", ".join(str(v) for v in x)) if x else "&mdash;"
    if isinstance(x, Mapping):
        return text(json.dumps(dict(x), default=str, sort_keys=True)) if x else "&mdash;"
    if is_dataclass(x) and not isinstance(x, type):
        return text(", ".join(f"{f.name} {getattr(x, f.name)}" for f in fields(x)))
    return text(x)


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def rows_table(rows: Sequence[tuple[str, Any, str]]) -> str:
    """A two-column table of (label, value, format spec)."""
    out = []
    for label, value, spec in rows:
        cls = ' class="num"' if is_number(value) else ""
        out.append(f"<tr><th>{escape(label)}</th><td{cls}>{cell(value, spec)}</td></tr>")
    return "<table>" + "".join(out) + "</table>"


def fpr_sort_key(key: str) -> tuple[int, float, str]:
    try:
        f = float(key)
    except ValueError:
        return (1, 0.0, key)
    return (0, -f, key)


def embed_figure(caption: str, path: str | Path, problems: list[str], css: str = "") -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        problems.append(f"figure {caption!s} could not be embedded: {exc}")
        return ""
    if not data:
        problems.append(f"figure {caption!s} could not be embedded: {p} is empty")
        return ""
    mime = MIME_TYPES.get(p.suffix.lower(), "image/png")
    b64 = base64.b64encode(data).decode("ascii")
    cls = f' class="{css}"' if css else ""
    return (
        f'<figure{cls}><img src="data:{mime};base64,{b64}" alt="{escape(caption)}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )
