"""The registry of shipped reproductions: one module of this package per paper table or study.

A grid of audits is a YAML spec under ``reproductions/specs/`` and runs through the engine
(:mod:`~recourse_privacy.reproductions.grid_reproductions` registers each one).
A reproduction of another shape is a function registered with :func:`register_reproduction` in its
own module of this package (every module is imported when the registry is first read, so a new
reproduction is one file):
``fn(out_dir: Path, *, seeds: list[int] | None, console) -> None`` runs it (resumably where it can),
writes its tables and plots into ``out_dir`` and prints the paper's figures beside ours with the
known differences. This registry lists every shipped reproduction.
"""

from __future__ import annotations

from collections.abc import Callable

from recourse_privacy.registry import Registry

__all__ = ["REPRODUCTIONS", "register_reproduction"]

#: name -> fn(out_dir, *, seeds, console)
REPRODUCTIONS: Registry[Callable[..., None]] = Registry(
    "reproduction",
    packages=("recourse_privacy.reproductions",),  # every module of this package
)


def register_reproduction(name: str, *, description: str, replace: bool = False, grid: bool = False):
    """Decorator: register ``fn(out_dir, *, seeds=None, console=None)`` as the reproduction ``name``.

    ``grid``: a shipped grid of audits (a YAML spec), which ``reproduce`` runs through the engine.
    """
    return REPRODUCTIONS.register(name, description=description, replace=replace, grid=grid)
