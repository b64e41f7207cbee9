"""The :class:`Dataset` type and the catalogue of named datasets.

Real datasets (adult, heloc, compas, diabetes) are read from a data directory, chosen as

1. the ``data_dir`` argument, else
2. the environment variable ``RECOURSE_PRIVACY_DATA``, else
3. the user cache ``$XDG_CACHE_HOME/recourse-privacy`` (or ``~/.cache/recourse-privacy``).

A file absent there (and from the cache) is downloaded, when ``download=True``, from its
public source into the cache: written to a temporary file, checked against the SHA-256 in
``checksums.json``, then renamed into place. Synthetic data and the two scikit-learn
datasets (breast_cancer, digits) need no file.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recourse_privacy.data.pools import RandomState, as_generator

__all__ = [
    "Dataset",
    "DATASETS",
    "REAL_DATASETS",
    "DATASET_DESCRIPTIONS",
    "ENV_VAR",
    "ChecksumError",
    "load_dataset",
    "default_cache_dir",
    "resolve_data_dir",
    "fetch_file",
    "source_url",
]

DATASETS: tuple[str, ...] = (
    "adult",
    "heloc",
    "compas",
    "diabetes",
    "synthetic",
    "breast_cancer",
    "digits",
)
REAL_DATASETS: tuple[str, ...] = ("adult", "heloc", "compas", "diabetes")

ENV_VAR = "RECOURSE_PRIVACY_DATA"

CF_DATA_COMMIT = "2d56677095bd11deba5d8e3731f8941b95e0a880"
_CF_DATA_BASE = f"https://raw.githubusercontent.com/carla-recourse/cf-data/{CF_DATA_COMMIT}"
DIABETES_ZIP_URL = (
    "https://archive.ics.uci.edu/static/public/296/"
    "diabetes+130-us+hospitals+for+years+1999-2008.zip"
)

DATASET_DESCRIPTIONS: dict[str, str] = {
    "adult": "UCI Adult census income (CARLA cf-data version, binarised categoricals); "
    "1 = income > 50K",
    "heloc": "FICO Home Equity Line of Credit (CARLA cf-data version); 1 = Good risk performance",
    "compas": "ProPublica COMPAS (CARLA cf-data version); 1 = not scored high risk",
    "diabetes": "UCI Diabetes 130-US hospitals 1999-2008, encoding of Shokri et al. 2021; "
    "1 = readmitted within 30 days",
    "synthetic": "Two Gaussian classes around random hypercube vertices "
    "(Shokri et al. 2021; Pawelczyk et al. 2023)",
    "breast_cancer": "Wisconsin diagnostic breast cancer (scikit-learn); 1 = benign",
    "digits": "8x8 handwritten digits (scikit-learn), made binary",
}

# For every remote file: (url, name of the member inside a zip archive or None).
_SOURCES: dict[str, tuple[str, str | None]] = {
    "adult.csv": (f"{_CF_DATA_BASE}/adult.csv", None),
    "heloc.csv": (f"{_CF_DATA_BASE}/heloc.csv", None),
    "compas.csv": (f"{_CF_DATA_BASE}/compas.csv", None),
    "diabetic_data.csv": (DIABETES_ZIP_URL, "diabetic_data.csv"),
}

# The URL opener, module-level so that tests can replace it (monkeypatch) to work offline.
_urlopen: Callable[..., Any] = urllib.request.urlopen
_DOWNLOAD_TIMEOUT = 60.0


class ChecksumError(ValueError):
    """A downloaded file's SHA-256 differs from the one recorded in checksums.json."""


# --------------------------------------------------------------------------------------
# The Dataset type
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """A binary classification dataset with the feature constraints recourse must respect.

    ``X`` holds the raw features (label removed): categorical columns as strings (object
    dtype), numeric ones as float64. ``y`` is int64 0/1 with 1 = favourable outcome.
    ``immutable`` names raw columns recourse must not change; ``increasing`` raw columns
    that may only increase. Construction checks the shapes, the 0/1 labels and that every
    named column exists.
    """

    name: str
    X: pd.DataFrame
    y: np.ndarray
    target: str
    categorical: tuple[str, ...] = ()
    immutable: tuple[str, ...] = ()
    increasing: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.X, pd.DataFrame):
            raise TypeError(f"Dataset.X must be a pandas DataFrame, got {type(self.X).__name__}")
        y = np.asarray(self.y)
        if y.ndim != 1 or len(y) != len(self.X):
            raise ValueError(
                f"Dataset {self.name!r}: y has shape {y.shape} but X has {len(self.X)} rows"
            )
        if len(y) and not np.isin(y, (0, 1)).all():
            bad = pd.unique(y[~np.isin(y, (0, 1))])[:5]
            raise ValueError(f"Dataset {self.name!r}: y must be 0/1, found values {list(bad)}")
        object.__setattr__(self, "y", y.astype(np.int64, copy=False))
        if self.target in self.X.columns:
            raise ValueError(f"Dataset {self.name!r}: the label column {self.target!r} is in X")
        columns = set(map(str, self.X.columns))
        for field in ("categorical", "immutable", "increasing"):
            names = tuple(getattr(self, field))
            object.__setattr__(self, field, names)
            unknown = [c for c in names if c not in columns]
            if unknown:
                raise ValueError(
                    f"Dataset {self.name!r}: {field} names unknown columns {unknown}; "
                    f"columns are {list(self.X.columns)}"
                )

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return len(self.X)

    @property
    def n_features(self) -> int:
        """Number of raw feature columns (before any encoding)."""
        return self.X.shape[1]

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Raw feature column names, in order."""
        return tuple(map(str, self.X.columns))

    def subset(self, indices: Sequence[int] | np.ndarray) -> Dataset:
        """The rows ``indices`` (positions) as a new Dataset with a fresh 0..n-1 index."""
        idx = np.asarray(indices, dtype=np.int64)
        return Dataset(
            name=self.name,
            X=self.X.iloc[idx].reset_index(drop=True),
            y=self.y[idx],
            target=self.target,
            categorical=self.categorical,
            immutable=self.immutable,
            increasing=self.increasing,
            description=self.description,
        )


def _make_frame(df: pd.DataFrame, categorical: Sequence[str]) -> pd.DataFrame:
    """Categorical columns to object-dtype strings, all others to float64."""
    out = {}
    cat = set(categorical)
    for col in df.columns:
        if col in cat:
            out[col] = df[col].astype(str).astype(object)
        else:
            out[col] = df[col].astype(np.float64)
    return pd.DataFrame(out, index=pd.RangeIndex(len(df)))


# --------------------------------------------------------------------------------------
# Locating, downloading and checking files
# --------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """The user cache directory: ``$XDG_CACHE_HOME/recourse-privacy`` or ``~/.cache/...``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "recourse-privacy"


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """The directory to read real datasets from: argument, else env var, else the cache."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return default_cache_dir()


def source_url(filename: str) -> str:
    """The public URL a data file is downloaded from."""
    try:
        return _SOURCES[filename][0]
    except KeyError:
        raise ValueError(f"no public source known for {filename!r}") from None


def _expected_sha256(filename: str) -> str:
    text = resources.files("recourse_privacy.data").joinpath("checksums.json").read_text()
    sums = json.loads(text)
    if filename not in sums:
        raise KeyError(f"checksums.json has no entry for {filename!r}")
    return sums[filename]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _not_found_message(filename: str, looked_in: list[Path], reason: str = "") -> str:
    url, member = _SOURCES[filename]
    where = " or ".join(str(p) for p in dict.fromkeys(looked_in))
    fetch = f"{url} (extract {member} from the zip)" if member else url
    msg = (
        f"{filename} not found in {where}. Put it in a directory and pass data_dir=... or set "
        f"the environment variable {ENV_VAR} to that directory; you can fetch it by hand from "
        f"{fetch} (cache directory: {default_cache_dir()})."
    )
    if reason:
        msg += f" Automatic download failed: {reason}"
    return msg


def _download(filename: str, cache_dir: Path) -> Path:
    """Download ``filename`` into ``cache_dir`` via a temp file; verify SHA-256; rename."""
    url, member = _SOURCES[filename]
    expected = _expected_sha256(filename)
    cache_dir.mkdir(parents=True, exist_ok=True)
    dest = cache_dir / filename
    tmp_paths: list[Path] = []

    def new_tmp(suffix: str) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{filename}.", suffix=suffix, dir=cache_dir)
        os.close(fd)
        tmp_paths.append(Path(name))
        return Path(name)

    try:
        raw = new_tmp(".part")
        with _urlopen(url, timeout=_DOWNLOAD_TIMEOUT) as response, open(raw, "wb") as out:
            shutil.copyfileobj(response, out)
        payload = raw
        if member is not None:
            payload = new_tmp(".extract")
            with zipfile.ZipFile(raw) as zf:
                names = [n for n in zf.namelist() if n.rsplit("/", 1)[-1] == member]
                if not names:
                    raise FileNotFoundError(f"{member} is not inside the archive {url}")
                with zf.open(names[0]) as src, open(payload, "wb") as out:
                    shutil.copyfileobj(src, out)
        actual = _sha256(payload)
        if actual != expected:
            raise ChecksumError(
                f"checksum mismatch for {filename} downloaded from {url}: SHA-256 is {actual}, "
                f"expected {expected}; the download was discarded"
            )
        os.replace(payload, dest)
    finally:
        for p in tmp_paths:
            p.unlink(missing_ok=True)
    return dest


def fetch_file(
    filename: str, data_dir: str | Path | None = None, *, download: bool = True
) -> Path:
    """Path of a real-data file: from the data directory, else the cache, else downloaded.

    Raises FileNotFoundError (naming the file, the directories searched, the environment
    variable and the public URL) when it is absent and ``download`` is False or the download
    fails, and :class:`ChecksumError` when a downloaded file has the wrong SHA-256.
    """
    if filename not in _SOURCES:
        raise ValueError(f"unknown data file {filename!r}; known: {sorted(_SOURCES)}")
    primary = resolve_data_dir(data_dir)
    cache = default_cache_dir()
    looked_in = [primary, cache]
    for directory in looked_in:
        if (directory / filename).is_file():
            return directory / filename
    if not download:
        raise FileNotFoundError(
            _not_found_message(filename, looked_in) + " (Not downloaded: download=False.)"
        )
    try:
        return _download(filename, cache)
    except ChecksumError:
        raise
    except (OSError, zipfile.BadZipFile) as err:  # URLError is an OSError
        reason = getattr(err, "reason", None) or err
        raise FileNotFoundError(_not_found_message(filename, looked_in, str(reason))) from err


# --------------------------------------------------------------------------------------
# Loaders of the real datasets
# --------------------------------------------------------------------------------------

_ADULT_CATEGORICAL = (
    "workclass",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
)

_DIABETES_NUMERIC = (
    "time_in_hospital",
    "num_lab_procedures",
    "num_procedures",
    "num_medications",
    "number_outpatient",
    "number_emergency",
    "number_inpatient",
    "number_diagnoses",
)
_DIABETES_MEDICATIONS = (
    "metformin",
    "repaglinide",
    "nateglinide",
    "chlorpropamide",
    "glimepiride",
    "acetohexamide",
    "glipizide",
    "glyburide",
    "tolbutamide",
    "pioglitazone",
    "rosiglitazone",
    "acarbose",
    "miglitol",
    "troglitazone",
    "tolazamide",
    "examide",
    "citoglipton",
    "insulin",
    "glyburide-metformin",
    "glipizide-metformin",
    "glimepiride-pioglitazone",
    "metformin-rosiglitazone",
    "metformin-pioglitazone",
)
_DIABETES_CATEGORICAL = (
    "gender",
    "race",
    "age",
    "discharge_disposition_id",
    "max_glu_serum",
    "A1Cresult",
    *_DIABETES_MEDICATIONS,
    "change",
    "diabetesMed",
)


def _check_columns(df: pd.DataFrame, needed: Sequence[str], path: Path) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{path} lacks the columns {missing}; is it the right file?")


def _load_adult(path: Path) -> Dataset:
    """Adult (cf-data): 13 features, label ``income`` (1 = > 50K)."""
    df = pd.read_csv(path)
    _check_columns(df, ("income", *_ADULT_CATEGORICAL), path)
    X = _make_frame(df.drop(columns="income"), _ADULT_CATEGORICAL)
    return Dataset(
        name="adult",
        X=X,
        y=df["income"].to_numpy(dtype=np.int64),
        target="income",
        categorical=_ADULT_CATEGORICAL,
        immutable=("sex", "race"),
        increasing=("age", "education-num"),
        description=DATASET_DESCRIPTIONS["adult"],
    )


def _load_heloc(path: Path) -> Dataset:
    """HELOC (cf-data): 21 numeric features, label ``RiskPerformance`` (1 = Good).

    No column is immutable or monotone by default: the features are credit-bureau
    aggregates that can move either way.
    """
    df = pd.read_csv(path)
    _check_columns(df, ("RiskPerformance",), path)
    X = _make_frame(df.drop(columns="RiskPerformance"), ())
    return Dataset(
        name="heloc",
        X=X,
        y=df["RiskPerformance"].to_numpy(dtype=np.int64),
        target="RiskPerformance",
        categorical=(),
        immutable=(),
        increasing=(),
        description=DATASET_DESCRIPTIONS["heloc"],
    )


def _load_compas(path: Path) -> Dataset:
    """COMPAS (cf-data): 7 features, label ``score`` (1 = not high risk)."""
    df = pd.read_csv(path)
    categorical = ("c_charge_degree", "race", "sex")
    _check_columns(df, ("score", *categorical), path)
    X = _make_frame(df.drop(columns="score"), categorical)
    return Dataset(
        name="compas",
        X=X,
        y=df["score"].to_numpy(dtype=np.int64),
        target="score",
        categorical=categorical,
        immutable=("sex", "race"),
        increasing=("age",),
        description=DATASET_DESCRIPTIONS["compas"],
    )


def _load_diabetes(path: Path) -> Dataset:
    """Diabetes 130-US hospitals with the encoding of Shokri et al. (2021).

    8 numeric columns and 31 categorical ones (gender, race, age, discharge disposition,
    the two lab results, 23 medications, change, diabetesMed); all else (ids, weight, payer,
    specialty, diagnoses, admission type/source) is dropped. Read with
    ``keep_default_na=False`` so that the level ``None`` of max_glu_serum / A1Cresult is a
    category; ``?`` in race is kept as its own level. Label: ``readmitted == "<30"``.
    """
    cols = (*_DIABETES_NUMERIC, *_DIABETES_CATEGORICAL, "readmitted")
    df = pd.read_csv(path, keep_default_na=False, usecols=lambda c: c in set(cols))
    _check_columns(df, cols, path)
    df = df[list(cols)]
    X = _make_frame(df.drop(columns="readmitted"), _DIABETES_CATEGORICAL)
    return Dataset(
        name="diabetes",
        X=X,
        y=(df["readmitted"] == "<30").to_numpy(dtype=np.int64),
        target="readmitted",
        categorical=_DIABETES_CATEGORICAL,
        immutable=("gender", "race", "age"),
        increasing=(),
        description=DATASET_DESCRIPTIONS["diabetes"],
    )


_REAL_LOADERS: dict[str, tuple[str, Callable[[Path], Dataset]]] = {
    "adult": ("adult.csv", _load_adult),
    "heloc": ("heloc.csv", _load_heloc),
    "compas": ("compas.csv", _load_compas),
    "diabetes": ("diabetic_data.csv", _load_diabetes),
}


# --------------------------------------------------------------------------------------
# scikit-learn's embedded datasets
# --------------------------------------------------------------------------------------


def _load_breast_cancer() -> Dataset:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    X = bunch.data.astype(np.float64).reset_index(drop=True)
    return Dataset(
        name="breast_cancer",
        X=X,
        y=bunch.target.to_numpy(dtype=np.int64),  # sklearn: 1 = benign
        target="benign",
        description=DATASET_DESCRIPTIONS["breast_cancer"],
    )


def _load_digits(
    positive: int | Sequence[int] | None = None, digits: Sequence[int] | None = None
) -> Dataset:
    """Digits made binary: ``digits=(a, b)`` keeps those two digits (label 1 = a);
    otherwise one digit (or a set of digits) ``positive`` against the rest, default 1.
    """
    from sklearn.datasets import load_digits

    bunch = load_digits(as_frame=True)
    X = bunch.data.astype(np.float64)
    t = bunch.target.to_numpy()
    if digits is not None:
        if positive is not None:
            raise ValueError("digits: give either positive=... or digits=(a, b), not both")
        pair = [int(d) for d in digits]
        if len(pair) != 2 or pair[0] == pair[1] or not all(0 <= d <= 9 for d in pair):
            raise ValueError(f"digits must be two different digits 0-9, got {digits!r}")
        keep = np.isin(t, pair)
        X, y = X[keep], (t[keep] == pair[0])
        desc = f"digit {pair[0]} (1) against digit {pair[1]} (0)"
    else:
        pos = [1] if positive is None else (
            [int(positive)] if np.isscalar(positive) else [int(p) for p in positive]
        )
        if not pos or not all(0 <= d <= 9 for d in pos) or len(set(pos)) >= 10:
            raise ValueError(f"positive must be digits 0-9 (not all ten), got {positive!r}")
        y = np.isin(t, pos)
        desc = f"digit(s) {sorted(set(pos))} (1) against the rest (0)"
    return Dataset(
        name="digits",
        X=X.reset_index(drop=True),
        y=np.asarray(y, dtype=np.int64),
        target="digit",
        description=f"{DATASET_DESCRIPTIONS['digits']}: {desc}",
    )


# --------------------------------------------------------------------------------------
# The public entry point
# --------------------------------------------------------------------------------------


def _normalise_name(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    return key


def _reject_options(name: str, options: Mapping[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        hint = f"; it accepts {', '.join(allowed)}" if allowed else "; it accepts none"
        raise TypeError(f"unknown option(s) {unknown} for dataset {name!r}{hint}")


def load_dataset(
    name: str,
    data_dir: str | Path | None = None,
    *,
    n_samples: int | None = None,
    n_features: int | None = None,
    random_state: RandomState = None,
    download: bool = True,
    **options: Any,
) -> Dataset:
    """Load one of :data:`DATASETS` by name.

    Real datasets are read from ``data_dir`` / ``$RECOURSE_PRIVACY_DATA`` / the user cache
    (downloaded there when absent and ``download`` is True). ``synthetic`` is generated with
    ``n_samples`` (default 15000) rows and ``n_features`` (default 100) columns, options
    ``class_sep`` and ``flip_y``; ``digits`` takes ``positive=`` or ``digits=(a, b)``. For
    the other datasets ``n_samples`` draws that many rows at random without replacement
    (seeded by ``random_state``), and ``n_features`` is an error.
    """
    key = _normalise_name(name)
    if n_samples is not None and (isinstance(n_samples, bool) or int(n_samples) < 1):
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    if key == "synthetic":
        from recourse_privacy.data.synthetic import make_synthetic

        _reject_options(key, options, ("class_sep", "flip_y"))
        return make_synthetic(
            15000 if n_samples is None else int(n_samples),
            100 if n_features is None else int(n_features),
            random_state=random_state,
            **options,
        )
    if n_features is not None:
        raise ValueError(f"n_features applies only to the synthetic dataset, not {key!r}")
    if key in _REAL_LOADERS:
        _reject_options(key, options, ())
        filename, loader = _REAL_LOADERS[key]
        dataset = loader(fetch_file(filename, data_dir, download=download))
    elif key == "breast_cancer":
        _reject_options(key, options, ())
        dataset = _load_breast_cancer()
    else:  # digits
        _reject_options(key, options, ("positive", "digits"))
        dataset = _load_digits(**options)
    if n_samples is not None:
        n = int(n_samples)
        if n > dataset.n_rows:
            raise ValueError(
                f"n_samples={n} exceeds the {dataset.n_rows} rows of dataset {key!r}"
            )
        if n < dataset.n_rows:
            idx = as_generator(random_state).choice(dataset.n_rows, size=n, replace=False)
            dataset = dataset.subset(idx)
    return dataset
