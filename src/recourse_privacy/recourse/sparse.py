"""Sparse counterfactuals: each change a counterfactual makes is set back to the factual's value where the model
still accepts the result.

A counterfactual from a published graph (PrivRecourse's nodes are DP cluster centres, Pentyala et al. 2023)
differs from the factual in nearly every feature, though few of those changes decide the model's answer.
:func:`sparse_keep` chooses, for every row at once, the changes to keep: first the subset the model accepts
with the fewest changes (then the least cost) among each change alone and the prefixes of the row's changes
smallest and largest first (two model calls: the prefixes only for rows where no change alone is accepted);
then each change kept, smallest first, is set back where the model still accepts (a greedy pass in the manner of
DiCE's post-hoc sparsity, Mothilal, Sharma and Tan 2020), one model call per round. It reads only the factual, the counterfactual and the model: for a DP
model, post-processing of the release.

:func:`sparse_counterfactuals` runs it on encoded rows (a one-hot group changes as one feature); the service
(:mod:`recourse_privacy.service.sparsify`) on applicants in their own units.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["feature_units", "sparse_counterfactuals", "sparse_keep"]

#: accepts(rows, keep) -> whether the model accepts each row of ``rows`` with the changes ``keep`` (len(rows), F)
Accepts = Callable[[np.ndarray, np.ndarray], np.ndarray]


def sparse_keep(changed: np.ndarray, size: np.ndarray, accepts: Accepts) -> np.ndarray:
    """(n, F) mask of the changes to keep: a subset of ``changed`` (rows whose answer is valid; a row without
    changes keeps none) that ``accepts`` accepts, no change of it removable alone. ``size``: each change's cost."""
    changed = np.asarray(changed, bool)
    if not changed.any():
        return np.zeros_like(changed)
    keep = _fewest_accepted(changed, np.asarray(size, np.float64), accepts)
    return _set_back_greedily(keep, np.asarray(size, np.float64), accepts)


#: trial subsets (rows x subsets x features) built at a time: a call per block of rows beyond
_TRIAL_BLOCK = 1 << 24


def _fewest_accepted(changed: np.ndarray, size: np.ndarray, accepts: Accepts) -> np.ndarray:
    """Of each change alone and the j smallest and j largest (j = 1 ... the row's count; the last is the answer
    itself, accepted), the subset the model accepts with the fewest changes, then the least cost: at most two
    calls per block of rows (:data:`_TRIAL_BLOCK`; :func:`_fewest_in_block`)."""
    out = np.zeros_like(changed)
    rows = np.flatnonzero(changed.any(1))
    F = changed.shape[1]
    m = int(changed.sum(1).max())
    step = max(1, _TRIAL_BLOCK // ((2 * m + F) * F))
    for lo in range(0, len(rows), step):
        block = rows[lo : lo + step]
        out[block] = _fewest_in_block(block, changed[block], size[block], accepts)
    return out


def _fewest_in_block(rows: np.ndarray, ch: np.ndarray, sz: np.ndarray, accepts: Accepts) -> np.ndarray:
    """:func:`_fewest_accepted` for the rows ``rows`` (each with a change), their ``changed`` and ``size``.

    Asked in two rounds, each trial at most once: each change alone first (a single change the model accepts
    is the fewest); the prefixes only for the rows where none is, and of those only j = 2 ... the row's count
    - 1 (j = 1 is a change alone, j >= the count the answer itself). The choice is that of asking every trial."""
    n, F = ch.shape
    count = ch.sum(1)
    m = int(count.max())
    j = np.arange(1, m + 1)
    trials = []
    for key in (sz, -sz):  # smallest first, largest first
        rank = np.empty((n, F), np.int64)
        rank[np.arange(n)[:, None], np.argsort(np.where(ch, key, np.inf), axis=1, kind="stable")] = np.arange(F)
        trials.append(ch[:, None, :] & (rank[:, None, :] < j[None, :, None]))  # (n, m, F): the j first
    trials.append(ch[:, :, None] & np.eye(F, dtype=bool)[None])  # (n, F, F): each change alone
    keep = np.concatenate(trials, axis=1)  # (n, 2m + F, F)
    accepted = np.zeros(keep.shape[:2], bool)
    accepted[:, 2 * m :] = _ask(rows, keep[:, 2 * m :], ch, accepts)
    whole = j[None, :] >= count[:, None]  # (n, m): the answer itself, valid
    accepted[:, : 2 * m] = np.tile(whole, 2)
    need = ~accepted[:, 2 * m :].any(1)[:, None] & (j[None, :] >= 2) & ~whole
    accepted[:, : 2 * m] |= _ask(rows, keep[:, : 2 * m], np.tile(need, 2), accepts)
    cost = keep.sum(2) + (keep * sz[:, None, :]).sum(2) / (1.0 + sz.sum(1))[:, None]  # fewest, then least cost
    best = np.argmin(np.where(accepted, cost, np.inf), axis=1)
    return keep[np.arange(n), best]


def _ask(rows: np.ndarray, trials: np.ndarray, need: np.ndarray, accepts: Accepts) -> np.ndarray:
    """(n, t) whether ``accepts`` accepts ``trials`` (n, t, F) of ``rows``, asked only where ``need`` (False
    elsewhere): one call."""
    out = np.zeros(need.shape, bool)
    i, k = np.nonzero(need)
    if len(i):
        out[i, k] = np.asarray(accepts(rows[i], trials[i, k]), bool)
    return out


def _set_back_greedily(keep: np.ndarray, size: np.ndarray, accepts: Accepts) -> np.ndarray:
    """Each change in ``keep``, smallest first, dropped where the model still accepts the row without it; passes
    repeated until none drops (a change that lowered the score, once dropped, can make another droppable), so
    that no change kept can go alone."""
    keep = keep.copy()
    index = np.arange(len(keep))
    todo = keep.any(1)
    while todo.any():
        order = np.argsort(np.where(keep, size, np.inf), axis=1, kind="stable")
        dropped = np.zeros(len(keep), bool)
        for k in range(int(keep[todo].sum(1).max())):
            f = order[:, k]
            live = np.flatnonzero(todo & keep[index, f])
            if not len(live):
                continue
            trial = keep[live].copy()
            trial[np.arange(len(live)), f[live]] = False
            back = np.asarray(accepts(live, trial), bool)
            keep[live[back], f[live[back]]] = False
            dropped[live[back]] = True
        todo = dropped & keep.any(1)  # a row whose pass dropped something is tried again
    return keep


def feature_units(n_columns: int, groups: Sequence = (), fixed: Sequence[int] = ()) -> list[np.ndarray]:
    """The encoded columns that change together: each one-hot group (its ``index``), then every other column but
    ``fixed`` (e.g. missing-value indicators, which no counterfactual moves)."""
    units = [np.asarray(g.index, np.int64) for g in groups]
    taken = set(np.concatenate(units).tolist()) if units else set()
    taken |= {int(c) for c in fixed}
    return units + [np.array([c]) for c in range(n_columns) if c not in taken]


def sparse_counterfactuals(
    model, X: np.ndarray, X_cf: np.ndarray, valid: np.ndarray, units: Sequence[np.ndarray]
) -> np.ndarray:
    """``X_cf`` with, in the ``valid`` rows, every change ``model`` does not need to accept the row set back to
    ``X``'s value (:func:`sparse_keep`); ``units``: the columns that change together (:func:`feature_units`)."""
    X, X_cf = np.asarray(X, np.float64), np.asarray(X_cf, np.float64)
    unit_of = np.empty(X.shape[1], np.int64)
    for u, cols in enumerate(units):
        unit_of[cols] = u
    diff = np.abs(X_cf - X)
    moved = np.zeros((len(X), len(units)), bool)
    size = np.zeros((len(X), len(units)))
    np.logical_or.at(moved.T, unit_of, (diff > 0).T)  # a unit changed where any of its columns did
    np.add.at(size.T, unit_of, np.nan_to_num(diff).T)
    changed = moved & np.asarray(valid, bool)[:, None]

    def accepts(rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
        trial = np.where(keep[:, unit_of], X_cf[rows], X[rows])
        return model.predict(trial) == 1

    keep = sparse_keep(changed, size, accepts)
    return np.where(keep[:, unit_of], X_cf, X)
