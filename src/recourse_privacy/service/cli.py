"""The ``publish``, ``keys add|list|revoke`` and ``serve`` commands, registered onto the main typer app.

``recourse_privacy.cli`` (the package) calls :func:`register` with its app and its ``_command``
decorator bound to that app (``cli/_common.py``: the CLI's one error path, a package error prints one
line and exits 2). Nothing heavy is imported
at registration: FastAPI and uvicorn only inside ``serve``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy.errors import InvalidInputError

__all__ = ["register"]


def _columns(items: list[str] | None) -> tuple[str, ...]:
    return tuple(c.strip() for item in items or [] for c in item.split(",") if c.strip())


def _bounds(items: list[str] | None) -> dict[str, tuple[float, float]]:
    import math

    out = {}
    for item in items or []:
        col, sep, rng = item.partition("=")
        lo, colon, hi = rng.partition(":")
        try:
            if not sep or not col.strip() or not colon:
                raise ValueError
            lo_f, hi_f = float(lo), float(hi)
        except ValueError:
            raise InvalidInputError(f"--bounds expects COL=LO:HI with two numbers; got {item!r}") from None
        if not (math.isfinite(lo_f) and math.isfinite(hi_f) and lo_f < hi_f):
            raise InvalidInputError(f"--bounds {item!r}: need finite LO < HI")
        out[col.strip()] = (lo_f, hi_f)
    return out


def _load_data(dataset, data_dir, data, target, positive_label, categorical, immutable, increasing):
    if data is not None:
        if not target:
            raise InvalidInputError("--data needs --target (the label column)")
        from recourse_privacy.data.tabular import load_tabular

        return load_tabular(
            data,
            target,
            categorical=_columns(categorical) or None,
            immutable=_columns(immutable),
            increasing=_columns(increasing),
            positive_label=positive_label,
        )
    if target or positive_label or categorical or immutable or increasing:
        raise InvalidInputError(
            "--target, --positive-label, --categorical, --immutable and --increasing go with --data"
        )
    from recourse_privacy.data import load_dataset

    return load_dataset(dataset, str(data_dir) if data_dir else None)


_DECISION_THRESHOLD = typer.Option(
    None,
    "--decision-threshold",
    help="with --model-file: approve from this probability of --positive-label (default: the cutoff the model "
    "states, e.g. a FixedThresholdClassifier's, else 0.5); the bundle serves recourse to it",
)
_SPARSE = typer.Option(
    None,
    "--sparse/--no-sparse",
    help="answers keep only the changes the model's acceptance needs, each other change set back to the applicant's "
    "value (default: on for privrecourse with its own DP model, whose answers are cluster centres; off with your "
    "--model-file, whose boundary they would follow, and for dpm and dpc; laplace refuses it)",
)
_MAY_BE_MISSING = typer.Option(
    None,
    "--may-be-missing",
    help="column(s) an applicant may leave empty (null) although the data have no gap there (public, as --bounds); "
    "a column with gaps in the data may be anyway",
)
_MODEL_FILE = typer.Option(
    None,
    "--model-file",
    help="your fitted classifier/Pipeline on the --data columns (.skops; laplace, privrecourse, dpc): served "
    "as its exact weights if its logit is affine in the one-hot/scaled columns; else, with --method privrecourse, "
    "as it is (gradient-boosted trees, a network: the bundle keeps the .skops file); laplace and dpc refuse it",
)


def publish_command(
    method: str = typer.Option(
        ..., "--method", help="privrecourse, dpm (DP model), laplace (Laplace Recourse), dpc (DPC prototypes)"
    ),
    epsilon: float = typer.Option(..., "--epsilon", help="the release's epsilon (laplace: per answer)"),
    delta: float = typer.Option(0.0, "--delta", help="the release's delta (privrecourse's nodes)"),
    out: Path = typer.Option(..., "--out", help="the bundle directory to write"),
    dataset: str = typer.Option("adult", "--dataset", help="a registered dataset (see `recourse-privacy datasets`)"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="directory of the real datasets"),
    data: Path | None = typer.Option(None, "--data", help="your own CSV/Parquet file instead of --dataset"),
    target: str | None = typer.Option(None, "--target", help="label column of --data"),
    positive_label: str | None = typer.Option(None, "--positive-label", help="the favourable value of --target"),
    categorical: list[str] | None = typer.Option(None, "--categorical", help="categorical column(s) of --data"),
    immutable: list[str] | None = typer.Option(None, "--immutable", help="column(s) recourse must not change"),
    increasing: list[str] | None = typer.Option(None, "--increasing", help="column(s) that may only increase"),
    bounds: list[str] | None = typer.Option(
        None,
        "--bounds",
        help="COL=LO:HI public bounds of a numeric column (repeatable); others are read from "
        "the data and the manifest says so",
    ),
    may_be_missing: list[str] | None = _MAY_BE_MISSING,
    model_file: Path | None = _MODEL_FILE,
    trust: list[str] | None = typer.Option(None, "--trust", help="a type in the .skops file you trust"),
    decision_threshold: float | None = _DECISION_THRESHOLD,
    sparse: bool | None = _SPARSE,
    n_clusters: int = typer.Option(100, "--n-clusters", min=2, max=100_000, help="privrecourse: graph nodes"),
    seed: int = typer.Option(0, "--seed", help="seed of the training (not of the served noise)"),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace an earlier bundle in --out (only its own files are removed)"
    ),
    check_rows: int = typer.Option(
        500,
        "--check-rows",
        min=0,
        help="answer this many rejected training rows with the new bundle and print the share of valid answers and "
        "their cost (for you; not written into the bundle); 0 skips",
    ),
) -> None:
    """Train a private artefact and write a bundle (safe formats, manifest.json with the public schema)."""
    import json

    from recourse_privacy.service.bundle import METHODS, publish
    from recourse_privacy.validation import check_choice

    check_choice(method, "--method", METHODS)
    user_model = None
    if model_file is not None:
        from recourse_privacy.models.files import load_model_file

        if method == "dpm":
            raise InvalidInputError("--model-file does not apply to --method dpm (its release is its DP model)")
        if model_file.suffix.lower() != ".skops":
            raise InvalidInputError(f"--model-file {model_file.name}: publish takes a .skops file (safe format)")
        user_model = load_model_file(model_file, tuple(trust or ()))
    elif trust or decision_threshold is not None:
        raise InvalidInputError(f"{'--trust' if trust else '--decision-threshold'} applies to --model-file")
    parsed_bounds = _bounds(bounds)
    ds = _load_data(dataset, data_dir, data, target, positive_label, categorical, immutable, increasing)
    from recourse_privacy.output_dir import claim_output_dir

    claim = claim_output_dir(out, "publish", overwrite=overwrite)  # refuses another run's or foreign files
    man = publish(
        ds, method=method, epsilon=epsilon, delta=delta, out=out, bounds=parsed_bounds,
        may_be_missing=_columns(may_be_missing), n_clusters=n_clusters,
        seed=seed, model=user_model, positive_label=positive_label,
        model_source=None if model_file is None else model_file.name, decision_threshold=decision_threshold,
        sparse=sparse,
    )  # fmt: skip
    claim.finish()
    typer.echo(
        json.dumps({k: man[k] for k in ("method", "epsilon", "delta", "epsilon_per_answer")} | {"out": str(out)})
    )
    _schema_warnings(man["schema_notes"])
    if check_rows:
        _check_release(out, ds, check_rows, seed, method, epsilon)


def _schema_warnings(notes: dict) -> None:
    """The publisher's warnings (stderr) about the schema: what was read from the data, gaps declared unseen."""
    if notes.get("warning"):
        typer.echo(f"warning: {notes['warning']}: {', '.join(notes['read_from_data'])}", err=True)
    if notes.get("declared_missing"):
        typer.echo(
            f"warning: --may-be-missing {', '.join(notes['declared_missing'])}: no row of the data misses a value "
            "there, so the model learned nothing about a gap in it (the weight of its gap indicator is the fit's "
            "regularisation and noise only); answers to applicants with such a gap are less reliable",
            err=True,
        )


def _check_release(out: Path, ds, n_rows: int, seed: int, method: str, epsilon: float) -> None:
    """Print what the bundle in ``out`` answers ``n_rows`` of the dataset's rejected rows (stderr), warning when few
    answers are valid (:mod:`recourse_privacy.service.release_check`)."""
    from recourse_privacy.service.bundle import load_bundle
    from recourse_privacy.service.release_check import CONCENTRATED, LOW_VALIDITY, check_release
    from recourse_privacy.validation import derive_seed

    check = check_release(load_bundle(out, random_state=derive_seed(seed, 71)), ds.X, n_rows=n_rows, random_state=seed)
    typer.echo(check.describe(), err=True)
    if check.low:
        typer.echo(
            f"warning: fewer than {LOW_VALIDITY:.0%} of the checked answers are valid for --method {method} at "
            f"--epsilon {epsilon:g}: a larger --epsilon or another --method may serve applicants better "
            "(`recourse-privacy recourse --methods laplace,dpc,privrecourse` compares the methods' recourse)",
            err=True,
        )
    if check.concentrated:
        typer.echo(
            f"warning: {check.top_end_share:.0%} of the found answers lead to one of the graph's {check.n_nodes} nodes "
            f"(at least {CONCENTRATED:.0%}): those applicants are all sent toward the same profile, whatever their own "
            "(the graph's paths run to its cheapest accepted node; Pentyala et al. 2023, Algorithm 2)",
            err=True,
        )


_FILE = typer.Option(..., "--file", help="the key file (JSON; only hashes are stored)")


def keys_add(
    name: str = typer.Argument(..., help="who the key is for"),
    file: Path = _FILE,
    budget: float = typer.Option(0.0, "--budget", help="the key's privacy budget (epsilon) for spending answers"),
    query_cap: int | None = typer.Option(None, "--query-cap", min=1, help="the most answers the key gets"),
) -> None:
    """Make a key; print it alone on the last line (it is shown once and never stored)."""
    from recourse_privacy.service.keys import KeyStore

    key = KeyStore(file).add(name, budget=budget, query_cap=query_cap)
    cap = "no cap" if query_cap is None else f"query cap {query_cap}"
    typer.echo(f"key {name!r} added to {file} (budget epsilon {budget:g}, {cap}); it is shown only now:")
    typer.echo(key)


def keys_list(file: Path = _FILE, all_keys: bool = typer.Option(False, "--all", help="revoked keys too")) -> None:
    """The keys: name, id (hash prefix), budget, cap, created, revoked."""
    from recourse_privacy.errors import MissingFileError
    from recourse_privacy.service.keys import KeyStore

    if not file.exists():
        raise MissingFileError(f"no key file {file}")
    for k in KeyStore(file).load():
        if k.revoked is None or all_keys:
            cap = "-" if k.query_cap is None else str(k.query_cap)
            typer.echo(
                f"{k.name}\t{k.id}\tbudget={k.budget:g}\tcap={cap}\tcreated={k.created}\trevoked={k.revoked or '-'}"
            )


def keys_revoke(name: str = typer.Argument(..., help="the key's name"), file: Path = _FILE) -> None:
    """Revoke the active key of NAME (a running server stops accepting it within a second)."""
    from recourse_privacy.service.keys import KeyStore

    n = KeyStore(file).revoke(name)
    typer.echo(f"revoked {n} key{'s' if n != 1 else ''} named {name!r}")


def serve_command(
    bundle: Path = typer.Argument(..., help="a bundle directory written by publish"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port to listen on"),
    api_keys: Path = typer.Option(..., "--api-keys", help="the key file of `keys add`"),
    ledger: str = typer.Option(..., "--ledger", help="FILE or sqlite:///FILE (this machine) or postgresql://..."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="uvicorn worker processes"),
    log_applicants: bool = typer.Option(False, "--log-applicants", help="log the applicants' data too"),
    log_file: Path | None = typer.Option(None, "--log-file", help="append the answer log here (default stderr)"),
    compile_cache: str | None = typer.Option(
        None,
        "--compile-cache",
        help="DIR for DPC's compiled searches, so a restart loads them (default: the user cache's "
        "recourse-privacy/xla; 'off': compile at every start)",
    ),
    search_precision: str = typer.Option(
        "float64",
        "--search-precision",
        help="DPC bundles: float64 (the reference's answers) or float32 (about twice the applicants per CPU "
        "second; a few answers in a hundred differ by more than 1% of a range: docs/deployment.md)",
    ),
) -> None:
    """Serve BUNDLE over HTTP: POST /v1/recourse, /v1/recourse/batch; GET /, /v1/manifest, /v1/budget, /health, /metrics."""
    import json
    import os
    import tempfile

    from recourse_privacy.errors import MissingFileError
    from recourse_privacy.service.bundle import load_bundle
    from recourse_privacy.service.ledger import open_ledger

    try:
        import uvicorn  # noqa: F401

        import recourse_privacy.service.app  # noqa: F401
    except ImportError as err:
        raise InvalidInputError(f"serve needs the serve extra: pip install 'recourse-privacy[serve]' ({err})") from None
    b = load_bundle(bundle, search_precision=search_precision)  # fail here, before the workers start
    xla_dir = _compile_cache_dir(compile_cache) if hasattr(b.graph, "warm") else None
    if xla_dir is not None:  # a directory others can write is refused here, by name (jax is set up in the workers)
        from recourse_privacy.service.latent_search import private_cache_dir

        private_cache_dir(xla_dir)
    if not api_keys.is_file():
        raise MissingFileError(f"no key file {api_keys}: make one with `recourse-privacy keys add NAME --file ...`")
    open_ledger(ledger)
    cfg = {"bundle": str(bundle), "api_keys": str(api_keys), "ledger": ledger, "log_applicants": log_applicants,
           "log_file": str(log_file) if log_file else None,
           "compile_cache": str(xla_dir) if xla_dir is not None else None, "search_precision": search_precision}  # fmt: skip
    os.environ["RECOURSE_PRIVACY_SERVE_CONFIG"] = json.dumps(cfg)
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="rp-metrics-")
    import uvicorn

    from recourse_privacy.service.transport import NoDelayHTTPProtocol

    uvicorn.run(
        "recourse_privacy.service.app:app_from_env",
        factory=True,
        http=NoDelayHTTPProtocol,  # TCP_NODELAY with any number of workers (service/transport.py)
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )


def _compile_cache_dir(value: str | None) -> Path | None:
    """``--compile-cache``: the directory given, None for 'off', else ``recourse-privacy/xla`` in the user cache."""
    from recourse_privacy.cache import OFF, default_artifact_dir

    if value is None or not value.strip():
        return default_artifact_dir().parent / "xla"
    return None if value.strip().lower() in OFF else Path(value).expanduser()


def register(app: typer.Typer, command) -> None:
    """Add the service commands to ``app``; ``command`` is the CLI's ``_command`` decorator factory."""
    command("publish")(publish_command)
    keys_app = typer.Typer(no_args_is_help=True, help="API keys of `serve`: add, list, revoke (hashes only stored).")
    app.add_typer(keys_app, name="keys")
    command("add", on=keys_app)(keys_add)
    command("list", on=keys_app)(keys_list)
    command("revoke", on=keys_app)(keys_revoke)
    command("serve")(serve_command)
