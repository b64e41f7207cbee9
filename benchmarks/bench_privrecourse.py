"""PrivRecourse and FACE: time per path after the graph is built, build times, and the build's growth.

Paper 003 (Pentyala et al. 2023, Table 2) reports 75.79 s per path for FACE and 31.96 s for
PrivRecourse on Adult (2,000 graph points, 5 features; 2.6 GHz 6-core Core i7). Here, on the
same setting (our reproduction's split, public bounds, DP logistic regression epsilon 1):

1. build times: FACE as paper 003 runs it (Algorithms 1/2 on the 2,000 raw points, fully
   connected, w = d / rho), the existing ``face`` method (kNN graph, 50 neighbours) and
   PrivRecourse (convergent DP k-means, K = 500, then the graph);
2. time per path for 1,000 rejected queries once the graph exists (target <= 10 ms);
3. growth of the graph build (raw points as nodes, sparse 10-nearest-neighbour graph, weights
   from FACE's k-NN density proxy at the midpoints: a KDE sum over tens of thousands of Adult's
   concentrated rows per edge is the bottleneck) from 2,000 to 50,000 nodes, including the
   multi-source Dijkstra: wall time and peak traced memory (tracemalloc).

    python benchmarks/bench_privrecourse.py [--sizes 2000,5000,10000,20000,50000] [--out bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import tracemalloc

import numpy as np


def _time_paths(method, model, X_graph, y_graph, Q):
    t0 = time.perf_counter()
    method.fit(X_graph, y_graph, model)
    build = time.perf_counter() - t0
    method.generate(model, Q[:10])  # warm-up (index construction is part of the build)
    t0 = time.perf_counter()
    res = method.generate(model, Q)
    per_path = (time.perf_counter() - t0) / len(Q)
    return build, per_path, float(res.validity)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--sizes", default="2000,5000,10000,20000,50000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    from recourse_privacy.models.dp import DPLogisticModel
    from recourse_privacy.privrecourse.graph import build_graph, candidate_costs
    from recourse_privacy.recourse import make_recourse
    from recourse_privacy.reproductions.pentyala2023_setup import load_split

    split = load_split("adult", None, args.seed)
    Xtr, ytr, Xg, yg, Xte = split.X_train, split.y_train, split.X_graph, split.y_graph, split.X_test
    model = DPLogisticModel(epsilon=1.0, data_norm=float(np.sqrt(5)), random_state=args.seed).fit(Xtr, ytr)
    Q = Xte[model.predict(Xte) == 0][: args.n_queries]
    out = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus (shared, loaded)",
        "n_queries": len(Q),
        "paper_seconds_per_path": {"FACE": 75.79, "PrivRecourse": 31.96},
        "methods": {},
    }
    for label, name, params in (
        ("FACE (paper 003: Alg. 1/2 on raw data, complete graph)", "privrecourse-data", {}),
        ("face (existing, kNN 50)", "face", {}),
        ("PrivRecourse (K=500, em_point)", "privrecourse", {"clustering": "convergent", "random_state": args.seed}),
    ):
        build, per_path, validity = _time_paths(make_recourse(name, **params), model, Xg, yg, Q)
        out["methods"][label] = {"build_seconds": build, "seconds_per_path": per_path, "validity": validity}
        print(f"{label:<58} build {build:8.2f} s   per path {per_path * 1e3:8.4f} ms   validity {validity:.3f}")

    rng = np.random.default_rng(args.seed)
    growth = []
    for n in [int(s) for s in args.sizes.split(",")]:
        X = Xtr[rng.choice(len(Xtr), n, replace=n > len(Xtr))]
        X = np.clip(X + rng.normal(0, 1e-4, X.shape), 0, 1)  # break exact duplicates of resampled rows
        tracemalloc.start()
        t0 = time.perf_counter()
        G, _ = build_graph(X, n_neighbors=10, density="knn")
        cost, pred = candidate_costs(G, model.predict(X) == 1)
        secs = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        growth.append({"n_nodes": n, "n_edges": int(G.nnz), "build_seconds": secs, "peak_mib": peak})
        print(f"growth: {n:>6} nodes, {G.nnz:>8} edges: {secs:7.2f} s, peak {peak:8.1f} MiB")
    out["growth"] = growth
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
