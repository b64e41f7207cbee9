"""The table of docs/dp-audit.md, "Every private release": each release and its broken twin, audited.

    PYTHONPATH=src python benchmarks/dp_audit_releases.py [--trials 100] [--eps 0.5 1] [--only NAME ...]

Prints one markdown row per (release, claim): the Clopper-Pearson bound of the many-run audit
(split halves), the one-run bounds (Steinke et al. 2023; Mahloujifar et al. 2024, as mu) and
the GDP mu (Nasr et al. 2023) on a coin-flip subset of the same runs, and the verdict.
"""

from __future__ import annotations

import argparse
import json

from recourse_privacy.dp_audit.releases import RELEASE_AUDITS, audit_release


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--only", nargs="+", default=list(RELEASE_AUDITS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print("| release | claim eps | Clopper-Pearson >= | one-run >= | one-run f-DP mu >= | GDP mu >= | verdict | s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.only:
        for eps in a.eps:
            r = audit_release(name, eps, n_trials=a.trials, random_state=a.seed).row()
            rows.append(r)
            print(
                f"| {name} | {eps:g} | {_f(r['clopper_pearson'])} | {_f(r['one_run'])} | {_f(r['one_run_fdp_mu'])} "
                f"| {_f(r['gdp_mu'])} | {r['verdict']} | {r['seconds']:.0f} |",
                flush=True,
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
