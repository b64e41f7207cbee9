"""The table of docs/dp-audit.md, "Every private release": each release and its broken twin, audited.

    PYTHONPATH=src python benchmarks/dp_audit_releases.py [--trials 100] [--eps 0.5 1 2] [--only NAME ...]
        [--canaries 1000] [--runs 5] [--json FILE]

Prints one markdown row per (release, claim): the Clopper-Pearson bound of the many-run audit
(split halves, one canary per run; Jagielski et al. 2020), the one-run bound (Steinke et al. 2023)
and the one-run f-DP bound (Mahloujifar et al. 2024; eps at the release's delta, and its mu) on the
release's many-canaries-per-run design where it has one (DP-SGD) or on a coin-flip subset of the
same runs, and the verdict (Clopper-Pearson or one-run above the claim, each at alpha / 2).
"""

from __future__ import annotations

import argparse
import json

from recourse_privacy.dp_audit.releases import RELEASE_AUDITS, audit_release


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=100, help="runs per neighbour of the many-run audit")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--only", nargs="+", default=list(RELEASE_AUDITS))
    ap.add_argument("--canaries", type=int, default=1000, help="canaries per run (many-canary designs)")
    ap.add_argument("--runs", type=int, default=5, help="runs of the many-canary designs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print("| release | claim eps | Clopper-Pearson >= | one-run >= | one-run f-DP >= (mu) | canaries | verdict | s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.only:
        for eps in a.eps:
            r = audit_release(
                name, eps, n_trials=a.trials, random_state=a.seed, n_canaries=a.canaries, n_runs=a.runs
            ).row()
            rows.append(r)
            print(
                f"| {name} | {eps:g} | {_f(r['clopper_pearson'])} | {_f(r['one_run'])} | {_f(r['one_run_fdp'])} "
                f"({_f(r['one_run_fdp_mu'])}) | {r['canaries']} | {r['verdict']} | {r['seconds']:.0f} |",
                flush=True,
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
