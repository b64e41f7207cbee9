"""Plugins: the example package of docs/extending.md, found through the ``recourse_privacy.plugins`` entry points.

Installing ``examples/plugin`` with pip is too slow for a test, so the module fixture makes it
discoverable the way an install would: a ``<name>.dist-info/`` directory (``METADATA`` and an
``entry_points.txt`` written from the plugin's own pyproject.toml) next to the plugin's source
directory on ``PYTHONPATH``. The CLI then runs in subprocesses, as a user would run it: the
commands and the grid spec are read from docs/extending.md itself, so the page cannot drift
from what works.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "extending.md"
PLUGIN = REPO / "examples" / "plugin"
PLUGIN_SRC = PLUGIN / "src"
PLUGIN_FILES = ("__init__.py", "attack.py", "recourse.py")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def _doc_commands() -> dict[str, list[str]]:
    """The page's ``recourse-privacy`` commands, keyed by subcommand (+ argument for ``list``)."""
    commands = {}
    for block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:1] == ["recourse-privacy"]:
                key = " ".join(argv[1:3]) if argv[1] == "list" else argv[1]
                commands[key] = argv[1:]
    return commands


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict[str, str]:
    """Environment for subprocesses in which ``importlib.metadata`` finds the example plugin."""
    project = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    site = tmp_path_factory.mktemp("site")
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = []
    for group, eps in project["entry-points"].items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in eps.items()), ""]
    (dist / "entry_points.txt").write_text("\n".join(lines))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(PLUGIN_SRC), str(site)])
    env.update(COLUMNS="200", MPLBACKEND="Agg")
    return env


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "recourse_privacy.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"recourse-privacy {shlex.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def test_page_shows_the_example_files_and_entry_point_verbatim():
    python = [block.rstrip() for block in _blocks("python")]
    for name in PLUGIN_FILES:
        assert (PLUGIN_SRC / "rp_example_plugin" / name).read_text().rstrip() in python, name
    toml = (PLUGIN / "pyproject.toml").read_text()
    assert all(block.strip() in toml for block in _blocks("toml"))
    assert {"list attack", "list recourse", "audit", "run", "results"} <= set(_doc_commands())


def test_list_shows_the_plugin_entries(plugin_env, tmp_path):
    commands = _doc_commands()
    attacks = _cli(commands["list attack"], plugin_env, tmp_path).stdout
    assert re.search(r"cfd-rank\s.*reads distance.*rp_example_plugin\.attack", attacks)
    methods = _cli(commands["list recourse"], plugin_env, tmp_path).stdout
    assert re.search(r"coordinate\s.*rp_example_plugin\.recourse", methods)
    everything = _cli(["list"], plugin_env, tmp_path).stdout
    assert "cfd-rank" in everything and "coordinate" in everything
    assert "plugins loaded: example" in everything


def test_audit_runs_the_plugin_attack_and_method(plugin_env, tmp_path):
    args = _doc_commands()["audit"]
    assert args[args.index("--attacks") + 1] == "cfd,cfd-rank" and args[args.index("--recourse") + 1] == "coordinate"
    _cli(args, plugin_env, tmp_path)
    metrics = json.loads((tmp_path / args[args.index("--out") + 1] / "metrics.json").read_text())
    assert metrics["recourse"]["method"] == "coordinate" and metrics["recourse"]["validity"] > 0.9
    rank, cfd = metrics["attacks"]["cfd-rank"], metrics["attacks"]["cfd"]
    assert math.isfinite(rank["auc"]) and rank["direction"] == "greater"
    assert rank["statistic"] == "percentile rank of c(x, x') among the targets"
    assert rank["auc"] == pytest.approx(cfd["auc"])  # same order of the targets as cfd
    assert rank["n_members"] + rank["n_nonmembers"] == metrics["n_members"] + metrics["n_nonmembers"]


def test_grid_runs_the_plugin_in_two_worker_processes(plugin_env, tmp_path):
    commands = _doc_commands()
    args = commands["run"]
    assert args[args.index("--n-jobs") + 1] == "2"
    (tmp_path / args[1]).write_text(_blocks("yaml")[0])
    _cli(args, plugin_env, tmp_path)
    out = tmp_path / args[args.index("--out") + 1]
    records = [json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))]
    # each record is written by the worker process that ran the cell, which loaded the plugin itself
    assert len(records) == 2 and all(r["complete"] and r["status"] for r in records)
    assert sorted(r["labels"]["classifier"] for r in records) == ["logistic", "mlp"]
    for r in records:
        assert r["metrics"]["recourse"]["method"] == "coordinate"
        assert {"cfd", "cfd-rank"} <= set(r["metrics"]["attacks"])
        assert math.isfinite(r["metrics"]["attacks"]["cfd-rank"]["auc"])
    assert not list(out.glob("failed/*.json"))
    assert "cfd-rank" in _cli(commands["results"], plugin_env, tmp_path).stdout


# ---------------------------------------------------------------------------------------- in process
def test_a_taken_name_with_a_different_object_is_refused():
    from recourse_privacy.attacks import ATTACKS, register_attack
    from recourse_privacy.errors import InvalidInputError
    from recourse_privacy.recourse import RECOURSE_METHODS, register_recourse
    from recourse_privacy.registry import Registry

    cfd, linear = ATTACKS.get("cfd"), RECOURSE_METHODS.get("linear")
    with pytest.raises(InvalidInputError, match="'cfd' is already registered by recourse_privacy.attacks.distance"):
        register_attack("cfd", description="an impostor")(lambda inputs: None)
    with pytest.raises(InvalidInputError, match="'linear' is already registered"):
        register_recourse("linear", description="an impostor")(type("Impostor", (), {}))
    assert ATTACKS.get("cfd") is cfd and RECOURSE_METHODS.get("linear") is linear  # nothing replaced

    def f(inputs):
        return None

    def g(inputs):
        return None

    things = Registry("thing")
    things.add("f", f, description="f")
    things.add("f", f, description="f again")  # the same object again (a module imported twice): fine
    with pytest.raises(InvalidInputError, match="already registered"):
        things.add("f", g, description="g")
    assert things.add("f", g, description="g", replace=True).obj is g


def test_an_unknown_attack_name_lists_the_registered_ones():
    from recourse_privacy.attacks import ATTACKS, check_attack_names
    from recourse_privacy.audit import AuditConfig
    from recourse_privacy.errors import InvalidInputError, UnknownNameError

    with pytest.raises(InvalidInputError) as err:
        check_attack_names(["cfd", "cfd-rnak"])
    assert "'cfd-rnak'" in str(err.value) and all(name in str(err.value) for name in ATTACKS.names())
    with pytest.raises(UnknownNameError, match="unknown attack 'cfd-rnak'; choose one of cfd, "):
        ATTACKS.get("cfd-rnak")
    with pytest.raises(InvalidInputError, match="cfd-rnak"):
        AuditConfig(attacks=("cfd", "cfd-rnak")).validate()
