"""Gradient-boosted trees, the models lenders deploy: XGBoost and LightGBM behind the model protocol.

Both are their libraries' scikit-learn classes, seeded and single-threaded by default (the
audit trains shadow models in parallel processes; one thread each keeps them from fighting over
the cores). The logit is the booster's raw margin (``output_margin`` / ``raw_score``), exact
rather than the log-odds of clipped probabilities, computed on the whole batch in one call.
Trees are not differentiable: gradient recourse (SCFE, CADEX) refuses them and the black-box
methods (Growing Spheres, C-CHVAE, REVISE, FACE, DiCE-style) apply.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Float, Int
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.models.distinct import on_distinct_rows
from recourse_privacy.validation import check_binary_labels, check_matrix

__all__ = ["LightGBMModel", "XGBoostModel"]

_TREE_PARAMS = {
    "n_estimators": Int(1, 100_000),
    "max_depth": Int(-1, 1_000),
    "learning_rate": Float(0, 10, low_open=True),
    "subsample": Float(0, 1, low_open=True),
    "n_jobs": Int(1, 4096),
}


class _BoostedTrees(BaseClassifier):
    """Shared fit/predict of the boosted-tree wrappers; subclasses name the estimator and its raw margin."""

    PARAMS = _TREE_PARAMS

    def __init__(
        self,
        *,
        n_estimators: int = 200,
        max_depth: int = 4,
        learning_rate: float = 0.1,
        subsample: float = 1.0,
        n_jobs: int = 1,
        random_state=None,
    ):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _estimator(self, seed: int):  # pragma: no cover - abstract
        raise NotImplementedError

    def _margin(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit(self, X: np.ndarray, y: np.ndarray) -> _BoostedTrees:
        """Fit on rows ``X`` with 0/1 labels ``y`` (seeded by ``random_state``)."""
        X = check_matrix(X)
        y = check_binary_labels(y, n=X.shape[0])
        if np.unique(y).size < 2:
            raise InvalidInputError(f"y holds only one class; {type(self).__name__} needs both 0 and 1")
        seed = 0 if self.random_state is None else int(self.random_state) % 2**31
        self.estimator_ = self._estimator(seed).fit(X, y)
        self.n_features_in_ = X.shape[1]
        self.fitted_ = True
        return self

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The favourable-class logit: the booster's raw margin, float64, computed once per distinct row."""
        X = self._check_X(X)
        if not len(X):
            return np.zeros(0)
        return on_distinct_rows(lambda R: np.asarray(self._margin(R), dtype=np.float64).reshape(len(R)), X)


class XGBoostModel(_BoostedTrees):
    """``xgboost.XGBClassifier`` (histogram trees, logistic loss); the logit is its ``output_margin``."""

    def _estimator(self, seed: int):
        from xgboost import XGBClassifier  # heavy: imported when a model is fitted

        return XGBClassifier(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth if self.max_depth > 0 else 0,
            learning_rate=self.learning_rate,
            subsample=self.subsample,
            n_jobs=self.n_jobs,
            random_state=seed,
            tree_method="hist",
            objective="binary:logistic",
        )

    def _margin(self, X: np.ndarray) -> np.ndarray:
        return self.estimator_.predict(X, output_margin=True)


class LightGBMModel(_BoostedTrees):
    """``lightgbm.LGBMClassifier`` (leaf-wise trees, logistic loss); the logit is its ``raw_score``."""

    def _estimator(self, seed: int):
        from lightgbm import LGBMClassifier  # heavy: imported when a model is fitted

        return LGBMClassifier(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            subsample=self.subsample,
            subsample_freq=1 if self.subsample < 1 else 0,
            n_jobs=self.n_jobs,
            random_state=seed,
            deterministic=True,
            force_row_wise=True,
            verbose=-1,
        )

    def _margin(self, X: np.ndarray) -> np.ndarray:
        return self.estimator_.predict(X, raw_score=True)
