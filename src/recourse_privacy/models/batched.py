"""Train many MLPs of one architecture at once: stacked weights, one vmapped forward pass.

Shadow models differ only in their training rows and seeds, so they can be trained together:
``torch.func.stack_module_state`` stacks their parameters, ``torch.func.vmap`` runs all N
networks on their own mini-batches in one batched matrix product, and one Adam steps the
stacked parameters. The loss is the sum of the N models' mean batch losses and Adam is
elementwise, so each network follows the same trajectory as :meth:`MLPModel.fit` would give
it alone (same initialisation, same batch order), up to floating-point summation order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.validation import check_binary_labels, check_matrix, derive_seed

_HYPER = ("hidden_layers", "lr", "epochs", "batch_size", "weight_decay")


def can_batch(models: Sequence[object]) -> bool:
    """True when every model is an :class:`MLPModel` with the same hyperparameters (seeds may differ)."""
    if len(models) < 2 or not all(type(m) is MLPModel for m in models):
        return False
    first = tuple(getattr(models[0], h) for h in _HYPER)
    return all(tuple(getattr(m, h) for h in _HYPER) == first for m in models)


def fit_mlps_batched(
    models: Sequence[MLPModel], X: np.ndarray, y: np.ndarray, rows: Sequence[np.ndarray]
) -> list[MLPModel]:
    """Fit ``models[k]`` on ``X[rows[k]], y[rows[k]]`` for all k at once; returns the fitted models.

    Models whose row sets differ in size are trained in groups of equal size (a batch step
    must advance every stacked network). Raises a ValueError where the models cannot share
    one training loop (see :func:`can_batch`).
    """
    if not can_batch(models) and len(models) > 1:
        raise InvalidInputError("fit_mlps_batched needs MLPModel instances with identical hyperparameters")
    if len(models) != len(rows):
        raise InvalidInputError(f"got {len(models)} models but {len(rows)} row sets")
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    sizes = np.array([len(r) for r in rows])
    for size in np.unique(sizes):
        group = np.flatnonzero(sizes == size)
        _fit_group([models[k] for k in group], X, y, [np.asarray(rows[k]) for k in group])
    return list(models)


def _fit_group(models: list[MLPModel], X: np.ndarray, y: np.ndarray, rows: list[np.ndarray]) -> None:
    import copy

    import torch
    from torch.func import functional_call, stack_module_state, vmap

    from recourse_privacy.models.torch_utils import torch_threads

    proto = models[0]
    seeds = [derive_seed(m.random_state, 0) for m in models]
    modules = [m._build(X.shape[1], s) for m, s in zip(models, seeds)]
    params, buffers = stack_module_state(modules)
    params = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    base = copy.deepcopy(modules[0]).to("meta")

    def forward(p, b, x):
        return functional_call(base, (p, b), (x,))

    batched_forward = vmap(forward)
    opt = torch.optim.Adam(list(params.values()), lr=proto.lr, weight_decay=proto.weight_decay)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.float32)
    idx = torch.as_tensor(np.stack(rows), dtype=torch.long)  # (N, m)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    m, bs = idx.shape[1], proto.batch_size
    with torch_threads(1):
        for _ in range(proto.epochs):
            order = torch.stack([idx[k, torch.randperm(m, generator=g)] for k, g in enumerate(gens)])
            for start in range(0, m, bs):
                batch = order[:, start : start + bs]
                logits = batched_forward(params, buffers, Xt[batch])
                loss = (
                    torch.nn.functional.binary_cross_entropy_with_logits(logits, yt[batch], reduction="none")
                    .mean(dim=1)
                    .sum()
                )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    for k, (model, module) in enumerate(zip(models, modules)):
        with torch.no_grad():
            for name, p in module.named_parameters():
                p.copy_(params[name][k])
        module.eval()
        module.requires_grad_(False)
        model.module_ = module
        model.n_features_in_ = X.shape[1]
        model.fitted_ = True
