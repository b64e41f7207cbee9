"""One registry pattern for attacks, recourse methods, models, defenses and datasets.

A :class:`Registry` maps a name to an :class:`Entry`: the callable itself (a class or a
function), a one-line description and what it needs (``needs``: shadow models, a linear
model, gradients, fitting data ...), so that compatibility, CLI help and
``recourse-privacy list`` are all derived from one place. As in Opacus' accountant registry,
adding an entry is one decorator::

    from recourse_privacy.attacks import register_attack

    @register_attack("my-attack", description="...", needs=("shadow_models",))
    def my_attack(inputs): ...

Built-in entries live in the modules of the registry's own ``packages`` (every module there is
imported on the first lookup: a new attack or recourse method is one new file) or named by
``builtins`` (modules of the same package); entries defined in a higher layer (Laplace Recourse,
DPC, PrivRecourse register recourse methods) are declared by the package's own entry points,
group ``recourse_privacy.builtins`` in ``pyproject.toml``, so no registry imports a higher layer
by name. Third-party packages add entries through the ``recourse_privacy.plugins`` entry-point
group (each entry point names a module whose import registers its entries), loaded on the
first lookup in every process, so a worker of a parallel grid sees the same entries as the
CLI that started it.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from recourse_privacy.errors import InvalidInputError, UnknownNameError

__all__ = ["BUILTIN_GROUP", "PLUGIN_GROUP", "Entry", "Registry", "load_builtin_entry_points", "load_plugins"]

#: the entry-point group third-party packages register their modules under
PLUGIN_GROUP = "recourse_privacy.plugins"
#: the entry-point group of this package's own modules that register into a lower layer's registry
BUILTIN_GROUP = "recourse_privacy.builtins"

T = TypeVar("T")

_plugins_lock = threading.RLock()  # re-entrant: a plugin may look up a registry while it loads
_plugins_loaded: list[str] | None = None


_builtins_loaded = False


def load_builtin_entry_points() -> None:
    """Import, once per process, this package's modules declared in the ``recourse_privacy.builtins`` group."""
    global _builtins_loaded
    with _plugins_lock:
        if _builtins_loaded:
            return
        _builtins_loaded = True
        from importlib.metadata import entry_points

        for ep in sorted(entry_points(group=BUILTIN_GROUP), key=lambda e: e.name):
            importlib.import_module(ep.value)


def load_plugins(*, reload: bool = False) -> list[str]:
    """Import every module of the ``recourse_privacy.plugins`` entry-point group once per process.

    Returns the names of the entry points loaded. A plugin that fails to import raises an
    :class:`InvalidInputError` naming the entry point, rather than silently missing entries.
    """
    global _plugins_loaded
    with _plugins_lock:
        if _plugins_loaded is not None and not reload:
            return list(_plugins_loaded)
        from importlib.metadata import entry_points

        loaded = []
        for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
            try:
                ep.load()
            except Exception as err:  # a broken plugin must say so, by name
                raise InvalidInputError(f"plugin {ep.name!r} ({ep.value}) failed to load: {err}") from err
            loaded.append(ep.name)
        _plugins_loaded = loaded
        return list(loaded)


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered thing: its name, the callable, a description and what it needs."""

    name: str
    obj: T
    description: str
    needs: frozenset[str] = frozenset()
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    @property
    def module(self) -> str:
        """The module that defines the callable (shows where a plugin's entry comes from)."""
        return getattr(self.obj, "__module__", "?")


class Registry(Generic[T]):
    """Names to :class:`Entry` objects, for one kind of thing (``kind`` is used in messages).

    ``needs_vocabulary`` lists the requirements an entry may declare; an unknown one is an
    error at registration, so a typo cannot silently disable a compatibility check.
    """

    def __init__(
        self,
        kind: str,
        *,
        builtins: Iterable[str] = (),
        packages: Iterable[str] = (),
        needs_vocabulary: Iterable[str] = (),
    ):
        self.kind = kind
        self._builtins = tuple(builtins)
        self._packages = tuple(packages)
        self._vocabulary = frozenset(needs_vocabulary)
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ registering
    def register(
        self, name: str, *, description: str, needs: Iterable[str] = (), replace: bool = False, **meta: Any
    ) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: returns the decorated object unchanged."""

        def decorate(obj: T) -> T:
            self.add(name, obj, description=description, needs=needs, replace=replace, **meta)
            return obj

        return decorate

    def add(
        self, name: str, obj: T, *, description: str, needs: Iterable[str] = (), replace: bool = False, **meta: Any
    ) -> Entry[T]:
        """Register ``obj`` under ``name``; a different object under a taken name needs ``replace=True``."""
        if not isinstance(name, str) or not name or name != name.strip() or "," in name:
            raise InvalidInputError(f"a {self.kind} name must be a non-empty string without commas; got {name!r}")
        needs = frozenset(needs)
        unknown = needs - self._vocabulary
        if unknown:
            raise InvalidInputError(
                f"{self.kind} {name!r} declares unknown needs {sorted(unknown)}; known: {sorted(self._vocabulary)}"
            )
        entry = Entry(name, obj, description, needs, meta)
        with self._lock:
            old = self._entries.get(name)
            if old is not None and not replace and _qualname(old.obj) != _qualname(obj):
                raise InvalidInputError(
                    f"{self.kind} {name!r} is already registered by {old.module}; pass replace=True to override it"
                )
            self._entries[name] = entry
        return entry

    def remove(self, name: str) -> Entry[T]:
        """Unregister ``name`` and return its entry (for tests and for plugins that replace a built-in)."""
        with self._lock:
            if name not in self._entries:
                raise UnknownNameError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self._entries)}")
            return self._entries.pop(name)

    # ------------------------------------------------------------------ looking up
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)
            for package in self._packages:
                for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
                    if not info.name.startswith("_"):
                        importlib.import_module(f"{package}.{info.name}")
            load_builtin_entry_points()
            load_plugins()

    def get(self, name: str) -> Entry[T]:
        """The entry called ``name``; an unknown name raises :class:`UnknownNameError` listing the known ones."""
        self._ensure_loaded()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names())}") from None

    def check(self, name: str) -> str:
        """Return ``name`` if registered, else raise like :meth:`get`."""
        return self.get(name).name

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return name in self._entries

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order (built-ins first)."""
        self._ensure_loaded()
        return tuple(self._entries)

    def entries(self) -> tuple[Entry[T], ...]:
        """Every entry, in registration order."""
        self._ensure_loaded()
        return tuple(self._entries.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def help_text(self) -> str:
        """One comma-separated list of the names, for CLI help."""
        return ", ".join(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries)"


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}"
