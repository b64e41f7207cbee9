"""Batched DiCE (``DiverseCounterfactuals``) against dice-ml on the same torch MLP and query points.

dice-ml is not a dependency of recourse-privacy: give this benchmark its own environment::

    python3 -m venv /tmp/dice-venv
    /tmp/dice-venv/bin/pip install -c constraints.txt dice-ml
    /tmp/dice-venv/bin/pip install -c constraints.txt -e .
    /tmp/dice-venv/bin/python benchmarks/bench_dice.py [--n-points 1000] [--dice-points 10] [--random-points 100]

It trains the paper's MLP (one hidden layer of 1,000 ReLU) on heloc, takes the first
``--n-points`` held-out rows it rejects, and times k = 4 diverse counterfactuals per point:

- ours: ``DiverseCounterfactuals`` on all points at once;
- dice-ml's gradient method (``DicePyTorch``) on the first ``--dice-points`` of them (it runs
  one point at a time, 500 to 5,000 Adam steps each, so 1,000 points would take hours);
- dice-ml's random method on the first ``--random-points``.

dice-ml's PyTorch backend gets the same network wrapped as u -> sigmoid(f(lo + u (hi - lo))),
since with ``func="ohe-min-max"`` it feeds the model min-max normalised inputs; its data
interface gets the same training rows (all features declared continuous), so both sides
normalise, weight (inverse MAD) and clip identically. Post-hoc sparsity is off on both
sides: dice-ml's linear search steps by the data's decimal precision, which for standardised
floats is about 1e-16, i.e. up to 10,000 model calls per feature and counterfactual.
Throughput is counterfactuals attempted per second (points x k / seconds); the speed-up is
ours over dice-ml's. Both run with ``--threads`` torch threads (default 1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="heloc")
    ap.add_argument("--n-train", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=250)
    ap.add_argument("--n-points", type=int, default=1000)
    ap.add_argument("--dice-points", type=int, default=10, help="points for dice-ml's gradient method")
    ap.add_argument("--random-points", type=int, default=100, help="points for dice-ml's random method (0: skip)")
    ap.add_argument("--total-cfs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="benchmarks/results/dice.json")
    args = ap.parse_args()

    import dice_ml
    import pandas as pd
    import torch

    from recourse_privacy.data import Preprocessor, load_dataset
    from recourse_privacy.models import make_model
    from recourse_privacy.recourse import DiverseCounterfactuals

    torch.set_num_threads(args.threads)
    ds = load_dataset(args.dataset, args.data_dir)
    perm = np.random.default_rng(args.seed).permutation(ds.n_rows)
    train, held = perm[: args.n_train], perm[args.n_train :]
    pre = Preprocessor().fit(ds.X.iloc[train], ds)
    X_train, y_train = pre.transform(ds.X.iloc[train]), ds.y[train]
    X_held = pre.transform(ds.X.iloc[held])
    t = time.perf_counter()
    model = make_model("mlp", random_state=args.seed, epochs=args.epochs).fit(X_train, y_train)
    train_s = time.perf_counter() - t
    Q = X_held[model.predict(X_held) == 0][: args.n_points]
    if len(Q) < args.n_points:
        raise SystemExit(f"only {len(Q)} rejected held-out points; lower --n-points")
    k, names = args.total_cfs, [f"f{j}" for j in range(X_train.shape[1])]

    # ours: all points at once
    ours = DiverseCounterfactuals(total_cfs=k, posthoc_sparsity_param=None).fit(X_train, y_train, model)
    t = time.perf_counter()
    res = ours.generate(model, Q)
    ours_s = time.perf_counter() - t

    # dice-ml: same network on min-max inputs, same training rows
    lo = torch.as_tensor(X_train.min(axis=0), dtype=torch.float32)
    scale = torch.as_tensor(np.where(np.ptp(X_train, axis=0) > 0, np.ptp(X_train, axis=0), 1.0), dtype=torch.float32)
    net = model.torch_module()

    class OnMinMax(torch.nn.Module):
        def forward(self, u):
            x = lo + u * scale
            p = torch.sigmoid(net(x.reshape(-1, x.shape[-1])))
            return p[:, None] if u.ndim == 2 else p

    df = pd.DataFrame(X_train, columns=names).assign(y=y_train)
    data = dice_ml.Data(dataframe=df, continuous_features=names, outcome_name="y")
    wrapped = dice_ml.Model(model=OnMinMax().eval(), backend="PYT", func="ohe-min-max")
    out: dict = {}
    for method, n_pts in (("gradient", args.dice_points), ("random", args.random_points)):
        if n_pts <= 0:
            continue
        explainer = dice_ml.Dice(data, wrapped, method=method)
        queries = pd.DataFrame(Q[:n_pts], columns=names)
        kw = {"random_seed": args.seed} if method == "random" else {}
        t = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exp = explainer.generate_counterfactuals(
                    queries, total_CFs=k, desired_class=1, posthoc_sparsity_param=None, verbose=False, **kw
                )
        except Exception as err:  # report, do not hide, a backend that cannot run
            out[method] = {"error": f"{type(err).__name__}: {err}"}
            continue
        sec = time.perf_counter() - t
        found = [e.final_cfs_df for e in exp.cf_examples_list]
        n_found = sum(0 if f is None else len(f) for f in found)
        l1 = [
            np.abs(f[names].to_numpy(float) - Q[i]).sum(axis=1).mean()
            for i, f in enumerate(found)
            if f is not None and len(f)
        ]
        out[method] = {
            "points": n_pts,
            "seconds": sec,
            "cfs_per_second": n_pts * k / sec,
            "valid_share": n_found / (n_pts * k),
            "mean_l1_of_valid": float(np.mean(l1)) if l1 else None,
        }
    ours_rate = len(Q) * k / ours_s
    sub = args.dice_points
    result = {
        "dataset": args.dataset,
        "n_points": len(Q),
        "total_cfs": k,
        "model": "mlp (1 x 1000 ReLU), float32",
        "epochs": args.epochs,
        "train_seconds": train_s,
        "threads": args.threads,
        "ours": {
            "seconds": ours_s,
            "cfs_per_second": ours_rate,
            "valid_share": float(res.info["diverse_valid"].mean()),
            "valid_share_on_dice_points": float(res.info["diverse_valid"][:sub].mean()),
            "mean_l1_of_valid_on_dice_points": float(
                np.mean(
                    [
                        np.abs(res.info["diverse"][i][res.info["diverse_valid"][i]] - Q[i]).sum(axis=1).mean()
                        for i in range(sub)
                        if res.info["diverse_valid"][i].any()
                    ]
                )
            ),
            "mean_iterations": float(res.n_iter.mean()),
        },
        "dice_ml": out,
        "speedup_vs_gradient": ours_rate / out["gradient"]["cfs_per_second"]
        if "cfs_per_second" in out.get("gradient", {})
        else None,
        "speedup_vs_random": ours_rate / out["random"]["cfs_per_second"]
        if "cfs_per_second" in out.get("random", {})
        else None,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
    }
    print(
        f"DiCE, k={k}, on {len(Q)} {args.dataset} points (MLP 1x1000, {args.epochs} epochs), {args.threads} thread(s)"
    )
    print(
        f"  ours (batched)       {ours_s:9.2f} s for {len(Q)} points: {ours_rate:10.2f} CFs/s "
        f"(valid {result['ours']['valid_share']:.3f})"
    )
    for method, r in out.items():
        if "error" in r:
            print(f"  dice-ml {method:<9}    failed: {r['error']}")
        else:
            print(
                f"  dice-ml {method:<9}  {r['seconds']:9.2f} s for {r['points']} points: {r['cfs_per_second']:10.2f} "
                f"CFs/s (valid {r['valid_share']:.3f})"
            )
    for key in ("speedup_vs_gradient", "speedup_vs_random"):
        if result[key]:
            print(f"  {key.replace('_', ' ')}: {result[key]:.1f} x")
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"  wrote {path}")


if __name__ == "__main__":
    main()
