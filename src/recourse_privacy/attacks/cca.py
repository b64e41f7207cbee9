"""Surrogate training for model extraction, batched in torch, with the counterfactual clamping loss (CCA).

Dissanayake and Dutta (NeurIPS 2024, "Model reconstruction using counterfactual explanations: a
perspective from polytope theory") observe that a counterfactual sits just across the decision
boundary: labelling it with the far side's label and fitting it by cross-entropy pushes the
surrogate's score toward 1 there and drags the surrogate's boundary past the target's. Their
counterfactual clamping attack (CCA) keeps the ordinary queries' binary cross-entropy and, for
a counterfactual, penalises the surrogate only while it is on the wrong side of the threshold
k = 0.5, by the binary cross-entropy toward the soft label k less its minimum (the Kullback-Leibler
divergence from k; their CCA loss, the ``onesidemod`` loss of the authors' code)::

    loss(x_cf) = 1[p_side(x_cf) <= k] * (k log(k / p_side) + (1 - k) log((1 - k) / (1 - p_side))),

zero at the threshold with zero slope there, and zero (with zero gradient) once the surrogate puts
x_cf on its side. ``p_side`` is the surrogate's probability of the class the counterfactual
claims (the favourable class for the counterfactual of a rejected query; the unfavourable one for
an accepted query's). At k = 0.5 the divergence is symmetric in p and 1 - p, so the loss is the
cross-entropy toward 0.5 less log 2, on whichever side the counterfactual claims.

:func:`fit_surrogates` trains K small ReLU networks at once (one stacked set of weights, torch
``bmm``), each on its own transfer set, padded to a common length with zero-weight rows, full
batch with Adam: the extraction curve trains every (repeat, surrogate, budget) cell in a few
batched calls instead of hundreds of scikit-learn fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_matrix, check_positive_int, derive_seed

__all__ = ["BatchedSurrogates", "TransferSet", "cca_loss", "fit_surrogates"]

_LOG_HALF = float(np.log(0.5))


@dataclass(frozen=True)
class TransferSet:
    """One surrogate's training rows: points ``X``, 0/1 labels ``y`` and ``clamp`` (True: a CCA counterfactual)."""

    X: np.ndarray
    y: np.ndarray
    clamp: np.ndarray

    def __post_init__(self) -> None:
        X = check_matrix(self.X, "transfer set X")
        y = np.asarray(self.y, dtype=np.float64).reshape(-1)
        clamp = np.asarray(self.clamp, dtype=bool).reshape(-1)
        if not (len(y) == len(clamp) == len(X)):
            raise InvalidInputError(f"transfer set: {len(X)} rows, {len(y)} labels, {len(clamp)} clamp flags")
        if len(y) and not np.isin(y, (0.0, 1.0)).all():
            raise InvalidInputError("transfer set labels must be 0/1")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "clamp", clamp)


def cca_loss(logits, y, clamp):
    """Per-row loss (torch): binary cross-entropy, or where ``clamp`` Dissanayake and Dutta's (2024) clamped
    divergence from the threshold 0.5 (module docstring)."""
    import torch
    import torch.nn.functional as F

    bce = F.binary_cross_entropy_with_logits(logits, y, reduction="none")
    # KL(0.5 || p) = BCE(0.5, p) - log 2, symmetric in p and 1 - p; active while the row's side has p <= 0.5
    kl = torch.clamp(
        F.binary_cross_entropy_with_logits(logits, torch.full_like(y, 0.5), reduction="none") + _LOG_HALF, min=0.0
    )
    wrong_side = torch.where(y > 0.5, logits <= 0, logits >= 0)
    return torch.where(clamp, torch.where(wrong_side, kl, torch.zeros_like(kl)), bce)


@dataclass(frozen=True)
class BatchedSurrogates:
    """K fitted networks sharing one architecture; ``weights[i]`` (K, fan_in, fan_out), ``biases[i]`` (K, 1, fan_out)."""

    weights: tuple
    biases: tuple

    @property
    def n_models(self) -> int:
        """How many networks are stacked."""
        return int(self.weights[0].shape[0])

    def logits(self, X: np.ndarray) -> np.ndarray:
        """(K, n) favourable-class logits of every network on the same points ``X``."""
        import torch

        with torch.no_grad():
            h = torch.as_tensor(np.asarray(X, dtype=np.float32)).unsqueeze(0).expand(self.n_models, -1, -1)
            out = _forward(h, self.weights, self.biases)
        return out.numpy().astype(np.float64)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """(K, n) 0/1 decisions of every network (1 where the logit is >= 0)."""
        return (self.logits(X) >= 0).astype(np.int64)

    def predict_proba(self, X: np.ndarray, k: int) -> np.ndarray:
        """(n, 2) class probabilities of network ``k``."""
        z = self.logits(X)[k]
        p1 = 1.0 / (1.0 + np.exp(-z))
        return np.column_stack([1.0 - p1, p1])


def _forward(h, weights, biases):
    import torch

    for i, (W, b) in enumerate(zip(weights, biases, strict=True)):
        h = torch.baddbmm(b, h, W)
        if i < len(weights) - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def fit_surrogates(
    sets: Sequence[TransferSet],
    hidden_layers: Sequence[int] = (20, 10),
    *,
    epochs: int = 300,
    lr: float = 1e-2,
    weight_decay: float = 1e-4,
    random_state=None,
) -> BatchedSurrogates:
    """Train one ReLU network per transfer set, all at once (full batch, Adam; module docstring).

    The inputs are standardised with each set's own mean and scale folded into the first layer, so
    the returned networks read the raw points. Rows beyond a set's length are padding (weight 0);
    every set's loss is the mean over its own rows.
    """
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    if not sets:
        raise InvalidInputError("fit_surrogates needs at least one transfer set")
    d = sets[0].X.shape[1]
    if any(s.X.shape[1] != d for s in sets):
        raise InvalidInputError("every transfer set must have the same number of features")
    if any(len(s.y) == 0 for s in sets):
        raise InvalidInputError("every transfer set needs at least one row")
    epochs = check_positive_int(epochs, "epochs")
    K, n = len(sets), max(len(s.y) for s in sets)
    X = np.zeros((K, n, d), np.float32)
    Y = np.zeros((K, n), np.float32)
    C = np.zeros((K, n), bool)
    M = np.zeros((K, n), np.float32)
    mu = np.zeros((K, 1, d), np.float32)
    sd = np.ones((K, 1, d), np.float32)
    for k, s in enumerate(sets):
        m = len(s.y)
        mu[k, 0] = s.X.mean(0)
        sd[k, 0] = np.where(s.X.std(0) > 1e-8, s.X.std(0), 1.0)
        X[k, :m] = (s.X - mu[k, 0]) / sd[k, 0]
        Y[k, :m], C[k, :m], M[k, :m] = s.y, s.clamp, 1.0 / m
    gen = torch.Generator().manual_seed(derive_seed(random_state, 41) % (2**63))
    widths = [d, *map(int, hidden_layers), 1]
    weights, biases = [], []
    for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
        bound = 1.0 / np.sqrt(fan_in)  # torch.nn.Linear's default initialisation
        weights.append(((torch.rand(K, fan_in, fan_out, generator=gen) * 2 - 1) * bound).requires_grad_())
        biases.append(((torch.rand(K, 1, fan_out, generator=gen) * 2 - 1) * bound).requires_grad_())
    Xt, Yt, Ct, Mt = map(torch.as_tensor, (X, Y, C, M))
    opt = torch.optim.Adam([*weights, *biases], lr=lr, weight_decay=weight_decay)
    with torch_threads(1):  # small batched products: one thread is several times faster than two contending
        for _ in range(epochs):
            opt.zero_grad()
            loss = (cca_loss(_forward(Xt, weights, biases), Yt, Ct) * Mt).sum()
            loss.backward()
            opt.step()
    with torch.no_grad():  # fold the standardisation into the first layer: W' = W / sd, b' = b - (mu / sd) W
        W0 = weights[0] / torch.as_tensor(sd).transpose(1, 2)
        b0 = biases[0] - torch.bmm(torch.as_tensor(mu / sd), weights[0])
        ws = (W0, *(w.detach() for w in weights[1:]))
        bs = (b0, *(b.detach() for b in biases[1:]))
    return BatchedSurrogates(tuple(w.detach() for w in ws), tuple(b.detach() for b in bs))
