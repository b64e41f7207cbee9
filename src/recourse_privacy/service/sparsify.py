"""Sparse answers: each change of a valid counterfactual set back to the applicant's value where the bundle's
model still accepts the result (:func:`~recourse_privacy.recourse.sparse.sparse_keep`, on applicants in their
own units: a category is one feature, a number keeps its written value)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from recourse_privacy.recourse.sparse import sparse_keep
from recourse_privacy.service.schema import Applicants, Schema

__all__ = ["sparsify"]


class _Decides(Protocol):
    def decide(self, a: Applicants, Z: np.ndarray) -> np.ndarray: ...


def sparsify(
    schema: Schema, model: _Decides, fact: Applicants, cf: Applicants, ok: np.ndarray,
    Z_fact: np.ndarray | None = None, Z_cf: np.ndarray | None = None,
) -> Applicants:  # fmt: skip
    """``cf`` with, in the rows ``ok`` (valid answers), the changes the model's acceptance needs and no other, set
    back to ``fact``'s values; the other rows as they are. Each row stays accepted by ``model``. A change's size
    is its model-space L1 change (a number in units of its public range, a category 2: its two indicators);
    ``Z_fact`` / ``Z_cf``: the rows' encodings where the caller has them."""
    changed = schema.changed(fact, cf) & np.asarray(ok, bool)[:, None]
    if not changed.any():
        return Applicants(cf.num.copy(), cf.cat.copy())
    Z_fact = schema.encode(fact) if Z_fact is None else Z_fact
    Z_cf = schema.encode(cf) if Z_cf is None else Z_cf
    size = schema.feature_sums(np.abs(Z_cf - Z_fact))

    def accepts(rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
        trial = _mixed(schema, fact.take(rows), cf.take(rows), keep)
        return model.decide(trial, schema.encode(trial))

    return _mixed(schema, fact, cf, sparse_keep(changed, size, accepts) | ~np.asarray(ok, bool)[:, None])


def _mixed(schema: Schema, fact: Applicants, cf: Applicants, keep: np.ndarray) -> Applicants:
    """Rows with ``cf``'s value where ``keep`` (n, features) and ``fact``'s elsewhere."""
    c = schema._cols
    return Applicants(
        np.where(keep[:, c.num_pos], cf.num, fact.num) if len(c.num_pos) else fact.num.copy(),
        np.where(keep[:, c.cat_pos], cf.cat, fact.cat) if len(c.cat_pos) else fact.cat.copy(),
    )
