"""Black-box recourse speed: counterfactuals per second before (a git ref, default main) and after (this tree).

On the table-2 MLPs of Pawelczyk et al. (2023) (one hidden layer of 1,000 ReLU, 250 epochs; heloc
with Adam lr 1e-3, 3,000 members; adult and diabetes 5,000 members; pools and preprocessing as in
``reproductions/pawelczyk2023-table2.yaml``), trained once with this tree and kept under
``--model-dir``, this times on the first ``--n-points`` non-members the model rejects:

- ``gs``: Growing Spheres (defaults, ``random_state=0``), ``generate``;
- ``cchvae``: C-CHVAE, the VAE's training (``fit``) and ``generate`` apart;
- ``revise``: REVISE, likewise (the same VAE);
- ``face``: FACE's graph build (``fit`` on the members) and ``generate``;
- ``scfe``: SCFE (Wachter et al. 2018; gradients, not black-box), ``generate``.

Each (dataset, method) runs twice back to back in fresh processes, first with the sources of
``--baseline`` (``git archive``), then with this tree's, so that both see the same load; the
ratio is the number to quote on a shared machine; the process CPU seconds of generate are printed
beside it (wall time under load also counts other processes' turns). The counterfactuals of both runs are compared
(share of identical rows, largest difference). ``--baseline-threads 1`` runs the baseline with
one torch thread, separating the gain of the new code from that of not oversubscribing cores.

    python benchmarks/bench_recourse_speed.py [--datasets heloc adult] [--methods gs cchvae revise face]
        [--n-points 300] [--baseline main] [--baseline-threads N] [--device cpu|cuda|auto] [--out FILE]

The issue-14 figures: ``--datasets heloc adult diabetes --baseline e29eaf9^1`` (the code before it).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: the table-2 reproduction's data setups: (members, non-members, adversary rows, MLP parameters)
SETUPS = {
    "heloc": (3000, 3000, 3800, {"lr": 1e-3}),
    "adult": (5000, 5000, 5000, {}),
    "diabetes": (5000, 5000, 5000, {}),
}
METHODS = ("gs", "cchvae", "revise", "face", "scfe")


def prepare(dataset: str, model_dir: Path, seed: int) -> Path:
    """Train (once) the owner's MLP of the table-2 cell and keep it with its data; returns the pickle's path."""
    path = model_dir / f"{dataset}-seed{seed}.pkl"
    if path.exists():
        return path
    from recourse_privacy.data import Preprocessor, load_dataset, split_pools
    from recourse_privacy.models import make_model

    members, nonmembers, adversary, params = SETUPS[dataset]
    ds = load_dataset(dataset)
    pools = split_pools(ds.n_rows, members, nonmembers, adversary, random_state=seed)
    pre = Preprocessor().fit(ds.X.iloc[pools.members], ds)
    X, y = pre.transform(ds.X.iloc[pools.members]), ds.y[pools.members]
    t = time.perf_counter()
    model = make_model("mlp", random_state=seed, **params).fit(X, y)
    print(f"trained the {dataset} MLP on {X.shape} in {time.perf_counter() - t:.1f} s", flush=True)
    model_dir.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(
            {"model": model, "X_train": X, "y_train": y, "X_query": pre.transform(ds.X.iloc[pools.nonmembers])}, f
        )
    return path


def worker(path: str, method: str, n_points: int, seed: int, out: str, device: str = "cpu") -> None:
    """One timed run in this process (whichever sources it imports); writes the counterfactuals and a JSON line.

    ``device`` (``cpu``, ``cuda``, ``auto``): the ``use_device`` block the method runs in (sources
    from before that option exist run on the CPU whatever it says).
    """
    import contextlib

    import torch

    from recourse_privacy import recourse

    try:
        from recourse_privacy.models.device import use_device
    except ImportError:  # sources older than the device option
        block = contextlib.nullcontext()
    else:
        block = use_device(device)
    with block:
        _timed(recourse, path, method, n_points, seed, out, torch)


def _timed(recourse, path: str, method: str, n_points: int, seed: int, out: str, torch) -> None:
    """The timed fit and generate of :func:`worker`."""

    with open(path, "rb") as f:
        data = pickle.load(f)
    model, Xq = data["model"], data["X_query"]
    X = Xq[model.predict(Xq) == 0][:n_points]
    make = {"gs": recourse.GrowingSpheres, "cchvae": recourse.CCHVAE, "revise": recourse.REVISE, "face": recourse.FACE}
    make["scfe"] = lambda random_state: recourse.SCFE()  # deterministic: no seed
    t = time.perf_counter()
    method_ = recourse.fit_for(make[method](random_state=seed), data["X_train"], data["y_train"], model)
    fit_s = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    res = method_.generate(model, X)
    gen_s, gen_cpu = time.perf_counter() - t, time.process_time() - c
    np.save(out, res.counterfactuals)
    print(
        json.dumps(
            {
                "fit_s": fit_s,
                "generate_s": gen_s,
                "generate_cpu_s": gen_cpu,
                "n": len(X),
                "validity": res.validity,
                "torch_threads": torch.get_num_threads(),
            }
        )
    )


def run(src: Path, args, path: Path, method: str, out: str, threads: int | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "" if threads is None else f"import torch; torch.set_num_threads({threads}); "
    argv = [__file__, "--worker", str(path), method, str(args.n_points), str(args.seed), out, args.device]
    code += f"import runpy, sys; sys.argv = {argv!r}; "
    code += f"runpy.run_path({__file__!r}, run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{method} with {src} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(SETUPS), choices=list(SETUPS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--n-points", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline", default="main", help="git ref of the 'before' sources")
    ap.add_argument(
        "--baseline-threads", type=int, default=None, help="torch threads of the baseline (default: torch's)"
    )
    ap.add_argument(
        "--device",
        default="cpu",
        choices=("cpu", "cuda", "auto"),
        help="the use_device block of both runs (GS, C-CHVAE, FACE search on the CPU whatever it says)",
    )
    ap.add_argument("--model-dir", default=str(ROOT / "benchmarks/results/models"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/recourse_speed.json"))
    args = ap.parse_args()

    from recourse_privacy.models.device import describe_device

    device = describe_device(args.device)
    print(f"device: {device}; load average at start {os.getloadavg()}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "src"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        print(f"{'dataset':8} {'method':7} {'stage':8} {'before/s':>9} {'after/s':>9} {'ratio':>6}  equivalence")
        for dataset in args.datasets:
            path = prepare(dataset, Path(args.model_dir), args.seed)
            for method in args.methods:
                cf = [str(Path(tmp) / f"{k}.npy") for k in ("before", "after")]
                before = run(base / "src", args, path, method, cf[0], args.baseline_threads)
                after = run(ROOT / "src", args, path, method, cf[1], None)
                a, b = np.load(cf[0]), np.load(cf[1])
                same = float(np.mean((a == b).all(axis=1))) if len(a) else float("nan")
                diff = float(np.abs(a - b).max()) if len(a) else 0.0
                row = {"dataset": dataset, "method": method, "before": before, "after": after}
                row |= {"identical_rows": same, "max_abs_difference": diff, "load": os.getloadavg()}
                results.append(row)
                for stage in ("fit", "generate"):
                    if stage == "fit" and method in ("gs", "scfe"):
                        continue
                    s0, s1 = before[f"{stage}_s"], after[f"{stage}_s"]
                    rate = (
                        (f"{before['n'] / s0:9.1f} {after['n'] / s1:9.1f}")
                        if stage == "generate"
                        else f"{s0:8.2f}s {s1:8.2f}s"
                    )
                    eq = f"identical rows {same:.4f}, max |diff| {diff:.1e}" if stage == "generate" else "(seconds)"
                    if stage == "generate" and "generate_cpu_s" in before:
                        c0, c1 = before["generate_cpu_s"], after["generate_cpu_s"]
                        eq += f"; CPU s {c0:.2f} -> {c1:.2f} ({c0 / c1:.1f}x)"
                    print(f"{dataset:8} {method:7} {stage:8} {rate} {s0 / s1:6.1f}x  {eq}", flush=True)
    print(f"load average at end {os.getloadavg()}; rates are counterfactuals per second, fit rows are seconds")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device, "n_points": args.n_points, "results": results}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
