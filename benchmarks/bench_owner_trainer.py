"""The owner's MLP: the stacked trainer (``MLPModel.fit`` since stop 34) against the autograd loop it replaced.

Trains the paper's HELOC network (one hidden layer of 1,000 ReLU, Adam lr 1e-3, 250 epochs, batch 64) on
the members of the audit's game (seed 0, 3,000 members, the owner's seed of `audit.stages.train_owner`), once with ``MLPModel.fit`` (``models/mlp_trainer.py``,
a stack of one: the backward pass written out, one fused Adam step) and once with the autograd loop the tests
keep as their reference (``tests/_autograd_mlp.py``: ``nn.Module``, autograd, ``torch.optim.Adam``). Same
initialisation, same batch order, same Adam: only the float32 order of the sums differs. Prints both times
(the autograd loop on the CPU; ``--device`` moves the stacked one) and how far the two networks' logits and decisions are apart on the members and the non-members.

    RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_owner_trainer.py [--epochs 250]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=250)
    ap.add_argument("--n-members", type=int, default=3000)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"), help="the stacked trainer's device")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT / "tests"))
    from _autograd_mlp import fit_autograd
    from recourse_privacy.audit import AuditConfig
    from recourse_privacy.audit.stages import prepare_game
    from recourse_privacy.data import load_dataset
    from recourse_privacy.models import make_model

    config = AuditConfig(dataset="heloc", model="mlp", recourse="scfe", n_members=args.n_members)
    game = prepare_game(config, load_dataset("heloc"))
    import torch  # noqa: F401 - imported before the clocks start (about 1.3 s the first time)

    from recourse_privacy.models.device import describe_device
    from recourse_privacy.validation import derive_seed

    kw = dict(lr=1e-3, epochs=args.epochs, random_state=derive_seed(config.seed, 3))  # the audit's owner seed
    t = time.perf_counter()
    stacked = make_model("mlp", device=args.device, **kw).fit(game.X_members, game.y_members)
    stacked_s = time.perf_counter() - t
    t = time.perf_counter()
    autograd = fit_autograd(make_model("mlp", **kw), game.X_members, game.y_members)
    autograd_s = time.perf_counter() - t
    out = {
        "device": describe_device(args.device),
        "stacked_seconds": round(stacked_s, 2),
        "autograd_seconds (cpu)": round(autograd_s, 2),
    }
    for name, X in (("members", game.X_members), ("nonmembers", game.X_nonmembers)):
        a, b = stacked.decision_function(X), autograd.decision_function(X)
        diff = np.abs(a - b)
        out[name] = {
            "rows": len(X),
            "median_abs_logit_difference": round(float(np.median(diff)), 3),
            "max_abs_logit_difference": round(float(diff.max()), 3),
            "decisions_that_differ": int(((a >= 0) != (b >= 0)).sum()),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
