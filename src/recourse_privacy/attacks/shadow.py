"""Shadow models of the adversary: trained on its own pool, queried for recourse like the owner's.

Each shadow model trains on a subset of the adversary's pool chosen by a balanced keep
matrix (as in LiRA: every pool point is in the same number of shadow training sets). The
targets are never in the pool, so every shadow model is an "out" model for every target
(the offline setting of Pawelczyk et al. 2023, Algorithm 1). Pool points that some shadows trained on
and others did not form the adversary's own labelled game, used to decide test directions.

With ``online=True`` the reference models train on random halves of the pool *and the targets*
(LiRA's online setting, Carlini et al. 2022, Algorithm 1): the keep matrix covers the targets too,
each target in exactly half of the models (an even number of them), so that every target has in-
and out-statistics (``ShadowData.keep_targets``). The targets' own labels ``y`` are part of the
adversary's view of a target (x, y); their membership is never read.
"""

from __future__ import annotations

import itertools
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from recourse_privacy.cache import ArtifactCache
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.base import logit_confidence
from recourse_privacy.models.batched import can_batch, fit_mlps_batched
from recourse_privacy.models.cached import fit_batch_cached, fit_cached
from recourse_privacy.provenance import sha256_arrays
from recourse_privacy.recourse.base import RecourseResult
from recourse_privacy.recourse.cached import cached_fit_for
from recourse_privacy.validation import as_generator, check_positive_int

_FIELDS = (
    "cfd_targets",
    "usable_targets",
    "conf_targets",
    "cfd_calib",
    "usable_calib",
    "rejected_calib",
    "conf_calib",
    "train_accuracy",
    "margin_targets",
    "margin_calib",
    "rejected_targets",
)


def balanced_keep(n_points: int, n_shadow: int, fraction: float, random_state=None) -> np.ndarray:
    """(n_points, n_shadow) membership matrix: every shadow trains on exactly floor(fraction * n_points) rows.

    For ``fraction == 0.5`` and an even number of shadows, shadows come in complementary
    pairs (a random half of the pool and the other half), so that every point is in exactly
    half of the shadows (one point per pair sits out when the pool is odd). Otherwise each
    shadow in turn takes the m = floor(fraction * n_points) points that are in the fewest
    shadows so far, ties broken at random: every shadow has exactly m rows, and every point is
    in floor or ceil of n_shadow * m / n_points shadows (LiRA's balance, to within one), with
    training sets that differ from shadow to shadow. Equal sizes let :func:`fit_mlps_batched`
    train the shadows together.
    """
    if not 0 < fraction < 1:
        raise InvalidInputError(f"shadow_fraction must be in (0, 1); got {fraction!r}")
    rng = as_generator(random_state)
    if fraction == 0.5 and n_shadow % 2 == 0:
        half = n_points // 2
        perm = rng.permuted(np.tile(np.arange(n_points), (n_shadow // 2, 1)), axis=1)
        keep = np.zeros((n_points, n_shadow), dtype=bool)
        for j in range(n_shadow // 2):  # a loop over shadow pairs, not over points
            keep[perm[j, :half], 2 * j] = True
            keep[perm[j, half : 2 * half], 2 * j + 1] = True
        return keep
    m = max(1, int(np.floor(fraction * n_points)))
    keep = np.zeros((n_points, n_shadow), dtype=bool)
    load = np.zeros(n_points)
    for k in range(n_shadow):  # a loop over shadows: each takes the m least-used points, ties broken at random
        chosen = np.argpartition(load + rng.random(n_points), m - 1)[:m]
        keep[chosen, k] = True
        load[chosen] += 1
    return keep


@dataclass
class ShadowData:
    """Per-shadow statistics of the targets and of the adversary's calibration points (rows x shadows)."""

    keep_calib: np.ndarray  # calibration point was in shadow k's training set
    cfd_targets: np.ndarray  # counterfactual distance of each target under shadow k
    usable_targets: np.ndarray  # shadow k rejects the target and its recourse is valid
    conf_targets: np.ndarray  # logit-scaled confidence of the target's true label under shadow k
    cfd_calib: np.ndarray
    usable_calib: np.ndarray
    rejected_calib: np.ndarray
    conf_calib: np.ndarray
    train_accuracy: np.ndarray  # (n_shadow,)
    train_rows: np.ndarray | None = None  # (n_shadow,) training rows of each shadow model
    # linear shadow models only (zeros otherwise): the exact L2 distance |w_k.x + b_k| / ||w_k|| to shadow k's
    # boundary (what the LR reconstruction attack compares a target's rebuilt distance with), and rejection
    margin_targets: np.ndarray | None = None
    margin_calib: np.ndarray | None = None
    rejected_targets: np.ndarray | None = None
    # online reference models only (None offline): target i was in reference model k's training set
    keep_targets: np.ndarray | None = None
    calib_index: np.ndarray | None = None  # (n_calib,) rows of the pool the calibration points are

    def __post_init__(self) -> None:
        if self.train_rows is None:  # unknown (e.g. built by hand): every shadow as the calibration points suggest
            self.train_rows = self.keep_calib.sum(axis=0)

    @property
    def n_shadow(self) -> int:
        return int(self.cfd_targets.shape[1])

    @property
    def online(self) -> bool:
        """Whether the targets were in some reference models' training sets (LiRA's online setting)."""
        return self.keep_targets is not None

    @property
    def out_targets(self) -> np.ndarray:
        """(targets x models): the models an offline attack may read for each target, those never trained on it.

        Every model for offline shadow models; with online reference models serving as the offline set
        (one set for both, as LiRA's are, Carlini et al. 2022), the models of the keep matrix's other half.
        """
        if self.keep_targets is None:
            return np.ones(self.cfd_targets.shape, dtype=bool)
        return ~self.keep_targets

    @property
    def offline_references(self) -> str:
        """What an offline attack's reference for a target is (said in its conventions)."""
        if self.keep_targets is None:
            return f"all {self.n_shadow} shadow models (none trained on any target)"
        n_out = self.out_targets.sum(axis=1)
        return (
            f"the out-models among {self.n_shadow} online reference models (each target's "
            f"{int(n_out.min()) if len(n_out) else 0}-{int(n_out.max()) if len(n_out) else 0} models that "
            "never trained on it; one set for the offline and online attacks)"
        )

    @property
    def game_calib(self) -> np.ndarray:
        """(n_calib,) calibration rows of an offline attack's direction game (each model in turn the target).

        Every row for offline shadow models (each pool row drawn into about half of them). For online
        reference models, only the rows the keep matrix drew membership for (in some models, out of
        others): the rest (pool rows no model trained on) come from another population, and as
        pseudo-non-members they would decide the direction by that difference, not by membership.
        """
        if self.keep_targets is None:
            return np.ones(len(self.keep_calib), dtype=bool)
        return self.keep_calib.any(axis=1) & ~self.keep_calib.all(axis=1)

    def subset(self, columns) -> ShadowData:
        """The statistics of the reference models ``columns`` only (a smaller budget of the same models)."""
        cols = np.asarray(columns, dtype=np.intp)
        if cols.ndim != 1 or not len(cols) or cols.min() < 0 or cols.max() >= self.n_shadow:
            raise InvalidInputError(f"columns must index the {self.n_shadow} reference models; got {columns!r}")
        per_model = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "calib_index"}
        return ShadowData(
            **{k: v[..., cols] if v is not None else None for k, v in per_model.items()}, calib_index=self.calib_index
        )


def _entry_digest(res: dict) -> str:
    return sha256_arrays(*(np.asarray(res[name]) for name in _FIELDS))


def _read_entry(path: Path, inputs_key: str, n_targets: int, n_calib: int) -> dict | None:
    """A cached shadow's statistics if computed from these very inputs and unaltered since; else None."""
    try:
        with np.load(path, allow_pickle=False) as f:
            if str(f["_inputs"]) != inputs_key:
                return None
            res = {name: f[name] for name in _FIELDS}
            digest = str(f["_digest"])
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # absent, truncated, an older layout
        return None
    if digest != _entry_digest(res):
        return None
    if any(res[f"{n}_targets"].shape != (n_targets,) for n in ("cfd", "usable", "conf")) or any(
        res[f"{n}_calib"].shape != (n_calib,) for n in ("cfd", "usable", "rejected", "conf")
    ):
        return None
    return res


#: rows x features x 8 bytes above which recourse is generated in row chunks (each row's counterfactual is its own)
CHUNK_BYTES = 2**26


def generate_in_row_chunks(generate: Callable[[np.ndarray], RecourseResult], X: np.ndarray) -> RecourseResult:
    """``generate(X)``, in row chunks of at most :data:`CHUNK_BYTES` of float64 where ``X`` is larger.

    Recourse is per row (a counterfactual depends on its own factual only), so the rows are the same;
    the transient arrays of one call (moves, bounds, projections: several copies of ``X``) shrink to
    a chunk's (at d = 7,000, 5,000 targets are 280 MB per copy), and each chunk's counterfactuals go
    straight into the one output array. Small inputs are one call, as before.
    """
    rows = max(1, CHUNK_BYTES // (8 * max(int(X.shape[1]) if X.ndim == 2 else 1, 1)))
    if len(X) <= rows:
        return generate(X)
    counterfactuals, factual_parts, parts, method, info = None, [], [], None, None
    same = True  # the factuals are the input rows (no second copy) where every chunk returned its rows unchanged
    for start in range(0, len(X), rows):
        part = generate(X[start : start + rows])
        if counterfactuals is None:
            method, info = part.method, part.info
            counterfactuals = np.empty((len(X), *part.counterfactuals.shape[1:]), dtype=part.counterfactuals.dtype)
        counterfactuals[start : start + rows] = part.counterfactuals
        same = same and np.array_equal(part.factuals, X[start : start + rows])
        factual_parts.append(None if same else part.factuals)
        parts.append((part.valid, part.n_iter, part.seconds, part.paths))  # a chunk's arrays go, not its summary
    if not same:
        factual_parts = [X[i * rows : (i + 1) * rows] if f is None else f for i, f in enumerate(factual_parts)]
    valid, n_iter, seconds, paths = zip(*parts)
    return RecourseResult(
        factuals=np.asarray(X, dtype=np.float64) if same else np.vstack(factual_parts),
        counterfactuals=counterfactuals,
        valid=np.concatenate(valid),
        method=method,
        n_iter=None if any(n is None for n in n_iter) else np.concatenate(n_iter),
        seconds=float(sum(seconds)),
        info=info,
        paths=None if any(p is None for p in paths) else tuple(q for p in paths for q in p),
    )


def _distance_and_validity(
    recourse, model, X: np.ndarray, distance: str, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (of ``X[rows]``, default all) counterfactual distance and validity, generated in row
    chunks where ``X`` is large; each chunk's rows gathered on their own (no copy of all of ``X[rows]``)."""
    rows = np.arange(len(X)) if rows is None else np.asarray(rows)
    step = max(1, CHUNK_BYTES // (8 * max(X.shape[1], 1)))
    cfd, valid = [], []
    for start in range(0, len(rows), step):
        res = recourse.generate(model, X[rows[start : start + step]])
        cfd.append(res.distance(distance))
        valid.append(res.valid)
    return np.concatenate(cfd), np.concatenate(valid)


def _shadow_stats(
    k, model, recourse, distance, X_pool, y_pool, keep, X_t, y_t, X_c, y_c, need_cfd, artifacts=None, train=None
):
    """Model k's statistics of the targets and calibration points; ``train``: its training rows (X, y), if
    already gathered (one copy of them, not one per use: 280 MB at 5,000 x 7,000)."""
    if train is None:
        idx = np.flatnonzero(keep[:, k])
        train = X_pool[idx], y_pool[idx]
    X_k, y_k = train
    recourse = cached_fit_for(recourse, X_k, y_k, model, artifacts, role="shadow recourse", norms=(distance,))
    out = {"train_accuracy": np.array(np.mean(model.predict(X_k) == y_k))}
    if isinstance(train, list):  # the caller's rows, read: they go before the targets' recourse
        train.clear()
    del X_k, y_k
    for tag, X, y in (("targets", X_t, y_t), ("calib", X_c, y_c)):
        rejected = model.predict(X) == 0
        cfd = np.zeros(len(X))
        usable = np.zeros(len(X), dtype=bool)
        if need_cfd and rejected.any():
            cfd[rejected], valid = _distance_and_validity(recourse, model, X, distance, np.flatnonzero(rejected))
            usable[rejected] = valid & (cfd[rejected] > 0)
        out[f"cfd_{tag}"] = cfd
        out[f"usable_{tag}"] = usable
        out[f"conf_{tag}"] = logit_confidence(model, X, y)
        out[f"rejected_{tag}"] = rejected
        w = getattr(model, "coef_", None)
        norm = float(np.linalg.norm(w)) if w is not None else 0.0
        out[f"margin_{tag}"] = np.abs(model.decision_function(X)) / norm if norm > 0 else np.zeros(len(X))
    return out


def _rows_float64(X: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``X[idx]`` as float64, gathered in row chunks where ``X`` is narrower (float32 pools,
    ``audit.stages.stores_float32``): the model reads float64, and no float32 copy of the rows sits beside it."""
    if X.dtype == np.float64:
        return X[idx]
    out = np.empty((len(idx), *X.shape[1:]), dtype=np.float64)
    step = max(1, CHUNK_BYTES // (8 * max(int(np.prod(X.shape[1:])), 1)))
    for start in range(0, len(idx), step):
        out[start : start + step] = X[idx[start : start + step]]
    return out


def _one_shadow(k, make_model, recourse, distance, X_pool, y_pool, keep, *rest):
    idx = np.flatnonzero(keep[:, k])
    train = [_rows_float64(X_pool, idx), y_pool[idx]]  # a list _shadow_stats empties once it has read the rows
    model = fit_cached(make_model(k), *train, rest[-1], role="shadow models")
    return _shadow_stats(k, model, recourse, distance, X_pool, y_pool, keep, *rest, train=train)


def _one_shadow_counted(k, *args):
    """:func:`_one_shadow` in a worker process, with its own cache counters: (statistics, counters)."""
    artifacts = args[-1].child() if args[-1] is not None else None
    res = _one_shadow(k, *args[:-1], artifacts)
    return res, (artifacts.stats_dict() if artifacts is not None else {})


def _training_set(X_pool, y_pool, X_targets, y_targets, online: bool, online_rows):
    """(X_train, y_train, rows): what the models train on; online, pool rows ``rows`` then the targets."""
    n_pool = len(X_pool)
    if not online:
        return X_pool, y_pool, None
    rows = np.arange(n_pool) if online_rows is None else np.unique(np.asarray(online_rows, dtype=np.intp))
    if rows.size and (rows[0] < 0 or rows[-1] >= n_pool):
        raise InvalidInputError(f"online_rows must index the {n_pool} pool rows")
    return np.vstack([X_pool[rows], X_targets]), np.concatenate([y_pool[rows], y_targets]), rows


def _check_two_classes(y_train: np.ndarray, keep: np.ndarray) -> None:
    """One clear error, before any training, where a model's training set would hold one class only."""
    one_class = [k for k in range(keep.shape[1]) if np.unique(y_train[keep[:, k]]).size < 2]
    if one_class:
        k = one_class[0]
        raise InvalidInputError(
            f"shadow model {k} would train on {int(keep[:, k].sum())} rows of the adversary's pool of {len(y_train)} "
            "(shadow_fraction of it), all of one class: give the adversary a larger pool (--n-adversary)"
        )


def _calibration_keep(keep: np.ndarray, calib: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Which models trained on each calibration row (pool rows ``calib``); online, rows outside ``rows`` in none."""
    if rows is None:
        return keep[calib]
    keep_calib = np.zeros((len(calib), keep.shape[1]), dtype=bool)
    pos = np.searchsorted(rows, calib)
    inside = (pos < len(rows)) & (rows[np.minimum(pos, len(rows) - 1)] == calib) if len(rows) else pos < 0
    keep_calib[inside] = keep[pos[inside]]
    return keep_calib


class _EntryStore:
    """Each finished model's statistics in ``cache/<prefix><k>.npz``, keyed by the exact inputs (None: no cache).

    An entry whose key or digest does not match is recomputed, never used; written atomically.
    """

    def __init__(self, cache_dir, prefix: str, inputs_key: str, n_targets: int, n_calib: int):
        self.cache = Path(cache_dir) if cache_dir is not None else None
        if self.cache is not None:
            self.cache.mkdir(parents=True, exist_ok=True)
        self.prefix, self.key, self.shape = prefix, inputs_key, (n_targets, n_calib)

    def read(self, k: int) -> dict | None:
        if self.cache is None:
            return None
        return _read_entry(self.cache / f"{self.prefix}{k}.npz", self.key, *self.shape)

    def write(self, k: int, res: dict) -> None:
        if self.cache is None:
            return
        tmp = self.cache / f".{self.prefix}{k}.{os.getpid()}.tmp.npz"
        np.savez(tmp, **res, _inputs=np.array(self.key), _digest=np.array(_entry_digest(res)))
        os.replace(tmp, self.cache / f"{self.prefix}{k}.npz")


def _for_worlds(recourse, models, X_t, X_c):
    """``recourse`` searching every model's rejected targets and calibration points at once, where the method
    can (``for_worlds``: SCFE over stacked networks, :mod:`recourse_privacy.recourse.scfe_stacked`); else itself."""
    if not callable(getattr(recourse, "for_worlds", None)):
        return recourse
    return recourse.for_worlds(models, [[X[m.predict(X) == 0] for X in (X_t, X_c)] for m in models])


#: Python threads that query the reference worlds at once (each world's search in one torch thread), where a
#: second core is free (:func:`spare_core`)
QUERY_WORKERS = 2

#: ``1`` (``on``, ``true``, ``yes``): both cores where the process may use two; ``auto`` (the default, also when
#: unset): both where the machine also has one idle; ``0`` (``off``): one (see :func:`spare_core`)
PARALLEL_ENV = "RECOURSE_PRIVACY_OVERLAP"


def spare_core() -> bool:
    """Whether the audit puts a second core to work (Python threads beside its own): ``$RECOURSE_PRIVACY_OVERLAP``
    ``1`` where the process may use two cores or more; ``auto`` (the default) where, besides, at least 1.5 CPUs were
    idle over a 0.2 s sample of ``/proc/stat`` (:func:`~recourse_privacy.processes.idle_cpus`; our own threads wait
    meanwhile, so one core for them and one spare), or where there is no ``/proc/stat``, the one-minute load
    average is under the usable cores less one half; ``0``, never. (The load average alone counted the previous
    cell of a grid, or the previous benchmark, for a minute after it ended: a quiet machine ran in order.)

    On the quiet 2-core machine the HELOC GS cell took 49.2 / 45.5 s with both cores against 53.5 / 64.7 s in
    order (stop 33); on a loaded one the second thread bought nothing and cost up to 25% more CPU (both loops
    dispatch many small torch operations from Python and contend for the interpreter), which is why ``auto``
    asks for an idle core (docs/performance.md, "Both cores in one audit"). The numbers are the same either way."""
    from recourse_privacy import processes

    mode = os.environ.get(PARALLEL_ENV, "auto").strip().lower() or "auto"
    cores = processes.usable_cpus()
    if mode not in {"1", "on", "true", "yes", "auto"} or cores < 2:
        return False
    if mode in {"1", "on", "true", "yes"}:
        return True
    idle = processes.idle_cpus()
    if idle is not None:
        return idle >= 1.5
    try:
        return os.getloadavg()[0] < cores - 0.5
    except (AttributeError, OSError):  # no load average (Windows): the cores are taken as free
        return True


def query_workers(n_worlds: int, spare: bool | None = None) -> int:
    """How many worlds' recourse queries run at once: :data:`QUERY_WORKERS` where a second core is free (``spare``;
    None: :func:`spare_core` now), capped by the usable cores and the worlds; else one."""
    from recourse_privacy.processes import usable_cpus

    if not (spare_core() if spare is None else spare):
        return 1
    return max(1, min(QUERY_WORKERS, usable_cpus(), n_worlds))


def _in_threads(calls: list[Callable[[], dict]], workers: int):
    """Each of ``calls``' results in order, the calls run ``workers`` at a time in Python threads, each thread in one
    torch thread (:func:`~recourse_privacy.models.torch_utils.torch_threads`) and the caller's context (the device
    of :func:`~recourse_privacy.models.device.use_device`). The first failure is raised once the running calls end,
    and the calls not started are cancelled. One torch thread per call with one worker too, so that a world's
    numbers (float32 rounding depends on the thread count) do not depend on whether a second core was free."""
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    from recourse_privacy.models.torch_utils import torch_threads

    if workers <= 1:
        with torch_threads(1):
            yield from (call() for call in calls)
        return
    with torch_threads(1), ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reference-query") as pool:
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _train_and_query(todo, args, finish, *, batched: bool, n_jobs: int, artifacts, fitted=None, spare=None) -> None:
    """Train the models ``todo`` (batched MLPs together, else one by one or in ``n_jobs`` processes), then query
    each for its statistics, handing them to ``finish(k, stats)`` in the order of ``todo``.

    Batched, the worlds' queries run in :func:`query_workers` Python threads (every world's numbers its own: its
    model, its recourse's seed); ``fitted``: models already trained on their rows (:class:`FittedShadows`).
    """
    make_model, _, _, X_train, y_train, keep = args[:6]
    models = [make_model(k) for k in todo]
    if batched and can_batch(models):
        # all shadow networks trained at once (stacked weights), then queried, two worlds at a time
        models = _fit_batched(todo, models, X_train, y_train, keep, artifacts, fitted)
        recourse = _for_worlds(args[1], models, args[6], args[8]) if args[10] else args[1]
        calls = [
            lambda k=k, model=model: _shadow_stats(k, model, recourse, *args[2:]) for k, model in zip(todo, models)
        ]
        # a method planned across the worlds (SCFE's for_worlds) searches all of them at its first query, with this
        # thread's torch threads (its own parallel groups): that query here, the cheap lookups after in threads
        first = [] if recourse is args[1] else [calls.pop(0)()]
        for k, stats in zip(todo, itertools.chain(first, _in_threads(calls, query_workers(len(calls), spare)))):
            finish(k, stats)
    elif n_jobs == 1 or len(todo) <= 1:
        for k in todo:
            finish(k, _one_shadow(k, *args))
    else:
        from joblib import Parallel, delayed

        from recourse_privacy.processes import cap_to_cpus

        par = Parallel(n_jobs=cap_to_cpus(n_jobs, "n_jobs")[0], return_as="generator")
        for k, (res, counted) in zip(todo, par(delayed(_one_shadow_counted)(k, *args) for k in todo)):
            if artifacts is not None:
                artifacts.merge(counted)
            finish(k, res)


def _fit_batched(todo, models, X_train, y_train, keep, artifacts, fitted):
    """``models`` (of worlds ``todo``) trained together on their rows of ``keep``; those of ``fitted`` taken as trained."""
    fitted_models = fitted.models if fitted is not None and np.array_equal(fitted.keep, keep) else {}
    models = [fitted_models.get(k, m) for k, m in zip(todo, models)]
    train = [(k, m) for k, m in zip(todo, models) if k not in fitted_models]
    if train:
        fit_batch_cached(
            [m for _, m in train],
            X_train,
            y_train,
            [np.flatnonzero(keep[:, k]) for k, _ in train],
            artifacts,
            fit_mlps_batched,
            role="shadow models",
        )
    return models


@dataclass(frozen=True)
class FittedShadows:
    """Offline shadow models trained before the targets are known (:func:`fit_shadow_models`): the keep matrix over
    the pool they trained on and the models by world; :func:`run_shadow_models` takes them where its keep matrix is
    this one, and trains the rest."""

    keep: np.ndarray
    models: dict


def fit_shadow_models(
    make_model: Callable[[int], object],
    X_pool: np.ndarray,
    y_pool: np.ndarray,
    *,
    n_shadow: int,
    fraction: float = 0.5,
    random_state=None,
    artifacts: ArtifactCache | None = None,
) -> FittedShadows | None:
    """The offline shadow models of :func:`run_shadow_models` (same arguments, same keep matrix, same networks),
    trained without the targets: their training sets are drawn from the pool alone, so they can train while the
    owner's model, which decides the targets, trains beside them. None where they are not MLPs trained together
    (the only kind worth training ahead)."""
    n_shadow = check_positive_int(n_shadow, "shadow_models")
    keep = balanced_keep(len(X_pool), n_shadow, fraction, as_generator(random_state))  # run_shadow_models' first draw
    models = [make_model(k) for k in range(n_shadow)]
    if not can_batch(models):
        return None
    _check_two_classes(y_pool, keep)
    worlds = list(range(n_shadow))
    return FittedShadows(keep, dict(enumerate(_fit_batched(worlds, models, X_pool, y_pool, keep, artifacts, None))))


def _entry_store(cache_dir, online: bool, settings: tuple, X_train, y_train, X_targets, y_targets, keep, calib,
                 keep_calib) -> _EntryStore:  # fmt: skip
    """The store of each model's statistics, keyed by the exact inputs they are computed from (every entry also
    carries a digest of its own numbers); online and offline entries may share a directory."""
    raw = np.frombuffer(repr(settings).encode(), np.uint8)
    key = sha256_arrays(X_train, y_train, X_targets, y_targets, keep, calib, *((keep_calib,) if online else ()), raw)
    return _EntryStore(cache_dir, "online_" if online else "shadow_", key, len(X_targets), len(calib))


def run_shadow_models(
    make_model: Callable[[int], object],
    recourse,
    X_pool: np.ndarray,
    y_pool: np.ndarray,
    X_targets: np.ndarray,
    y_targets: np.ndarray,
    *,
    n_shadow: int,
    fraction: float = 0.5,
    n_calibration: int = 1000,
    distance: str = "l1",
    need_cfd: bool = True,
    random_state=None,
    cache_dir: str | Path | None = None,
    n_jobs: int = 1,
    batched: bool = True,
    on_done: Callable[[int], None] | None = None,
    artifacts: ArtifactCache | None = None,
    online: bool = False,
    online_rows: np.ndarray | None = None,
    fitted: FittedShadows | None = None,
    spare_core: bool | None = None,
) -> ShadowData:
    """Train ``n_shadow`` shadow models (seeded ``make_model(k)``) and collect their statistics.

    With ``cache_dir``, each finished shadow's statistics are written atomically to ``shadow_<k>.npz``
    and reused on a rerun (a killed run resumes). With ``batched`` (the default), MLP shadow models of
    one architecture train together (:func:`~recourse_privacy.models.batched.fit_mlps_batched`); other
    models train one by one, in ``n_jobs`` processes. With ``artifacts`` (:mod:`recourse_privacy.cache`),
    trained models and their recourse are read from that store where another run computed them.

    With ``online`` (LiRA's online setting) the models train on ``fraction`` of the pool rows
    ``online_rows`` (default all) and the targets together, by one balanced keep matrix over both
    (each target in exactly half of an even number of models at ``fraction`` 0.5); ``keep_targets``
    of the result says which. The caller picks ``online_rows`` so that each model's training set
    looks like the owner's (:func:`~recourse_privacy.audit.stages.train_online_models`). Calibration points
    come from the whole pool (those outside ``online_rows`` out of every model). Such a set also serves the
    offline attacks (each target's out-models, :attr:`ShadowData.out_targets`): an audit of both trains one.

    ``fitted``: models of :func:`fit_shadow_models` (same arguments), used where their keep matrix is this call's;
    ``spare_core``: whether a second core is free for the worlds' queries (None: :func:`spare_core` now)."""
    n_shadow = check_positive_int(n_shadow, "shadow_models")
    rng = as_generator(random_state)
    n_pool = len(X_pool)
    X_train, y_train, rows = _training_set(X_pool, y_pool, X_targets, y_targets, online, online_rows)
    keep = balanced_keep(len(X_train), n_shadow, fraction, rng)
    _check_two_classes(y_train, keep)
    calib = np.sort(rng.choice(n_pool, size=min(n_calibration, n_pool), replace=False))
    keep_calib = _calibration_keep(keep, calib, rows)
    args = (make_model, recourse, distance, X_train, y_train, keep, X_targets, y_targets, X_pool[calib], y_pool[calib],
            need_cfd, artifacts)  # fmt: skip
    store = _entry_store(cache_dir, online, (fraction, distance, need_cfd, n_calibration), X_train, y_train,
                         X_targets, y_targets, keep, calib, keep_calib)  # fmt: skip
    results: dict[int, dict] = {}

    def finish(k: int, res: dict, *, write: bool = True) -> None:
        results[k] = res
        if write:
            store.write(k, res)
        if on_done:
            on_done(k)

    todo = []
    for k in range(n_shadow):  # a killed run's finished models are read back, the others trained
        if (res := store.read(k)) is None:
            todo.append(k)
        else:
            finish(k, res, write=False)
    _train_and_query(todo, args, finish, batched=batched, n_jobs=n_jobs, artifacts=artifacts, fitted=fitted,
                     spare=spare_core)  # fmt: skip

    stack = {name: np.stack([results[k][name] for k in range(n_shadow)], axis=-1) for name in _FIELDS}
    return ShadowData(
        keep_calib=keep_calib,
        **stack,
        train_rows=keep.sum(axis=0),
        keep_targets=keep[len(X_train) - len(X_targets) :] if online else None,
        calib_index=calib,
    )
