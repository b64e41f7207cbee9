"""The registry of shipped reproductions: one module of this package per paper table or study.

A grid of audits is a YAML spec under ``reproductions/specs/`` and runs through the engine
(:mod:`~recourse_privacy.reproductions.grid_reproductions` registers each one).
A reproduction of another shape is a function registered with :func:`register_reproduction` in its
own module of this package (every module is imported when the registry is first read, so a new
reproduction is one file):
``fn(out_dir: Path, *, seeds: list[int] | None, console) -> None`` runs it (resumably where it can),
writes its tables and plots into ``out_dir`` and prints the paper's figures beside ours with the
known differences. This registry lists every shipped reproduction, each with its expected time
(``expected_time="~N min on 2 cores"``; a grid's spec has an ``expected_time:`` key), which
``recourse-privacy list reproduction`` and ``reproduce --help`` show.
"""

from __future__ import annotations

from collections.abc import Callable

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.registry import Registry

__all__ = ["REPRODUCTIONS", "expected_time", "printer", "register_reproduction"]

#: name -> fn(out_dir, *, seeds, console)
REPRODUCTIONS: Registry[Callable[..., None]] = Registry(
    "reproduction",
    packages=("recourse_privacy.reproductions",),  # every module of this package
)


def register_reproduction(
    name: str,
    *,
    description: str,
    expected_time: str | None = None,
    replace: bool = False,
    grid: bool = False,
):
    """Decorator: register ``fn(out_dir, *, seeds=None, console=None)`` as the reproduction ``name``.

    ``expected_time``: how long the shipped run takes, with the hardware it was timed or estimated
    on (``"~25 min on 2 cores"``); every shipped reproduction states one (a test checks).
    ``grid``: a shipped grid of audits (a YAML spec), which ``reproduce`` runs through the engine.
    """
    if expected_time is not None and (not isinstance(expected_time, str) or not expected_time.strip()):
        raise InvalidInputError(
            f"expected_time of reproduction {name!r} must be a non-empty text such as '~10 min on 2 cores', "
            f"not {expected_time!r}"
        )
    meta = {"grid": grid} | ({"expected_time": expected_time.strip()} if expected_time else {})
    return REPRODUCTIONS.register(name, description=description, replace=replace, **meta)


def expected_time(name: str) -> str:
    """The expected time of the registered reproduction ``name`` ("not stated" where it has none)."""
    return REPRODUCTIONS.get(name).meta.get("expected_time") or "not stated"


def printer(console=None) -> Callable[[str], None]:
    """A reproduction's progress printer: to the rich ``console`` the CLI passes, else to stdout (flushed)."""

    def log(msg: str) -> None:
        if console is not None:
            console.print(msg, markup=False, highlight=False)
        else:
            print(msg, flush=True)

    return log
