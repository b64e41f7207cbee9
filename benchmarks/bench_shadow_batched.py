"""Batched against sequential training of shadow MLPs (issue 14, item 3).

Trains N shadow MLPs (one hidden layer of 1,000 ReLU, the paper's) on complementary halves
of a heloc-sized adversary pool, once one after another (``MLPModel.fit``) and once all
together (``fit_mlps_batched``: stacked weights, batched matrix products, a hand-written
backward and one fused Adam step), with the same epochs, and prints the device, the machine's
load, both wall times, their ratio and how far the two sets of models differ.

    python benchmarks/bench_shadow_batched.py [--n-shadow 16] [--epochs 250] [--pool 3000] [--device auto] [--threads N]

One after another, each model trains in one thread (``MLPModel.fit``: more threads do not help its small
products); the batched run uses torch's threads (``--threads 1`` compares thread for thread). Since stop 34
``MLPModel.fit`` is the same trainer with a stack of one (``models/mlp_trainer.py``), so the ratio is what
stacking and the threads buy; the earlier ratios (7.4x for 16 networks) were against the autograd trainer
``MLPModel.fit`` had then (``tests/_autograd_mlp.py`` keeps it as the tests' reference), about 4-5x slower.

The ratio is the number to read on a shared machine: both runs see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from recourse_privacy.attacks import balanced_keep
from recourse_privacy.data import Preprocessor, load_dataset, split_pools
from recourse_privacy.models import make_model
from recourse_privacy.models.batched import fit_mlps_batched
from recourse_privacy.models.device import describe_device, resolve_device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-shadow", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=250)
    ap.add_argument("--pool", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None, help="torch threads of the batched run (default: torch's)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="benchmarks/results/shadow_batched.json")
    args = ap.parse_args()

    device = str(resolve_device(args.device))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    ds = load_dataset("heloc", args.data_dir)
    pools = split_pools(ds.n_rows, args.pool, 1, 1, random_state=args.seed)
    X = Preprocessor().fit_transform(ds.X.iloc[pools.members], ds)
    y = ds.y[pools.members]
    keep = balanced_keep(len(X), args.n_shadow, 0.5, args.seed)
    rows = [np.flatnonzero(keep[:, k]) for k in range(args.n_shadow)]

    def mlp(k: int):
        return make_model("mlp", random_state=k, epochs=args.epochs, device=device)

    load_before = os.getloadavg()[0]
    t = time.perf_counter()
    alone = [mlp(k).fit(X[r], y[r]) for k, r in enumerate(rows)]
    sequential_s = time.perf_counter() - t
    t = time.perf_counter()
    together = fit_mlps_batched([mlp(k) for k in range(args.n_shadow)], X, y, rows)
    batched_s = time.perf_counter() - t
    load_after = os.getloadavg()[0]

    diff = max(float(np.abs(a.decision_function(X) - b.decision_function(X)).max()) for a, b in zip(alone, together))
    agree = float(np.mean([np.mean(a.predict(X) == b.predict(X)) for a, b in zip(alone, together)]))
    result = {
        "device": describe_device(device),
        "n_shadow": args.n_shadow,
        "rows_per_shadow": len(rows[0]),
        "n_features": X.shape[1],
        "epochs": args.epochs,
        "sequential_seconds": sequential_s,
        "batched_seconds": batched_s,
        "speedup": sequential_s / batched_s,
        "max_abs_logit_difference": diff,
        "prediction_agreement": agree,
        "cores": os.cpu_count(),
        "torch_threads": {"sequential": 1, "batched": torch.get_num_threads()},
        "load_average_1min": [load_before, load_after],
    }
    print(f"{args.n_shadow} shadow MLPs (1 x 1000 ReLU), {len(rows[0])} heloc rows each, {args.epochs} epochs")
    print(f"  device             {result['device']}")
    print(f"  load (1 min)       {load_before:.2f} before, {load_after:.2f} after ({os.cpu_count()} cores)")
    print(
        f"  torch threads      1 one after another (MLPModel.fit's own), {torch.get_num_threads()} batched (--threads)"
    )
    print(f"  one after another  {sequential_s:9.1f} s")
    print(f"  batched (stacked)  {batched_s:9.1f} s")
    print(f"  speed-up           {sequential_s / batched_s:9.2f} x")
    print(f"  max |logit difference| {diff:.2e}, predictions agree on {agree:.2%} of rows")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"  wrote {out}")


if __name__ == "__main__":
    main()
