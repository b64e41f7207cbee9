"""The typer options shared by several commands: one definition each, so that their help texts cannot drift."""

from __future__ import annotations

from pathlib import Path

import typer


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


_DEVICE_HELP = "where torch trains MLPs and searches gradient recourse: cpu, cuda, or auto (CUDA where available)"
_DEVICE = typer.Option("auto", help=_DEVICE_HELP)
_SEED = typer.Option(0, help="seed of every random step")
_CACHE_DIR = typer.Option(
    None,
    help="shared cache of trained models and recourse (off: none; default $RECOURSE_PRIVACY_CACHE, "
    "else the user cache; `recourse-privacy cache info`)",
)
_DATA_DIR = typer.Option(None, help="directory of the real datasets")


# ------------------------------------------------------------------ the data and model options of audit, recourse
# and tradeoff: one definition, shared by the three commands
_DATA = typer.Option(None, "--data", help="your own CSV/Parquet file instead of --dataset")
_TARGET = typer.Option(None, "--target", help="label column of --data (two values; see --positive-label)")
_POSITIVE_LABEL = typer.Option(
    None, "--positive-label", help="the favourable value of --target (needed unless the labels are 0/1)"
)
_MODEL_FILE = typer.Option(
    None,
    "--model-file",
    help="your own fitted scikit-learn classifier or Pipeline (reading the columns of --data): .skops (safe), "
    ".joblib/.pkl (trusted files only, with --trust-pickle); the game retrains it on the members (a clone), "
    "or, with --members / --train-data, audits it as it is",
)
_TRUST = typer.Option(None, "--trust", help="a type in the .skops file you trust (repeatable); the error lists them")
_TRUST_PICKLE = typer.Option(False, "--trust-pickle", help="load a .joblib/.pkl model file (runs code from it)")
_CATEGORICAL = typer.Option(
    None, "--categorical", help="column(s) of --data to one-hot encode (repeatable or comma-separated; text always is)"
)
_IMMUTABLE = typer.Option(None, "--immutable", help="column(s) recourse must not change (repeatable or commas)")
_INCREASING = typer.Option(None, "--increasing", help="column(s) recourse may only increase (repeatable or commas)")
_BOUNDS = typer.Option(None, "--bounds", help="COL=LO:HI, the range recourse may move a numeric column in (repeatable)")
