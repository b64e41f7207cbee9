"""Sparse answers against the method's own: changes per answer, median cost and answer time.

Publishes one ``privrecourse`` bundle of ``--dataset`` (or ``--data``/``--target`` with an optional
``--model-file``) with sparse answers and one without (same seed: the same model and graph), answers the
first ``--n-rows`` training rows the bundle's model rejects with both, and prints the mean number of
changed features, the median cost of the valid answers, the share valid, and the best of 5 times to answer
one rejected applicant and all of them in one batch::

    python benchmarks/bench_sparse_answers.py --dataset adult --epsilon 1
    python benchmarks/bench_sparse_answers.py --data heloc_train.csv --target RiskPerformance --positive-label 1 \\
        --model-file heloc_tuned.skops --trust TYPE ... --epsilon 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def _dataset(args):
    if args.data:
        from recourse_privacy.data.tabular import load_tabular

        return load_tabular(args.data, args.target, positive_label=args.positive_label)
    from recourse_privacy.data import load_dataset

    return load_dataset(args.dataset, args.data_dir)


def _best(fn, arg, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--data")
    ap.add_argument("--target")
    ap.add_argument("--positive-label")
    ap.add_argument("--model-file")
    ap.add_argument("--trust", action="append", default=[])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--bounds", action="append", default=["hours-per-week=0:100"])
    ap.add_argument("--n-rows", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from recourse_privacy.service.bundle import load_bundle, publish
    from recourse_privacy.service.cli import _bounds

    ds = _dataset(args)
    bounds = {k: v for k, v in _bounds(args.bounds).items() if k in ds.feature_names}
    model = None
    if args.model_file:
        from recourse_privacy.models.files import load_model_file

        model = load_model_file(args.model_file, tuple(args.trust))
    work = Path(tempfile.mkdtemp(prefix="sparse-bench-"))
    print(f"{ds.name}: {len(ds.X)} rows, {len(ds.feature_names)} features, privrecourse at epsilon {args.epsilon:g}")
    print(f"{'answers':<10} {'changes':>8} {'median cost':>12} {'valid':>7} {'1 applicant ms':>15} {'batch ms':>9}")
    for sparse in (False, True):
        out = work / ("sparse" if sparse else "plain")
        publish(ds, method="privrecourse", epsilon=args.epsilon, out=out, bounds=bounds, model=model,
                positive_label=args.positive_label, seed=args.seed, sparse=sparse)  # fmt: skip
        b = load_bundle(out, random_state=0)
        a = b.schema.applicants_from_frame(ds.X)
        rows = a.take(np.flatnonzero(~b.decide(a))[: args.n_rows])
        answers = b.answer(rows)
        valid = [x for x in answers if x["valid"]]
        changes = np.mean([len(x["changes"]) for x in valid]) if valid else float("nan")
        cost = np.median([x["cost"] for x in valid]) if valid else float("nan")
        one = _best(b.answer_json, rows.take([0]))
        batch = _best(b.answer_json, rows)
        label = "sparse" if sparse else "method's"
        print(f"{label:<10} {changes:>8.2f} {cost:>12.4g} {len(valid) / len(answers):>7.1%} {one * 1e3:>15.1f} "
              f"{batch * 1e3:>9.1f}  ({len(answers)} rejected rows)")  # fmt: skip


if __name__ == "__main__":
    main()
