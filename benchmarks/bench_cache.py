"""Hit rates of the artifact cache in a small grid, and the time it saves (issue 14, item 1).

Runs a grid of audits (Table 2's layout: one dataset and model, several recourse methods, the
same owner and shadow models in every cell) three times in the same process: without the cache,
with an empty cache (the owner and the shadow models are trained by the first cell and read by
the others), and again with the filled cache (a repeated audit: everything is read). Prints the
device, each pass's wall time, the hits and misses per role (owner model, owner recourse, shadow
models, shadow recourse) and whether every number equals the uncached pass's.

    python benchmarks/bench_cache.py [--dataset heloc] [--methods scfe,cadex,gs] [--shadow-models 4] [--epochs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from recourse_privacy.audit import AuditConfig, run_audit
from recourse_privacy.cache import ArtifactCache, merge_stats
from recourse_privacy.models.torch_utils import torch_threads


def _numbers(result) -> str:
    d = result.to_dict()
    d.pop("timing_seconds")
    d["recourse"] = {k: v for k, v in d["recourse"].items() if k != "seconds"}
    return json.dumps(d, sort_keys=True, default=str)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="heloc")
    ap.add_argument("--methods", default="scfe,cadex,gs")
    ap.add_argument("--shadow-models", type=int, default=4)
    ap.add_argument("--n-members", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--out", default="benchmarks/results/cache.json")
    args = ap.parse_args()

    cells = [
        AuditConfig(
            dataset=args.dataset,
            model="mlp",
            recourse=m,
            attacks=("cfd", "cfd-lrt"),
            n_members=args.n_members,
            shadow_models=args.shadow_models,
            n_calibration=200,
            model_params={"epochs": args.epochs, "lr": 1e-3},
        )
        for m in args.methods.split(",")
    ]
    print(f"device: cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1 torch thread)")
    print(f"load average: {os.getloadavg()}")
    passes = {}
    with tempfile.TemporaryDirectory() as root, torch_threads(1):
        # warm-up, untimed: imports and first-call costs must not count against the first pass
        run_audit(cells[0], cache="off", shadow_models=2, model_params={"epochs": 1})
        for name, cache in (("no cache", None), ("empty cache", root), ("filled cache", root)):
            t0 = time.perf_counter()
            stats, numbers, per_cell = [], [], []
            for cfg in cells:
                artifacts = ArtifactCache(cache) if cache else None
                t = time.perf_counter()
                res = run_audit(cfg, cache=artifacts or "off")
                per_cell.append(round(time.perf_counter() - t, 2))
                numbers.append(_numbers(res))
                stats.append(artifacts.stats_dict() if artifacts else {})
            passes[name] = {
                "seconds": round(time.perf_counter() - t0, 2),
                "cell_seconds": dict(zip(args.methods.split(","), per_cell)),
                "stats": merge_stats(*stats),
                "numbers": numbers,
            }
    same = all(p["numbers"] == passes["no cache"]["numbers"] for p in passes.values())
    for name, p in passes.items():
        print(f"\n{name}: {p['seconds']:.1f} s (cells: {p['cell_seconds']})")
        for role, s in p["stats"].items():
            print(f"  {role:16s} hits {s['hits']:3d}  misses {s['misses']:3d}  hit rate {s['hit_rate']:.0%}")
    print(f"\nevery number equal to the uncached pass's: {same}")
    out = {
        "device": "cpu",
        "load_average": os.getloadavg(),
        "same_numbers": same,
        **{k: {kk: vv for kk, vv in v.items() if kk != "numbers"} for k, v in passes.items()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
