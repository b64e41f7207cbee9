"""Share of counterfactuals a person can act on, per recourse method, before and after the valid-set search.

"before": the method without an action set (today's behaviour on user data); "after": with
``ActionSet.from_preprocessor(pre, actionable=False)`` (one-hot groups a single level, integers
integers; the driver projects and repairs). Per method: the share of counterfactual rows whose
categorical groups are all valid categories, whose integer features are all integers, the
validity (model accepts) and the mean l1 cost of the valid rows, with the repair counts.

    python benchmarks/bench_valid_recourse.py --dataset people --n-queries 200
    RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_valid_recourse.py --dataset adult

Prints the device and load; time is not the point here (see the per-method benchmarks).
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import time

import numpy as np
import pandas as pd

from recourse_privacy.data import Preprocessor, load_dataset
from recourse_privacy.models import make_model
from recourse_privacy.recourse import RECOURSE_METHODS, ActionSet, fit_for

SMALL_VAE = {"epochs": 10, "latent_dim": 4, "hidden_layers": (16,)}
PARAMS = {
    "scfe": {"max_iter": 300},
    "cadex": {"max_iter": 200},
    "dice": {"total_cfs": 2, "max_iter": 300},
    "face": {"n_neighbors": 20},
    "gs": {"n_search_samples": 300, "max_iter": 300},
    "cchvae": {"n_search_samples": 100, "max_iter": 200, "vae_params": SMALL_VAE},
    "revise": {"max_iter": 200, "vae_params": SMALL_VAE},
    "privrecourse": {"n_clusters": 30, "out_of_bounds": "clip"},
}


def people(n: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A 3-level categorical, a binary categorical, an integer column and two real columns."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "income": rng.normal(50.0, 10.0, n),
            "debt": rng.normal(10.0, 3.0, n),
            "years": rng.integers(0, 30, n),
            "home_ownership": rng.choice(["rent", "own", "mortgage"], n),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    logit = 0.15 * (X["income"] - 50) - 0.3 * (X["debt"] - 10) + 0.08 * (X["years"] - 15)
    logit += 1.2 * (X["home_ownership"] == "own") - 0.5
    return X, (logit + rng.logistic(size=n) * 0.5 > 0).astype(int).to_numpy()


def shares(aset: ActionSet, X_cf: np.ndarray) -> tuple[float, float]:
    """(rows with every group a valid level, rows with every integer feature an integer)."""
    groups_only = ActionSet(aset.immutable, aset.increasing, aset.lower, aset.upper, aset.groups)
    ints_only = ActionSet(
        aset.immutable, aset.increasing, aset.lower, aset.upper, (), aset.integer, aset.scale, aset.offset
    )
    return (
        float(np.mean(groups_only.structural_violations(X_cf) == 0)),
        float(np.mean(ints_only.structural_violations(X_cf) == 0)),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="people", help="people (synthetic) or a registered dataset, e.g. adult")
    ap.add_argument("--n-train", type=int, default=1000)
    ap.add_argument("--n-queries", type=int, default=200)
    ap.add_argument("--methods", default="linear,scfe,cadex,dice,face,gs,cchvae,revise,privrecourse")
    args = ap.parse_args()
    print(f"device: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; load {os.getloadavg()}")
    if args.dataset == "people":
        X, y = people(args.n_train)
        pre = Preprocessor().fit(X)
    else:
        ds = load_dataset(args.dataset, n_samples=args.n_train, random_state=0)
        X, y = ds.X, ds.y
        pre = Preprocessor(corr_threshold=None).fit(X, ds)
    Z = pre.transform(X)
    aset = ActionSet.from_preprocessor(pre, actionable=False)
    print(
        f"{args.dataset}: {len(Z)} rows, {Z.shape[1]} encoded features, {len(aset.groups)} one-hot groups, "
        f"{int(aset.integer.sum())} integer features"
    )
    logistic = make_model("logistic").fit(Z, y)
    mlp = make_model("mlp", hidden_layers=(32,), epochs=40, lr=1e-2, random_state=0).fit(Z, y)
    Q = Z[(logistic.predict(Z) == 0) & (mlp.predict(Z) == 0)][: args.n_queries]
    header = f"{'method':<13}{'groups ok':>20}{'integers ok':>20}{'validity':>20}{'mean l1 (valid)':>20}  repaired/lost"
    print(f"{len(Q)} queries (rejected by both models)\n{header}\n{' ' * 13}{'before -> after':>20}")
    for name in args.methods.split(","):
        entry = RECOURSE_METHODS.get(name)
        model = logistic if "linear" in entry.needs else mlp
        cells = []
        for a in (None, aset):
            params = dict(PARAMS.get(name, {}), action_set=a)
            if "random_state" in inspect.signature(entry.obj).parameters:
                params["random_state"] = 0
            t0 = time.perf_counter()
            res = fit_for(entry.obj(**params), Z, y, model).generate(model, Q)
            g, i = shares(aset, res.counterfactuals)
            cost = res.distance("l1")[res.valid].mean() if res.valid.any() else float("nan")
            cells.append((g, i, res.validity, cost, res.info, time.perf_counter() - t0))
        (g0, i0, v0, c0, _, _), (g1, i1, v1, c1, info, _) = cells
        rep = f"{info.get('n_repaired', 0)}/{info.get('n_projection_lost', 0)}"
        print(
            f"{name:<13}{g0:>9.3f} -> {g1:<8.3f}{i0:>9.3f} -> {i1:<8.3f}{v0:>9.3f} -> {v1:<8.3f}"
            f"{c0:>9.2f} -> {c1:<8.2f}  {rep}"
        )


if __name__ == "__main__":
    main()
