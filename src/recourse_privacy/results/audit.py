"""The typed result of one audit: what ``metrics.json`` holds, and the arrays behind it.

This module sits below the audit that builds the result and the report that renders it, so the
report imports these types (no duck typing). The audit's configuration lives above it
(:class:`~recourse_privacy.audit.AuditConfig`): here it is read through :class:`AuditSettings`.
:class:`AuditRecord` is the record every reader takes; :class:`recourse_privacy.audit.AuditResult`,
the subclass the audit builds and user code reads back, adds only reading the ``config`` block
of ``metrics.json`` as an ``AuditConfig`` (:meth:`AuditRecord.read_config`), which this layer
cannot import. (``recourse_privacy.results.AuditResult``, the old name of the record, still
resolves to :class:`AuditRecord` with a DeprecationWarning.)

Every reader (the report, the trade-off sweep, the results tables, the CLI) reads these
fields, never string keys of a dict, so the writer and the readers cannot drift apart (as
TensorFlow Privacy's ``AttackResults`` dataclasses do for its attacks). ``to_dict`` gives
the JSON of ``metrics.json`` with its ``schema_version``; ``from_dict`` reads it back and
refuses a file of a newer schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Self

import numpy as np

from recourse_privacy import strict_json
from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.threat_report import ThreatReport
from recourse_privacy.deprecation import renamed_names
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.exposure import (
    ExposedRecord,
    ExposureSummary,
    GroupExposure,
    IdentifiedMembers,
)
from recourse_privacy.recourse.base import RecourseResult
from recourse_privacy.results.summaries import (
    QUESTION_DEPLOYED,
    QUESTION_RECIPE,
    AttackResult,
    DataSummary,
    DeployedSummary,
    DPSummary,
    ModelSummary,
    Provenance,
    RecourseSummary,
    ShadowSummary,
    frozen_map,
    plain,
    take,
)

__all__ = ["SCHEMA_VERSION", "AuditArrays", "AuditRecord", "AuditSettings"]

#: version of the metrics.json layout; bump it when a field changes meaning or is removed.
#: 2: every attack gains its signal, confidence intervals (auc_ci, tpr_at_fpr_ci, achieved_fpr_ci,
#: ci_level, n_bootstrap) and, for a distance attack, versus_scores; files of version 1 still read.
SCHEMA_VERSION = 2


class AuditSettings(Protocol):
    """The audit's configuration as the result's readers see it (:class:`~recourse_privacy.audit.AuditConfig`)."""

    dataset: str
    data: Any  # a CSV/Parquet path, a DataFrame or None (generated data)
    target: str | None
    model_label: str
    recourse: str
    defense: str
    epsilon: float
    distance: str
    seed: int

    def to_dict(self) -> dict:
        """The JSON of ``metrics.json``'s ``config`` block."""
        ...


@dataclass(frozen=True)
class AuditArrays:
    """The per-target arrays behind the metrics (not written to metrics.json)."""

    scores: Mapping[str, AttackScores]
    is_member: np.ndarray
    cfd: np.ndarray
    recourse: RecourseResult
    pools: object = None
    #: one row per target in the data's own columns and units (a user's data only; see stages.counterfactual_table)
    counterfactuals: object = None
    #: one row per target: membership, decision, each attack's score and percentile (exposure.csv; audit/exposure.py)
    exposure: object = None


@dataclass(frozen=True)
class AuditRecord:
    """Everything one audit produced, as the report and the other readers take it.

    The audit builds its subclass :class:`recourse_privacy.audit.AuditResult`, which also reads
    ``metrics.json`` back (this record's :meth:`from_dict` needs a subclass that knows the
    configuration type). The serialised part (``to_dict``: metrics.json) is typed field by field; ``arrays`` holds
    the scores and distances behind it (None for a result read back from a file); ``files``
    the paths written (empty until the outputs are written).
    """

    config: AuditSettings
    data: DataSummary
    model: ModelSummary
    recourse: RecourseSummary
    n_members: int
    n_nonmembers: int
    attacks: Mapping[str, AttackResult]
    warnings: tuple[str, ...] = ()
    #: attack -> why it could not score these targets (asked for, not run; the verdict names it with its reason)
    attacks_not_run: Mapping[str, str] = field(default_factory=dict)
    dp: DPSummary | None = None
    shadow: ShadowSummary | None = None
    timing_seconds: Mapping[str, float] = field(default_factory=dict)
    provenance: Provenance | None = None  # data source and SHA-256, package version, platform (None: older files)
    threats: ThreatReport | None = None  # extraction, attribute inference, queries per attack (audit --threats)
    deployed: DeployedSummary | None = None  # the as-deployed audit's draw (None: the recipe re-trained)
    exposure: ExposureSummary | None = None  # the most exposed members, members identified at low FPR
    groups: tuple[GroupExposure, ...] = ()  # per value of each group column and per attack
    schema_version: int = SCHEMA_VERSION
    arrays: AuditArrays | None = field(default=None, compare=False, repr=False)
    files: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attacks", frozen_map(self.attacks))
        object.__setattr__(self, "attacks_not_run", frozen_map(self.attacks_not_run))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "timing_seconds", frozen_map(self.timing_seconds))
        object.__setattr__(self, "files", frozen_map(self.files))
        object.__setattr__(self, "groups", tuple(self.groups))

    @property
    def question(self) -> str:
        """Which question the audit answers: "this deployed model" or "this recipe, re-trained"."""
        return QUESTION_DEPLOYED if self.deployed is not None else QUESTION_RECIPE

    # ------------------------------------------------------------------ views
    @property
    def is_member(self) -> np.ndarray:
        """Membership of each target (1 = member); needs the arrays."""
        return self._arrays().is_member

    @property
    def cfd(self) -> np.ndarray:
        """Counterfactual distance of each target, in ``config.distance``; needs the arrays."""
        return self._arrays().cfd

    @property
    def scores(self) -> Mapping[str, AttackScores]:
        """Each attack's scores per target; needs the arrays."""
        return self._arrays().scores

    @property
    def recourse_result(self) -> RecourseResult:
        """The owner's recourse for the targets; needs the arrays."""
        return self._arrays().recourse

    @property
    def pools(self):
        """The disjoint member / non-member / adversary row indices; needs the arrays."""
        return self._arrays().pools

    def _arrays(self) -> AuditArrays:
        if self.arrays is None:
            raise InvalidInputError("this audit result was read from metrics.json and carries no per-target arrays")
        return self.arrays

    def with_files(self, files: Mapping[str, str]) -> Self:
        """A copy that records the output files written."""
        return replace(self, files=dict(files))

    def table(self) -> list[dict]:
        """One row per attack: name, AUC, BA, TPR at each FPR."""
        rows = []
        for name, a in self.attacks.items():
            row = {"attack": name, "auc": a.auc, "balanced_accuracy": a.balanced_accuracy}
            row.update({f"tpr@{k}": v for k, v in a.tpr_at_fpr.items()})
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ (de)serialising
    @classmethod
    def read_config(cls, d: Mapping) -> AuditSettings:
        """The ``config`` block of metrics.json as a configuration; the audit's subclass knows how."""
        raise InvalidInputError(
            "reading metrics.json back needs the audit's configuration type: use recourse_privacy.audit.AuditResult"
        )

    def to_dict(self) -> dict:
        """The content of metrics.json."""
        d = {
            "schema_version": self.schema_version,
            "question": self.question,
            "config": self.config.to_dict(),
            "data": plain(self.data),
            "model": plain(self.model),
            "recourse": plain(self.recourse),
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "attacks": {name: a.to_dict() for name, a in self.attacks.items()},
            "warnings": list(self.warnings),
        }
        if self.attacks_not_run:
            d["attacks_not_run"] = dict(self.attacks_not_run)
        if self.dp is not None:
            d["dp"] = self.dp.to_dict()
        if self.shadow is not None:
            d["shadow"] = plain(self.shadow)
        if self.deployed is not None:
            d["deployed"] = plain(self.deployed)
        if self.exposure is not None:
            d["exposure"] = plain(self.exposure)
        if self.groups:
            d["groups"] = [plain(g) for g in self.groups]
        d["timing_seconds"] = dict(self.timing_seconds)
        if self.provenance is not None:
            d["provenance"] = self.provenance.to_dict()
        if self.threats is not None:
            d["threats"] = self.threats.to_dict()
        return plain(d)

    @classmethod
    def from_dict(cls, d: Mapping) -> Self:
        """Read a metrics.json dict back; a newer schema, or a missing field, raises naming it."""
        d = strict_json.restore(d)  # a null written for NaN (beside its reason) is nan again
        version = d.get("schema_version", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise InvalidInputError(
                f"metrics.json has schema_version {version!r}; this version of recourse-privacy "
                f"reads up to {SCHEMA_VERSION}: upgrade the package"
            )
        for key in ("config", "data", "model", "recourse", "n_members", "n_nonmembers", "attacks"):
            if key not in d:
                raise InvalidInputError(f"metrics.json lacks {key!r}")
        return cls(
            config=cls.read_config(d["config"]),
            data=take(DataSummary, d["data"], "data"),
            model=take(ModelSummary, d["model"], "model"),
            recourse=take(RecourseSummary, d["recourse"], "recourse"),
            n_members=int(d["n_members"]),
            n_nonmembers=int(d["n_nonmembers"]),
            attacks={name: AttackResult.from_dict(name, a) for name, a in d["attacks"].items()},
            warnings=tuple(d.get("warnings", ())),
            attacks_not_run=dict(d.get("attacks_not_run", {})),
            dp=take(DPSummary, d["dp"], "dp") if d.get("dp") else None,
            shadow=take(ShadowSummary, d["shadow"], "shadow") if d.get("shadow") else None,
            timing_seconds=d.get("timing_seconds", {}),
            provenance=take(Provenance, d["provenance"], "provenance") if d.get("provenance") else None,
            threats=ThreatReport.from_dict(d["threats"]) if d.get("threats") else None,
            deployed=take(DeployedSummary, d["deployed"], "deployed") if d.get("deployed") else None,
            exposure=_exposure_from_dict(d["exposure"]) if d.get("exposure") else None,
            groups=tuple(
                replace(take(GroupExposure, g, "groups"), auc_ci=tuple(g["auc_ci"]), tpr_ci=tuple(g["tpr_ci"]))
                for g in d.get("groups", ())
            ),
            schema_version=SCHEMA_VERSION,
        )


#: old public names of this module: (the warning, what they resolve to)
RENAMED = {
    "AuditResult": (
        "recourse_privacy.results.AuditResult is renamed AuditRecord (the record the report reads); the audit's "
        "result, which also reads metrics.json back, is recourse_privacy.audit.AuditResult",
        AuditRecord,
    )
}
__getattr__ = renamed_names(__name__, RENAMED)


def _exposure_from_dict(d: Mapping) -> ExposureSummary:
    """The ``exposure`` block of metrics.json as its typed summary."""
    return ExposureSummary(
        ranking_attack=d["ranking_attack"],
        most_exposed=tuple(take(ExposedRecord, r, "exposure.most_exposed") for r in d.get("most_exposed", ())),
        identified=tuple(take(IdentifiedMembers, r, "exposure.identified") for r in d.get("identified", ())),
        likelihood_ratio_attacks=tuple(d.get("likelihood_ratio_attacks", ())),
        note=d.get("note", ""),
    )
