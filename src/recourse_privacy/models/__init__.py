"""Models: the protocol, logistic regression, the papers' MLPs, DP-trained models (DPM), wrappers for user models."""

from recourse_privacy.models.base import (
    BaseClassifier,
    Classifier,
    accuracy,
    logit_confidence,
    per_example_loss,
)
from recourse_privacy.models.dp import DPLogisticModel, DPMLPModel
from recourse_privacy.models.registry import MODELS, check_model_name, make_model, model_factory, register_model
from recourse_privacy.models.wrappers import SklearnModel, TorchModel

__all__ = [
    "BaseClassifier",
    "Classifier",
    "DPLogisticModel",
    "DPMLPModel",
    "MODELS",
    "SklearnModel",
    "TorchModel",
    "accuracy",
    "check_model_name",
    "logit_confidence",
    "make_model",
    "model_factory",
    "per_example_loss",
    "register_model",
]
