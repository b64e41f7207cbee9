"""``recourse-privacy list``, ``datasets`` and ``version``: what is registered and installed."""

from __future__ import annotations

import typer

from recourse_privacy.cli._common import (
    _command,
    _wide_console,
)


@_command("list")
def list_command(
    kind: str | None = typer.Argument(
        None, help="attack, recourse, model, defense, dataset, mechanism (DP audits) or reproduction (default: all)"
    ),
) -> None:
    """List every registered attack, recourse method, model, defense and dataset, with what each needs.

    Reproductions are listed with their expected time.

    Entries of installed plugins (the ``recourse_privacy.plugins`` entry-point group) are included.
    """
    from rich.table import Table

    from recourse_privacy import catalog

    console = _wide_console()
    kinds = list(catalog.REGISTRIES) if kind is None else [catalog.check_kind(kind)]
    for k in kinds:
        rows = catalog.describe(k)
        timed = any(row.expected_time for row in rows)  # reproductions: how long each takes
        table = Table(title={"recourse": "recourse methods"}.get(k, f"{k}s"), title_justify="left")
        for col in ("name", "needs", *(("expected time",) if timed else ()), "description", "module"):
            table.add_column(col, overflow="fold")
        for row in rows:
            timing = (row.expected_time or "not stated",) if timed else ()
            table.add_row(row.name, row.needs, *timing, row.description, row.module)
        console.print(table)
    plugins = catalog.loaded_plugins()
    console.print(f"plugins loaded: {', '.join(plugins) if plugins else 'none'}", highlight=False)


@_command()
def datasets(
    name: str | None = typer.Argument(None, help="a dataset whose public domain metadata to show per feature"),
) -> None:
    """List the named datasets (with their public domain metadata) and where the real ones are read from."""
    from rich.console import Console
    from rich.table import Table

    from recourse_privacy.data import DATASET_DESCRIPTIONS, DATASETS, public_domain, resolve_data_dir

    if name is not None:
        domain = public_domain(DATASETS.check(name))
        if domain is None:
            meta = DATASETS.get(name).meta.get("domain")
            typer.echo(f"{name}: {meta or 'no public domain metadata declared'}")
            return
        table = Table(title=f"{name}: public domain metadata ({domain.source})", title_justify="left")
        table.add_column("feature")
        table.add_column("domain")
        for f in domain.features:
            table.add_row(f.name, f.describe())
        Console(width=170).print(table)
        return
    table = Table(title=f"datasets (real data read from {resolve_data_dir()})")
    table.add_column("name")
    table.add_column("description")
    table.add_column("public domain")
    for key in DATASETS:
        table.add_row(key, DATASET_DESCRIPTIONS.get(key, ""), DATASETS.get(key).meta.get("domain", "-"))
    Console().print(table)


@_command()
def version() -> None:
    """Print the package version."""
    from recourse_privacy import __version__

    typer.echo(__version__)
