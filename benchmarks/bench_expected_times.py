"""CPU seconds of the parts behind the reproductions' stated expected times (``recourse-privacy list reproduction``).

Where a reproduction was not timed whole, its ``expected_time`` is estimated from its parts:

- ``pawelczyk2023-fig3``: CPU seconds per training epoch of each MLP of Pawelczyk et al.'s (2023)
  Figure 3 on 5,000 rows (torch with 1 thread, as a grid cell runs), times 11 models (owner and
  10 shadow models) x 250 epochs x the cells;
- ``reference-budget``: a logistic fit at d = 5,000 on 5,000 rows (its synthetic half trains 65);
  one HELOC-sized MLP (1 x 1,000, lr 1e-3) trained 250 epochs on 3,000 rows.

CPU time (``time.process_time``) rather than wall time, so that a loaded machine gives comparable
figures; divide by the cores in use for a wall-time estimate.

    python benchmarks/bench_expected_times.py [--epochs 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _cpu(fn, *args) -> float:
    """CPU seconds of ``fn(*args)`` in this process."""
    c0 = time.process_time()
    fn(*args)
    return time.process_time() - c0


def main() -> None:
    import torch

    from recourse_privacy.models.registry import make_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2, help="epochs timed per MLP (per-epoch CPU s is printed)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    make_model("mlp", random_state=0, epochs=1, device="cpu").fit(
        rng.normal(size=(500, 5)), np.arange(500) % 2
    )  # warm-up
    for name, d in (("mlp", 50), ("mlp", 150), ("mlp3-100", 150), ("mlp3-333", 150), ("mlp3-1000", 150)):
        X = rng.normal(size=(5000, d))
        y = (X[:, 0] > 0).astype(int)
        model = make_model(name, random_state=0, epochs=args.epochs, device="cpu")
        per_epoch = _cpu(model.fit, X, y) / args.epochs
        print(f"{name} d={d}: {per_epoch:.2f} CPU s per epoch on 5,000 rows; x 11 models x 250 epochs = "
              f"{per_epoch * 11 * 250 / 60:.0f} CPU min per Figure 3 cell", flush=True)  # fmt: skip
    X = rng.normal(size=(5000, 5000))
    y = (X[:, :10].sum(axis=1) > 0).astype(int)
    print(f"logistic d=5000 on 5,000 rows: {_cpu(make_model('logistic', random_state=0).fit, X, y):.1f} CPU s")
    X = rng.normal(size=(3000, 23))
    y = (X[:, 0] > 0).astype(int)
    mlp = make_model("mlp", random_state=0, lr=1e-3, device="cpu")
    print(f"mlp (1 x 1,000) 250 epochs on 3,000 rows x 23 features: {_cpu(mlp.fit, X, y):.1f} CPU s")


if __name__ == "__main__":
    main()
