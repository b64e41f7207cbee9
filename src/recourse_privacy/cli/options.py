"""The typer options shared by several commands: one definition each, so that their help texts cannot drift."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import typer

from recourse_privacy.cli._common import _bounds, _capped, _columns, _name_list, _names, _numbers, _parse_params


def _out_path(value) -> Path:
    """``--out``'s value as a path; empty or blank is refused (it would mean the current directory)."""
    if not str(value).strip():
        raise typer.BadParameter("must name a directory or file; an empty value is refused (e.g. --out results)")
    return Path(value)


_OVERWRITE = typer.Option(
    False,
    "--overwrite",
    help="replace the earlier output in --out: its run's files (listed in its .recourse-privacy-output.json) are "
    "removed first, anything else is kept; without it, a --out holding another run's output is refused",
)


_CACHE_DIR = typer.Option(
    None,
    help="shared cache of trained models and recourse (off: none; default $RECOURSE_PRIVACY_CACHE, "
    "else the user cache; `recourse-privacy cache info`)",
)
_DATA_DIR = typer.Option(None, help="directory of the real datasets")


# ------------------------------------------------------------------ options generated from AuditConfig's fields


@dataclass(frozen=True)
class CliForm:
    """How a kind of configuration field is typed on the command line and read back into the field.

    ``annotation(field_type)``: the option's type; ``default(field_default)``: the option's default;
    ``read(value, flag)``: the field's value from the option's (a bad one raises naming ``flag``).
    """

    annotation: Callable[[Any], Any]
    default: Callable[[Any], Any]
    read: Callable[[Any, str], Any]


def _same(x, *_):
    return x


def _none(_):
    return None


#: metadata ``cli`` -> its form; a field without ``cli`` is typed as its own type
CLI_FORMS: dict[str | None, CliForm] = {
    None: CliForm(_same, _same, _same),
    "text": CliForm(lambda t: str | None, _same, _same),  # a value typed as text (a column, a label, a name)
    "path": CliForm(lambda t: Path | None, _none, lambda v, flag: str(v) if v else None),
    "columns": CliForm(lambda t: list[str] | None, _none, lambda v, flag: _columns(v, flag)),
    "bounds": CliForm(lambda t: list[str] | None, _none, lambda v, flag: _bounds(v)),
    "params": CliForm(lambda t: list[str] | None, _none, lambda v, flag: _parse_params(v, flag)),
    "names": CliForm(lambda t: str, ",".join, lambda v, flag: _name_list(v, flag)),
    "numbers": CliForm(lambda t: str, lambda d: ",".join(map(str, d)), lambda v, flag: tuple(_numbers(v, int, flag))),
    "jobs": CliForm(_same, _same, lambda v, flag: _capped(v, flag)),
}


@dataclass(frozen=True)
class ConfigOption:
    """One command-line option generated from a configuration field's metadata."""

    field: str  # the configuration field
    param: str  # the command's parameter (its flag, ``--param-name``)
    flag: str
    option: Any  # the typer option, the parameter's default
    annotation: Any
    form: CliForm

    def parameter(self) -> inspect.Parameter:
        """The command's parameter, for a generated signature."""
        return inspect.Parameter(
            self.param, inspect.Parameter.KEYWORD_ONLY, default=self.option, annotation=self.annotation
        )

    def read(self, value: Any) -> Any:
        """The field's value from the option's."""
        return self.form.read(value, self.flag)


def config_options(config_cls: type) -> tuple[ConfigOption, ...]:
    """Every field of the dataclass ``config_cls`` whose metadata has a ``help``, as an option, in field order.

    The help's ``{names}`` is filled with the names of the registry ``names`` (``recourse-privacy list``);
    the flag is the metadata's ``flag``, else ``--field-name`` (a boolean without one gets typer's
    ``--name/--no-name``).
    """
    hints = get_type_hints(config_cls)
    out = []
    for f in dataclasses.fields(config_cls):
        meta = f.metadata
        if "help" not in meta:
            continue
        form = CLI_FORMS[meta.get("cli")]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        flag = meta.get("flag", "--" + f.name.replace("_", "-"))
        kind = meta.get("names")
        text = meta["help"].replace("{names}", _names(kind, meta.get("having"))) if kind else meta["help"]
        annotation = form.annotation(hints[f.name])
        decls = () if annotation is bool and "flag" not in meta else (flag,)
        option = typer.Option(form.default(default), *decls, help=text)
        out.append(ConfigOption(f.name, flag[2:].replace("-", "_"), flag, option, annotation, form))
    return tuple(out)


def with_options(fn: Callable, parameters: list[inspect.Parameter]) -> Callable:
    """``fn(**options)`` with the signature ``parameters``, which typer reads as the command's options."""
    fn.__signature__ = inspect.Signature(parameters)
    return fn


@functools.cache
def audit_options() -> dict[str, ConfigOption]:
    """The options generated from :class:`~recourse_privacy.audit.AuditConfig`'s fields, by field."""
    from recourse_privacy.audit.config import AuditConfig

    return {o.field: o for o in config_options(AuditConfig)}


# ------------------------------------------------------------------ the data and model options of audit, recourse
# and tradeoff, generated once from AuditConfig's fields and shared by the three commands
_DEVICE = audit_options()["device"].option
_SEED = audit_options()["seed"].option
_DATA = audit_options()["data"].option
_TARGET = audit_options()["target"].option
_POSITIVE_LABEL = audit_options()["positive_label"].option
_CATEGORICAL = audit_options()["categorical"].option
_IMMUTABLE = audit_options()["immutable"].option
_INCREASING = audit_options()["increasing"].option
_BOUNDS = audit_options()["bounds"].option
_DECISION_THRESHOLD = audit_options()["decision_threshold"].option
_MODEL_FILE = typer.Option(
    None,
    "--model-file",
    help="your own fitted scikit-learn classifier or Pipeline (reading the columns of --data): .skops (safe), "
    ".joblib/.pkl (trusted files only, with --trust-pickle); the game retrains it on the members (a clone), "
    "or, with --members / --train-data, audits it as it is",
)
_TRUST = typer.Option(
    None, "--trust", help="a type in the .skops file you trust (repeatable or comma-separated); the error lists them"
)
_TRUST_PICKLE = typer.Option(False, "--trust-pickle", help="load a .joblib/.pkl model file (runs code from it)")
