"""The shipped grids of audits (YAML specs under ``reproductions/specs/``), registered as reproductions.

Registering them beside the reproductions of other shapes makes one list of every shipped
reproduction: ``recourse-privacy list reproduction`` and ``reproduce --help`` read it. Each entry
is marked ``grid`` (``reproduce`` runs it through the engine with its grid options: backend,
shadow models, seeds); called from Python it runs the spec with the engine's defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from recourse_privacy.errors import UnknownNameError
from recourse_privacy.experiments.spec import ExperimentSpec, load_spec
from recourse_privacy.reproductions.registry import register_reproduction

__all__ = ["list_grid_reproductions", "load_shipped_spec", "shipped_spec_path"]


def list_grid_reproductions() -> list[str]:
    """Names of the grids of audits shipped with the package (``recourse-privacy reproduce NAME``)."""
    root = resources.files(__package__) / "specs"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def shipped_spec_path(name: str):
    """The YAML file of the shipped grid ``name`` (an importlib resource)."""
    return resources.files(__package__) / "specs" / f"{name}.yaml"


def load_shipped_spec(name: str) -> ExperimentSpec:
    """Load and validate the shipped grid ``name``; an unknown name lists the shipped ones."""
    if name not in list_grid_reproductions():
        raise UnknownNameError(f"no shipped grid of audits {name!r}; shipped: {', '.join(list_grid_reproductions())}")
    with resources.as_file(shipped_spec_path(name)) as path:
        return load_spec(path)


def _grid_runner(name: str) -> Callable[..., None]:
    def run(out_dir: str | Path, *, seeds: list[int] | None = None, console=None) -> None:
        from recourse_privacy.experiments.engine import run_spec

        spec = load_shipped_spec(name)
        run_spec(spec.with_overrides(seeds=seeds) if seeds else spec, out_dir, progress=False)

    run.__qualname__ = f"grid_reproduction[{name}]"
    return run


def _header(name: str) -> tuple[str, str | None]:
    """The spec's own description and expected time, read without validating its cells (``--help`` stays light)."""
    import yaml

    with shipped_spec_path(name).open(encoding="utf-8") as f:
        raw = yaml.safe_load(f) or {}
    text = raw.get("description") or f"the grid of audits {name}.yaml"
    return " ".join(str(text).split()), raw.get("expected_time")


for _name in list_grid_reproductions():
    _text, _time = _header(_name)
    register_reproduction(_name, description=_text, expected_time=_time, grid=True)(_grid_runner(_name))
