"""Small PyTorch helpers shared by the torch-backed models (imported lazily)."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from torch import nn


class _SqueezeLogit(nn.Module):
    """Wraps a network whose output is (n, 1) or (n, 2) logits into a (n,) favourable logit."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x)
        if out.ndim == 2 and out.shape[1] == 2:
            return out[:, 1] - out[:, 0]
        return out.reshape(out.shape[0])


@contextmanager
def torch_threads(n: int = 1):
    """Run a block with ``n`` intra-op threads, then restore the previous setting.

    Training the paper's small networks on mini-batches is dominated by per-step overhead;
    one thread per process is faster than two fighting over the same cores, and leaves the
    other core to a parallel shadow-model worker.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def linear_module(coef: np.ndarray, intercept: float) -> nn.Module:
    """A frozen float64 linear layer with the given weights, returning (n,) logits."""
    layer = nn.Linear(coef.shape[0], 1, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(coef, dtype=torch.float64).reshape(1, -1))
        layer.bias.fill_(float(intercept))
    layer.requires_grad_(False)
    return _SqueezeLogit(layer).eval()


def logit_module(net: nn.Module) -> nn.Module:
    """A user's network (outputs (n,), (n, 1) or (n, 2) logits) as a (n,) favourable logit."""
    return _SqueezeLogit(net).eval()


@torch.no_grad()
def batched_logits(module: nn.Module, X: np.ndarray, batch_size: int = 8192) -> np.ndarray:
    """Run ``module`` on ``X`` in chunks, on the module's device, and return float64 logits (numpy)."""
    p = next(module.parameters())
    out = [
        module(torch.as_tensor(X[i : i + batch_size], dtype=p.dtype, device=p.device))
        for i in range(0, len(X), batch_size)
    ]
    return torch.cat(out).double().cpu().numpy() if out else np.zeros(0)


def module_on_device(module: nn.Module, device: str | None = None) -> nn.Module:
    """``module`` on ``device`` (None: the current :func:`~recourse_privacy.models.device.use_device` block).

    The module itself where it is already there; else a copy moved there, so that a fitted
    model's own network never changes device.
    """
    import copy

    from recourse_privacy.models.device import resolve_device

    dev = resolve_device(device)
    p = next(module.parameters(), None)
    if p is None or p.device == dev:
        return module
    return copy.deepcopy(module).to(dev)
