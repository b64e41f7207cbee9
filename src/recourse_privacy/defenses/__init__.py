"""Differentially private recourse (Huang et al. 2023): Laplace Recourse, the budget-owning session, the defense registry.

DP-trained models (DPM) live beside the other models, in :mod:`recourse_privacy.models.dp`.

Heavy libraries (diffprivlib, Opacus, torch) are imported only when a mechanism runs.
"""

from recourse_privacy.defenses.accounting import RecourseSession
from recourse_privacy.defenses.laplace import LaplaceRecourse, SimulatedLaplaceRecourse, noisy_logit, noisy_probability

__all__ = ["LaplaceRecourse", "RecourseSession", "SimulatedLaplaceRecourse", "noisy_logit", "noisy_probability"]
