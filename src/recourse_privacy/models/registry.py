"""Named model configurations of the papers, for the CLI and experiment specs."""
from __future__ import annotations

from typing import Callable

from recourse_privacy.models.base import BaseClassifier

#: name -> (description, is_linear, is_differentiable)
MODELS: dict[str, tuple[str, bool, bool]] = {
    "logistic": ("logistic regression (scikit-learn, C=1)", True, True),
    "mlp": ("1 hidden layer of 1,000 ReLU (paper 000, Table 5)", False, True),
    "mlp3-100": ("3 hidden layers of 100 ReLU (paper 000, Figure 3b)", False, True),
    "mlp3-333": ("3 hidden layers of 333 ReLU (paper 000, Figure 3c)", False, True),
    "mlp3-1000": ("3 hidden layers of 1,000 ReLU (paper 000, Figure 3d)", False, True),
}

_HIDDEN = {"mlp": (1000,), "mlp3-100": (100,) * 3, "mlp3-333": (333,) * 3, "mlp3-1000": (1000,) * 3}


def check_model_name(name: str) -> str:
    """Return ``name`` if it is a known model, else raise a ValueError listing the known ones."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    return name


def make_model(name: str, *, random_state=None, **params) -> BaseClassifier:
    """An unfitted model by name; ``params`` override the paper defaults (e.g. epochs, C)."""
    check_model_name(name)
    if name == "logistic":
        from recourse_privacy.models.logistic import LogisticModel

        return LogisticModel(random_state=random_state, **params)
    from recourse_privacy.models.mlp import MLPModel

    params.setdefault("hidden_layers", _HIDDEN[name])
    return MLPModel(random_state=random_state, **params)


def model_factory(name: str, **params) -> Callable[[int], BaseClassifier]:
    """A function seed -> unfitted model: the training algorithm T of the game."""
    check_model_name(name)
    return lambda seed: make_model(name, random_state=seed, **params)
