"""Turn a raw feature frame into the float matrix the models and recourse methods use.

Steps, all fitted on the model owner's training data only (never on non-members or the
adversary's pool, which would leak their statistics into the model's input space):

1. one-hot encode the categorical columns (``OneHotEncoder(handle_unknown="ignore")``;
   two-level columns keep one indicator when ``drop_first_binary``),
2. scale every column, numeric and one-hot alike (standard, min-max or none),
3. drop each feature whose absolute Pearson correlation with an earlier kept feature exceeds
   ``corr_threshold``, and every constant feature,
4. optionally divide each row by its L2 norm.

The fitted object records, per output feature, the raw column it came from, whether that
column is immutable or may only increase, and the bounds seen in the fit data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.errors import InvalidInputError, NotFittedError

__all__ = ["Preprocessor"]

_SCALINGS = ("standard", "minmax", "none")
_CORR_BLOCK = 512  # features whose correlations are computed at a time


def _one_hot_name(feature: str, category: object) -> str:
    """Output name of a one-hot column: ``column=level``."""
    return f"{feature}={category}"


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


class Preprocessor:
    """One-hot, scale, de-correlate and optionally row-normalise a raw feature frame.

    scikit-learn style: hyperparameters are stored unchanged, learned state ends in ``_``.
    Fit it on the model owner's training rows only. After :meth:`fit`:

    - ``feature_names_out_`` (list of str; one-hot columns are named ``column=level``),
      ``n_features_out_``, ``feature_sources_`` (raw column of each output feature);
    - ``dropped_correlated_``: output features removed by the correlation filter, constant
      features included (also listed in ``dropped_constant_``); with
      ``corr_threshold=None`` nothing is dropped, constants included;
    - ``immutable_mask_`` / ``increasing_mask_``: bool arrays over the output features,
      True where the feature derives from an immutable / only-increasing raw column (both
      scalers are increasing maps, so "only increase" carries over unless rows are
      normalised);
    - ``lower_`` / ``upper_``: per output feature, the min and max of the fit data after
      scaling; for one-hot features the scaled images of 0 and 1. With
      ``normalize_rows=True`` they are the min and max of the final (normalised) fit output.
    """

    def __init__(
        self,
        *,
        scaling: Literal["standard", "minmax", "none"] = "standard",
        corr_threshold: float | None = 0.95,
        normalize_rows: bool = False,
        drop_first_binary: bool = True,
    ) -> None:
        self.scaling = scaling
        self.corr_threshold = corr_threshold
        self.normalize_rows = normalize_rows
        self.drop_first_binary = drop_first_binary

    # ------------------------------------------------------------------ input checks
    @staticmethod
    def _as_frame(X: pd.DataFrame | np.ndarray) -> pd.DataFrame:
        if isinstance(X, pd.DataFrame):
            return X
        arr = np.asarray(X)
        if arr.ndim != 2:
            raise InvalidInputError(f"X must be 2-dimensional, got shape {arr.shape}")
        return pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])

    @staticmethod
    def _check_missing(X: pd.DataFrame, columns: Sequence[str]) -> None:
        counts = X[list(columns)].isna().sum()
        bad = counts[counts > 0]
        if len(bad):
            detail = ", ".join(f"{c!r} ({n} rows)" for c, n in bad.items())
            raise InvalidInputError(f"X has missing values (NaN) in columns {detail}")

    def _prepare(self, X: pd.DataFrame) -> pd.DataFrame:
        """Select the fitted columns in order: numeric as float64, categorical as str objects."""
        missing = [c for c in self.feature_names_in_ if c not in X.columns]
        if missing:
            raise InvalidInputError(
                f"X lacks the columns {missing} seen at fit time (expected {list(self.feature_names_in_)})"
            )
        self._check_missing(X, self.feature_names_in_)
        out = {}
        for col in self.numeric_:
            s = X[col]
            if not _is_numeric(s):
                raise InvalidInputError(f"column {col!r} was numeric at fit time but has dtype {s.dtype} now")
            values = s.to_numpy(dtype=np.float64)
            if not np.isfinite(values).all():
                raise InvalidInputError(f"column {col!r} has infinite values")
            out[col] = values
        for col in self.categorical_:
            out[col] = X[col].astype(str).to_numpy(dtype=object)
        return pd.DataFrame(out, columns=[*self.numeric_, *self.categorical_])

    # ------------------------------------------------------------------ fit / transform
    def fit(self, X: pd.DataFrame, dataset: Dataset | None = None) -> Preprocessor:
        """Learn the encoding, scaling and feature selection from ``X`` (owner's data only).

        ``dataset`` supplies the categorical / immutable / increasing column names; columns of
        non-numeric dtype are treated as categorical whether listed or not.
        """
        if self.scaling not in _SCALINGS:
            raise InvalidInputError(f"scaling must be one of {_SCALINGS}, got {self.scaling!r}")
        if self.corr_threshold is not None and not 0.0 < self.corr_threshold <= 1.0:
            raise InvalidInputError(f"corr_threshold must be in (0, 1] or None, got {self.corr_threshold}")
        # scikit-learn is imported here, not at module level, to keep package import fast
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

        X = self._as_frame(X)
        if len(X) == 0:
            raise InvalidInputError("cannot fit a Preprocessor on an empty frame")
        columns = [str(c) for c in X.columns]
        if len(set(columns)) != len(columns):
            raise InvalidInputError("X has duplicate column names")
        X = X.set_axis(columns, axis=1)
        listed_cat = tuple(dataset.categorical) if dataset is not None else ()
        immutable = set(dataset.immutable) if dataset is not None else set()
        increasing = set(dataset.increasing) if dataset is not None else set()
        unknown = sorted((set(listed_cat) | immutable | increasing) - set(columns))
        if unknown:
            raise InvalidInputError(f"the dataset names columns {unknown} that X lacks")
        self._check_missing(X, columns)

        self.feature_names_in_ = np.asarray(columns, dtype=object)
        self.n_features_in_ = len(columns)
        cat = set(listed_cat) | {c for c in columns if not _is_numeric(X[c])}
        self.categorical_ = [c for c in columns if c in cat]
        self.numeric_ = [c for c in columns if c not in cat]

        encoder = OneHotEncoder(
            handle_unknown="ignore",
            drop="if_binary" if self.drop_first_binary else None,
            sparse_output=False,
            dtype=np.float64,
            feature_name_combiner=_one_hot_name,
        )
        scaler = {"standard": StandardScaler(), "minmax": MinMaxScaler(), "none": "passthrough"}[self.scaling]
        self.pipeline_ = Pipeline(
            [
                (
                    "encode",
                    ColumnTransformer(
                        [
                            ("num", "passthrough", self.numeric_),
                            ("cat", encoder, self.categorical_),
                        ],
                        verbose_feature_names_out=False,
                    ),
                ),
                ("scale", scaler),
            ]
        )
        scaled = np.asarray(self.pipeline_.fit_transform(self._prepare(X)), dtype=np.float64)

        # which raw column each encoded feature comes from, and which are one-hot
        names = [str(n) for n in self.pipeline_.named_steps["encode"].get_feature_names_out()]
        sources = list(self.numeric_)
        fitted_encoder = self.pipeline_.named_steps["encode"].named_transformers_["cat"]
        if self.categorical_:
            drop_idx = getattr(fitted_encoder, "drop_idx_", None)
            for i, (col, cats) in enumerate(zip(self.categorical_, fitted_encoder.categories_)):
                dropped = drop_idx is not None and drop_idx[i] is not None
                sources.extend([col] * (len(cats) - int(dropped)))
        if len(sources) != len(names):  # pragma: no cover - guards a scikit-learn change
            raise RuntimeError("could not map encoded features back to raw columns")
        one_hot = np.arange(len(names)) >= len(self.numeric_)

        # correlation filter (constants always go with it)
        if self.corr_threshold is None:
            keep = np.ones(len(names), dtype=bool)
            constant: list[int] = []
        else:
            keep, constant = self._select(scaled, float(self.corr_threshold))
        self.keep_ = keep
        self.dropped_constant_ = [names[j] for j in constant]
        self.dropped_correlated_ = [names[j] for j in np.flatnonzero(~keep)]
        self.feature_names_out_ = [n for n, k in zip(names, keep) if k]
        self.feature_sources_ = [s for s, k in zip(sources, keep) if k]
        self.n_features_out_ = int(keep.sum())
        self.immutable_mask_ = np.array([s in immutable for s in self.feature_sources_], dtype=bool)
        self.increasing_mask_ = np.array([s in increasing for s in self.feature_sources_], dtype=bool)

        out = scaled[:, keep]
        if self.normalize_rows:
            out = self._normalize(out)
            self.lower_ = out.min(axis=0) if len(out) else np.zeros(out.shape[1])
            self.upper_ = out.max(axis=0) if len(out) else np.zeros(out.shape[1])
        else:
            lower, upper = scaled.min(axis=0), scaled.max(axis=0)
            if one_hot.any():
                images = self._scale(np.vstack([np.zeros(len(names)), np.ones(len(names))]))
                lower[one_hot] = np.minimum(images[0], images[1])[one_hot]
                upper[one_hot] = np.maximum(images[0], images[1])[one_hot]
            self.lower_, self.upper_ = lower[keep], upper[keep]
        return self

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        """Encode, scale and select features of ``X`` with the statistics learned in fit.

        Returns float64 of shape (n, ``n_features_out_``). Extra columns are ignored; missing
        columns or NaN raise ValueError naming them. Unseen categories encode as all zeros
        (scikit-learn warns).
        """
        if not hasattr(self, "pipeline_"):
            raise NotFittedError("this Preprocessor is not fitted yet; call fit first")
        X = self._as_frame(X)
        X = X.set_axis([str(c) for c in X.columns], axis=1)
        out = np.asarray(self.pipeline_.transform(self._prepare(X)), dtype=np.float64)
        out = out[:, self.keep_]
        if self.normalize_rows:
            out = self._normalize(out)
        return out

    def fit_transform(self, X: pd.DataFrame, dataset: Dataset | None = None) -> np.ndarray:
        """:meth:`fit` on ``X``, then :meth:`transform` it."""
        return self.fit(X, dataset).transform(X)

    def get_feature_names_out(self, input_features: object = None) -> np.ndarray:
        """Output feature names (scikit-learn convention)."""
        return np.asarray(self.feature_names_out_, dtype=object)

    # ------------------------------------------------------------------ helpers
    def _scale(self, encoded: np.ndarray) -> np.ndarray:
        step = self.pipeline_.named_steps["scale"]
        return encoded if step == "passthrough" else step.transform(encoded)

    @staticmethod
    def _normalize(out: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    @staticmethod
    def _select(scaled: np.ndarray, threshold: float) -> tuple[np.ndarray, list[int]]:
        """Greedy left-to-right filter: keep a feature unless it is constant or its |Pearson r|
        with an already kept feature exceeds ``threshold``. Returns the keep mask and the
        constant features. Blockwise, so thousands of features need only (block x d)
        correlations in memory at a time."""
        n, d = scaled.shape
        # identical inputs give identical scaled outputs, so constants have ptp exactly 0
        constant = np.ptp(scaled, axis=0) == 0
        keep = ~constant
        Z = scaled - scaled.mean(axis=0)  # the one extra n x d array
        norms = np.linalg.norm(Z, axis=0)
        norms[constant] = 1.0
        Z /= norms
        Z[:, constant] = 0.0
        kept_idx: list[int] = []
        for start in range(0, d, _CORR_BLOCK):
            block = [j for j in range(start, min(start + _CORR_BLOCK, d)) if keep[j]]
            if not block:
                continue
            Zb = Z[:, block]
            if kept_idx:
                # kept features all lie before ``start``: a view, then pick the kept ones
                prior = np.abs(Zb.T @ Z[:, :start])[:, kept_idx].max(axis=1) > threshold
            else:
                prior = np.zeros(len(block), dtype=bool)
            within = np.abs(Zb.T @ Zb)
            survivors: list[int] = []
            for i, j in enumerate(block):
                if prior[i] or (survivors and within[i, survivors].max() > threshold):
                    keep[j] = False
                else:
                    survivors.append(i)
            kept_idx.extend(block[i] for i in survivors)
        return keep, [int(j) for j in np.flatnonzero(constant)]
