"""The recourse-based membership-inference game: its configuration, stages, defenses and typed result.

``run_audit(AuditConfig(...), out_dir)`` plays the game once (Pawelczyk et al. 2023,
Definition 1) and returns an :class:`AuditResult`; ``register_defense`` adds a defense the game
can be played against.
"""

from recourse_privacy.audit.config import DEFAULT_ATTACKS, DISTANCES, AuditConfig
from recourse_privacy.audit.defenses import DEFENSES, Defense, register_defense
from recourse_privacy.audit.pipeline import data_provenance, run_audit
from recourse_privacy.audit.result import SCHEMA_VERSION, AuditArrays, AuditResult
from recourse_privacy.audit.summaries import (
    AttackResult,
    DataSummary,
    DPSummary,
    ModelSummary,
    RecourseSummary,
    ShadowSummary,
    VersusScores,
)

__all__ = [
    "DEFAULT_ATTACKS",
    "DEFENSES",
    "DISTANCES",
    "SCHEMA_VERSION",
    "AttackResult",
    "AuditArrays",
    "AuditConfig",
    "AuditResult",
    "DPSummary",
    "DataSummary",
    "Defense",
    "ModelSummary",
    "RecourseSummary",
    "ShadowSummary",
    "VersusScores",
    "data_provenance",
    "register_defense",
    "run_audit",
]
