"""Membership-inference attacks on recourse: CFD, CFD-LRT, Loss, Loss-LRT, random guessing, and their registry."""

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.distance import cfd_attack, cfd_lrt_attack
from recourse_privacy.attacks.loss import loss_attack, loss_lrt_attack
from recourse_privacy.attacks.lrt import (
    DirectionDecision,
    GaussianReference,
    calibrate_direction,
    fit_reference,
    lrt_scores,
)
from recourse_privacy.attacks.random_guess import random_attack
from recourse_privacy.attacks.registry import (
    ATTACKS,
    AttackInputs,
    LRTOptions,
    check_attack_names,
    register_attack,
    run_attack,
)
from recourse_privacy.attacks.shadow import ShadowData, balanced_keep, run_shadow_models

__all__ = [
    "ATTACKS",
    "AttackInputs",
    "AttackScores",
    "DirectionDecision",
    "GaussianReference",
    "LRTOptions",
    "ShadowData",
    "balanced_keep",
    "calibrate_direction",
    "cfd_attack",
    "cfd_lrt_attack",
    "check_attack_names",
    "fit_reference",
    "loss_attack",
    "loss_lrt_attack",
    "lrt_scores",
    "random_attack",
    "register_attack",
    "run_attack",
    "run_shadow_models",
]
