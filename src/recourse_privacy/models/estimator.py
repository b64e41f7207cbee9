"""A user's scikit-learn estimator that consumes raw columns, seen as a model on the audit's encoded space.

The audit searches for recourse and measures distances in the
:class:`~recourse_privacy.data.Preprocessor`'s encoded space (one-hot and scaling fitted on the
members), so that distances are comparable with the built-in models. A user's estimator (a
``Pipeline`` with a ``ColumnTransformer`` selecting columns by name, say) reads the original
columns instead. :class:`EstimatorModel` bridges the two: every encoded point is decoded with
``Preprocessor.inverse_transform`` into a frame of the columns the estimator was fitted on, and
the favourable-class logit is read from its ``predict_proba``.

Linearity is decided numerically: where the estimator's logit is affine in the encoded space on a
seeded probe of valid encoded points (``StandardScaler`` + ``LogisticRegression``, or one-hot +
scaling + ``LogisticRegression``), the model exposes ``coef_`` / ``intercept_`` and a torch module,
and exact recourse and gradient methods apply. A PyTorch network inside the estimator (skorch's
``NeuralNetClassifier``, the last step of a pipeline) is scored on whole batches, and gets gradients
where the steps before it are affine in the encoded space
(:mod:`recourse_privacy.models.network_estimators`).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd

from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models.base import BaseClassifier, _sigmoid
from recourse_privacy.models.decision_threshold import check_decisions, check_rows, resolve_threshold
from recourse_privacy.models.distinct import on_distinct_rows
from recourse_privacy.validation import as_generator, same_label

__all__ = ["EstimatorModel", "check_estimator", "estimator_labels", "seeded_clone"]

_EPS = 1e-12
#: the logit is accepted as affine when the least-squares fit's largest residual is below this,
#: relative to max(1, largest |logit|)
LINEAR_RTOL = 1e-8
_PROBE_ROWS = 200  # probe points beyond the d + 1 the fit needs


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def check_estimator(estimator: object, name: str = "model") -> None:
    """Raise unless ``estimator`` looks like a scikit-learn classifier with ``fit`` and ``predict_proba``."""
    missing = [m for m in ("fit", "predict_proba", "get_params") if not callable(getattr(estimator, m, None))]
    if missing:
        raise InvalidInputError(
            f"{name} {type(estimator).__name__} lacks {', '.join(missing)}: the audit needs a scikit-learn "
            "classifier (or Pipeline) with fit and predict_proba, a TorchModel or a registered model name"
        )


def estimator_labels(estimator: object, positive_label: Any, name: str = "model") -> tuple[Any, Any]:
    """(favourable, unfavourable) label values of a fitted binary estimator, checked against ``classes_``."""
    classes = [_plain(c) for c in getattr(estimator, "classes_", [])]
    if len(classes) != 2:
        raise InvalidInputError(
            f"{name} {type(estimator).__name__} has classes_ {classes}: the audit needs a binary classifier "
            "(exactly two classes)"
        )
    if positive_label is None:
        if set(classes) == {0, 1}:
            return 1, 0
        raise InvalidInputError(
            f"{name} {type(estimator).__name__} predicts {classes[0]!r} and {classes[1]!r}: pass "
            f"positive_label=... (--positive-label), the favourable one"
        )
    match = [c for c in classes if same_label(c, positive_label)]
    if len(match) != 1:
        raise InvalidInputError(
            f"positive_label={positive_label!r} is not one of {name} {type(estimator).__name__}'s classes_ {classes}: "
            "the model must have been fitted on the target column's own values (its classes_ are the labels it saw); "
            "refit it on the column as it is, or recode the column to the model's labels and name the favourable one"
        )
    return match[0], classes[1 - classes.index(match[0])]


def seeded_clone(estimator: object, seed: int | None) -> object:
    """An unfitted clone of ``estimator``; every ``random_state`` left at None is set to ``seed``.

    A ``random_state`` the user fixed is kept (the model is trained exactly by the user's recipe).
    """
    from sklearn.base import clone

    try:
        est = clone(estimator)
    except Exception as err:  # noqa: BLE001 - scikit-learn raises TypeError or RuntimeError
        raise InvalidInputError(
            f"model {type(estimator).__name__} cannot be cloned ({err}); the audit trains fresh copies of it "
            "(sklearn.base.clone) for the owner and every shadow model"
        ) from None
    if seed is not None:
        free = {k: seed for k, v in est.get_params(deep=True).items() if k.endswith("random_state") and v is None}
        if free:
            est.set_params(**free)
    return est


class EstimatorModel(BaseClassifier):
    """A user's raw-column scikit-learn classifier as a favourable-class logit on encoded points.

    ``preprocessor`` is the audit's fitted :class:`~recourse_privacy.data.Preprocessor`
    (``corr_threshold=None``, so that every column decodes); ``labels`` the (favourable,
    unfavourable) label values as the estimator knows them (:func:`estimator_labels`: the
    favourable one is 1 in the audit); ``feature_names`` the data's column order, used when the
    estimator was fitted on a numpy array (no ``feature_names_in_``). ``fit(X_enc, y01)``
    trains a seeded clone on the decoded frame with the original label values, so shadow
    models are trained as the owner's model was. Pass ``estimator_`` (a fitted instance) to
    adopt it unchanged.

    ``threshold``: the probability of the favourable label from which the model says favourable
    (None: the one the estimator states, :mod:`~recourse_privacy.models.decision_threshold`, else one
    half). ``decision_function`` is the log-odds minus the cutoff's (``decision_offset_``), so that
    every recourse method's "logit >= 0" is the model's own decision; ``predict_proba`` follows it
    (0.5 at the cutoff), and :meth:`log_odds`, the losses and the confidences read the estimator's
    own probability.
    """

    def __init__(
        self,
        estimator: object,
        preprocessor: object,
        *,
        labels: tuple[Any, Any] = (1, 0),
        feature_names: tuple[str, ...] | None = None,
        random_state: int | None = None,
        estimator_: object | None = None,
        threshold: float | None = None,
    ):
        check_estimator(estimator)
        self.estimator = estimator
        self.threshold = threshold
        self.preprocessor = preprocessor
        self.labels = tuple(labels)
        self.feature_names = tuple(feature_names) if feature_names is not None else None
        self.random_state = random_state
        if estimator_ is not None:
            self._adopt(estimator_)

    # ------------------------------------------------------------------ decoding
    def decode(self, X: np.ndarray) -> pd.DataFrame | np.ndarray:
        """Encoded rows as the estimator's input: a frame of its ``feature_names_in_`` (numpy in data order for one
        fitted on an array; a frame of the data's columns for an unfitted recipe)."""
        frame = self.preprocessor.inverse_transform(np.asarray(X, dtype=np.float64))
        est = getattr(self, "estimator_", self.estimator)
        names = getattr(est, "feature_names_in_", None)
        if names is None:
            order = list(self.feature_names) if self.feature_names is not None else list(frame.columns)
            if not hasattr(est, "classes_"):  # an unfitted recipe: the data's columns by name (a ColumnTransformer
                return frame[order]  # selects by them), so the fitted clone records them as feature_names_in_
            return frame[order].to_numpy()
        return frame[[str(c) for c in names]]

    # ------------------------------------------------------------------ fitting
    def fit(self, X: np.ndarray, y: np.ndarray) -> EstimatorModel:
        """Fit a seeded clone of the estimator on the decoded rows, with the original label values."""
        y = np.asarray(y)
        fav, unfav = self.labels
        labels = np.where(y == 1, np.asarray(fav, dtype=object), np.asarray(unfav, dtype=object))
        labels = pd.Series(labels).infer_objects().to_numpy()
        est = seeded_clone(self.estimator, self.random_state)
        self.__dict__.pop("fit_key_", None)  # a cached training's key (models/cached.py) no longer describes it
        try:
            with self._torch_seeded(est):
                est.fit(self.decode(X), labels)
        except Exception as err:  # noqa: BLE001 - whatever the user's estimator raises, say which
            raise InvalidInputError(
                f"model {type(self.estimator).__name__} could not be refit on the audit's data: "
                f"{type(err).__name__}: {err}"
            ) from None
        self._adopt(est, X)
        return self

    def _adopt(self, est: object, X_probe: np.ndarray | None = None) -> None:
        classes = [_plain(c) for c in getattr(est, "classes_", [])]
        if len(classes) != 2 or self.labels[0] not in classes:
            raise InvalidInputError(
                f"model {type(est).__name__} has classes_ {classes}; expected the two labels {list(self.labels)}"
            )
        self.threshold_ = resolve_threshold(est, self.labels[0], self.threshold)
        self.decision_offset_ = self.threshold_.offset
        self.estimator_ = est
        self.pos_index_ = classes.index(self.labels[0])
        self.n_features_in_ = int(self.preprocessor.n_features_out_)
        self.fitted_ = True
        self.is_linear = self.is_differentiable = False
        self.network_ = self._find_network(est)
        self.network_checked_ = False  # the batched scoring is checked against predict_proba on first use
        self.network_map_ = self.network_logit_ = None
        if X_probe is not None:
            self.probe_linearity(X_probe)
            self.check_decisions(X_probe)

    def check_decisions(self, X: np.ndarray) -> None:
        """Raise unless the estimator's own ``predict`` agrees with this model's decisions on the first rows of
        ``X`` (:func:`~recourse_privacy.models.decision_threshold.check_decisions`): a cutoff the audit was
        not told of is found here, not after the reference models."""
        X = np.asarray(X, dtype=np.float64)[: check_rows(len(X))]
        p = _sigmoid(self.log_odds(X))
        check_decisions(
            self.estimator_,
            self.decode(X),
            p,
            self.labels[0],
            self.threshold_,
            f"model {type(self.estimator_).__name__}",
        )

    # ------------------------------------------------------------------ the logit
    def _raw_logit(self, X: np.ndarray) -> np.ndarray:
        """The log-odds of ``predict_proba``, decoded and computed once per distinct row (a search repeats rows)."""
        return on_distinct_rows(self._logit_of_rows, np.asarray(X))

    def _torch_seeded(self, est: object):
        """A skorch net draws its initial weights and batches from torch's global generator: seeded with
        ``random_state`` (one such fit at a time in this process, as :class:`~recourse_privacy.models.TorchModel`'s)."""
        import contextlib

        if self.random_state is None or "skorch" not in sys.modules:
            return contextlib.nullcontext()
        from recourse_privacy.global_rng import torch_global_seed
        from recourse_privacy.models.network_estimators import holds_network

        return torch_global_seed(self.random_state) if holds_network(est) else contextlib.nullcontext()

    @staticmethod
    def _find_network(est: object):
        if "skorch" not in sys.modules:  # a skorch net exists only where skorch was imported
            return None
        from recourse_privacy.models.network_estimators import find_network

        return find_network(est)

    def _proba(self, rows) -> np.ndarray:
        """``predict_proba`` of the estimator: a network inside it run on whole batches once that is checked."""
        if self.network_ is not None and not self.network_checked_:
            if not self.network_.matches(self.estimator_, rows[:64]):
                self.network_ = None  # a net the batches do not reproduce keeps its own predict_proba
            self.network_checked_ = True
        if self.network_ is not None:
            return self.network_.proba(rows)
        return self.estimator_.predict_proba(rows)

    def _logit_of_rows(self, X: np.ndarray) -> np.ndarray:
        p = self._proba(self.decode(X))
        p = np.clip(np.asarray(p, dtype=np.float64)[:, self.pos_index_], _EPS, 1 - _EPS)
        return np.log(p) - np.log1p(-p)

    def _score(self, X: np.ndarray) -> np.ndarray | None:
        """The estimator's decision_function as the favourable logit, where it is one (checked by the caller)."""
        fn = getattr(self.estimator_, "decision_function", None)
        if fn is None:
            return None
        try:
            s = np.asarray(fn(self.decode(X)), dtype=np.float64)
        except Exception:  # noqa: BLE001 - a pipeline whose last step lacks it raises AttributeError
            return None
        if s.ndim != 1:
            return None
        return s if self.pos_index_ == 1 else -s

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """The favourable-class decision logit: w.x + b on the linear fast path, the composed network where one
        has gradients, else the log-odds of ``predict_proba``; less the cutoff's log-odds (``decision_offset_``)."""
        X = self._check_X(X)
        if self.is_linear:
            return X @ self.coef_ + self.intercept_  # the cutoff is in intercept_
        if self.network_logit_ is not None:
            return self._network_logit(X)  # and in the composed module's offset
        return self._raw_logit(X) - self.decision_offset_

    def _network_logit(self, X: np.ndarray) -> np.ndarray:
        """The composed network's logit (:meth:`probe_network`): the estimator's own at every valid encoded
        point, and off them (a one-hot group between two levels, as a gradient search visits) its affine
        extension, as the linear fast path and the built-in networks read such points."""
        from recourse_privacy.models.network_estimators import CHUNK_ROWS
        from recourse_privacy.models.torch_utils import batched_logits

        return batched_logits(self.network_logit_, X, CHUNK_ROWS)

    def probe_linearity(self, X: np.ndarray, n_probe: int = _PROBE_ROWS) -> bool:
        """Decide whether the logit is affine in the encoded space; set ``coef_``/``intercept_`` if so.

        Probe points: a seeded sample of the rows ``X`` (valid encoded points) and as many with
        their non-one-hot coordinates redrawn from N(0, 2^2), so that a model linear only on the
        training rows is not taken for linear. ``w, b`` are fitted by least squares to the
        estimator's ``decision_function`` (which must agree with ``predict_proba``'s log-odds);
        the model is linear when the largest residual is below ``LINEAR_RTOL`` x max(1, max |logit|).
        """
        X = np.asarray(X, dtype=np.float64)
        self.is_linear = self.is_differentiable = False
        d = X.shape[1]
        rng = as_generator(0 if self.random_state is None else self.random_state)
        rows = X[rng.choice(len(X), size=min(len(X), d + 1 + n_probe), replace=False)]
        numeric = ~np.isin(np.asarray(self.preprocessor.feature_sources_), list(self.preprocessor.categorical_))
        moved = rows.copy()
        moved[:, numeric] = rng.normal(0.0, 2.0, size=(len(rows), int(numeric.sum())))
        P = np.vstack([rows, moved])
        if len(P) < 2 * (d + 1):
            return False
        z = self._score(P)
        if z is None:
            return self.probe_network(X, rng)
        p = np.asarray(self.estimator_.predict_proba(self.decode(P)), dtype=np.float64)[:, self.pos_index_]
        if not np.allclose(_sigmoid(z), p, rtol=0, atol=1e-9):
            return False  # decision_function is not the logit of predict_proba (an SVM's margin, say)
        A = np.column_stack([P, np.ones(len(P))])
        sol, *_ = np.linalg.lstsq(A, z, rcond=None)
        if np.max(np.abs(A @ sol - z)) > LINEAR_RTOL * max(1.0, float(np.max(np.abs(z)))):
            return self.probe_network(X, rng)
        self.coef_, self.intercept_ = sol[:-1].astype(np.float64), float(sol[-1]) - self.decision_offset_
        self.is_linear = self.is_differentiable = True
        return True

    def probe_network(self, X: np.ndarray, rng: np.random.Generator | int = 0) -> bool:
        """Give a network inside the estimator gradients where the steps before it are affine; return whether.

        Probe points: rows of ``X`` and as many with their numeric coordinates redrawn from N(0, 2^2)
        and row ``i`` of them in category ``i mod k`` of every one-hot group of ``k`` (every category
        is probed). The map is fitted and checked by
        :func:`~recourse_privacy.models.network_estimators.affine_map`; the composed module's logits must then
        give the estimator's own probabilities on the probe (within 1e-5: a float32 net's logits far from 0 are not
        resolved by its probabilities) or the model stays black-box.
        """
        self.network_map_ = self.network_logit_ = None
        if self.network_ is None:
            return False
        from recourse_privacy.models.network_estimators import NetworkLogit, affine_map

        X = np.asarray(X, dtype=np.float64)
        rng = as_generator(rng)
        rows = X[rng.choice(len(X), size=min(len(X), X.shape[1] + 1 + _PROBE_ROWS), replace=False)]
        sources = np.asarray(self.preprocessor.feature_sources_)
        categorical = np.isin(sources, list(self.preprocessor.categorical_))
        moved = rows.copy()
        moved[:, ~categorical] = rng.normal(0.0, 2.0, size=(len(rows), int((~categorical).sum())))
        at = np.arange(len(moved))
        for group in self.preprocessor.groups_:  # row i in level i mod k (the all-off level last, where valid)
            level = at % (len(group.index) + int(group.allow_none))
            moved[:, group.index] = group.off
            on = level < len(group.index)
            moved[at[on], group.index[level[on]]] = group.on[level[on]]
        P = np.vstack([rows, moved])
        if len(P) < 2 * (X.shape[1] + 1):  # too few points to pin an affine map down (any fit would be exact)
            return False
        found = affine_map(self.network_, self.decode, P)
        if found is None:
            return False
        import torch

        try:
            module = NetworkLogit(self.network_, found[0], found[1], self.pos_index_, self.decision_offset_)
            with torch.no_grad():
                z = module(torch.as_tensor(P)).double().numpy() + self.decision_offset_
        except Exception:  # noqa: BLE001 - a module the composition cannot run (its own input types): black-box
            return False
        p = np.asarray(self._proba(self.decode(P)), dtype=np.float64)[:, self.pos_index_]
        if not np.allclose(_sigmoid(z), p, rtol=0, atol=1e-5):  # probabilities: float32's
            return False
        self.network_map_, self.network_logit_ = found, module
        self.is_differentiable = True
        return True

    def use_network_map(self, A: np.ndarray, b: np.ndarray) -> None:
        """Adopt an affine map into the network found by :meth:`probe_network` (a cached model read back)."""
        if self.network_ is None:
            return
        from recourse_privacy.models.network_estimators import NetworkLogit

        self.network_map_ = (A, b)
        self.network_logit_ = NetworkLogit(self.network_, A, b, self.pos_index_, self.decision_offset_)
        self.is_differentiable = True

    def torch_module(self):
        """A linear torch module on the linear fast path, the composed network where one was found
        differentiable (:meth:`probe_network`); other estimators give no gradients."""
        if not self.is_linear and self.network_logit_ is not None:
            return self.network_logit_
        if not self.is_linear:
            raise IncompatibleError(
                f"{type(self.estimator).__name__} is not linear in the encoded space: no gradients; use a "
                "black-box recourse method (gs, face, dice) or a TorchModel"
            )
        from recourse_privacy.models.torch_utils import linear_module

        return linear_module(self.coef_, self.intercept_)
