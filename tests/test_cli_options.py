"""The audit's options are generated from AuditConfig's field metadata, so a new setting is one field.

Each generated option's default reads back into the field's default (the flags cannot drift from
the configuration), every field with CLI metadata is an option of ``audit --help``, and a
throwaway configuration with one new field gets a working option with its registry's names in
its help, without any edit to the command line.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
from typer.testing import CliRunner

from recourse_privacy import catalog
from recourse_privacy.audit import AuditConfig
from recourse_privacy.audit.config import cli
from recourse_privacy.cli import app
from recourse_privacy.cli.options import audit_options, config_options, with_options


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_every_option_default_reads_back_into_the_fields_default():
    default = AuditConfig()
    options = audit_options()
    assert len(options) >= 40  # every setting a user sets on the command line
    for name, option in options.items():
        value = option.read(option.option.default)
        assert value == getattr(default, name), f"--{option.param}'s default {option.option.default!r} != {name}"


def test_every_field_with_cli_metadata_is_an_audit_option():
    runner = CliRunner(env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    shown = runner.invoke(app, ["audit", "--help"], terminal_width=400)
    assert shown.exit_code == 0, shown.output
    text = _flat(shown.output)
    fields = [f for f in dataclasses.fields(AuditConfig) if "help" in f.metadata]
    assert {f.name for f in fields} == set(audit_options())
    for f in fields:
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        assert re.search(rf"(^|\s){re.escape(flag)}(\s|$)", text), f"{flag} missing from `audit --help`"
        first_words = " ".join(f.metadata["help"].split("{names}")[0].split()[:4])
        assert first_words in text, f"the help of {flag} is not AuditConfig's metadata"


def test_a_new_field_is_a_new_option(tmp_path):
    """A throwaway configuration: its new field's option parses, validates its names and lists its registry."""

    @dataclasses.dataclass(frozen=True)
    class Settings:
        attacks: tuple[str, ...] = dataclasses.field(
            default=("cfd",), metadata=cli(help="attacks to run: {names}", names="attack", cli="names")
        )
        budget: int = dataclasses.field(default=3, metadata=cli(help="how many queries", flag="--query-budget"))
        internal: int = 7  # no metadata: no option

    options = {o.field: o for o in config_options(Settings)}
    assert set(options) == {"attacks", "budget"}
    assert options["budget"].flag == "--query-budget" and options["budget"].param == "query_budget"
    assert all(name in options["attacks"].option.help for name in catalog.REGISTRIES["attack"])

    import typer

    seen = {}

    def command(**values) -> None:
        seen.update({o.field: o.read(values[o.param]) for o in options.values()})

    small = typer.Typer()
    small.command()(with_options(command, [o.parameter() for o in options.values()]))
    runner = CliRunner()
    ok = runner.invoke(small, ["--attacks", "cfd, loss", "--query-budget", "5"])
    assert ok.exit_code == 0, ok.output
    assert seen == {"attacks": ("cfd", "loss"), "budget": 5}
    seen.clear()
    assert runner.invoke(small, []).exit_code == 0 and seen == {"attacks": ("cfd",), "budget": 3}
    bad = runner.invoke(small, ["--query-budget", "many"])
    assert bad.exit_code == 2 and "query-budget" in bad.output


@pytest.mark.parametrize("kind", ["text", "columns", "params"])
def test_a_form_reads_what_the_command_line_gives(kind):
    from recourse_privacy.cli.options import CLI_FORMS

    form = CLI_FORMS[kind]
    given = {"text": "income", "columns": ["a,b", "c"], "params": ["lam=0.5", "name=x"]}[kind]
    expected = {"text": "income", "columns": ("a", "b", "c"), "params": {"lam": 0.5, "name": "x"}}[kind]
    assert form.read(given, "--x") == expected
