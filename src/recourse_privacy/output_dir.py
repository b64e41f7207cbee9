"""An output directory's manifest: the commands replace or remove only the files that they wrote.

Each command that writes into ``--out`` first *claims* the directory (:func:`claim_output_dir`)
and, when it has finished, records every file it wrote in :data:`MANIFEST`
(``.recourse-privacy-output.json``: the command, whether the run finished, its files, and the
files that were already there and are not its own). The rules:

- an absent or empty directory is claimed;
- a directory holding an earlier run's output (its manifest) is refused unless ``--overwrite``,
  which first removes that run's files, and only those; a file nobody recorded (your
  ``notes.txt``) is kept;
- a file that the earlier run did not record is someone else's and is kept, unless it lies where
  the command writes (:data:`LAYOUTS`; e.g. a killed ``audit``'s ``.cache/``, or ``results``'s plots
  in a store); a killed run of a command without a fixed layout owns whatever is not recorded as
  foreign;
- a rerun of the same command resumes: always for the resumable ones (``run``, ``reproduce``,
  ``tradeoff``, whose stores skip what is finished), and for the others (``audit``,
  ``recourse``) while the earlier run did not finish (a killed audit resumes its shadow models);
- a non-empty directory without a manifest is refused, with or without ``--overwrite``, unless
  its files are an earlier output of the same command written before manifests existed
  (recognised by the command's file names, :data:`LAYOUTS`).

Errors are :class:`~recourse_privacy.errors.InvalidInputError` (the CLI's exit code 2) naming
the option and saying what to type.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_output_dir

__all__ = ["LAYOUTS", "MANIFEST", "OutputClaim", "check_output_file", "claim_output_dir"]

MANIFEST = ".recourse-privacy-output.json"
MANIFEST_FORMAT = 1
#: the top-level names each command writes (how an output of before the manifest is recognised:
#: by its first name), for the commands whose names are fixed
LAYOUTS: dict[str, tuple[str, ...]] = {
    "audit": (
        "metrics.json",
        "roc.png",
        "cfd_histogram.png",
        "report.html",
        "counterfactuals.csv",
        "counterfactuals.parquet",
        "extraction.csv",
        "extraction.png",
        "queries.png",
        "release.csv",
        ".cache",
    ),
    "run": (
        "spec.json",
        "cells",
        "failed",
        "runs",
        "locks",
        "summary.parquet",
        "summary.json",
        "summary.md",
        "plots",
    ),
    "recourse": (
        "quality.json",
        "quality_run.json",
        "quality.csv",
        "quality.png",
        "counterfactuals.csv",
        "counterfactuals.parquet",
    ),
}
_AGAIN = "pass --overwrite to replace it (only the files that run wrote are removed), or choose another"


def _files(root: Path) -> set[str]:
    """Every file (and link) under ``root`` as a relative POSIX path, the manifest excluded."""
    out = set()
    for top, dirs, names in os.walk(root):
        rel = Path(top).relative_to(root)
        out.update((rel / n).as_posix() for n in names)
        out.update((rel / d).as_posix() for d in dirs if (Path(top) / d).is_symlink())
    out.discard(MANIFEST)
    return out


def _read_manifest(root: Path) -> dict | None:
    try:
        m = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(m, dict) and isinstance(m.get("command"), str)
    return m if ok and all(isinstance(m.get(k, []), list) for k in ("files", "foreign")) else None


def _write_manifest(root: Path, record: dict) -> None:
    from recourse_privacy.experiments.store import atomic_write_json

    atomic_write_json(root / MANIFEST, {"format": MANIFEST_FORMAT, **record})


def _remove(root: Path, files: set[str]) -> int:
    """Remove ``files`` (relative to ``root``) and the directories they leave empty; returns how many went."""
    n = 0
    parents: set[Path] = set()
    for rel in files:
        path = root / rel
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            n += 1
        parents.update(p for p in path.parents if root in p.parents)
    for d in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()  # only an empty one goes
    return n


def _ours_by_layout(command: str, present: set[str]) -> set[str]:
    names = LAYOUTS.get(command, ())
    return {f for f in present if f.split("/", 1)[0] in names}


@dataclass
class OutputClaim:
    """A directory a command writes into; :meth:`finish` records the files it wrote."""

    root: Path
    command: str
    foreign: frozenset[str]
    removed: int = 0  # the earlier run's files removed by --overwrite

    def finish(self) -> None:
        """Record every file now in the directory that was not there before as this command's."""
        files = sorted(_files(self.root) - self.foreign)
        record = {"command": self.command, "complete": True, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        _write_manifest(self.root, {**record, "files": files, "foreign": sorted(self.foreign)})


def claim_output_dir(
    path, command: str, *, overwrite: bool = False, resumable: bool = False, name: str = "--out"
) -> OutputClaim:
    """Claim ``path`` for ``command`` (see the module docstring), before any work; else raise naming ``name``."""
    root = check_output_dir(path, name)
    present = _files(root)
    manifest = _read_manifest(root)
    layout = LAYOUTS.get(command.split()[0], ())
    if manifest is None and present:
        ours = _ours_by_layout(command.split()[0], present)
        if not layout or not any(f.split("/", 1)[0] == layout[0] for f in ours):
            example = sorted(present)[0]
            raise InvalidInputError(
                f"{name} {str(root)!r} is not empty ({len(present)} file(s), e.g. {example!r}) and holds no earlier "
                f"recourse-privacy output, so nothing in it is replaced, even with --overwrite: choose a new or "
                f"empty directory for {name}"
            )
        manifest = {"command": command, "complete": True, "files": sorted(ours), "foreign": sorted(present - ours)}
    if manifest is None:
        manifest = {"command": command, "complete": False, "files": [], "foreign": []}
    foreign = set(manifest["foreign"]) & present
    earlier = manifest["command"].split()[0]
    if manifest.get("complete") or earlier in LAYOUTS:  # what the run did not record, outside its layout
        foreign |= present - set(manifest["files"]) - _ours_by_layout(earlier, present)
    ours = present - foreign
    removed = 0
    if overwrite:
        removed = _remove(root, ours)
        ours = set()
    elif ours and not (manifest["command"] == command and (resumable or not manifest.get("complete"))):
        what = "finished" if manifest.get("complete") else "unfinished"
        raise InvalidInputError(
            f"{name} {str(root)!r} holds the output of an earlier, {what} `{manifest['command']}` run "
            f"({len(ours)} files); {_AGAIN} {name}"
        )
    _write_manifest(root, {"command": command, "complete": False, "files": sorted(ours), "foreign": sorted(foreign)})
    return OutputClaim(root, command, frozenset(foreign), removed)


def check_output_file(path, *, overwrite: bool = False, name: str = "--out") -> Path:
    """``path`` as a file to write: refused where it exists, unless ``overwrite``; its directory checked."""
    p = Path(path).expanduser()
    if p.exists() and not overwrite:
        raise InvalidInputError(
            f"{name} {str(p)!r} already exists; pass --overwrite to replace it, or choose another {name}"
        )
    check_output_dir(p.parent if str(p.parent) else Path("."), f"{name}'s directory")
    return p
