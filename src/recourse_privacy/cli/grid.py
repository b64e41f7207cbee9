"""``recourse-privacy run``, ``results`` and ``reproduce``: experiment grids and the shipped reproductions."""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy.cli._common import (
    _capped,
    _check_device,
    _command,
    _fail,
    _names,
    _numbers,
    _wide_console,
    claim_output_dir,
)
from recourse_privacy.cli.options import (
    _CACHE_DIR,
    _DEVICE,
    _OVERWRITE,
    _out_path,
)
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError, UnknownNameError


def _run_and_report(
    spec,
    out: Path,
    backend: str,
    address: str | None,
    n_jobs: int | None,
    threads_per_cell: int,
    console,
    cache_dir: str | None = None,
    overwrite: bool = False,
) -> None:
    """Run a spec with progress bars, then print what was done and the tables."""
    from recourse_privacy.experiments.engine import run_spec
    from recourse_privacy.experiments.results import plot_results, print_paper_notes, print_tables, result_tables

    if address is None:  # this machine's CPUs (a cluster's are its own)
        n_jobs, threads_per_cell = _capped(n_jobs, "--n-jobs"), _capped(threads_per_cell, "--threads-per-cell")
    try:
        claim = claim_output_dir(out, "run", overwrite, resumable=True)  # a store: a rerun resumes it
        summary = run_spec(
            spec,
            out,
            backend=backend,
            address=address,
            n_jobs=n_jobs,
            progress=True,
            threads_per_cell=threads_per_cell,
            cache_dir=cache_dir,
        )
    except RecoursePrivacyError as err:
        _fail(err)
    console.print(
        f"{spec.name}: {summary.n_cells} cells, {summary.n_skipped} already finished, "
        f"{summary.n_computed} computed, {len(summary.shared)} computed meanwhile by another runner, "
        f"{summary.n_failed} failed, in {summary.seconds:.1f} s "
        f"({backend} backend); store {summary.out_dir}",
        highlight=False,
    )
    tables = result_tables(out, spec)
    print_tables(tables, console)
    print_paper_notes(spec, console)
    plots = plot_results(tables, out)
    claim.finish()
    if plots:
        console.print(f"wrote {len(plots)} plot(s) to {Path(out) / 'plots'}", highlight=False)
    _print_run_report(summary.report, console)
    for label, err in summary.failed:
        console.print(f"failed: {label}: {err}", style="red", highlight=False)
    if summary.failed:
        raise typer.Exit(code=1)


@_command("run")
def run_command(
    spec: str = typer.Argument(..., help="experiment spec (YAML file) or the name of a shipped reproduction"),
    out: Path = typer.Option(
        ..., "--out", help="results store: one record per cell, resumable (a rerun into it resumes)", parser=_out_path
    ),
    overwrite: bool = _OVERWRITE,
    backend: str = typer.Option("local", help="local (joblib processes) or ray"),
    address: str | None = typer.Option(None, help="Ray cluster address (--backend ray); default: a local Ray"),
    n_jobs: int | None = typer.Option(None, help="cells in parallel (local default: the number of cores)"),
    threads_per_cell: int = typer.Option(1, help="torch/BLAS threads of each cell (same value, same numbers)"),
    cache_dir: str | None = _CACHE_DIR,
) -> None:
    """Run every unfinished cell of an experiment spec; a rerun skips the finished cells."""
    from recourse_privacy.experiments.spec import load_spec
    from recourse_privacy.reproductions.grid_reproductions import list_grid_reproductions, load_shipped_spec

    console = _wide_console()
    try:
        shipped = spec in list_grid_reproductions() and not Path(spec).is_file()
        loaded = load_shipped_spec(spec) if shipped else load_spec(spec)
    except RecoursePrivacyError as err:
        _fail(err)
    _run_and_report(loaded, out, backend, address, n_jobs, threads_per_cell, console, cache_dir, overwrite)


@_command("results")
def results_command(
    out: Path = typer.Argument(..., help="results store written by `run` or `reproduce`"),
) -> None:
    """Print the tables (mean and sd over seeds, the paper beside ours) and write plots of a store."""
    from recourse_privacy.experiments.results import (
        load_store_spec,
        plot_results,
        print_paper_notes,
        print_tables,
        result_tables,
    )

    console = _wide_console()
    if not (out / "cells").is_dir():
        _fail(
            InvalidInputError(f"{out} is not a results store (no cells/ directory); run `recourse-privacy run` first")
        )
    spec = load_store_spec(out)
    tables = result_tables(out, spec)
    print_tables(tables, console)
    if spec is not None:
        print_paper_notes(spec, console)
    plots = plot_results(tables, out)
    if plots:
        console.print(f"wrote {len(plots)} plot(s) to {out / 'plots'}", highlight=False)


def _reproduction_names() -> str:
    """Every shipped reproduction with its expected time (a broken plugin must not break --help)."""
    from recourse_privacy import catalog

    try:
        return catalog.reproductions_with_times()
    except RecoursePrivacyError:
        return _names("reproduction")


@_command("reproduce")
def reproduce_command(
    name: str = typer.Argument(
        ...,
        help=f"a shipped reproduction, with its expected time: {_reproduction_names()} "
        "(`recourse-privacy list reproduction` describes each)",
    ),
    out: Path | None = typer.Option(None, help="results store (default: ./<name>-results)", parser=_out_path),
    overwrite: bool = _OVERWRITE,
    shadow_models: int | None = typer.Option(None, help="override the spec's number of shadow models"),
    seeds: str | None = typer.Option(None, help="comma-separated seeds instead of the spec's"),
    backend: str = typer.Option("local", help="local (joblib processes) or ray"),
    address: str | None = typer.Option(None, help="Ray cluster address (--backend ray)"),
    n_jobs: int | None = typer.Option(None, help="cells in parallel (local default: the number of cores)"),
    threads_per_cell: int = typer.Option(1, help="torch/BLAS threads of each cell"),
    device: str = _DEVICE,
    cache_dir: str | None = _CACHE_DIR,
) -> None:
    """Run a shipped reproduction and print the paper's figures beside ours, with the known differences."""
    from recourse_privacy.models.device import use_device
    from recourse_privacy.reproductions.grid_reproductions import list_grid_reproductions, load_shipped_spec
    from recourse_privacy.reproductions.registry import REPRODUCTIONS

    console = _wide_console()
    seed_list = _numbers(seeds, int, "--seeds") if seeds is not None else None
    out_dir = out or Path(f"{name}-results")
    _check_device(device)
    if name in REPRODUCTIONS and not REPRODUCTIONS.get(name).meta.get("grid"):  # not a grid of audits
        claim = claim_output_dir(out_dir, f"reproduce {name}", overwrite, resumable=True)
        with use_device(device):
            REPRODUCTIONS.get(name).obj(out_dir, seeds=seed_list, console=console)
        claim.finish()
        return
    if name not in list_grid_reproductions():
        raise UnknownNameError(f"unknown reproduction {name!r}; shipped: {', '.join(REPRODUCTIONS.names())}")
    spec = load_shipped_spec(name)
    fixed = {"shadow_models": shadow_models} if shadow_models is not None else {}
    if device != "auto":  # the cells (and their keys) say it; "auto" keeps the keys of before
        fixed["device"] = device
    if fixed or seed_list:
        spec = spec.with_overrides(fixed=fixed, seeds=seed_list)
    _run_and_report(spec, out_dir, backend, address, n_jobs, threads_per_cell, console, cache_dir, overwrite)


def _print_run_report(report: dict, console) -> None:
    """Where the run's time went (the tables of summary.md): seconds per cell and stage, the cache's hit rates."""
    if not report:
        return
    from rich.table import Table

    from recourse_privacy.experiments.engine import report_tables

    header, rows, cache_header, cache_rows = report_tables(report)
    table = Table(title=f"Where the time went: {report['wall_seconds']:,.1f} s wall (summary.md)")
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if cache_rows:
        table = Table(title=f"Artifact cache {report['cache']['dir']}")
        for i, col in enumerate(cache_header):
            table.add_column(col, justify="left" if i == 0 else "right")
        for row in cache_rows:
            table.add_row(*row)
        console.print(table)
