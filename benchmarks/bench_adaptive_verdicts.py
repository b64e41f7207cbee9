"""Every attack (the adaptive ones included) against LR, DPM and DPM + LR, beside the undefended baseline.

    python benchmarks/bench_adaptive_verdicts.py OUT.json [synthetic|heloc]

Synthetic d = 1,000 (unit rows, 2,000 members, 10 shadow models, adversary pool 2 x members) or
HELOC (unit rows, 3,000 members, the 3,871 rows left for the adversary); L2 distance; seed 0.
"""

from __future__ import annotations

import json
import sys
import time

from recourse_privacy.audit.pipeline import run_audit

out, which = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "synthetic"
base = dict(normalize_rows=True, distance="l2", shadow_models=10, seed=0)
base.update(
    dict(dataset="synthetic", n_features=1000, n_members=2000)
    if which == "synthetic"
    else dict(dataset="heloc", n_members=3000)
)
settings = [("baseline", {})] + [
    (f"{d}@{e}", dict(defense=d, epsilon=e)) for d in ("laplace", "dpm", "dpm-laplace") for e in (0.01, 0.5, 1.0)
]
rows = {}
for name, kw in settings:
    t = time.time()
    r = run_audit(**base, **kw)
    rows[name] = {
        "attacks": {
            k: {
                "auc": a.auc,
                "ba": a.balanced_accuracy,
                "tpr@0.01": a.tpr("0.01"),
                "direction": a.direction,
                "fallback": a.conventions.get("direction_fallback"),
            }
            for k, a in r.attacks.items()
        },
        "test_accuracy": r.model.test_accuracy,
        "n_members": r.n_members,
        "n_nonmembers": r.n_nonmembers,
        "pools": [r.data.pools.members, r.data.pools.nonmembers, r.data.pools.adversary],
        "shadow_train_rows": list(r.shadow.train_rows_each) if r.shadow else None,
        "warnings": list(r.warnings),
        "dp": None
        if r.dp is None
        else {
            "ba_bound": r.dp.ba_bound,
            "ba_bound_paper": r.dp.ba_bound_paper,
            "ba_bound_tight": r.dp.ba_bound_tight,
            "verdict": r.dp.verdict.text,
            "verdict_attack": r.dp.verdict.attack,
            "exceeds": r.dp.verdict.exceeds,
        },
        "seconds": round(time.time() - t, 1),
    }
    print(name, rows[name]["seconds"], rows[name]["dp"] and rows[name]["dp"]["verdict"], flush=True)
    json.dump(rows, open(out, "w"), indent=1)
