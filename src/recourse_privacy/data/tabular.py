"""A user's own table (CSV or Parquet) as a :class:`Dataset`, validated up front.

Every check runs before any model is trained, and each error says which column or
parameter is wrong and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.errors import InvalidInputError, MissingFileError
from recourse_privacy.validation import same_label

__all__ = ["load_tabular", "read_table", "validate_frame"]

# Strings read as missing. Unlike pandas' default list, "None" is not among them: it is a
# legitimate level in several public datasets (e.g. max_glu_serum in Diabetes).
_NA_VALUES = ["", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "NULL", "null", "#N/A", "<NA>"]
_CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz", ".tsv", ".txt")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_MAX_UNIQUE_FRACTION = 0.5  # a non-numeric column with more unique values is free text
_MIN_ROWS_FOR_UNIQUE_CHECK = 20


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV (``.csv``, ``.tsv``, compressed CSV) or Parquet file as a raw frame; unreadable files raise naming the file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise MissingFileError(f"no such file: {path}")
    return _read(path)


def _read(path: Path) -> pd.DataFrame:
    name = path.name.lower()
    if name.endswith(_PARQUET_SUFFIXES):
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError(
                f"reading {path.name} needs pyarrow; install it with `pip install recourse-privacy[parquet]`"
            ) from None
        try:
            return pd.read_parquet(path)
        except (OSError, ValueError) as err:
            raise InvalidInputError(f"cannot read {path.name} as a Parquet table: {err}") from None
    if name.endswith(_CSV_SUFFIXES):
        sep = "\t" if name.endswith(".tsv") else ","
        try:
            header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
            raw = [str(c) for c in header.iloc[0]] if len(header) else []
            dupes = sorted({c for c in raw if raw.count(c) > 1})
            if dupes:
                raise InvalidInputError(
                    f"{path.name} has duplicate column names {dupes} in its header; "
                    "rename or drop the copies (a copy of the target would leak the label)"
                )
            return pd.read_csv(path, sep=sep, keep_default_na=False, na_values=_NA_VALUES)
        except pd.errors.EmptyDataError:
            raise InvalidInputError(f"{path.name} is empty: no header and no rows") from None
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError, EOFError, OSError) as err:
            if isinstance(err, InvalidInputError):
                raise
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InvalidInputError(f"cannot read {path.name} as a CSV table: {first}") from None
    raise InvalidInputError(
        f"cannot tell the format of {path.name}: use a file ending in {', '.join(_CSV_SUFFIXES + _PARQUET_SUFFIXES)}"
    )


def _preview(values: Sequence[Any], k: int = 5) -> str:
    shown = ", ".join(repr(v) for v in list(values)[:k])
    return shown + (", ..." if len(values) > k else "")


def _plain(v: Any) -> Any:
    """numpy scalars to Python scalars, for comparisons and messages."""
    return v.item() if isinstance(v, np.generic) else v


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)


def _encode_target(values: pd.Series, target: str, positive_label: Any) -> tuple[np.ndarray, tuple | None]:
    levels = [_plain(v) for v in pd.unique(values)]
    if len(levels) != 2:
        raise InvalidInputError(
            f"target column {target!r} must be binary but has {len(levels)} distinct "
            f"value{'s' if len(levels) != 1 else ''}: {_preview(sorted(levels, key=str))}"
        )
    if positive_label is None:
        if set(levels) == {0, 1}:  # also matches {False, True} and {0.0, 1.0}
            one, zero = (next(v for v in levels if v == k) for k in (1, 0))
            return values.astype(np.int64).to_numpy(), (one, zero)
        a, b = sorted(levels, key=str)
        raise InvalidInputError(
            f"target column {target!r} has the values {a!r} and {b!r}, not 0/1: name the favourable "
            f"one with positive_label=... (--positive-label), {a!r} or {b!r}"
        )
    matches = [v for v in levels if same_label(v, positive_label)]
    if len(matches) != 1:
        raise InvalidInputError(
            f"positive_label={positive_label!r} is not one of the values of target column "
            f"{target!r}: {levels[0]!r}, {levels[1]!r}"
        )
    other = levels[1 - levels.index(matches[0])]
    return (values.map(_plain) == matches[0]).to_numpy(dtype=np.int64), (matches[0], other)


_MAX_ABS_VALUE = 1e100  # beyond this, the scaler's squares overflow to inf
_LABEL_AGREEMENT = 0.99  # a feature that agrees with the label this often is a copy of it


def _check_features(X: dict[str, pd.Series], y: np.ndarray, target: str) -> None:
    """Refuse non-finite or overflowing numbers, all-constant features and copies of the label."""
    numeric = [c for c, s in X.items() if s.dtype == np.float64]
    if numeric:
        M = np.column_stack([X[c].to_numpy() for c in numeric])
        bad = np.isinf(M)
        if bad.any():
            cols = [numeric[j] for j in np.unique(np.nonzero(bad)[1])]
            raise InvalidInputError(
                f"columns {cols[:10]} hold infinite values ({int(bad.sum())} cells); drop or clip them first"
            )
        big = np.abs(M) > _MAX_ABS_VALUE
        if big.any():
            j = int(np.unique(np.nonzero(big)[1])[0])
            raise InvalidInputError(
                f"column {numeric[j]!r} holds values as large as {np.nanmax(np.abs(M[:, j])):.3g}; values beyond "
                f"+-{_MAX_ABS_VALUE:.0e} overflow the feature scaling: rescale the column (e.g. to thousands)"
            )
    constant = [c for c, s in X.items() if s.nunique(dropna=False) <= 1]
    if len(constant) == len(X):
        raise InvalidInputError(
            f"every feature column is constant ({_preview(constant)}): nothing to learn from; "
            "the table needs at least one feature that varies"
        )
    copies = []
    yc = y - y.mean()
    if numeric and yc.any():
        M = np.column_stack([X[c].to_numpy() for c in numeric])
        gaps = np.isnan(M)
        if gaps.any():  # a gap at its column's mean adds nothing to the correlation
            M = np.where(gaps, np.nanmean(np.where(gaps.all(axis=0), 0.0, M), axis=0), M)
        Mc = M - M.mean(axis=0)
        norms = np.linalg.norm(Mc, axis=0) * np.linalg.norm(yc)
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.abs(Mc.T @ yc) / norms
        copies += [c for c, r in zip(numeric, corr) if norms[numeric.index(c)] > 0 and r >= _LABEL_AGREEMENT]
    for c, s in X.items():
        if s.dtype == object and s.nunique() == 2:
            first = (s == s.iloc[0]).to_numpy()
            agree = max(np.mean(first == y), np.mean(first != y))
            if agree >= _LABEL_AGREEMENT:
                copies.append(c)
    if copies:
        raise InvalidInputError(
            f"feature column(s) {copies} duplicate the target {target!r} (correlation or agreement >= "
            f"{_LABEL_AGREEMENT}): they leak the label and would make any audit meaningless; drop them"
        )


def validate_frame(
    df: pd.DataFrame,
    target: str,
    *,
    categorical: Sequence[str] | None = None,
    immutable: Sequence[str] = (),
    increasing: Sequence[str] = (),
    positive_label: Any = None,
    name: str = "tabular",
    description: str = "",
) -> Dataset:
    """Check a raw frame and turn it into a :class:`Dataset` (see :func:`load_tabular`)."""
    if not isinstance(df, pd.DataFrame):
        raise InvalidInputError(f"expected a pandas DataFrame, got {type(df).__name__}")
    df = df.set_axis([str(c) for c in df.columns], axis=1)
    features = _check_columns(df, target)
    for param, names in (
        ("categorical", categorical or ()),
        ("immutable", immutable),
        ("increasing", increasing),
    ):
        if isinstance(names, str):
            raise InvalidInputError(f"{param} must be a list of column names, not the string {names!r}")
        unknown = [c for c in names if c not in features]
        if unknown:
            why = f"{target!r} is the target" if target in unknown else f"feature columns are {features}"
            raise InvalidInputError(f"{param} names unknown columns {unknown}; {why}")
    cat_cols = _categorical_columns(df, features, set(categorical or ()))
    _check_no_missing(df, [target], cat_cols)
    y, label_values = _encode_target(df[target], target, positive_label)
    X = {}
    for col in features:
        if col in cat_cols:  # as text, a gap kept as NaN (the user's model gets it as it is)
            X[col] = df[col].astype(str).astype(object).where(df[col].notna(), np.nan)
        else:
            X[col] = df[col].astype(np.float64)
    _check_features(X, y, target)
    return Dataset(
        name=name,
        X=pd.DataFrame(X, columns=features).reset_index(drop=True),
        y=y,
        target=target,
        categorical=tuple(cat_cols),
        immutable=tuple(immutable),
        increasing=tuple(increasing),
        description=description,
        label_values=label_values,
    )


def _check_columns(df: pd.DataFrame, target: str) -> list[str]:
    """Refuse duplicate column names, a missing target, no features or fewer than 2 rows; return the features."""
    columns = list(df.columns)
    dupes = sorted({c for c in columns if columns.count(c) > 1})
    if dupes:
        raise InvalidInputError(f"the table has duplicate column names {dupes}")
    if target not in columns:
        raise InvalidInputError(f"target column {target!r} not found; the columns are {columns}")
    features = [c for c in columns if c != target]
    if not features:
        raise InvalidInputError(f"the table has no feature columns besides the target {target!r}")
    if len(df) < 2:
        raise InvalidInputError(f"the table has {len(df)} rows; need at least 2")
    return features


def _check_no_missing(df: pd.DataFrame, columns: list[str], text_columns: list[str] = ()) -> None:
    """Refuse missing values (NaN / None) in ``columns`` (the target), and empty or blank strings in them and in
    ``text_columns`` (counted per column). A feature may be missing (NaN): the audit keeps its gaps
    (:class:`~recourse_privacy.data.preprocessing.MissingFlag`, a categorical column's level ``nan``), and the
    user's model gets them as NaN; a blank string is no gap but a typo, and is refused."""
    columns = list(columns)
    checked = columns + [c for c in text_columns if c not in columns]
    missing = pd.DataFrame(False, index=df.index, columns=checked)
    missing[columns] = df[columns].isna()  # a gap: only where none may be
    for col in checked:
        if not _is_numeric(df[col]):  # a blank text: nowhere
            missing[col] |= df[col].notna() & df[col].astype(str).str.strip().eq("")
    counts = missing.sum()
    bad = counts[counts > 0]
    if len(bad):
        detail = ", ".join(f"{c!r} ({n})" for c, n in bad.items())
        raise InvalidInputError(
            f"missing or empty values in columns {detail}, in {int(missing.any(axis=1).sum())} "
            "rows in all: the target cannot be missing, and a blank text is no gap (a feature's gap is an empty "
            "cell or NaN); drop those rows or fix the blanks"
        )


def _categorical_columns(df: pd.DataFrame, features: list[str], listed: set[str]) -> list[str]:
    """The listed columns and every non-numeric one; refuse text with too many distinct values (free text, ids)."""
    cat_cols: list[str] = []
    for col in features:
        s = df[col]
        if col in listed:
            cat_cols.append(col)
        elif _is_numeric(s):
            continue
        else:
            n_unique = s.nunique()
            if len(s) > _MIN_ROWS_FOR_UNIQUE_CHECK and n_unique > _MAX_UNIQUE_FRACTION * len(s):
                raise InvalidInputError(
                    f"column {col!r} is neither numeric nor a plausible categorical: "
                    f"{n_unique} distinct values in {len(s)} rows (e.g. {_preview(s.unique(), 3)}); "
                    "drop it (free text or an identifier), or list it in categorical=... "
                    "to force one-hot encoding"
                )
            cat_cols.append(col)
    return cat_cols


def load_tabular(
    path: str | Path,
    target: str,
    *,
    categorical: Sequence[str] | None = None,
    immutable: Sequence[str] = (),
    increasing: Sequence[str] = (),
    positive_label: Any = None,
) -> Dataset:
    """Load a CSV (``.csv``, ``.tsv``, compressed CSV) or Parquet file as a :class:`Dataset`.

    ``target`` is the binary label column: 0/1 or False/True are used as is, any other two
    values need ``positive_label`` (mapped to 1, the favourable outcome). Non-numeric columns
    are categorical whether listed in ``categorical`` or not; listing a numeric column makes
    it categorical too. Raises ValueError, before any computation, for a missing or
    non-binary target, missing/empty values, free-text columns (> 50% distinct values among
    more than 20 rows, unless listed in ``categorical``) and unknown names in
    ``categorical`` / ``immutable`` / ``increasing``. The literal string ``None`` is read as
    a category, not as missing.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise MissingFileError(f"no such file: {path}")
    df = _read(path)
    stem = path.name.split(".")[0] or "tabular"
    return validate_frame(
        df,
        target,
        categorical=categorical,
        immutable=immutable,
        increasing=increasing,
        positive_label=positive_label,
        name=stem,
        description=f"user table {path.name}",
    )
