"""A small multi-class ReLU network (the target f of DPC's multi-class experiments), seeded, in PyTorch."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.validation import check_matrix, check_positive_int, derive_seed

__all__ = ["MulticlassMLP"]


class MulticlassMLP:
    """Dense ReLU network with softmax cross-entropy, Adam; ``predict_proba`` gives the prediction vector."""

    def __init__(
        self,
        *,
        hidden_layers: Sequence[int] = (64,),
        epochs: int = 60,
        lr: float = 1e-3,
        batch_size: int = 64,
        random_state=None,
    ):
        self.hidden_layers = tuple(check_positive_int(h, "hidden_layers") for h in hidden_layers)
        self.epochs = check_positive_int(epochs, "epochs")
        self.lr = float(lr)
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, n_classes: int | None = None) -> MulticlassMLP:
        import torch
        from torch import nn

        from recourse_privacy.models.torch_utils import seeded_linear, torch_threads

        X = check_matrix(X)
        y = np.asarray(y).astype(np.int64)
        if y.shape != (len(X),) or (len(y) and y.min() < 0):
            raise InvalidInputError("y must hold one class label >= 0 per row of X")
        k = int(y.max()) + 1 if n_classes is None else int(n_classes)
        seed = derive_seed(self.random_state, 3)
        init = torch.Generator().manual_seed(seed)  # never the global generator (thread-safe: seeded_linear)
        mods, w = [], X.shape[1]
        for h in self.hidden_layers:
            mods += [seeded_linear(w, h, init, torch.float64), nn.ReLU()]
            w = h
        mods.append(seeded_linear(w, k, init, torch.float64))
        self.module_ = nn.Sequential(*mods)
        Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
        opt = torch.optim.Adam(self.module_.parameters(), lr=self.lr)
        gen = torch.Generator().manual_seed(seed)
        with torch_threads(1):
            for _ in range(self.epochs):
                order = torch.randperm(len(X), generator=gen)
                for s in range(0, len(X), self.batch_size):
                    idx = order[s : s + self.batch_size]
                    opt.zero_grad(set_to_none=True)
                    nn.functional.cross_entropy(self.module_(Xt[idx]), yt[idx]).backward()
                    opt.step()
        self.module_.eval()
        self.module_.requires_grad_(False)
        self.n_classes_, self.n_features_in_ = k, X.shape[1]
        return self

    def logits_fn(self, x):
        """Differentiable (n, K) logits of a torch tensor."""
        if not hasattr(self, "module_"):
            raise NotFittedError("MulticlassMLP is not fitted")
        return self.module_(x)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        import torch

        X = check_matrix(X, n_features=getattr(self, "n_features_in_", None))
        with torch.no_grad():
            return torch.softmax(self.logits_fn(torch.as_tensor(X)), 1).numpy()

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.predict_proba(X).argmax(1)
