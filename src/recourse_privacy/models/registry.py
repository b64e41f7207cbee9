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
    "dp-logistic": ("epsilon-DP logistic regression (diffprivlib, objective perturbation; rows of norm <= data_norm)",
                    True, True),
    "dp-mlp": ("ReLU network trained with DP-SGD (Opacus; epsilon, delta, max_grad_norm)", False, True),
}

#: DP models (DPM, paper 001): they need ``epsilon`` in ``params``
DP_MODELS = ("dp-logistic", "dp-mlp")

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
    if name in DP_MODELS:
        if params.get("epsilon") is None:
            raise ValueError(f"model {name!r} needs epsilon (e.g. --defense dpm --epsilon 1)")
        if name == "dp-logistic":
            from recourse_privacy.defenses.dpm import DPLogisticModel

            return DPLogisticModel(random_state=random_state, **params)
        from recourse_privacy.defenses.dpm import DPMLPModel

        return DPMLPModel(random_state=random_state, **params)
    from recourse_privacy.models.mlp import MLPModel

    params.setdefault("hidden_layers", _HIDDEN[name])
    return MLPModel(random_state=random_state, **params)


def dp_counterpart(name: str) -> tuple[str, dict]:
    """The DP-trained model (DPM) of the same family: (name, extra params keeping the architecture)."""
    check_model_name(name)
    if name in DP_MODELS:
        return name, {}
    if name == "logistic":
        return "dp-logistic", {}
    if name in _HIDDEN:
        return "dp-mlp", {"hidden_layers": _HIDDEN[name]}
    raise ValueError(f"model {name!r} has no DP-trained counterpart")


def model_factory(name: str, **params) -> Callable[[int], BaseClassifier]:
    """A function seed -> unfitted model: the training algorithm T of the game."""
    check_model_name(name)
    return lambda seed: make_model(name, random_state=seed, **params)
