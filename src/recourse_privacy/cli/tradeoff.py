"""``recourse-privacy tradeoff``: baseline, DPM and Laplace Recourse over epsilon (Huang et al. 2023)."""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy.cli._common import (
    _capped,
    _command,
    _fail,
    _name_list,
    _names,
    _numbers,
    _parse_params,
    _user_inputs,
    claim_output_dir,
)
from recourse_privacy.cli.options import (
    _BOUNDS,
    _CATEGORICAL,
    _DATA,
    _DATA_DIR,
    _DEVICE,
    _IMMUTABLE,
    _INCREASING,
    _MODEL_FILE,
    _OVERWRITE,
    _POSITIVE_LABEL,
    _SEED,
    _TARGET,
    _TRUST,
    _TRUST_PICKLE,
    _out_path,
)
from recourse_privacy.errors import RecoursePrivacyError


@_command()
def tradeoff(
    dataset: str = typer.Option("synthetic", help=f"a registered dataset: {_names('dataset')}"),
    data: Path | None = _DATA,
    target: str | None = _TARGET,
    positive_label: str | None = _POSITIVE_LABEL,
    categorical: list[str] | None = _CATEGORICAL,
    immutable: list[str] | None = _IMMUTABLE,
    increasing: list[str] | None = _INCREASING,
    bounds: list[str] | None = _BOUNDS,
    model_file: Path | None = _MODEL_FILE,
    trust: list[str] | None = _TRUST,
    trust_pickle: bool = _TRUST_PICKLE,
    data_dir: Path | None = _DATA_DIR,
    n_features: int = typer.Option(100, help="features of the synthetic data (Huang et al. 2023: 100, 1000, ...)"),
    model: str = typer.Option("logistic", help="logistic (DPM and LR) or mlp* (DPM only: LR needs a linear model)"),
    recourse: str = typer.Option("linear", help="recourse of the baseline and DPM settings (LR replaces it)"),
    epsilons: str = typer.Option("0.5,1,5,10,20", help="comma-separated epsilons of DPM and LR"),
    attacks: str = typer.Option("cfd,cfd-lrt-global,cfd-lrt-per-example", help="attacks of every setting"),
    shadow_models: int = typer.Option(5, help="shadow models (Huang et al. 2023: 5)"),
    n_members: int = typer.Option(5000, help="owner's training set (Huang et al. 2023: 5,000)"),
    n_adversary: int | None = typer.Option(None, help="adversary's pool (default: twice --n-members)"),
    distance: str = typer.Option("l2", help="cost the attacks read (Huang et al. 2023: l2)"),
    normalize_rows: bool = typer.Option(
        True, help="unit-L2 rows (Huang et al. 2023; needed by DPM logistic regression)"
    ),
    data_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the data"),
    model_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the model"),
    seed: int = _SEED,
    n_jobs: int = typer.Option(1, help="parallel shadow-model trainings"),
    device: str = _DEVICE,
    out: Path = typer.Option(
        Path("tradeoff-results"), help="output directory (one sub-directory per setting)", parser=_out_path
    ),
    overwrite: bool = _OVERWRITE,
) -> None:
    """Baseline, DPM and Laplace Recourse over epsilon (Huang et al. 2023): a table and plots of attacks and accuracy."""
    from recourse_privacy.evaluation.tradeoff import run_tradeoff, tradeoff_base_config, tradeoff_settings

    console = _tradeoff_console()
    try:
        eps = _numbers(epsilons, float, "--epsilons")
        base = tradeoff_base_config(
            dataset=dataset,
            **_user_inputs(locals()),
            data_dir=str(data_dir) if data_dir else None,
            n_features=n_features,
            recourse=recourse,
            attacks=_name_list(attacks, "--attacks"),
            shadow_models=shadow_models,
            n_members=n_members,
            n_adversary=n_adversary,
            distance=distance,
            normalize_rows=normalize_rows,
            data_params=_parse_params(data_param, "--data-param"),
            model_params=_parse_params(model_param, "--model-param"),
            seed=seed,
            n_jobs=_capped(n_jobs, "--n-jobs"),
            device=device,
        ).validate()
        tradeoff_settings(base, eps)
        claim = claim_output_dir(out, "tradeoff", overwrite, resumable=True)
    except RecoursePrivacyError as err:
        _fail(err)
    try:
        result = run_tradeoff(base, out, epsilons=eps, progress=_progress_printer(console))
        claim.finish()
    except RecoursePrivacyError as err:
        _fail(err)
    _print_tradeoff(console, result, list(base.attacks), out)


def _tradeoff_console():
    """The console of the table (wide where the output is not a terminal, so that the table is not cut)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 170))


def _progress_printer(console):
    """``progress(label, done, total)`` that prints ``[i/n] label`` once, when a setting starts."""
    started: set[str] = set()

    def progress(label: str, done: int, total: int) -> None:
        if label not in started:
            started.add(label)
            console.print(f"[{done + 1}/{total}] {label}", highlight=False)

    return progress


def _print_tradeoff(console, result, atk: list[str], out: Path) -> None:
    """The trade-off table (AUC / TPR at FPR 0.01 per attack, per setting), its warnings and the files written."""
    from rich.table import Table

    table = Table(title="Privacy-utility trade-off (AUC / TPR at FPR 0.01 per attack)")
    for col in ("setting", "train acc", "test acc", "validity", "eps total", "BA bound", *atk):
        table.add_column(col, justify="left" if col == "setting" else "right", no_wrap=True)
    for r in result.rows:
        cells = [f"{r[f'{a}:auc']:.3f} / {r[f'{a}:tpr@0.01']:.3f}" for a in atk]
        table.add_row(
            r["setting"],
            f"{r['train_accuracy']:.3f}",
            f"{r['test_accuracy']:.3f}",
            f"{r['recourse_validity']:.3f}",
            "-" if r["epsilon_total"] is None else f"{r['epsilon_total']:.4g}",
            "-" if r["ba_bound"] is None else f"{r['ba_bound']:.3f}",
            *cells,
        )
    console.print(table)
    for label, err in result.failed.items():
        console.print(f"warning: setting {label} could not be played: {err}", style="yellow", highlight=False)
    if result.skipped:
        console.print(f"read back finished settings: {', '.join(result.skipped)}", style="dim", highlight=False)
    console.print(f"wrote {', '.join(Path(p).name for p in result.files.values())} to {out}", highlight=False)
