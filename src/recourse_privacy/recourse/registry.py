"""Recourse methods by name, for the CLI and experiment specs."""
from __future__ import annotations

from recourse_privacy.recourse.linear import LinearRecourse
from recourse_privacy.recourse.scfe import SCFE

#: name -> (class, description)
RECOURSE_METHODS: dict[str, tuple[type, str]] = {
    "linear": (LinearRecourse, "exact closed-form recourse for linear models"),
    "scfe": (SCFE, "Wachter et al. gradient search (Adam, BCE + lam * L1), batched"),
}


def check_recourse_name(name: str) -> str:
    """Return ``name`` if it is a known method, else raise a ValueError listing the known ones."""
    if name not in RECOURSE_METHODS:
        raise ValueError(f"unknown recourse method {name!r}; choose one of {', '.join(RECOURSE_METHODS)}")
    return name


def make_recourse(name: str, **params):
    """A recourse method by name; ``params`` override its defaults."""
    return RECOURSE_METHODS[check_recourse_name(name)][0](**params)


def recourse_requires(name: str) -> str | None:
    """What the method needs of a model: 'linear', 'differentiable' or None."""
    return getattr(RECOURSE_METHODS[check_recourse_name(name)][0], "requires", None)
