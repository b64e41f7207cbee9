"""Every registry of the package in one place: for ``recourse-privacy list``, CLI help and contract tests.

Importing this module loads the audit layer (so the defenses are registered) but no heavy
dependency; each registry imports its built-in entries and the installed plugins on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

from recourse_privacy.attacks.query_extraction import SURROGATES
from recourse_privacy.attacks.registry import ATTACKS
from recourse_privacy.attacks.released_set import RELEASE_ATTACKS
from recourse_privacy.audit.threats import THREATS
from recourse_privacy.data import DATASETS
from recourse_privacy.defenses.registry import DEFENSES
from recourse_privacy.dp_audit.experiments import MECHANISMS
from recourse_privacy.errors import UnknownNameError
from recourse_privacy.models.registry import MODELS
from recourse_privacy.recourse.registry import RECOURSE_METHODS
from recourse_privacy.registry import Registry, load_plugins
from recourse_privacy.reproductions.registry import REPRODUCTIONS

__all__ = ["REGISTRIES", "CatalogRow", "check_kind", "describe", "loaded_plugins", "reproductions_with_times"]

#: kind -> registry
REGISTRIES: dict[str, Registry] = {
    "attack": ATTACKS,
    "recourse": RECOURSE_METHODS,
    "model": MODELS,
    "defense": DEFENSES,
    "dataset": DATASETS,
    "mechanism": MECHANISMS,
    "reproduction": REPRODUCTIONS,
    "threat": THREATS,
    "surrogate": SURROGATES,
    "release-attack": RELEASE_ATTACKS,
}


@dataclass(frozen=True)
class CatalogRow:
    """One registered entry, as ``recourse-privacy list`` shows it."""

    name: str
    needs: str
    description: str
    module: str
    expected_time: str = ""  #: a reproduction's expected run time ("" for other kinds)


def check_kind(kind: str) -> str:
    """Return ``kind`` if it names a registry (a trailing 's' is accepted), else raise listing the kinds."""
    k = kind.rstrip("s") if kind.rstrip("s") in REGISTRIES else kind
    if k not in REGISTRIES:
        raise UnknownNameError(f"unknown kind {kind!r}; choose one of {', '.join(REGISTRIES)}")
    return k


def _needs(entry) -> str:
    parts = sorted(entry.needs)
    caps = entry.meta.get("capabilities")
    if caps:
        parts.append("provides " + "+".join(sorted(caps)))
    if entry.meta.get("dp"):
        parts.append("DP")
    if entry.meta.get("signal"):
        parts.append(f"reads {entry.meta['signal']}")
    return ", ".join(parts) or "-"


def describe(kind: str) -> list[CatalogRow]:
    """One row per registered entry of ``kind``."""
    registry = REGISTRIES[check_kind(kind)]
    if not hasattr(registry, "entries"):  # a plain tuple of names (datasets before their registry)
        return [CatalogRow(name, "-", "", "recourse_privacy.data") for name in registry]
    return [
        CatalogRow(e.name, _needs(e), _description(e), e.module, str(e.meta.get("expected_time", "")))
        for e in registry.entries()
    ]


def reproductions_with_times() -> str:
    """Every registered reproduction with its expected time, for help texts: ``name (~N min on 2 cores), ...``."""
    return ", ".join(f"{row.name} ({row.expected_time or 'time not stated'})" for row in describe("reproduction"))


def _description(entry) -> str:
    """The entry's description; for a dataset with public domain metadata, its summary too."""
    domain = entry.meta.get("domain")
    return f"{entry.description} [public domain: {domain}]" if domain else entry.description


def loaded_plugins() -> list[str]:
    """Names of the plugin entry points loaded in this process."""
    return load_plugins()
