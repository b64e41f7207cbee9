"""The typed results the audit builds and the report renders, below both.

``summaries`` holds one frozen dataclass per block of ``metrics.json`` (data, model, recourse,
attacks, shadow models, the deployed draw, DP); ``audit`` the :class:`AuditResult` that puts them
together with the per-target arrays. User code imports them from :mod:`recourse_privacy.audit`.
"""

from recourse_privacy.results.audit import SCHEMA_VERSION, AuditArrays, AuditResult, AuditSettings
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
    "AuditResult",
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
