"""Where the memory of a Figure-2 cell goes (issue 28, item 5): peak per audit stage, and the process's peak.

Runs one cell of ``recourse-privacy reproduce pawelczyk2023-fig2`` (synthetic data, logistic regression,
exact linear recourse, 5,000 members, 5,000 non-members, an adversary pool of 10,000) in this process,
with :mod:`tracemalloc` (numpy reports its buffers to it) and the stage functions of
:mod:`recourse_privacy.audit.stages` wrapped: for each stage, the traced memory when it starts and the
peak while it runs. The last line is the process's peak resident set (``ru_maxrss``), which is what
``/usr/bin/time -v`` reports as "Maximum resident set size".

    python benchmarks/bench_fig2_memory.py [--n-features 7000] [--shadow-models 10] [--max-iter N] [--no-trace]

The shadow models are trained one after another and keep only per-target statistics, so the peak does
not grow with ``--shadow-models`` (2 locates it in a fraction of the time).

Measured with ``--shadow-models 2 --max-iter 20`` on the loaded 2-core machine (issue 28, item 5): peak
resident set 3,463 MB at 9dbeb67, 1,715 MB after the float32 pools, the released raw frame, the leaner
``Preprocessor.fit``, the float64 shadow rows freed once read and chunked distances (traced peak
2,969 -> 1,468 MB; the AUCs equal). To compare with another checkout, run this file with ``PYTHONPATH``
set to that checkout's ``src``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import time
import tracemalloc

STAGES = (
    "load_data",
    "prepare_game",
    "train_owner",
    "owner_recourse",
    "train_shadow_models",
    "run_attacks",
    "measure_attacks",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-features", type=int, default=7000)
    ap.add_argument("--shadow-models", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--max-iter",
        type=int,
        default=None,
        help="lbfgs iterations (default the model's 1,000; fewer: same allocations)",
    )
    ap.add_argument("--no-trace", action="store_true", help="no tracemalloc (the process's peak only, full speed)")
    args = ap.parse_args()

    import recourse_privacy.audit.stages as stages
    from recourse_privacy import run_audit

    rows: list[dict] = []
    if not args.no_trace:
        tracemalloc.start()
        for name in STAGES:
            real = getattr(stages, name)

            def wrapped(*a, _real=real, _name=name, **k):
                start = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                t = time.perf_counter()
                out = _real(*a, **k)
                now, peak = tracemalloc.get_traced_memory()
                rows.append(
                    {
                        "stage": _name,
                        "start_mb": round(start / 2**20),
                        "peak_mb": round(peak / 2**20),
                        "end_mb": round(now / 2**20),
                        "seconds": round(time.perf_counter() - t, 1),
                    }
                )
                return out

            setattr(stages, name, functools.wraps(real)(wrapped))
    t = time.perf_counter()
    result = run_audit(
        dataset="synthetic",
        n_features=args.n_features,
        model="logistic",
        recourse="linear",
        attacks=("cfd", "cfd-lrt", "loss", "loss-lrt", "random"),
        distance="l1",
        n_members=5000,
        n_nonmembers=5000,
        n_adversary=10000,
        shadow_models=args.shadow_models,
        seed=args.seed,
        cache="off",
        model_params={} if args.max_iter is None else {"max_iter": args.max_iter},
    )
    seconds = time.perf_counter() - t
    for r in rows:
        print(
            f"{r['stage']:22s} start {r['start_mb']:6d} MB  peak {r['peak_mb']:6d} MB  end {r['end_mb']:6d} MB  {r['seconds']:7.1f} s"
        )
    out = {
        "n_features": args.n_features,
        "shadow_models": args.shadow_models,
        "max_iter": args.max_iter,
        "seconds": round(seconds, 1),
        "traced_peak_mb": max((r["peak_mb"] for r in rows), default=None),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_average": os.getloadavg(),
        "auc": {name: round(float(a.auc), 4) for name, a in result.attacks.items()},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
