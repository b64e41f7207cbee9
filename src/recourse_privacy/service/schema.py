"""The public schema of a published bundle: features in original units, and the encoding every method works in.

A :class:`Schema` is what ``manifest.json`` publishes under ``"features"``: per feature its
``name``, ``type`` (``numeric`` or ``categorical``), ``categories``, public ``lower`` / ``upper``
bounds, ``immutable``, ``direction`` (``any`` or ``increase``), ``integer`` and, where the data
have gaps in it, ``missing``. The model space of every served method is a pure function of the
schema (no statistic read from the training rows): a numeric feature becomes ``(x - lower) /
(upper - lower)`` in [0, 1], a categorical one its one-hot indicator. A feature that may be
missing takes ``null`` in a request; a numeric one has an indicator of its own beside its value (0
in a gap: the lower bound, public), a categorical one a last indicator for the gap. A gap is held
in every counterfactual (:meth:`Schema.decode`), as the audit holds it (Recourse acts on what the
record holds; filling a gap is not an action). :meth:`Schema.parse` turns an applicant's JSON object into a row and
raises :class:`ApplicantError` naming the field for an unknown or missing feature, a wrong type,
a value outside the public bounds or an unknown category. The server's hot path works on
:class:`Applicants` (a batch as two arrays, numeric values and category indices):
:meth:`Schema.parse_many` validates a whole batch column by column, and :meth:`Schema.encode`,
:meth:`Schema.decode`, :meth:`Schema.costs` and :meth:`Schema.changed` are array operations with
no loop over applicants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from recourse_privacy.errors import InvalidInputError

__all__ = ["ApplicantError", "Applicants", "Feature", "Schema", "schema_from_dataset"]


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
    missing: bool = False  # a request may give null (the data have gaps): held in every counterfactual

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
        """Columns of this feature in the model space: its value or categories, and an indicator of a gap."""
        return (1 if self.type == "numeric" else len(self.categories)) + int(self.missing)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["categories"] = None if self.categories is None else list(self.categories)
        if not self.missing:  # a feature without gaps is written as before gaps were served
            del d["missing"]
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
        index = {f.name: {c: j for j, c in enumerate(f.categories or ())} for f in self.features}
        for f in self.features:
            if f.type == "categorical" and f.missing:
                index[f.name][None] = len(f.categories)  # a gap: the last indicator
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_cols", self._columns(slices))

    def _columns(self, slices) -> _Columns:
        fs = self.features
        num = [j for j, f in enumerate(fs) if f.type == "numeric"]
        cat = [j for j, f in enumerate(fs) if f.type == "categorical"]
        arr = lambda values, dtype=np.float64: np.array(values, dtype).reshape(-1)  # noqa: E731
        return _Columns(
            num_pos=arr(num, np.int64),
            cat_pos=arr(cat, np.int64),
            num_cols=arr([slices[j].start for j in num], np.int64),
            num_missing=arr([fs[j].missing for j in num], bool),
            flag_cols=arr([slices[j].start + 1 for j in num if fs[j].missing], np.int64),
            lower=arr([fs[j].lower for j in num]),
            upper=arr([fs[j].upper for j in num]),
            span=arr([fs[j].upper - fs[j].lower for j in num]),
            num_integer=arr([fs[j].integer for j in num], bool),
            num_increase=arr([fs[j].direction == "increase" for j in num], bool),
            num_immutable=arr([fs[j].immutable for j in num], bool),
            cat_immutable=arr([fs[j].immutable for j in cat], bool),
            cat_start=arr([slices[j].start for j in cat], np.int64),
            cat_names=tuple(np.array(fs[j].categories + ((None,) if fs[j].missing else ()), dtype=object) for j in cat),
            cat_size=arr([len(fs[j].categories) for j in cat], np.int64),
            starts=arr([s.start for s in slices], np.int64),
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
        """Boolean mask over the model space: ``immutable`` (a gap's indicator always: no method fills or opens a
        gap) or ``increase`` (numeric values only)."""
        mask = np.zeros(self.n_model, bool)
        for f, s in zip(self.features, self._slices):
            if attribute == "immutable" and (f.immutable or f.missing):
                mask[s if f.immutable else slice(s.stop - 1, s.stop)] = True
            elif attribute == "increase" and f.direction == "increase" and f.type == "numeric":
                mask[s.start] = True
        return mask

    def model_feature_names(self) -> list[str]:
        out = []
        for f in self.features:
            out.extend([f.name] if f.type == "numeric" else [f"{f.name}={c}" for c in f.categories])
            if f.missing:
                out.append(f"{f.name} missing" if f.type == "numeric" else f"{f.name}=(missing)")
        return out

    def held_values(self, Z: np.ndarray) -> np.ndarray | None:
        """(n, n_model) mask of the numeric values that rows ``Z`` miss (a move must leave them), or None where no
        feature may be missing."""
        c = self._cols
        if not c.num_missing.any():
            return None
        held = np.zeros(Z.shape, bool)
        held[:, c.num_cols[c.num_missing]] = Z[:, c.flag_cols] >= 0.5
        return held

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
                    missing=bool(d.get("missing", False)),
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
            if v is None:
                if not f.missing:
                    raise ApplicantError(name, 'is null; only a feature the schema marks "missing" may be')
                row.append(None)  # a gap, as the data have
                continue
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

    # ------------------------------------------------------------------ batches as arrays
    def parse_many(self, docs, where: str = "applicants", *, batch: bool = True) -> Applicants:
        """Many applicants' JSON objects -> :class:`Applicants`, validated column by column.

        The fast path checks a whole column at once (types, finiteness, public bounds, known
        categories); on any failure the applicants are re-read one by one with :meth:`parse`, whose
        :class:`ApplicantError` names the first bad field (``applicants[3].job``), and whose rows
        are the answer when every applicant passes (what the fast path does not take, such as a
        ``dict`` subclass, is read the slow way, never refused for it). ``batch=False``: a single
        applicant, named ``where`` itself.
        """
        if not len(docs):
            raise ApplicantError(where, "no applicant")
        fast = self._parse_columns(docs)
        if fast is not None:
            return fast
        return self.from_rows([self.parse(doc, f"{where}[{i}]" if batch else where) for i, doc in enumerate(docs)])

    def _parse_columns(self, docs) -> Applicants | None:
        n, c = len(docs), self._cols
        if not n or set(map(type, docs)) != {dict} or set(map(len, docs)) != {len(self.features)}:
            return None
        num = np.empty((n, len(c.num_pos)))
        gaps = np.zeros(num.shape, bool)
        cat = np.empty((n, len(c.cat_pos)), np.int64)
        try:
            for k, j in enumerate(c.num_pos):
                f = self.features[j]
                col = [d.get(f.name, _MISSING) for d in docs]
                types = set(map(type, col))
                if f.missing and _NONE in types:  # the gaps, and a number in their place until checked
                    gaps[:, k] = np.fromiter((v is None for v in col), bool, n)
                    col, types = [f.lower if v is None else v for v in col], types - {_NONE}
                if not _all_numbers(types):
                    return None
                num[:, k] = np.fromiter(col, np.float64, n)
            for k, j in enumerate(c.cat_pos):
                f = self.features[j]
                col = [d.get(f.name, _MISSING) for d in docs]
                # str and its subclasses (numpy.str_), and a gap where the feature may be missing
                if not all(issubclass(t, str) or (f.missing and t is _NONE) for t in set(map(type, col))):
                    return None
                index = self._index[f.name]
                cat[:, k] = np.fromiter((index.get(v, -1) for v in col), np.int64, n)
        except OverflowError:  # an integer too large for a float: parse says "must be a finite number"
            return None
        if not (np.isfinite(num).all() and (num >= c.lower).all() and (num <= c.upper).all() and (cat >= 0).all()):
            return None
        num[gaps] = np.nan
        return Applicants(num, cat)

    def from_rows(self, rows: list[list]) -> Applicants:
        """Rows of values in schema order (as :meth:`parse` returns them) -> :class:`Applicants`."""
        c = self._cols
        # a gap (None) is NaN
        num = np.array([[r[j] for j in c.num_pos] for r in rows], np.float64).reshape(len(rows), len(c.num_pos))
        cat = np.array([[self._index[self.features[j].name][r[j]] for j in c.cat_pos] for r in rows], np.int64).reshape(
            len(rows), len(c.cat_pos)
        )
        return Applicants(num, cat)

    def encode(self, rows) -> np.ndarray:
        """Applicants (or rows of values in schema order), original units -> the model space (n, n_model)."""
        a = rows if isinstance(rows, Applicants) else self.from_rows(rows)
        c = self._cols
        Z = np.zeros((len(a), self.n_model))
        Z[:, c.num_cols] = (a.num - c.lower) / c.span
        if len(c.flag_cols):  # a gap: its value at 0 (the lower bound), its indicator on
            gaps = np.isnan(a.num)
            Z[:, c.num_cols] = np.where(gaps, 0.0, Z[:, c.num_cols])
            Z[:, c.flag_cols] = gaps[:, c.num_missing]
        if len(c.cat_pos):
            Z[np.arange(len(a))[:, None], c.cat_start + a.cat] = 1.0
        return Z

    def encode_frame(self, X) -> np.ndarray:
        """A DataFrame of the training data (original units) -> the model space, numeric values clipped to the bounds.

        A category outside the schema's becomes the first category.
        """
        return self.encode(self.applicants_from_frame(X))

    def applicants_from_frame(self, X) -> Applicants:
        """A DataFrame of the training data (original units) -> :class:`Applicants`, as :meth:`encode_frame` reads it
        (numeric values clipped to the bounds, a category outside the schema's the first category, a gap a gap where
        the feature may be missing)."""
        c = self._cols
        num = np.column_stack(
            [X[self.features[j].name].to_numpy(np.float64) for j in c.num_pos] or [np.empty((len(X), 0))]
        )
        num = np.clip(num, c.lower, c.upper)
        cat = np.empty((len(X), len(c.cat_pos)), np.int64)
        for k, j in enumerate(c.cat_pos):
            f = self.features[j]
            codes = X[f.name].astype(str).map(self._index[f.name]).to_numpy(np.float64, na_value=0.0)
            cat[:, k] = np.nan_to_num(codes, nan=0.0).astype(np.int64)
            if f.missing:
                cat[X[f.name].isna().to_numpy(), k] = len(f.categories)
        return Applicants(num, cat)

    def decode(self, Z: np.ndarray, factual: Applicants | None = None) -> Applicants:
        """Model space -> :class:`Applicants` in original units, honouring the schema.

        Numeric values are clipped to the public bounds; integer features rounded away from the
        factual (so the move is never shortened); categorical ones take the largest indicator.
        With ``factual`` (the applicants the rows move from), immutable features keep the
        factual's value and increase-only ones never go below it, and a gap stays a gap while no
        value becomes one; without, a gap is where its indicator is at least one half.
        """
        Z = np.atleast_2d(np.asarray(Z, np.float64))
        c = self._cols
        num = np.clip(c.lower + Z[:, c.num_cols] * c.span, c.lower, c.upper)
        if factual is None and len(c.flag_cols):
            num[:, c.num_missing] = np.where(Z[:, c.flag_cols] >= 0.5, np.nan, num[:, c.num_missing])
        if factual is not None:
            num = np.where(c.num_increase, np.maximum(num, factual.num), num)
            up, down = num > factual.num, num < factual.num
            whole = np.where(up, np.ceil(num - 1e-9), np.where(down, np.floor(num + 1e-9), np.round(num)))
        else:
            whole = np.round(num)
        whole = np.clip(whole, np.ceil(c.lower), np.floor(c.upper))
        num = np.where(c.num_integer, whole, num)
        cat = np.empty((len(Z), len(c.cat_pos)), np.int64)
        for k, j in enumerate(c.cat_pos):
            s = self._slices[j]
            width = s.stop - s.start if factual is None else int(c.cat_size[k])  # a level never moves to the gap
            cat[:, k] = np.argmax(Z[:, s.start : s.start + width], axis=1)
        if factual is not None:
            num = np.where(c.num_immutable | np.isnan(factual.num), factual.num, num)
            cat = np.where(c.cat_immutable | (factual.cat == c.cat_size), factual.cat, cat)
        return Applicants(num, cat)

    def values(self, a: Applicants) -> list[list]:
        """Per feature (schema order), the column of JSON values: whole numbers as int, categories as str, a gap
        None."""
        c = self._cols
        cols: list = [None] * len(self.features)
        for k, j in enumerate(c.num_pos):
            col = a.num[:, k]
            obj = col.astype(object)
            whole = (col == np.floor(col)) & (np.abs(col) < 2**53)
            obj[whole] = col[whole].astype(np.int64).astype(object)
            obj[np.isnan(col)] = None
            cols[j] = obj.tolist()
        for k, j in enumerate(c.cat_pos):
            cols[j] = c.cat_names[k][a.cat[:, k]].tolist()
        return cols

    def as_dicts(self, a: Applicants) -> list[dict]:
        """One ``{feature: value}`` per applicant, original units."""
        names = self.names
        return [dict(zip(names, vals)) for vals in zip(*self.values(a))]

    def changed(self, a: Applicants, b: Applicants) -> np.ndarray:
        """(n, n_features) mask, schema order: the features whose value differs between ``a`` and ``b``."""
        c = self._cols
        out = np.zeros((len(a), len(self.features)), bool)
        out[:, c.num_pos] = (a.num != b.num) & ~(np.isnan(a.num) & np.isnan(b.num))
        out[:, c.cat_pos] = a.cat != b.cat
        return out

    def costs(self, a: Applicants, b: Applicants) -> np.ndarray:
        """L1 cost per row in units of each numeric feature's public range; a changed category costs 1 (a gap held
        costs nothing)."""
        moved = np.abs(b.num - a.num) / self._cols.span
        return np.where(np.isnan(a.num) & np.isnan(b.num), 0.0, moved).sum(1) + (a.cat != b.cat).sum(1)

    def feature_sums(self, M: np.ndarray) -> np.ndarray:
        """Model-space columns summed per feature: (n, n_model) -> (n, n_features)."""
        return np.add.reduceat(M, self._cols.starts, axis=1)

    def as_dict(self, row: list) -> dict:
        return {f.name: plain(v) for f, v in zip(self.features, row)}

    def cost(self, a: list, b: list) -> float:
        """L1 cost in units of each numeric feature's public range; a changed category costs 1."""
        return float(self.costs(self.from_rows([a]), self.from_rows([b]))[0])


_MISSING = object()
_NONE = type(None)
_NUMBER_TYPES = frozenset({int, float})


def _all_numbers(types: set[type]) -> bool:
    """Whether every type is one :meth:`Schema.parse` takes as a number: ``int`` or ``float`` or a subclass
    (``numpy.float64``), not ``bool``."""
    return types <= _NUMBER_TYPES or all(issubclass(t, int | float) and not issubclass(t, bool) for t in types)


@dataclass(frozen=True)
class Applicants:
    """A batch of applicants as arrays, original units: ``num`` (n, numeric features), ``cat`` (n, categorical
    features: the category's index), each in schema order."""

    num: np.ndarray
    cat: np.ndarray

    def __len__(self) -> int:
        return len(self.num)

    def take(self, idx) -> Applicants:
        """The rows ``idx``."""
        return Applicants(self.num[idx], self.cat[idx])

    def put(self, idx, other: Applicants) -> None:
        """Overwrite the rows ``idx`` with ``other``'s."""
        self.num[idx], self.cat[idx] = other.num, other.cat

    @staticmethod
    def concat(parts: list[Applicants]) -> Applicants:
        """One batch of the ``parts``' rows, in order."""
        return Applicants(np.concatenate([p.num for p in parts]), np.concatenate([p.cat for p in parts]))


@dataclass(frozen=True)
class _Columns:
    """The schema's per-column arrays, computed once: positions, bounds, masks, model-space offsets."""

    num_pos: np.ndarray
    cat_pos: np.ndarray
    num_cols: np.ndarray
    num_missing: np.ndarray  # per numeric feature: may be missing
    flag_cols: np.ndarray  # the gap indicators' model-space columns, one per numeric feature that may be missing
    lower: np.ndarray
    upper: np.ndarray
    span: np.ndarray
    num_integer: np.ndarray
    num_increase: np.ndarray
    num_immutable: np.ndarray
    cat_immutable: np.ndarray
    cat_start: np.ndarray
    cat_names: tuple  # per categorical feature: its categories, and None (a gap) last where it may be missing
    cat_size: np.ndarray  # per categorical feature: its categories (the index of a gap)
    starts: np.ndarray


def plain(v):
    """A whole float as an int (JSON shows 42, not 42.0)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def schema_from_dataset(dataset, bounds: dict | None = None, may_be_missing: Sequence[str] = ()) -> Schema:
    """The schema of a :class:`~recourse_privacy.data.Dataset`: public ``bounds`` where given, else the data's range.

    Bounds and categories read from the data are recorded in ``notes`` as such: they are not
    covered by any DP guarantee (a data minimum or maximum is an extreme record's value).
    A registered dataset's public domain metadata (:mod:`recourse_privacy.data.domain`: documented
    bounds and categories) is used where given; ``bounds`` (``--bounds``) override it.
    A feature may be missing (a request may send null) where the data have a gap in it (read from the
    data) or where ``may_be_missing`` (``--may-be-missing``) declares it (public); a declared feature
    without a gap in the data is listed in ``notes["declared_missing"]``: no row taught the model a gap there.
    """
    domain = getattr(dataset, "domain", None)
    public = getattr(domain, "public", False)
    bounds = {**(domain.bounds if public else {}), **dict(bounds or {})}  # given --bounds win over the metadata
    for option, names in (("--bounds", bounds), ("--may-be-missing", may_be_missing)):
        unknown = sorted(set(names) - set(dataset.feature_names))
        if unknown:
            raise InvalidInputError(
                f"{option} names unknown columns {unknown}; columns are {list(dataset.feature_names)}"
            )
    declared = set(may_be_missing)
    feats, from_data = [], []
    for name in dataset.feature_names:
        col = dataset.X[name]
        gaps = bool(col.isna().any())  # a column with gaps: a request may give null there (read from the data)
        if gaps and col.isna().all():
            raise InvalidInputError(f"column {name!r} has no value at all: drop it before publishing")
        common = dict(
            immutable=name in dataset.immutable,
            direction="increase" if name in dataset.increasing else "any",
            missing=gaps or name in declared,
        )
        gaps = gaps and name not in declared  # whether the gaps are known from the data alone
        if name in dataset.categorical or col.dtype == object:
            if name in bounds:
                raise InvalidInputError(f"--bounds {name}=...: {name} is categorical")
            listed = domain[name].categories if public and name in domain else ()
            cats = tuple(listed) or tuple(sorted(map(str, col.dropna().unique())))
            feats.append(Feature(name, "categorical", categories=cats, **common))
            if not listed or gaps:
                from_data.append(name)
            continue
        values = col.dropna().to_numpy(np.float64)
        if name in bounds:
            lo, hi = map(float, bounds[name])
        else:
            lo, hi = float(np.min(values)), float(np.max(values))
            if hi <= lo:
                hi = lo + 1.0
            from_data.append(name)
        if gaps and name in bounds:
            from_data.append(name)
        integer = bool(np.all(np.mod(values, 1) == 0))
        feats.append(Feature(name, "numeric", lower=lo, upper=hi, integer=integer, **common))
    notes = {
        "units": "original units of the data",
        "read_from_data": from_data,
        "warning": (
            "bounds, categories or gaps (whether a feature may be missing) of the features in read_from_data were "
            "read from the training data and are not covered by the privacy guarantee; declare public bounds and "
            "categories (--bounds COL=LO:HI, dataset metadata)"
        )
        if from_data
        else "",
    }
    unseen = sorted(n for n in declared if not dataset.X[n].isna().any())
    if unseen:  # written only where declared: bundles without it read as before
        notes["declared_missing"] = unseen
    return Schema(tuple(feats), notes)
