"""The ``recourse-privacy`` command line (typer + rich). Heavy imports happen inside commands."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Measure how much algorithmic recourse leaks about a model's training data.")


def _parse_params(items: list[str] | None, option: str) -> dict:
    """``key=value`` pairs; values are read as JSON where they parse (numbers, true/false, lists)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _fail(err: Exception) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]Error:[/] {err}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


@app.command()
def audit(
    dataset: str = typer.Option("synthetic", help="adult, heloc, compas, diabetes, synthetic, breast_cancer, digits"),
    data: Optional[Path] = typer.Option(None, help="your own CSV/Parquet file instead of --dataset"),
    target: Optional[str] = typer.Option(None, help="label column of --data (binary; 1 = favourable)"),
    data_dir: Optional[Path] = typer.Option(None, help="directory of the real datasets (else $RECOURSE_PRIVACY_DATA, else a download cache)"),
    n_features: int = typer.Option(1000, help="number of features of the synthetic data"),
    model: str = typer.Option("logistic", help="logistic, mlp, mlp3-100, mlp3-333, mlp3-1000"),
    recourse: str = typer.Option("linear", help="linear (exact, linear models) or scfe"),
    attacks: str = typer.Option("cfd,cfd-lrt,loss,loss-lrt,random", help="comma-separated: cfd, cfd-lrt, cfd-lrt-global, cfd-lrt-per-example, loss, loss-lrt, random"),
    shadow_models: int = typer.Option(10, help="shadow models of the adversary (LRT attacks)"),
    shadow_fraction: float = typer.Option(0.5, help="share of the adversary's pool each shadow model trains on"),
    n_members: int = typer.Option(2000, help="owner's training set size; the non-member and adversary pools default to the same size"),
    n_nonmembers: Optional[int] = typer.Option(None, help="non-member pool size (default: --n-members)"),
    n_adversary: Optional[int] = typer.Option(None, help="adversary's pool size (default: --n-members)"),
    distance: str = typer.Option("l1", help="cost c(x, x') the attacks read: l1 (paper 000) or l2"),
    variance: str = typer.Option("per-example", help="LRT variance: per-example or global"),
    center: str = typer.Option("mean", help="LRT center: mean (MLE, Algorithm 1) or median"),
    cdf: str = typer.Option("normal", help="LRT score: normal or t (Student-t) CDF"),
    actionable: bool = typer.Option(False, help="apply the dataset's actionability constraints to recourse"),
    normalize_rows: bool = typer.Option(False, help="scale every row to unit L2 norm (paper 001)"),
    data_param: Optional[list[str]] = typer.Option(None, help="KEY=VALUE for the data (synthetic: class_sep, flip_y)"),
    model_param: Optional[list[str]] = typer.Option(None, help="KEY=VALUE for the model (epochs, batch_size, lr, C, ...)"),
    recourse_param: Optional[list[str]] = typer.Option(None, help="KEY=VALUE for the recourse method (lam, lr, max_iter, ...)"),
    seed: int = typer.Option(0, help="seed of every random step"),
    n_jobs: int = typer.Option(1, help="parallel shadow-model trainings (joblib processes)"),
    out: Path = typer.Option(Path("audit-results"), help="output directory"),
) -> None:
    """Play the recourse membership-inference game and report every attack."""
    from rich.console import Console

    from recourse_privacy.experiments.audit import run_audit
    from recourse_privacy.experiments.config import AuditConfig

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    try:
        config = AuditConfig(
            dataset=dataset, data=str(data) if data else None, target=target,
            data_dir=str(data_dir) if data_dir else None, n_features=n_features, model=model, recourse=recourse,
            attacks=tuple(a.strip() for a in attacks.split(",") if a.strip()), shadow_models=shadow_models,
            shadow_fraction=shadow_fraction,
            n_members=n_members, n_nonmembers=n_nonmembers, n_adversary=n_adversary, distance=distance,
            variance=variance, center=center, cdf=cdf, actionable=actionable, normalize_rows=normalize_rows,
            data_params=_parse_params(data_param, "--data-param"),
            model_params=_parse_params(model_param, "--model-param"),
            recourse_params=_parse_params(recourse_param, "--recourse-param"), seed=seed, n_jobs=n_jobs,
        ).validate()
    except ValueError as err:
        _fail(err)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<14}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            result = run_audit(config, out, progress=progress)
        except (ValueError, FileNotFoundError, TypeError) as err:
            bar.stop()
            _fail(err)
    _print_summary(console, result)


def _print_summary(console, result) -> None:
    from rich.table import Table

    m = result.metrics
    cfg = m["config"]
    console.print(f"\n[bold]{cfg['data'] or cfg['dataset']}[/] | model {cfg['model']} "
                  f"(train acc {m['model']['train_accuracy']:.3f}, test acc {m['model']['test_accuracy']:.3f}) | "
                  f"recourse {cfg['recourse']} (validity {m['recourse']['validity']:.3f}, "
                  f"mean L1 {m['recourse']['mean_l1']:.3g}, mean L2 {m['recourse']['mean_l2']:.3g}) | "
                  f"targets: {m['n_members']} members, {m['n_nonmembers']} non-members", highlight=False)
    table = Table(title="Membership inference from recourse (TPR at FPR 0.1 / 0.01 / 0.001)")
    for col in ("attack", "AUC", "BA", "TPR@0.1", "TPR@0.01", "TPR@0.001", "direction"):
        table.add_column(col, justify="left" if col in ("attack", "direction") else "right", no_wrap=True)
    for name, a in m["attacks"].items():
        cells = [f"{a['tpr_at_fpr'][k]:.4f}" + ("" if a["tpr_at_fpr_reliable"][k] else "*") for k in ("0.1", "0.01", "0.001")]
        table.add_row(name, f"{a['auc']:.4f}", f"{a['balanced_accuracy']:.4f}", *cells, a["direction"])
    console.print(table)
    if any(not r for a in m["attacks"].values() for r in a["tpr_at_fpr_reliable"].values()):
        console.print("* fewer non-members than 1/FPR: that TPR cannot be resolved at this FPR", style="dim")
    for w in m.get("warnings", []):
        console.print(f"warning: {w}", style="yellow", highlight=False)
    console.print(f"wrote {', '.join(Path(p).name for p in result.files.values())} to "
                  f"{Path(result.files['metrics']).parent} in {m['timing_seconds']['total']:.1f} s", highlight=False)


@app.command()
def datasets() -> None:
    """List the named datasets and where the real ones are read from."""
    from rich.console import Console
    from rich.table import Table

    from recourse_privacy.data import DATASET_DESCRIPTIONS, DATASETS, resolve_data_dir

    table = Table(title=f"datasets (real data read from {resolve_data_dir()})")
    table.add_column("name")
    table.add_column("description")
    for name in DATASETS:
        table.add_row(name, DATASET_DESCRIPTIONS.get(name, ""))
    Console().print(table)


@app.command()
def version() -> None:
    """Print the package version."""
    from recourse_privacy import __version__

    typer.echo(__version__)


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
