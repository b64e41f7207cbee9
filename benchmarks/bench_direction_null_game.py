"""The direction calibration on a game with no signal, 20 seeds.

    python benchmarks/bench_direction_null_game.py OUT.json

Shadow models of an LR audit (synthetic d = 1,000, unit rows, epsilon 0.5, 1,000 members, 5
shadow models on a pool of 2,000, L2) are trained once; then, per seed, a fresh keep matrix drawn
independently of the training (so "membership" carries no signal at all) labels the calibration
game, and the direction is calibrated on it: as before this issue (a pseudo-member has one more
out-reference than a pseudo-non-member, no null band) and as now (equal out-references, null band,
fallback to the paper's direction).
"""

from __future__ import annotations

import json
import sys

import numpy as np

import recourse_privacy.audit.stages as st
from recourse_privacy.attacks.lrt import calibrate_direction, fit_reference, lrt_scores
from recourse_privacy.attacks.shadow import balanced_keep
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.defenses import DEFENSES
from recourse_privacy.models.registry import model_factory


def old_calibration(stat, target_mask, ref_mask, keep):
    """The calibration before this issue: every out-shadow used, so pseudo-members have one more."""
    from sklearn.metrics import roc_auc_score

    scores, labels = [], []
    for k in range(stat.shape[1]):
        rows = target_mask[:, k]
        others = np.arange(stat.shape[1]) != k
        ref = fit_reference(stat[rows][:, others], (ref_mask & ~keep)[rows][:, others])
        scores.append(lrt_scores(stat[rows, k], ref))
        labels.append(keep[rows, k])
    return float(roc_auc_score(np.concatenate(labels), np.concatenate(scores)))


c = AuditConfig(
    n_features=1000,
    n_members=1000,
    shadow_models=5,
    normalize_rows=True,
    distance="l2",
    defense="laplace",
    epsilon=0.5,
    attacks=("cfd-lrt",),
).validate()
game = st.prepare_game(c, st.load_data(c))
name, params = c.effective_model
make = model_factory(name, **params)
targets = st.train_owner(make, game, 0)
method = DEFENSES.get("laplace").obj.shadow_recourse(c, None)
sh = st.train_shadow_models(c, make, method, game, targets, cache_dir=None, progress=lambda *a: None)
stat = np.log(np.maximum(sh.cfd_calib, 1e-12))
np.savez(sys.argv[1] + ".npz", stat=stat, usable=sh.usable_calib, keep=sh.keep_calib)
rows = []
for seed in range(20):
    keep = balanced_keep(len(stat), 5, 0.5, 1000 + seed)  # independent of which rows trained which shadow
    new = calibrate_direction(stat, sh.usable_calib, sh.usable_calib, keep, random_state=seed)
    rows.append(
        {
            "seed": seed,
            "old_auc": old_calibration(stat, sh.usable_calib, sh.usable_calib, keep),
            "new_auc": new.shadow_auc,
            "null_halfwidth": new.null_halfwidth,
            "fallback": new.fallback,
            "direction": new.direction,
        }
    )
    print(rows[-1], flush=True)
old = np.array([r["old_auc"] for r in rows])
new = np.array([r["new_auc"] for r in rows])
summary = {
    "old_auc_mean": old.mean(),
    "old_auc_range": [old.min(), old.max()],
    "old_reversed": int((old < 0.5).sum()),
    "new_auc_mean": new.mean(),
    "new_auc_range": [new.min(), new.max()],
    "fallback_fired": int(sum(r["fallback"] for r in rows)),
    "n": len(rows),
    "rows": rows,
}
print({k: v for k, v in summary.items() if k != "rows"})
json.dump(summary, open(sys.argv[1], "w"), indent=1)
