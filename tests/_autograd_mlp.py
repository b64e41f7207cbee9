"""The reference the stacked MLP trainer is tested against: the same training written with torch.autograd.

``MLPModel.fit`` and the reference models both train through ``models/batched.py``, whose backward
pass is written out by hand. This is the plain ``nn.Module`` + autograd + ``torch.optim.Adam`` loop
(the trainer ``MLPModel.fit`` used before stop 34): same initialisation, same seeded minibatch
order, same Adam.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.validation import derive_seed


def fit_autograd(model: MLPModel, X: np.ndarray, y: np.ndarray) -> MLPModel:
    """Train ``model`` (an unfitted MLPModel) on ``X``, ``y`` with autograd, on the CPU; returns it fitted."""
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    seed = derive_seed(model.random_state, 0)
    module = model._build(X.shape[1], seed)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.float32)
    opt = torch.optim.Adam(module.parameters(), lr=model.lr, weight_decay=model.weight_decay)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(seed)
    module.train()
    with torch_threads(1):
        for _ in range(model.epochs):
            order = torch.randperm(len(X), generator=gen)
            for start in range(0, len(X), model.batch_size):
                idx = order[start : start + model.batch_size]
                opt.zero_grad(set_to_none=True)
                loss_fn(module(Xt[idx]), yt[idx]).backward()
                opt.step()
    module.eval()
    module.requires_grad_(False)
    model.module_, model.n_features_in_, model.fitted_ = module, X.shape[1], True
    return model
