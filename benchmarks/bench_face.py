"""FACE: time per recourse path for 1,000 queries on a 2,000-node adult graph (Pentyala et al. 2023, Table 2: T(s)).

Pentyala et al. 2023 builds its graphs on 2,000 sampled adult training points with the features age,
education-num, capital-gain, capital-loss and hours-per-week (min-max scaled), a logistic
model, and reports 75.79 s per path for FACE and 31.96 s for PrivRecourse (2.6 GHz 6-core
Core i7). This script does the same on our pipeline: 2,000 training rows (the graph's nodes),
logistic regression, 1,000 held-out queries the model rejects, and times

- the graph (``FACE.fit``: neighbours, KDE at every edge midpoint, directed edges), once;
- the recourse of all queries (``FACE.generate``: query edges, one multi-source Dijkstra,
  path reconstruction);

for the kNN graph (FACE's default here, 50 neighbours) and, with ``--complete``, the fully
connected graph of Pentyala et al.'s (2023) Table 2 (``mode="epsilon", radius=inf``). Time per path is
(fit + generate) / queries, and generate / queries once the graph exists.

    python benchmarks/bench_face.py [--features paper003|all] [--actionable] [--complete]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

PAPER003_FEATURES = ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-nodes", type=int, default=2000)
    ap.add_argument("--n-queries", type=int, default=1000)
    ap.add_argument("--features", choices=("paper003", "all"), default="paper003")
    ap.add_argument("--actionable", action="store_true", help="age and education-num may only increase, etc.")
    ap.add_argument(
        "--complete", action="store_true", help="also the fully connected graph (Pentyala et al. 2023, Table 2)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="benchmarks/results/face.json")
    args = ap.parse_args()

    from recourse_privacy.data import Dataset, Preprocessor, load_dataset
    from recourse_privacy.metrics import path_metrics
    from recourse_privacy.models import make_model
    from recourse_privacy.recourse import FACE, ActionSet

    ds = load_dataset("adult", args.data_dir)
    if args.features == "paper003":
        cols = list(PAPER003_FEATURES)
        ds = Dataset("adult", ds.X[cols], ds.y, ds.target, (), (), tuple(c for c in ds.increasing if c in cols))
    perm = np.random.default_rng(args.seed).permutation(ds.n_rows)
    train, held = perm[: args.n_nodes], perm[args.n_nodes :]
    pre = Preprocessor(scaling="minmax").fit(ds.X.iloc[train], ds)  # Pentyala et al. 2023 min-max scales
    X_train, y_train = pre.transform(ds.X.iloc[train]), ds.y[train]
    X_held = pre.transform(ds.X.iloc[held])
    model = make_model("logistic", random_state=args.seed).fit(X_train, y_train)
    Q = X_held[model.predict(X_held) == 0][: args.n_queries]
    aset = ActionSet.from_preprocessor(pre) if args.actionable else None
    settings = [("knn-50", {"mode": "knn", "n_neighbors": 50})]
    if args.complete:
        settings.append(("complete", {"mode": "epsilon", "radius": float("inf")}))
    rows = {}
    for label, params in settings:
        face = FACE(action_set=aset, **params)
        t = time.perf_counter()
        face.fit(X_train, y_train, model)
        fit_s = time.perf_counter() - t
        t = time.perf_counter()
        res = face.generate(model, Q)
        gen_s = time.perf_counter() - t
        pm = path_metrics([p for p, v in zip(res.paths, res.valid) if v], X_train)
        rows[label] = {
            "graph_nodes": len(X_train),
            "graph_edges": int(face.graph_.nnz),
            "fit_seconds": fit_s,
            "generate_seconds": gen_s,
            "queries": len(Q),
            "validity": res.validity,
            "seconds_per_path": (fit_s + gen_s) / len(Q),
            "seconds_per_path_graph_built": gen_s / len(Q),
            "mean_path_length": float(np.mean([len(p) - 1 for p in res.paths])),
            "pdensity": float(np.nanmean(pm["pdensity"])),
            "pl1": float(np.nanmean(pm["pl1"])),
        }
    result = {
        "features": list(pre.feature_names_out_),
        "actionable": args.actionable,
        "settings": rows,
        "paper003_seconds_per_path": {"face": 75.79, "privrecourse": 31.96},
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
    }
    print(f"FACE on adult ({', '.join(result['features'])}), {len(X_train)} nodes, {len(Q)} queries")
    for label, r in rows.items():
        print(
            f"  {label:<9} {r['graph_edges']:>8} edges: graph {r['fit_seconds']:7.2f} s, paths {r['generate_seconds']:7.2f} s"
            f" -> {r['seconds_per_path'] * 1e3:8.2f} ms per path ({r['seconds_per_path_graph_built'] * 1e3:.3f} ms "
            f"once the graph exists), validity {r['validity']:.3f}"
        )
    print("  Pentyala et al. 2023 (Table 2, adult): 75.79 s per path for FACE, 31.96 s for PrivRecourse")
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"  wrote {path}")


if __name__ == "__main__":
    main()
