"""The typed pieces of an audit's result, re-exported from :mod:`recourse_privacy.results.summaries`.

They live below the report (which renders them); this module keeps ``recourse_privacy.audit.summaries``
imports working.
"""

from recourse_privacy.results.summaries import (
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
    frozen_map,
    plain,
    take,
)

__all__ = [
    "AttackResult",
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
    "frozen_map",
    "plain",
    "take",
]
