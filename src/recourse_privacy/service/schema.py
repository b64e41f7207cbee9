"""The public schema of a published bundle: features in original units, and the encoding every method works in.

A :class:`Schema` is what ``manifest.json`` publishes under ``"features"``: per feature its
``name``, ``type`` (``numeric`` or ``categorical``), ``categories``, public ``lower`` / ``upper``
bounds, ``immutable``, ``direction`` (``any`` or ``increase``) and ``integer``. The model space
of every served method is a pure function of the schema (no statistic read from the training
rows): a numeric feature becomes ``(x - lower) / (upper - lower)`` in [0, 1], a categorical one
its one-hot indicator. :meth:`Schema.parse` turns an applicant's JSON object into a row and
raises :class:`ApplicantError` naming the field for an unknown or missing feature, a wrong type,
a value outside the public bounds or an unknown category.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from recourse_privacy.errors import InvalidInputError

__all__ = ["ApplicantError", "Feature", "Schema", "schema_from_dataset"]


class ApplicantError(InvalidInputError):
    """An applicant's input does not fit the schema; ``field`` names the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


@dataclass(frozen=True)
class Feature:
    """One feature of the public schema, in the data's original units."""

    name: str
    type: str  # "numeric" | "categorical"
    categories: tuple[str, ...] | None = None
    lower: float | None = None
    upper: float | None = None
    immutable: bool = False
    direction: str = "any"  # "any" | "increase"
    integer: bool = False

    def __post_init__(self) -> None:
        if self.type not in ("numeric", "categorical"):
            raise InvalidInputError(f"feature {self.name!r}: type must be numeric or categorical, not {self.type!r}")
        if self.direction not in ("any", "increase"):
            raise InvalidInputError(f"feature {self.name!r}: direction must be any or increase, not {self.direction!r}")
        if self.type == "numeric":
            lo, hi = self.lower, self.upper
            if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise InvalidInputError(
                    f"feature {self.name!r}: public bounds need finite lower < upper, got {lo}, {hi}"
                )
        elif not self.categories:
            raise InvalidInputError(f"feature {self.name!r}: a categorical feature needs its categories")

    @property
    def width(self) -> int:
        """Columns of this feature in the model space."""
        return 1 if self.type == "numeric" else len(self.categories)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["categories"] = None if self.categories is None else list(self.categories)
        return d


@dataclass(frozen=True)
class Schema:
    """The ordered public features; the encoding to and from the model space."""

    features: tuple[Feature, ...]
    notes: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [f.name for f in self.features]
        if len(set(names)) != len(names):
            raise InvalidInputError("schema: feature names must be unique")
        if not names:
            raise InvalidInputError("schema: no feature")
        slices, start = [], 0
        for f in self.features:
            slices.append(slice(start, start + f.width))
            start += f.width
        object.__setattr__(self, "_slices", tuple(slices))
        object.__setattr__(self, "_by_name", {f.name: i for i, f in enumerate(self.features)})
        object.__setattr__(
            self, "_index", {f.name: {c: j for j, c in enumerate(f.categories or ())} for f in self.features}
        )

    # ------------------------------------------------------------------ shape
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def n_model(self) -> int:
        """Dimension of the model space."""
        return self._slices[-1].stop

    def model_mask(self, attribute: str) -> np.ndarray:
        """Boolean mask over the model space: ``immutable`` or ``increase`` (numeric features only)."""
        mask = np.zeros(self.n_model, bool)
        for f, s in zip(self.features, self._slices):
            if attribute == "immutable" and f.immutable:
                mask[s] = True
            elif attribute == "increase" and f.direction == "increase" and f.type == "numeric":
                mask[s] = True
        return mask

    def model_feature_names(self) -> list[str]:
        out = []
        for f in self.features:
            out.extend([f.name] if f.type == "numeric" else [f"{f.name}={c}" for c in f.categories])
        return out

    # ------------------------------------------------------------------ JSON
    def to_list(self) -> list[dict]:
        return [f.to_dict() for f in self.features]

    @classmethod
    def from_list(cls, items: list[dict], notes: dict | None = None) -> Schema:
        feats = []
        for d in items:
            cats = d.get("categories")
            feats.append(
                Feature(
                    name=str(d["name"]),
                    type=d["type"],
                    categories=None if cats is None else tuple(map(str, cats)),
                    lower=d.get("lower"),
                    upper=d.get("upper"),
                    immutable=bool(d.get("immutable", False)),
                    direction=d.get("direction", "any"),
                    integer=bool(d.get("integer", False)),
                )
            )
        return cls(tuple(feats), dict(notes or {}))

    # ------------------------------------------------------------------ applicants
    def parse(self, applicant, where: str = "applicant") -> list:
        """The applicant's values in schema order; :class:`ApplicantError` names the first bad field."""
        if not isinstance(applicant, dict):
            raise ApplicantError(where, f"must be a JSON object of feature: value, got {type(applicant).__name__}")
        unknown = [k for k in applicant if k not in self._by_name]
        if unknown:
            raise ApplicantError(f"{where}.{unknown[0]}", f"unknown feature; features are {', '.join(self.names)}")
        row = []
        for f in self.features:
            name = f"{where}.{f.name}"
            if f.name not in applicant:
                raise ApplicantError(name, "missing")
            v = applicant[f.name]
            if f.type == "numeric":
                if isinstance(v, bool) or not isinstance(v, int | float):
                    raise ApplicantError(name, f"must be a number, got {type(v).__name__}")
                try:
                    v = float(v)
                except OverflowError:
                    v = math.inf
                if not math.isfinite(v):
                    raise ApplicantError(name, "must be a finite number")
                if v < f.lower or v > f.upper:
                    raise ApplicantError(name, f"{v:g} is outside the public bounds [{f.lower:g}, {f.upper:g}]")
            else:
                if not isinstance(v, str):
                    raise ApplicantError(name, f"must be a string (one of the categories), got {type(v).__name__}")
                if v not in self._index[f.name]:
                    shown = ", ".join(f.categories[:20]) + (" ..." if len(f.categories) > 20 else "")
                    raise ApplicantError(name, f"unknown category {v!r}; categories are {shown}")
            row.append(v)
        return row

    def encode(self, rows: list[list]) -> np.ndarray:
        """Rows of values in schema order (original units) -> the model space (n, n_model)."""
        Z = np.zeros((len(rows), self.n_model))
        for j, (f, s) in enumerate(zip(self.features, self._slices)):
            if f.type == "numeric":
                col = np.fromiter((r[j] for r in rows), np.float64, len(rows))
                Z[:, s.start] = (col - f.lower) / (f.upper - f.lower)
            else:
                idx = self._index[f.name]
                Z[np.arange(len(rows)), [s.start + idx[r[j]] for r in rows]] = 1.0
        return Z

    def encode_frame(self, X) -> np.ndarray:
        """A DataFrame of the training data (original units) -> the model space, numeric values clipped to the bounds."""
        rows = []
        cols = [X[f.name].to_numpy() for f in self.features]
        for i in range(len(X)):
            row = []
            for f, col in zip(self.features, cols):
                v = col[i]
                if f.type == "numeric":
                    row.append(min(max(float(v), f.lower), f.upper))
                else:
                    row.append(str(v) if str(v) in self._index[f.name] else f.categories[0])
            rows.append(row)
        return self.encode(rows)

    def decode(self, Z: np.ndarray, factual: np.ndarray | None = None) -> list[list]:
        """Model space -> values in original units, honouring the schema.

        Numeric values are clipped to the public bounds; integer features rounded away from the
        factual (so the move is never shortened); categorical ones take the largest indicator.
        With ``factual`` (model-space rows), immutable features keep the factual's value and
        increase-only ones never go below it.
        """
        Z = np.atleast_2d(np.asarray(Z, np.float64))
        F = None if factual is None else self.decode(factual)
        out = []
        for i in range(len(Z)):
            row = []
            for j, (f, s) in enumerate(zip(self.features, self._slices)):
                if F is not None and f.immutable:
                    row.append(F[i][j])
                    continue
                if f.type == "numeric":
                    v = f.lower + float(Z[i, s.start]) * (f.upper - f.lower)
                    v = min(max(v, f.lower), f.upper)
                    if F is not None and f.direction == "increase":
                        v = max(v, F[i][j])
                    if f.integer:
                        base = None if F is None else F[i][j]
                        if base is not None and v > base:
                            v = math.ceil(v - 1e-9)
                        elif base is not None and v < base:
                            v = math.floor(v + 1e-9)
                        else:
                            v = round(v)
                        v = float(min(max(v, math.ceil(f.lower)), math.floor(f.upper)))
                    row.append(v)
                else:
                    row.append(f.categories[int(np.argmax(Z[i, s]))])
            out.append(row)
        return out

    def as_dict(self, row: list) -> dict:
        return {f.name: plain(v) for f, v in zip(self.features, row)}

    def cost(self, a: list, b: list) -> float:
        """L1 cost in units of each numeric feature's public range; a changed category costs 1."""
        c = 0.0
        for f, x, y in zip(self.features, a, b):
            if f.type == "numeric":
                c += abs(y - x) / (f.upper - f.lower)
            else:
                c += float(x != y)
        return c


def plain(v):
    """A whole float as an int (JSON shows 42, not 42.0)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def schema_from_dataset(dataset, bounds: dict | None = None) -> Schema:
    """The schema of a :class:`~recourse_privacy.data.Dataset`: public ``bounds`` where given, else the data's range.

    Bounds and categories read from the data are recorded in ``notes`` as such: they are not
    covered by any DP guarantee (a data minimum or maximum is an extreme record's value).
    A registered dataset's public domain metadata (:mod:`recourse_privacy.data.domain`: documented
    bounds and categories) is used where given; ``bounds`` (``--bounds``) override it.
    """
    domain = getattr(dataset, "domain", None)
    public = getattr(domain, "public", False)
    bounds = {**(domain.bounds if public else {}), **dict(bounds or {})}  # given --bounds win over the metadata
    unknown = sorted(set(bounds) - set(dataset.feature_names))
    if unknown:
        raise InvalidInputError(f"--bounds names unknown columns {unknown}; columns are {list(dataset.feature_names)}")
    feats, from_data = [], []
    for name in dataset.feature_names:
        col = dataset.X[name]
        common = dict(
            immutable=name in dataset.immutable, direction="increase" if name in dataset.increasing else "any"
        )
        if name in dataset.categorical or col.dtype == object:
            if name in bounds:
                raise InvalidInputError(f"--bounds {name}=...: {name} is categorical")
            listed = domain[name].categories if public and name in domain else ()
            cats = tuple(listed) or tuple(sorted(map(str, col.unique())))
            feats.append(Feature(name, "categorical", categories=cats, **common))
            if not listed:
                from_data.append(name)
            continue
        values = col.to_numpy(np.float64)
        if name in bounds:
            lo, hi = map(float, bounds[name])
        else:
            lo, hi = float(np.min(values)), float(np.max(values))
            if hi <= lo:
                hi = lo + 1.0
            from_data.append(name)
        integer = bool(np.all(np.mod(values, 1) == 0))
        feats.append(Feature(name, "numeric", lower=lo, upper=hi, integer=integer, **common))
    notes = {
        "units": "original units of the data",
        "read_from_data": from_data,
        "warning": (
            "bounds or categories of the features in read_from_data were read from the training data and are not "
            "covered by the privacy guarantee; declare public ones (--bounds COL=LO:HI, dataset metadata)"
        )
        if from_data
        else "",
    }
    return Schema(tuple(feats), notes)
