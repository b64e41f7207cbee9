"""Pentyala et al.'s (2023, sec. 5.3) baselines: the nodes of the graph from per-record Laplace noise or from MST.

Both publish ``n`` points in [0, 1]^d under (epsilon, delta) and return them with a
:class:`~recourse_privacy.privrecourse.ledger.BudgetLedger`; the graph is then built on them
exactly as on PrivRecourse's centres.

- :func:`laplace_noisy_data`: every record, every feature, Laplace noise of scale d / epsilon
  (sensitivity 1 per feature in [0, 1]; the budget split equally over the d features of a
  record, records in parallel); no clipping after the noise unless ``clip=True``.
- :func:`mst_synthetic_data`: MST (McKenna, Miklau and Sheldon 2021) on binned features,
  written on the graphical-model inference of ``mbi`` (private-pgm): (epsilon, delta) -> zCDP
  rho (Canonne, Kamath and Steinke 2020), a third each for the noisy 1-way marginals, the
  exponential-mechanism choice of a maximum spanning tree of 2-way marginals, and the noisy tree
  marginals; Private-PGM mirror descent, then ``synthetic_data(rows=n)``. Features are binned
  into ``bins`` equal-width bins over [0, 1] (smartnoise's default for continuous columns: 10)
  and decoded to the bin midpoint (``decode="midpoint"``, smartnoise) or uniformly in the bin.
  The total is estimated by mbi, not passed in (passing ``len(data)`` would leak n).
"""

from __future__ import annotations

import math

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.privrecourse.ledger import BudgetLedger
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
    """Each record plus Laplace(d / epsilon) per feature: (epsilon, 0)-DP. Returns (points, ledger)."""
    X = check_matrix(X)
    eps = check_epsilon(epsilon)
    d = X.shape[1]
    out = X + as_generator(random_state).laplace(0.0, d / eps, X.shape)
    led = BudgetLedger(eps, 0.0)
    led.spend("per-record Laplace noise", eps, note=f"scale d/eps = {d / eps:g} per feature; records in parallel")
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
    """MST synthetic records in [0, 1]^d from ``X`` (rows in [0, 1]^d). Returns (points, ledger, info)."""
    import warnings

    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*persistent compilation cache.*")
        from mbi import Domain, LinearMeasurement
    from mbi.estimation import MirrorDescent
    from scipy.cluster.hierarchy import DisjointSet

    X = check_matrix(X)
    eps, dlt = check_epsilon(epsilon), check_delta(delta)
    bins = check_positive_int(bins, "bins", minimum=2)
    check_choice(decode, "decode", ("midpoint", "uniform"))
    n, d = X.shape
    if d < 2:
        raise InvalidInputError("MST needs at least 2 features")
    if (X < -1e-9).any() or (X > 1 + 1e-9).any():
        raise InvalidInputError("X has values outside [0, 1]: scale with the declared public bounds first")
    n_rows = n if n_rows is None else check_positive_int(n_rows, "n_rows")
    rng = as_generator(random_state)
    rho = cdp_rho(eps, dlt)
    B = np.minimum((X * bins).astype(np.int64), bins - 1)
    names = [f"x{j}" for j in range(d)]
    domain = Domain(names, [bins] * d)
    sigma = math.sqrt(3.0 / (2.0 * rho))

    def measure(cliques):
        out = []
        for cl in cliques:
            idx = [names.index(a) for a in cl]
            flat = np.ravel_multi_index(tuple(B[:, i] for i in idx), (bins,) * len(idx))
            counts = np.bincount(flat, minlength=bins ** len(idx)).astype(np.float64)
            sd = sigma * math.sqrt(len(cliques))  # equal weights: total zCDP of the group = rho/3
            out.append(LinearMeasurement(counts + rng.normal(0.0, sd, counts.shape), tuple(cl), sd))
        return out

    one_way = measure([(a,) for a in names])
    est = MirrorDescent()
    model = est.estimate(domain, one_way, iters=iters)
    # maximum spanning tree of 2-way marginals, chosen with the exponential mechanism
    pairs = [(names[i], names[j]) for i in range(d) for j in range(i + 1, d)]
    score = {}
    for a, b in pairs:
        i, j = names.index(a), names.index(b)
        true = np.bincount(B[:, i] * bins + B[:, j], minlength=bins * bins).astype(np.float64)
        score[(a, b)] = float(np.abs(true - np.asarray(model.project((a, b)).datavector())).sum())
    ds = DisjointSet(names)
    rounds = d - 1
    eps_sel = math.sqrt(8 * (rho / 3) / rounds)
    tree = []
    for _ in range(rounds):
        cand = [p for p in pairs if not ds.connected(*p)]
        q = np.array([score[p] for p in cand])
        logits = eps_sel * q / 2.0
        pick = int(np.argmax(logits + rng.gumbel(size=len(cand))))
        tree.append(cand[pick])
        ds.merge(*cand[pick])
    model = est.estimate(domain, one_way + measure(tree), iters=iters)
    state = np.random.get_state()  # mbi samples with numpy's global generator: seed it, then restore
    try:
        np.random.seed(derive_seed(int(rng.integers(2**31)), 0))
        syn = model.synthetic_data(rows=n_rows)
    finally:
        np.random.set_state(state)
    codes = np.column_stack([np.asarray(syn.to_dict()[a] if hasattr(syn, "to_dict") else syn.data[a]) for a in names])
    if decode == "midpoint":
        out = (codes + 0.5) / bins
    else:
        out = (codes + rng.random(codes.shape)) / bins
    led = BudgetLedger(eps, dlt)
    led.spend(
        "MST (1-way marginals, spanning tree, tree marginals)",
        eps,
        dlt,
        note=f"zCDP rho = {rho:.6g} split 1/3 each, converted (Canonne-Kamath-Steinke); sigma = {sigma:.4g}",
    )
    # average 2-way total-variation distance between the binned data and the synthetic data (paper: 0.19 / 0.21)
    tvd = []
    for i in range(d):
        for j in range(i + 1, d):
            a = np.bincount(B[:, i] * bins + B[:, j], minlength=bins * bins) / n
            s = np.bincount(codes[:, i] * bins + codes[:, j], minlength=bins * bins) / len(codes)
            tvd.append(0.5 * np.abs(a - s).sum())
    return out, led, {"rho": rho, "tree": tree, "avg_2way_tvd": float(np.mean(tvd))}
