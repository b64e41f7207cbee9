"""The typed results the audit builds and the report renders, below both.

``summaries`` holds one frozen dataclass per block of ``metrics.json`` (data, model, recourse,
attacks, shadow models, the deployed draw, DP); ``audit`` the :class:`AuditRecord` that puts them
together with the per-target arrays (the audit builds its subclass
:class:`recourse_privacy.audit.AuditResult`). User code imports them from :mod:`recourse_privacy.audit`.
"""

from recourse_privacy.deprecation import renamed_names
from recourse_privacy.results.audit import RENAMED, SCHEMA_VERSION, AuditArrays, AuditRecord, AuditSettings
from recourse_privacy.results.summaries import (
    QUESTION_DEPLOYED,
    QUESTION_RECIPE,
    AttackResult,
    DataSummary,
    DeployedSummary,
    DirectionAttackSummary,
    DPSummary,
    DPVerdict,
    ModelSummary,
    PoolSizes,
    Provenance,
    RecourseSummary,
    ShadowSummary,
    VersusScores,
)

__all__ = [
    "QUESTION_DEPLOYED",
    "QUESTION_RECIPE",
    "SCHEMA_VERSION",
    "AttackResult",
    "AuditArrays",
    "AuditRecord",
    "AuditSettings",
    "DPSummary",
    "DPVerdict",
    "DataSummary",
    "DeployedSummary",
    "DirectionAttackSummary",
    "ModelSummary",
    "PoolSizes",
    "Provenance",
    "RecourseSummary",
    "ShadowSummary",
    "VersusScores",
]

__getattr__ = renamed_names(__name__, RENAMED)
