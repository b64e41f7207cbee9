"""Fewer changes per answer: each change of a valid counterfactual set back to the applicant's value where the
model still accepts the result.

A PrivRecourse answer is a node of the published graph, a DP cluster centre (Pentyala et al. 2023): it differs
from the applicant in nearly every feature (all 21 of HELOC's), though most of those changes do not decide the
model's answer. :func:`sparsify` tries, for every answer at once, its changed features one at a time, the
smallest change first (a numeric change in units of the feature's public range, a category's as 2: its two
indicators), and keeps a feature's
change only where setting it back would make the model reject the counterfactual: a greedy pass in the manner
of DiCE's post-hoc sparsity (Mothilal, Sharma and Tan 2020), after a first step that keeps the fewest changes the
model accepts among a few subsets tried at once (so that the greedy rounds are few: a served classifier's call
costs milliseconds). It
reads only the applicant, the answer and the bundle's model, so for a DP model it is post-processing of the
release.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from recourse_privacy.service.schema import Applicants, Schema

__all__ = ["sparsify"]


class _Decides(Protocol):
    def decide(self, a: Applicants, Z: np.ndarray) -> np.ndarray: ...


def sparsify(schema: Schema, model: _Decides, fact: Applicants, cf: Applicants, ok: np.ndarray) -> Applicants:
    """``cf`` with, in the rows ``ok`` (valid answers), the changes the model's acceptance needs and no other, set
    back to ``fact``'s values; the other rows as they are. Each row stays accepted by ``model``.

    Two steps, a few model calls for the whole batch: the fewest changes the model accepts among each change
    alone and the prefixes of a row's changes smallest and largest first (:func:`_fewest_accepted`, one call),
    then each change kept, smallest first, set back where the model still accepts (one call per round: a row's
    kept changes, one or two in practice)."""
    ok = np.asarray(ok, bool)
    changed = schema.changed(fact, cf) & ok[:, None]
    out = Applicants(cf.num.copy(), cf.cat.copy())
    if not changed.any():
        return out
    size = schema.feature_sums(np.abs(schema.encode(cf) - schema.encode(fact)))  # a category's change counts 2
    kept = _fewest_accepted(schema, model, fact, cf, changed, size)
    rows = np.flatnonzero(changed.any(1))
    out.put(rows, _mixed(schema, fact.take(rows), cf.take(rows), kept[rows]))
    return _set_back_greedily(schema, model, fact, out, kept, size)


def _mixed(schema: Schema, fact: Applicants, cf: Applicants, keep: np.ndarray) -> Applicants:
    """Rows with ``cf``'s value where ``keep`` (n, features) and ``fact``'s elsewhere."""
    c = schema._cols
    return Applicants(
        np.where(keep[:, c.num_pos], cf.num, fact.num) if len(c.num_pos) else fact.num.copy(),
        np.where(keep[:, c.cat_pos], cf.cat, fact.cat) if len(c.cat_pos) else fact.cat.copy(),
    )


def _fewest_accepted(schema: Schema, model: _Decides, fact, cf, changed: np.ndarray, size: np.ndarray) -> np.ndarray:
    """(n, features) mask: for each row, of the subsets of its changes tried, the one the model accepts with the
    fewest changes (then the least cost). Tried, in one model call for the batch: each change alone, the j smallest
    and the j largest (j = 1 ... the row's count; the last is the answer itself, accepted)."""
    n, F = changed.shape
    m = int(changed.sum(1).max())
    rows = np.flatnonzero(changed.any(1))
    ch, sz = changed[rows], size[rows]
    j = np.arange(1, m + 1)[None, :, None]
    trials = []
    for key in (sz, -sz):  # smallest first, largest first
        rank = np.empty((len(rows), F), np.int64)
        rank[np.arange(len(rows))[:, None], np.argsort(np.where(ch, key, np.inf), axis=1, kind="stable")] = np.arange(F)
        trials.append(ch[:, None, :] & (rank[:, None, :] < j))  # (rows, m, F): the j first
    trials.append(ch[:, :, None] & np.eye(F, dtype=bool)[None])  # (rows, F, F): each change alone
    keep = np.concatenate(trials, axis=1)  # (rows, 2m + F, F)
    t = keep.shape[1]
    idx = np.repeat(rows, t)
    trial = _mixed(schema, fact.take(idx), cf.take(idx), keep.reshape(-1, F))
    accepted = model.decide(trial, schema.encode(trial)).reshape(len(rows), t) & keep.any(2)
    accepted[:, m - 1] |= True  # the smallest m: every change, the row's valid answer itself
    count = keep.sum(2) + (keep * sz[:, None, :]).sum(2) / (1.0 + sz.sum(1))[:, None]  # fewest, then least cost
    best = np.argmin(np.where(accepted, count, np.inf), axis=1)
    out = np.zeros_like(changed)
    out[rows] = keep[np.arange(len(rows)), best]
    return out


def _set_back_greedily(schema: Schema, model: _Decides, fact, out: Applicants, kept, size) -> Applicants:
    """Each change in ``kept``, smallest first, set back to ``fact``'s value where the model still accepts."""
    c = schema._cols
    order = np.argsort(np.where(kept, size, np.inf), axis=1, kind="stable")
    num_at = {int(f): k for k, f in enumerate(c.num_pos)}  # a feature's column in num or cat
    cat_at = {int(f): k for k, f in enumerate(c.cat_pos)}
    index = np.arange(len(out))
    for k in range(int(kept.sum(1).max())):
        f = order[:, k]
        live = np.flatnonzero(kept[index, f])
        if not len(live):
            break
        trial = out.take(live)
        for feature in np.unique(f[live]).tolist():
            sub = np.flatnonzero(f[live] == feature)
            if feature in num_at:
                trial.num[sub, num_at[feature]] = fact.num[live[sub], num_at[feature]]
            else:
                trial.cat[sub, cat_at[feature]] = fact.cat[live[sub], cat_at[feature]]
        back = model.decide(trial, schema.encode(trial))
        out.put(live[back], trial.take(np.flatnonzero(back)))
    return out
