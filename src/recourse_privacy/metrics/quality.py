"""Recourse quality: CARLA's metrics per method (Pawelczyk et al. 2021) and Pentyala et al.'s (2023) path metrics.

Per counterfactual: validity (the success rate; the flip ratio of Yang et al. 2022), costs L0/L1/L2/Linf
(true norms, L2 not squared), redundancy and yNN (CARLA), constraint violations
(:func:`constraint_violations`). Per recourse path (FACE): PDensity, PDistanceManifold and
PL0/PL1/PL2 (Pentyala et al. 2023, equations 2-4). :func:`quality_metrics` aggregates them for one
:class:`~recourse_privacy.recourse.RecourseResult` the way CARLA's benchmark does: costs,
redundancy, yNN, violations and path metrics are means over the valid counterfactuals
(CARLA drops the failed rows first); validity and time per counterfactual are over all rows.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.recourse.base import NORMS, distances
from recourse_privacy.validation import check_matrix, check_positive_int


def redundancy(model, X: np.ndarray, X_cf: np.ndarray, *, tol: float = 1e-8) -> np.ndarray:
    """CARLA's redundancy per row: changed features that, reverted alone to the factual value, keep f(x') = 1.

    Every (row, changed feature) pair is tested in one batched model call. Rows whose
    counterfactual the model rejects get NaN (CARLA scores valid counterfactuals only).
    """
    X, X_cf = check_matrix(X, "X"), check_matrix(X_cf, "X_cf", n_features=np.shape(X)[1])
    if X.shape != X_cf.shape:
        raise InvalidInputError(f"X and X_cf must have the same shape; got {X.shape} and {X_cf.shape}")
    out = np.full(len(X), np.nan)
    if not len(X):
        return out
    valid = model.predict(X_cf) == 1
    rows, feats = np.nonzero((np.abs(X_cf - X) > tol) & valid[:, None])
    trial = X_cf[rows].copy()
    trial[np.arange(len(rows)), feats] = X[rows, feats]
    still = model.predict(trial) == 1 if len(rows) else np.zeros(0, bool)
    out[valid] = np.bincount(rows, weights=still, minlength=len(X))[valid]
    return out


def ynn(model, X_cf: np.ndarray, X_train: np.ndarray, *, k: int = 5, valid: np.ndarray | None = None) -> np.ndarray:
    """CARLA's yNN per row: share of the ``k`` nearest training points (L2) that the model labels favourable.

    CARLA's yNN is 1 - mean |f(x') - f(neighbour)| over valid counterfactuals (f(x') = 1),
    which is this share. Rows flagged invalid by ``valid`` get NaN.
    """
    from sklearn.neighbors import NearestNeighbors

    k = check_positive_int(k, "k")
    X_cf, X_train = check_matrix(X_cf, "X_cf"), check_matrix(X_train, "X_train", n_features=np.shape(X_cf)[1])
    if len(X_train) < k:
        raise InvalidInputError(f"yNN needs at least k={k} training points; got {len(X_train)}")
    out = np.full(len(X_cf), np.nan)
    rows = np.ones(len(X_cf), bool) if valid is None else np.asarray(valid, bool)
    if not rows.any():
        return out
    ind = NearestNeighbors(n_neighbors=k).fit(X_train).kneighbors(X_cf[rows], return_distance=False)
    fav = model.predict(X_train) == 1
    out[rows] = fav[ind].mean(axis=1)
    return out


def constraint_violations(action_set, X: np.ndarray, X_cf: np.ndarray, *, tol: float = 1e-8) -> np.ndarray:
    """Violated constraints per row: :meth:`ActionSet.violations` with each range widened to hold the factual.

    A factual already outside a feature's range (a held-out point beyond the training
    minimum or maximum) is not charged for keeping that feature, as in
    :meth:`ActionSet.project`; moving it further out, or any other violation, is counted.
    """
    X, X_cf = check_matrix(X, "X"), check_matrix(X_cf, "X_cf", n_features=np.shape(X)[1])
    action_set.check(X.shape[1])
    changed_immutable = (np.abs(X_cf - X) > tol) & action_set.immutable
    decreased = (X_cf < X - tol) & action_set.increasing
    lo, hi = np.minimum(action_set.lower, X), np.maximum(action_set.upper, X)
    out_of_range = (X_cf < lo - tol) | (X_cf > hi + tol)
    return (changed_immutable | decreased | out_of_range).sum(axis=1)


def path_metrics(
    paths, X_train: np.ndarray, *, kde=None, bandwidth: float | str = "scott", tol: float = 1e-8
) -> dict[str, np.ndarray]:
    """Pentyala et al.'s (2023) path metrics per path; each path is (factual, Z_1, ..., Z_p), factual first.

    - PDensity (eq. 2): mean over Z_1..Z_p of the log-likelihood under a Gaussian KDE of the
      training data (``kde``, a fitted scikit-learn ``KernelDensity``, else one fitted here
      with ``bandwidth``, Scott's rule by default; Pentyala et al. 2023 do not state its bandwidth);
    - PDistanceManifold (eq. 3): mean L1 distance of Z_1..Z_p to their nearest training point;
    - PL0 / PL1 / PL2 (eq. 4): (d(Z, Z_1) + sum_i d(Z_i, Z_{i+1})) / p with d the L0
      (changes above ``tol``), L1 and L2 distance.

    Paths of one point (no recourse, p = 0) get NaN. All points of all paths are scored in
    one KDE call and one nearest-neighbour query.
    """
    from sklearn.neighbors import KernelDensity, NearestNeighbors

    X_train = check_matrix(X_train, "X_train")
    paths = [check_matrix(p, "path", n_features=X_train.shape[1]) for p in paths]
    n = len(paths)
    out = {k: np.full(n, np.nan) for k in ("pdensity", "pdistance_manifold", "pl0", "pl1", "pl2")}
    lens = np.array([len(p) - 1 for p in paths], dtype=np.int64)  # p: steps after the factual
    if not n or not (lens > 0).any():
        return out
    owner = np.repeat(np.arange(n), lens + 1)
    allp = np.concatenate(paths)
    is_step = np.concatenate([np.arange(len(p)) > 0 for p in paths])  # Z_1..Z_p, not the factual
    steps, step_owner = allp[is_step], owner[is_step]
    p = np.maximum(lens, 1).astype(np.float64)
    has = lens > 0
    if kde is None:
        kde = KernelDensity(kernel="gaussian", bandwidth=bandwidth).fit(X_train)
    out["pdensity"][has] = (np.bincount(step_owner, weights=kde.score_samples(steps), minlength=n) / p)[has]
    nn_dist = np.abs(
        steps - X_train[NearestNeighbors(n_neighbors=1).fit(X_train).kneighbors(steps, return_distance=False)[:, 0]]
    ).sum(axis=1)
    out["pdistance_manifold"][has] = (np.bincount(step_owner, weights=nn_dist, minlength=n) / p)[has]
    same = owner[1:] == owner[:-1]  # consecutive points of one path
    delta = (allp[1:] - allp[:-1])[same]
    seg_owner = owner[1:][same]
    for key, d in (
        ("pl0", (np.abs(delta) > tol).sum(axis=1).astype(np.float64)),
        ("pl1", np.abs(delta).sum(axis=1)),
        ("pl2", np.sqrt((delta**2).sum(axis=1))),
    ):
        out[key][has] = (np.bincount(seg_owner, weights=d, minlength=n) / p)[has]
    return out


def quality_metrics(
    result,
    model,
    X_train: np.ndarray,
    *,
    action_set=None,
    k: int = 5,
    kde=None,
    bandwidth: float | str = "scott",
    tol: float = 1e-6,
) -> dict[str, float]:
    """CARLA's metric set for one recourse result (and the path metrics of Pentyala et al. 2023 when it has paths).

    Returns a flat dict: ``n``, ``n_valid``, ``validity``, ``l0``/``l1``/``l2``/``linf``,
    ``redundancy``, ``ynn``, ``violations`` (means over valid rows; NaN when none is valid),
    ``seconds_per_cf`` (generation time over all rows) and, for path methods, ``pdensity``,
    ``pdistance_manifold``, ``pl0``, ``pl1``, ``pl2``, ``path_length`` (means over valid rows).
    A feature counts as changed (L0, PL0, redundancy, violations) when it moved by more than
    ``tol``: 1e-6 ignores the float32 rounding (about 1e-7 relative) of methods that search
    in a float32 network's precision.
    """
    X, X_cf, valid = result.factuals, result.counterfactuals, np.asarray(result.valid, bool)
    n = len(valid)

    def mean(v):
        v = np.asarray(v, dtype=np.float64)[valid]
        v = v[np.isfinite(v)]
        return float(v.mean()) if len(v) else float("nan")

    out: dict[str, float] = {
        "n": int(n),
        "n_valid": int(valid.sum()),
        "validity": float(valid.mean()) if n else float("nan"),
    }
    for norm in NORMS:
        out[norm] = mean(distances(X, X_cf, norm) if norm != "l0" else (np.abs(X_cf - X) > tol).sum(axis=1))
    out["redundancy"] = mean(redundancy(model, X, X_cf, tol=tol)) if n else float("nan")
    out["ynn"] = mean(ynn(model, X_cf, X_train, k=k, valid=valid)) if n else float("nan")
    out["violations"] = (
        mean(constraint_violations(action_set, X, X_cf, tol=tol)) if action_set is not None and n else float("nan")
    )
    out["seconds_per_cf"] = float(result.seconds) / n if n else float("nan")
    if result.paths is not None:
        pm = path_metrics(result.paths, X_train, kde=kde, bandwidth=bandwidth, tol=tol)
        for key, v in pm.items():
            out[key] = mean(v)
        out["path_length"] = mean([len(p) - 1 for p in result.paths])
    return out
