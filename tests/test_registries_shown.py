"""Every registry is shown whole: each entry in `recourse-privacy list` and in the help of the command that takes it.

Help texts and `list` read the registries (``recourse_privacy.catalog``), so a new entry appears
without editing the CLI; this test fails when a list of names is written by hand somewhere and
drifts from its registry.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from recourse_privacy import catalog
from recourse_privacy.cli import app

#: registry kind -> the command whose --help must name every entry
HELP_OF = {
    "attack": "audit",
    "recourse": "audit",
    "model": "audit",
    "defense": "audit",
    "dataset": "audit",
    "mechanism": "audit-dp",
    "reproduction": "reproduce",
    "threat": "audit",
    "surrogate": "audit",
    "release-attack": "audit",
}


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫]", " ", text).split())


@pytest.fixture(scope="module")
def runner():
    return CliRunner(env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})


def test_every_registry_has_a_command_whose_help_lists_it():
    assert set(HELP_OF) == set(catalog.REGISTRIES)


@pytest.mark.parametrize("kind", sorted(catalog.REGISTRIES))
def test_list_and_help_show_every_entry(runner, kind):
    names = list(catalog.REGISTRIES[kind])
    assert names, kind
    shown = runner.invoke(app, ["list", kind], terminal_width=400)
    assert shown.exit_code == 0, shown.output
    help_text = runner.invoke(app, [HELP_OF[kind], "--help"], terminal_width=400)
    assert help_text.exit_code == 0
    listed, helped = _flat(shown.output), _flat(help_text.output)
    for name in names:
        assert re.search(rf"(^|[\s,:(]){re.escape(name)}($|[\s,;)])", listed), f"{kind} {name!r} missing from list"
        assert re.search(rf"(^|[\s,:(]){re.escape(name)}($|[\s,;)])", helped), (
            f"{kind} {name!r} missing from `{HELP_OF[kind]} --help`"
        )
