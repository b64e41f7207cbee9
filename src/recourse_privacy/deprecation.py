"""Old public names that still resolve, with a DeprecationWarning: one helper for every module that renamed one.

A module that renamed a public object keeps the old name working through its ``__getattr__`` (PEP 562)::

    __getattr__ = renamed_names(__name__, {"OldName": ("pkg.OldName is renamed pkg.NewName", NewName)})
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

__all__ = ["renamed_names"]


def renamed_names(module: str, renamed: Mapping[str, tuple[str, object]]) -> Callable[[str], object]:
    """A module ``__getattr__`` resolving each old name of ``renamed`` (old name -> (message, new object)).

    Reading an old name warns (DeprecationWarning, the message and "the old name will be removed",
    pointing at the line that read it) and returns the new object; any other missing name raises
    module ``module``'s AttributeError. The message should name the new object.
    """
    renamed = dict(renamed)

    def __getattr__(name: str) -> object:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        message, obj = renamed[name]
        warnings.warn(f"{message}; the old name will be removed", DeprecationWarning, stacklevel=2)
        return obj

    __getattr__.__doc__ = f"The deprecated old names of {module}: {', '.join(renamed)}."
    return __getattr__
