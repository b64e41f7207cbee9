"""Models: the protocol, logistic regression, the paper's MLPs, and wrappers for user models."""
from recourse_privacy.models.base import (
    BaseClassifier,
    Classifier,
    accuracy,
    logit_confidence,
    per_example_loss,
)
from recourse_privacy.models.registry import MODELS, check_model_name, make_model, model_factory
from recourse_privacy.models.wrappers import SklearnModel, TorchModel

__all__ = [
    "BaseClassifier", "Classifier", "MODELS", "SklearnModel", "TorchModel", "accuracy",
    "check_model_name", "logit_confidence", "make_model", "model_factory", "per_example_loss",
]
