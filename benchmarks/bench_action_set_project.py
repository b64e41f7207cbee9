"""``ActionSet.project`` on blocks of Growing Spheres candidates: the action set of a user's data, timed.

Black-box recourse on a user's data projects every candidate onto the action set (one category per one-hot
group, immutable and increase-only features, the ranges, integers rounded): 10-11% of a deployed tree audit's
samples (py-spy). For each dataset the action set is the audit's (``ActionSet.from_preprocessor`` of the data's
:class:`~recourse_privacy.data.Preprocessor`, the dataset's actionability), the factuals are rows of the data
and the candidates ``(rows, samples, d)`` are the factuals plus Gaussian offsets, as one Growing Spheres block.
Prints the best of ``--repeats`` runs, the candidates per second and a checksum of the projected block (the
same numbers before and after a change to ``project``).

    PYTHONPATH=src RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_action_set_project.py \\
        [--datasets heloc compas adult] [--rows 131] [--samples 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

import numpy as np


def main() -> None:
    from recourse_privacy.data import Preprocessor, load_dataset
    from recourse_privacy.recourse.constraints import ActionSet

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["heloc", "compas", "adult"])
    ap.add_argument("--rows", type=int, default=131, help="factuals in one block (131 x 1,000 = GS's block)")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    data_dir = os.environ.get("RECOURSE_PRIVACY_DATA")
    for name in args.datasets:
        ds = load_dataset(name, data_dir)
        pre = Preprocessor(corr_threshold=None).fit(ds.X.iloc[:2000], ds)
        aset = ActionSet.from_preprocessor(pre)
        rng = np.random.default_rng(0)
        X = pre.transform(ds.X.iloc[2000 : 2000 + args.rows])
        cand = X[:, None, :] + rng.normal(0.0, 0.5, size=(len(X), args.samples, X.shape[1]))
        best = np.inf
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = aset.project(cand, X[:, None, :])
            best = min(best, time.perf_counter() - t)
        digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()[:16]
        n = cand.shape[0] * cand.shape[1]
        print(
            f"{name}: d={X.shape[1]}, {len(aset.groups)} one-hot groups, "
            f"{int(aset.integer.sum()) if aset.integer is not None else 0} integer features; "
            f"{n:,} candidates in {best * 1e3:.1f} ms ({n / best / 1e6:.2f} M/s), sha256 {digest}"
        )


if __name__ == "__main__":
    main()
