"""Wrap a user's own scikit-learn or PyTorch classifier into the model protocol."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.base import BaseClassifier, TorchBackedClassifier
from recourse_privacy.validation import check_matrix

_EPS = 1e-12


class SklearnModel(BaseClassifier):
    """Any scikit-learn binary classifier with ``predict_proba`` (class 1 = favourable).

    The logit is ``decision_function`` where the estimator has one, else the log-odds of
    ``predict_proba``. ``fit`` trains a fresh clone, so the wrapper also serves as the
    training algorithm of shadow models. A linear estimator (``coef_`` with one row) gets
    exact recourse and gradients.
    """

    def __init__(self, estimator, *, fitted: bool | None = None):
        self.estimator = estimator
        if fitted is None:
            fitted = hasattr(estimator, "classes_")
        if fitted:
            self._adopt(estimator)

    def _adopt(self, est) -> None:
        classes = list(getattr(est, "classes_", []))
        if classes != [0, 1]:
            raise InvalidInputError(f"the estimator's classes_ must be [0, 1] (1 = favourable); got {classes}")
        self.estimator_ = est
        self.n_features_in_ = int(est.n_features_in_)
        coef = getattr(est, "coef_", None)
        self.is_linear = (
            coef is not None and np.ndim(coef) == 2 and np.shape(coef)[0] == 1 and hasattr(est, "intercept_")
        )
        self.is_differentiable = self.is_linear
        if self.is_linear:
            self.coef_ = np.asarray(coef, dtype=np.float64).ravel()
            self.intercept_ = float(np.ravel(est.intercept_)[0])
        self.fitted_ = True

    def fit(self, X: np.ndarray, y: np.ndarray) -> SklearnModel:
        """Fit a clone of the wrapped estimator."""
        from sklearn.base import clone

        est = clone(self.estimator).fit(check_matrix(X), np.asarray(y))
        self._adopt(est)
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The favourable-class logit."""
        X = self._check_X(X)
        if self.is_linear:
            return X @ self.coef_ + self.intercept_
        p = np.clip(self.estimator_.predict_proba(X)[:, 1], _EPS, 1 - _EPS)
        return np.log(p) - np.log1p(-p)

    def torch_module(self):
        """A linear torch module (linear estimators only)."""
        if not self.is_linear:
            raise TypeError(
                f"{type(self.estimator).__name__} is not differentiable; wrap a linear model or use a torch model"
            )
        from recourse_privacy.models.torch_utils import linear_module

        return linear_module(self.coef_, self.intercept_)


class TorchModel(TorchBackedClassifier):
    """A user's trained ``torch.nn.Module`` that maps (n, d) inputs to (n,), (n, 1) or (n, 2) logits.

    ``train_fn(module_factory_output, X, y)`` is optional: pass ``module_factory`` and
    ``train_fn`` so that shadow models can be trained with the same algorithm. A factory that
    takes one argument is given the number of input features (the audit's encoded columns:
    numeric columns, then one indicator per category). With
    ``random_state``, :meth:`fit` seeds torch's global generator before building and training the module
    (the audit sets it for the owner's and every shadow model), holding
    :data:`~recourse_privacy.global_rng.GLOBAL_RNG_LOCK` until the training ends: fits in concurrent threads
    take turns, and each gives the numbers it gives alone.
    """

    def __init__(
        self,
        module=None,
        *,
        n_features: int | None = None,
        module_factory: Callable[[], object] | None = None,
        train_fn: Callable[[object, np.ndarray, np.ndarray], object] | None = None,
        random_state: int | None = None,
    ):
        self.module = module
        self.n_features = n_features
        self.module_factory = module_factory
        self.train_fn = train_fn
        self.random_state = random_state
        if module is not None:
            self._adopt(module, n_features)

    def _adopt(self, module, n_features) -> None:
        from recourse_privacy.models.torch_utils import logit_module

        if n_features is None:
            first = next((p for p in module.parameters() if p.ndim == 2), None)
            if first is None:
                raise InvalidInputError("n_features is required when the module has no 2-D weight to read it from")
            n_features = int(first.shape[1])
        self.module_ = logit_module(module)
        self.module_.requires_grad_(False)
        self.n_features_in_ = int(n_features)
        self.fitted_ = True

    def fit(self, X: np.ndarray, y: np.ndarray) -> TorchModel:
        """Train a fresh module from ``module_factory`` with ``train_fn``."""
        if self.module_factory is None or self.train_fn is None:
            raise TypeError("TorchModel.fit needs module_factory and train_fn (to train shadow models)")
        from recourse_privacy.global_rng import torch_global_seed

        X, y = check_matrix(X), np.asarray(y)
        # the factory and train_fn draw from torch's global generator: seeded, one fit at a time in this process
        with torch_global_seed(self.random_state) if self.random_state is not None else contextlib.nullcontext():
            module = self._build(X.shape[1])
            self.train_fn(module, X, y)
        self._adopt(module, X.shape[1])
        return self

    def _build(self, n_features: int):
        """A fresh module: ``module_factory(n_features)`` where the factory takes an argument, else ``module_factory()``."""
        import inspect

        try:
            takes = len(inspect.signature(self.module_factory).parameters) > 0
        except (TypeError, ValueError):  # a builtin or a class without a readable signature
            takes = False
        return self.module_factory(n_features) if takes else self.module_factory()

    def unfitted(self, random_state: int | None = None) -> TorchModel:
        """A fresh, unfitted copy with the same factory and training function (a shadow model's recipe)."""
        if self.module_factory is None or self.train_fn is None:
            raise InvalidInputError(
                "TorchModel needs module_factory and train_fn to train the owner's and the shadow models "
                "(TorchModel(module, module_factory=..., train_fn=...))"
            )
        return TorchModel(
            n_features=self.n_features,
            module_factory=self.module_factory,
            train_fn=self.train_fn,
            random_state=random_state,
        )

    def check_output(self, X: np.ndarray) -> None:
        """Run the module (or a fresh one from the factory) on two rows of ``X``; raise unless it gives
        (n,), (n, 1) or (n, 2) logits for (n, d) inputs."""
        import torch

        X = check_matrix(X)[:2]
        module = self.module if self.module is not None else self._build(X.shape[1])
        dtype = next((p.dtype for p in module.parameters()), torch.float32)
        try:
            with torch.no_grad():
                out = module(torch.as_tensor(X, dtype=dtype))
        except Exception as err:  # noqa: BLE001 - a shape mismatch inside the user's network
            raise InvalidInputError(
                f"the torch module {type(module).__name__} fails on inputs of shape (n, {X.shape[1]}) (the "
                f"encoded features): {type(err).__name__}: {err}"
            ) from None
        shape = tuple(getattr(out, "shape", ()))
        n = len(X)
        if shape not in ((n,), (n, 1), (n, 2)):
            raise InvalidInputError(
                f"the torch module {type(module).__name__} returns shape {shape} for {n} rows; expected "
                f"({n},), ({n}, 1) or ({n}, 2) logits (favourable class last)"
            )
