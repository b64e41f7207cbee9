"""The paper's fully connected networks in PyTorch behind the model protocol."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.hyperparams import Choice, Float, Int, Ints
from recourse_privacy.models.base import TorchBackedClassifier
from recourse_privacy.models.device import DEVICES, resolve_device
from recourse_privacy.validation import check_binary_labels, check_matrix


class MLPModel(TorchBackedClassifier):
    """ReLU network trained with Adam on binary cross-entropy (Pawelczyk et al. 2023 and the slides presenting it).

    Defaults are the paper's: one hidden layer of 1,000 ReLU units, Adam with learning rate
    1e-4, 250 epochs. The batch size is not given in the paper; 64 is our default.
    ``device`` (``cpu``, ``cuda``, ``auto``; None: the enclosing
    :func:`~recourse_privacy.models.device.use_device` block) is where training runs; the
    fitted network is kept on the CPU.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "hidden_layers": Ints(1, 100_000),
        "lr": Float(0, 10, low_open=True),
        "epochs": Int(1, 100_000),
        "batch_size": Int(1, 10**7),
        "weight_decay": Float(0, 10),
        "device": Choice(*DEVICES, optional=True),
    }

    def __init__(
        self,
        *,
        hidden_layers: Sequence[int] = (1000,),
        lr: float = 1e-4,
        epochs: int = 250,
        batch_size: int = 64,
        weight_decay: float = 0.0,
        device: str | None = None,
        random_state=None,
    ):
        self.hidden_layers = tuple(hidden_layers)
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.device = device
        self.random_state = random_state

    def _build(self, n_features: int, seed: int):
        import torch
        from torch import nn

        from recourse_privacy.models.torch_utils import logit_module, seeded_linear

        # torch's own initialisation (nn.Linear.reset_parameters: Kaiming-uniform weights, uniform biases in
        # +-1/sqrt(fan_in)) drawn from a generator of this network's own, never torch's global one: the same
        # numbers as the global generator seeded with ``seed``, and safe where another Python thread builds or
        # draws at the same time (an owner's model trained beside the shadow models, audit/pipeline.py)
        gen = torch.Generator().manual_seed(seed)
        layers: list[nn.Module] = []
        width = n_features
        for h in (*self.hidden_layers, 1):
            layers += [seeded_linear(width, h, gen), nn.ReLU()]
            width = h
        return logit_module(nn.Sequential(*layers[:-1]))

    def fit(self, X: np.ndarray, y: np.ndarray) -> MLPModel:
        """Train from scratch on ``X`` with 0/1 labels ``y`` (seeded by ``random_state``).

        Minibatch Adam on the mean binary cross-entropy, in the order of a seeded ``torch.randperm``
        per epoch, through the stacked trainer that trains reference models
        (:mod:`~recourse_privacy.models.mlp_trainer`, a stack of one): the gradients of
        :mod:`torch.autograd` written out for this architecture (tested against autograd) and one fused
        Adam step, 3-5x less time than ``nn.Module`` + autograd (``benchmarks/bench_owner_trainer.py``). The owner's model and its reference
        models are trained by the same code.
        """
        from recourse_privacy.models.mlp_trainer import fit_groups

        X = check_matrix(X)
        y = check_binary_labels(y, n=X.shape[0])
        fit_groups([self], X, y, [np.arange(X.shape[0])], resolve_device(self.device))
        return self
