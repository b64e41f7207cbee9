"""Logistic regression (scikit-learn) behind the model protocol, with exact-recourse access."""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Bool, Float, Int
from recourse_privacy.models.base import LinearClassifier
from recourse_privacy.validation import check_binary_labels, check_matrix


class LogisticModel(LinearClassifier):
    """L2-regularised logistic regression (scikit-learn's lbfgs); linear and differentiable.

    ``C`` is scikit-learn's inverse regularisation strength (its default 1.0: Pawelczyk et al. 2023 name
    no value). ``random_state`` is accepted for a uniform interface; lbfgs is deterministic.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {"C": Float(0, 1e12, low_open=True), "max_iter": Int(1, 10**7), "fit_intercept": Bool()}

    def __init__(self, *, C: float = 1.0, max_iter: int = 1000, fit_intercept: bool = True, random_state=None):
        self.C = C
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray) -> LogisticModel:
        """Fit on rows ``X`` with 0/1 labels ``y``."""
        X = check_matrix(X)
        y = check_binary_labels(y, n=X.shape[0])
        if np.unique(y).size < 2:
            raise InvalidInputError("y holds only one class; logistic regression needs both 0 and 1")
        from sklearn.linear_model import LogisticRegression  # heavy: imported when a model is fitted

        est = LogisticRegression(C=self.C, max_iter=self.max_iter, fit_intercept=self.fit_intercept)
        est.fit(X, y)
        self.coef_ = est.coef_.ravel().astype(np.float64)
        self.intercept_ = float(est.intercept_[0]) if self.fit_intercept else 0.0
        self.n_features_in_ = X.shape[1]
        self.fitted_ = True
        return self
