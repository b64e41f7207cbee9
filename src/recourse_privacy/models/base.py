"""The model protocol every recourse method and attack uses.

A model is a binary classifier whose favourable class is 1. It exposes the logit of the
favourable class (``decision_function``); probabilities, predictions, per-example loss and
the logit-scaled confidence of Carlini et al. are derived from it. Models that can give
gradients expose a PyTorch module (``torch_module``); linear models expose ``coef_`` and
``intercept_`` so that exact recourse applies.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from recourse_privacy.errors import NotFittedError
from recourse_privacy.hyperparams import enforce_params
from recourse_privacy.validation import check_binary_labels, check_matrix


@runtime_checkable
class Classifier(Protocol):
    """A fitted binary classifier; ``decision_function`` is the favourable-class logit."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Classifier: ...

    def decision_function(self, X: np.ndarray) -> np.ndarray: ...

    def predict_proba(self, X: np.ndarray) -> np.ndarray: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...


class BaseClassifier:
    """Derives ``predict_proba`` and ``predict`` from ``decision_function`` (threshold 0.5)."""

    #: True when the fitted model has ``coef_`` / ``intercept_`` and a linear logit.
    is_linear: bool = False
    #: True when ``torch_module()`` gives a differentiable logit.
    is_differentiable: bool = False
    #: the log-odds of the model's own probability at its decision cutoff: ``decision_function`` is the
    #: log-odds less this (0: favourable from one half; a deployed cutoff, models/decision_threshold.py)
    decision_offset_: float = 0.0

    def __init_subclass__(cls, **kwargs) -> None:
        """A subclass that declares ``PARAMS`` has them checked at every construction (hyperparams)."""
        super().__init_subclass__(**kwargs)
        enforce_params(cls)

    def decision_function(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Probabilities of classes 0 and 1, shape (n, 2)."""
        p1 = _sigmoid(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: np.ndarray) -> np.ndarray:
        """1 (favourable) where the probability of class 1 is at least 0.5, else 0."""
        return (self.decision_function(X) >= 0.0).astype(np.int64)

    def log_odds(self, X: np.ndarray) -> np.ndarray:
        """The log-odds of the model's own probability of the favourable label: ``decision_function`` plus
        ``decision_offset_`` (the same values for a model that decides at one half)."""
        z = self.decision_function(X)
        return z + self.decision_offset_ if self.decision_offset_ else z

    def search_logits(self, X: np.ndarray) -> np.ndarray:
        """``decision_function`` for rows a recourse search built itself (already checked): the same values.

        Torch-backed models skip the per-call validation here; searches evaluate many blocks of
        candidates and call this instead of ``predict`` in their inner loop.
        """
        return self.decision_function(X)

    def shifted_logits(self, X: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Logits (n, s) at every ``X[i] + offsets[j]`` and a bound (n,) on their error, or None where not available.

        For searches that score one set of offsets around many points (Growing Spheres): a model
        whose first layer is linear computes it from two small products. The logit the model
        itself gives at ``X[i] + offsets[j]`` is within ``bound[i]`` of the value returned, so
        a value below ``-bound[i]`` is a point the model rejects. None: score the points themselves.
        """
        return None

    def affine_logits(
        self, H: np.ndarray, A: np.ndarray, a0: np.ndarray, h_err: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Logits (m, s) at the points ``A @ H[i, j] + a0`` and bounds (m,) or (m, s) on their error, or None where not available.

        For searches whose candidates are an affine image of a short code ``H`` (m, s, q), such as
        the last hidden layer of C-CHVAE's decoder: a model whose first layer is linear folds ``A``
        into it. The model's own logit at the float64 point ``A @ H'[i, j] + a0``, for any codes
        ``H'`` within ``h_err[i]`` (m, q) of ``H``, is within ``bound[i]`` of the value returned.
        """
        return None

    def _check_fitted(self) -> None:
        if not getattr(self, "fitted_", False):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(X, y) first")

    def _check_X(self, X) -> np.ndarray:
        self._check_fitted()
        return check_matrix(X, "X", n_features=self.n_features_in_)


class LinearClassifier(BaseClassifier):
    """A classifier whose fitted state is ``coef_`` (d,) and ``intercept_``: logit w.x + b."""

    is_linear = True
    is_differentiable = True

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The logit w.x + b."""
        return self._check_X(X) @ self.coef_ + self.intercept_

    def shifted_logits(self, X: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logits (n, s) at every ``X[i] + offsets[j]``, ``(X w + b) + offsets w`` in float64, and their error bound (n,)."""
        w = self.coef_
        logits = (X @ w + self.intercept_)[:, None] + (offsets @ w)[None, :]
        mag = np.abs(X) @ np.abs(w) + (np.abs(offsets) @ np.abs(w)).max(initial=0.0) + abs(self.intercept_)
        k = len(w) + 4
        u = np.finfo(np.float64).eps / 2
        return logits, 4.0 * k * u / (1 - k * u) * mag

    def affine_logits(
        self, H: np.ndarray, A: np.ndarray, a0: np.ndarray, h_err: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Logits ``H (A^T w) + (a0 . w + b)`` (m, s) in float64 and their error bound (m,) (see the base class)."""
        w = self.coef_
        logits = H @ (A.T @ w) + (a0 @ w + self.intercept_)
        wa = np.abs(A).T @ np.abs(w)  # (q,)
        mag = (np.abs(H).max(axis=1) + h_err) @ wa + np.abs(a0) @ np.abs(w) + abs(self.intercept_)
        k = len(w) + H.shape[2] + 8
        u = np.finfo(np.float64).eps / 2
        return logits, 4.0 * k * u / (1 - k * u) * mag + 2.0 * h_err @ wa

    def torch_module(self):
        """A float64 ``torch.nn.Linear`` computing the same logit, for gradient-based recourse."""
        from recourse_privacy.models.torch_utils import linear_module

        self._check_fitted()
        return linear_module(self.coef_, self.intercept_)


class TorchBackedClassifier(BaseClassifier):
    """A classifier whose fitted state is ``module_``, a torch module returning (n,) logits."""

    is_differentiable = True

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The network's favourable-class logit, float64."""
        from recourse_privacy.models.torch_utils import batched_logits

        X = self._check_X(X)  # first: an unfitted model has no module_ (NotFittedError, not AttributeError)
        return batched_logits(self.module_, X)

    def search_logits(self, X: np.ndarray) -> np.ndarray:
        """``decision_function`` without the checks, for a search's own candidates (the same values)."""
        from recourse_privacy.models.torch_utils import batched_logits

        self._check_fitted()
        return batched_logits(self.module_, X)

    def shifted_logits(self, X: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """For a ``Linear, ReLU, ..., Linear`` network, logits at every ``X[i] + offsets[j]`` and their error bound.

        See :func:`~recourse_privacy.models.torch_utils.shifted_chain_logits`; None for other networks.
        """
        from recourse_privacy.models.torch_utils import linear_chain, shifted_chain_logits

        self._check_fitted()
        layers = linear_chain(self.module_)
        return None if layers is None else shifted_chain_logits(layers, X, offsets)

    def affine_logits(
        self, H: np.ndarray, A: np.ndarray, a0: np.ndarray, h_err: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """For a ``Linear, ReLU, ..., Linear`` network, logits at every ``A @ H[i, j] + a0`` and their error bound.

        See :func:`~recourse_privacy.models.torch_utils.affine_chain_logits`; None for other networks.
        """
        from recourse_privacy.models.torch_utils import affine_chain_logits, linear_chain

        self._check_fitted()
        layers = linear_chain(self.module_)
        return None if layers is None else affine_chain_logits(layers, H, A, a0, h_err)

    def torch_module(self):
        """The fitted network as a module mapping (n, d) tensors to (n,) logits."""
        self._check_fitted()
        return self.module_


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _log_odds(model: Classifier, X: np.ndarray) -> np.ndarray:
    """The model's own log-odds of the favourable label (its decision logit where it has no cutoff of its own)."""
    fn = getattr(model, "log_odds", None)
    return fn(X) if callable(fn) else model.decision_function(X)


def per_example_loss(model: Classifier, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Binary cross-entropy of each example under ``model`` (Yeom et al.'s loss), computed stably from the
    model's own probability (not moved by a decision cutoff)."""
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    z = _log_odds(model, X)
    return np.logaddexp(0.0, np.where(y == 1, -z, z))


def logit_confidence(model: Classifier, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Carlini et al.'s logit-scaled confidence log(p_y / (1 - p_y)) of the true label, from the model's own
    probability."""
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    z = _log_odds(model, X)
    return np.where(y == 1, z, -z)


def accuracy(model: Classifier, X: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose predicted label equals ``y``."""
    return float(np.mean(model.predict(X) == np.asarray(y)))
