"""Train many :class:`~recourse_privacy.models.mlp.MLPModel` networks of one architecture at once (reference models).

The trainer itself (stacked weights, the backward pass written out, one fused Adam step) is
:mod:`recourse_privacy.models.mlp_trainer`; here: which models can share it, and its checked entry point.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.models.mlp_trainer import fit_groups
from recourse_privacy.validation import check_binary_labels, check_matrix

_HYPER = ("hidden_layers", "lr", "epochs", "batch_size", "weight_decay", "device")


def can_batch(models: Sequence[object]) -> bool:
    """True when every model is an :class:`MLPModel` with the same hyperparameters (seeds may differ)."""
    if len(models) < 2 or not all(type(m) is MLPModel for m in models):
        return False
    first = tuple(getattr(models[0], h) for h in _HYPER)
    return all(tuple(getattr(m, h) for h in _HYPER) == first for m in models)


def fit_mlps_batched(
    models: Sequence[MLPModel],
    X: np.ndarray,
    y: np.ndarray,
    rows: Sequence[np.ndarray],
    *,
    device: str | None = None,
) -> list[MLPModel]:
    """Fit ``models[k]`` on ``X[rows[k]], y[rows[k]]`` for all k at once; returns the fitted models.

    Models whose row sets differ in size are trained in groups of equal size (a batch step
    must advance every stacked network). ``device`` (``cpu``, ``cuda``, ``auto``; default: the
    models' own ``device``, else the current :func:`~recourse_privacy.models.device.use_device`
    block) is where training runs; the fitted networks are returned on the CPU. Raises an
    InvalidInputError where the models cannot share one training loop (see :func:`can_batch`).
    """
    from recourse_privacy.models.device import resolve_device

    if not can_batch(models) and len(models) > 1:
        raise InvalidInputError("fit_mlps_batched needs MLPModel instances with identical hyperparameters")
    if len(models) != len(rows):
        raise InvalidInputError(f"got {len(models)} models but {len(rows)} row sets")
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    rows = [np.asarray(r, dtype=np.int64).reshape(-1) for r in rows]
    for k, r in enumerate(rows):
        if len(r) == 0 or r.min() < 0 or r.max() >= len(X):
            raise InvalidInputError(f"rows[{k}] must be a non-empty set of row indices in [0, {len(X)})")
    if not models:
        return []
    dev = resolve_device(device if device is not None else models[0].device)
    fit_groups(models, X, y, rows, dev)
    return list(models)
