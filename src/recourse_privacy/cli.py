"""The ``recourse-privacy`` command line (typer + rich). Heavy imports happen inside commands."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import typer

from recourse_privacy import strict_json
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError, UnknownNameError


def check_output_dir(path, name: str = "--out"):
    """:func:`recourse_privacy.validation.check_output_dir`, imported when used (keeps --help fast)."""
    from recourse_privacy.validation import check_output_dir as check

    return check(path, name)


def claim_output_dir(path, command: str, overwrite: bool, *, resumable: bool = False):
    """:func:`recourse_privacy.output_dir.claim_output_dir`, imported when used (keeps --help fast)."""
    from recourse_privacy.output_dir import claim_output_dir as claim

    return claim(path, command, overwrite=overwrite, resumable=resumable)


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


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Measure how much algorithmic recourse leaks about a model's training data.",
)


_STATE = {"debug": False}


@app.callback()
def _options(
    debug: bool = typer.Option(
        False, "--debug", help="on an error, print the full traceback too (also: RECOURSE_PRIVACY_DEBUG=1)"
    ),
) -> None:
    """Measure how much algorithmic recourse leaks about a model's training data."""
    _STATE["debug"] = debug


def _debug() -> bool:
    import os

    return _STATE["debug"] or os.environ.get("RECOURSE_PRIVACY_DEBUG", "") not in ("", "0")


def _stop_workers() -> None:
    """Kill joblib's worker processes (shadow models, cells) so that none outlives an interrupted command."""
    import sys

    if "joblib.externals.loky" not in sys.modules:
        return
    try:
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=False, kill_workers=True)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def _command(*args, on=None, **kwargs):
    """``app.command`` (or ``on.command``, a sub-app's) whose function has the CLI's one error path.

    A package error (bad input) prints one line and exits 2; an interrupt (Ctrl-C, SIGTERM)
    stops the worker processes and exits 130; a file-system error prints one line and exits 2;
    anything else is a bug: one line saying so, exit 1. ``--debug`` adds the traceback.
    """

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            import click

            try:
                _check_utf8(fn, k)
                return fn(*a, **k)
            except (typer.Exit, click.exceptions.Exit, click.exceptions.ClickException, click.exceptions.Abort):
                raise
            except RecoursePrivacyError as err:
                _fail(err)
            except KeyboardInterrupt:
                _stop_workers()
                _fail(
                    "interrupted; finished shadow models and cells are kept, rerun the same command to resume", code=130
                )
            except MemoryError:
                _stop_workers()
                _fail(_out_of_memory_hint(fn))
            except OSError as err:
                where = f" ({err.filename})" if getattr(err, "filename", None) else ""
                _fail(f"{err.strerror or err}{where}")
            except Exception as err:  # noqa: BLE001 - the one error path: no traceback unless --debug
                _fail(
                    f"internal error ({type(err).__name__}: {err}); this is a bug in recourse-privacy, please "
                    "report it with the output of the same command run with --debug",
                    code=1,
                )

        return (on or app).command(*args, **kwargs)(wrapped)

    return decorate


#: the options that size a command's memory, in the order an out-of-memory hint names them
_MEMORY_KNOBS = (
    "n_members",
    "n_features",
    "shadow_models",
    "n_train",
    "n_points",
    "trials",
    "n_jobs",
    "threads_per_cell",
)


def _out_of_memory_hint(fn) -> str:
    """``out of memory: lower ...``, naming the options of the command ``fn`` that size its memory."""
    import inspect

    params = inspect.signature(fn).parameters
    knobs = [f"--{k.replace('_', '-')}" for k in _MEMORY_KNOBS if k in params]
    extra = " (or the spec's n_members, n_features, shadow_models)" if "spec" in params or "name" in params else ""
    return "out of memory" + (f": lower {', '.join(knobs)}{extra}" if knobs else "")


def _check_utf8(fn, values: dict) -> None:
    """Refuse a value of ``fn``'s options holding bytes that are not UTF-8 (a Latin-1 file name: Python's
    surrogate escapes), naming its option, before anything prints or opens it (printing one was an internal error)."""
    import inspect

    for key, value in values.items():
        for v in value if isinstance(value, list | tuple) else [value]:
            text = str(v) if isinstance(v, str | Path) else ""
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                info = inspect.signature(fn).parameters[key].default
                decls = [d for d in getattr(info, "param_decls", None) or () if d.startswith("--")]
                flag = key.upper() if isinstance(info, typer.models.ArgumentInfo) else (decls or [f"--{key}"])[0]
                flag = flag.replace("_", "-") if flag.startswith("--") else flag
                shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                raise InvalidInputError(
                    f"{flag} '{shown}' is not UTF-8 text; rename the file or directory, or type the value in UTF-8"
                ) from None


_DEVICE_HELP = "where torch trains MLPs and searches gradient recourse: cpu, cuda, or auto (CUDA where available)"


def _check_device(device: str) -> str:
    """``--device``, checked before any work: a known name, and CUDA present where ``cuda`` is asked for."""
    from recourse_privacy.models.device import check_device, resolve_device

    if check_device(device, "--device") == "cuda":
        resolve_device(device, "--device")
    return device


def _names(kind: str) -> str:
    """The registered names of ``kind`` (attack, recourse, model, defense, dataset), for help texts."""
    from recourse_privacy import catalog

    try:
        return ", ".join(catalog.REGISTRIES[kind])
    except RecoursePrivacyError:  # a broken plugin must not break --help; the command itself will say why
        return "see `recourse-privacy list`"


def _parse_params(items: list[str] | None, option: str) -> dict:
    """``key=value`` pairs; values are read as JSON where they parse (numbers, true/false, lists)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"{option} expects KEY=VALUE; got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _numbers(text: str, kind: type, option: str) -> list:
    """A comma-separated list of numbers; an entry that is not one is an error naming the option."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        if item:
            try:
                out.append(kind(item))
            except ValueError:
                raise InvalidInputError(
                    f"{option} expects comma-separated {kind.__name__} values; got {item!r}"
                ) from None
    if not out:
        raise InvalidInputError(f"{option} is empty: give at least one {kind.__name__} value (comma-separated)")
    return out


def _name_list(text: str, option: str) -> tuple[str, ...]:
    """A comma-separated list of names; an empty one is an error naming the option."""
    out = tuple(s.strip() for s in text.split(",") if s.strip())
    if not out:
        raise InvalidInputError(f"{option} is empty: give at least one name (comma-separated)")
    return out


def _given_options() -> set[str]:
    """The parameters of the running command that the user gave (command line or environment), not defaults."""
    try:  # typer >= 0.17 runs on its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return set()
    sources = {n: ctx.get_parameter_source(n) for n in ctx.params}
    return {n for n, src in sources.items() if src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")}


def _refuse_inapplicable(options: dict) -> None:
    """Options that do not apply beside the others given are an error naming them (never ignored but recorded)."""
    given = _given_options()
    if options.get("data") is not None:
        for name in ("dataset", "n_features", "data_dir"):
            if name in given:
                raise InvalidInputError(
                    f"--{name.replace('_', '-')} does not apply with --data (your file is the data): drop one of them"
                )
    elif "n_features" in given and options.get("dataset") != "synthetic":
        raise InvalidInputError(
            f"--n-features applies to --dataset synthetic only; {options.get('dataset')} has its own features: "
            "drop --n-features"
        )


def _capped(n: int | None, option: str) -> int | None:
    """``n`` workers or threads capped to the CPUs this process may use, with a one-line notice where it was."""
    from recourse_privacy.processes import cap_to_cpus

    if n is None:
        return None
    n, notice = cap_to_cpus(n, option)
    if notice:
        from rich.console import Console

        Console(stderr=True).print(f"note: {notice}", style="dim", highlight=False)
    return n


def _fail(err: Exception | str, code: int = 2) -> None:
    import sys

    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    if _debug() and sys.exc_info()[0] is not None:
        import traceback

        console.print(escape(traceback.format_exc()), highlight=False, soft_wrap=True)
    console.print(f"[bold red]Error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


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


def _columns(items: list[str] | None, option: str) -> tuple[str, ...]:
    """Repeated and comma-separated column names, in order; given but empty is an error naming the option."""
    out = tuple(c.strip() for item in items or [] for c in item.split(",") if c.strip())
    if items and not out:
        raise InvalidInputError(f"{option} is empty: give at least one column name (comma-separated)")
    return out


def _bounds(items: list[str] | None) -> dict[str, tuple[float, float]]:
    """``COL=LO:HI`` options as column -> (lo, hi)."""
    out = {}
    for item in items or []:
        col, sep, rng = item.partition("=")
        lo, colon, hi = rng.partition(":")
        try:
            if not sep or not col or not colon:
                raise ValueError
            out[col.strip()] = (float(lo), float(hi))
        except ValueError:
            raise InvalidInputError(f"--bounds expects COL=LO:HI with two numbers; got {item!r}") from None
    return out


def _user_inputs(options: dict) -> dict:
    """The AuditConfig fields of the shared data and model options (the model file loaded, checked).

    ``options``: the command's parameters (its ``locals()``), the shared ones among them.
    """
    data, target, positive_label = options["data"], options["target"], options["positive_label"]
    categorical, immutable, increasing = options["categorical"], options["immutable"], options["increasing"]
    bounds, model, model_file = options["bounds"], options["model"], options["model_file"]
    trust, trust_pickle = options["trust"], options["trust_pickle"]
    _refuse_inapplicable(options)
    out = {
        "data": str(data) if data else None,
        "target": target,
        "positive_label": positive_label,
        "categorical": _columns(categorical, "--categorical"),
        "immutable": _columns(immutable, "--immutable"),
        "increasing": _columns(increasing, "--increasing"),
        "bounds": _bounds(bounds),
        "model": model,
    }
    if model_file is not None:
        if model != "logistic":
            raise InvalidInputError(f"pass either --model {model} or --model-file, not both")
        from recourse_privacy.models.files import load_model_file

        out["model"] = load_model_file(model_file, tuple(trust or ()), trust_pickle=trust_pickle)
    elif trust or trust_pickle:
        raise InvalidInputError("--trust and --trust-pickle apply to --model-file")
    return out


def _deployed_inputs(data: Path | None, members: str | None, train: Path | None, holdout: Path | None) -> dict:
    """The as-deployed options as AuditConfig fields: ``--members COL`` or ``--train-data A --holdout-data B``."""
    if (train is None) != (holdout is None):
        raise InvalidInputError(
            "--train-data and --holdout-data go together (the rows that trained the model, the rest)"
        )
    if train is None:
        return {"members": members} if members else {}
    if data is not None or members:
        raise InvalidInputError("--train-data/--holdout-data replace --data and --members: pass one or the other")
    return {"data": str(train), "holdout": str(holdout)}


@_command()
def audit(
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
    members: str | None = typer.Option(
        None,
        "--members",
        help="as-deployed audit: the column of --data saying per row (1/0, true/false) whether it trained the "
        "--model-file instance. Without it the audit answers 'this recipe, re-trained' (a fresh clone trained on "
        "members it draws); with it, or --train-data/--holdout-data, 'this deployed model': the fitted instance as "
        "loaded, never refitted, against its real training rows",
    ),
    train_data: Path | None = typer.Option(
        None, "--train-data", help="as-deployed audit: the rows that trained --model-file (with --holdout-data)"
    ),
    holdout_data: Path | None = typer.Option(
        None, "--holdout-data", help="as-deployed audit: rows --model-file never trained on (with --train-data)"
    ),
    group: list[str] | None = typer.Option(
        None, "--group", help="a column whose values' exposure is measured apart (repeatable; groups.csv)"
    ),
    data_dir: Path | None = typer.Option(
        None, help="directory of the real datasets (else $RECOURSE_PRIVACY_DATA, else a download cache)"
    ),
    n_features: int = typer.Option(1000, help="number of features of the synthetic data"),
    model: str = typer.Option("logistic", help=f"a registered model: {_names('model')}"),
    recourse: str = typer.Option(
        "linear",
        help=f"a registered recourse method: {_names('recourse')} "
        "(`recourse-privacy list` says which model each needs)",
    ),
    attacks: str = typer.Option(
        "cfd,cfd-lrt,loss,loss-lrt,random", help=f"comma-separated registered attacks: {_names('attack')}"
    ),
    shadow_models: int = typer.Option(10, help="shadow models of the adversary (LRT attacks)"),
    shadow_fraction: float = typer.Option(0.5, help="share of the adversary's pool each shadow model trains on"),
    n_members: int = typer.Option(
        2000, help="owner's training set size; the non-member and adversary pools default to the same size"
    ),
    n_nonmembers: int | None = typer.Option(None, help="non-member pool size (default: --n-members)"),
    n_adversary: int | None = typer.Option(
        None, help="adversary's pool size (default: twice --n-members, or every row left)"
    ),
    distance: str = typer.Option("l1", help="cost c(x, x') the attacks read: l1 (Pawelczyk et al. 2023) or l2"),
    variance: str = typer.Option("per-example", help="LRT variance: per-example or global"),
    center: str = typer.Option("mean", help="LRT center: mean (MLE, Algorithm 1) or median"),
    cdf: str = typer.Option("normal", help="LRT score: normal or t (Student-t) CDF"),
    rmia_a: float | None = typer.Option(
        None,
        help="RMIA's offline scaling a in [0, 1] (Zarifzadeh et al. 2024; default: chosen on the adversary's "
        "shadow game, never on the targets)",
    ),
    rmia_gamma: float = typer.Option(1.0, help="RMIA's likelihood-ratio threshold gamma against population points"),
    rmia_population: int = typer.Option(
        500, help="RMIA's population points z, drawn from the adversary's pool (their recourse queries are counted)"
    ),
    threats: str = typer.Option(
        "membership",
        help=f"comma-separated threats to audit, or all: {_names('threat')} (membership, the game, is always played)",
    ),
    query_budgets: str = typer.Option(
        "20,50,100,200,400,1000",
        help="extraction: the adversary's numbers of recourse queries (each a decision and a counterfactual); "
        f"every registered surrogate is trained on them: {_names('surrogate')}",
    ),
    extraction_repeats: int = typer.Option(5, help="extraction: repeats with fresh queries per budget (intervals)"),
    sensitive: str | None = typer.Option(
        None, help="attribute threat: the column the adversary infers (release: Anonymeter's inference risk)"
    ),
    release_size: int = typer.Option(
        1000,
        help="release threat: rejected applicants from outside the game whose counterfactuals the owner publishes; "
        f"the released-set attacks: {_names('release-attack')}",
    ),
    release_with_factuals: bool = typer.Option(
        False, help="release threat: publish the (factual, counterfactual) pairs, not the counterfactuals alone"
    ),
    actionable: bool = typer.Option(False, help="apply the dataset's actionability constraints to recourse"),
    normalize_rows: bool = typer.Option(False, help="scale every row to unit L2 norm (Huang et al. 2023)"),
    data_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the data (synthetic: class_sep, flip_y)"),
    model_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the model (epochs, batch_size, lr, C, ...)"),
    recourse_param: list[str] | None = typer.Option(
        None, help="KEY=VALUE for the recourse method (lam, lr, max_iter, ...)"
    ),
    defense: str = typer.Option(
        "none",
        help=f"a registered defense: {_names('defense')} (dpm: the model trained "
        "with DP, logistic -> diffprivlib, needs --normalize-rows; mlp* -> Opacus DP-SGD; "
        "laplace: plain Laplace Recourse, not DP; dpm-laplace: LR over a DP model)",
    ),
    recourse_fit: str = typer.Option(
        "members",
        help="data a fitted recourse method (face, cchvae, revise, dice, "
        "gs) learns from: members, or adversary (the adversary's pool: needed under dpm)",
    ),
    epsilon: float | None = typer.Option(None, help="DP epsilon: the model's (dpm) or per recourse query (laplace)"),
    seed: int = typer.Option(0, help="seed of every random step"),
    n_jobs: int = typer.Option(1, help="parallel shadow-model trainings (joblib processes)"),
    device: str = typer.Option("auto", help=_DEVICE_HELP),
    out: Path = typer.Option(Path("audit-results"), help="output directory", parser=_out_path),
    overwrite: bool = _OVERWRITE,
    cache_dir: str | None = typer.Option(
        None,
        help="shared cache of trained models and recourse (off: none; default $RECOURSE_PRIVACY_CACHE, "
        "else the user cache; `recourse-privacy cache info`)",
    ),
) -> None:
    """Play the recourse membership-inference game and report every attack."""
    from rich.console import Console

    from recourse_privacy.audit import AuditConfig, run_audit
    from recourse_privacy.cache import open_cache

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    try:
        config = AuditConfig(
            dataset=dataset,
            **{**_user_inputs(locals()), **_deployed_inputs(data, members, train_data, holdout_data)},
            groups=_columns(group, "--group"),
            data_dir=str(data_dir) if data_dir else None,
            n_features=n_features,
            recourse=recourse,
            attacks=_name_list(attacks, "--attacks"),
            shadow_models=shadow_models,
            shadow_fraction=shadow_fraction,
            n_members=n_members,
            n_nonmembers=n_nonmembers,
            n_adversary=n_adversary,
            distance=distance,
            variance=variance,
            center=center,
            cdf=cdf,
            rmia_a=rmia_a,
            rmia_gamma=rmia_gamma,
            rmia_population=rmia_population,
            **_threat_options(threats, query_budgets, extraction_repeats, sensitive),
            **_release_options(threats, release_size, release_with_factuals),
            actionable=actionable,
            normalize_rows=normalize_rows,
            data_params=_parse_params(data_param, "--data-param"),
            model_params=_parse_params(model_param, "--model-param"),
            recourse_params=_parse_params(recourse_param, "--recourse-param"),
            seed=seed,
            n_jobs=_capped(n_jobs, "--n-jobs"),
            device=device,
            defense=defense,
            epsilon=epsilon,
            recourse_fit=recourse_fit,
        ).validate()
        artifacts = open_cache(cache_dir)
        claim = claim_output_dir(out, "audit", overwrite)
    except RecoursePrivacyError as err:
        _fail(err)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description:<14}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            result = run_audit(config, out, progress=progress, cache=artifacts or "off")
            claim.finish()
        except RecoursePrivacyError as err:
            bar.stop()
            _fail(err)
    _print_summary(console, result)
    _print_exposure(console, result)
    if artifacts is not None:
        artifacts.write_last_run(f"audit --out {out}", artifacts.stats_dict())
        console.print(
            f"artifact cache {artifacts.root}: {_hit_text(artifacts.stats_dict())}", style="dim", highlight=False
        )


def _release_options(threats: str, release_size: int, release_with_factuals: bool) -> dict:
    """The AuditConfig fields of the release threat; --release-size without the threat is an error."""
    names = _name_list(threats, "--threats")
    if "release_size" in _given_options() and not {"release", "all"} & set(names):
        raise InvalidInputError(
            "--release-size applies to the release threat: add --threats release (or all), or drop it"
        )
    return {"release_size": release_size, "release_with_factuals": release_with_factuals}


def _threat_options(threats: str, query_budgets: str, extraction_repeats: int, sensitive: str | None) -> dict:
    """The AuditConfig fields of --threats and its options; an extraction option without the threat is an error."""
    names = _name_list(threats, "--threats")
    extracting = bool({"extraction", "attribute", "all"} & set(names))
    for option in ("query_budgets", "extraction_repeats"):
        if option in _given_options() and not extracting:
            raise InvalidInputError(
                f"--{option.replace('_', '-')} applies to the extraction and attribute threats: add --threats "
                "extraction (or all), or drop it"
            )
    return {
        "threats": names,
        "query_budgets": tuple(_numbers(query_budgets, int, "--query-budgets")),
        "extraction_repeats": extraction_repeats,
        "sensitive": sensitive,
    }


def _print_threats(console, report) -> None:
    """The extraction table, the attribute result and what recourse adds over labels (audit --threats)."""
    from rich.table import Table

    if report is None:
        return
    ex = report.extraction
    if ex is not None:
        table = Table(title="Model extraction: fidelity on held-out applicants (95% interval over repeats)")
        for col in ("queries", *dict.fromkeys(p.attack for p in ex.points)):
            table.add_column(col, justify="right")
        for q in ex.budgets:
            cells = [
                f"{p.fidelity:.3f} [{p.fidelity_low:.3f},\u00a0{p.fidelity_high:.3f}]"
                for p in ex.points
                if p.queries == q
            ]
            table.add_row(str(q), *cells)
        console.print(table)
        console.print(ex.sentence(), highlight=False, markup=False)
    if report.attribute is not None:
        console.print(report.attribute.sentence(), highlight=False, markup=False)
    over = report.recourse_over_labels()
    if over:
        console.print(over, highlight=False, markup=False)
    if report.release is not None:
        from recourse_privacy.report.release import release_table

        console.print(release_table(report.release))
        if report.release.warning():
            console.print(f"warning: {report.release.warning()}", style="bold yellow", highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", style="dim", highlight=False, markup=False)


def _hit_text(stats: dict) -> str:
    """``owner model 1/1, shadow models 10/10 ...``: hits / lookups per role of the artifact cache."""
    parts = [f"{role} {s['hits']}/{s['hits'] + s['misses']}" for role, s in stats.items()]
    return "hits/lookups " + (", ".join(parts) if parts else "none")


def _print_exposure(console, result) -> None:
    """Which question the audit answered, the members identified at low FPR, and the flagged groups."""
    console.print(f"question answered: [bold]{result.question}[/]", highlight=False)
    ex = result.exposure
    if ex is not None:
        found = [i for i in ex.identified if i.attack == ex.ranking_attack]
        counts = ", ".join(f"{i.n_identified} of {i.n_members} at FPR {i.fpr:g}" for i in found)
        rows = ", ".join(str(r.row) for r in ex.most_exposed)
        console.print(f"{ex.ranking_attack} identifies {counts}; most exposed members (rows): {rows}", highlight=False)
    flagged = [g for g in result.groups if g.flagged]
    for g in flagged:
        console.print(
            f"group {g.column}={g.value}: {g.attack} AUC {g.auc:.3f} above the rest's {g.auc_rest:.3f} "
            f"(Holm p {g.p_holm:.3g})",
            style="red",
            highlight=False,
        )


def _print_summary(console, result) -> None:
    from rich.table import Table

    cfg, model, rec = result.config, result.model, result.recourse
    console.print(
        f"\n[bold]{result.data.dataset}[/] | model {cfg.model_label} "
        f"(train acc {model.train_accuracy:.3f}, test acc {model.test_accuracy:.3f}) | "
        f"recourse {cfg.recourse} (validity {rec.validity:.3f}, "
        f"mean L1 {rec.mean_l1:.3g}, mean L2 {rec.mean_l2:.3g}) | "
        f"targets: {result.n_members} members, {result.n_nonmembers} non-members",
        highlight=False,
    )
    from recourse_privacy.report.dp_verdict import dp_bound_rows
    from recourse_privacy.report.verdict import verdict_of

    def ci(value: float, pair, spec: str) -> str:  # "0.62 [0.58, 0.66]"; the value alone without an interval
        lo, hi = pair if pair is not None else (float("nan"), float("nan"))
        return f"{value:{spec}}" + (f" [{lo:{spec}},\u00a0{hi:{spec}}]" if lo == lo and hi == hi else "")

    table = Table(title="Membership inference from recourse (95% intervals; TPR at FPR 0.1 / 0.01 / 0.001)")
    for col in ("attack", "AUC", "BA", "TPR@0.1", "TPR@0.01", "TPR@0.001", "direction"):
        left = col in ("attack", "direction")  # on a narrow terminal an interval folds below its value
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "attack", min_width=5)
    groups = {"score": "scores", "distance": "recourse", "none": "controls"}
    order = [*groups, *sorted({a.signal for a in result.attacks.values()} - set(groups))]
    for signal in order:  # one block per signal: what the scores leak, what recourse leaks, the controls
        block = [(n, a) for n, a in result.attacks.items() if a.signal == signal]
        if not block:
            continue
        table.add_row(f"[dim]{groups.get(signal, signal or 'unknown')}[/]")
        for name, a in block:
            cells = [
                ci(a.tpr_at_fpr[k], a.tpr_at_fpr_ci.get(k) if k == "0.01" else None, ".3f")
                + ("" if a.tpr_at_fpr_reliable[k] else "*")
                for k in ("0.1", "0.01", "0.001")
            ]
            fallback = " (paper's; shadow game null)" if a.conventions.get("direction_fallback") else ""
            table.add_row(
                f"  {name}", ci(a.auc, a.auc_ci, ".2f"), f"{a.balanced_accuracy:.3f}", *cells, a.direction + fallback
            )
        table.add_section()
    console.print(table)
    verdict = verdict_of(result)
    console.print(f"[bold]{verdict.headline}[/]", highlight=False)
    for finding in (verdict.scores, verdict.recourse, verdict.beyond):
        if finding is not None:
            console.print(f"  {finding.text}", highlight=False, markup=False)
    if verdict.detectable is not None:
        console.print(f"  {verdict.detectable.text}", highlight=False, markup=False, style="dim")
    dp = result.dp
    if dp is not None:
        console.print(
            f"DP defense {dp.defense} (model {model.name}): epsilon per query "
            f"{dp.epsilon_per_query:.4g}, total {dp.epsilon_total:.4g}; bounds on balanced accuracy:",
            highlight=False,
        )
        for bound in dp_bound_rows(dp):
            console.print(f"  {bound.text}", highlight=False, markup=False)
        if dp.verdict is not None:
            console.print(f"verdict: {dp.verdict.text}", style="red" if dp.verdict.exceeds else None, highlight=False)
        if dp.direction_attack is not None:
            da = dp.direction_attack
            console.print(
                f"warning: LR's counterfactuals reveal w's direction, which is not private: ranking the "
                f"targets along it gives AUC {da.auc:.4f}, BA {da.balanced_accuracy:.4f} (the "
                "baseline CFD attack, at any epsilon; docs/dp-defenses.md)",
                style="yellow",
                highlight=False,
            )
    _print_threats(console, getattr(result, "threats", None))
    if any(not r for a in result.attacks.values() for r in a.tpr_at_fpr_reliable.values()):
        console.print("* fewer non-members than 1/FPR: that TPR cannot be resolved at this FPR", style="dim")
    for w in result.warnings:
        console.print(f"warning: {w}", style="yellow", highlight=False)
    console.print(
        f"wrote {', '.join(Path(p).name for p in result.files.values())} to "
        f"{Path(result.files['metrics']).parent} in {result.timing_seconds['total']:.1f} s",
        highlight=False,
    )


@_command("list")
def list_command(
    kind: str | None = typer.Argument(
        None, help="attack, recourse, model, defense, dataset, mechanism (DP audits) or reproduction (default: all)"
    ),
) -> None:
    """List every registered attack, recourse method, model, defense and dataset, with what each needs.

    Entries of installed plugins (the ``recourse_privacy.plugins`` entry-point group) are included.
    """
    from rich.table import Table

    from recourse_privacy import catalog

    console = _wide_console()
    kinds = list(catalog.REGISTRIES) if kind is None else [catalog.check_kind(kind)]
    for k in kinds:
        table = Table(title={"recourse": "recourse methods"}.get(k, f"{k}s"), title_justify="left")
        for col in ("name", "needs", "description", "module"):
            table.add_column(col, overflow="fold")
        for row in catalog.describe(k):
            table.add_row(row.name, row.needs, row.description, row.module)
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

    from recourse_privacy.data import DATASET_DESCRIPTIONS, DATASETS, resolve_data_dir
    from recourse_privacy.data.domain import DOMAINS

    if name is not None:
        domain = DOMAINS.get(DATASETS.check(name))
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


@_command()
def tradeoff(
    dataset: str = typer.Option("synthetic", help="adult, heloc, compas, diabetes, synthetic, breast_cancer, digits"),
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
    data_dir: Path | None = typer.Option(None, help="directory of the real datasets"),
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
    seed: int = typer.Option(0, help="seed of every random step"),
    n_jobs: int = typer.Option(1, help="parallel shadow-model trainings"),
    device: str = typer.Option("auto", help=_DEVICE_HELP),
    out: Path = typer.Option(
        Path("tradeoff-results"), help="output directory (one sub-directory per setting)", parser=_out_path
    ),
    overwrite: bool = _OVERWRITE,
) -> None:
    """Baseline, DPM and Laplace Recourse over epsilon (Huang et al. 2023): a table and plots of attacks and accuracy."""
    from rich.console import Console
    from rich.table import Table

    from recourse_privacy.experiments.tradeoff import run_tradeoff, tradeoff_base_config, tradeoff_settings

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 170))
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
    started: set[str] = set()

    def progress(label: str, done: int, total: int) -> None:
        if label not in started:
            started.add(label)
            console.print(f"[{done + 1}/{total}] {label}", highlight=False)

    try:
        result = run_tradeoff(base, out, epsilons=eps, progress=progress)
        claim.finish()
    except RecoursePrivacyError as err:
        _fail(err)
    atk = [a for a in base.attacks]
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


def _wide_console():
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 180))


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
    cache_dir: str | None = typer.Option(
        None,
        help="shared cache of trained models and recourse (off: none; default $RECOURSE_PRIVACY_CACHE, "
        "else the user cache; `recourse-privacy cache info`)",
    ),
) -> None:
    """Run every unfinished cell of an experiment spec; a rerun skips the finished cells."""
    from recourse_privacy.experiments.spec import load_spec

    console = _wide_console()
    try:
        loaded = load_spec(spec)
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


@_command("reproduce")
def reproduce_command(
    name: str = typer.Argument(
        ...,
        help=f"a shipped reproduction: {_names('reproduction')} (`recourse-privacy list reproduction` describes each)",
    ),
    out: Path | None = typer.Option(None, help="results store (default: ./<name>-results)", parser=_out_path),
    overwrite: bool = _OVERWRITE,
    shadow_models: int | None = typer.Option(None, help="override the spec's number of shadow models"),
    seeds: str | None = typer.Option(None, help="comma-separated seeds instead of the spec's"),
    backend: str = typer.Option("local", help="local (joblib processes) or ray"),
    address: str | None = typer.Option(None, help="Ray cluster address (--backend ray)"),
    n_jobs: int | None = typer.Option(None, help="cells in parallel (local default: the number of cores)"),
    threads_per_cell: int = typer.Option(1, help="torch/BLAS threads of each cell"),
    device: str = typer.Option("auto", help=_DEVICE_HELP),
    cache_dir: str | None = typer.Option(
        None,
        help="shared cache of trained models and recourse (off: none; default $RECOURSE_PRIVACY_CACHE, "
        "else the user cache; `recourse-privacy cache info`)",
    ),
) -> None:
    """Run a shipped reproduction and print the paper's figures beside ours, with the known differences."""
    from recourse_privacy.experiments.reproductions import REPRODUCTIONS
    from recourse_privacy.experiments.spec import list_reproductions, load_spec
    from recourse_privacy.models.device import use_device

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
    if name not in list_reproductions():
        raise UnknownNameError(f"unknown reproduction {name!r}; shipped: {', '.join(REPRODUCTIONS.names())}")
    spec = load_spec(name)
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


cache_app = typer.Typer(
    no_args_is_help=True,
    help="The shared cache of trained models and recourse (reused by audits and grid cells).",
)
app.add_typer(cache_app, name="cache")

_CACHE_ARG = typer.Option(None, help="the cache directory (default $RECOURSE_PRIVACY_CACHE, else the user cache)")


def _cache_or_fail(cache_dir: str | None):
    from recourse_privacy.cache import ArtifactCache, resolve_cache_dir

    path = resolve_cache_dir(cache_dir)
    if path is None:
        raise InvalidInputError("the artifact cache is off (--cache-dir / $RECOURSE_PRIVACY_CACHE); name a directory")
    return ArtifactCache(path)


@_command("info", on=cache_app)
def cache_info_command(cache_dir: str | None = _CACHE_ARG) -> None:
    """Where the cache is, its entries and size, and the hit rates of the last run that used it."""
    from rich.console import Console

    console = Console()
    info = _cache_or_fail(cache_dir).info()
    entries = ", ".join(f"{n} {kind}" for kind, n in info.entries.items()) or "no entries"
    console.print(f"{info.root}: {entries}; {info.bytes / 2**20:,.1f} MiB", highlight=False)
    last = info.last_run
    if last is None:
        console.print("no run recorded yet", style="dim")
        return
    console.print(f"last run: {last.get('what')} at {last.get('finished_at')}", highlight=False)
    for role, s in (last.get("stats") or {}).items():
        rate = "-" if s.get("hit_rate") is None else f"{s['hit_rate']:.0%}"
        console.print(
            f"  {role}: {s['hits']} hits, {s['misses']} misses ({rate}), {s.get('corrupt', 0)} corrupt, "
            f"{s.get('compute_seconds', 0):.1f} s computing, {s.get('load_seconds', 0):.1f} s loading",
            highlight=False,
        )


@_command("clear", on=cache_app)
def cache_clear_command(cache_dir: str | None = _CACHE_ARG) -> None:
    """Remove every entry of the cache (trained models, recourse); downloaded datasets are kept."""
    cache = _cache_or_fail(cache_dir)
    n, size = cache.clear()
    typer.echo(f"removed {n} files ({size / 2**20:,.1f} MiB) from {cache.root}")


@_command("audit-dp")
def audit_dp_command(
    mechanism: str = typer.Option(
        "trained-lr",
        help=f"a registered DP-audit mechanism: {_names('mechanism')} (trained-*: trained neighbours, the whole "
        "release; the others: scalar audits; `recourse-privacy list mechanism` describes each)",
    ),
    epsilon: float = typer.Option(1.0, help="the epsilon the mechanism claims"),
    trials: int = typer.Option(
        20000,
        help="runs per neighbouring input (half choose the test, half measure it); dpm-logistic trains a model per run, about 10 ms each",
    ),
    seed: int = typer.Option(0, help="seed of every run"),
    alpha: float = typer.Option(0.05, help="1 - confidence of the Clopper-Pearson bounds"),
    param: list[str] | None = typer.Option(
        None,
        help="KEY=VALUE for the experiment (laplace: release=probability; "
        "dpm-logistic: n_rows, n_features, statistic=cfd, C, ...)",
    ),
    one_run: int = typer.Option(
        0,
        help="trained-* only: also run the one-run audit of Steinke, Nasr and Jagielski "
        "(2023) with this many canaries (0: no)",
    ),
    out: Path | None = typer.Option(
        None, help="also write the audit as JSON to this file (an existing one only with --overwrite)", parser=_out_path
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace the file --out where it exists"),
    scores: Path | None = typer.Option(
        None,
        help="audit your own training run instead: a CSV with columns score (higher = more likely a member) and "
        "member (1 = the canary was included, 0 = not); four bounds (clopper_pearson, one_run, one_run_fdp, gdp)",
    ),
    guesses: int | None = typer.Option(
        None,
        help="--scores: the one-run bounds guess the K highest scores in and the K lowest out "
        "(default: the best K of floor(m/2), floor(m/4), ..., 1, Bonferroni-corrected)",
    ),
    delta: float | None = typer.Option(None, help="--scores: the delta of the (eps, delta) bounds (default 1e-5)"),
) -> None:
    """Empirical epsilon audit: a lower bound on a DP mechanism's epsilon (Jagielski et al. 2020).

    Exit code 0 whatever the verdict (it is a measurement); 2 on bad input.
    """
    from rich.console import Console
    from rich.table import Table

    from recourse_privacy.dp_audit import make_experiment

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 150))
    if out is not None:
        if out.is_dir() or str(out) in ("/dev/null",) or (out.exists() and not out.is_file()):
            _fail(
                InvalidInputError(
                    f"--out {str(out)!r} must be a file to write the audit's JSON into, not a directory or a device"
                )
            )
        from recourse_privacy.output_dir import check_output_file

        check_output_file(out, overwrite=overwrite)
    if scores is not None:
        if one_run or param:
            _fail(InvalidInputError("--one-run and --param apply to the built-in mechanisms, not to --scores"))
        _audit_dp_scores(scores, guesses, 1e-5 if delta is None else delta, alpha, seed, out, console)
        return
    if guesses is not None or delta is not None:
        _fail(InvalidInputError("--guesses and --delta apply to --scores (a mechanism's delta is part of its claim)"))
    from recourse_privacy.validation import check_interval, check_positive_int, check_seed

    check_interval(epsilon, "--epsilon", 0, 1e4, closed="right")  # beyond, every DP claim is vacuous
    check_interval(alpha, "--alpha", 0, 1)
    check_positive_int(trials, "--trials", minimum=4)
    check_seed(seed, "--seed")
    if one_run != 0 and not 4 <= one_run <= 10**6:
        raise InvalidInputError(f"--one-run must be 0 (none) or a number of canaries in [4, 1_000_000]; got {one_run}")
    try:
        experiment = make_experiment(mechanism, epsilon, **_parse_params(param, "--param"))
        from recourse_privacy.dp_audit import RELEASES

        if one_run and mechanism.removeprefix("trained-") not in RELEASES:
            raise InvalidInputError(
                f"--one-run needs one of {', '.join('trained-' + r for r in RELEASES)} (the releases with a one-run "
                f"audit); {mechanism} has none"
            )
        with Console(stderr=True).status(f"auditing {mechanism}: {trials} runs on each of two neighbours"):
            result = experiment.audit(n_trials=trials, alpha=alpha, random_state=seed)
            one = one_fdp = None
            if one_run:
                from recourse_privacy.dp_audit import one_run_audit

                one = one_run_audit(
                    mechanism.removeprefix("trained-"), epsilon, n_canaries=one_run, beta=alpha, random_state=seed
                )
    except RecoursePrivacyError as err:
        _fail(err)
    table = Table(title=f"Empirical epsilon audit ({1 - alpha:.0%} confidence lower bound)")
    for col in ("mechanism", "claimed eps", "audited eps >=", "FPR", "FNR", "trials", "verdict"):
        table.add_column(col, justify="left" if col in ("mechanism", "verdict") else "right", no_wrap=True)
    table.add_row(
        mechanism,
        f"{result.claimed_epsilon:.4g}",
        f"{result.epsilon_lower_bound:.4f}",
        f"{result.fpr:.5f} [{result.fpr_ci[0]:.5f}, {result.fpr_ci[1]:.5f}]",
        f"{result.fnr:.5f} [{result.fnr_ci[0]:.5f}, {result.fnr_ci[1]:.5f}]",
        f"{result.n_trials}",
        f"[bold red]{result.verdict}[/]" if result.violates_claim else result.verdict,
    )
    console.print(table)
    console.print(
        f"neighbours: {result.neighbours}\ntest: {result.test} (chosen on {result.n_selection} runs per "
        f"neighbour, measured on {result.n_measurement} others); {result.seconds:.1f} s",
        highlight=False,
    )
    if one is not None:
        console.print(
            f"one-run audit (Steinke, Nasr and Jagielski 2023): {one.n_canaries} canaries "
            f"({one.n_included} included), {one.n_correct} of {one.n_guesses} guesses correct: epsilon >= "
            f"{one.epsilon_lower_bound:.4f} at confidence {1 - one.beta:g}, one training run: {one.verdict}",
            highlight=False,
        )
        from recourse_privacy.dp_audit.fdp import one_run_fdp_mu

        one_fdp = one_run_fdp_mu(one.n_canaries, one.n_guesses, one.n_correct, alpha=one.beta)
        console.print(
            f"one-run f-DP audit (Mahloujifar, Melis and Chaudhuri 2024) on the same guesses: Gaussian DP mu >= "
            f"{one_fdp:.4f} at confidence {1 - one.beta:g} (refutes any mu-GDP claim below it; an epsilon only "
            "for a Gaussian trade-off curve, which a pure epsilon-DP release need not have)",
            highlight=False,
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            strict_json.dumps(
                {
                    "command": "audit-dp",
                    "params": _parse_params(param, "--param"),
                    "seed": seed,
                    **result.to_dict(),
                    "one_run": one.to_dict() if one else None,
                    "one_run_fdp_mu": one_fdp,
                },
                indent=2,
            )
        )
        console.print(f"wrote {out}", highlight=False)


def _audit_dp_scores(path: Path, guesses, delta, alpha, seed, out, console) -> None:
    """audit-dp --scores: the four bounds of dp_audit.canary_scores on the user's canary scores."""
    from rich.table import Table

    from recourse_privacy.dp_audit.canary_scores import audit_scores, read_scores_csv

    try:
        result = audit_scores(*read_scores_csv(path), guesses=guesses, delta=delta, alpha=alpha, random_state=seed)
    except RecoursePrivacyError as err:
        _fail(err)
    table = Table(title=f"Epsilon lower bounds from canary scores ({1 - alpha:.0%} confidence each, delta {delta:g})")
    for col in ("method", "eps >=", "mu >=", "test", "reference"):
        table.add_column(col, justify="right" if col in ("eps >=", "mu >=") else "left")
    for b in result.bounds:
        d = b.details
        test = d.get("test") or f"K = {d['K']}: {d['n_correct']} of {d['n_guesses']} guesses correct"
        eps = "n/a (delta 0)" if b.epsilon_lower_bound is None else f"{b.epsilon_lower_bound:.4f}"
        mu = "" if b.mu_lower_bound is None else f"{b.mu_lower_bound:.4f}"
        table.add_row(b.method, eps, mu, test, b.reference.split(",")[0])
    console.print(table)
    console.print(
        f"{result.n_canaries} canaries ({result.n_members} members); assumptions per method in --out's JSON "
        "and docs/dp-audit.md; a lower bound above a claimed epsilon refutes it, below it proves nothing",
        highlight=False,
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(strict_json.dumps({"command": "audit-dp", "scores": str(path), **result.to_dict()}, indent=2))
        console.print(f"wrote {out}", highlight=False)


@_command("recourse")
def recourse_command(
    dataset: str = typer.Option("adult", help="adult, heloc, compas, diabetes, synthetic, breast_cancer, digits"),
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
    model: str = typer.Option("mlp", help="logistic, mlp, mlp3-100, mlp3-333, mlp3-1000"),
    methods: str = typer.Option(
        "scfe,cadex,dice,face",
        help="comma-separated: linear, scfe, gs, cchvae, revise, "
        "cadex, dice, face, ... (`all` for every registered method)",
    ),
    n_points: int = typer.Option(1000, help="query points: held-out rows the model rejects"),
    n_train: int = typer.Option(5000, help="rows that train the model (and that data-driven methods fit on)"),
    actionable: bool = typer.Option(True, help="apply the dataset's immutable / increase-only features and ranges"),
    data_dir: Path | None = typer.Option(None, help="directory of the real datasets"),
    model_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the model (epochs, lr, ...)"),
    method_param: list[str] | None = typer.Option(
        None,
        help="METHOD.KEY=VALUE, e.g. face.n_neighbors=20. Private defaults: laplace.epsilon=1.0 per query, "
        "dpc.epsilon=1.0 with layers sized to the features, privrecourse.epsilon=1.0; bounds: the dataset's "
        "documented public domain (`recourse-privacy datasets NAME`)",
    ),
    seed: int = typer.Option(0, help="seed of every random step"),
    device: str = typer.Option("auto", help=_DEVICE_HELP),
    out: Path = typer.Option(Path("recourse-quality"), help="output directory", parser=_out_path),
    overwrite: bool = _OVERWRITE,
) -> None:
    """Recourse quality per method (CARLA's metrics, the path metrics of Pentyala et al. 2023): a table, JSON, CSV and a plot."""
    from rich.console import Console
    from rich.table import Table

    from recourse_privacy.experiments.quality import METRICS, run_quality
    from recourse_privacy.models.device import use_device
    from recourse_privacy.recourse import RECOURSE_METHODS
    from recourse_privacy.validation import check_seed

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 170))
    check_seed(seed, "--seed")
    check_output_dir(out)
    names = list(RECOURSE_METHODS) if methods.strip() == "all" else list(_name_list(methods, "--methods"))
    per_method: dict[str, dict] = {}
    for key, value in _parse_params(method_param, "--method-param").items():
        name, dot, param = key.partition(".")
        if not dot or not param:
            _fail(InvalidInputError(f"--method-param expects METHOD.KEY=VALUE; got {key!r}"))
        per_method.setdefault(name, {})[param] = value
    inputs = _user_inputs({**locals(), "model": "logistic" if model_file is not None and model == "mlp" else model})
    if schema is not None:
        from recourse_privacy.data.domain import load_schema, schema_inputs

        if data is None:
            raise InvalidInputError("--schema describes your own --data; a registered dataset carries its own metadata")
        inputs.update(schema_inputs(load_schema(schema), inputs))
    from recourse_privacy.audit.user_inputs import describe_model

    model_label = model if model_file is None else describe_model(inputs["model"])
    if isinstance(inputs["model"], str):
        _check_params_before_work(model, _parse_params(model_param, "--model-param"), per_method)
    else:
        _check_params_before_work(None, {}, per_method)
    dataset_label = str(inputs["data"] and Path(inputs["data"]).name or dataset)
    _check_device(device)
    try:
        for name in names:  # unknown names are refused before the directory is claimed
            RECOURSE_METHODS.check(name)
        claim = claim_output_dir(out, "recourse", overwrite)
        with console.status("measuring recourse quality") as status, use_device(device):

            def progress(stage: str, done: int, total: int) -> None:
                if done < total:
                    status.update(f"{stage} ...")

            result = run_quality(
                dataset,
                inputs.pop("model"),
                names,
                n_points=n_points,
                seed=seed,
                out_dir=out,
                data_dir=data_dir,
                actionable=actionable,
                n_train=n_train,
                model_params=_parse_params(model_param, "--model-param"),
                method_params=per_method,
                progress=progress,
                bounds_from_data=bounds_from_data,
                **inputs,
            )
        claim.finish()
    except RecoursePrivacyError as err:
        _fail(err)
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


from recourse_privacy.service.cli import register as _register_service  # noqa: E402 - publish, keys, serve

_register_service(app, _command)


def _on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # the one error path stops the workers and exits 130


def main() -> None:
    """Console entry point."""
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    app()


if __name__ == "__main__":
    main()
