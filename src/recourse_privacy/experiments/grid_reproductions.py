"""The shipped grids of audits (YAML specs under ``experiments/reproductions/``), registered as reproductions.

Registering them beside the reproductions of other shapes makes one list of every shipped
reproduction: ``recourse-privacy list reproduction`` and ``reproduce --help`` read it. Each entry
is marked ``grid`` (``reproduce`` runs it through the engine with its grid options: backend,
shadow models, seeds); called from Python it runs the spec with the engine's defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from recourse_privacy.experiments.reproductions import register_reproduction
from recourse_privacy.experiments.spec import list_reproductions, shipped_spec_path


def _grid_runner(name: str) -> Callable[..., None]:
    def run(out_dir: str | Path, *, seeds: list[int] | None = None, console=None) -> None:
        from recourse_privacy.experiments.engine import run_spec
        from recourse_privacy.experiments.spec import load_spec

        spec = load_spec(name)
        run_spec(spec.with_overrides(seeds=seeds) if seeds else spec, out_dir, progress=False)

    run.__qualname__ = f"grid_reproduction[{name}]"
    return run


def _description(name: str) -> str:
    """The spec's own description, read without validating its cells (``--help`` stays light)."""
    import yaml

    with shipped_spec_path(name).open(encoding="utf-8") as f:
        text = (yaml.safe_load(f) or {}).get("description") or f"the grid of audits {name}.yaml"
    return " ".join(str(text).split())


for _name in list_reproductions():
    register_reproduction(_name, description=_description(_name), grid=True)(_grid_runner(_name))
