"""Where the HELOC Growing Spheres cell's two cores go: its overlapped stages alone and side by side.

The cell (docs/performance.md, "The HELOC Growing Spheres audit cell") trains the owner's MLP and searches its
recourse in one Python thread while the shadow set of 10 MLPs trains in this one. This script times, each in a
fresh process (``--mode``):

- ``owner``: the owner's model, then its recourse, alone (one torch thread);
- ``shadow1`` / ``shadow2``: the shadow set's training alone, in one or two stack workers;
- ``both``: the owner's side in a thread beside the shadow training in two workers (what the audit does);
- ``split1`` / ``split2``: the owner's model alone, then its recourse beside the shadow training.

Usage: ``for m in owner shadow1 shadow2 both split1 split2; do python benchmarks/bench_gs_cell_parts.py --mode $m;
done`` (with ``RECOURSE_PRIVACY_DATA`` set).
"""

from __future__ import annotations

import argparse
import contextvars
import threading
import time

MODES = ("owner", "shadow1", "shadow2", "both", "split1", "split2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=MODES, required=True)
    mode = ap.parse_args().mode

    from recourse_privacy.audit import AuditConfig, stages
    from recourse_privacy.audit import pipeline as P
    from recourse_privacy.models.mlp_trainer import STACK_WORKERS
    from recourse_privacy.models.torch_utils import torch_threads

    cfg = AuditConfig(
        dataset="heloc", model="mlp", recourse="gs", n_members=3000, attacks=("cfd", "cfd-lrt", "random"),
        shadow_models=10, model_params={"lr": 0.001}, recourse_params={"random_state": 0},
    ).validate()  # fmt: skip
    run = P._Run(cfg, P._Clock(lambda *a: None), None, cfg.defense_entry)
    P._data_stage(run)
    times: dict[str, float] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        times[name] = round(time.perf_counter() - t0, 2)

    def shadows(workers: int):
        token = STACK_WORKERS.set(workers)
        try:
            timed("shadow training", lambda: stages.shadow_models_ahead(cfg, run.recipe.make, run.game, None))
        finally:
            STACK_WORKERS.reset(token)

    def beside(side, workers: int):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(side,))
        thread.start()
        shadows(workers)
        thread.join()

    t0 = time.perf_counter()
    with torch_threads(1):
        if mode == "owner":
            timed("owner model", lambda: P._owner_stage(run))
            timed("owner recourse", lambda: P._recourse_stage(run))
        elif mode.startswith("shadow"):
            shadows(int(mode[-1]))
        elif mode == "both":
            beside(lambda: (timed("owner model", lambda: P._owner_stage(run)),
                            timed("owner recourse", lambda: P._recourse_stage(run))), 2)  # fmt: skip
        else:
            timed("owner model", lambda: P._owner_stage(run))
            beside(lambda: timed("owner recourse", lambda: P._recourse_stage(run)), int(mode[-1]))
    print(mode, times, "wall", round(time.perf_counter() - t0, 2))


if __name__ == "__main__":
    main()
