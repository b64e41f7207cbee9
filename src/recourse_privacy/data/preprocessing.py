"""Turn a raw feature frame into the float matrix the models and recourse methods use.

Steps, all fitted on the model owner's training data only (never on non-members or the
adversary's pool, which would leak their statistics into the model's input space):

1. one-hot encode the categorical columns (``OneHotEncoder(handle_unknown="ignore")``;
   two-level columns keep one indicator when ``drop_first_binary``); a numeric column that may be
   missing (NaN) gets its most frequent value in the gaps (``SimpleImputer``) and an indicator of
   its own (``MissingIndicator``, :class:`MissingFlag`), so that decoding gives the NaN back,
2. scale every column, numeric and one-hot alike (standard, min-max or none),
3. drop each feature whose absolute Pearson correlation with an earlier kept feature exceeds
   ``corr_threshold``, and every constant feature,
4. optionally divide each row by its L2 norm.

The fitted object records, per output feature, the raw column it came from, whether that
column is immutable or may only increase, and the bounds seen in the fit data; and the
structure a person can act on: which output features form the one-hot group of a categorical
column (:class:`OneHotGroup`), which numeric features are integer-valued, and the affine map
back to the original units, so :meth:`Preprocessor.inverse_transform` decodes encoded rows
(counterfactuals) into the original columns, values and dtypes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.errors import IncompatibleError, InvalidInputError, NotFittedError

__all__ = ["ColumnWriting", "MissingFlag", "OneHotGroup", "Preprocessor"]

_SCALINGS = ("standard", "minmax", "none")
_CORR_BLOCK = 512  # features whose correlations are computed at a time


def _one_hot_name(feature: str, category: object) -> str:
    """Output name of a one-hot column: ``column=level``."""
    return f"{feature}={category}"


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


#: the level a categorical column's gap encodes as (its one-hot feature ``column=nan``); it decodes back to NaN
MISSING_LEVEL = "nan"


def _levels(series: pd.Series) -> np.ndarray:
    """A categorical column's values as the encoder's strings, a gap (NaN, None) as :data:`MISSING_LEVEL`."""
    return np.where(series.isna().to_numpy(), MISSING_LEVEL, series.astype(str).to_numpy(dtype=object)).astype(object)


#: the most decimals a numeric column's values are recognised as written with (money in cents: 2)
MAX_DECIMALS = 6
#: the most values off a column's grid that decoding snaps to (its most frequent: an imputed mean, a cap)
MAX_EXCEPTIONS = 64
_FEW_EXCEPTIONS = 8  # up to this many, each is compared with every value; beyond, the nearest is found
_SCREEN_ROWS = 64  # the rows that rule a column out before it is read whole
_NONE = np.empty(0)  # no exceptions
_SNAP_RTOL = 1e-9  # a decoded value this close (relative, at least absolute) to a data value is that value


@dataclass(frozen=True, eq=False)
class ColumnWriting:
    """How a numeric column's fit values are written: what decoding snaps a value back to.

    ``decimals``: the fewest decimals (0 to :data:`MAX_DECIMALS`) with which every value (gaps aside) is written,
    or else most of them (at least half, as many as with six); None for a measured quantity. ``exceptions``:
    sorted, the (at most :data:`MAX_EXCEPTIONS`) most frequent values that are not, such as the mean that imputed
    a column of integers (70.2104219767771 among 55.0, 61.0, ...).
    """

    decimals: int | None
    exceptions: np.ndarray

    @property
    def exact(self) -> bool:
        """Every value is written with ``decimals`` decimals (``decimals == 0`` and exact: an integer column)."""
        return self.decimals is not None and not len(self.exceptions)

    def snap(self, values: np.ndarray) -> np.ndarray:
        """``values`` within float64 rounding (1e-9 relative) of a number so written, or of an exception, set to it;
        the others (a search's candidate between them) as they are.

        Scaling and back leaves a value a few ulps off its data value (46.99999999999999, 54.99999999999979); a tree
        that splits at a data value (LightGBM's integers, HistGradientBoosting's quantiles) reads it on the wrong
        side.
        """
        out = values
        if self.decimals is not None:
            out = _snap_to(out, np.round(out, self.decimals))
        ex = self.exceptions
        if not len(ex):
            return out
        if len(ex) > _FEW_EXCEPTIONS:  # the nearest exception, by bisection
            i = np.clip(np.searchsorted(ex, out), 1, len(ex) - 1)
            lo, hi = ex[i - 1], ex[i]
            return _snap_to(out, np.where(np.abs(out - lo) <= np.abs(hi - out), lo, hi))
        out, gap = (values.copy() if out is values else out), np.empty_like(out)
        for e in ex:  # a few (an imputed mean per class): one comparison each, in place, is faster than a bisection
            np.abs(np.subtract(out, e, out=gap), out=gap)
            out[gap <= _SNAP_RTOL * max(1.0, abs(float(e)))] = e
        return out


def _snap_to(values: np.ndarray, near: np.ndarray) -> np.ndarray:
    """``near`` where ``values`` is within :data:`_SNAP_RTOL` (relative) of it, else ``values``."""
    return np.where(np.abs(values - near) <= _SNAP_RTOL * np.maximum(1.0, np.abs(near)), near, values)


def _on_grid(B: np.ndarray, d: int) -> np.ndarray:
    """Per column of ``B``: the fraction of its values (gaps aside) written with ``d`` decimals."""
    present = (~np.isnan(B)).sum(axis=0)
    on = (np.round(B, d) == B).sum(axis=0)
    return np.where(present > 0, on / np.maximum(present, 1), 1.0)  # a column of gaps: every value is


def _grid(B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``B``: the fewest decimals that write all its values, or else as many as six do if that is at
    least half of them (-1 where none does); and whether they write all. A column is read again only until a grid
    writes all its values."""
    fractions = np.ones((MAX_DECIMALS + 1, B.shape[1]))  # (decimals, columns)
    todo = np.arange(B.shape[1])
    for d in range(MAX_DECIMALS + 1):
        fractions[d, todo] = _on_grid(B[:, todo], d)
        todo = todo[fractions[d, todo] < 1.0]
    best = fractions.max(axis=0)
    return np.where(best >= 0.5, (fractions >= best).argmax(axis=0), -1), best >= 1.0


def _writing_of(column: np.ndarray, decimals: int) -> ColumnWriting:
    """The :class:`ColumnWriting` of a column most of whose values ``decimals`` decimals write, but not all."""
    values = column[~np.isnan(column)]
    levels, counts = np.unique(values[np.round(values, decimals) != values], return_counts=True)
    exceptions = np.sort(levels[np.argsort(-counts, kind="stable")[:MAX_EXCEPTIONS]])
    return ColumnWriting(decimals, exceptions)


def _writings(M: pd.DataFrame, columns: Sequence[str]) -> list[ColumnWriting]:
    """Per one of ``columns`` of ``M``: its :class:`ColumnWriting`. The first 64 rows rule most measured quantities
    out (fewer than half their values on any grid); only the others are read whole, a block of columns at a time
    (no n x d copy)."""
    out = [ColumnWriting(None, _NONE)] * len(columns)
    for lo in range(0, len(columns), _CORR_BLOCK):
        B = M[list(columns[lo : lo + _CORR_BLOCK])].to_numpy(dtype=np.float64)
        cand = np.flatnonzero(_grid(B[:_SCREEN_ROWS])[0] >= 0)
        for j, k, exact in zip(cand, *_grid(B[:, cand])):
            if k >= 0:
                out[lo + int(j)] = ColumnWriting(int(k), _NONE) if exact else _writing_of(B[:, j], int(k))
    return out


def _activation(V: np.ndarray, on, off) -> np.ndarray:
    """Encoded indicator values ``V`` back on the 0/1 scale (``off`` -> 0, ``on`` -> 1); "on" from one half."""
    return (V - off) / (on - off)


@dataclass(frozen=True, eq=False)
class OneHotGroup:
    """The encoded features of one categorical column: exactly one is "on", or none where ``allow_none``.

    ``index`` (int array): the group's encoded feature indices; ``levels``: the original
    category value of each; ``on`` / ``off``: each feature's encoded (scaled) value for an
    indicator of 1 / 0. ``allow_none``: the all-off state is a valid category, ``none_level``
    (a level dropped by ``drop_first_binary`` or by the correlation filter, e.g. the base level
    of a binary column; with several dropped, the most frequent in the fit data). A column
    whose every indicator was dropped has an empty ``index`` and decodes to ``none_level``.
    """

    column: str
    index: np.ndarray
    levels: tuple
    on: np.ndarray
    off: np.ndarray
    allow_none: bool
    none_level: object = None
    #: where the column may be missing: the index in ``levels`` of its gap's level, or ``size`` where the gap is
    #: the all-off state (``none_level``); None where it has no gaps
    missing: int | None = None

    @property
    def size(self) -> int:
        """Number of encoded features in the group."""
        return int(len(self.index))

    def at_missing(self, Z: np.ndarray) -> np.ndarray:
        """Where the encoded rows ``Z`` (any leading shape) hold the column's gap (all False without gaps)."""
        if self.missing is None:
            return np.zeros(Z.shape[:-1], dtype=bool)
        activation = _activation(Z[..., self.index], self.on, self.off)
        if self.missing == self.size:
            return (activation < 0.5).all(axis=-1)
        return activation[..., self.missing] >= 0.5


@dataclass(frozen=True)
class MissingFlag:
    """A numeric column that may be missing: its indicator feature and its value feature.

    ``flag``: the encoded index of the indicator (1 where the raw value is NaN), ``on`` / ``off``
    its encoded (scaled) values for 1 / 0; ``value``: the encoded index of the column's values
    (the gaps hold the fit rows' most frequent value), None where the correlation filter dropped
    it as a constant. A row whose flag is on decodes to NaN in ``column``, whatever its value
    feature holds; recourse keeps both as the factual has them (a missing value stays missing).
    """

    column: str
    flag: int
    value: int | None
    on: float
    off: float

    def is_on(self, Z: np.ndarray) -> np.ndarray:
        """Where the encoded rows ``Z`` (any leading shape) have the flag on (nearer ``on`` than ``off``)."""
        return _activation(Z[..., self.flag], self.on, self.off) >= 0.5


class Preprocessor:
    """One-hot, scale, de-correlate and optionally row-normalise a raw feature frame.

    scikit-learn style: hyperparameters are stored unchanged, learned state ends in ``_``.
    Fit it on the model owner's training rows only. After :meth:`fit`:

    - ``feature_names_out_`` (list of str; one-hot columns are named ``column=level``, missing
      indicators ``missingindicator_column``),
      ``n_features_out_``, ``feature_sources_`` (raw column of each output feature);
    - ``dropped_correlated_``: output features removed by the correlation filter, constant
      features included (also listed in ``dropped_constant_``); with
      ``corr_threshold=None`` nothing is dropped, constants included;
    - ``immutable_mask_`` / ``increasing_mask_``: bool arrays over the output features,
      True where the feature derives from an immutable / only-increasing raw column (both
      scalers are increasing maps, so "only increase" carries over unless rows are
      normalised);
    - ``groups_``: one :class:`OneHotGroup` per categorical column (output feature indices,
      levels, scaled on/off values, whether all-off is a valid level);
    - ``missable_``: the numeric columns that may be missing (NaN anywhere in ``dataset.X``, or in
      the fit rows); ``missing_flags_``: one :class:`MissingFlag` per such column;
      ``categorical_gaps_``: the categorical ones, whose gap is the level :data:`MISSING_LEVEL`
      (``OneHotGroup.missing``). NaN in any other column is refused;
    - ``integer_mask_``: bool over the output features, True for a numeric feature whose fit
      values are all integers (counterfactuals must keep it integer); ``writings_``: per numeric column, how its
      fit values are written (:class:`ColumnWriting`), which decoding snaps a value within rounding of back to;
    - ``unit_scale_`` / ``unit_offset_``: per output feature, the affine map from encoded to
      original units, ``original = encoded * unit_scale_ + unit_offset_`` (for a one-hot
      feature the original unit is its 0/1 indicator); meaningless with ``normalize_rows``;
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
    def _check_missing(X: pd.DataFrame, columns: Sequence[str], why: str = "") -> None:
        counts = X[list(columns)].isna().sum()
        bad = counts[counts > 0]
        if len(bad):
            detail = ", ".join(f"{c!r} ({n} rows)" for c, n in bad.items())
            raise InvalidInputError(f"X has missing values (NaN) in columns {detail}{why}")

    def _prepare(self, X: pd.DataFrame) -> pd.DataFrame:
        """Select the fitted columns in order: numeric as float64, categorical as str objects."""
        missing = [c for c in self.feature_names_in_ if c not in X.columns]
        if missing:
            raise InvalidInputError(
                f"X lacks the columns {missing} seen at fit time (expected {list(self.feature_names_in_)})"
            )
        missable = set(getattr(self, "missable_", ())) | set(getattr(self, "categorical_gaps_", ()))
        self._check_missing(
            X,
            [c for c in self.feature_names_in_ if c not in missable],
            "; at fit time they had none (only the columns with missing values in the fit data may have them)",
        )
        for col in self.numeric_:
            if not _is_numeric(X[col]):
                raise InvalidInputError(f"column {col!r} was numeric at fit time but has dtype {X[col].dtype} now")
        # the numeric columns as one float64 block (one copy; a frame of thousands of columns built column by
        # column is consolidated, a second copy: 280 MB each at 5,000 x 7,000)
        numeric = X[self.numeric_].to_numpy(dtype=np.float64) if self.numeric_ else np.empty((len(X), 0))
        infinite = np.isinf(numeric).any(axis=0)
        if infinite.any():
            raise InvalidInputError(f"column {self.numeric_[int(np.argmax(infinite))]!r} has infinite values")
        out = pd.DataFrame(numeric, columns=list(self.numeric_), index=pd.RangeIndex(len(X)), copy=False)
        if not self.categorical_:
            return out
        cats = pd.DataFrame({col: _levels(X[col]) for col in self.categorical_}, index=out.index)
        return pd.concat([out, cats], axis=1)

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
        X, immutable, increasing = self._fit_columns(X, dataset)
        self.pipeline_ = self._new_pipeline()
        scaled = self._fit_pipeline(X)
        names, sources = self._encoded_sources()
        one_hot = np.arange(len(names)) >= len(self.numeric_)  # one-hot features and missing indicators: 0 / 1
        flags = np.zeros(len(names), dtype=bool)
        flags[len(self.numeric_) : len(self.numeric_) + len(self.missable_)] = True
        gap_levels = {_one_hot_name(c, MISSING_LEVEL) for c in self.categorical_gaps_}
        flags |= np.isin(names, list(gap_levels)) & one_hot  # a categorical gap's level: decoding needs it too

        # correlation filter (constants always go with it; a missing indicator always stays, as decoding needs it)
        if self.corr_threshold is None:
            keep = np.ones(len(names), dtype=bool)
            constant: list[int] = []
        else:
            keep, constant = self._select(scaled, float(self.corr_threshold), protect=flags)
        self.keep_ = keep
        self.dropped_constant_ = [names[j] for j in constant]
        self.dropped_correlated_ = [names[j] for j in np.flatnonzero(~keep)]
        self.feature_names_out_ = [n for n, k in zip(names, keep) if k]
        self.feature_sources_ = [s for s, k in zip(sources, keep) if k]
        self.n_features_out_ = int(keep.sum())
        self.immutable_mask_ = np.array([s in immutable for s in self.feature_sources_], dtype=bool)
        self.increasing_mask_ = np.array([s in increasing for s in self.feature_sources_], dtype=bool)

        images = self._scale(np.vstack([np.zeros(len(names)), np.ones(len(names))]))
        self._record_structure(X, images, keep, constant)
        self._fit_ranges(scaled, keep, one_hot, images)
        return self

    def _fit_columns(self, X: pd.DataFrame, dataset: Dataset | None) -> tuple[pd.DataFrame, set, set]:
        """Check ``X``'s columns against ``dataset`` and learn which are numeric and categorical.

        Returns ``X`` with string column labels, and the immutable and increasing column names.
        """
        X = self._as_frame(X)
        if len(X) == 0:
            raise InvalidInputError("cannot fit a Preprocessor on an empty frame")
        columns = [str(c) for c in X.columns]
        if len(set(columns)) != len(columns):
            raise InvalidInputError("X has duplicate column names")
        self._labels_in = list(X.columns)  # the caller's labels (ints stay ints) for inverse_transform
        self._dtypes_in = [X[c].dtype for c in X.columns]
        X = X.set_axis(columns, axis=1)
        listed_cat = tuple(dataset.categorical) if dataset is not None else ()
        immutable = set(dataset.immutable) if dataset is not None else set()
        increasing = set(dataset.increasing) if dataset is not None else set()
        unknown = sorted((set(listed_cat) | immutable | increasing) - set(columns))
        if unknown:
            raise InvalidInputError(f"the dataset names columns {unknown} that X lacks")
        self.feature_names_in_ = np.asarray(columns, dtype=object)
        self.n_features_in_ = len(columns)
        cat = set(listed_cat) | {c for c in columns if not _is_numeric(X[c])}
        self.categorical_ = [c for c in columns if c in cat]
        self.numeric_ = [c for c in columns if c not in cat]
        self.missable_ = self._with_gaps(X, dataset, self.numeric_)
        self.categorical_gaps_ = self._with_gaps(X, dataset, self.categorical_)
        # with gaps: every level of the fit rows, and the gap's where the column has gaps anywhere (the encoder must
        # know it); without, the encoder finds the levels itself ("auto")
        self._categories = (
            [
                sorted(set(_levels(X[c])) | ({MISSING_LEVEL} if c in self.categorical_gaps_ else set()))
                for c in self.categorical_
            ]
            if self.categorical_gaps_
            else "auto"
        )
        return X, immutable, increasing

    @staticmethod
    def _with_gaps(X: pd.DataFrame, dataset: Dataset | None, columns: list[str]) -> list[str]:
        """Those of ``columns`` with a NaN in the fit rows or anywhere in ``dataset.X`` (every pool it transforms)."""
        gaps: set = set()
        for frame in [X] + ([dataset.X] if dataset is not None else []):
            cols = [c for c in columns if c in frame.columns]
            if cols:  # one pass over the block, not a call per column (7,000 columns in the figure-2 setting)
                found = frame[cols].isna().to_numpy().any(axis=0)
                gaps.update(c for c, g in zip(cols, found) if g)
        return [c for c in columns if c in gaps]

    def _new_pipeline(self):
        """The unfitted encoding (numeric columns passed through, categorical one-hot) and scaling pipeline."""
        # scikit-learn is imported here, not at module level, to keep package import fast
        from sklearn.compose import ColumnTransformer
        from sklearn.impute import MissingIndicator, SimpleImputer
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

        encoder = OneHotEncoder(
            categories=getattr(self, "_categories", "auto"),
            handle_unknown="ignore",
            drop="if_binary" if self.drop_first_binary else None,
            sparse_output=False,
            dtype=np.float64,
            feature_name_combiner=_one_hot_name,
        )
        scaler = {"standard": StandardScaler(), "minmax": MinMaxScaler(), "none": "passthrough"}[self.scaling]
        # a gap gets an observed value (integer where the column is, inside its range); its indicator says it was one
        numeric = SimpleImputer(strategy="most_frequent", keep_empty_features=True) if self.missable_ else "passthrough"
        encode = ColumnTransformer(
            [
                ("num", numeric, self.numeric_),
                ("missing", MissingIndicator(features="all"), self.missable_),
                ("cat", encoder, self.categorical_),
            ],
            verbose_feature_names_out=False,
        )
        return Pipeline([("encode", encode), ("scale", scaler)])

    def _fit_pipeline(self, X: pd.DataFrame) -> np.ndarray:
        """Fit ``pipeline_``'s steps one after the other on ``X`` and return the scaled training rows.

        The same numbers as ``pipeline_.fit_transform``, with two n x d float64 arrays alive at a time, not
        four: the prepared frame goes once encoded, and a standard scaler scales the encoder's own output in
        place (scikit-learn's ``transform(copy=False)``)."""
        encode, scale = self.pipeline_.named_steps["encode"], self.pipeline_.named_steps["scale"]
        encoded = np.asarray(encode.fit_transform(self._prepare(X)), dtype=np.float64)
        if scale == "passthrough":
            return encoded
        scale.fit(encoded)
        if hasattr(scale, "with_mean"):  # StandardScaler: in place on the encoder's fresh array
            return np.asarray(scale.transform(encoded, copy=False), dtype=np.float64)
        return np.asarray(scale.transform(encoded), dtype=np.float64)

    def _encoded_sources(self) -> tuple[list[str], list[str]]:
        """The fitted pipeline's encoded feature names, and the raw column each one comes from."""
        names = [str(n) for n in self.pipeline_.named_steps["encode"].get_feature_names_out()]
        sources = list(self.numeric_) + list(self.missable_)
        fitted_encoder = self.pipeline_.named_steps["encode"].named_transformers_["cat"]
        if self.categorical_:
            drop_idx = getattr(fitted_encoder, "drop_idx_", None)
            for i, (col, cats) in enumerate(zip(self.categorical_, fitted_encoder.categories_)):
                dropped = drop_idx is not None and drop_idx[i] is not None
                sources.extend([col] * (len(cats) - int(dropped)))
        if len(sources) != len(names):  # pragma: no cover - guards a scikit-learn change
            raise RuntimeError("could not map encoded features back to raw columns")
        return names, sources

    def _fit_ranges(self, scaled: np.ndarray, keep: np.ndarray, one_hot: np.ndarray, images: np.ndarray) -> None:
        """``lower_`` / ``upper_``: each kept feature's range on the training rows (one-hot: both images of 0/1)."""
        if self.normalize_rows:
            out = self._normalize(scaled[:, keep])
            self.lower_ = out.min(axis=0) if len(out) else np.zeros(out.shape[1])
            self.upper_ = out.max(axis=0) if len(out) else np.zeros(out.shape[1])
        else:
            lower, upper = scaled.min(axis=0), scaled.max(axis=0)
            if one_hot.any():
                lower[one_hot] = np.minimum(images[0], images[1])[one_hot]
                upper[one_hot] = np.maximum(images[0], images[1])[one_hot]
            self.lower_, self.upper_ = lower[keep], upper[keep]

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        """Encode, scale and select features of ``X`` with the statistics learned in fit.

        Returns float64 of shape (n, ``n_features_out_``). Extra columns are ignored; missing
        columns or NaN raise ValueError naming them. Levels the owner's training rows never had
        encode as all zeros, without a warning: non-member and adversary pools routinely hold
        rare levels, and every shadow world transforms its pool again.
        """
        import warnings

        if not hasattr(self, "pipeline_"):
            raise NotFittedError("this Preprocessor is not fitted yet; call fit first")
        X = self._as_frame(X)
        X = X.set_axis([str(c) for c in X.columns], axis=1)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Found unknown categories", category=UserWarning)
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

    def inverse_transform(self, X_encoded: np.ndarray) -> pd.DataFrame:
        """Decode encoded rows (e.g. counterfactuals) into the original columns, values and dtypes.

        Columns come back under their original labels and order; numeric columns unscaled
        (integer and bool dtypes rounded to their dtype), categorical columns as their original
        values and dtype, each one-hot group decoded by its most-"on" level (the largest
        ``(x - off) / (on - off)``; the group's ``none_level`` where all-off is valid and no
        indicator reaches one half). Raises :class:`IncompatibleError` when rows are normalised
        or a non-constant numeric column was dropped by the correlation filter (its values are
        lost); a dropped constant column decodes to its constant.
        """
        if not hasattr(self, "pipeline_"):
            raise NotFittedError("this Preprocessor is not fitted yet; call fit first")
        Z = np.asarray(X_encoded, dtype=np.float64)
        if Z.ndim != 2 or Z.shape[1] != self.n_features_out_:
            raise InvalidInputError(
                f"X_encoded must have shape (n, {self.n_features_out_}) (the encoded features); got {Z.shape}"
            )
        if self.normalize_rows:
            raise IncompatibleError(
                "inverse_transform cannot decode rows normalised to unit L2 norm (normalize_rows=True): "
                "each row's scale is lost"
            )
        lost = [c for c in self.numeric_ if c not in self._numeric_out and c not in self._numeric_constants]
        if lost:
            raise IncompatibleError(
                f"inverse_transform cannot decode the numeric columns {lost}: the correlation filter dropped "
                "them (fit with corr_threshold=None to keep every column)"
            )
        raw = np.asfortranarray(Z) * self.unit_scale_ + self.unit_offset_  # a column at a time below: contiguous
        columns: dict[str, np.ndarray] = {}
        for col in self.numeric_:
            j = self._numeric_out.get(col)
            columns[col] = raw[:, j] if j is not None else np.full(len(Z), self._numeric_constants[col])
            writing = getattr(self, "writings_", {}).get(col)
            if j is not None and writing is not None:  # the scaling's rounding undone: 46.99999999999999 is 47
                columns[col] = writing.snap(columns[col])
        for group in self.groups_:
            columns[group.column] = self._decode_group(group, Z)
        for flag in getattr(self, "missing_flags_", ()):
            columns[flag.column] = np.where(flag.is_on(Z), np.nan, columns[flag.column])
        out = {}
        for label, name, dtype in zip(self._labels_in, self.feature_names_in_, self._dtypes_in):
            out[label] = self._as_dtype(name, columns[name], dtype)
        return pd.DataFrame(out, columns=self._labels_in)

    # ------------------------------------------------------------------ structure
    def _record_structure(self, X: pd.DataFrame, images: np.ndarray, keep: np.ndarray, constant: list[int]) -> None:
        """Groups, integer mask and the map to original units (see the class docstring); fit only."""
        a, b = self._affine(images)  # every scaler is affine per feature: encoded = a * raw + b
        bad = [j for j in range(len(a)) if not (np.isfinite(1.0 / a[j]) and np.isfinite(b[j] / a[j]))]
        if bad:
            col = self.numeric_[bad[0]] if bad[0] < len(self.numeric_) else f"encoded feature {bad[0]}"
            raise InvalidInputError(
                f"column {col!r} cannot be scaled to the encoded features and back in float64 (its values span "
                "too many orders of magnitude): rescale it (e.g. to thousands)"
            )
        self.unit_scale_ = (1.0 / a)[keep]
        self.unit_offset_ = (-b / a)[keep]
        out_index = np.cumsum(keep) - 1  # pre-filter feature -> output feature (where kept)
        n_num = len(self.numeric_)
        self._numeric_out = {c: int(out_index[j]) for j, c in enumerate(self.numeric_) if keep[j]}
        fills = self._fill_values(X)
        self._numeric_constants = {self.numeric_[j]: fills[j] for j in constant if j < n_num and len(X)}
        integer = np.zeros(len(keep), dtype=bool)
        writings = _writings(X, self.numeric_)
        self.writings_ = dict(zip(self.numeric_, writings))
        integer[: len(writings)] = [w.decimals == 0 and w.exact for w in writings]
        self.integer_mask_ = integer[keep]
        self.missing_flags_ = tuple(
            MissingFlag(
                column=col,
                flag=int(out_index[n_num + i]),
                value=self._numeric_out.get(col),
                on=float(images[1][n_num + i]),
                off=float(images[0][n_num + i]),
            )
            for i, col in enumerate(self.missable_)
        )

        groups, self._level_values = [], {}
        if self.categorical_:
            encoder = self.pipeline_.named_steps["encode"].named_transformers_["cat"]
            drop_idx = getattr(encoder, "drop_idx_", None)
            start = n_num + len(self.missable_)
            for i, (col, cats) in enumerate(zip(self.categorical_, encoder.categories_)):
                originals = X[col].drop_duplicates()
                self._level_values[col] = dict(zip(_levels(originals), originals))
                counts = pd.Series(_levels(X[col])).value_counts()
                encoder_drop = int(drop_idx[i]) if drop_idx is not None and drop_idx[i] is not None else None
                encoded = [k for k in range(len(cats)) if k != encoder_drop]
                feats = np.arange(start, start + len(encoded))
                start += len(encoded)
                kept = keep[feats]
                dropped_levels = [str(cats[k]) for k, f in zip(encoded, kept) if not f]
                if encoder_drop is not None:
                    dropped_levels.append(str(cats[encoder_drop]))
                none_level = max(dropped_levels, key=lambda v: counts.get(v, 0)) if dropped_levels else None
                levels = tuple(str(cats[k]) for k, f in zip(encoded, kept) if f)
                missing = None
                if col in self.categorical_gaps_:
                    self._level_values[col].setdefault(MISSING_LEVEL, np.nan)
                    in_levels = MISSING_LEVEL in levels
                    missing = levels.index(MISSING_LEVEL) if in_levels else len(levels)  # else the dropped level
                groups.append(
                    OneHotGroup(
                        column=col,
                        index=out_index[feats[kept]].astype(np.intp),
                        levels=levels,
                        on=images[1][feats[kept]],
                        off=images[0][feats[kept]],
                        allow_none=bool(dropped_levels),
                        none_level=none_level,
                        missing=missing,
                    )
                )
        self.groups_ = tuple(groups)

    def _fill_values(self, X: pd.DataFrame) -> list[float]:
        """Per numeric column, the value its gaps get (the imputer's), or without gaps its first fit row's.

        Either is a constant column's constant: what the column decodes to where the filter dropped it."""
        step = self.pipeline_.named_steps["encode"].named_transformers_.get("num")
        if hasattr(step, "statistics_"):  # the imputer: its most frequent value
            return [float(v) for v in step.statistics_]
        return [float(X[c].iloc[0]) if len(X) else 0.0 for c in self.numeric_]

    def _decode_group(self, group: OneHotGroup, Z: np.ndarray) -> np.ndarray:
        """The original level of each row for one group: the most-"on" indicator (see :meth:`inverse_transform`)."""
        levels = np.array([*group.levels, group.none_level], dtype=object)
        if group.size == 0:
            return levels[np.zeros(len(Z), dtype=np.intp)]
        activation = (Z[:, group.index] - group.off) / (group.on - group.off)
        pick = np.argmax(activation, axis=1)
        if group.allow_none:
            pick = np.where(activation.max(axis=1) < 0.5, group.size, pick)
        return levels[pick]

    def _as_dtype(self, name: str, values: np.ndarray, dtype) -> pd.Series:
        """Decoded values of column ``name`` in its fit dtype (category strings mapped back to the fit values)."""
        if name in self._level_values:
            values = pd.Series(values, dtype=object).map(self._level_values[name]).to_numpy(dtype=object)
        elif pd.api.types.is_bool_dtype(dtype):
            return pd.Series(np.asarray(values, dtype=np.float64) > 0.5)
        elif pd.api.types.is_integer_dtype(dtype):
            values = np.rint(np.asarray(values, dtype=np.float64))
        try:
            return pd.Series(values).astype(dtype)
        except (TypeError, ValueError):  # a level the dtype cannot hold (mixed types): keep the values
            return pd.Series(values, dtype=object)

    # ------------------------------------------------------------------ helpers
    def _affine(self, images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per encoded feature (before the filter), ``a`` and ``b`` of ``encoded = a * raw + b``.

        The images of raw 0 and 1 give them, except where a column's scale is far from 1: there
        (values of 1e17) the difference of the two images rounds away (a = 0, then NaN), and the
        scaler's own statistics give them instead. Elsewhere the images are kept, bit for bit.
        """
        a, b = images[1] - images[0], images[0].copy()
        step = self.pipeline_.named_steps["scale"]
        if hasattr(step, "mean_"):  # StandardScaler: (raw - mean) / scale
            exact_a, exact_b = 1.0 / step.scale_, -step.mean_ / step.scale_
        elif hasattr(step, "min_"):  # MinMaxScaler: raw * scale + min
            exact_a, exact_b = np.asarray(step.scale_, np.float64), np.asarray(step.min_, np.float64)
        else:
            return a, b
        lost = ~(np.abs(a - exact_a) <= 1e-6 * np.abs(exact_a))
        a[lost], b[lost] = exact_a[lost], exact_b[lost]
        return a, b

    def _scale(self, encoded: np.ndarray) -> np.ndarray:
        step = self.pipeline_.named_steps["scale"]
        return encoded if step == "passthrough" else step.transform(encoded)

    @staticmethod
    def _normalize(out: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    @staticmethod
    def _select(
        scaled: np.ndarray, threshold: float, protect: np.ndarray | None = None
    ) -> tuple[np.ndarray, list[int]]:
        """Greedy left-to-right filter: keep a feature unless it is constant or its |Pearson r|
        with an already kept feature exceeds ``threshold``; ``protect``ed features are always kept.
        Returns the keep mask and the constant features dropped. Blockwise, so thousands of
        features need only (block x d) correlations in memory at a time."""
        n, d = scaled.shape
        protect = np.zeros(d, dtype=bool) if protect is None else np.asarray(protect, dtype=bool)
        # identical inputs give identical scaled outputs, so constants have ptp exactly 0
        constant = np.ptp(scaled, axis=0) == 0
        keep = ~constant | protect
        Z = scaled - scaled.mean(axis=0)  # the one extra n x d array
        # column norms a block of columns at a time (the same sums; one call squares all of Z, a second n x d)
        norms = np.concatenate(
            [np.linalg.norm(Z[:, j : j + _CORR_BLOCK], axis=0) for j in range(0, max(d, 1), _CORR_BLOCK)]
        )
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
                if not protect[j] and (prior[i] or (survivors and within[i, survivors].max() > threshold)):
                    keep[j] = False
                else:
                    survivors.append(i)
            kept_idx.extend(block[i] for i in survivors)
        return keep, [int(j) for j in np.flatnonzero(constant & ~protect)]
