"""Differentially private recourse (paper 001): DPM (DP-trained models), Laplace Recourse, budget accounting.

Heavy libraries (diffprivlib, Opacus, torch) are imported only when a mechanism runs.
"""
from recourse_privacy.defenses.accounting import RecourseSession
from recourse_privacy.defenses.dpm import DPLogisticModel, DPMLPModel
from recourse_privacy.defenses.laplace import LaplaceRecourse, SimulatedLaplaceRecourse, noisy_logit, noisy_probability

__all__ = ["DPLogisticModel", "DPMLPModel", "LaplaceRecourse", "RecourseSession", "SimulatedLaplaceRecourse",
           "noisy_logit", "noisy_probability"]
