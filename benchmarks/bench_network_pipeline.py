"""A deployed PyTorch network (skorch, last step of a scikit-learn pipeline) audited three ways.

A one-hot + scaling + float32 + skorch ``NeuralNetClassifier`` (one hidden layer) pipeline is fitted on a
random half of COMPAS (the deployed model); one audit "as deployed" (``members=``, 2 reference models by
default, cfd, cfd-lrt and loss) runs with the pipeline scored

* ``skorch``: through its own ``predict_proba`` (skorch's loader collates row by row);
* ``batched``: the steps before the net, then its module on whole chunks (no gradients);
* ``composed``: the default: the affine map of the steps before the net composed with its module
  (:mod:`recourse_privacy.models.network_estimators`), which also gives gradient methods (``scfe``).

Prints each audit's recourse and reference seconds, total and validity, and the AUCs.

    PYTHONPATH=src RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_network_pipeline.py \\
        [--rows 4000] [--shadow-models 2] [--recourse gs] [--modes skorch batched composed]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

MODES = ("skorch", "batched", "composed")


def to_float32(a):
    return np.asarray(a, dtype=np.float32)


def deployed(data_dir: Path, rows: int):
    """(COMPAS frame with an ``in_train`` column, the fitted network pipeline)."""
    import torch
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
    from skorch import NeuralNetClassifier
    from torch import nn

    frame = pd.read_csv(data_dir / "compas.csv").drop(columns=["two_year_recid"])
    frame = frame.sample(min(rows, len(frame)), random_state=0).reset_index(drop=True)
    frame["in_train"] = np.random.default_rng(0).permutation(len(frame)) < len(frame) // 2
    X = frame.drop(columns=["score", "in_train"])
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    numeric = [c for c in X.columns if c not in text]
    encode = ColumnTransformer(
        [("c", OneHotEncoder(handle_unknown="ignore", sparse_output=False), text), ("n", StandardScaler(), numeric)]
    )
    train = frame["in_train"].to_numpy()
    d = encode.fit(X[train]).transform(X[:1]).shape[1]

    class Net(nn.Module):
        def __init__(self, d: int = d, hidden: int = 64):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, 2))

        def forward(self, x):
            return self.layers(x)

    net = NeuralNetClassifier(
        Net, criterion=nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=0.01, max_epochs=20, batch_size=128,
        train_split=None, verbose=0,
    )  # fmt: skip
    torch.manual_seed(0)
    pipe = Pipeline([("encode", encode), ("float32", FunctionTransformer(to_float32)), ("net", net)])
    return frame, pipe.fit(X[train], frame["score"][train])


def audit(frame, pipe, mode: str, shadow_models: int, recourse: str):
    """One as-deployed audit with the pipeline scored the ``mode`` way."""
    from recourse_privacy import run_audit
    from recourse_privacy.models.estimator import EstimatorModel

    find, probe = EstimatorModel.__dict__["_find_network"], EstimatorModel.probe_network  # the staticmethod itself
    if mode == "skorch":
        EstimatorModel._find_network = staticmethod(lambda est: None)
    if mode == "batched":
        EstimatorModel.probe_network = lambda self, X, rng=0: False
    try:
        return run_audit(
            model=pipe, data=frame, target="score", positive_label=0, members="in_train", recourse=recourse,
            attacks="cfd,cfd-lrt,loss", shadow_models=shadow_models, cache="off",
        )  # fmt: skip
    finally:
        EstimatorModel._find_network, EstimatorModel.probe_network = find, probe


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--shadow-models", type=int, default=2)
    ap.add_argument("--recourse", default="gs")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = ap.parse_args()
    frame, pipe = deployed(Path(os.environ.get("RECOURSE_PRIVACY_DATA", "../shared/data")), args.rows)
    print(f"COMPAS {len(frame)} rows, {args.recourse}, {args.shadow_models} reference models")
    for mode in args.modes:
        t0 = time.perf_counter()
        r = audit(frame, pipe, mode, args.shadow_models, args.recourse)
        wall, ts = time.perf_counter() - t0, r.timing_seconds
        aucs = "  ".join(f"{k} {a.auc:.4f}" for k, a in r.attacks.items())
        print(
            f"  {mode:9s} recourse {ts['recourse']:6.1f} s  reference models {ts.get('shadow models', float('nan')):6.1f} s"
            f"  total {wall:6.1f} s  validity {r.recourse.validity:.3f}  {aucs}"
        )


if __name__ == "__main__":
    main()
