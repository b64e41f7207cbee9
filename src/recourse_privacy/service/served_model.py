"""The model a bundle decides with: a linear one in the schema's model space, or a user's own classifier as it is.

:class:`LinearModel` is what ``model.npz`` holds (a DP logistic regression, or a user's model whose logit is
affine in the schema's model space, exported exactly as its weights). :class:`ServedEstimator` is a user's
fitted classifier of any kind (gradient-boosted trees, a network, a pipeline that imputes), kept as the
``model.skops`` file it was published from: it reads applicants in the data's own columns, and a point of the
model space (a PrivRecourse node, Pentyala et al. 2023) after :meth:`~recourse_privacy.service.schema.Schema.decode`
reads it back to those columns. Both decide "favourable" where their decision logit (log-odds less the
cutoff's log-odds) is above 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from recourse_privacy.models.decision_threshold import DecisionThreshold
from recourse_privacy.service.schema import Applicants, Schema
from recourse_privacy.validation import same_label

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["LinearModel", "ServedEstimator", "data_frame", "log_odds"]

#: probabilities are clipped this far from 0 and 1 before their log-odds
_EPS = 1e-15


def log_odds(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p)), the probabilities clipped :data:`_EPS` from 0 and 1 (a model certain of a row stays finite)."""
    p = np.clip(np.asarray(p, np.float64), _EPS, 1 - _EPS)
    return np.log(p) - np.log1p(-p)


class LinearModel:
    """logit = Z @ coef + intercept in the schema's model space (label 1: favourable)."""

    kind = "logistic"

    def __init__(self, coef, intercept):
        self.coef_ = np.asarray(coef, np.float64)
        self.intercept_ = float(intercept)

    def logit(self, Z: np.ndarray) -> np.ndarray:
        return Z @ self.coef_ + self.intercept_

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return (self.logit(Z) >= 0).astype(np.int64)

    def predict_proba(self, Z: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-self.logit(Z)))
        return np.column_stack([1 - p, p])

    def decide(self, a: Applicants, Z: np.ndarray) -> np.ndarray:
        """Whether each applicant ``a`` (model space ``Z``) is accepted."""
        return self.predict(Z) == 1


def data_frame(schema: Schema, a: Applicants, columns: Sequence[str], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """Applicants as the data's own DataFrame: ``columns`` in their order, each with the data's dtype where its values
    allow it (a categorical column stored as numbers back to numbers; a gap as NaN, not None). Built from the
    batch's arrays in one construction (a served classifier reads one such frame per model call)."""
    import pandas as pd
    from pandas.api.types import is_float_dtype, is_integer_dtype, is_numeric_dtype, pandas_dtype

    c = schema._cols
    data: dict = {}
    for k, j in enumerate(c.num_pos):
        name, col = schema.features[j].name, a.num[:, k]
        dtype = pandas_dtype(dtypes[name])
        if is_float_dtype(dtype) or (is_integer_dtype(dtype) and not np.isnan(col).any()):
            col = col.astype(dtype)
        data[name] = col
    for k, j in enumerate(c.cat_pos):
        f = schema.features[j]
        dtype = pandas_dtype(dtypes[f.name])
        names = c.cat_names[k]  # the categories (text), then None for a gap where the feature may be missing
        if is_numeric_dtype(dtype):  # numbers: back to the data's type
            levels = np.array([np.nan if v is None else float(v) for v in names])
            col = levels[a.cat[:, k]]
            if not np.isnan(col).any():
                col = col.astype(dtype)
        else:
            col = np.where(names == None, np.nan, names)[a.cat[:, k]]  # noqa: E711 - elementwise
        data[f.name] = pd.Categorical(col, categories=dtype.categories) if str(dtype) == "category" else col
    return pd.DataFrame(data, columns=list(columns))


class ServedEstimator:
    """A user's fitted classifier on the data's columns, served as it is (no linear export): applicants in
    original units are read directly (:meth:`decide`), model-space points decoded first (:meth:`logit`).

    ``favourable``: the label the lender approves; ``threshold``: the probability of it from which the
    lender approves (the cutoff the model states or the one given at publish); ``ties_favourable``: whether a
    probability exactly at it is approved (the model's own rule, :class:`~recourse_privacy.models.
    decision_threshold.DecisionThreshold`; False in bundles written before it was recorded, as they decided)."""

    kind = "estimator"

    def __init__(
        self, estimator: Any, schema: Schema, columns: Sequence[str], dtypes: Mapping[str, str], favourable: Any,
        threshold: float, ties_favourable: bool = False,
    ):  # fmt: skip
        self.estimator_ = estimator
        self.schema = schema
        self.columns = tuple(columns)
        self.dtypes = dict(dtypes)
        classes = [c.item() if hasattr(c, "item") else c for c in estimator.classes_]
        self.pos_index_ = next(i for i, c in enumerate(classes) if same_label(c, favourable))  # as publish read it
        self.favourable = classes[self.pos_index_]  # the label as the model holds it (a plain Python value)
        self.threshold = float(threshold)
        self.ties_favourable = bool(ties_favourable)
        self.offset_ = DecisionThreshold(self.threshold, "", ties_favourable=self.ties_favourable).offset

    def frame(self, a: Applicants) -> pd.DataFrame:
        """The applicants as the model reads them (:func:`data_frame`)."""
        return data_frame(self.schema, a, self.columns, self.dtypes)

    def applicant_logit(self, a: Applicants) -> np.ndarray:
        """The decision logit of applicants in original units: log-odds of the favourable label less the cutoff's."""
        if not len(a):
            return np.empty(0)
        p = np.asarray(self.estimator_.predict_proba(self.frame(a)), np.float64)[:, self.pos_index_]
        return log_odds(p) - self.offset_

    def logit(self, Z: np.ndarray) -> np.ndarray:
        """The decision logit at model-space points, read back to the data's columns first."""
        return self.applicant_logit(self.schema.decode(Z))

    def predict(self, Z: np.ndarray) -> np.ndarray:
        return (self.logit(Z) >= 0).astype(np.int64)

    def predict_proba(self, Z: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-(self.logit(Z) + self.offset_)))
        return np.column_stack([1 - p, p])

    def decide(self, a: Applicants, Z: np.ndarray) -> np.ndarray:
        """Whether each applicant ``a`` is accepted, read in original units (``Z`` is not needed)."""
        return self.applicant_logit(a) >= 0
