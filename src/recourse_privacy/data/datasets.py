"""The built-in datasets, their files and :func:`load_dataset`, which loads any registered one.

Every dataset is an entry of :data:`~recourse_privacy.data.registry.DATASETS` (see
:mod:`recourse_privacy.data.registry`); the built-in loaders are registered here, in the order
adult, heloc, compas, diabetes, synthetic, breast_cancer, digits.

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

import json
import os
import shutil
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import ChecksumError, Dataset
from recourse_privacy.data.domain import DIABETES_MEDICATIONS as _DIABETES_MEDICATIONS
from recourse_privacy.data.domain import DOMAINS
from recourse_privacy.data.registry import (
    DATASET_DESCRIPTIONS,
    DATASETS,
    REAL_DATASETS,
    SIZING_OPTIONS,
    register_dataset,
)
from recourse_privacy.data.synthetic import SYNTHETIC_DESCRIPTION, make_synthetic
from recourse_privacy.errors import InvalidInputError, MissingFileError, UnknownNameError
from recourse_privacy.provenance import sha256_file
from recourse_privacy.validation import RandomState, as_generator

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
    "dataset_file",
    "verify_file",
    "source_url",
]

ENV_VAR = "RECOURSE_PRIVACY_DATA"

CF_DATA_COMMIT = "2d56677095bd11deba5d8e3731f8941b95e0a880"
_CF_DATA_BASE = f"https://raw.githubusercontent.com/carla-recourse/cf-data/{CF_DATA_COMMIT}"
DIABETES_ZIP_URL = "https://archive.ics.uci.edu/static/public/296/diabetes+130-us+hospitals+for+years+1999-2008.zip"


# The descriptions of the built-in datasets (registered with each loader below).
_DESCRIPTIONS: dict[str, str] = {
    "adult": "UCI Adult census income (CARLA cf-data version, binarised categoricals); 1 = income > 50K",
    "heloc": "FICO Home Equity Line of Credit (CARLA cf-data version); 1 = Good risk performance",
    "compas": "ProPublica COMPAS (CARLA cf-data version); 1 = not scored high risk",
    "diabetes": "UCI Diabetes 130-US hospitals 1999-2008, encoding of Shokri et al. 2021; "
    "1 = readmitted within 30 days",
    "synthetic": SYNTHETIC_DESCRIPTION,
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
        raise InvalidInputError(f"no public source known for {filename!r}") from None


def _expected_sha256(filename: str) -> str:
    text = resources.files("recourse_privacy.data").joinpath("checksums.json").read_text()
    sums = json.loads(text)
    if filename not in sums:
        raise MissingFileError(f"checksums.json has no entry for {filename!r}")
    return sums[filename]


def _sha256(path: Path) -> str:
    return sha256_file(path)


def verify_file(path: Path) -> Path:
    """``path`` if its SHA-256 is the one in ``checksums.json``, else a :class:`ChecksumError`.

    Runs whenever a data file is read, not only after a download; the hash is computed once
    per file and modification time (:func:`~recourse_privacy.provenance.sha256_file`).
    """
    expected = _expected_sha256(path.name)
    actual = sha256_file(path)
    if actual != expected:
        raise ChecksumError(
            f"{path} has SHA-256 {actual}, but checksums.json expects {expected}: the file is corrupted or "
            f"was edited. Delete it (it is downloaded again) or restore the original; to audit a modified "
            f"table on purpose, pass it as --data FILE --target COLUMN"
        )
    return path


def dataset_file(name: str, data_dir: str | Path | None = None, *, download: bool = True) -> Path | None:
    """The verified file a named dataset is read from, or None for generated data (synthetic, scikit-learn's)."""
    entry = _lookup(name)
    if entry.meta.get("source") != "file":
        return None
    filename = entry.meta["file"]
    return (
        fetch_file(filename, data_dir, download=download) if filename in _SOURCES else _local_file(filename, data_dir)
    )


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
                    raise MissingFileError(f"{member} is not inside the archive {url}")
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


def fetch_file(filename: str, data_dir: str | Path | None = None, *, download: bool = True) -> Path:
    """Path of a real-data file: from the data directory, else the cache, else downloaded.

    Raises FileNotFoundError (naming the file, the directories searched, the environment
    variable and the public URL) when it is absent and ``download`` is False or the download
    fails, and :class:`ChecksumError` when a downloaded file has the wrong SHA-256.
    """
    if filename not in _SOURCES:
        raise InvalidInputError(f"unknown data file {filename!r}; known: {sorted(_SOURCES)}")
    primary = resolve_data_dir(data_dir)
    cache = default_cache_dir()
    looked_in = [primary, cache]
    for directory in looked_in:
        if (directory / filename).is_file():
            return verify_file(directory / filename)
    if not download:
        raise MissingFileError(_not_found_message(filename, looked_in) + " (Not downloaded: download=False.)")
    try:
        return _download(filename, cache)
    except ChecksumError:
        raise
    except (OSError, zipfile.BadZipFile) as err:  # URLError is an OSError
        reason = getattr(err, "reason", None) or err
        raise MissingFileError(_not_found_message(filename, looked_in, str(reason))) from err


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
        raise InvalidInputError(f"{path} lacks the columns {missing}; is it the right file?")


@register_dataset(
    "adult", description=_DESCRIPTIONS["adult"], domain=DOMAINS["adult"].summary(), source="file", file="adult.csv"
)
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
        description=_DESCRIPTIONS["adult"],
        domain=DOMAINS["adult"],
    )


@register_dataset(
    "heloc", description=_DESCRIPTIONS["heloc"], domain=DOMAINS["heloc"].summary(), source="file", file="heloc.csv"
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
        description=_DESCRIPTIONS["heloc"],
        domain=DOMAINS["heloc"],
    )


@register_dataset(
    "compas", description=_DESCRIPTIONS["compas"], domain=DOMAINS["compas"].summary(), source="file", file="compas.csv"
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
        description=_DESCRIPTIONS["compas"],
        domain=DOMAINS["compas"],
    )


@register_dataset(
    "diabetes",
    description=_DESCRIPTIONS["diabetes"],
    domain=DOMAINS["diabetes"].summary(),
    source="file",
    file="diabetic_data.csv",
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
        description=_DESCRIPTIONS["diabetes"],
        domain=DOMAINS["diabetes"],
    )


# --------------------------------------------------------------------------------------
# Generated and scikit-learn datasets
# --------------------------------------------------------------------------------------


@register_dataset(
    "synthetic",
    description=_DESCRIPTIONS["synthetic"],
    source="generated",
    domain="x0..x{d-1}: numeric [-(class_sep + 8), class_sep + 8]",
    options=("n_samples", "n_features", "random_state", "class_sep", "flip_y", "dtype"),
)
def _load_synthetic(
    *,
    n_samples: int | None = None,
    n_features: int | None = None,
    random_state: RandomState = None,
    class_sep: float = 1.0,
    flip_y: float = 0.0,
    dtype: str = "auto",
) -> Dataset:
    """:func:`make_synthetic` with the audit's defaults: 15000 rows, 100 features.

    ``dtype`` "auto": float32 storage where the float64 frame would pass 256 MiB (Figure 2's d = 5,000
    and 7,000; values within 2^-24 relative of the float64 draws), float64 below.
    """
    n = 15000 if n_samples is None else n_samples
    d = 100 if n_features is None else n_features
    if dtype == "auto":
        dtype = "float32" if int(n) * int(d) * 8 > SYNTHETIC_FLOAT32_BYTES else "float64"
    return make_synthetic(n, d, class_sep=class_sep, flip_y=flip_y, random_state=random_state, dtype=dtype)


#: above this many bytes of float64, the synthetic frame is stored in float32 (dtype "auto")
SYNTHETIC_FLOAT32_BYTES = 2**28


@register_dataset("breast_cancer", description=_DESCRIPTIONS["breast_cancer"], source="scikit-learn")
def _load_breast_cancer() -> Dataset:
    """Wisconsin breast cancer: 569 rows, 30 numeric features, label 1 = benign."""
    from sklearn.datasets import load_breast_cancer  # lazy: scikit-learn is slow to import

    bunch = load_breast_cancer(as_frame=True)
    X = bunch.data.astype(np.float64).reset_index(drop=True)
    return Dataset(
        name="breast_cancer",
        X=X,
        y=bunch.target.to_numpy(dtype=np.int64),  # sklearn: 1 = benign
        target="benign",
        description=_DESCRIPTIONS["breast_cancer"],
    )


@register_dataset("digits", description=_DESCRIPTIONS["digits"], source="scikit-learn", options=("positive", "digits"))
def _load_digits(positive: int | Sequence[int] | None = None, digits: Sequence[int] | None = None) -> Dataset:
    """Digits made binary: ``digits=(a, b)`` keeps those two digits (label 1 = a);
    otherwise one digit (or a set of digits) ``positive`` against the rest, default 1.
    """
    from sklearn.datasets import load_digits  # lazy: scikit-learn is slow to import

    bunch = load_digits(as_frame=True)
    X = bunch.data.astype(np.float64)
    t = bunch.target.to_numpy()
    if digits is not None:
        if positive is not None:
            raise InvalidInputError("digits: give either positive=... or digits=(a, b), not both")
        pair = [int(d) for d in digits]
        if len(pair) != 2 or pair[0] == pair[1] or not all(0 <= d <= 9 for d in pair):
            raise InvalidInputError(f"digits must be two different digits 0-9, got {digits!r}")
        keep = np.isin(t, pair)
        X, y = X[keep], (t[keep] == pair[0])
        desc = f"digit {pair[0]} (1) against digit {pair[1]} (0)"
    else:
        pos = [1] if positive is None else ([int(positive)] if np.isscalar(positive) else [int(p) for p in positive])
        if not pos or not all(0 <= d <= 9 for d in pos) or len(set(pos)) >= 10:
            raise InvalidInputError(f"positive must be digits 0-9 (not all ten), got {positive!r}")
        y = np.isin(t, pos)
        desc = f"digit(s) {sorted(set(pos))} (1) against the rest (0)"
    return Dataset(
        name="digits",
        X=X.reset_index(drop=True),
        y=np.asarray(y, dtype=np.int64),
        target="digit",
        description=f"{_DESCRIPTIONS['digits']}: {desc}",
    )


# --------------------------------------------------------------------------------------
# The public entry point
# --------------------------------------------------------------------------------------


def _lookup(name: str) -> Any:
    """The registry entry of ``name`` (as given, else lower case with ``-`` as ``_``)."""
    if not isinstance(name, str):
        raise InvalidInputError(f"dataset name must be a string, got {type(name).__name__}")
    for key in dict.fromkeys((name, name.strip().lower().replace("-", "_"))):
        if key in DATASETS:
            return DATASETS.get(key)
    raise UnknownNameError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise InvalidInputError(f"{name} must be a positive int, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a positive int, got {value!r}") from None


def _local_file(filename: str, data_dir: str | Path | None) -> Path:
    """A file with no public source (a third party's dataset): the data directory, else the cache."""
    looked_in = list(dict.fromkeys((resolve_data_dir(data_dir), default_cache_dir())))
    for directory in looked_in:
        if (directory / filename).is_file():
            return directory / filename
    where = " or ".join(map(str, looked_in))
    raise MissingFileError(
        f"{filename} not found in {where}. Put it in a directory and pass data_dir=... or set "
        f"the environment variable {ENV_VAR} to that directory."
    )


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
    """Load a dataset of :data:`DATASETS` by name (``-`` and upper case are accepted too).

    Real datasets are read from ``data_dir`` / ``$RECOURSE_PRIVACY_DATA`` / the user cache
    (downloaded there when absent and ``download`` is True). ``synthetic`` is generated with
    ``n_samples`` (default 15000) rows and ``n_features`` (default 100) columns, options
    ``class_sep`` and ``flip_y``; ``digits`` takes ``positive=`` or ``digits=(a, b)``. For
    the other datasets ``n_samples`` draws that many rows at random without replacement
    (seeded by ``random_state``), and ``n_features`` is an error. The options a dataset
    accepts are those of its registry entry; any other raises :class:`InvalidInputError`.
    """
    entry = _lookup(name)
    key = entry.name
    accepted: tuple[str, ...] = tuple(entry.meta.get("options", ()))
    if n_samples is not None:
        n_samples = _as_int(n_samples, "n_samples")
        if n_samples < 1:
            raise InvalidInputError(f"n_samples must be a positive int, got {n_samples!r}")
    if n_features is not None and "n_features" not in accepted:
        sized = [e.name for e in DATASETS.entries() if "n_features" in e.meta.get("options", ())]
        raise InvalidInputError(
            f"n_features applies only to the datasets that generate their features "
            f"({', '.join(sized) or 'none'}), not {key!r}"
        )
    extra = tuple(o for o in accepted if o not in SIZING_OPTIONS)
    unknown = sorted(set(options) - set(extra))
    if unknown:
        hint = f"; it accepts {', '.join(extra)}" if extra else "; it accepts none"
        raise InvalidInputError(f"unknown option(s) {unknown} for dataset {key!r}{hint}")

    kwargs = dict(options)
    given = {
        "n_samples": n_samples,
        "random_state": random_state,
        "n_features": None if n_features is None else _as_int(n_features, "n_features"),
    }
    kwargs.update({k: v for k, v in given.items() if k in accepted})
    args: tuple[Path, ...] = ()
    if entry.meta.get("source") == "file":
        filename = entry.meta["file"]
        path = (
            fetch_file(filename, data_dir, download=download)
            if filename in _SOURCES
            else _local_file(filename, data_dir)
        )
        args = (path,)
    dataset = entry.obj(*args, **kwargs)
    if not isinstance(dataset, Dataset):
        raise InvalidInputError(
            f"the loader of dataset {key!r} ({entry.module}) returned {type(dataset).__name__}, not a Dataset"
        )

    if n_samples is not None and "n_samples" not in accepted:
        if n_samples > dataset.n_rows:
            raise InvalidInputError(f"n_samples={n_samples} exceeds the {dataset.n_rows} rows of dataset {key!r}")
        if n_samples < dataset.n_rows:
            idx = as_generator(random_state).choice(dataset.n_rows, size=n_samples, replace=False)
            dataset = dataset.subset(idx)
    return dataset
