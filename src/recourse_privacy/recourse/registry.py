"""The registry of recourse methods, and the one place that decides which method runs on which model.

Each method is a class registered with :func:`register_recourse`; the decorator also stores
what it needs on the class (``cls.needs``), so an instance can be checked against a model
without a lookup. What a method may need:

- ``linear``: a model linear in its inputs (``coef_``, ``intercept_``), for closed forms;
- ``gradients``: a differentiable model (``torch_module()``);
- ``fitting_data``: the method learns from data (a VAE, a graph of data points): ``fit(X, y, model)``
  is called in each world on that world's training data (see :func:`fit_for`).
"""

from __future__ import annotations

import inspect

from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.hyperparams import enforce_params
from recourse_privacy.registry import Entry, Registry

__all__ = [
    "MODEL_CAPABILITIES",
    "RECOURSE_METHODS",
    "RECOURSE_NEEDS",
    "check_action_set_support",
    "check_compatible",
    "honours_action_set",
    "check_recourse_name",
    "missing_capabilities",
    "make_recourse",
    "model_capabilities",
    "recourse_needs",
    "register_recourse",
]

#: what a recourse method may need
RECOURSE_NEEDS = ("linear", "gradients", "fitting_data")
#: the subset of RECOURSE_NEEDS a model can provide
MODEL_CAPABILITIES = ("linear", "gradients")

RECOURSE_METHODS: Registry[type] = Registry(
    "recourse method",
    # every module of this package (a new method is one file); Laplace Recourse, DPC and PrivRecourse live in
    # higher layers and are declared as the package's own entry points (group recourse_privacy.builtins)
    packages=("recourse_privacy.recourse",),
    needs_vocabulary=RECOURSE_NEEDS,
)


def register_recourse(name: str, *, description: str, needs=(), replace: bool = False, cost: float = 1.0):
    """Class decorator: register a recourse method under ``name`` and record ``needs`` on the class.

    The class takes its hyperparameters as keyword arguments, has ``name`` and
    ``generate(model, X) -> RecourseResult`` (and ``fit(X, y, model)`` when it needs fitting data);
    a ``random_state`` keyword marks it as randomized, so the audit seeds it. ``cost`` is the
    rough time of one counterfactual relative to SCFE's (1): grids start their costliest cells first.
    """
    if not isinstance(cost, (int, float)) or not cost > 0:
        raise InvalidInputError(f"cost must be a positive number; got {cost!r}")

    def decorate(cls: type) -> type:
        cls.needs = frozenset(needs)
        cls.name = name
        enforce_params(cls, name)  # its declared PARAMS checked at every construction
        RECOURSE_METHODS.add(
            name,
            cls,
            description=description,
            needs=needs,
            replace=replace,
            randomized="random_state" in inspect.signature(cls).parameters,
            cost=float(cost),
        )
        return cls

    return decorate


def check_recourse_name(name: str) -> str:
    """Return ``name`` if it is a registered method, else raise listing the registered ones."""
    return RECOURSE_METHODS.check(name)


def make_recourse(name: str, **params):
    """A recourse method by name; ``params`` override its defaults."""
    return RECOURSE_METHODS.get(name).obj(**params)


def recourse_needs(name: str) -> frozenset[str]:
    """What the registered method ``name`` needs (a subset of :data:`RECOURSE_NEEDS`)."""
    return RECOURSE_METHODS.get(name).needs


def model_capabilities(model) -> frozenset[str]:
    """What a model instance provides: ``linear`` and/or ``gradients``."""
    caps = set()
    if getattr(model, "is_linear", False):
        caps.add("linear")
    if getattr(model, "is_differentiable", False):
        caps.add("gradients")
    return frozenset(caps)


def missing_capabilities(method: str | Entry | type | object, capabilities) -> frozenset[str]:
    """The model capabilities (``linear``, ``gradients``) that ``method`` needs and ``capabilities`` lack."""
    if isinstance(method, str):
        method = RECOURSE_METHODS.get(method)
    needs = method.needs if isinstance(method, Entry) else getattr(method, "needs", frozenset())
    return frozenset(needs) & frozenset(MODEL_CAPABILITIES) - frozenset(capabilities)


def check_compatible(method: str | Entry | type | object, capabilities, model_label: str) -> None:
    """Raise :class:`IncompatibleError` where ``method`` needs what a model with ``capabilities`` lacks.

    ``method`` is a registered name, an entry, a class or an instance; ``model_label`` names the
    model in the message. This is the only place the decision is made: the audit's
    configuration check, the ``recourse`` command and every ``generate`` call go through it.
    """
    if isinstance(method, str):
        method = RECOURSE_METHODS.get(method)
    name = method.name if isinstance(method, Entry) else getattr(method, "name", type(method).__name__)
    missing = missing_capabilities(method, capabilities)
    if "linear" in missing:
        raise IncompatibleError(
            f"recourse {name!r} needs a linear model (coef_, intercept_); "
            f"{model_label} is not linear: use a method that needs no linear model, e.g. scfe"
        )
    if "gradients" in missing:
        raise IncompatibleError(
            f"recourse {name!r} needs gradients; {model_label} gives none: use a black-box "
            "method (gs, cchvae, face) or wrap a PyTorch / linear scikit-learn model"
        )


def honours_action_set(method: str | Entry | type | object) -> bool:
    """Whether ``method`` takes an ``action_set`` (immutable, increase-only features, ranges) and so honours one."""
    if isinstance(method, str):
        method = RECOURSE_METHODS.get(method)
    cls = method.obj if isinstance(method, Entry) else method if isinstance(method, type) else type(method)
    return "action_set" in inspect.signature(cls).parameters


def check_action_set_support(method: str | Entry | type | object, asked: list[str] | tuple[str, ...]) -> None:
    """Raise :class:`IncompatibleError` naming ``method`` and the options ``asked`` where it cannot honour them.

    ``asked``: the constraint options given (``--bounds``, ``--immutable``, ``--increasing``, ``--actionable``);
    a method without an ``action_set`` parameter would ignore them, so it is refused, never run.
    """
    if not asked or honours_action_set(method):
        return
    if isinstance(method, str):
        method = RECOURSE_METHODS.get(method)
    name = method.name if isinstance(method, Entry) else getattr(method, "name", type(method).__name__)
    able = [n for n in RECOURSE_METHODS if honours_action_set(n)]
    raise IncompatibleError(
        f"recourse {name!r} cannot honour {', '.join(asked)} (it takes no action set): drop "
        f"{'them' if len(asked) > 1 else 'it'} or use a method that does ({', '.join(able)})"
    )
