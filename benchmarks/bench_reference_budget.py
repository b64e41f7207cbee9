"""The 64-reference audit of issue 28 (item 4): wall time per stage and peak memory, one set of references or two.

HELOC, the paper's MLP (1 x 1,000 ReLU, Adam lr 1e-3), SCFE, 3,000 members; offline and online CFD-LRT
and online RMIA on counterfactual distances, ``--shadow-models`` reference models (64). By default the
online reference models (LiRA's, each target in half of them; Carlini et al. 2022) also serve as the
offline shadow set (``stages.shares_references``); ``--separate`` trains a shadow set of its own as
before, for comparison in the same conditions. Prints the per-stage seconds of the audit
(``timing_seconds``), the process's peak resident set and the machine's load average before and after,
and the attacks' AUCs.

    RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_reference_budget.py [--shadow-models 64] [--separate]

Equivalent CLI: ``recourse-privacy audit --dataset heloc --model mlp --recourse scfe --n-members 3000
--attacks cfd-lrt,cfd-lrt-online,rmia-cfd-online --shadow-models 64 --model-param lr=0.001 --cache-dir off``
(under ``/usr/bin/time -v`` for the peak).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shadow-models", type=int, default=64)
    ap.add_argument("--n-members", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--separate", action="store_true", help="a shadow set of its own for the offline attack (before)")
    args = ap.parse_args()

    import recourse_privacy.audit.stages as stages
    from recourse_privacy import run_audit

    if args.separate:
        stages.shares_references = lambda config: False
    load_before = os.getloadavg()
    t = time.perf_counter()
    result = run_audit(
        dataset="heloc",
        model="mlp",
        recourse="scfe",
        n_members=args.n_members,
        attacks=("cfd-lrt", "cfd-lrt-online", "rmia-cfd-online"),
        shadow_models=args.shadow_models,
        model_params={"lr": 1e-3},
        seed=args.seed,
        cache="off",
    )
    seconds = time.perf_counter() - t
    out = {
        "references": "separate offline and online sets" if args.separate else "one shared set",
        "shadow_models": args.shadow_models,
        "seconds": round(seconds, 1),
        "stages_seconds": dict(result.timing_seconds),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "auc": {name: round(float(a.auc), 4) for name, a in result.attacks.items()},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
