"""RMIA on counterfactual distances (Zarifzadeh, Liu, Shokri, ICML 2024), offline and online.

RMIA compares a target x with population points z through the pairwise likelihood ratio

    LR(x, z) = [Pr(x | theta) / Pr(x)] / [Pr(z | theta) / Pr(z)],     Score(x) = Pr_z( LR(x, z) >= gamma ),

where theta is the owner's model and Pr(x) = E_theta'[Pr(x | theta')] the marginal over reference
models theta' (Zarifzadeh et al. 2024, eqs. 3-4). Online, Pr(x) is the mean over reference models
half of which trained on x; offline (no reference model trained on x), Pr(x) is approximated from
the out-models alone by Pr_IN(x) ~ a Pr_OUT(x) + (1 - a), so Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2
(their offline approximation; a = 1 takes Pr(x) = Pr_OUT(x)). Pr(z) is estimated the same way. As in
the paper, ``a`` is tuned on the adversary's own reference models unless fixed: each offline shadow
model in turn plays the target, its calibration points (members: those it trained on) scored against
the other models' out-signals, and the a in {0, 0.1, ..., 1} with the best mean AUC is kept.

The signal. RMIA's Pr(x | theta) is the model's probability of x's label. Here the adversary sees the
counterfactual distance c_theta(x) of the recourse (0 where theta accepts x: no recourse is needed), so
we use a probability-like transform in [0, 1) that grows with c in the decided direction:

    p_theta(x) = c / (c + s_theta)   ('greater': members farther from the boundary, Pawelczyk et al. 2023),
    p_theta(x) = s_theta / (c + s_theta)   ('less'),

mirrored (1 - p) for points labelled 1, so that p plays the probability of the point's own label
(a distance into the unfavourable side is confidence in label 0: the adversary knows each target's
and each population point's label, as Loss-LRT does); s_theta is the median distance of the
population points theta rejects, under theta itself: a
per-model scale, so that models whose distances differ by a factor (a larger ||w||) give the same p,
and p = 1/2 at the population's median. The direction is decided on the adversary's shadow game as for
CFD-LRT (offline: its calibration points; online: the targets, labelled by which reference models the
adversary trained on them). The population z are drawn from the adversary's calibration points (pool rows whose
statistics under every reference model are known) among those the owner's model rejects; each z's
recourse under the owner's model is one query, counted in the conventions.

With one population set for all targets, Score(x) is a non-decreasing function of
p_theta(x) / Pr(x); its ties (multiples of 1/|Z|) are broken by that ratio, which keeps the order.
"""

from __future__ import annotations

import warnings

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.distance import _TINY, _rejected
from recourse_privacy.attacks.lrt import resolve_direction
from recourse_privacy.attacks.registry import AttackInputs, RMIAOptions, register_attack
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import as_generator, derive_seed

__all__ = ["cfd_probability", "marginal", "rmia_cfd_attack", "rmia_scores"]


def cfd_probability(cfd: np.ndarray, scale, direction: str = "greater", y: np.ndarray | None = None) -> np.ndarray:
    """The signal p = c / (c + s) ('greater') or s / (c + s) ('less'), in [0, 1]; ``scale`` s > 0 per column.

    With labels ``y`` (one per row), rows labelled 1 are mirrored (1 - p): the distance into the
    unfavourable side measures confidence in label 0, so for a favourable-labelled point it is the
    confidence in the wrong label, as RMIA's Pr(x | theta) is the probability of x's own label.
    """
    c = np.maximum(np.asarray(cfd, dtype=np.float64), 0.0)
    s = np.asarray(scale, dtype=np.float64)
    if direction == "greater":
        p = c / (c + s)
    elif direction == "less":
        p = s / (c + s)
    else:
        raise InvalidInputError(f"direction must be 'greater' or 'less'; got {direction!r}")
    if y is None:
        return p
    flip = np.asarray(y).reshape(-1, *([1] * (p.ndim - 1))) == 1
    return np.where(flip, 1.0 - p, p)


def marginal(p_ref: np.ndarray, keep: np.ndarray | None, *, a: float | None) -> np.ndarray:
    """Pr(x) from reference signals ``p_ref`` (points x models).

    ``a`` None: online, the mean over every reference model. Otherwise offline: the mean over the
    out-models (``~keep``; every model when ``keep`` is None), then ((1 + a) Pr_OUT + (1 - a)) / 2.
    A row with no out-model gives NaN.
    """
    p_ref = np.asarray(p_ref, dtype=np.float64)
    if a is None:
        return p_ref.mean(axis=1)
    out = np.ones(p_ref.shape, dtype=bool) if keep is None else ~np.asarray(keep, dtype=bool)
    n_out = out.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_out = np.where(out, p_ref, 0.0).sum(axis=1) / n_out
    return np.where(n_out > 0, 0.5 * ((1.0 + a) * p_out + (1.0 - a)), np.nan)


def rmia_scores(p_x: np.ndarray, pr_x: np.ndarray, p_z: np.ndarray, pr_z: np.ndarray, *, gamma: float) -> np.ndarray:
    """Pr_z(LR(x, z) >= gamma) for every x, ties broken by p(x | theta) / Pr(x) (the same order).

    LR(x, z) = (p_x / pr_x) / (p_z / pr_z) >= gamma  <=>  p_z / pr_z <= (p_x / pr_x) / gamma.
    """
    if not gamma > 0:
        raise InvalidInputError(f"gamma must be > 0; got {gamma!r}")
    ratio_x = np.asarray(p_x, dtype=np.float64) / np.maximum(pr_x, _TINY)
    ratio_z = np.sort(np.asarray(p_z, dtype=np.float64) / np.maximum(pr_z, _TINY))
    if not len(ratio_z):
        raise InvalidInputError("RMIA needs at least one population point z")
    frac = np.searchsorted(ratio_z, ratio_x / gamma, side="right") / len(ratio_z)
    rank = ratio_x.argsort(kind="stable").argsort() / max(len(ratio_x), 1)  # in [0, 1)
    return frac + rank / (len(ratio_z) + 1)  # below the 1/|Z| step between fractions


def _nanmedian(values: np.ndarray, axis: int) -> np.ndarray:
    """np.nanmedian without the warning of an all-NaN slice (it gives NaN, handled by the caller)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(values, axis=axis)


def _scales(cfd_z: np.ndarray, rejected_z: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Per model (column), the median distance of the population points it rejects (fallback if none)."""
    med = _nanmedian(np.where(rejected_z & (cfd_z > 0), cfd_z, np.nan), axis=0)
    med = np.where(np.isfinite(med) & (med > 0), med, fallback)
    return np.maximum(med, _TINY)


def _check_options(shadow: ShadowData, options: RMIAOptions, online: bool, name: str) -> None:
    """One clear error for inputs the attack cannot use, before any query."""
    if online and shadow.keep_targets is None:
        raise InvalidInputError(f"attack {name!r} needs online reference models (ShadowData.keep_targets)")
    if shadow.calib_index is None:
        raise InvalidInputError(f"attack {name!r} needs the pool rows of the calibration points (calib_index)")
    if not online and options.a is not None and not 0.0 <= float(options.a) <= 1.0:
        raise InvalidInputError(f"RMIA's a must be in [0, 1]; got {options.a!r}")
    if int(options.n_population) < 1:
        raise InvalidInputError(f"n_population must be a positive integer; got {options.n_population!r}")


def _note_moved_references(conventions: dict, shadow: ShadowData, online: bool) -> None:
    """Record the (target, reference model) pairs Pr(x) reads where the model rejects the target and its recourse
    moved it (offline: out-models only). Where none, every reference signal is 0, Pr(x) is one constant and the
    score orders the targets by p(x | theta) alone: their distance read with their label, still a test that reads
    no membership (so it runs, and the conventions say so), but not RMIA's ratio."""
    moved = _rejected(shadow)[0] & np.isfinite(shadow.cfd_targets)  # counted as CFD-LRT counts them
    conventions["reference_pairs_moved"] = int((moved if online else moved & shadow.out_targets).sum())
    if conventions["reference_pairs_moved"] == 0:
        conventions["references"] += (
            "; their recourse moved none of the targets they reject: Pr(x) is one constant, so the score orders "
            "the targets by p(x | theta) alone (the owner's distance read with the label), not by RMIA's ratio"
        )


def _population(shadow: ShadowData, X_pool, predict, n_pop: int, online: bool, seed: int, name: str):
    """(pick, n_asked): calibration rows the owner's model rejects, in a seeded random order, and the decisions asked.

    Offline, a z needs at least one out-model for Pr_OUT(z).
    """
    order = as_generator(derive_seed(seed, 41)).permutation(len(shadow.calib_index))
    if not online:
        order = order[(~shadow.keep_calib[order]).any(axis=1)]
    decided = np.asarray(predict(X_pool[shadow.calib_index[order]])) == 0
    pick = order[decided][:n_pop]
    if not len(pick):
        raise InvalidInputError(f"attack {name!r}: the owner's model rejects none of the population candidates")
    return pick, len(order)


def _game(shadow: ShadowData, online: bool):
    """The direction's game: offline, the calibration points of the pool (those of the offline game,
    :attr:`ShadowData.game_calib`); online, the targets themselves, labelled by the adversary's own keep
    matrix (which reference models it trained on them), never by their membership."""
    if online:
        rej = shadow.rejected_targets if shadow.rejected_targets is not None else shadow.cfd_targets > 0
        return shadow.cfd_targets, rej & (shadow.cfd_targets > 0), shadow.keep_targets
    mask = shadow.rejected_calib & (shadow.cfd_calib > 0) & shadow.game_calib[:, None]
    return shadow.cfd_calib, mask, shadow.keep_calib


def _offline_a(shadow: ShadowData, options: RMIAOptions, s_ref, direction: str, y_pool, conventions: dict) -> float:
    """RMIA's a as fixed by the caller, or tuned on the adversary's shadow game (recorded in ``conventions``)."""
    if options.a is not None:
        conventions["a_source"] = "fixed by the caller"
        a = float(options.a)
    else:
        y_calib = None if y_pool is None else np.asarray(y_pool)[shadow.calib_index]
        game = shadow.game_calib[:, None]
        a, game_auc = tune_offline_a(
            shadow.cfd_calib, shadow.rejected_calib & game, shadow.keep_calib, s_ref, direction, y_calib
        )
        conventions["a_source"] = f"tuned on the adversary's shadow game over {list(A_GRID)} (mean AUC {game_auc:.4f})"
    conventions["a"] = float(a)
    return float(a)


def rmia_cfd_attack(
    cfd: np.ndarray,
    shadow: ShadowData,
    *,
    X_pool: np.ndarray,
    predict,
    y: np.ndarray | None = None,
    y_pool: np.ndarray | None = None,
    query_cfd,
    options: RMIAOptions = RMIAOptions(),
    online: bool = False,
    name: str | None = None,
    direction: str = "auto",
    center: str = "mean",
    variance: str = "per-example",
    cdf: str = "normal",
    seed: int = 0,
) -> AttackScores:
    """RMIA on counterfactual distances against the owner's model (see the module docstring).

    ``predict(X)`` are the owner's decisions, ``query_cfd(X)`` its recourse's distances (queries);
    ``shadow`` the reference models' statistics: offline ones (targets never in them) for
    ``online=False`` (or online ones, of which each target's out-models are read), online ones
    (``keep_targets``) for ``online=True``. ``X_pool`` is the adversary's pool (the population z are
    drawn from its calibration rows).
    """
    name = name or ("rmia-cfd-online" if online else "rmia-cfd")
    if y is None or y_pool is None:  # labels for the targets and the population, or for neither
        y = y_pool = None
    _check_options(shadow, options, online, name)
    pick, n_asked = _population(shadow, X_pool, predict, int(options.n_population), online, seed, name)
    cfd_z_owner = np.asarray(query_cfd(X_pool[shadow.calib_index[pick]]), dtype=np.float64)

    conventions = {
        "statistic": "p = c / (c + s): counterfactual distance c, s the model's median population distance"
        + ("; 1 - p for points labelled 1 (p of the own label)" if y is not None else ""),
        "setting": "online (Pr(x) over in- and out-models)"
        if online
        else "offline (Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2)",
        "gamma": float(options.gamma),
        "n_shadow": shadow.n_shadow,
        "references": f"all {shadow.n_shadow} online reference models" if online else shadow.offline_references,
        "n_population": int(len(pick)),
        "population_decision_queries": int(n_asked),
        "population_recourse_queries": int(len(pick)),
        "query_cost": f"{len(pick)} recourse queries (population z) and {n_asked} decisions, "
        "beyond the targets' released recourse",
    }
    _note_moved_references(conventions, shadow, online)
    game_cfd, game_mask, game_keep = _game(shadow, online)
    fit = dict(center=center, variance=variance, cdf=cdf)
    log_game = np.log(np.maximum(game_cfd, _TINY))
    direction = resolve_direction(direction, conventions, log_game, game_mask, game_mask, game_keep, **fit)

    # per-model scales: the owner's from its answers on z, each reference model's from its own distances of z
    # (the fallback, where a model rejects no z: its median target distance, offline over its out-targets only)
    cfd_z_ref, rej_z_ref = shadow.cfd_calib[pick], shadow.rejected_calib[pick]
    seen = shadow.cfd_targets > 0 if online else (shadow.cfd_targets > 0) & shadow.out_targets
    fallback = _nanmedian(np.where(seen, shadow.cfd_targets, np.nan), axis=0)
    s_ref = _scales(cfd_z_ref, rej_z_ref, np.where(np.isfinite(fallback), fallback, 1.0))
    s_owner = _scales(cfd_z_owner[:, None], np.ones((len(pick), 1), bool), np.array([np.median(cfd)]))[0]
    a = None if online else _offline_a(shadow, options, s_ref, direction, y_pool, conventions)

    y_z = None if y_pool is None or y is None else np.asarray(y_pool)[shadow.calib_index[pick]]

    def ref_signal(c, rejected, labels):
        return cfd_probability(np.where(rejected, c, 0.0), s_ref[None, :], direction, labels)

    rej_t = shadow.rejected_targets if shadow.rejected_targets is not None else shadow.cfd_targets > 0
    pr_x = marginal(ref_signal(shadow.cfd_targets, rej_t, y), shadow.keep_targets, a=a)
    if not online:  # a target no reference model is out of (possible with one or two of a shared set)
        no_out = ~np.isfinite(pr_x)
        conventions["targets_on_fallback_marginal"] = int(no_out.sum())
        if no_out.any():  # Pr(x) of the targets that have out-models, pooled (as fit_reference's fallback)
            pr_x = np.where(no_out, np.nanmean(pr_x) if (~no_out).any() else 1.0, pr_x)
    pr_z = marginal(ref_signal(cfd_z_ref, rej_z_ref, y_z), shadow.keep_calib[pick], a=a)
    p_x = cfd_probability(cfd, s_owner, direction, y)
    p_z = cfd_probability(cfd_z_owner, s_owner, direction, y_z)
    scores = rmia_scores(p_x, pr_x, p_z, pr_z, gamma=options.gamma)
    return AttackScores(name, scores, direction, conventions)


A_GRID = tuple(np.round(np.linspace(0.0, 1.0, 11), 2))


def tune_offline_a(
    cfd_calib: np.ndarray,
    rejected_calib: np.ndarray,
    keep_calib: np.ndarray,
    scales: np.ndarray,
    direction: str,
    y_calib: np.ndarray | None = None,
) -> tuple[float, float]:
    """RMIA's a, chosen on the adversary's shadow game (Zarifzadeh et al. 2024 tune it on reference models).

    Every model k plays the target: its calibration points that it rejects are scored by
    p_k(x) / Pr(x; a), Pr from the out-models among the others; labels are ``keep_calib[:, k]``
    (the adversary's own membership). Returns (a, its mean AUC over the models); ties keep the
    smaller a; with fewer than 2 models, (1.0, nan): Pr(x) = Pr_OUT(x), no approximation.
    """
    n_models = keep_calib.shape[1]
    if n_models < 2:
        return 1.0, float("nan")
    from sklearn.metrics import roc_auc_score

    p = cfd_probability(np.where(rejected_calib, cfd_calib, 0.0), scales[None, :], direction, y_calib)
    aucs: list[list[float]] = [[] for _ in A_GRID]
    for k in range(n_models):
        rows = rejected_calib[:, k] & (cfd_calib[:, k] > 0)
        others = np.arange(n_models) != k
        lab = keep_calib[rows, k]
        if lab.all() or not lab.any():
            continue
        out = ~keep_calib[rows][:, others]
        has_out = out.any(axis=1)
        if not has_out.any() or lab[has_out].all() or not lab[has_out].any():
            continue
        for i, a in enumerate(A_GRID):
            pr = marginal(p[rows][:, others][has_out], keep_calib[rows][:, others][has_out], a=float(a))
            aucs[i].append(roc_auc_score(lab[has_out], p[rows, k][has_out] / np.maximum(pr, _TINY)))
    if not aucs[0]:
        return 1.0, float("nan")
    means = np.array([np.mean(v) for v in aucs])
    best = int(np.argmax(means))
    return float(A_GRID[best]), float(means[best])


def _register(name: str, online: bool, description: str) -> None:
    needs = ("online_shadow" if online else "shadow_models", "shadow_recourse", "recourse_queries")

    @register_attack(name, description=description, needs=needs, reads_out_targets=not online)
    def attack(inputs: AttackInputs) -> AttackScores:
        o = inputs.lrt
        return rmia_cfd_attack(
            inputs.cfd,
            inputs.online_shadow if online else inputs.shadow,
            X_pool=inputs.X_pool,
            predict=inputs.model.predict,
            y=inputs.y,
            y_pool=inputs.y_pool,
            query_cfd=inputs.query_cfd,
            options=inputs.rmia,
            online=online,
            name=name,
            center=o.center,
            variance=o.variance,
            cdf=o.cdf,
            seed=inputs.seed,
        )

    attack.__qualname__ = f"rmia_cfd[{name}]"


_register(
    "rmia-cfd",
    False,
    "RMIA (Zarifzadeh et al. 2024) on counterfactual distances, offline: Pr(x) from out-models with the "
    "a-approximation; population z from the adversary's pool, their recourse queried (counted)",
)
_register(
    "rmia-cfd-online",
    True,
    "RMIA (Zarifzadeh et al. 2024) on counterfactual distances, online: Pr(x) over reference models trained "
    "on halves of the pool and the targets; population z queried (counted)",
)
