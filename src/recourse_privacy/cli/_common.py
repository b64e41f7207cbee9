"""Helpers shared by the commands: the one error path (``_command``), option parsing, the shared data inputs.

Nothing heavy is imported here: torch, sklearn and rich load inside the functions that need them."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import typer

from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError


def check_output_dir(path, name: str = "--out"):
    """:func:`recourse_privacy.validation.check_output_dir`, imported when used (keeps --help fast)."""
    from recourse_privacy.validation import check_output_dir as check

    return check(path, name)


def claim_output_dir(path, command: str, overwrite: bool, *, resumable: bool = False):
    """:func:`recourse_privacy.output_dir.claim_output_dir`, imported when used (keeps --help fast)."""
    from recourse_privacy.output_dir import claim_output_dir as claim

    return claim(path, command, overwrite=overwrite, resumable=resumable)


_STATE = {"debug": False}


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


#: the main app's commands defined with ``_command``: function -> (args, kwargs) of ``app.command``
_COMMANDS: dict = {}


def register_commands(app: typer.Typer, commands: list) -> None:
    """Add ``commands`` (functions defined with ``_command`` and no ``on``) to ``app``, in the order of --help."""
    missing = [fn.__name__ for fn in _COMMANDS if fn not in commands]
    if missing:  # a command module's new command must be listed in recourse_privacy.cli
        raise RuntimeError(f"commands defined but not registered in recourse_privacy.cli: {', '.join(missing)}")
    for fn in commands:
        args, kwargs = _COMMANDS[fn]
        app.command(*args, **kwargs)(fn)


def _command(*args, on=None, **kwargs):
    """``app.command`` (or ``on.command``, a sub-app's) whose function has the CLI's one error path.

    Without ``on`` the command is kept for the package's :func:`register_commands`, which adds it
    to the main app (``recourse_privacy.cli.app``); ``recourse_privacy.cli`` imports every command module.

    A package error (bad input) prints one line and exits 2; an interrupt (Ctrl-C, SIGTERM)
    stops the worker processes and exits 130; a file-system error prints one line and exits 2;
    anything else is a bug: one line saying so, exit 1. ``--debug`` adds the traceback.
    """

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*a, **k):
            try:
                _check_utf8(fn, k)
                return fn(*a, **k)
            except _exits():
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

        if on is None:  # a command of the main app: registered by the package, in the order of --help
            _COMMANDS[wrapped] = (args, kwargs)
            return wrapped
        return on.command(*args, **kwargs)(wrapped)

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


def _check_device(device: str) -> str:
    """``--device``, checked before any work: a known name, and CUDA present where ``cuda`` is asked for."""
    from recourse_privacy.models.device import check_device, resolve_device

    if check_device(device, "--device") == "cuda":
        resolve_device(device, "--device")
    return device


def _names(kind: str, having: str | None = None) -> str:
    """The registered names of ``kind`` (attack, recourse, model, defense, dataset), for help texts.

    ``having``: only the entries whose object has this attribute (``fit``: the recourse methods that learn from data).
    """
    from recourse_privacy import catalog

    try:
        registry = catalog.REGISTRIES[kind]
        return ", ".join(n for n in registry if having is None or hasattr(registry.get(n).obj, having))
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


def _exits() -> tuple[type[BaseException], ...]:
    """The exceptions that carry typer's own exit: typer >= 0.17 runs on its own copy of click and no longer
    installs click, which is then not there to import (click's too where it is)."""
    out: list[type[BaseException]] = [typer.Exit]
    try:
        from typer._click.exceptions import ClickException

        out.append(ClickException)
    except ImportError:
        pass
    try:
        import click

        out += [click.exceptions.Exit, click.exceptions.ClickException, click.exceptions.Abort]
    except ImportError:
        pass
    return tuple(out)


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
    if options.get("decision_threshold") is not None:  # a command that takes it (audit, recourse): your model's cutoff
        out["decision_threshold"] = options["decision_threshold"]
    if model_file is not None:
        if model != "logistic":
            raise InvalidInputError(f"pass either --model {model} or --model-file, not both")
        from recourse_privacy.models.files import load_model_file

        trusted = _columns(trust, "--trust")  # type names, repeated or comma-separated like the column options
        out["model"] = load_model_file(model_file, trusted, trust_pickle=trust_pickle)
    elif trust or trust_pickle:
        raise InvalidInputError("--trust and --trust-pickle apply to --model-file")
    return out


def _wide_console():
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 180))
