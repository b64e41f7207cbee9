"""A PyTorch network inside a scikit-learn estimator (skorch): scored on whole batches, and differentiated.

skorch's ``NeuralNetClassifier`` / ``NeuralNetBinaryClassifier`` make a torch module a scikit-learn
classifier; the last step of a ``Pipeline`` whose ``ColumnTransformer`` encodes the columns is how a
team deploys a PyTorch network on a table, and how the as-deployed audit reads it
(:class:`~recourse_privacy.models.estimator.EstimatorModel`).

* **Scoring.** skorch's ``predict_proba`` collates its input row by row through a ``DataLoader``; a
  search that scores millions of candidate rows spent 70% of a COMPAS audit there (py-spy). :class:`NetworkParts`
  runs the same computation on whole chunks: the pipeline's steps before the net, the net's own
  ``infer`` (its module, on its device) and its predict nonlinearity, without gradients.
  :meth:`NetworkParts.matches` checks it against ``predict_proba`` on the rows given before it is used.
* **Gradients.** Where the steps before the net are affine in the audit's encoded space (one-hot
  encoders and scalers are: their output is ``A z + b`` at every valid encoded point ``z``, decided
  numerically by :func:`affine_map`), :class:`NetworkLogit` composes that map, a copy of the net's
  module and the favourable-class logit read from its output, so that gradient recourse (SCFE,
  REVISE, DiCE) searches the deployed network as it does the built-in MLP.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from recourse_privacy.models.decision_threshold import inner_estimator, last_step

__all__ = ["CHUNK_ROWS", "NetworkLogit", "NetworkParts", "affine_map", "find_network", "holds_network"]

#: rows per forward pass of the batched scoring (a 1,000-unit hidden layer: 64 MB of float32 activations)
CHUNK_ROWS = 16_384
#: the encoded map is accepted as affine when the least-squares fit's largest residual is below this,
#: relative to max(1, its largest output): the steps before a net commonly emit float32
AFFINE_RTOL = 1e-5


def _net_of(estimator: object):
    """The skorch net of ``estimator`` (itself, or the last step of its Pipeline), fitted or not; else None."""
    skorch = sys.modules.get("skorch")  # never imported here: a skorch net can only exist where it was
    if skorch is None:
        return None
    last = last_step(inner_estimator(estimator))  # a threshold wrapper decides with the pipeline it holds
    return last if isinstance(last, skorch.NeuralNet) else None


def _first(output):
    """A module's output, or the first of several (skorch's predict_proba reads the first)."""
    return output[0] if isinstance(output, tuple) else output


@dataclass(frozen=True)
class NetworkParts:
    """A fitted skorch net and the fitted steps before it (``pre``: a Pipeline, or None for the net alone)."""

    pre: object | None
    net: object

    def features(self, rows) -> np.ndarray:
        """The net's input for ``rows`` (the estimator's input), as the pipeline gives it to the net."""
        return np.asarray(self.pre.transform(rows) if self.pre is not None else rows)

    def proba(self, rows) -> np.ndarray:
        """``predict_proba`` of the whole estimator, the net run on chunks of :data:`CHUNK_ROWS` rows (steps that
        give a sparse matrix make :meth:`matches` fail: the estimator keeps skorch's own path)."""
        X = self.features(rows)
        nonlinearity = self.net._get_predict_nonlinearity()
        self.net._set_training(False)  # what skorch's own predict_proba does first
        parts = []
        with torch.no_grad():
            for start in range(0, len(X), CHUNK_ROWS):
                parts.append(nonlinearity(_first(self.net.infer(X[start : start + CHUNK_ROWS]))).detach().cpu().numpy())
        return np.concatenate(parts) if parts else np.empty((0, 2))

    def matches(self, estimator: object, rows) -> bool:
        """Whether :meth:`proba` gives ``estimator.predict_proba(rows)`` (float32 rounding aside)."""
        try:
            fast = np.asarray(self.proba(rows), dtype=np.float64)
        except Exception:  # noqa: BLE001 - a net whose input the chunks do not fit: keep skorch's own path
            return False
        slow = np.asarray(estimator.predict_proba(rows), dtype=np.float64)
        return fast.shape == slow.shape and bool(np.allclose(fast, slow, rtol=1e-5, atol=1e-6, equal_nan=True))

    def logit_head(self, pos_index: int):
        """A function from the module's output to the favourable class's logit, as the net's predict
        nonlinearity reads that output.

        Softmax over two outputs (``CrossEntropyLoss``): the difference of the two; a sigmoid on one
        (``BCEWithLogitsLoss``): the output itself; any other: the log-odds of the probabilities.
        """
        from skorch.utils import _sigmoid_then_2d

        nonlinearity = self.net._get_predict_nonlinearity()
        pos, neg = int(pos_index), 1 - int(pos_index)
        softmax = getattr(nonlinearity, "func", None) is torch.softmax

        def head(output):
            output = _first(output)
            if softmax and output.ndim == 2 and output.shape[1] == 2:
                return output[:, pos] - output[:, neg]
            if nonlinearity is _sigmoid_then_2d:
                z = output.reshape(-1)
                return z if pos == 1 else -z
            p = nonlinearity(output).clamp(1e-12, 1 - 1e-12)
            return torch.log(p[:, pos]) - torch.log(p[:, neg])

        return head


def holds_network(estimator: object) -> bool:
    """Whether ``estimator`` (fitted or not) is a skorch net or a Pipeline ending in one: its training draws from
    torch's global generator."""
    return _net_of(estimator) is not None


def find_network(estimator: object) -> NetworkParts | None:
    """The fitted skorch net of ``estimator`` (the net itself, or a Pipeline ending in one), else None."""
    net = _net_of(estimator)
    if net is None or not getattr(net, "initialized_", False):
        return None
    estimator = inner_estimator(estimator)
    steps = getattr(estimator, "steps", None)
    return NetworkParts(estimator[:-1] if steps and len(steps) > 1 else None, net)


def affine_map(parts: NetworkParts, decode, P: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(A, b)`` with ``features(decode(z)) = z @ A + b`` at every probe point ``z`` of ``P``, else None.

    Fitted by least squares and accepted where the largest residual is below :data:`AFFINE_RTOL`
    relative to max(1, the largest feature); ``P`` must hold at least ``d + 1`` points that span the
    encoded space (every category of every one-hot group among them).
    """
    try:
        with np.errstate(all="ignore"):  # probe points outside the data's range may leave a step's domain
            T = np.asarray(parts.features(decode(P)), dtype=np.float64)
    except Exception:  # noqa: BLE001 - steps that cannot take the probe rows give no map
        return None
    if T.ndim != 2 or len(T) != len(P) or not np.all(np.isfinite(T)):
        return None
    Z = np.column_stack([P, np.ones(len(P))])
    sol, *_ = np.linalg.lstsq(Z, T, rcond=None)
    if np.max(np.abs(Z @ sol - T)) > AFFINE_RTOL * max(1.0, float(np.max(np.abs(T)))):
        return None
    return sol[:-1], sol[-1]


class NetworkLogit(nn.Module):
    """The favourable logit of a skorch net on encoded points: the affine map, then a copy of its module."""

    def __init__(self, parts: NetworkParts, A: np.ndarray, b: np.ndarray, pos_index: int, offset: float = 0.0):
        super().__init__()
        self.offset = float(offset)  # the decision cutoff's log-odds, subtracted from the logit
        # a copy (the user's net untouched), on the CPU where the searches run (module_on_device moves it for a GPU)
        self.module = copy.deepcopy(parts.net.module_).cpu().eval().requires_grad_(False)
        dtype = next((p.dtype for p in self.module.parameters()), torch.float32)
        self.register_buffer("A", torch.as_tensor(A, dtype=dtype))
        self.register_buffer("b", torch.as_tensor(b, dtype=dtype))
        self.head = parts.logit_head(pos_index)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        logit = self.head(self.module(z.to(self.A.dtype) @ self.A + self.b))
        return (logit - self.offset if self.offset else logit).to(z.dtype)  # in the net's dtype, whatever z's
