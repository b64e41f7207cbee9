"""The reference worlds' recourse queries alone, one worker thread against two (issue 28, helper ``overlap``).

HELOC, the paper's MLP (1 x 1,000 ReLU, Adam lr 1e-3), Growing Spheres (random_state 0), 10 shadow models trained
once ahead (``attacks.shadow.fit_shadow_models``), then each world's statistics of 3,200 non-members and 1,000
calibration points (``run_shadow_models`` with the trained models), once per ``--workers`` value in turn. Prints the
wall and CPU seconds of each and whether the statistics are the same bit for bit.

    RECOURSE_PRIVACY_DATA=../shared/data python benchmarks/bench_world_queries.py --workers 1 2 1 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shadow-models", type=int, default=10)
    args = ap.parse_args()

    import recourse_privacy.attacks.shadow as shadow
    import recourse_privacy.audit.stages as stages
    from recourse_privacy.audit.config import AuditConfig
    from recourse_privacy.audit.defenses import DEFENSES
    from recourse_privacy.audit.user_model import action_set_for, public_bounds_for, resolve_model
    from recourse_privacy.validation import derive_seed

    config = AuditConfig(
        dataset="heloc",
        model="mlp",
        recourse="gs",
        n_members=3000,
        attacks=("cfd", "cfd-lrt"),
        shadow_models=args.shadow_models,
        model_params={"lr": 1e-3},
        recourse_params={"random_state": 0},
    ).validate()
    game = stages.prepare_game(config, stages.load_data(config))
    recipe = resolve_model(config, game)
    defense = DEFENSES.get(config.defense).obj
    method = defense.shadow_recourse(config, action_set_for(config, game), public_bounds_for(config, game))

    def make(k: int):
        return recipe.make(derive_seed(config.seed, 100 + k))

    common = dict(
        n_shadow=config.shadow_models, fraction=config.shadow_fraction, random_state=derive_seed(config.seed, 4)
    )
    t = time.perf_counter()
    fitted = shadow.fit_shadow_models(make, game.X_pool, game.y_pool, **common)
    print(f"training ahead: {time.perf_counter() - t:.1f} s", flush=True)
    X_t, y_t = game.X_nonmembers[:3200].astype(np.float64), game.y_nonmembers[:3200]
    results = []
    for workers in args.workers:
        shadow.QUERY_WORKERS = workers
        cpu, wall = time.process_time(), time.perf_counter()
        results.append(
            shadow.run_shadow_models(
                make,
                method,
                game.X_pool,
                game.y_pool,
                X_t,
                y_t,
                **common,
                fitted=fitted,
                distance=config.distance,
                spare_core=True,
            )
        )
        print(
            f"workers {workers}: wall {time.perf_counter() - wall:.1f} s, CPU {time.process_time() - cpu:.1f} s, "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    same = all(np.array_equal(getattr(results[0], f), getattr(r, f)) for r in results for f in shadow._FIELDS)
    print("the same statistics in every run:", same)


if __name__ == "__main__":
    main()
