"""Issue 24's closing-note tables: a deployed gradient-boosted model on Adult, audited as deployed and as a recipe.

For each model (XGBoost, LightGBM, scikit-learn's GradientBoostingClassifier; one-hot + the
classifier in one Pipeline) fitted on a random half of 4,000 Adult rows and saved as .skops:

1. the as-deployed audit (``--members in_train``: the fitted instance, never refitted),
2. the re-trained-recipe audit (the same file without ``--members``: a clone trained on members it draws),
3. the as-deployed audit again (a second audit of the same model: its reference models and recourse
   read from the artifact cache),

each through the CLI, with ``--group sex --group race``. Prints the commands, AUC and TPR at FPR 1%
with their 95% intervals, wall times and cache hits, the head of exposure.csv and the group table.

    PYTHONPATH=src RECOURSE_PRIVACY_DATA=/work/shared/data python benchmarks/bench_deployed_audit.py \\
        [--models xgboost,lightgbm,sklearn-gb] [--shadow-models 4] [--work /tmp/deployed-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ATTACKS = "cfd,cfd-lrt,loss,loss-lrt,loss-lrt-online,random"


def _classifier(name: str):
    if name == "xgboost":
        from xgboost import XGBClassifier

        return XGBClassifier(n_estimators=200, max_depth=6, n_jobs=1, random_state=0)
    if name == "lightgbm":
        from lightgbm import LGBMClassifier

        return LGBMClassifier(n_estimators=200, num_leaves=63, n_jobs=1, random_state=0, verbose=-1)
    from sklearn.ensemble import GradientBoostingClassifier

    return GradientBoostingClassifier(n_estimators=200, max_depth=4, random_state=0)


def make_inputs(work: Path, name: str, data_dir: Path) -> tuple[Path, Path, Path, list[str]]:
    """4,000 Adult rows with an ``in_train`` column, the same without it, the fitted pipeline as .skops."""
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    frame = pd.read_csv(data_dir / "adult.csv").sample(4000, random_state=0).reset_index(drop=True)
    in_train = np.zeros(len(frame), dtype=int)
    in_train[np.random.default_rng(0).permutation(len(frame))[: len(frame) // 2]] = 1
    X, y = frame.drop(columns="income"), frame["income"]
    text = list(X.select_dtypes(exclude="number").columns)
    prep = ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), text)], remainder="passthrough")
    pipe = Pipeline([("prep", prep), ("clf", _classifier(name))]).fit(X[in_train == 1], y[in_train == 1])
    model = work / f"{name}.skops"
    sio.dump(pipe, model)
    with_members, plain = work / "adult4000_members.csv", work / "adult4000.csv"
    frame.assign(in_train=in_train).to_csv(with_members, index=False)
    frame.to_csv(plain, index=False)
    return with_members, plain, model, sio.get_untrusted_types(file=model)


def run_cli(args: list[str]) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "recourse_privacy.cli", *args]
    print("$ recourse-privacy " + " ".join(shlex.quote(a) for a in args), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
    wall = time.perf_counter() - t0
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit(f"command failed ({proc.returncode})")
    hits = [line for line in proc.stdout.splitlines() if "artifact cache" in line or "hits/lookups" in line]
    return wall, " ".join(hits)


def _ci(pair) -> str:
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def summary_rows(out: Path, label: str, wall: float) -> list[str]:
    m = json.loads((out / "metrics.json").read_text())
    rows = []
    for name, a in m["attacks"].items():
        rows.append(
            f"| {label} | {name} | {a['auc']:.3f} {_ci(a['auc_ci'])} | {a['tpr_at_fpr']['0.01']:.3f} "
            f"{_ci(a['tpr_at_fpr_ci']['0.01'])} | {m['n_members']}/{m['n_nonmembers']} | {wall:.0f} |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="xgboost,lightgbm,sklearn-gb")
    ap.add_argument("--shadow-models", type=int, default=4)
    ap.add_argument("--work", type=Path, default=Path("/tmp/deployed-bench"))
    ap.add_argument("--recourse", default="gs")
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RECOURSE_PRIVACY_DATA", "/work/shared/data"))
    for name in args.models.split(","):
        work = args.work / name
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        cache = work / "cache"
        with_members, plain, model, trust = make_inputs(work, name, data_dir)
        common = [
            "audit", "--target", "income", "--model-file", str(model), *sum((["--trust", t] for t in trust), []),
            "--recourse", args.recourse, "--shadow-models", str(args.shadow_models), "--attacks", ATTACKS,
            "--group", "sex", "--group", "race", "--cache-dir", str(cache),
        ]  # fmt: skip
        deployed = [*common, "--data", str(with_members), "--members", "in_train", "--n-members", "600"]
        recipe = [*common, "--data", str(plain), "--n-members", "1000", "--n-nonmembers", "1000"]
        table = ["| audit | attack | AUC [95%] | TPR@0.01 [95%] | targets m/n | wall s |", "|---|---|---|---|---|---|"]
        wall, _ = run_cli([*deployed, "--out", str(work / "deployed")])
        table += summary_rows(work / "deployed", "this deployed model", wall)
        wall, _ = run_cli([*recipe, "--out", str(work / "recipe")])
        table += summary_rows(work / "recipe", "this recipe, re-trained", wall)
        wall2, hits = run_cli([*deployed, "--out", str(work / "deployed-again")])
        print(f"\n## {name}\n")
        print("\n".join(table))
        print(f"\nsecond as-deployed audit of the same model: {wall2:.0f} s; {hits}")
        d = json.loads((work / "deployed" / "metrics.json").read_text())["deployed"]
        print("\ndeployed draw:", json.dumps(d))
        ex = pd.read_csv(work / "deployed" / "exposure.csv")
        print("\nexposure.csv (head):\n" + ex.head(8).to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        g = pd.read_csv(work / "deployed" / "groups.csv")
        best = json.loads((work / "deployed" / "metrics.json").read_text())["exposure"]["ranking_attack"]
        g = g[g["attack"] == best]
        cols = ["column", "value", "n_members", "n_nonmembers", "auc", "auc_low", "auc_high", "tpr", "tpr_low"]
        cols += ["tpr_high", "auc_rest", "p_holm", "flagged"]
        print(f"\ngroups.csv ({best}):\n" + g[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
