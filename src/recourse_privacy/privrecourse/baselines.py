"""Pentyala et al.'s (2023, sec. 5.3) baselines: the nodes of the graph from per-record Laplace noise or from MST.

Both publish ``n`` points in [0, 1]^d under (epsilon, delta) and return them with a
:class:`~recourse_privacy.accounting.ReleaseBudget`; the graph is then built on them
exactly as on PrivRecourse's centres.

- :func:`laplace_noisy_data`: every record, every feature, Laplace noise of scale d / epsilon
  (sensitivity 1 per feature in [0, 1]; the budget split equally over the d features of a
  record, records in parallel); no clipping after the noise unless ``clip=True``.
- :func:`mst_synthetic_data`: MST (McKenna, Miklau and Sheldon 2021) on binned features,
  written on the graphical-model inference of ``mbi`` (private-pgm): (epsilon, delta) -> zCDP
  rho (Canonne, Kamath and Steinke 2020), a third each for the noisy 1-way marginals, the
  exponential-mechanism choice of a maximum spanning tree of 2-way marginals, and the noisy tree
  marginals; Private-PGM mirror descent, then ``synthetic_data``. Features are binned
  into ``bins`` equal-width bins over [0, 1] (smartnoise's default for continuous columns: 10)
  and decoded to the bin midpoint (``decode="midpoint"``, smartnoise) or uniformly in the bin.
  The total is estimated by mbi, not passed in (passing ``len(data)`` would leak n).
"""

from __future__ import annotations

import math

import numpy as np

from recourse_privacy.accounting import ReleaseBudget
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.global_rng import numpy_global_seed
from recourse_privacy.validation import (
    as_generator,
    check_choice,
    check_delta,
    check_epsilon,
    check_matrix,
    check_positive_int,
    derive_seed,
)

__all__ = ["cdp_delta", "cdp_rho", "laplace_noisy_data", "mst_synthetic_data"]


def laplace_noisy_data(X: np.ndarray, *, epsilon: float, clip: bool = False, random_state=None):
    """Each record plus Laplace(d / epsilon) per feature: (epsilon, 0)-DP for neighbours that replace one record.
    Returns (points, ledger). The release has one point per record, so it shows the number of records: for
    neighbours that add or remove a record (those of every other release here) it is not DP at all."""
    X = check_matrix(X)
    eps = check_epsilon(epsilon)
    d = X.shape[1]
    out = X + as_generator(random_state).laplace(0.0, d / eps, X.shape)
    led = ReleaseBudget(eps, 0.0)
    led.spend(
        "per-record Laplace noise",
        eps,
        note=f"scale d/eps = {d / eps:g} per feature; records in parallel; neighbours replace one record "
        "(the number of records is released: not DP for adding or removing one)",
    )
    return (np.clip(out, 0.0, 1.0) if clip else out), led


def cdp_delta(rho: float, eps: float) -> float:
    """The delta of (eps, delta)-DP implied by rho-zCDP (Canonne, Kamath and Steinke 2020, Prop. 12)."""
    if rho == 0:
        return 0.0
    amin, amax = 1.01, (eps + 1) / (2 * rho) + 2
    for _ in range(1000):
        alpha = (amin + amax) / 2
        if (2 * alpha - 1) * rho - eps + math.log1p(-1.0 / alpha) < 0:
            amin = alpha
        else:
            amax = alpha
    delta = math.exp((alpha - 1) * (alpha * rho - eps) + alpha * math.log1p(-1 / alpha)) / (alpha - 1.0)
    return min(delta, 1.0)


def cdp_rho(eps: float, delta: float) -> float:
    """The largest rho such that rho-zCDP implies (eps, delta)-DP (bisection on :func:`cdp_delta`)."""
    if delta <= 0:
        raise InvalidInputError("MST is a zCDP mechanism: delta must be > 0 (McKenna et al. use 1e-9)")
    lo, hi = 0.0, eps + 1
    for _ in range(1000):
        rho = (lo + hi) / 2
        if cdp_delta(rho, eps) <= delta:
            lo = rho
        else:
            hi = rho
    return lo


def mst_synthetic_data(
    X: np.ndarray,
    *,
    epsilon: float,
    delta: float = 1e-9,
    n_rows: int | None = None,
    bins: int = 10,
    decode: str = "midpoint",
    iters: int = 1000,
    random_state=None,
):
    """MST synthetic records in [0, 1]^d from ``X`` (rows in [0, 1]^d). Returns (points, ledger, info).

    ``n_rows``: a public number of synthetic rows; by default mbi's estimate of the data's row count from the noisy
    1-way marginals (post-processing), so that the release never shows the exact number of private rows (which
    would tell a neighbour with one more row apart with certainty: MST's noise is calibrated to add/remove one).
    """
    mbi = _import_mbi()
    X = check_matrix(X)
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    bins = check_positive_int(bins, "bins", minimum=2)
    check_choice(decode, "decode", ("midpoint", "uniform"))
    d = X.shape[1]
    if d < 2:
        raise InvalidInputError("MST needs at least 2 features")
    if (X < -1e-9).any() or (X > 1 + 1e-9).any():
        raise InvalidInputError("X has values outside [0, 1]: scale with the declared public bounds first")
    n_rows = None if n_rows is None else check_positive_int(n_rows, "n_rows")
    rng = as_generator(random_state)
    rho = cdp_rho(eps, dlt)
    B = np.minimum((X * bins).astype(np.int64), bins - 1)
    names = [f"x{j}" for j in range(d)]
    domain = mbi.Domain(names, [bins] * d)
    sigma = math.sqrt(3.0 / (2.0 * rho))
    one_way = _measure(mbi, B, [(j,) for j in range(d)], bins, sigma, rng)
    est = mbi.MirrorDescent()
    model = est.estimate(domain, one_way, iters=iters)
    tree = _spanning_tree(model, B, bins, rho, rng)
    model = est.estimate(domain, one_way + _measure(mbi, B, tree, bins, sigma, rng), iters=iters)
    with numpy_global_seed(derive_seed(int(rng.integers(2**31)), 0)):  # mbi samples with numpy's global generator
        syn = model.synthetic_data(rows=n_rows)
    codes = np.column_stack([np.asarray(syn.to_dict()[a] if hasattr(syn, "to_dict") else syn.data[a]) for a in names])
    out = (codes + (0.5 if decode == "midpoint" else rng.random(codes.shape))) / bins
    led = ReleaseBudget(eps, dlt)
    led.spend(
        "MST (1-way marginals, spanning tree, tree marginals)",
        eps,
        dlt,
        note=f"zCDP rho = {rho:.6g} split 1/3 each, converted (Canonne-Kamath-Steinke); sigma = {sigma:.4g}; "
        + ("rows: the model's estimate of the count from the noisy marginals" if n_rows is None else "rows: public"),
    )
    tree_names = [(names[i], names[j]) for i, j in tree]
    info = {"rho": rho, "tree": tree_names, "avg_2way_tvd": _avg_2way_tvd(B, codes, bins), "n_rows": len(codes)}
    return out, led, info


class _MBI:
    """The parts of ``mbi`` (private-pgm) MST uses, imported once with JAX in float64."""

    def __init__(self):
        import warnings

        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_compilation_cache", False)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*persistent compilation cache.*")
            from mbi import Domain, LinearMeasurement
        from mbi.estimation import MirrorDescent

        self.Domain, self.LinearMeasurement, self.MirrorDescent = Domain, LinearMeasurement, MirrorDescent


def _import_mbi() -> _MBI:
    return _MBI()


def _measure(mbi: _MBI, B: np.ndarray, cliques, bins: int, sigma: float, rng) -> list:
    """Noisy marginal counts of ``cliques`` (column tuples): equal weights, the group's total zCDP rho/3."""
    out = []
    sd = sigma * math.sqrt(len(cliques))
    for cl in cliques:
        flat = np.ravel_multi_index(tuple(B[:, i] for i in cl), (bins,) * len(cl))
        counts = np.bincount(flat, minlength=bins ** len(cl)).astype(np.float64)
        names = tuple(f"x{i}" for i in cl)
        out.append(mbi.LinearMeasurement(counts + rng.normal(0.0, sd, counts.shape), names, sd))
    return out


def _spanning_tree(model, B: np.ndarray, bins: int, rho: float, rng) -> list[tuple[int, int]]:
    """MST's tree: the maximum spanning tree of the 2-way marginals' L1 errors, picked with the exponential mechanism.

    The model after the 1-way measurements is a product of independent marginals, so its 2-way
    marginal of (a, b) is the outer product of a's and b's (scaled to the total): every pair's
    error in one batched computation, with no projection of the graphical model per pair.
    """
    from scipy.cluster.hierarchy import DisjointSet

    n, d = B.shape
    i, j, est = _independent_pair_marginals(model, d)
    true = np.zeros((len(i), bins * bins))
    np.add.at(true, (np.repeat(np.arange(len(i)), n), (B[:, i] * bins + B[:, j]).T.ravel()), 1.0)
    score = np.abs(true - est.reshape(len(i), -1)).sum(axis=1)
    ds = DisjointSet(range(d))
    eps_sel = math.sqrt(8 * (rho / 3) / (d - 1))
    tree = []
    for _ in range(d - 1):  # d - 1 exponential-mechanism rounds (Gumbel-max), each among the pairs still open
        open_ = np.flatnonzero([not ds.connected(a, b) for a, b in zip(i, j)])
        pick = open_[int(np.argmax(eps_sel * score[open_] / 2.0 + rng.gumbel(size=len(open_))))]
        tree.append((int(i[pick]), int(j[pick])))
        ds.merge(int(i[pick]), int(j[pick]))
    return tree


def _independent_pair_marginals(model, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (i < j)'s 2-way marginal of a model fitted on 1-way marginals only: the outer product of
    the two 1-way marginals over the total (the model is a product of independent factors)."""
    one = np.stack([np.asarray(model.project((f"x{k}",)).datavector(), np.float64) for k in range(d)])
    total = one.sum(axis=1).mean()
    i, j = np.triu_indices(d, k=1)
    return i, j, one[i][:, :, None] * one[j][:, None, :] / max(total, 1e-300)


def _avg_2way_tvd(B: np.ndarray, codes: np.ndarray, bins: int) -> float:
    """The average 2-way total-variation distance between the binned data and the synthetic codes."""
    d = B.shape[1]
    i, j = np.triu_indices(d, k=1)

    def hist(M):
        h = np.zeros((len(i), bins * bins))
        np.add.at(h, (np.repeat(np.arange(len(i)), len(M)), (M[:, i] * bins + M[:, j]).T.ravel()), 1.0)
        return h / len(M)

    return float(np.mean(0.5 * np.abs(hist(B) - hist(codes)).sum(axis=1)))
