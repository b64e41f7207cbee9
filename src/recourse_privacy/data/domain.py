"""Public domain metadata of a dataset: per feature its documented range, categories, mutability and direction.

A private recourse method (PrivRecourse, DPC) scales its inputs with PUBLIC bounds: bounds read
from the training rows would leak the extreme records and void the DP guarantee (Pentyala et
al. 2023 sec. 5.1; Yang et al. 2022). The metadata below are therefore taken from each
dataset's public documentation, never from the rows; ``tests/test_domain.py`` checks that every
row of the shipped files lies inside them (a check of the metadata, not a source of it).

Sources, per dataset:

- **adult** (UCI Adult, Kohavi and Becker 1996, as binarised in CARLA's cf-data): ``adult.names``
  of the UCI archive states the extraction rule ``AAGE>16 && AGI>100 && AFNLWGT>1 && HRSWK>0``;
  the Census Bureau's CPS March supplement codebook top-codes age at 90, the 5-digit income
  fields (capital gain, capital loss) at 99999 and the 2-digit usual hours worked at 99;
  ``education-num`` is the ordinal code of the 16 education levels (1 Preschool .. 16 Doctorate,
  adult.names). ``fnlwgt`` (the CPS final weight) has no documented upper limit: declared
  0..2,000,000 (an assumption, stated as such). Categories: the two levels cf-data keeps of each
  binarised column (its README).
- **heloc** (FICO xML Challenge, CARLA cf-data version): the FICO data dictionary
  (``heloc_data_dictionary-2.xlsx``) gives each feature's unit: months (``MSince*``,
  ``AverageMInFile``), counts (``Num*``), percentages (``Percent*``, 0..100) and the net fraction
  burdens (balance over credit limit in percent, which can exceed 100). Special values -7
  (condition not met), -8 (no usable trades) and -9 (no record) are imputed in the cf-data file
  (its README), so every lower bound is 0; on the raw FICO file they would lie below it. The
  dictionary gives no upper limit for months or counts: declared 1200 months (a century of
  credit history), counts 200 (0..100 for 6-month inquiry counts), burdens 0..1000 percent,
  and ``ExternalRiskEstimate`` (a consolidated risk-marker score) 0..100. Every feature is
  ``numeric``, not integer: cf-data imputed the special values with non-integer means.
- **compas** (ProPublica's COMPAS analysis, Larson et al. 2016, CARLA cf-data version): COMPAS
  scores adult defendants, so age >= 18 (declared upper 120); ``two_year_recid`` is ProPublica's
  0/1 recidivism flag; ``priors_count`` a count (declared 0..200); ``length_of_stay`` the days
  between jail entry and exit (declared 0..3650 days, widened to -1: see the comment below);
  categories as in cf-data.
- **diabetes** (Strack et al. 2014, UCI "Diabetes 130-US hospitals 1999-2008", id 296, and its
  ``IDs_mapping.csv``): ``time_in_hospital`` 1..14 days (the study's inclusion criterion);
  ``number_outpatient`` / ``number_emergency`` / ``number_inpatient`` are visits in the year
  before the encounter, so 0..365; ``number_diagnoses`` 1..16 (the diagnoses field holds at most
  16 entries); the other counts have no documented limit: declared ``num_lab_procedures``
  0..300, ``num_procedures`` 0..50, ``num_medications`` 0..300. Categories: the UCI variable
  table (age in ten-year brackets, ``?`` for unknown race, the 23 medication columns with
  No/Steady/Up/Down, the lab results with ``None``) and the discharge codes 1..30 of
  ``IDs_mapping.csv``.
- **synthetic** (:func:`~recourse_privacy.data.synthetic.make_synthetic`): each value is a class
  vertex coordinate +-class_sep plus a standard normal draw, so the public bounds are
  +-(class_sep + 8) (a draw beyond 8 standard deviations has probability 1.2e-15).

Immutable features and directions are the project's actionability choices (sex and race never
change; age and education only increase; Adult, COMPAS and Diabetes as in Pawelczyk et al. 2023
and CARLA). A user's table gets the same fields from ``--schema FILE`` (YAML, :func:`load_schema`)
or ``--bounds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy.errors import InvalidInputError, MissingFileError

__all__ = [
    "DOMAINS",
    "DIRECTIONS",
    "KINDS",
    "Domain",
    "FeatureDomain",
    "encoded_bounds",
    "load_schema",
    "schema_inputs",
    "synthetic_domain",
]

#: what a feature is: a real number, an integer, or one of a set of categories
KINDS = ("numeric", "integer", "categorical")
#: the way recourse may move a feature
DIRECTIONS = ("any", "increase")


@dataclass(frozen=True)
class FeatureDomain:
    """One feature's public metadata: ``kind``, ``lower``/``upper`` (numeric), ``categories``, ``immutable``, ``direction``."""

    name: str
    kind: str = "numeric"
    lower: float | None = None
    upper: float | None = None
    categories: tuple[str, ...] = ()
    immutable: bool = False
    direction: str = "any"

    def __post_init__(self) -> None:
        where = f"feature {self.name!r}"
        if self.kind not in KINDS:
            raise InvalidInputError(f"{where}: type must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.direction not in DIRECTIONS:
            raise InvalidInputError(
                f"{where}: direction must be one of {', '.join(DIRECTIONS)}; got {self.direction!r}"
            )
        object.__setattr__(self, "categories", tuple(str(c) for c in self.categories))
        if self.kind == "categorical":
            if self.lower is not None or self.upper is not None:
                raise InvalidInputError(f"{where}: a categorical feature takes categories, not bounds")
            if self.direction != "any":
                raise InvalidInputError(f"{where}: a categorical feature has no direction (a level is switched)")
            return
        if self.categories:
            raise InvalidInputError(f"{where}: categories apply to type categorical")
        for side in ("lower", "upper"):
            v = getattr(self, side)
            if v is not None:
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise InvalidInputError(f"{where}: {side} bound must be a number; got {v!r}") from None
                if not np.isfinite(v):
                    raise InvalidInputError(f"{where}: {side} bound must be finite; got {v!r}")
                object.__setattr__(self, side, v)
        if self.lower is not None and self.upper is not None and not self.lower < self.upper:
            raise InvalidInputError(f"{where}: needs lower < upper; got [{self.lower:g}, {self.upper:g}]")

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None

    def describe(self) -> str:
        """One line: the range or the categories, and the actionability."""
        if self.kind == "categorical":
            what = "{" + ", ".join(self.categories) + "}" if self.categories else "categories not listed"
        else:
            lo = "-" if self.lower is None else f"{self.lower:g}"
            hi = "-" if self.upper is None else f"{self.upper:g}"
            what = f"{self.kind} [{lo}, {hi}]"
        act = "immutable" if self.immutable else ("increase only" if self.direction == "increase" else "")
        return f"{what}{'; ' + act if act else ''}"


@dataclass(frozen=True)
class Domain:
    """The public metadata of every feature of a dataset, with the document it comes from.

    ``public``: False only for bounds read from the data (``--bounds-from-data``), which the
    outputs mark as not covered by any DP guarantee.
    """

    features: tuple[FeatureDomain, ...]
    source: str = ""
    public: bool = True
    _by_name: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [f.name for f in self.features]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidInputError(f"domain: features {dupes} are declared twice")
        object.__setattr__(self, "_by_name", {f.name: f for f in self.features})

    def __getitem__(self, name: str) -> FeatureDomain:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """Numeric column -> (lower, upper), for the features with both bounds."""
        return {f.name: (f.lower, f.upper) for f in self.features if f.kind != "categorical" and f.bounded}

    @property
    def categorical(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features if f.kind == "categorical")

    @property
    def immutable(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features if f.immutable)

    @property
    def increasing(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features if f.direction == "increase" and not f.immutable)

    def summary(self) -> str:
        """A short line for ``recourse-privacy list``."""
        parts = [f"{len(self.bounds)} bounded numeric, {len(self.categorical)} categorical"]
        if self.immutable:
            parts.append("immutable: " + ", ".join(self.immutable))
        if self.increasing:
            parts.append("increase only: " + ", ".join(self.increasing))
        return "; ".join(parts)

    def violations(self, X: pd.DataFrame) -> list[str]:
        """One line per feature of ``X`` whose values leave the declared range or categories (empty: all inside)."""
        out = []
        for f in self.features:
            if f.name not in X.columns:
                out.append(f"{f.name}: not a column of the data")
                continue
            s = X[f.name]
            if f.kind == "categorical":
                if f.categories:
                    extra = sorted(set(s.astype(str)) - set(f.categories))
                    if extra:
                        out.append(f"{f.name}: categories {extra[:5]} are not among {list(f.categories)}")
                continue
            v = s.to_numpy(dtype=np.float64)
            lo = -np.inf if f.lower is None else f.lower
            hi = np.inf if f.upper is None else f.upper
            bad = (v < lo) | (v > hi)
            if bad.any():
                out.append(f"{f.name}: {int(bad.sum())} value(s) outside [{lo:g}, {hi:g}] (e.g. {v[bad][0]:g})")
            if f.kind == "integer" and not np.all(v == np.round(v)):
                out.append(f"{f.name}: declared integer but holds non-integer values")
        return out


def _num(name: str, lower: float, upper: float, kind: str = "integer", **kw) -> FeatureDomain:
    return FeatureDomain(name, kind, lower, upper, **kw)


def _real(name: str, lower: float, upper: float, **kw) -> FeatureDomain:
    return FeatureDomain(name, "numeric", lower, upper, **kw)


def _cat(name: str, categories, **kw) -> FeatureDomain:
    return FeatureDomain(name, "categorical", categories=tuple(categories), **kw)


ADULT = Domain(
    (
        _num("age", 17, 90, direction="increase"),  # adult.names AAGE>16; CPS top-code 90
        _num("fnlwgt", 0, 2_000_000),  # CPS final weight, AFNLWGT>1; no documented maximum: declared
        _num("education-num", 1, 16, direction="increase"),  # 16 education levels (adult.names)
        _num("capital-gain", 0, 99_999),  # 5-digit CPS income field, top-coded 99999
        _num("capital-loss", 0, 99_999),  # same field width
        _num("hours-per-week", 1, 99),  # HRSWK>0; 2-digit CPS field
        _cat("workclass", ("Non-Private", "Private")),
        _cat("marital-status", ("Married", "Non-Married")),
        _cat("occupation", ("Managerial-Specialist", "Other")),
        _cat("relationship", ("Husband", "Non-Husband")),
        _cat("race", ("Non-White", "White"), immutable=True),
        _cat("sex", ("Female", "Male"), immutable=True),
        _cat("native-country", ("Non-US", "US")),
    ),
    source="UCI adult.names (extraction rule, 16 education levels); CPS March supplement codebook (top-codes)",
)

_MONTHS, _COUNT = (0, 1200), (0, 200)
HELOC = Domain(
    (
        _real("ExternalRiskEstimate", 0, 100),
        _real("MSinceOldestTradeOpen", *_MONTHS),
        _real("MSinceMostRecentTradeOpen", *_MONTHS),
        _real("AverageMInFile", *_MONTHS),
        _real("NumSatisfactoryTrades", *_COUNT),
        _real("NumTrades60Ever2DerogPubRec", *_COUNT),
        _real("NumTrades90Ever2DerogPubRec", *_COUNT),
        _real("PercentTradesNeverDelq", 0, 100),
        _real("MSinceMostRecentDelq", *_MONTHS),
        _real("NumTotalTrades", *_COUNT),
        _real("NumTradesOpeninLast12M", *_COUNT),
        _real("PercentInstallTrades", 0, 100),
        _real("MSinceMostRecentInqexcl7days", *_MONTHS),
        _real("NumInqLast6M", 0, 100),
        _real("NumInqLast6Mexcl7days", 0, 100),
        _real("NetFractionRevolvingBurden", 0, 1000),
        _real("NetFractionInstallBurden", 0, 1000),
        _real("NumRevolvingTradesWBalance", *_COUNT),
        _real("NumInstallTradesWBalance", *_COUNT),
        _real("NumBank2NatlTradesWHighUtilization", *_COUNT),
        _real("PercentTradesWBalance", 0, 100),
    ),
    source="FICO xML Challenge HELOC data dictionary (units; special values -7/-8/-9 imputed in cf-data)",
)

COMPAS = Domain(
    (
        _num("age", 18, 120, direction="increase"),  # COMPAS scores adult defendants
        _num("two_year_recid", 0, 1),  # ProPublica's 0/1 flag
        _cat("c_charge_degree", ("F", "M")),
        _cat("race", ("African-American", "Other"), immutable=True),
        _cat("sex", ("Female", "Male"), immutable=True),
        _num("priors_count", 0, 200),
        # days from jail entry to exit; ProPublica's rounded date difference gives -1 for a
        # release recorded before the booking time on the same day: the range is widened to -1
        _num("length_of_stay", -1, 3650),
    ),
    source="ProPublica COMPAS analysis (Larson et al. 2016) and CARLA cf-data compas.csv",
)

_MEDICATION = ("Down", "No", "Steady", "Up")
#: the 23 medication columns of the Diabetes data (Strack et al. 2014), each one of _MEDICATION
DIABETES_MEDICATIONS = (
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
_DISCHARGE = tuple(str(i) for i in range(1, 31))  # IDs_mapping.csv codes 1..30
DIABETES = Domain(
    (
        _num("time_in_hospital", 1, 14),  # Strack et al. 2014: stays of 1 to 14 days
        _num("num_lab_procedures", 0, 300),
        _num("num_procedures", 0, 50),
        _num("num_medications", 0, 300),
        _num("number_outpatient", 0, 365),  # visits in the preceding year
        _num("number_emergency", 0, 365),
        _num("number_inpatient", 0, 365),
        _num("number_diagnoses", 1, 16),
        _cat("gender", ("Female", "Male", "Unknown/Invalid"), immutable=True),
        _cat("race", ("?", "AfricanAmerican", "Asian", "Caucasian", "Hispanic", "Other"), immutable=True),
        _cat("age", tuple(f"[{a}-{a + 10})" for a in range(0, 100, 10)), immutable=True),
        _cat("discharge_disposition_id", _DISCHARGE),
        _cat("max_glu_serum", (">200", ">300", "None", "Norm")),
        _cat("A1Cresult", (">7", ">8", "None", "Norm")),
        *(_cat(m, _MEDICATION) for m in DIABETES_MEDICATIONS),
        _cat("change", ("Ch", "No")),
        _cat("diabetesMed", ("No", "Yes")),
    ),
    source="Strack et al. 2014; UCI Diabetes 130-US hospitals variable table and IDs_mapping.csv",
)

#: the metadata of the registered datasets with a fixed set of features
DOMAINS: Mapping[str, Domain] = {"adult": ADULT, "heloc": HELOC, "compas": COMPAS, "diabetes": DIABETES}

#: the half-width beyond class_sep of the synthetic data's public bounds (standard deviations)
SYNTHETIC_MARGIN = 8.0


def synthetic_domain(n_features: int, class_sep: float = 1.0) -> Domain:
    """The synthetic generator's public bounds: +-(class_sep + 8) per feature (see the module docstring)."""
    b = abs(float(class_sep)) + SYNTHETIC_MARGIN
    return Domain(
        tuple(FeatureDomain(f"x{j}", "numeric", -b, b) for j in range(int(n_features))),
        source=f"make_synthetic: vertex +-{class_sep:g} plus N(0, 1), bounds +-(class_sep + {SYNTHETIC_MARGIN:g})",
    )


# ------------------------------------------------------------------ a user's schema (YAML)
_FIELDS = ("type", "bounds", "lower", "upper", "categories", "immutable", "direction")


def load_schema(path: str | Path) -> Domain:
    """A user's ``--schema FILE``: YAML with the fields of the built-in metadata.

    ::

        source: our credit-policy manual, 2024 edition
        features:
          age: {type: integer, bounds: [18, 100], direction: increase}
          income: {bounds: [0, 1000000]}
          sex: {type: categorical, categories: [F, M], immutable: true}

    ``type`` is numeric (default), integer or categorical; ``bounds: [lo, hi]`` (or ``lower`` /
    ``upper``); ``direction`` any (default) or increase. Errors name the file and the feature.
    """
    import yaml

    path = Path(path).expanduser()
    if not path.is_file():
        raise MissingFileError(f"--schema: no such file: {path}")
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise InvalidInputError(f"--schema {path.name}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("features"), dict) or not doc["features"]:
        raise InvalidInputError(f"--schema {path.name}: needs a mapping 'features: {{column: {{...}}}}'")
    unknown_top = sorted(set(doc) - {"features", "source"})
    if unknown_top:
        raise InvalidInputError(f"--schema {path.name}: unknown keys {unknown_top}; use features and source")
    features = []
    for name, spec in doc["features"].items():
        spec = {} if spec is None else spec
        where = f"--schema {path.name}, feature {name!r}"
        if not isinstance(spec, dict):
            raise InvalidInputError(f"{where}: expected a mapping of {', '.join(_FIELDS)}")
        unknown = sorted(set(spec) - set(_FIELDS))
        if unknown:
            raise InvalidInputError(f"{where}: unknown keys {unknown}; use {', '.join(_FIELDS)}")
        lower, upper = spec.get("lower"), spec.get("upper")
        if "bounds" in spec:
            b = spec["bounds"]
            if not isinstance(b, (list, tuple)) or len(b) != 2 or "lower" in spec or "upper" in spec:
                raise InvalidInputError(f"{where}: bounds must be [lower, upper] (and not with lower/upper)")
            lower, upper = b
        try:
            features.append(
                FeatureDomain(
                    str(name),
                    str(spec.get("type", "numeric")),
                    lower,
                    upper,
                    tuple(spec.get("categories", ()) or ()),
                    bool(spec.get("immutable", False)),
                    str(spec.get("direction", "any")),
                )
            )
        except InvalidInputError as err:
            raise InvalidInputError(f"--schema {path.name}: {err}") from None
    return Domain(tuple(features), source=str(doc.get("source", f"user schema {path.name}")))


def schema_inputs(domain: Domain, given: Mapping) -> dict:
    """The data options (categorical, immutable, increasing, bounds) of a schema, merged with those ``given``.

    Options given on the command line keep their place; a column's ``--bounds`` wins over the
    schema's.
    """

    def merged(key: str, extra: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*tuple(given.get(key) or ()), *extra)))

    return {
        "categorical": merged("categorical", domain.categorical),
        "immutable": merged("immutable", domain.immutable),
        "increasing": merged("increasing", domain.increasing),
        "bounds": {**domain.bounds, **dict(given.get("bounds") or {})},
    }


# ------------------------------------------------------------------ bounds in the models' encoded units
def encoded_bounds(pre, bounds: Mapping[str, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Public (lower, upper) per encoded feature of a fitted Preprocessor, and the numeric columns lacking bounds.

    Numeric features: the raw ``bounds`` through the preprocessing's affine map
    (``encoded = (raw - unit_offset_) / unit_scale_``); one-hot features and missing-value
    indicators: the encoded images of 0 and 1 (no data needed). A numeric feature with no entry in ``bounds`` gets -inf/inf and
    is listed in the third value.
    """
    n = int(pre.n_features_out_)
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    in_group = np.zeros(n, dtype=bool)
    for g in pre.groups_:
        in_group[g.index] = True
        lower[g.index] = np.minimum(g.on, g.off)
        upper[g.index] = np.maximum(g.on, g.off)
    for f in getattr(pre, "missing_flags_", ()):  # a missing-value indicator: like a one-hot feature
        in_group[f.flag] = True
        lower[f.flag], upper[f.flag] = min(f.on, f.off), max(f.on, f.off)
    missing = []
    scale, offset = np.asarray(pre.unit_scale_, np.float64), np.asarray(pre.unit_offset_, np.float64)
    for j, column in enumerate(pre.feature_sources_):
        if in_group[j]:
            continue
        if column not in bounds:
            missing.append(column)
            continue
        lo, hi = bounds[column]
        lower[j], upper[j] = sorted(((lo - offset[j]) / scale[j], (hi - offset[j]) / scale[j]))
    return lower, upper, missing
