"""Experiment specs: a grid of audits declared in YAML, validated on load.

A spec names the fixed :class:`~recourse_privacy.audit.AuditConfig` settings,
the grid axes whose product gives the cells, the seeds, the metrics to tabulate and,
optionally, the published figures to print beside ours::

    name: my-grid
    description: CFD attacks on two synthetic dimensions
    expected_time: "~2 min on 2 cores"    # optional; shown by `list reproduction` for a shipped grid
    fixed: {dataset: synthetic, model: logistic, recourse: linear, n_members: 2000}
    grid:
      n_features: [100, 1000]             # a plain axis: one AuditConfig field
      setting:                            # a linked axis: each value sets several fields
        - {label: baseline, shadow_models: 10}
        - {label: few-shadows, shadow_models: 4}
    seeds: [0, 1, 2]
    metrics: [auc, tpr_at_fpr.0.01, model.test_accuracy]

The AuditConfig fields are read from the dataclass at run time, and every cell is checked
with :meth:`AuditConfig.validate` on load, so the spec follows whatever the registries hold.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from recourse_privacy.audit.config import AuditConfig, closest_setting
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.membership import DEFAULT_FPRS, fpr_key

__all__ = [
    "Cell",
    "ExperimentSpec",
    "PaperFigure",
    "PaperReference",
    "SpecError",
    "load_spec",
    "config_fields",
    "check_metric_name",
    "ATTACK_METRICS",
    "CELL_METRIC_GROUPS",
]

#: per-attack metrics (``metrics.json`` ``attacks.<name>``); ``tpr_at_fpr.<fpr>`` takes an FPR key
ATTACK_METRICS = ("auc", "balanced_accuracy", "n_members", "n_nonmembers")
_ATTACK_FPR_METRICS = ("tpr_at_fpr", "achieved_fpr")
#: per-cell metric groups of ``metrics.json`` (``model.test_accuracy``, ``recourse.validity``, ...)
CELL_METRIC_GROUPS = ("model", "recourse", "shadow", "data", "timing_seconds")
#: AuditConfig fields whose values are dicts: a linked axis value updates the fixed dict
_DICT_FIELDS = ("data_params", "model_params", "recourse_params")
#: settings that a spec may not put in fixed or grid (seeds have their own key)
_RESERVED = ("seed",)


_AXIS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class SpecError(InvalidInputError):
    """A spec that does not load: the message names the file and the bad key."""


def config_fields() -> tuple[str, ...]:
    """The AuditConfig field names, read from the dataclass (the source of truth at run time)."""
    return tuple(f.name for f in fields(AuditConfig))


def _unknown_field(name: str, where: str) -> str:
    hint = closest_setting(name)
    return (
        f"unknown AuditConfig field {name!r} in {where}"
        + (f" (did you mean {hint!r}?)" if hint else "")
        + f"; known fields: {', '.join(config_fields())}"
    )


def _fpr_keys() -> tuple[str, ...]:
    return tuple(fpr_key(f) for f in DEFAULT_FPRS)


def check_metric_name(name: str) -> str:
    """Return ``name`` if it names a metric of ``metrics.json``, else raise a ValueError saying why.

    Attack metrics: ``auc``, ``balanced_accuracy``, ``n_members``, ``n_nonmembers``,
    ``tpr_at_fpr.<fpr>`` and ``achieved_fpr.<fpr>`` (fpr one of 0.1, 0.01, 0.001). Cell
    metrics: ``model.*``, ``recourse.*``, ``shadow.*``, ``data.*``, ``timing_seconds.*``.
    """
    if name in ATTACK_METRICS:
        return name
    head, _, tail = name.partition(".")
    if head in _ATTACK_FPR_METRICS:
        if tail not in _fpr_keys():
            raise InvalidInputError(
                f"metric {name!r}: {head} is read at FPR {', '.join(_fpr_keys())}, e.g. {head}.0.01"
            )
        return name
    if head in CELL_METRIC_GROUPS and tail:
        return name
    raise InvalidInputError(
        f"unknown metric {name!r}; attack metrics are {', '.join(ATTACK_METRICS)}, "
        f"tpr_at_fpr.<fpr>, achieved_fpr.<fpr>; cell metrics start with "
        f"{', '.join(g + '.' for g in CELL_METRIC_GROUPS)}"
    )


def is_attack_metric(name: str) -> bool:
    """True for a per-attack metric, False for a per-cell one (``model.test_accuracy``)."""
    return name in ATTACK_METRICS or name.partition(".")[0] in _ATTACK_FPR_METRICS


def _label_of(value: Any) -> str:
    if isinstance(value, dict):
        if "label" in value:
            return str(value["label"])
        return ",".join(f"{k}={_label_of(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "+".join(_label_of(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Cell:
    """One grid cell: a full, validated AuditConfig and the axis labels that produced it."""

    config: AuditConfig
    labels: tuple[tuple[str, str], ...]  # (axis, label) in axis order

    @property
    def hash(self) -> str:
        """The key of the cell in the results store: :meth:`AuditConfig.digest`."""
        return self.config.digest()

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def label(self) -> str:
        """``axis=label`` pairs and the seed, e.g. ``n_features=100 seed=0``."""
        return " ".join([*(f"{a}={v}" for a, v in self.labels), f"seed={self.seed}"])

    @property
    def group_label(self) -> str:
        """The label without the seed (the row of the tables)."""
        return " ".join(f"{a}={v}" for a, v in self.labels) or "(single cell)"


class PaperFigure(BaseModel):
    """Published numbers for one cell (matched by axis labels) and, optionally, one attack."""

    model_config = ConfigDict(extra="forbid")

    cell: dict[str, Any] = Field(default_factory=dict, description="axis -> label; a subset of the axes")
    attack: str | None = None
    values: dict[str, float | None] = Field(description="metric -> published value (null: NA in the paper)")

    @field_validator("values")
    @classmethod
    def _metric_names(cls, v: dict) -> dict:
        for name in v:
            check_metric_name(name)
        return v


class PaperReference(BaseModel):
    """The published results a spec reproduces, and what we know differs."""

    model_config = ConfigDict(extra="forbid")

    source: str
    notes: str = ""
    statements: list[str] = Field(default_factory=list)
    figures: list[PaperFigure] = Field(default_factory=list)


class ExperimentSpec(BaseModel):
    """A grid of audits: ``fixed`` settings, ``grid`` axes (their product), ``seeds``, ``metrics``.

    ``on_invalid: skip`` drops cells that :meth:`AuditConfig.validate` refuses (e.g. a recourse
    method not in this installation's registry) and lists them in :attr:`skipped`; the
    default ``error`` refuses the spec. Field names are always checked.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    description: str = ""
    expected_time: str = Field(
        default="", description="how long the grid takes, and on what (e.g. '~10 min on 2 cores')"
    )
    fixed: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0])
    metrics: list[str] = Field(
        default_factory=lambda: ["auc", "balanced_accuracy", "tpr_at_fpr.0.1", "tpr_at_fpr.0.01"]
    )
    paper: PaperReference | None = None
    on_invalid: Literal["error", "skip"] = "error"

    _cells: list[Cell] = PrivateAttr(default_factory=list)
    _skipped: list[tuple[str, str]] = PrivateAttr(default_factory=list)
    _source: str | None = PrivateAttr(default=None)

    # ------------------------------------------------------------------ field checks
    @field_validator("fixed")
    @classmethod
    def _fixed_fields(cls, v: dict) -> dict:
        for key in v:
            if key in _RESERVED:
                raise InvalidInputError(f"{key!r} cannot be fixed: list the seeds under 'seeds'")
            if key not in config_fields():
                raise InvalidInputError(_unknown_field(key, "fixed"))
        return v

    @field_validator("grid")
    @classmethod
    def _grid_axes(cls, v: dict) -> dict:
        known = config_fields()
        for axis, values in v.items():
            if not isinstance(axis, str) or not _AXIS_NAME.fullmatch(axis):
                raise InvalidInputError(
                    f"axis name {axis!r} may hold only letters, digits and _ . - (starting with a "
                    "letter or digit): it names columns, files and plot labels"
                )
            if not isinstance(values, list):
                raise InvalidInputError(f"axis {axis!r} must list its values; got {values!r}")
            if axis in _RESERVED:
                raise InvalidInputError(f"axis {axis!r}: list the seeds under 'seeds', not in the grid")
            if not values:
                raise InvalidInputError(f"axis {axis!r} has no values")
            if axis in known:
                if axis not in _DICT_FIELDS and any(isinstance(x, dict) for x in values):
                    raise InvalidInputError(
                        f"axis {axis!r} is the AuditConfig field {axis!r}, whose values are not "
                        "mappings; give a linked axis (values that set several fields) a name that "
                        "is not a field"
                    )
                continue
            # a linked axis: every value is a mapping of AuditConfig fields (plus an optional label)
            for i, value in enumerate(values):
                if not isinstance(value, dict):
                    raise InvalidInputError(
                        _unknown_field(axis, "grid") + "; a linked axis (a name that is not a field) "
                        f"takes mappings of fields, but value {i} is {value!r}"
                    )
                for key in value:
                    if key == "label":
                        continue
                    if key in _RESERVED:
                        raise InvalidInputError(f"axis {axis!r} value {i}: list the seeds under 'seeds'")
                    if key not in known:
                        raise InvalidInputError(_unknown_field(key, f"grid axis {axis!r} value {i}"))
            labels = [_label_of(x) for x in values]
            odd = [x for x in labels if "$" in x or "\n" in x]
            if odd:
                raise InvalidInputError(
                    f"axis {axis!r} has the label {odd[0]!r}: labels may not hold '$' or newlines "
                    "(give the value a plain 'label')"
                )
            dup = sorted({x for x in labels if labels.count(x) > 1})
            if dup:
                raise InvalidInputError(f"axis {axis!r} has repeated labels {dup}; give each value a distinct 'label'")
        return v

    @field_validator("seeds")
    @classmethod
    def _seed_list(cls, v: list[int]) -> list[int]:
        if not v:
            raise InvalidInputError("give at least one seed")
        if any(s < 0 for s in v):
            raise InvalidInputError(f"seeds must be non-negative integers; got {v}")
        if len(set(v)) != len(v):
            raise InvalidInputError(f"seeds are repeated: {v}")
        return v

    @field_validator("metrics")
    @classmethod
    def _metric_list(cls, v: list[str]) -> list[str]:
        if not v:
            raise InvalidInputError("give at least one metric")
        for name in v:
            check_metric_name(name)
        return v

    # ------------------------------------------------------------------ the cells
    @model_validator(mode="after")
    def _expand(self) -> ExperimentSpec:
        set_by: dict[str, str] = {k: "fixed" for k in self.fixed}
        for axis, values in self.grid.items():
            keys = {axis} if axis in config_fields() else {k for val in values for k in val if k != "label"}
            for key in keys:
                if key in set_by and key not in _DICT_FIELDS:
                    raise InvalidInputError(f"field {key!r} is set both by {set_by[key]} and by grid axis {axis!r}")
                set_by[key] = f"grid axis {axis!r}"

        cells, skipped, seen = [], [], {}
        axes = list(self.grid.items())
        for combo in itertools.product(*(values for _, values in axes)):
            labels = tuple((axis, _label_of(value)) for (axis, _), value in zip(axes, combo))
            settings = copy.deepcopy(self.fixed)
            for (axis, _), value in zip(axes, combo):
                updates = {axis: value} if axis in config_fields() else {k: x for k, x in value.items() if k != "label"}
                for key, x in updates.items():
                    if key in _DICT_FIELDS and isinstance(settings.get(key), dict) and isinstance(x, dict):
                        settings[key] = {**settings[key], **x}
                    else:
                        settings[key] = x
            for seed in self.seeds:
                cell_label = " ".join([*(f"{a}={v}" for a, v in labels), f"seed={seed}"])
                try:
                    config = AuditConfig.from_dict({**settings, "seed": seed}).validate()
                except (ValueError, TypeError) as err:
                    if self.on_invalid == "skip":
                        skipped.append((cell_label, str(err)))
                        continue
                    raise InvalidInputError(f"cell {cell_label}: {err}") from None
                cell = Cell(config, labels)
                if cell.hash in seen:
                    raise InvalidInputError(f"cells {seen[cell.hash]} and {cell_label} have the same configuration")
                seen[cell.hash] = cell_label
                cells.append(cell)
        if not cells:
            reasons = "; ".join(f"{lab}: {why}" for lab, why in skipped[:3])
            raise InvalidInputError(f"no valid cell in the grid ({reasons})")
        self._cells, self._skipped = cells, skipped
        if self.paper is not None:
            self._check_paper()
        return self

    def _check_paper(self) -> None:
        labels = {axis: {_label_of(x) for x in values} for axis, values in self.grid.items()}
        attacks = {a for c in self._cells for a in c.config.attacks}
        for i, fig in enumerate(self.paper.figures):
            for axis, value in fig.cell.items():
                if axis not in labels:
                    raise InvalidInputError(
                        f"paper.figures.{i}.cell: {axis!r} is not a grid axis (axes: {', '.join(labels) or 'none'})"
                    )
                if _label_of(value) not in labels[axis]:
                    raise InvalidInputError(
                        f"paper.figures.{i}.cell: {axis}={value!r} is not a value of that axis "
                        f"({', '.join(sorted(labels[axis]))})"
                    )
            if fig.attack is not None and fig.attack not in attacks:
                raise InvalidInputError(
                    f"paper.figures.{i}.attack: {fig.attack!r} is not an attack of the cells "
                    f"({', '.join(sorted(attacks))})"
                )
            attack_level = [m for m in fig.values if is_attack_metric(m)]
            if attack_level and fig.attack is None:
                raise InvalidInputError(f"paper.figures.{i}: attack metrics {attack_level} need an 'attack'")

    # ------------------------------------------------------------------ public API
    @property
    def cells(self) -> list[Cell]:
        """Every valid cell: the product of the axes (in order) times the seeds (innermost)."""
        return list(self._cells)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """(cell label, reason) of cells dropped under ``on_invalid: skip``."""
        return list(self._skipped)

    @property
    def source(self) -> str | None:
        """The file the spec was read from, if any."""
        return self._source

    @property
    def axes(self) -> dict[str, list[str]]:
        """Axis -> its value labels, in order."""
        return {axis: [_label_of(x) for x in values] for axis, values in self.grid.items()}

    def with_overrides(self, *, fixed: dict | None = None, seeds: list[int] | None = None) -> ExperimentSpec:
        """A copy with some fixed settings or the seeds replaced (e.g. ``shadow_models``), validated again."""
        data = self.model_dump()
        for key in fixed or {}:
            if key in self.grid:
                raise SpecError(f"{self.name}: {key!r} is a grid axis; it cannot be overridden as a fixed setting")
        data["fixed"] = {**data["fixed"], **(fixed or {})}
        if seeds is not None:
            data["seeds"] = list(seeds)
        return _validate(data, self._source or self.name)

    def to_dict(self) -> dict:
        """Plain data, ready for JSON or YAML (inverse of :func:`spec_from_dict`)."""
        return self.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------------- loading
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


def _yaml_loader():
    """PyYAML's SafeLoader reading ``1e-3`` as a float (YAML 1.1 alone would give a string)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
    return Loader


def _format_errors(err: ValidationError, where: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"{loc}: {msg}")
    return f"{where}: " + "; ".join(lines)


def _validate(data: Any, where: str) -> ExperimentSpec:
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a spec is a mapping (name, fixed, grid, seeds, metrics); got {type(data).__name__}")
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as err:
        raise SpecError(_format_errors(err, where)) from None
    spec._source = where
    return spec


def spec_from_dict(data: dict, where: str = "<dict>") -> ExperimentSpec:
    """Validate a spec given as plain data; errors name ``where`` and the bad key."""
    return _validate(data, where)


def load_spec(path_or_name: str | Path) -> ExperimentSpec:
    """Load and validate a spec from a YAML file (a shipped grid by name: ``reproductions.grid_reproductions``).

    Raises :class:`SpecError` (a ValueError) naming the file and the bad key.
    """
    import yaml

    path = Path(path_or_name)
    if path.is_file():
        try:
            text, where = path.read_text(encoding="utf-8"), str(path)
        except UnicodeDecodeError as err:
            raise SpecError(
                f"spec file {path} is not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start}); "
                "save it as UTF-8"
            ) from None
    else:
        raise SpecError(f"spec file {path_or_name} not found")
    try:
        data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        raise SpecError(f"{where}: not valid YAML: {err}") from None
    return _validate(data, where)
