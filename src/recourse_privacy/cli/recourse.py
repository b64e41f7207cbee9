"""``recourse-privacy recourse``: recourse quality per method."""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy.cli._common import (
    _check_device,
    _command,
    _fail,
    _name_list,
    _names,
    _parse_params,
    _user_inputs,
    check_output_dir,
    claim_output_dir,
)
from recourse_privacy.cli.options import (
    _BOUNDS,
    _CATEGORICAL,
    _DATA,
    _DATA_DIR,
    _DECISION_THRESHOLD,
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
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError


@_command("recourse")
def recourse_command(
    dataset: str = typer.Option("adult", help=f"a registered dataset: {_names('dataset')}"),
    data: Path | None = _DATA,
    target: str | None = _TARGET,
    positive_label: str | None = _POSITIVE_LABEL,
    categorical: list[str] | None = _CATEGORICAL,
    immutable: list[str] | None = _IMMUTABLE,
    increasing: list[str] | None = _INCREASING,
    bounds: list[str] | None = _BOUNDS,
    schema: Path | None = typer.Option(
        None,
        "--schema",
        help="YAML public metadata of --data (per column: type, bounds, categories, immutable, direction); "
        "the private methods scale with its bounds",
    ),
    bounds_from_data: bool = typer.Option(
        False,
        "--bounds-from-data",
        help="private methods read their bounds from the training rows (min/max): NOT covered by the DP guarantee",
    ),
    model_file: Path | None = _MODEL_FILE,
    trust: list[str] | None = _TRUST,
    trust_pickle: bool = _TRUST_PICKLE,
    decision_threshold: float | None = _DECISION_THRESHOLD,
    model: str = typer.Option("mlp", help=f"a registered model: {_names('model')}"),
    methods: str = typer.Option(
        "scfe,cadex,dice,face",
        help=f"comma-separated, of {_names('recourse')} (`all` for every registered method)",
    ),
    n_points: int = typer.Option(1000, help="query points: held-out rows the model rejects"),
    n_train: int = typer.Option(5000, help="rows that train the model (and that data-driven methods fit on)"),
    actionable: bool = typer.Option(True, help="apply the dataset's immutable / increase-only features and ranges"),
    data_dir: Path | None = _DATA_DIR,
    model_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the model (epochs, lr, ...)"),
    method_param: list[str] | None = typer.Option(
        None,
        help="METHOD.KEY=VALUE, e.g. face.n_neighbors=20. Private defaults: laplace.epsilon=1.0 per query, "
        "dpc.epsilon=1.0 with layers sized to the features, privrecourse.epsilon=1.0; bounds: the dataset's "
        "documented public domain (`recourse-privacy datasets NAME`)",
    ),
    seed: int = _SEED,
    device: str = _DEVICE,
    out: Path = typer.Option(Path("recourse-quality"), help="output directory", parser=_out_path),
    overwrite: bool = _OVERWRITE,
) -> None:
    """Recourse quality per method (CARLA's metrics, the path metrics of Pentyala et al. 2023): a table, JSON, CSV and a plot."""
    from recourse_privacy.recourse import RECOURSE_METHODS
    from recourse_privacy.validation import check_seed

    console = _quality_console()
    check_seed(seed, "--seed")
    check_output_dir(out)
    names = list(RECOURSE_METHODS) if methods.strip() == "all" else list(_name_list(methods, "--methods"))
    per_method = _method_params(method_param)
    inputs = _user_inputs({**locals(), "model": "logistic" if model_file is not None and model == "mlp" else model})
    inputs = _with_schema(inputs, schema, data)
    model_params = _parse_params(model_param, "--model-param")
    model_label = _checked_model(inputs, model, model_file, model_params, per_method)
    dataset_label = str(inputs["data"] and Path(inputs["data"]).name or dataset)
    _check_device(device)
    settings = dict(
        n_points=n_points,
        seed=seed,
        out_dir=out,
        data_dir=data_dir,
        actionable=actionable,
        n_train=n_train,
        model_params=model_params,
        method_params=per_method,
        bounds_from_data=bounds_from_data,
    )
    try:
        for name in names:  # unknown names are refused before the directory is claimed
            RECOURSE_METHODS.check(name)
        claim = claim_output_dir(out, "recourse", overwrite)
        result = _measure(console, device, dataset, inputs, names, settings)
        claim.finish()
    except RecoursePrivacyError as err:
        _fail(err)
    _print_quality(console, result, dataset_label, model_label, actionable, bounds_from_data, out)


def _quality_console():
    """The console of the table (wide where the output is not a terminal, so that the table is not cut)."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 170))


def _with_schema(inputs: dict, schema: Path | None, data: Path | None) -> dict:
    """The user inputs completed from a ``--schema`` file (public metadata of ``--data``)."""
    if schema is None:
        return inputs
    from recourse_privacy.data.domain import load_schema, schema_inputs

    if data is None:
        raise InvalidInputError("--schema describes your own --data; a registered dataset carries its own metadata")
    inputs.update(schema_inputs(load_schema(schema), inputs))
    return inputs


def _checked_model(inputs: dict, model: str, model_file: Path | None, model_params: dict, per_method: dict) -> str:
    """The model's label; the model's and the methods' parameters are checked before any work."""
    from recourse_privacy.audit.user_inputs import describe_model

    model_label = model if model_file is None else describe_model(inputs["model"])
    if isinstance(inputs["model"], str):
        _check_params_before_work(model, model_params, per_method)
    else:
        _check_params_before_work(None, {}, per_method)
    return model_label


def _measure(console, device: str, dataset: str, inputs: dict, names: list[str], settings: dict):
    """Run :func:`~recourse_privacy.evaluation.quality.run_quality` on ``device`` with a status line."""
    from recourse_privacy.evaluation.quality import run_quality
    from recourse_privacy.models.device import use_device

    with console.status("measuring recourse quality") as status, use_device(device):

        def progress(stage: str, done: int, total: int) -> None:
            if done < total:
                status.update(f"{stage} ...")

        return run_quality(dataset, inputs.pop("model"), names, progress=progress, **settings, **inputs)


def _method_params(method_param: list[str] | None) -> dict[str, dict]:
    """--method-param METHOD.KEY=VALUE as method -> {key: value}."""
    per_method: dict[str, dict] = {}
    for key, value in _parse_params(method_param, "--method-param").items():
        name, dot, param = key.partition(".")
        if not dot or not param:
            _fail(InvalidInputError(f"--method-param expects METHOD.KEY=VALUE; got {key!r}"))
        per_method.setdefault(name, {})[param] = value
    return per_method


def _print_quality(
    console, result, dataset_label: str, model_label: str, actionable: bool, bounds_from_data: bool, out
) -> None:
    """recourse's table of metrics per method, its skips and warnings, and the files written."""
    from rich.table import Table

    from recourse_privacy.evaluation.quality import METRICS

    run = result.run
    if bounds_from_data:
        console.print(f"warning: private methods' bounds: {run['public_bounds']}", style="yellow", highlight=False)
    table = Table(
        title=f"Recourse quality: {dataset_label} / {model_label} (held-out acc {run['heldout_accuracy']:.3f}), "
        f"{run['n_points']} query points{', actionable' if actionable else ''}"
    )
    shown = [m for m in METRICS if any(m in v for v in result.table.values())]
    table.add_column("method", no_wrap=True)
    for m in shown:
        table.add_column(
            m.replace("seconds_per_cf", "s/cf").replace("pdistance_manifold", "pdist_man"),
            justify="right",
            no_wrap=True,
        )
    for name, v in result.table.items():
        if "skipped" in v:
            table.add_row(name, *(["-"] * len(shown)))
            continue
        table.add_row(name, *(_fmt(v.get(m)) for m in shown))
    console.print(table)
    for reason in result.skipped.values():
        console.print(f"skipped: {reason}", style="yellow", highlight=False)
    if run.get("warning"):
        console.print(f"warning: {run['warning']}", style="yellow", highlight=False)
    console.print(
        "costs, redundancy, yNN, violations and path metrics: means over valid counterfactuals (CARLA); L2 not squared",
        style="dim",
    )
    console.print(
        f"wrote {', '.join(Path(p).name for p in result.files.values())} to {out} in {run['total_seconds']:.1f} s",
        highlight=False,
    )


def _check_params_before_work(model: str | None, model_params: dict, per_method: dict[str, dict]) -> None:
    """Construct the model and each method once, so that their bounded parameters are checked before training."""
    import inspect

    from recourse_privacy.models.registry import make_model
    from recourse_privacy.recourse import RECOURSE_METHODS

    if model is not None:
        make_model(model, random_state=0, **model_params)
    for name, params in per_method.items():
        cls = RECOURSE_METHODS.get(name).obj
        if "epsilon" in inspect.signature(cls).parameters and "epsilon" not in params:
            params = {**params, "epsilon": 1.0}
        cls(**params)


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"
