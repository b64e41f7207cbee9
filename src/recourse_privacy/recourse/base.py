"""The recourse interface: a batch of rejected points in, counterfactuals and costs out.

One driver, :func:`generate_recourse`, does what every method's ``generate`` shares; a method
writes only its search step. ``generate(model, X)`` is, for every registered method::

    return generate_recourse(self, model, X, info={...static hyperparameters...})

and the driver, in this order:

1. checks that the method runs on the model (:func:`check_supports`, i.e.
   :func:`~recourse_privacy.recourse.registry.check_compatible`, the one place that decides);
2. checks ``X`` (:func:`~recourse_privacy.validation.check_matrix` with the model's feature
   count), then, where the method has them, ``method._check_fitted(X)`` (fitted, and on as
   many features as ``X``) and ``method.action_set.check(d)``;
3. starts the clock and makes the state shared by every chunk of this call:
   ``method._begin(model)`` where defined (a random generator, a search seed), else the
   model's ``torch_module()`` for a method that needs ``gradients`` (moved onto the device of
   the current :func:`~recourse_privacy.models.device.use_device` block when the method sets
   ``device_aware = True``: its search then creates every tensor on the module's device), else None;
4. with ``skip_accepted=True``, keeps the rows the model already accepts unchanged (``n_iter``
   0), and the rejected rows that nothing may move (a missing value in every mutable column: no
   recourse, ``n_iter`` -1), and searches only the others;
5. calls ``method._search(model, rows, state) -> SearchOutput`` on chunks of at most
   ``method.batch_size`` rows (all rows at once when the method has no ``batch_size`` or it
   is None; a batch of zero rows is one call on the empty array, so every search step must
   accept zero rows), and joins the chunks in order;
6. where the method has an ``action_set`` (see
   :class:`~recourse_privacy.recourse.constraints.ActionSet`), projects every counterfactual
   onto the valid set (immutable features kept, increase-only features not decreased, bounds,
   one-hot groups a single level, integers integer), and repairs the rows whose projection
   lost the model's acceptance (:func:`project_and_repair`): this one place applies it, so no
   method can skip it, the private ones included (for a DP artefact it is post-processing: it
   reads the public action set, the query and the model the method already queries);
7. judges validity with the model itself, ``model.predict(X_cf) == 1`` (and ``found`` where
   the search step reports rows it gave up on, FACE's unreachable queries), and assembles the
   :class:`RecourseResult` (factuals, counterfactuals, valid, ``method.name``, ``n_iter``,
   seconds, ``info`` = the static ``info`` plus the search step's, ``paths``).

The search step returns a :class:`SearchOutput`; only ``counterfactuals`` is required.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.recourse.registry import check_compatible, model_capabilities
from recourse_privacy.validation import check_matrix

NORMS = ("l0", "l1", "l2", "linf")
#: the norms a recourse method's ``norm`` parameter may take (the search norms; costs use any of NORMS)
SEARCH_NORMS = ("l1", "l2")
#: the order of each search norm, for ``np.linalg.norm(..., ord=)``
NORM_ORD = {"l1": 1, "l2": 2}


def check_norm(norm, name: str = "norm", allowed: tuple[str, ...] = SEARCH_NORMS) -> str:
    """Return ``norm`` if it is one of ``allowed`` (``"l1"``, ``"l2"``), else raise naming the parameter."""
    if not isinstance(norm, str) or norm not in allowed:
        raise InvalidInputError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {norm!r}")
    return norm


#: values per row chunk of :func:`distances` (its transients are two chunks, not two n x d arrays)
_DISTANCE_CHUNK = 2**21


def distances(X: np.ndarray, X_cf: np.ndarray, norm: str = "l1") -> np.ndarray:
    """Row-wise cost between factuals and counterfactuals: l0 (changed features), l1, l2 (not squared), linf.

    Large inputs go in row chunks (each row's cost is its own: the same numbers), so that the
    differences of 5,000 x 7,000 rows (Figure 2's targets) are 16 MB at a time, not 280 MB twice.
    """
    X, X_cf = np.asarray(X), np.asarray(X_cf)
    if X.ndim == 2 and X.size > _DISTANCE_CHUNK and X.shape == X_cf.shape and norm in NORMS:
        rows = max(1, _DISTANCE_CHUNK // max(X.shape[1], 1))
        return np.concatenate(
            [_row_distances(X[s : s + rows], X_cf[s : s + rows], norm) for s in range(0, len(X), rows)]
        )
    return _row_distances(X, X_cf, norm)


def _row_distances(X: np.ndarray, X_cf: np.ndarray, norm: str) -> np.ndarray:
    delta = np.asarray(X_cf, dtype=np.float64) - np.asarray(X, dtype=np.float64)
    if norm == "l1":
        return np.abs(delta).sum(axis=1)
    if norm == "l2":
        return np.sqrt((delta**2).sum(axis=1))
    if norm == "linf":
        return np.abs(delta).max(axis=1, initial=0.0)
    if norm == "l0":
        return (np.abs(delta) > 1e-8).sum(axis=1).astype(np.float64)
    raise InvalidInputError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")


@dataclass(frozen=True)
class RecourseResult:
    """Counterfactuals aligned row by row with their factuals; failures are kept, flagged by ``valid``."""

    factuals: np.ndarray
    counterfactuals: np.ndarray
    valid: np.ndarray
    method: str
    n_iter: np.ndarray | None = None
    seconds: float = 0.0
    info: dict = field(default_factory=dict)
    #: for path-based methods (FACE): one (k_i, d) array per row, from the factual to the counterfactual
    paths: tuple | None = None

    def distance(self, norm: str = "l1") -> np.ndarray:
        """Cost of each counterfactual (see :func:`distances`)."""
        return distances(self.factuals, self.counterfactuals, norm)

    @property
    def validity(self) -> float:
        """Share of rows whose counterfactual the model accepts."""
        return float(np.mean(self.valid)) if len(self.valid) else float("nan")

    def summary(self) -> dict:
        """Validity and mean costs over all rows (invalid rows included, and counted)."""
        return {
            "method": self.method,
            "n": int(len(self.valid)),
            "validity": self.validity,
            "n_invalid": int((~self.valid).sum()),
            "mean_l1": float(self.distance("l1").mean()) if len(self.valid) else float("nan"),
            "mean_l2": float(self.distance("l2").mean()) if len(self.valid) else float("nan"),
            "seconds": float(self.seconds),
        }


@runtime_checkable
class RecourseMethod(Protocol):
    """A recourse generator: ``generate(model, X)`` for a batch of points the model rejects.

    A method that learns from data (a VAE, a graph of data points) also has
    ``fit(X, y, model) -> self``; :func:`fit_for` calls it on the right data in each world
    (the owner's training set for the owner, a shadow training set for each shadow model).
    """

    name: str

    def generate(self, model, X: np.ndarray) -> RecourseResult: ...


def fit_for(method, X: np.ndarray, y: np.ndarray, model):
    """A copy of ``method`` fitted on ``(X, y)`` for ``model`` if it learns from data; else ``method`` itself."""
    if not callable(getattr(method, "fit", None)):
        return method
    return copy.deepcopy(method).fit(X, y, model)


@dataclass(frozen=True)
class SearchOutput:
    """What a method's search step (``_search``) returns for the rows it was given, in their order.

    ``counterfactuals`` (m, d) float64; ``n_iter`` (m,) int, the iteration where each row's
    search stopped (-1: never found), or None where the method has no iterations; ``found``
    (m,) bool, only for a method that can give up on a row whose counterfactual the model might
    still accept (FACE: a query with no reachable candidate keeps itself): such rows are
    flagged invalid; ``paths``, one (k_i, d) array per row (FACE); ``info``, extras of this
    call (per-row arrays, whose first axis is the rows, are joined across chunks; any other
    value is taken from the last chunk).
    """

    counterfactuals: np.ndarray
    n_iter: np.ndarray | None = None
    found: np.ndarray | None = None
    paths: tuple | None = None
    info: dict = field(default_factory=dict)


def generate_recourse(
    method, model, X: np.ndarray, *, info: dict | None = None, skip_accepted: bool = False
) -> RecourseResult:
    """The shared ``generate``: checks, chunking, timing, validity and the result (see the module docstring).

    ``info`` holds the method's static description (hyperparameters), merged with the search
    step's ``SearchOutput.info``. ``skip_accepted``: rows the model already accepts are
    returned unchanged with ``n_iter`` 0 and never searched.
    """
    check_supports(method, model)
    X = check_matrix(X, n_features=model.n_features_in_)
    if callable(getattr(method, "_check_fitted", None)):
        method._check_fitted(X)
    action_set = getattr(method, "action_set", None)
    if action_set is not None:
        action_set.check(X.shape[1])
    t0 = time.perf_counter()
    if callable(getattr(method, "_begin", None)):
        state = method._begin(model)
    else:
        state = model.torch_module() if "gradients" in getattr(method, "needs", ()) else None
        if state is not None and getattr(method, "device_aware", False):
            from recourse_privacy.models.torch_utils import module_on_device

            state = module_on_device(state)
    if skip_accepted:
        rejected = model.predict(X) == 0 if len(X) else np.zeros(0, bool)
        # a rejected row that nothing may move (every mutable value missing in it) has no recourse: not searched
        gaps = action_set is not None and action_set.holds_gaps
        stuck = rejected & action_set.stuck(X) if gaps else np.zeros_like(rejected)
        todo = np.flatnonzero(rejected & ~stuck)
        out = _search_in_chunks(method, model, X[todo], state)
        X_cf, n_iter = X.copy(), np.zeros(len(X), dtype=np.int64)
        X_cf[todo] = out.counterfactuals
        n_iter[stuck] = -1
        if out.n_iter is not None:
            n_iter[todo] = out.n_iter
        out = SearchOutput(X_cf, n_iter, info=out.info)
    else:
        out = _search_in_chunks(method, model, X, state)
    extra: dict = {}
    if action_set is not None and len(X):  # every method's output honours the set; validity is judged after
        norm = getattr(method, "norm", "l1")
        X_cf, extra = project_and_repair(action_set, model, X, out.counterfactuals, norm if norm in NORMS else "l1")
        paths = None if out.paths is None else _project_paths(action_set, X, X_cf, out.paths)
        out = SearchOutput(X_cf, out.n_iter, out.found, paths, out.info)
    valid = model.predict(out.counterfactuals) == 1 if len(X) else np.zeros(0, bool)
    if out.found is not None:
        valid &= out.found
    if getattr(method, "sparse", False) and len(X):  # only the changes the model needs (recourse/sparse.py)
        out = _sparse_output(action_set, model, X, out, valid)
    return RecourseResult(
        X,
        out.counterfactuals,
        valid,
        method.name,
        n_iter=out.n_iter,
        seconds=time.perf_counter() - t0,
        info={**(info or {}), **out.info, **extra},
        paths=out.paths,
    )


def _sparse_output(action_set, model, X: np.ndarray, out: SearchOutput, valid: np.ndarray) -> SearchOutput:
    """``out`` with each valid counterfactual's changes the model does not need set back (a one-hot group as one
    feature, missing-value indicators never moved); its paths dropped: they end at the method's own answer."""
    from recourse_privacy.recourse.sparse import feature_units, sparse_counterfactuals

    groups = action_set.groups if action_set is not None else ()
    fixed = [f.flag for f in action_set.flags] if action_set is not None else []
    X_cf = sparse_counterfactuals(model, X, out.counterfactuals, valid, feature_units(X.shape[1], groups, fixed))
    return SearchOutput(X_cf, out.n_iter, out.found, None, {**out.info, "sparse": True})


#: candidate values (rows x candidates x features) built at a time in the repair
_REPAIR_BLOCK = 2**22


def project_and_repair(action_set, model, X: np.ndarray, X_cf: np.ndarray, norm: str = "l1"):
    """Counterfactuals on the valid set of ``action_set``, repaired where projecting lost acceptance.

    Every row is projected (:meth:`ActionSet.project`: one-hot groups to a single level,
    integers to integers, then the actionability rules). A row whose raw counterfactual the
    model accepted but whose projection it rejects is repaired on the valid set, all such
    rows at once (in blocks): the candidates are the projection and the projection with its
    integer features rounded away from the factual (towards and past the decision boundary),
    the same for the search's step extended 1.25, 1.5, 2 and 3 times (a line search along the
    method's own direction), and the first two each with every level of every mutable one-hot
    group that the search changed in any of these rows; the cheapest candidate (``norm`` cost to the factual) the model accepts
    wins, else the row keeps its projection (and is flagged invalid by the caller).

    Returns the counterfactuals and ``{"n_projection_lost": ..., "n_repaired": ...}``.
    """
    P = action_set.project(X_cf, X)
    lost = np.flatnonzero((model.predict(X_cf) == 1) & (model.predict(P) != 1))
    stats = {"n_projection_lost": int(len(lost)), "n_repaired": 0}
    if not len(lost):
        return P, stats
    changed = np.abs(X_cf[lost] - X[lost]) > 1e-12
    groups = [g for g in action_set.groups if not action_set.immutable[g.index].all() and changed[:, g.index].any()]
    n_cand = 2 * (len(_REPAIR_STEPS) + sum(g.size + int(g.allow_none) for g in groups))
    step = max(1, _REPAIR_BLOCK // (n_cand * X.shape[1]))
    for i in range(0, len(lost), step):
        rows = lost[i : i + step]
        C = _repair_candidates(action_set, groups, X[rows], X_cf[rows], P[rows])
        m, k, d = C.shape
        ok = (model.predict(C.reshape(-1, d)) == 1).reshape(m, k)
        cost = np.where(ok, distances(np.repeat(X[rows], k, axis=0), C.reshape(-1, d), norm).reshape(m, k), np.inf)
        best = np.argmin(cost, axis=1)
        fixed = np.isfinite(cost[np.arange(m), best])
        P[rows[fixed]] = C[np.flatnonzero(fixed), best[fixed]]
        stats["n_repaired"] += int(fixed.sum())
    return P, stats


def _project_paths(action_set, X: np.ndarray, X_cf: np.ndarray, paths: tuple) -> tuple:
    """Every point of every path on the valid set (one projection for all), each path ending at its counterfactual."""
    lengths = np.array([len(p) for p in paths])
    if not lengths.sum():
        return paths
    points = action_set.project(np.concatenate(paths), np.repeat(X, lengths, axis=0))
    out = np.split(points, np.cumsum(lengths)[:-1])
    for p, cf in zip(out, X_cf):  # a view per path: writes the end point in place
        if len(p):
            p[-1] = cf
    return tuple(out)


#: how far the repair extends the search's own step (x + t (x_cf - x)) to win back acceptance
_REPAIR_STEPS = (1.0, 1.25, 1.5, 2.0, 3.0)


def _repair_candidates(action_set, groups, X: np.ndarray, X_raw: np.ndarray, P: np.ndarray) -> np.ndarray:
    """(rows, candidates, d) valid candidates of :func:`project_and_repair` for these rows.

    For each step t in ``_REPAIR_STEPS``: the search's step scaled by t, projected, and projected
    with its integers rounded away from the factual; then every level of every group in
    ``groups`` on the unscaled two (t = 1).
    """
    j = np.flatnonzero(action_set.integer & action_set.mutable) if action_set.integer is not None else []
    scale, offset = action_set.units()
    x = X[:, j] * scale[j] + offset[j]
    bases = []
    for t in _REPAIR_STEPS:
        raw = X + t * (X_raw - X)
        nearest = P if t == 1.0 else action_set.project(raw, X)
        away = nearest.copy()
        if len(j):
            v = raw[:, j] * scale[j] + offset[j]
            away[:, j] = (np.where(v >= x, np.ceil(v), np.floor(v)) - offset[j]) / scale[j]
        bases += [nearest, away]
    candidates = list(bases)
    for g in groups:
        levels = [np.where(np.arange(g.size) == k, g.on, g.off) for k in range(g.size)]
        if g.allow_none:
            levels.append(g.off)
        for base in bases[:2]:
            for level in levels:
                c = base.copy()
                c[:, g.index] = level
                candidates.append(c)
    return action_set.project(np.stack(candidates, axis=1), X[:, None, :])


def _search_in_chunks(method, model, X: np.ndarray, state) -> SearchOutput:
    """``method._search`` on chunks of ``method.batch_size`` rows (once on all rows, even none), joined in order."""
    step = getattr(method, "batch_size", None) or max(len(X), 1)
    parts = [method._search(model, X[i : i + step], state) for i in range(0, max(len(X), 1), step)]
    if len(parts) == 1:
        return parts[0]

    def join(values):
        return None if values[0] is None else np.concatenate(values)

    last = parts[-1].info
    return SearchOutput(
        join([p.counterfactuals for p in parts]),
        n_iter=join([p.n_iter for p in parts]),
        found=join([p.found for p in parts]),
        paths=None if parts[0].paths is None else tuple(q for p in parts for q in p.paths),
        info={
            k: np.concatenate([p.info[k] for p in parts]) if isinstance(v, np.ndarray) else v for k, v in last.items()
        },
    )


def check_supports(method, model) -> None:
    """Raise a clear error where ``method`` cannot run on ``model`` (e.g. exact linear recourse on an MLP)."""
    check_compatible(method, model_capabilities(model), type(model).__name__)
