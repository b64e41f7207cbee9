"""Shipped reproductions that are not grids of audits (recourse-quality tables, DP-clustering studies ...).

A grid of audits is a YAML spec under ``experiments/reproductions/`` and runs through the engine.
A reproduction of another shape is a function registered here with :func:`register_reproduction`:
``fn(out_dir: Path, *, seeds: list[int] | None, console) -> None`` runs it (resumably where it can),
writes its tables and plots into ``out_dir`` and prints the paper's figures beside ours with the
known differences. The YAML grids are registered here too
(:mod:`~recourse_privacy.experiments.grid_reproductions`), so this registry lists every shipped
reproduction.
"""

from __future__ import annotations

from collections.abc import Callable

from recourse_privacy.registry import Registry

__all__ = ["REPRODUCTIONS", "register_reproduction"]

#: name -> fn(out_dir, *, seeds, console)
REPRODUCTIONS: Registry[Callable[..., None]] = Registry(
    "reproduction",
    builtins=(
        "recourse_privacy.experiments.yang2022",
        "recourse_privacy.experiments.pentyala2023",
        "recourse_privacy.experiments.reference_budget",
        "recourse_privacy.experiments.grid_reproductions",
    ),
)


def register_reproduction(name: str, *, description: str, replace: bool = False, grid: bool = False):
    """Decorator: register ``fn(out_dir, *, seeds=None, console=None)`` as the reproduction ``name``.

    ``grid``: a shipped grid of audits (a YAML spec), which ``reproduce`` runs through the engine.
    """
    return REPRODUCTIONS.register(name, description=description, replace=replace, grid=grid)
