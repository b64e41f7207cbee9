"""Golob et al.'s (2024) membership attack on MST synthetic data, read on a released set.

Golob, Pentyala, Maratkhan and De Cock ("High Epsilon Synthetic Data Vulnerabilities in MST and
PrivBayes", arXiv 2402.06699, winner of the SNAKE challenge 2023; extended as MAMA-MIA in
"Privacy Vulnerabilities in Marginals-based Synthetic Data", arXiv 2410.05506) adapt DOMIAS's
density ratio (van Breugel et al. 2023) to the generator: MST (McKenna, Miklau and Sheldon 2021)
only keeps the 1-way marginals and the 2-way marginals of a spanning tree chosen with the
exponential mechanism, so a member's influence on the synthetic data lives in those marginals
(their "focal points"). The adversary knows the algorithm and its privacy parameter and holds
auxiliary data from the population:

1. focal points: it runs MST's selection step on its auxiliary data ``n_shadow`` times (shadow
   runs) and weighs each 2-way marginal by how often it is selected; every 1-way marginal has
   weight 1 (MST measures them all);
2. score: for each focal marginal m, the ratio of the released data's frequency of the target's
   cell to the auxiliary data's (DOMIAS's ratio on that marginal), averaged with the weights.

Written from the papers' description (the abstracts and method summaries of arXiv 2402.06699 and
2410.05506; their code was not available here): the shadow runs re-enact MST's selection step in
numpy (noisy 1-way marginals of the auxiliary sample, the L1 gap between each pair's true 2-way
counts and the product of the noisy 1-way marginals, Gumbel-max exponential mechanism with
MST's per-round epsilon sqrt(8 (rho/3) / (d-1))), without the Private-PGM estimation, which does
not change the choice of the tree beyond the product form. Scores are higher for "member"; no
threshold or direction comes from the targets' membership labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recourse_privacy.attacks.released_set import RELEASE_ATTACKS, ReleaseInputs
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import as_generator, check_matrix, check_positive_int, derive_seed

__all__ = ["MSTRecipe", "focal_weights", "golob_mst_scores"]

#: pseudo-count added to every cell of a marginal before the ratio (a cell the release never hits stays finite)
PSEUDO_COUNT = 0.5


@dataclass(frozen=True)
class MSTRecipe:
    """What the adversary knows of the MST release: zCDP ``rho`` (from epsilon, delta), the bins per feature,
    the public bounds the features were binned over, and how many shadow runs of the selection to simulate."""

    rho: float
    bins: int = 10
    lower: float = 0.0
    upper: float = 1.0
    n_shadow: int = 16

    def __post_init__(self) -> None:
        if not self.rho > 0:
            raise InvalidInputError(f"MSTRecipe.rho must be > 0 (inf: no noise), got {self.rho}")
        check_positive_int(self.bins, "MSTRecipe.bins", minimum=2)
        check_positive_int(self.n_shadow, "MSTRecipe.n_shadow")
        if not self.upper > self.lower:
            raise InvalidInputError(f"MSTRecipe bounds: upper ({self.upper}) must exceed lower ({self.lower})")

    def binned(self, X: np.ndarray) -> np.ndarray:
        """Integer bin codes in [0, bins) per feature, equal-width over [lower, upper] (values outside clipped)."""
        u = (np.asarray(X, float) - self.lower) / (self.upper - self.lower)
        return np.clip((u * self.bins).astype(np.int64), 0, self.bins - 1)


def _pair_counts(B: np.ndarray, pairs: np.ndarray, bins: int) -> np.ndarray:
    """(n_pairs, bins * bins) counts of every pair's 2-way marginal (one bincount over all pairs at once)."""
    flat = B[:, pairs[:, 0]] * bins + B[:, pairs[:, 1]] + np.arange(len(pairs)) * bins * bins
    return np.bincount(flat.ravel(), minlength=len(pairs) * bins * bins).reshape(len(pairs), -1).astype(float)


def _one_way(B: np.ndarray, bins: int) -> np.ndarray:
    """(d, bins) counts of every 1-way marginal."""
    d = B.shape[1]
    flat = B + np.arange(d) * bins
    return np.bincount(flat.ravel(), minlength=d * bins).reshape(d, bins).astype(float)


def _select_tree(counts2: np.ndarray, noisy1: np.ndarray, pairs: np.ndarray, rho: float, rng) -> list[int]:
    """MST's selection (McKenna et al. 2021): d-1 rounds of the exponential mechanism over the pairs that join
    two components, scored by the L1 gap between the true 2-way counts and the product of the noisy 1-ways."""
    d, bins = noisy1.shape
    p = np.clip(noisy1, 0.0, None)
    total = max(float(p.sum(1).mean()), 1.0)
    p = p / np.maximum(p.sum(1, keepdims=True), 1e-12)
    prod = total * (p[pairs[:, 0]][:, :, None] * p[pairs[:, 1]][:, None, :]).reshape(len(pairs), bins * bins)
    score = np.abs(counts2 - prod).sum(1)
    eps_sel = math.sqrt(8 * (rho / 3) / max(d - 1, 1)) if math.isfinite(rho) else math.inf
    comp = np.arange(d)
    chosen = []
    for _ in range(d - 1):
        open_ = np.flatnonzero(comp[pairs[:, 0]] != comp[pairs[:, 1]])
        if math.isinf(eps_sel):
            pick = open_[int(np.argmax(score[open_]))]
        else:
            pick = open_[int(np.argmax(eps_sel * score[open_] / 2.0 + rng.gumbel(size=len(open_))))]
        chosen.append(int(pick))
        a, b = comp[pairs[pick, 0]], comp[pairs[pick, 1]]
        comp[comp == b] = a
    return chosen


def focal_weights(reference: np.ndarray, recipe: MSTRecipe, n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (n_pairs, 2), weight of each pair): how often MST's selection picks it in the shadow runs,
    each on ``n_rows`` rows drawn from the adversary's ``reference`` (Golob et al. 2024's focal points)."""
    B = recipe.binned(check_matrix(reference, "reference"))
    d = B.shape[1]
    if d < 2:
        raise InvalidInputError("the MST attack needs at least 2 features")
    pairs = np.array([(i, j) for i in range(d) for j in range(i + 1, d)], dtype=np.int64)
    sigma = math.sqrt(3.0 / (2.0 * recipe.rho)) * math.sqrt(d) if math.isfinite(recipe.rho) else 0.0
    freq = np.zeros(len(pairs))
    for k in range(recipe.n_shadow):
        rng = as_generator(derive_seed(seed, 500 + k))
        rows = rng.choice(len(B), size=n_rows, replace=n_rows > len(B))
        Bk = B[rows]
        noisy1 = _one_way(Bk, recipe.bins) + rng.normal(0.0, sigma, (d, recipe.bins))
        freq[_select_tree(_pair_counts(Bk, pairs, recipe.bins), noisy1, pairs, recipe.rho, rng)] += 1
    return pairs, freq / recipe.n_shadow


def _cell_ratio(counts: np.ndarray, ref_counts: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Per marginal (row) and target (column): released frequency over reference frequency of the target's cell."""
    p = (counts + PSEUDO_COUNT) / (counts.sum(1, keepdims=True) + PSEUDO_COUNT * counts.shape[1])
    q = (ref_counts + PSEUDO_COUNT) / (ref_counts.sum(1, keepdims=True) + PSEUDO_COUNT * ref_counts.shape[1])
    rows = np.arange(len(counts))[:, None]
    return p[rows, cells] / q[rows, cells]


def golob_mst_scores(
    released: np.ndarray, targets: np.ndarray, reference: np.ndarray, recipe: MSTRecipe, seed: int = 0
) -> np.ndarray:
    """Golob et al. (2024): the focal-point-weighted mean of DOMIAS's ratio over MST's marginals (module docstring)."""
    released = check_matrix(released, "released")
    targets = check_matrix(targets, "targets", n_features=released.shape[1])
    reference = check_matrix(reference, "reference", n_features=released.shape[1])
    pairs, w2 = focal_weights(reference, recipe, len(released), seed)
    Br, Bt, Bq = recipe.binned(released), recipe.binned(targets), recipe.binned(reference)
    d, bins = released.shape[1], recipe.bins
    r1 = _cell_ratio(_one_way(Br, bins), _one_way(Bq, bins), Bt.T)  # (d, n_targets)
    keep = w2 > 0
    score = r1.sum(0)
    if keep.any():
        pk = pairs[keep]
        cells = (Bt[:, pk[:, 0]] * bins + Bt[:, pk[:, 1]]).T  # (n_pairs_kept, n_targets)
        r2 = _cell_ratio(_pair_counts(Br, pk, bins), _pair_counts(Bq, pk, bins), cells)
        score = score + (w2[keep][:, None] * r2).sum(0)
    return score / (d + w2.sum())


@RELEASE_ATTACKS.register(
    "golob-mst",
    description="Golob et al. (2024): DOMIAS's ratio on the marginals MST measures, weighted by shadow runs of "
    "its tree selection (releases of MST synthetic data only)",
    needs=("mst",),
)
def _golob_mst(inputs: ReleaseInputs) -> np.ndarray:
    if inputs.mst is None:
        raise InvalidInputError("golob-mst needs the MST recipe (ReleaseInputs.mst): the release is not MST data")
    return golob_mst_scores(inputs.released, inputs.targets, inputs.reference, inputs.mst, inputs.random_state)
