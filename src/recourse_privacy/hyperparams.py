"""Typed, bounded hyperparameters: every model and recourse parameter checked before any work.

A class declares its parameters' types and ranges next to its constructor::

    class MLPModel(BaseClassifier):
        PARAMS = {"epochs": Int(1, 100_000), "lr": Float(0, 10, low_open=True), ...}

and :func:`enforce_params` (applied once, by the model base class and by
:func:`~recourse_privacy.recourse.registry.register_recourse`) wraps its ``__init__`` so that
every construction, from the CLI, a spec or Python, checks them first. A failure is an
:class:`~recourse_privacy.errors.InvalidInputError` naming the owner, the parameter, the value
and the allowed range; an unknown keyword names the parameters that exist.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recourse_privacy.errors import InvalidInputError

__all__ = ["Bool", "Choice", "Float", "Int", "Ints", "Param", "check_params", "enforce_params"]


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else f"{x:,}".replace(",", "_") if abs(x) >= 10_000 else str(x)


@dataclass(frozen=True)
class Param:
    """One parameter's type (``int``, ``float``, ``bool``, ``choice``, ``ints``) and range.

    ``low``/``high`` bound numbers (and every element of ``ints``); ``low_open``/``high_open``
    exclude the bound itself; ``optional`` admits None; ``choices`` lists a ``choice``'s values.
    """

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    choices: tuple = ()
    finite: bool = True  # False: +-inf allowed where the range holds it (e.g. FACE's radius)

    def describe(self) -> str:
        """What is allowed, in words: ``an integer in [1, 100_000]``."""
        if self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = "one of " + ", ".join(map(repr, self.choices))
        else:
            rng = f"{'(' if self.low_open else '['}{_fmt(self.low)}, {_fmt(self.high)}{')' if self.high_open else ']'}"
            text = {
                "int": f"an integer in {rng}",
                "float": f"a number in {rng}",
                "ints": f"a non-empty list of integers in {rng}",
            }[self.kind]
        return text + (" or null" if self.optional else "")

    def _in_range(self, v: float) -> bool:
        lo = self.low is None or (v > self.low if self.low_open else v >= self.low)
        hi = self.high is None or (v < self.high if self.high_open else v <= self.high)
        return lo and hi

    def ok(self, value: Any) -> bool:
        """Whether ``value`` has this type and lies in this range."""
        if value is None:
            return self.optional
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str | int | float) and value in self.choices
        if self.kind == "ints":
            return (
                isinstance(value, Sequence)
                and not isinstance(value, str)
                and len(value) > 0
                and all(
                    isinstance(v, numbers.Integral) and not isinstance(v, bool) and self._in_range(v) for v in value
                )
            )
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if self.kind == "int" and not isinstance(value, numbers.Integral):
            return False
        v = float(value)
        return (math.isfinite(v) or (not self.finite and not math.isnan(v))) and self._in_range(v)


def Int(low: int = 0, high: int = 10**9, *, optional: bool = False) -> Param:  # noqa: N802 - a type-like factory
    """An integer in [low, high]."""
    return Param("int", low, high, optional=optional)


def Float(
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,  # noqa: N802
    optional: bool = False,
    finite: bool = True,
) -> Param:
    """A number in [low, high] (open at either end on request); finite unless ``finite=False``."""
    return Param("float", float(low), float(high), low_open, high_open, optional, finite=finite)


def Bool() -> Param:  # noqa: N802
    """True or False (not 0/1)."""
    return Param("bool")


def Choice(*choices: Any, optional: bool = False) -> Param:  # noqa: N802
    """One of ``choices``."""
    return Param("choice", optional=optional, choices=tuple(choices))


def Ints(low: int = 1, high: int = 10**6) -> Param:  # noqa: N802
    """A non-empty list of integers in [low, high] (e.g. hidden-layer widths)."""
    return Param("ints", low, high)


def check_params(owner: str, values: Mapping[str, Any], params: Mapping[str, Param]) -> None:
    """Raise :class:`InvalidInputError` for the first of ``values`` outside its declared ``params``."""
    for name, p in params.items():
        if name in values and not p.ok(values[name]):
            raise InvalidInputError(f"{owner}: {name}={values[name]!r} is not allowed; {name} must be {p.describe()}")


def enforce_params(cls: type, owner: str | None = None) -> type:
    """Wrap ``cls.__init__`` so that every construction checks ``cls.PARAMS`` and refuses unknown keywords.

    Idempotent; a subclass that declares its own ``PARAMS`` is wrapped again when it is created.
    """
    init = cls.__dict__.get("__init__")
    params = getattr(cls, "PARAMS", None)
    if init is None or params is None or getattr(init, "_params_enforced", False):
        return cls
    sig = inspect.signature(init)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    names = [n for n in sig.parameters if n != "self"]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):  # noqa: N807
        label = owner or getattr(type(self), "name", None) or type(self).__name__
        label = label if isinstance(label, str) else type(self).__name__
        unknown = [k for k in kwargs if k not in sig.parameters]
        if unknown and not accepts_any:
            raise InvalidInputError(
                f"{label} has no parameter {unknown[0]!r}; its parameters are "
                f"{', '.join(n for n in names if n not in ('random_state', 'action_set'))}"
            )
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError as err:
            raise InvalidInputError(f"{label}: {err}") from None
        check_params(label, bound.arguments, type(self).PARAMS)
        init(self, *args, **kwargs)

    __init__._params_enforced = True  # type: ignore[attr-defined]
    cls.__init__ = __init__
    return cls
