"""The registry of model configurations: name -> a factory ``(random_state, **params) -> unfitted model``.

An entry says what its models provide (``capabilities``: ``linear``, ``gradients``), whether
they are trained with differential privacy (``dp``, DPM of Huang et al. 2023; they need
``epsilon``), and, for non-private models, which DP model of the same family replaces them
under the DPM defense (``dp_counterpart``).
"""

from __future__ import annotations

from collections.abc import Callable

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.registry import Entry, Registry

__all__ = ["MODELS", "check_model_name", "dp_counterpart", "make_model", "model_factory", "register_model"]

MODELS: Registry[Callable[..., BaseClassifier]] = Registry(
    "model", builtins=("recourse_privacy.models.catalog",), needs_vocabulary=("epsilon",)
)


def register_model(
    name: str,
    *,
    description: str,
    capabilities=(),
    dp: bool = False,
    dp_counterpart: tuple[str, dict] | None = None,
    replace: bool = False,
):
    """Decorator: register a factory ``(random_state=None, **params) -> unfitted model`` under ``name``."""
    return MODELS.register(
        name,
        description=description,
        needs=("epsilon",) if dp else (),
        replace=replace,
        capabilities=frozenset(capabilities),
        dp=dp,
        dp_counterpart=dp_counterpart,
    )


def check_model_name(name: str) -> str:
    """Return ``name`` if it is a registered model, else raise listing the registered ones."""
    return MODELS.check(name)


def model_entry(name: str) -> Entry:
    """The registry entry of ``name``."""
    return MODELS.get(name)


def make_model(name: str, *, random_state=None, **params) -> BaseClassifier:
    """An unfitted model by name; ``params`` override the paper defaults (e.g. epochs, C)."""
    entry = MODELS.get(name)
    if entry.meta["dp"] and params.get("epsilon") is None:
        raise InvalidInputError(f"model {name!r} needs epsilon (e.g. --defense dpm --epsilon 1)")
    return entry.obj(random_state=random_state, **params)


def dp_counterpart(name: str) -> tuple[str, dict]:
    """The DP-trained model (DPM) of the same family: (name, extra params keeping the architecture)."""
    entry = MODELS.get(name)
    if entry.meta["dp"]:
        return name, {}
    if entry.meta["dp_counterpart"] is None:
        raise InvalidInputError(f"model {name!r} has no DP-trained counterpart")
    dp_name, extra = entry.meta["dp_counterpart"]
    return dp_name, dict(extra)


def model_factory(name: str, **params) -> Callable[[int], BaseClassifier]:
    """A function seed -> unfitted model: the training algorithm T of the game."""
    check_model_name(name)
    return lambda seed: make_model(name, random_state=seed, **params)
