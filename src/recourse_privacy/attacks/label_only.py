"""Label-only membership inference: each record's distance to the decision boundary from decisions alone.

Choquette-Choo, Tramer, Carlini and Papernot (ICML 2021, "Label-only membership inference
attacks") and Li and Zhang (CCS 2021, "Membership leakage in label-only exposures") score a record
by how far it must move before the model's decision flips, estimated with HopSkipJump (Chen,
Jordan and Wainwright 2020) from label queries: members sit farther from the boundary. It is the
signal of the counterfactual-distance attack (Pawelczyk et al. 2023) without a recourse API, so
it measures what recourse adds over labels alone at a given number of queries.

:func:`boundary_distance` is a batched HopSkipJump in numpy, every target searched at once:

1. the decision at x (1 query);
2. ``n_directions`` random Gaussian directions; along each, the decision at a geometric grid of
   ``n_radii`` radii (up to ``max_radius``) and ``n_bisect`` bisection steps inside the first
   bracket that flips; the closest crossing is the starting boundary point;
3. ``n_iterations`` HopSkipJump steps: at the boundary point, the sign of the decision change at
   ``n_gradient`` random unit perturbations of radius delta estimates the boundary's normal
   (the baseline-subtracted Monte Carlo estimate of Chen et al. 2020, eq. 9), a geometric step
   along it (halved until the decision flips, at most ``n_step`` queries) and ``n_bisect``
   bisection steps back toward x give a closer boundary point, kept if it is closer.

Every target costs the same number of queries; the distance found after each direction and each iteration is kept, so
one run gives the attack at several query budgets. A record whose decision never flips within
``max_radius`` scores ``max_radius``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.registry import AttackInputs, register_attack
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.recourse.base import distances
from recourse_privacy.validation import as_generator, check_matrix, check_positive_int, derive_seed

__all__ = ["BoundaryEstimate", "LabelOnlyOptions", "boundary_distance", "label_only_attack"]


@dataclass(frozen=True)
class LabelOnlyOptions:
    """The search's budget (module docstring); the defaults cost 341 decisions per target."""

    n_directions: int = 10
    n_radii: int = 10
    n_bisect: int = 10
    n_iterations: int = 4
    n_gradient: int = 20
    n_step: int = 5
    max_radius: float | None = None  # None: 4 sqrt(d) (standardised features)

    @property
    def queries_per_target(self) -> int:
        """Decisions asked per target."""
        first = 1 + self.n_directions * (self.n_radii + self.n_bisect)
        return first + self.n_iterations * (self.n_gradient + self.n_step + self.n_bisect)


@dataclass(frozen=True)
class BoundaryEstimate:
    """The distance to the boundary per target, the queries it cost, and the estimate after each stage."""

    distance: np.ndarray
    queries_per_target: int
    boundary: np.ndarray
    #: queries per target -> the distances found with that many
    by_queries: Mapping[int, np.ndarray] = field(default_factory=dict)


def _bisect(predict, X, y0, inside, outside, n_bisect):
    """Bisection between points with the original decision (``inside``) and flipped ones (``outside``)."""
    lo, hi = inside.copy(), outside.copy()
    for _ in range(n_bisect):
        mid = 0.5 * (lo + hi)
        flip = predict(mid) != y0
        hi = np.where(flip[:, None], mid, hi)
        lo = np.where(flip[:, None], lo, mid)
    return hi


def boundary_distance(
    predict: Callable[[np.ndarray], np.ndarray],
    X: np.ndarray,
    *,
    options: LabelOnlyOptions = LabelOnlyOptions(),
    norm: str = "l2",
    random_state=None,
) -> BoundaryEstimate:
    """The batched HopSkipJump of the module docstring; ``predict(X) -> 0/1`` is the only access to the model."""
    X = check_matrix(X, "X")
    o = options
    for name in ("n_directions", "n_radii", "n_bisect", "n_gradient", "n_step"):
        check_positive_int(getattr(o, name), name)
    check_positive_int(o.n_iterations, "n_iterations", minimum=0)
    n, d = X.shape
    rng = as_generator(derive_seed(random_state, 47))
    r_max = float(o.max_radius) if o.max_radius is not None else 4.0 * np.sqrt(d)
    if not r_max > 0:
        raise InvalidInputError(f"max_radius must be > 0; got {o.max_radius!r}")
    y0 = np.asarray(predict(X))
    queries = 1
    best = X + 0.0  # the closest flipped point found; X itself where none yet
    found = np.zeros(n, bool)
    radii = r_max * 2.0 ** -np.arange(o.n_radii - 1, -1, -1)
    by_queries: dict[int, np.ndarray] = {}
    for _ in range(o.n_directions):
        u = rng.standard_normal((n, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        first = np.full(n, -1)
        for j, r in enumerate(radii):
            flip = predict(X + r * u) != y0
            first = np.where((first < 0) & flip, j, first)
        queries += o.n_radii
        hit = first >= 0
        r_hi = radii[np.maximum(first, 0)]
        r_lo = np.where(first > 0, radii[np.maximum(first - 1, 0)], 0.0)
        cand = _bisect(predict, X, y0, X + r_lo[:, None] * u, X + r_hi[:, None] * u, o.n_bisect)
        queries += o.n_bisect
        closer = hit & (~found | (np.linalg.norm(cand - X, axis=1) < np.linalg.norm(best - X, axis=1)))
        best = np.where(closer[:, None], cand, best)
        found |= hit
        by_queries[queries] = _dist(X, best, found, r_max, norm)
    for t in range(o.n_iterations):
        dist = np.linalg.norm(best - X, axis=1)
        delta = np.maximum(np.sqrt(d) * 1e-3 * np.maximum(dist, 1e-6), 1e-6)
        g = np.zeros((n, d))
        phis, us = [], []
        for _ in range(o.n_gradient):
            u = rng.standard_normal((n, d))
            u /= np.linalg.norm(u, axis=1, keepdims=True)
            phis.append(np.where(predict(best + delta[:, None] * u) != y0, 1.0, -1.0))
            us.append(u)
        queries += o.n_gradient
        phi = np.stack(phis, 1)  # (n, m)
        phi = phi - phi.mean(1, keepdims=True)
        g = np.einsum("nm,mnd->nd", phi, np.stack(us))
        norm_g = np.linalg.norm(g, axis=1, keepdims=True)
        g = np.where(norm_g > 0, g / np.maximum(norm_g, 1e-300), 0.0)
        xi = dist / np.sqrt(t + 1.0)
        step = best + 0.0
        ok = np.zeros(n, bool)
        for _ in range(o.n_step):
            trial = best + xi[:, None] * g
            flip = predict(trial) != y0
            new = flip & ~ok
            step = np.where(new[:, None], trial, step)
            ok |= flip
            xi = np.where(ok, xi, xi / 2.0)
        queries += o.n_step
        cand = _bisect(predict, X, y0, X + 0.0, step, o.n_bisect)
        queries += o.n_bisect
        closer = found & ok & (np.linalg.norm(cand - X, axis=1) < dist)
        best = np.where(closer[:, None], cand, best)
        by_queries[queries] = _dist(X, best, found, r_max, norm)
    assert queries == o.queries_per_target
    return BoundaryEstimate(by_queries[queries], queries, best, by_queries)


def _dist(X, best, found, r_max, norm) -> np.ndarray:
    return np.where(found, distances(X, best, norm), r_max)


def label_only_attack(predict, X, *, options=LabelOnlyOptions(), norm: str = "l2", random_state=None) -> AttackScores:
    """Member if the boundary distance from label queries is large (Choquette-Choo et al. 2021)."""
    est = boundary_distance(predict, X, options=options, norm=norm, random_state=random_state)
    return AttackScores(
        "label-only",
        est.distance,
        "greater",
        {
            "statistic": f"{norm} distance to the decision boundary estimated from decisions alone (HopSkipJump)",
            "direction_source": "fixed by Choquette-Choo et al. 2021 (members are farther from the boundary)",
            "queries_per_target": est.queries_per_target,
            "queries": est.queries_per_target * len(est.distance),
            "access": "decisions only (no recourse, no scores)",
        },
    )


@register_attack(
    "label-only",
    description="boundary distance from decision queries alone, HopSkipJump (Choquette-Choo et al. 2021; "
    "Li and Zhang 2021): the CFD signal without a recourse API",
    signal="score",
)
def _label_only(inputs: AttackInputs) -> AttackScores:
    return label_only_attack(inputs.model.predict, inputs.X, norm="l2", random_state=derive_seed(inputs.seed, 53))
