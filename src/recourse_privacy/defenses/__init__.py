"""Differentially private recourse (Huang et al. 2023): the mechanisms, the budget-owning session, and the defenses.

Laplace Recourse (:mod:`.laplace`) and the budget session (:mod:`.accounting`); the defenses the
audit plays, each registered in its module (:mod:`.registry`: the interface and ``none``;
:mod:`.dpm`; :mod:`.laplace_defense`), and the verdict on a DP claim (:mod:`.verdict`).
DP-trained models (DPM) live beside the other models, in :mod:`recourse_privacy.models.dp`.

Heavy libraries (diffprivlib, Opacus, torch) are imported only when a mechanism runs.
"""

from recourse_privacy.defenses.accounting import RecourseSession
from recourse_privacy.defenses.laplace import LaplaceRecourse, SimulatedLaplaceRecourse, noisy_logit, noisy_probability

__all__ = ["LaplaceRecourse", "RecourseSession", "SimulatedLaplaceRecourse", "noisy_logit", "noisy_probability"]
