"""How the width of DP-SGD's audited network decides the dirac canaries' power (docs/dp-audit.md, stop 48).

    PYTHONPATH=src python benchmarks/dp_audit_dpsgd_width.py [--widths 4 8 16 32] [--eps 1 3 4] [--runs 5] [--seeds 0]

For each hidden width, claim and seed: the one-run bound (Steinke et al. 2023) and the one-run f-DP bound
(Mahloujifar et al. 2024) of the known-broken twin (noise multiplier / 10) and of the honest DP-SGD, from ``--runs``
trainings of 1,000 dirac canaries each (``dpsgd_canaries.dpsgd_one_run``), each bound at alpha 0.025 as
``--dp-audit`` computes them. The audit's width is ``dpsgd_canaries.HIDDEN_UNITS``.
"""

from __future__ import annotations

import argparse
import time

from recourse_privacy.dp_audit import dpsgd_canaries
from recourse_privacy.dp_audit.canary_scores import audit_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 3.0, 4.0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    print("| hidden units | claim | seed | twin: one-run, f-DP | honest: one-run, f-DP | s per side |")
    print("| --- | --- | --- | --- | --- | --- |")
    for width in args.widths:
        dpsgd_canaries.HIDDEN_UNITS = width
        for eps in args.eps:
            for seed in args.seeds:
                cells, took = [], 0.0
                for broken in (True, False):
                    start = time.perf_counter()
                    s, m = dpsgd_canaries.dpsgd_one_run(
                        eps, broken=broken, n_canaries=1000, n_runs=args.runs, random_state=seed
                    )
                    b = {
                        x.method: x.epsilon_lower_bound
                        for x in audit_scores(s, m, alpha=0.025, random_state=seed).bounds
                    }
                    took = max(took, time.perf_counter() - start)
                    fdp = "n/a" if b["one_run_fdp"] is None else f"{b['one_run_fdp']:.3f}"
                    cells.append(f"{b['one_run']:.3f}, {fdp}")
                print(f"| {width} | {eps:g} | {seed} | {cells[0]} | {cells[1]} | {took:.1f} |", flush=True)


if __name__ == "__main__":
    main()
