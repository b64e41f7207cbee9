"""The positive controls of ``audit --dp-audit`` (docs/dp-audit.md, "A positive control"): one row per audit and claim.

    PYTHONPATH=src python benchmarks/dp_audit_controls.py [--eps 0.5 1 2] [--only privrecourse privrecourse-laplace dpc dpsgd dpm dpm-laplace]
        [--seed 0]

Each row runs what ``--dp-audit`` runs for that audit (``audit_recourse`` for a private recourse method at its own
claim, ``audit_defense`` for DP-SGD and the DP logistic regression): the known-broken twin first, its runs doubled until the test catches it, then
the audited mechanism at those runs. It prints the audited bound, the twin's bound and runs, whether the twin was
caught, the verdict and the seconds (twin and audit together; on the audit's row, its parts too). A part the audit
runs (``--defense dpm-laplace``: the DP model its release post-processes) gets a row of its own, marked "(part)"; the
audit's verdict is the worst of its rows.
"""

from __future__ import annotations

import argparse
import time

from recourse_privacy.dp_audit.defense_audit import audit_defense, audit_recourse

#: audit name -> what --dp-audit runs at a claim E (DPC's registered experiment splits E into two equal halves)
AUDITS = {
    "privrecourse": lambda eps, seed: audit_recourse("privrecourse", {"epsilon": eps}, seed=seed),
    "privrecourse-laplace": lambda eps, seed: audit_recourse("privrecourse-laplace", {"epsilon": eps}, seed=seed),
    "dpc": lambda eps, seed: audit_recourse("dpc", {"mode": "hardened", "epsilon": eps / 2}, seed=seed),
    "dpsgd": lambda eps, seed: audit_defense("dpm", "mlp", eps, seed=seed),
    "dpm": lambda eps, seed: audit_defense("dpm", "logistic", eps, seed=seed),
    "dpm-laplace": lambda eps, seed: audit_defense("dpm-laplace", "logistic", eps, seed=seed),
}


def _f(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--only", nargs="+", default=list(AUDITS), choices=list(AUDITS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print("| audit | mechanism | claim | audited eps >= | twin eps >= (method) | runs | twin caught | verdict | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.only:
        for eps in args.eps:
            start = time.perf_counter()
            whole = AUDITS[name](eps, args.seed)
            took = time.perf_counter() - start
            for ev in (whole, *whole.parts):  # a part (the DP model a release post-processes) on a row of its own
                c = ev.control
                print(
                    f"| {name}{'' if ev is whole else ' (part)'} | {ev.mechanism} | {ev.claimed_epsilon:g} | "
                    f"{_f(ev.strongest.epsilon_lower_bound)} | {_f(c.epsilon_lower_bound)} ({c.method}) | "
                    f"{c.n_trials} | {'yes' if c.caught else 'NO'} | {ev.verdict} | "
                    f"{took if ev is whole else ev.seconds:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
