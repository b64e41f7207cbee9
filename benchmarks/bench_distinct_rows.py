"""Black-box recourse on a deployed boosted pipeline, with each batch scored once per distinct row and scored whole.

Growing Spheres' candidates are projected onto the action set (integers rounded, one category per one-hot
group), so a batch repeats rows; :mod:`recourse_privacy.models.distinct` scores each distinct row once. For
each dataset a one-hot + LightGBM pipeline is fitted on a random half of the rows (the deployed model), and
one audit "as deployed" (``members=``, Growing Spheres or ``--recourse``, 2 reference models, cfd, cfd-lrt and loss) runs twice: as
shipped, then with every batch scored whole. Prints the rows the model scored, the share distinct, the
recourse and reference stages' seconds, and whether the counterfactuals and AUCs are identical.

    PYTHONPATH=src RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_distinct_rows.py \\
        [--datasets compas adult] [--rows 4000] [--shadow-models 2]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

#: each dataset's file, label column, favourable label and the columns left out of the model
DATASETS = {
    "compas": ("compas.csv", "score", 0, ("two_year_recid",)),
    "adult": ("adult.csv", "income", 1, ()),
}


def deployed(name: str, data_dir: Path, rows: int):
    """(frame with an ``in_train`` column, its label column, favourable label, fitted pipeline)."""
    from lightgbm import LGBMClassifier
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    file, target, positive, dropped = DATASETS[name]
    frame = pd.read_csv(data_dir / file).drop(columns=list(dropped))
    frame = frame.sample(min(rows, len(frame)), random_state=0).reset_index(drop=True)
    frame["in_train"] = np.random.default_rng(0).permutation(len(frame)) < len(frame) // 2
    X = frame.drop(columns=[target, "in_train"])
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    pipe = Pipeline(
        [
            ("pre", ColumnTransformer([("c", OneHotEncoder(handle_unknown="ignore"), text)], remainder="passthrough")),
            ("clf", LGBMClassifier(n_estimators=300, num_leaves=63, n_jobs=1, random_state=0, verbose=-1)),
        ]
    )
    train = frame["in_train"].to_numpy()
    pipe.fit(X[train], frame[target][train])
    return frame, target, positive, pipe


def audit(frame, target, positive, pipe, shadow_models: int, whole: bool, recourse: str = "gs") -> tuple[object, dict]:
    """One as-deployed audit; ``whole``: every batch scored as it is. Returns the result and the rows scored."""
    from recourse_privacy import run_audit
    from recourse_privacy.models import distinct

    counts = {"rows": 0, "scored": 0}
    lock = threading.Lock()
    predict = type(pipe).predict_proba

    def counting(self, F):
        with lock:
            counts["scored"] += len(F)
        return predict(self, F)

    saved = distinct.MIN_ROWS
    type(pipe).predict_proba = counting
    distinct.MIN_ROWS = 10**12 if whole else saved
    try:
        res = run_audit(
            model=pipe,
            data=frame,
            target=target,
            positive_label=positive,
            members="in_train",
            recourse=recourse,
            attacks="cfd,cfd-lrt,loss",
            shadow_models=shadow_models,
            cache="off",
        )
    finally:
        distinct.MIN_ROWS = saved
        type(pipe).predict_proba = predict
    return res, counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--shadow-models", type=int, default=2)
    ap.add_argument("--recourse", default="gs", help="a black-box recourse method (gs, cchvae, face, revise)")
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RECOURSE_PRIVACY_DATA", "../shared/data"))
    for name in args.datasets:
        frame, target, positive, pipe = deployed(name, data_dir, args.rows)
        out = {}
        for whole in (False, True):
            t0 = time.perf_counter()
            res, counts = audit(frame, target, positive, pipe, args.shadow_models, whole, args.recourse)
            out[whole] = (res, counts, time.perf_counter() - t0)
        (a, ca, ta), (b, cb, tb) = out[False], out[True]
        same_cf = np.array_equal(
            a.arrays.recourse.counterfactuals, b.arrays.recourse.counterfactuals
        ) and np.array_equal(a.arrays.cfd, b.arrays.cfd)
        same_auc = all(a.attacks[k].auc == b.attacks[k].auc for k in a.attacks)
        print(f"{name}, {args.recourse}: {len(frame)} rows, {a.n_members} / {a.n_nonmembers} targets")
        for label, r, c, t in (("distinct rows", a, ca, ta), ("whole batches", b, cb, tb)):
            ts = r.timing_seconds
            print(
                f"  {label:14s} rows scored by the pipeline {c['scored']:>10,d}  recourse {ts['recourse']:6.1f} s  "
                f"reference models {ts.get('shadow models', float('nan')):6.1f} s  total {t:6.1f} s"
            )
        print(
            f"  scored {ca['scored'] / max(cb['scored'], 1):.1%} of the rows; "
            f"counterfactuals identical: {same_cf}; AUCs identical: {same_auc}"
        )


if __name__ == "__main__":
    main()
