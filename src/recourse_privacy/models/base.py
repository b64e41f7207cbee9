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

    def torch_module(self):
        """The fitted network as a module mapping (n, d) tensors to (n,) logits."""
        self._check_fitted()
        return self.module_


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def per_example_loss(model: Classifier, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Binary cross-entropy of each example under ``model`` (Yeom et al.'s loss), computed stably."""
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    z = model.decision_function(X)
    return np.logaddexp(0.0, np.where(y == 1, -z, z))


def logit_confidence(model: Classifier, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Carlini et al.'s logit-scaled confidence log(p_y / (1 - p_y)) of the true label."""
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0])
    z = model.decision_function(X)
    return np.where(y == 1, z, -z)


def accuracy(model: Classifier, X: np.ndarray, y: np.ndarray) -> float:
    """Share of rows whose predicted label equals ``y``."""
    return float(np.mean(model.predict(X) == np.asarray(y)))
