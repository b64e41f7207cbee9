"""Membership from a published set of counterfactuals alone: the adversary never queries the model.

The owner answers recourse for applicants and publishes the counterfactuals (a lender's "what
others changed to get accepted" page, a regulator's sample, a leaked log). The adversary holds that
set, a reference sample of the population (its pool) and the targets' records; the attacks below
score each target, higher meaning "member". They are the attacks on synthetic data, read on a set of
counterfactuals:

- ``dcr``: minus the distance to the closest released counterfactual, in the space standardised
  by the reference's spread (the distance-to-closest-record test of synthetic-data audits);
- ``domias``: DOMIAS (van Breugel et al. 2023): the log density of the released set over the log
  density of the reference at the target, each a Gaussian kernel density (Scott's bandwidth,
  :class:`scipy.stats.gaussian_kde`) on a PCA of the reference where the data has more than
  :data:`MAX_KDE_DIM` dimensions; local overfitting shows as a ratio above one;
- ``golob-mst`` (:mod:`~recourse_privacy.attacks.mst_marginals`): Golob et al.'s (2024) attack on
  MST synthetic data, for releases that carry an MST recipe;
- ``set-shadow``: the shadow-set attack of Stadler et al. (2022): the adversary simulates releases
  from its own pool with the owner's recipe, each target inside the simulated training set in half
  of them (a balanced keep matrix, as LiRA's), and trains a classifier on features of the set seen
  from the target (nearest distances, counts within radii, the density ratio); its labels are the
  adversary's own keep matrix, never the targets' membership.

No attack chooses a threshold or a direction from the targets' membership labels: the scores are
read by AUC and TPR at a fixed FPR only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.registry import Registry
from recourse_privacy.validation import as_generator

__all__ = [
    "MAX_KDE_DIM",
    "RELEASE_ATTACKS",
    "ReleaseInputs",
    "copied_rows",
    "dcr_scores",
    "domias_scores",
    "kde_log_density",
    "set_features",
    "set_shadow_scores",
]

#: above this many (standardised) dimensions the densities are estimated on a PCA of the reference
MAX_KDE_DIM = 8
#: set-shadow's default number of simulated releases (each target inside half of them)
N_SHADOW_RELEASES = 8

RELEASE_ATTACKS: Registry[Callable] = Registry(
    "release attack",
    builtins=("recourse_privacy.attacks.released_set", "recourse_privacy.attacks.mst_marginals"),
    needs_vocabulary=("simulations", "mst"),
)


@dataclass(frozen=True)
class ReleaseInputs:
    """What the released-set adversary holds, encoded as the model's features.

    ``simulate(keep)`` (set-shadow only) returns the set the recipe would publish from a training set
    of the adversary's pool plus the targets flagged in ``keep``: the adversary's own simulation.
    ``mst`` (``golob-mst`` only): the :class:`~recourse_privacy.attacks.mst_marginals.MSTRecipe` of a
    release of MST synthetic data.
    """

    released: np.ndarray
    targets: np.ndarray
    reference: np.ndarray
    factuals: np.ndarray | None = None
    simulate: Callable[[np.ndarray, int], np.ndarray] | None = None
    n_shadow: int = N_SHADOW_RELEASES
    random_state: int = 0
    notes: list[str] = field(default_factory=list)
    mst: Any = None

    def scale(self) -> np.ndarray:
        """Per-feature spread of the reference (1 where a feature is constant there)."""
        sd = np.asarray(self.reference, float).std(axis=0)
        return np.where(sd > 1e-12, sd, 1.0)


def _nearest(points: np.ndarray, against: np.ndarray, k: int = 1) -> np.ndarray:
    """The ``k`` smallest Euclidean distances from each of ``points`` to ``against`` (chunked), shape (n, k)."""
    from sklearn.neighbors import NearestNeighbors

    k = min(k, len(against))
    nn = NearestNeighbors(n_neighbors=k).fit(against)
    return nn.kneighbors(points, return_distance=True)[0]


def dcr_scores(released: np.ndarray, targets: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Minus each target's distance to its closest released counterfactual, standardised by ``scale``."""
    if not len(released):
        raise InvalidInputError("the release is empty: no counterfactual to measure a distance to")
    return -_nearest(np.asarray(targets, float) / scale, np.asarray(released, float) / scale)[:, 0]


def _projection(reference: np.ndarray, scale: np.ndarray, max_dim: int) -> Callable[[np.ndarray], np.ndarray]:
    """Standardise by ``scale``; then, above ``max_dim`` dimensions, a PCA fitted on the reference."""
    Z = np.asarray(reference, float) / scale
    if Z.shape[1] <= max_dim:
        return lambda X: np.asarray(X, float) / scale
    mean = Z.mean(axis=0)
    _, _, vt = np.linalg.svd(Z - mean, full_matrices=False)
    comp = vt[:max_dim].T
    return lambda X: (np.asarray(X, float) / scale - mean) @ comp


def kde_log_density(sample: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Log density at ``points`` of a Gaussian KDE of ``sample`` (rows) with Scott's bandwidth.

    A tiny ridge is added to the kernel covariance so that a set with a constant direction (every
    counterfactual at one value of a feature) still has a density.
    """
    from scipy.stats import gaussian_kde

    sample = np.asarray(sample, float)
    jitter = as_generator(0).normal(0.0, 1e-6, sample.shape)
    kde = gaussian_kde((sample + jitter).T)
    return kde.logpdf(np.asarray(points, float).T)


def domias_scores(
    released: np.ndarray, targets: np.ndarray, reference: np.ndarray, scale: np.ndarray, max_dim: int = MAX_KDE_DIM
) -> np.ndarray:
    """DOMIAS (van Breugel et al. 2023): log p_release(target) - log p_reference(target), kernel densities.

    A release of fewer than 2 rows has no density: every target scores 0 (no information).
    """
    if len(released) < 2:
        return np.zeros(len(targets))
    d = min(max_dim, max(1, len(released) - 2), max(1, len(reference) - 2))
    project = _projection(reference, scale, d)
    return kde_log_density(project(released), project(targets)) - kde_log_density(project(reference), project(targets))


def set_features(
    released: np.ndarray,
    targets: np.ndarray,
    reference: np.ndarray,
    scale: np.ndarray,
    radii: np.ndarray,
    factuals: np.ndarray | None = None,
) -> np.ndarray:
    """Features of a released set seen from each target: nearest 3 distances, counts within ``radii``, DOMIAS's ratio
    (and, with published factuals, the distance to the closest factual)."""
    Z_rel, Z_t = np.asarray(released, float) / scale, np.asarray(targets, float) / scale
    near = _nearest(Z_t, Z_rel, k=3)
    if near.shape[1] < 3:
        near = np.hstack([near, np.repeat(near[:, -1:], 3 - near.shape[1], 1)])
    from sklearn.neighbors import NearestNeighbors

    nn = NearestNeighbors().fit(Z_rel)
    counts = [
        np.array([len(ix) for ix in nn.radius_neighbors(Z_t, radius=float(r), return_distance=False)]) for r in radii
    ]
    cols = [
        np.log1p(near),
        np.log1p(np.column_stack(counts)),
        domias_scores(released, targets, reference, scale)[:, None],
    ]
    if factuals is not None:
        cols.append(np.log1p(_nearest(Z_t, np.asarray(factuals, float) / scale)))
    return np.hstack(cols)


def _radii(reference: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Radii at the 5%, 25% and 50% quantiles of the reference's nearest-neighbour distances (its own scale)."""
    Z = np.asarray(reference, float) / scale
    d = _nearest(Z, Z, k=2)[:, -1]
    return np.quantile(d, [0.05, 0.25, 0.5]) + 1e-9


def keep_matrix(n_targets: int, n_shadow: int, seed: int) -> np.ndarray:
    """(n_shadow, n_targets) booleans: each target inside exactly half of the simulated releases (LiRA's balance)."""
    if n_shadow < 2 or n_shadow % 2:
        raise InvalidInputError(f"set-shadow needs an even number of simulated releases (at least 2), got {n_shadow}")
    rng = as_generator(seed)
    order = np.argsort(rng.random((n_shadow, n_targets)), axis=0)
    return order < n_shadow // 2


def set_shadow_scores(inputs: ReleaseInputs) -> np.ndarray:
    """Stadler et al. (2022): a classifier on set features, trained on the adversary's simulated releases."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    if inputs.simulate is None:
        raise InvalidInputError("set-shadow needs the owner's recipe to simulate releases from the adversary's pool")
    scale, radii = inputs.scale(), _radii(inputs.reference, inputs.scale())
    keep = keep_matrix(len(inputs.targets), inputs.n_shadow, inputs.random_state)
    feats, labels = [], []
    for k, row in enumerate(keep):
        sim = inputs.simulate(row, k)
        rel, fac = sim if isinstance(sim, tuple) else (sim, None)
        if inputs.factuals is None:
            fac = None
        feats.append(set_features(rel, inputs.targets, inputs.reference, scale, radii, fac))
        labels.append(row.astype(int))
    clf = HistGradientBoostingClassifier(max_iter=100, max_depth=3, random_state=inputs.random_state)
    clf.fit(np.vstack(feats), np.concatenate(labels))
    real = set_features(inputs.released, inputs.targets, inputs.reference, scale, radii, inputs.factuals)
    return clf.predict_proba(real)[:, 1]


@RELEASE_ATTACKS.register(
    "dcr", description="distance to the closest released counterfactual, standardised by the reference's spread"
)
def _dcr(inputs: ReleaseInputs) -> np.ndarray:
    return dcr_scores(inputs.released, inputs.targets, inputs.scale())


@RELEASE_ATTACKS.register(
    "domias",
    description="DOMIAS (van Breugel et al. 2023): released-set density over the reference's, kernel densities",
)
def _domias(inputs: ReleaseInputs) -> np.ndarray:
    return domias_scores(inputs.released, inputs.targets, inputs.reference, inputs.scale())


@RELEASE_ATTACKS.register(
    "set-shadow",
    description="shadow releases simulated from the adversary's pool (Stadler et al. 2022), a classifier on set "
    "features",
    needs=("simulations",),
)
def _set_shadow(inputs: ReleaseInputs) -> np.ndarray:
    return set_shadow_scores(inputs)


def copied_rows(released: np.ndarray, training: np.ndarray, decimals: int = 6) -> np.ndarray:
    """Boolean per ``training`` row: it appears verbatim (to ``decimals``) among the released rows."""
    rel = {r.tobytes() for r in np.round(np.asarray(released, float), decimals) + 0.0}
    tr = np.round(np.asarray(training, float), decimals) + 0.0
    return np.array([r.tobytes() in rel for r in tr], dtype=bool)
