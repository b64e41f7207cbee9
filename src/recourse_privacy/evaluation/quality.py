"""Recourse quality per method on one dataset and model: CARLA's metric table (Pawelczyk et al. 2021).

:func:`run_quality` loads a dataset, splits it once (seeded) into a training split and a
held-out split, fits the preprocessing and the model on the training split, takes as query
points the first ``n_points`` held-out rows the model rejects, fits every method with
:func:`~recourse_privacy.recourse.fit_for` on the training split, generates recourse for the
queries and measures it with :func:`~recourse_privacy.metrics.quality_metrics`. It writes

- ``quality.json``: method -> metric -> value (a method that cannot run on the model maps
  to ``{"skipped": reason}``); ``quality_run.json``: the configuration, data sizes and
  model accuracy behind the table;
- ``quality.csv``: the same table, one row per method;
- ``quality.png``: a few query points and their counterfactuals (FACE: whole paths) on the
  two features the methods change most, one panel per method.

Your own data and model, as in the audit: ``data`` (a CSV/Parquet path or a DataFrame) with
``target``, ``positive_label``, ``categorical``, ``immutable``, ``increasing`` and ``bounds``
(instead of ``dataset``), and ``model`` a registered name or a model object (a fitted
scikit-learn classifier or Pipeline reading the original columns is retrained on the
training split, a clone). Every method then keeps one-hot groups a single category and
integer columns integer, and ``counterfactuals.csv`` holds each method's counterfactuals
in the data's own columns and units.

Public bounds: a method that scales with them (PrivRecourse and its baselines, DPC) gets the
dataset's documented domain (:mod:`~recourse_privacy.data.domain`) or, for your own data,
``bounds`` for every numeric column; ``bounds_from_data=True`` instead reads them from the
training rows, which ``quality_run.json`` records as not covered by the DP guarantee. The
action set's ranges are the same public bounds where declared.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy import strict_json
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.stages import GameData, counterfactual_table, load_data
from recourse_privacy.audit.user_inputs import describe_data, describe_model
from recourse_privacy.audit.user_model import action_set_for, check_bounds_columns, resolve_model
from recourse_privacy.data import Pools, Preprocessor, load_dataset
from recourse_privacy.data.domain import encoded_bounds
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics import quality_metrics
from recourse_privacy.models import accuracy, make_model
from recourse_privacy.recourse import ActionSet, check_recourse_name, fit_for
from recourse_privacy.recourse.registry import (
    RECOURSE_METHODS,
    check_action_set_support,
    honours_action_set,
    make_recourse,
    missing_capabilities,
    model_capabilities,
)
from recourse_privacy.report.counterfactuals import write_counterfactuals
from recourse_privacy.validation import as_generator, check_positive_int, derive_seed

#: progress callback: (stage, completed, total)
Progress = Callable[[str, int, int], None]

#: metric columns of the table, in print order
METRICS = (
    "validity",
    "l0",
    "l1",
    "l2",
    "linf",
    "redundancy",
    "ynn",
    "violations",
    "seconds_per_cf",
    "pdensity",
    "pdistance_manifold",
    "pl0",
    "pl1",
    "pl2",
)


@dataclass
class QualityResult:
    """The table (method -> metric -> value), the recourse behind it, skipped methods and files written."""

    table: dict
    results: dict = field(default_factory=dict)  # method -> RecourseResult
    skipped: dict = field(default_factory=dict)  # method -> reason
    run: dict = field(default_factory=dict)  # configuration, sizes, model accuracy
    files: dict = field(default_factory=dict)
    #: your own data: every method's counterfactuals in the data's columns and units (stages.counterfactual_table)
    counterfactuals: object = None


def _skip_reason(name: str, model) -> str | None:
    missing = missing_capabilities(name, model_capabilities(model))
    if "linear" in missing:
        return "needs a linear model"
    if "gradients" in missing:
        return "needs a differentiable model"
    return None


#: how the private methods' bounds were chosen, as quality_run.json states it
BOUNDS_FROM_DATA_NOTE = "min/max of the training rows (--bounds-from-data): NOT covered by any DP guarantee"


def _make_method(name: str, params: dict, action_set, seed: int, bounds=None):
    """The method with the run's action set, seed and, for a method that scales with public bounds, ``bounds``.

    ``bounds``: the encoded public (lower, upper), ``"data"`` (``--bounds-from-data``), or a list
    of the numeric columns without public bounds (then such a method is refused, naming the remedy).
    """
    accepted = inspect.signature(RECOURSE_METHODS.get(name).obj).parameters
    params = dict(params)
    if "bounds" in accepted and "bounds" not in params and bounds is not None:
        if isinstance(bounds, list):
            raise InvalidInputError(
                f"{name} scales its inputs with public bounds, and the numeric columns {bounds[:10]} have none: "
                "declare them with --schema FILE or --bounds COL=LO:HI (Python: bounds={column: (lo, hi)}), or pass "
                "--bounds-from-data (Python: bounds_from_data=True; min/max of the training rows, not covered by "
                "the DP guarantee)"
            )
        params["bounds"] = bounds
    if action_set is not None and "action_set" in accepted:
        params.setdefault("action_set", action_set)
    if "random_state" in accepted:
        params.setdefault("random_state", seed)
    return make_recourse(name, **params)


def run_quality(
    dataset: str = "adult",
    model: object = "mlp",
    methods: Sequence[str] = ("scfe",),
    n_points: int = 1000,
    seed: int = 0,
    out_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    actionable: bool = True,
    *,
    n_train: int = 5000,
    model_params: dict | None = None,
    method_params: dict[str, dict] | None = None,
    data_params: dict | None = None,
    k_neighbors: int = 5,
    plot_points: int = 5,
    progress: Progress | None = None,
    data: object = None,
    target: str | None = None,
    positive_label: object = None,
    categorical: Sequence[str] = (),
    immutable: Sequence[str] = (),
    increasing: Sequence[str] = (),
    bounds: dict | None = None,
    bounds_from_data: bool = False,
    decision_threshold: float | None = None,
) -> QualityResult:
    """Measure every method in ``methods`` on the same model and query points (see the module docstring).

    ``n_train`` rows (seeded permutation) train the preprocessing and the model (defaults of
    ``make_model``, overridden by ``model_params``) and are what data-driven methods fit on
    and what yNN and the path metrics compare to; the queries are the first ``n_points``
    rejected rows of the rest. With ``actionable`` every method gets the dataset's action set
    (immutable and increase-only features, training ranges). ``method_params`` maps a
    method name to keyword overrides. Methods that need a linear or differentiable model the
    given model is not are reported in ``skipped`` with the reason.

    Your own data and model (``data``, ``target``, ...) and public bounds: see the module docstring.
    """
    from sklearn.neighbors import KernelDensity

    methods, n_points, n_train, method_params = _checked_request(methods, n_points, n_train, method_params)
    report = progress or (lambda stage, done, total: None)
    t_start = time.perf_counter()
    user = _user_config(methods, data, model, target, positive_label, categorical, immutable, increasing, bounds,
                        actionable, decision_threshold)  # fmt: skip
    report("data", 0, 1)
    split = _split_data(dataset, data, data_dir, data_params, user, n_train, n_points, seed)
    report("data", 1, 1)
    report("model", 0, 1)
    clf, model_label, query_rows, X_query = _model_and_queries(model, model_params, user, split, n_points, seed)
    report("model", 1, 1)
    action_set, method_bounds, unbounded = _bounds_and_actions(split, user, bounds, bounds_from_data, actionable)
    # PDensity's rho^D (Pentyala et al. 2023, eq. 2)
    kde = KernelDensity(kernel="gaussian", bandwidth="scott").fit(split.X_train)
    context = _MethodContext(clf, model_label, split, X_query, action_set, method_bounds, kde, k_neighbors, seed)
    table, results, skipped = _measure_methods(methods, method_params, context, user is None and actionable, report)
    run = {
        "dataset": split.label,
        "model": model_label,
        "model_params": model_params or {},
        "methods": list(methods),
        "method_params": method_params,
        "n_points_requested": n_points,
        **_run_facts(split, X_query, actionable, bounds_from_data, unbounded),
        "seed": seed,
        "k_neighbors": k_neighbors,
        **_fit_facts(clf, split, kde),
        "total_seconds": round(time.perf_counter() - t_start, 3),
    }
    warning = _warning(len(X_query), n_points, run["accepted_share"])
    if warning:
        run["warning"] = warning
    out = QualityResult(table, results, skipped, run)
    if user is not None:
        out.counterfactuals = _user_counterfactuals(split, query_rows, results)
    if out_dir is not None:
        _write_outputs(out, out_dir, split, clf, plot_points)
    return out


def _checked_request(methods, n_points, n_train, method_params) -> tuple[list[str], int, int, dict]:
    """The methods (registered names), query and training sizes and per-method parameters, checked by name."""
    methods = [check_recourse_name(m) for m in methods]
    if not methods:
        raise InvalidInputError("methods is empty; name at least one recourse method")
    n_points = check_positive_int(n_points, "n_points")
    n_train = check_positive_int(n_train, "n_train", minimum=10)
    method_params = dict(method_params or {})
    unknown = sorted(set(method_params) - set(methods))
    if unknown:
        raise InvalidInputError(f"method_params names methods not in methods: {unknown}")
    return methods, n_points, n_train, method_params


@dataclass(frozen=True)
class _Split:
    """The data of one quality run: the dataset, its seeded train / held-out split, preprocessed."""

    ds: object
    label: str  # what was read: your file, not the default name
    train: np.ndarray
    held: np.ndarray
    pre: Preprocessor
    X_train: np.ndarray
    y_train: np.ndarray
    X_held: np.ndarray
    y_held: np.ndarray
    game: GameData | None  # your own data: the split as the audit's game holds it


@dataclass(frozen=True)
class _MethodContext:
    """What every method of a quality run is fitted and measured against."""

    clf: object
    model_label: str
    split: _Split
    X_query: np.ndarray
    action_set: ActionSet | None
    method_bounds: object  # (lo, hi), "data", or the numeric columns without public bounds
    kde: object
    k_neighbors: int
    seed: int


def _user_config(
    methods,
    data,
    model,
    target,
    positive_label,
    categorical,
    immutable,
    increasing,
    bounds,
    actionable,
    decision_threshold=None,
) -> AuditConfig | None:
    """Your own data or model as an :class:`AuditConfig` (checked, before any work); None for a named dataset."""
    if data is None and isinstance(model, str):
        if bounds or categorical or immutable or increasing or positive_label is not None:
            raise InvalidInputError("positive_label, categorical, immutable, increasing and bounds need data=...")
        if decision_threshold is not None:
            raise InvalidInputError("decision_threshold (--decision-threshold) is the cutoff of your own model")
        return None
    user = AuditConfig(
        data=data,
        target=target,
        positive_label=positive_label,
        categorical=tuple(categorical),
        immutable=tuple(immutable),
        increasing=tuple(increasing),
        bounds=dict(bounds or {}),
        model=model,
        actionable=actionable,
        decision_threshold=decision_threshold,
    )
    user.check_user_inputs()
    asked = [f"--{n}" for n in ("bounds", "immutable", "increasing") if getattr(user, n)]
    for name in methods:  # before any work: a method that would ignore them is refused by name
        check_action_set_support(name, asked)
    return user


def _split_data(dataset, data, data_dir, data_params, user, n_train: int, n_points: int, seed: int) -> _Split:
    """Load the data, split it (seeded permutation) into ``n_train`` training rows and the rest, preprocess."""
    label = describe_data(data) if data is not None else dataset
    if user is not None:
        ds = load_data(user)
    elif dataset == "synthetic":
        ds = load_dataset(
            "synthetic", n_samples=n_train + 4 * n_points, random_state=derive_seed(seed, 1), **(data_params or {})
        )
    else:
        ds = load_dataset(dataset, data_dir, **(data_params or {}))
    if ds.n_rows < n_train + 2:
        raise InvalidInputError(
            f"n_train={n_train} (--n-train) leaves no held-out rows: {label} has {ds.n_rows} rows; "
            f"use an n_train in [10, {ds.n_rows - 2}]"
            if ds.n_rows >= 12
            else f"{label} has {ds.n_rows} rows: too few to train on 10 and hold some out"
        )
    perm = as_generator(derive_seed(seed, 2)).permutation(ds.n_rows)
    train, held = perm[:n_train], perm[n_train:]
    # your own data: no correlation filter, so that every counterfactual decodes to the original columns
    pre = (Preprocessor(corr_threshold=None) if user is not None else Preprocessor()).fit(ds.X.iloc[train], ds)
    X_train, y_train = pre.transform(ds.X.iloc[train]), ds.y[train]
    X_held, y_held = pre.transform(ds.X.iloc[held]), ds.y[held]
    game = None
    if user is not None:
        empty = np.zeros(0, dtype=np.int64)
        game = GameData(ds, Pools(train, held, empty), pre, X_train, y_train, X_held, y_held, X_train[:0], empty)
        check_bounds_columns(user, game)
    return _Split(ds, label, train, held, pre, X_train, y_train, X_held, y_held, game)


def _model_and_queries(model, model_params, user, split: _Split, n_points: int, seed: int):
    """Train the model on the training rows; the queries are the first ``n_points`` held-out rows it rejects.

    Returns (model, its label, the queries' rows in the dataset, the encoded queries).
    """
    if isinstance(model, str):
        clf = make_model(model, random_state=derive_seed(seed, 3), **(model_params or {}))
    else:
        clf = resolve_model(user, split.game).make(derive_seed(seed, 3))
    clf = clf.fit(split.X_train, split.y_train)
    label = describe_model(model)
    rejected = np.flatnonzero(clf.predict(split.X_held) == 0)
    if not len(rejected):
        raise InvalidInputError(
            f"the {label} model rejects none of the {len(split.X_held)} held-out rows: no query points"
        )
    return clf, label, split.held[rejected[:n_points]], split.X_held[rejected[:n_points]]


def _bounds_and_actions(split: _Split, user, bounds, bounds_from_data: bool, actionable: bool):
    """(action set, the bounds a method that scales with public bounds gets, numeric columns without bounds)."""
    public = dict(getattr(split.ds.domain, "bounds", {}) or {})
    public.update(bounds or {})
    pub_lo, pub_hi, unbounded = encoded_bounds(split.pre, public)
    action_set = (
        action_set_for(user, split.game)
        if user is not None
        else (ActionSet.from_preprocessor(split.pre).with_ranges(pub_lo, pub_hi) if actionable else None)
    )
    method_bounds = "data" if bounds_from_data else (sorted(set(unbounded)) if unbounded else (pub_lo, pub_hi))
    return action_set, method_bounds, unbounded


def _measure_methods(methods, method_params: dict, ctx: _MethodContext, need_action_set: bool, report):
    """Fit each method on the training rows, generate recourse for the queries and measure it.

    Returns (method -> metrics or {"skipped": reason}, method -> RecourseResult, method -> reason).
    """
    table: dict[str, dict] = {}
    results, skipped = {}, {}
    for i, name in enumerate(methods):
        report(name, 0, 1)
        reason = _skip_reason(name, ctx.clf)
        if reason is None and need_action_set and not honours_action_set(name):
            skipped[name] = f"{name} takes no action set, so it cannot honour the constraints (--actionable)"
        elif reason is not None:
            skipped[name] = f"{name} {reason}; the {ctx.model_label} model is not"
        if name in skipped:
            table[name] = {"skipped": skipped[name]}
            report(name, 1, 1)
            continue
        params = method_params.get(name, {})
        method = _make_method(name, params, ctx.action_set, derive_seed(ctx.seed, 10, i), ctx.method_bounds)
        t = time.perf_counter()
        fitted = fit_for(method, ctx.split.X_train, ctx.split.y_train, ctx.clf)
        fit_s = time.perf_counter() - t
        res = fitted.generate(ctx.clf, ctx.X_query)
        metrics = quality_metrics(
            res, ctx.clf, ctx.split.X_train, action_set=ctx.action_set, k=ctx.k_neighbors, kde=ctx.kde
        )
        metrics["fit_seconds"] = fit_s
        table[name], results[name] = metrics, res
        report(name, 1, 1)
    return table, results, skipped


def _run_facts(split: _Split, X_query, actionable: bool, bounds_from_data: bool, unbounded) -> dict:
    """The data sizes and public bounds behind the table (part of ``quality_run.json``)."""
    if bounds_from_data:
        public_bounds = BOUNDS_FROM_DATA_NOTE
    elif not unbounded:
        public_bounds = getattr(split.ds.domain, "source", "") or "your --bounds / --schema"
    else:
        public_bounds = f"none for {sorted(set(unbounded))[:10]}"
    return {
        "n_points": int(len(X_query)),
        "n_train": int(len(split.train)),
        "n_heldout": int(len(split.held)),
        "n_features": int(split.X_train.shape[1]),
        "feature_names": list(split.pre.feature_names_out_),
        "actionable": bool(actionable),
        "public_bounds": public_bounds,
    }


#: below this share of accepted training rows the recourse command warns that data-driven methods may find nothing
_FEW_ACCEPTED = 0.02


def _warning(n_query: int, n_points: int, accepted_share: float) -> str | None:
    """What the run should tell its user: too few query points, or a model that accepts almost no one."""
    out = []
    if n_query < n_points:
        out.append(f"only {n_query} held-out rows are rejected; fewer query points than requested")
    if accepted_share < _FEW_ACCEPTED:
        out.append(
            f"the model accepts {100 * accepted_share:.2g}% of the training rows: methods that search among or "
            "near accepted training data (FACE, C-CHVAE, REVISE, DPC, PrivRecourse and its baselines) may find no "
            "valid counterfactual, and their validity 0 says so rather than an error"
        )
    return "; ".join(out) or None


def _fit_facts(clf, split: _Split, kde) -> dict:
    """The model's accuracy, PDensity's bandwidth and the metrics' conventions (part of ``quality_run.json``)."""
    return {
        "train_accuracy": accuracy(clf, split.X_train, split.y_train),
        "heldout_accuracy": accuracy(clf, split.X_held, split.y_held),
        "accepted_share": float(np.mean(clf.predict(split.X_train) == 1)),
        "kde_bandwidth": float(kde.bandwidth_),
        "conventions": "costs, redundancy, yNN, violations and path metrics are means over valid counterfactuals "
        "(CARLA); validity and seconds_per_cf over all query points; L2 is not squared",
    }


def _user_counterfactuals(split: _Split, query_rows, results: dict):
    """Your own data: every method's counterfactuals in the data's own columns and units (or None)."""
    tables = []
    for name, res in results.items():
        t, _ = counterfactual_table(split.pre, split.ds, query_rows, res, "l1")
        if t is not None:
            tables.append(t.assign(method=name)[["method", *t.columns]])
    return pd.concat(tables, ignore_index=True) if tables else None


def _write_outputs(out: QualityResult, out_dir, split: _Split, clf, plot_points: int) -> None:
    """Write the table, the run, the plot and (your own data) the counterfactuals; their paths into ``out.files``."""
    out.files = write_quality(
        out,
        out_dir,
        X_train=split.X_train,
        y_pred_train=clf.predict(split.X_train),
        feature_names=list(split.pre.feature_names_out_),
        plot_points=plot_points,
    )
    if out.counterfactuals is not None:
        out.files.update({k: str(v) for k, v in write_counterfactuals(out.counterfactuals, out_dir).items()})


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    return v


def write_quality(
    result: QualityResult,
    out_dir: str | Path,
    *,
    X_train: np.ndarray,
    y_pred_train: np.ndarray,
    feature_names: list[str],
    plot_points: int = 5,
) -> dict:
    """Write quality.json, quality_run.json, quality.csv and quality.png into ``out_dir``."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "quality.json").write_text(strict_json.dumps(_jsonable(result.table), indent=2))
    (out / "quality_run.json").write_text(strict_json.dumps(_jsonable(result.run), indent=2))
    rows = []
    for name, m in result.table.items():
        rows.append(
            {"method": name, **{k: m.get(k) for k in METRICS}, **{k: v for k, v in m.items() if k not in METRICS}}
        )
    pd.DataFrame(rows).to_csv(out / "quality.csv", index=False)
    files = {
        "quality": str(out / "quality.json"),
        "run": str(out / "quality_run.json"),
        "csv": str(out / "quality.csv"),
    }
    if result.results:
        files["plot"] = str(
            plot_recourse(
                result.results,
                out / "quality.png",
                X_train=X_train,
                y_pred_train=y_pred_train,
                feature_names=feature_names,
                n_points=plot_points,
                title=f"{result.run['dataset']} / {result.run['model']}",
            )
        )
    return files


def plot_recourse(
    results: dict,
    path: str | Path,
    *,
    X_train: np.ndarray,
    y_pred_train: np.ndarray,
    feature_names: list[str],
    n_points: int = 5,
    title: str = "",
) -> Path:
    """One panel per method: training points (by the model's label), ``n_points`` queries and their recourse.

    The two features shown are those the methods change most (mean |x' - x| over valid
    counterfactuals of all methods); path methods draw the whole path.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    change = np.zeros(X_train.shape[1])
    for res in results.values():
        if res.valid.any():
            change += np.abs(res.counterfactuals - res.factuals)[res.valid].mean(axis=0)
    a, b = np.argsort(-change, kind="stable")[:2] if X_train.shape[1] > 1 else (0, 0)
    names = list(results)
    cols = min(3, len(names))
    rows = int(math.ceil(len(names) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.8 * rows), squeeze=False)
    bg = np.random.default_rng(0).permutation(len(X_train))[:600]
    for ax, name in zip(axes.ravel(), names):
        res = results[name]
        fav = y_pred_train[bg] == 1
        ax.scatter(X_train[bg][fav, a], X_train[bg][fav, b], s=5, c="tab:blue", alpha=0.25, label="train, accepted")
        ax.scatter(X_train[bg][~fav, a], X_train[bg][~fav, b], s=5, c="tab:orange", alpha=0.25, label="train, rejected")
        k = min(n_points, len(res.factuals))
        for i in range(k):
            x, c = res.factuals[i], res.counterfactuals[i]
            if res.paths is not None:
                p = res.paths[i]
                ax.plot(p[:, a], p[:, b], "-o", ms=3, lw=1, c="green" if res.valid[i] else "red")
            else:
                ax.annotate(
                    "",
                    xy=(c[a], c[b]),
                    xytext=(x[a], x[b]),
                    arrowprops={"arrowstyle": "->", "color": "green" if res.valid[i] else "red", "lw": 1},
                )
            ax.scatter([x[a]], [x[b]], s=25, c="black", zorder=3)
            ax.scatter(
                [c[a]],
                [c[b]],
                s=30,
                marker="*" if res.valid[i] else "x",
                c="green" if res.valid[i] else "red",
                zorder=3,
            )
        ax.set_title(f"{name} (validity {res.validity:.2f})", fontsize=10)
        ax.set_xlabel(feature_names[a], fontsize=8)
        ax.set_ylabel(feature_names[b], fontsize=8)
    for ax in axes.ravel()[len(names) :]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=6, loc="best")
    if title:
        fig.suptitle(f"{title}: queries (black), counterfactuals (green: valid, red: invalid)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
