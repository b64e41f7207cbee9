"""Every shipped reproduction states how long it takes, and `list reproduction` and `reproduce --help` show it.

A reproduction is registered with ``register_reproduction(..., expected_time="~N min on 2 cores")``
(a shipped grid: an ``expected_time:`` key in its YAML spec); this fails when one is added without.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from recourse_privacy.cli import app
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.reproductions.grid_reproductions import list_grid_reproductions, load_shipped_spec
from recourse_privacy.reproductions.registry import REPRODUCTIONS, register_reproduction

#: the form every stated time takes: an approximate amount, its unit and the hardware
TIME_FORM = re.compile(r"~\d+(\.\d+)? (s|min|h) on \d+ cores?")
#: shipped reproductions whose module is another change's to edit (reproductions/yang2022.py); the
#: test below fails as soon as one states a time, so the entry cannot outlive its reason
PENDING: set[str] = set()


def _shipped():
    return [e for e in REPRODUCTIONS.entries() if e.module.startswith("recourse_privacy.reproductions.")]


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫]", " ", text).split())


def test_every_shipped_reproduction_states_its_expected_time():
    shipped = _shipped()
    assert len(shipped) >= len(list_grid_reproductions()) + 4  # the grids and the studies of other shapes
    missing = [e.name for e in shipped if not e.meta.get("expected_time") and e.name not in PENDING]
    assert not missing, f"reproductions without expected_time=: {missing}"
    for e in shipped:
        if e.name not in PENDING:
            assert TIME_FORM.fullmatch(e.meta["expected_time"]), (e.name, e.meta["expected_time"])


def test_pending_reproductions_still_lack_a_time():
    for name in PENDING:
        assert not REPRODUCTIONS.get(name).meta.get("expected_time"), f"{name} states a time now: drop it from PENDING"


def test_a_grid_reads_its_time_from_its_spec():
    for name in list_grid_reproductions():
        assert load_shipped_spec(name).expected_time == REPRODUCTIONS.get(name).meta["expected_time"]


def test_list_and_reproduce_help_show_each_time():
    runner = CliRunner(env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    listed = runner.invoke(app, ["list", "reproduction"], terminal_width=400)
    helped = runner.invoke(app, ["reproduce", "--help"], terminal_width=400)
    assert listed.exit_code == 0 and helped.exit_code == 0
    assert "expected time" in listed.output
    help_text = _flat(helped.output)
    for e in _shipped():
        shown = e.meta.get("expected_time") or "time not stated"
        assert f"{e.name} ({shown})" in help_text, e.name
        row = next(
            line for line in listed.output.splitlines() if re.search(rf"[│┃]\s*{re.escape(e.name)}\s*[│┃]", line)
        )
        assert (e.meta.get("expected_time") or "not stated") in row, row


@pytest.mark.parametrize("bad", ["", "   ", 10])
def test_register_refuses_an_empty_or_non_text_time(bad):
    with pytest.raises(InvalidInputError, match="expected_time"):
        register_reproduction("test-bad-time", description="never registered", expected_time=bad)
