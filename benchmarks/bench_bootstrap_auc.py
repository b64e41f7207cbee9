"""Speed of the AUC intervals: the vectorized stratified bootstrap against a per-replicate loop.

For n targets (half members) and 1,000 replicates, times :func:`recourse_privacy.metrics.bootstrap_auc`
(one rank pass, then the replicates' Mann-Whitney statistics as cumulative sums over rank levels)
and the naive loop (``sklearn.metrics.roc_auc_score`` on each stratified resample; other draws of the
same scheme), back to back in this process, and checks that the intervals agree to Monte Carlo noise. Prints the machine's load: on a
shared machine read the ratio, not the seconds.

    PYTHONPATH=src python benchmarks/bench_bootstrap_auc.py [--n 10000] [--reps 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from sklearn.metrics import roc_auc_score

from recourse_privacy.metrics import bootstrap_auc, paired_auc_difference


def naive(labels: np.ndarray, scores: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """Stratified resamples (members and non-members apart), one roc_auc_score per replicate."""
    rng = np.random.default_rng(seed)
    mem, non = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    out = np.empty(reps)
    for b in range(reps):
        i1 = mem[rng.integers(0, mem.size, mem.size)]
        i0 = non[rng.integers(0, non.size, non.size)]
        idx = np.concatenate([i1, i0])
        out[b] = roc_auc_score(labels[idx], scores[idx])
    lo, hi = np.quantile(out, [0.025, 0.975])
    return float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    labels = (np.arange(args.n) < args.n // 2).astype(int)
    scores = rng.normal(size=args.n) + 0.2 * labels
    other = scores + rng.normal(size=args.n)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    t = time.perf_counter()
    fast = bootstrap_auc(labels, scores, n_boot=args.reps, seed=1)
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    paired_auc_difference(labels, scores, other, n_boot=args.reps, seed=1)
    t_pair = time.perf_counter() - t
    t = time.perf_counter()
    slow = naive(labels, scores, args.reps, seed=1)
    t_slow = time.perf_counter() - t
    print(f"{args.n} targets, {args.reps} replicates")
    print(f"vectorized bootstrap: {t_fast:.3f} s  interval [{fast[0]:.4f}, {fast[1]:.4f}]")
    print(f"paired difference (two attacks): {t_pair:.3f} s")
    print(f"per-replicate roc_auc_score loop: {t_slow:.3f} s  interval [{slow[0]:.4f}, {slow[1]:.4f}]")
    print(
        f"ratio loop / vectorized: {t_slow / t_fast:.1f}x; intervals agree within 0.002: {np.allclose(fast, slow, atol=2e-3)}"
    )


if __name__ == "__main__":
    main()
