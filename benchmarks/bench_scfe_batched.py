"""Batched SCFE against the same algorithm run one point at a time (CARLA's way), on heloc.

Trains the paper's MLP (one hidden layer of 1,000 ReLU) on heloc rows, takes N points it
rejects, and times ``SCFE().generate`` on all of them at once and with ``batch_size=1``.
Prints both times, their ratio, and how far the two results differ.

    python benchmarks/bench_scfe_batched.py [--n-points 2000] [--epochs 250] [--device auto] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from recourse_privacy.data import Preprocessor, load_dataset, split_pools
from recourse_privacy.models import make_model
from recourse_privacy.models.device import describe_device, use_device
from recourse_privacy.recourse import SCFE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-points", type=int, default=2000)
    ap.add_argument("--n-train", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="benchmarks/results/scfe_batched.json")
    args = ap.parse_args()
    with use_device(args.device):
        run(args)


def run(args) -> None:
    """The benchmark on the device of the enclosing ``use_device`` block."""

    ds = load_dataset("heloc", args.data_dir)
    pools = split_pools(ds.n_rows, args.n_train, ds.n_rows - args.n_train - 1, 1, random_state=args.seed)
    pre = Preprocessor().fit(ds.X.iloc[pools.members], ds)
    X_train, y_train = pre.transform(ds.X.iloc[pools.members]), ds.y[pools.members]
    X_rest = pre.transform(ds.X.iloc[pools.nonmembers])
    t = time.perf_counter()
    model = make_model("mlp", random_state=args.seed, epochs=args.epochs).fit(X_train, y_train)
    train_s = time.perf_counter() - t
    pool = np.vstack([X_train, X_rest])
    rejected = pool[model.predict(pool) == 0]
    if len(rejected) < args.n_points:
        raise SystemExit(f"only {len(rejected)} rejected points; lower --n-points")
    X = rejected[: args.n_points]

    t = time.perf_counter()
    batched = SCFE().generate(model, X)
    batched_s = time.perf_counter() - t
    t = time.perf_counter()
    single = SCFE(batch_size=1).generate(model, X)
    single_s = time.perf_counter() - t

    result = {
        "n_points": args.n_points,
        "model": "mlp (1 x 1000 ReLU)",
        "epochs": args.epochs,
        "train_seconds": train_s,
        "batched_seconds": batched_s,
        "one_at_a_time_seconds": single_s,
        "speedup": single_s / batched_s,
        "batched_validity": batched.validity,
        "one_at_a_time_validity": single.validity,
        "same_iteration_count_share": float(np.mean(batched.n_iter == single.n_iter)),
        "max_abs_counterfactual_difference": float(np.abs(batched.counterfactuals - single.counterfactuals).max()),
        "mean_iterations": float(np.mean(batched.n_iter[batched.n_iter >= 0])),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "device": describe_device(),
    }
    print(f"SCFE on {args.n_points} heloc points (MLP 1x1000, trained {args.epochs} epochs in {train_s:.1f} s)")
    print(f"  device           {result['device']}")
    print(f"  batched          {batched_s:9.2f} s   validity {batched.validity:.4f}")
    print(f"  one at a time    {single_s:9.2f} s   validity {single.validity:.4f}")
    print(f"  speed-up         {single_s / batched_s:9.1f} x")
    print(
        f"  same stopping iteration for {result['same_iteration_count_share']:.1%} of points; "
        f"max |difference| {result['max_abs_counterfactual_difference']:.2e} (float32 batched vs single matmuls)"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"  wrote {out}")


if __name__ == "__main__":
    main()
