"""The ``recourse-privacy`` command line (typer + rich): the app, its entry point, one module per command.

Layout (as the Hugging Face CLI's): ``options`` holds the typer options several commands share,
``_common`` the helpers (the one error path ``_command``, option parsing); each command lives in
its own module and is registered here, in the order ``--help`` lists them. Heavy imports happen
inside commands, so ``recourse-privacy --help`` loads neither torch nor scikit-learn.
"""

from __future__ import annotations

import functools

import typer

from recourse_privacy.cli._common import (
    _command,
    _options,
    _out_of_memory_hint,
    check_output_dir,
    claim_output_dir,
    register_commands,
)
from recourse_privacy.cli.audit import audit
from recourse_privacy.cli.audit_dp import audit_dp_command
from recourse_privacy.cli.cache import cache_app, cache_clear_command, cache_info_command
from recourse_privacy.cli.grid import reproduce_command, results_command, run_command
from recourse_privacy.cli.listing import datasets, list_command, version
from recourse_privacy.cli.recourse import recourse_command
from recourse_privacy.cli.tradeoff import tradeoff
from recourse_privacy.service.cli import register as _register_service

__all__ = [
    "app",
    "main",
    "audit",
    "list_command",
    "datasets",
    "version",
    "tradeoff",
    "run_command",
    "results_command",
    "reproduce_command",
    "cache_info_command",
    "cache_clear_command",
    "audit_dp_command",
    "recourse_command",
    "check_output_dir",
    "claim_output_dir",
    "_out_of_memory_hint",
]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Measure how much algorithmic recourse leaks about a model's training data.",
)
app.callback()(_options)
register_commands(  # the order of --help
    app,
    [
        audit,  # audit.py
        list_command,  # listing.py: list, datasets, version
        datasets,
        version,
        tradeoff,  # tradeoff.py
        run_command,  # grid.py: run, results, reproduce
        results_command,
        reproduce_command,
        audit_dp_command,  # audit_dp.py
        recourse_command,  # recourse.py
    ],
)
app.add_typer(cache_app, name="cache")
_register_service(app, functools.partial(_command, on=app))  # publish, keys, serve


def _on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # the one error path stops the workers and exits 130


def main() -> None:
    """Console entry point."""
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    app()
