"""Strict JSON for every file the package writes: no NaN or Infinity, a null with its reason instead.

``json.dumps`` writes ``NaN`` and ``Infinity`` by default, which strict parsers (JavaScript's
``JSON.parse``, jq, most databases) reject. :func:`dumps` writes a non-finite number as ``null``
and, beside it in the same object, ``"<key>_reason"`` saying what it was (for a list holding
one: the list's key); :func:`restore` reads such a null back as nan, so typed readers
(:meth:`~recourse_privacy.audit.AuditResult.from_dict`) get the numbers they wrote.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["REASON_SUFFIX", "dumps", "finite", "loads", "restore"]

#: the suffix of the key that says why its sibling is null
REASON_SUFFIX = "_reason"


_REASON_STARTS = ("not a number (NaN)", "+Infinity", "-Infinity")


def _reason(x: float) -> str:
    if math.isnan(x):
        return "not a number (NaN): undefined for these data"
    return f"{'+' if x > 0 else '-'}Infinity: not representable in JSON"


def _nonfinite(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def finite(obj: Any, default: Callable[[Any], Any] | None = None) -> Any:
    """A copy of ``obj`` that strict JSON holds: non-finite floats as None, each with its reason beside it.

    numpy scalars and arrays become Python numbers and lists; any other unknown object goes
    through ``default`` (as in ``json.dumps``) when given, else is left as it is.
    """
    if isinstance(obj, np.generic):
        obj = obj.item()
    elif isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if _nonfinite(obj):
        return None
    if isinstance(obj, Mapping):
        out: dict = {}
        for k, v in obj.items():
            v = v.item() if isinstance(v, np.generic) else (v.tolist() if isinstance(v, np.ndarray) else v)
            out[k] = finite(v, default)
            bad = [v] if _nonfinite(v) else [x for x in v if _nonfinite(x)] if isinstance(v, (list, tuple)) else []
            if bad and f"{k}{REASON_SUFFIX}" not in obj:
                out[f"{k}{REASON_SUFFIX}"] = _reason(bad[0]) + ("" if bad[0] is v else " (null in the list)")
        return out
    if isinstance(obj, (list, tuple)):
        return [finite(v, default) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None or default is None:
        return obj
    return finite(default(obj), default)


def dumps(obj: Any, *, default: Callable[[Any], Any] | None = None, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` (``obj``) with ``allow_nan=False``: the one way the package writes JSON."""
    return json.dumps(finite(obj, default), allow_nan=False, **kwargs)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (strict parser)")


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity, as strict parsers do."""
    return json.loads(text, parse_constant=_refuse_constant)


def restore(obj: Any) -> Any:
    """Inverse of :func:`finite` for reading: a null with a ``<key>_reason`` sibling back to nan, the reason dropped."""
    if isinstance(obj, list):
        return [restore(v) for v in obj]
    if not isinstance(obj, Mapping):
        return obj
    out = {}
    for k, v in obj.items():
        if isinstance(k, str) and k.endswith(REASON_SUFFIX) and _ours(obj, k[: -len(REASON_SUFFIX)]):
            continue
        if _ours(obj, k):
            v = math.nan if v is None else [math.nan if x is None else x for x in v]
        out[k] = restore(v)
    return out


def _ours(obj: Mapping, key: Any) -> bool:
    """``obj[key]`` is a null (or a list with nulls) that :func:`finite` wrote, its reason beside it."""
    reason = obj.get(f"{key}{REASON_SUFFIX}") if isinstance(key, str) else None
    if not isinstance(reason, str) or not reason.startswith(_REASON_STARTS) or key not in obj:
        return False
    v = obj[key]
    return v is None or (isinstance(v, list) and None in v)
