"""Growing Spheres' folded screen alone: ``folded_hidden_logits`` of a git ref (default main) against this tree's.

Runs Growing Spheres (defaults, ``random_state=0``) on the first ``--n-points`` non-members that
the table-2 HELOC MLP rejects (the model of ``benchmarks/bench_recourse_speed.py``'s ``prepare``),
keeps every ``--every``-th call of the screen (its inputs ``A``, ``Bt``, ``w``, ``b``), then times
both versions of the function on each kept call, interleaved, and sums each call's best CPU time
of ``--repeats``: on a shared machine that is steadier than one timing of the whole. It prints
the largest difference between the two outputs (both are within the screen's rounding bound,
so small differences are expected) and the share of (row, unit) pairs that are unstable.

    python benchmarks/bench_gs_screen.py [--n-points 1628] [--every 1] [--repeats 3] [--baseline main]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-points", type=int, default=1628)
    ap.add_argument("--every", type=int, default=1, help="keep every k-th call of the screen")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline", default="main", help="git ref of the 'before' folded_hidden_logits")
    ap.add_argument("--model-dir", default=str(ROOT / "benchmarks/results/models"))
    args = ap.parse_args()

    from recourse_privacy import recourse
    from recourse_privacy.models import torch_utils

    bench = _load(ROOT / "benchmarks/bench_recourse_speed.py", "bench_recourse_speed")
    with open(bench.prepare("heloc", Path(args.model_dir), 0), "rb") as f:
        data = pickle.load(f)
    model, Xq = data["model"], data["X_query"]
    X = Xq[model.predict(Xq) == 0][: args.n_points]
    with tempfile.TemporaryDirectory() as tmp:
        rel = "src/recourse_privacy/models/torch_utils.py"
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{args.baseline}:{rel}"], capture_output=True, check=True
        )
        (Path(tmp) / "baseline_torch_utils.py").write_bytes(text.stdout)
        before = _load(Path(tmp) / "baseline_torch_utils.py", "baseline_torch_utils").folded_hidden_logits
    after = torch_utils.folded_hidden_logits

    calls, seen = [], [0]

    def keep(A, Bt, w, b):
        seen[0] += 1
        if seen[0] % args.every == 0:
            calls.append((A.clone(), Bt.clone(), w.clone(), b.clone()))
        return after(A, Bt, w, b)

    torch_utils.folded_hidden_logits = keep
    try:
        gs = recourse.fit_for(recourse.GrowingSpheres(random_state=0), data["X_train"], data["y_train"], model)
        gs.generate(model, X)
    finally:
        torch_utils.folded_hidden_logits = after
    print(f"load average {os.getloadavg()}; {seen[0]} screen calls, {len(calls)} kept")
    total = {"before": 0.0, "after": 0.0}
    diff, unstable, pairs = 0.0, 0, 0
    with torch_utils.torch_threads(1):
        for c in calls:
            best = dict.fromkeys(total, float("inf"))
            for _ in range(args.repeats):
                for name, fn in (("before", before), ("after", after)):
                    t = time.process_time()
                    out = fn(*c)
                    best[name] = min(best[name], time.process_time() - t)
                    if name == "before":
                        ref = out
            diff = max(diff, float((out - ref).abs().max()))
            A, Bt = c[0], c[1]
            unstable += int(((A < -Bt.amin(1)) & (A > -Bt.amax(1))).sum())
            pairs += A.numel()
            for name in total:
                total[name] += best[name]
    print(f"unstable (row, unit) pairs: {unstable / max(pairs, 1):.1%}; largest |after - before|: {diff:.2e}")
    print(
        f"sum of per-call best CPU s: before ({args.baseline}) {total['before']:.3f}, after {total['after']:.3f} "
        f"({total['before'] / total['after']:.2f}x); load average {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
