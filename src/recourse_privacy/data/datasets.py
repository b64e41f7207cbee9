"""The built-in datasets: one ``@register_dataset`` declaration each, with all that describes it.

Each declaration carries the dataset's description, what label 1 means, its public domain
metadata (:mod:`~recourse_privacy.data.domain`) and, for a public file, its URL and SHA-256
(checked on download and whenever the file is read, :mod:`~recourse_privacy.data.files`); the
registration order (adult, heloc, compas, diabetes, synthetic, breast_cancer, digits) is the
order ``recourse-privacy list dataset`` shows. A new dataset is one more declaration here (or,
for a third party, one module of its own, :func:`~recourse_privacy.data.register_dataset`);
:func:`~recourse_privacy.data.load_dataset` loads any of them. Synthetic data and the two
scikit-learn datasets (breast_cancer, digits) need no file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy.data.dataset import Dataset
from recourse_privacy.data.domain import ADULT, COMPAS, DIABETES, HELOC
from recourse_privacy.data.domain import DIABETES_MEDICATIONS as _DIABETES_MEDICATIONS
from recourse_privacy.data.registry import lookup, register_dataset
from recourse_privacy.data.synthetic import SYNTHETIC_DESCRIPTION, make_synthetic
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import RandomState

__all__ = ["CF_DATA_COMMIT", "DIABETES_ZIP_URL"]

#: the commit of CARLA's cf-data repository the adult, heloc and compas files are taken from
CF_DATA_COMMIT = "2d56677095bd11deba5d8e3731f8941b95e0a880"
_CF_DATA_BASE = f"https://raw.githubusercontent.com/carla-recourse/cf-data/{CF_DATA_COMMIT}"
DIABETES_ZIP_URL = "https://archive.ics.uci.edu/static/public/296/diabetes+130-us+hospitals+for+years+1999-2008.zip"


def _declared(name: str) -> dict:
    """The description and public domain a dataset declares, for the Dataset its loader returns."""
    entry = lookup(name)
    return {"description": entry.description, "domain": entry.meta.get("public_domain")}


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
    "adult",
    description="UCI Adult census income (CARLA cf-data version, binarised categoricals)",
    label="income > 50K",
    domain=ADULT,
    source="file",
    file="adult.csv",
    url=f"{_CF_DATA_BASE}/adult.csv",
    sha256="e98ef37848b34919802d9e110718dd02ccbc8ec0369677f92bb1fd40b71eccdc",
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
        **_declared("adult"),
    )


@register_dataset(
    "heloc",
    description="FICO Home Equity Line of Credit (CARLA cf-data version)",
    label="Good risk performance",
    domain=HELOC,
    source="file",
    file="heloc.csv",
    url=f"{_CF_DATA_BASE}/heloc.csv",
    sha256="6a668dddbd2b59aed119c0169c562d54ad6a462580ca783628e88cbc59315d41",
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
        **_declared("heloc"),
    )


@register_dataset(
    "compas",
    description="ProPublica COMPAS (CARLA cf-data version)",
    label="not scored high risk",
    domain=COMPAS,
    source="file",
    file="compas.csv",
    url=f"{_CF_DATA_BASE}/compas.csv",
    sha256="e99430e4bdeebc858ba22726be3c3924c8435e6c890e2ae7f52d0411a3cc0516",
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
        **_declared("compas"),
    )


@register_dataset(
    "diabetes",
    description="UCI Diabetes 130-US hospitals 1999-2008, encoding of Shokri et al. 2021",
    label="readmitted within 30 days",
    domain=DIABETES,
    source="file",
    file="diabetic_data.csv",
    url=DIABETES_ZIP_URL,
    member="diabetic_data.csv",
    sha256="0689e7ec031237dc63031b938805c48377748761a3b26acab621567afa24df97",
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
        **_declared("diabetes"),
    )


# --------------------------------------------------------------------------------------
# Generated and scikit-learn datasets
# --------------------------------------------------------------------------------------


@register_dataset(
    "synthetic",
    description=SYNTHETIC_DESCRIPTION,
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


@register_dataset(
    "breast_cancer",
    description="Wisconsin diagnostic breast cancer (scikit-learn)",
    label="benign",
    source="scikit-learn",
)
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
        description=lookup("breast_cancer").description,
    )


@register_dataset(
    "digits",
    description="8x8 handwritten digits (scikit-learn), made binary",
    source="scikit-learn",
    options=("positive", "digits"),
)
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
        description=f"{lookup('digits').description}: {desc}",
    )
