"""The training algorithm T of the game for a registered model or the user's own, checked before any training.

:func:`resolve_model` turns ``config.model`` into a :class:`ModelRecipe`: a function seed ->
unfitted model on the encoded features, and what the fitted models will provide (``linear``,
``gradients``) where that is known before training. For the user's own scikit-learn estimator
every check of the issue's "bad input" list runs here, against the data and the fitted
instance, before the owner's model is trained: two classes containing the favourable label,
the columns the model knows against the data's, every categorical value of the data known to
its encoders, and a clone that can be refit.

The game (Pawelczyk et al. 2023, Definition 1) trains the owner's model afresh on the members:
the user's object supplies the recipe (hyperparameters, pipeline), a fitted instance is only
checked against the data and used to decide linearity up front.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.stages import GameData
from recourse_privacy.audit.user_inputs import describe_model, model_kind
from recourse_privacy.data.domain import encoded_bounds
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.models.decision_threshold import inner_estimator
from recourse_privacy.models.estimator import EstimatorModel, estimator_labels, seeded_clone
from recourse_privacy.models.registry import MODELS, model_factory
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import check_compatible, model_capabilities

__all__ = [
    "ModelRecipe",
    "action_set_for",
    "check_bounds_columns",
    "check_fitted_recourse",
    "public_bounds_for",
    "resolve_model",
]


@dataclass(frozen=True)
class ModelRecipe:
    """How the owner's and every shadow model are made: ``make(seed)`` gives an unfitted model."""

    label: str
    make: Callable[[int], BaseClassifier]
    capabilities: frozenset[str] | None  # None: known once the owner's model is fitted


def resolve_model(config: AuditConfig, game: GameData) -> ModelRecipe:
    """The recipe for ``config.model`` (a registered name or a user object); user objects are checked here."""
    if not config.user_model:
        name, params = config.effective_model
        return ModelRecipe(name, model_factory(name, **params), MODELS.get(name).meta["capabilities"])
    kind = model_kind(config.model)
    label = describe_model(config.model)
    if kind == "estimator":
        return _estimator_recipe(config, game, label)
    if kind == "torch":
        tm = config.model
        tm.unfitted()  # raises without a factory and a training function
        d = game.X_members.shape[1]
        if tm.n_features is not None and tm.n_features != d:
            raise InvalidInputError(
                f"TorchModel n_features={tm.n_features}, but the data has {d} encoded features "
                f"({', '.join(game.preprocessor.feature_names_out_[:8])}, ...)"
            )
        tm.check_output(game.X_members)
        return ModelRecipe(label, tm.unfitted, frozenset({"gradients"}))
    obj = config.model  # a BaseClassifier on the encoded features: deep copies of it, seeded where it can be

    def make(seed: int) -> BaseClassifier:
        model = copy.deepcopy(obj)
        if hasattr(model, "random_state"):
            model.random_state = seed
        return model

    return ModelRecipe(label, make, None)


def _fitted_parts(est: object):
    """The estimator and every fitted sub-estimator of its pipelines, column transformers and threshold wrappers."""
    yield est
    held = inner_estimator(est)  # a FixedThresholdClassifier's fitted pipeline
    if held is not est:
        yield from _fitted_parts(held)
    for _, step in getattr(est, "steps", None) or ():
        yield from _fitted_parts(step)
    for _, part, _ in getattr(est, "transformers_", None) or ():
        yield from _fitted_parts(part)


def _estimator_recipe(config: AuditConfig, game: GameData, label: str) -> ModelRecipe:
    est = config.model
    ds = game.dataset
    data_labels = ds.label_values or (1, 0)
    seeded_clone(est, 0)  # a model that cannot be cloned is refused now
    fitted = hasattr(est, "classes_")
    labels = data_labels
    if fitted:
        fav, unfav = estimator_labels(est, data_labels[0])
        if {str(fav), str(unfav)} != {str(v) for v in data_labels}:
            raise InvalidInputError(
                f"model {label} was fitted on the labels {[fav, unfav]}, but the target column {ds.target!r} "
                f"holds {list(data_labels)}"
            )
        labels = (fav, unfav)
        _check_columns(est, ds.feature_names, label)
        _check_categories(est, ds.X, label)
        _check_scores(est, ds.X, label)
    make = _make_estimator(est, game, labels, config.decision_threshold)
    capabilities = None
    if fitted:
        probe = EstimatorModel(
            est,
            game.preprocessor,
            labels=labels,
            feature_names=ds.feature_names,
            estimator_=est,
            random_state=0,
            threshold=config.decision_threshold,
        )
        probe.probe_linearity(game.X_members)
        probe.check_decisions(game.X_members)  # a cutoff the audit was not told of: said now, before any training
        capabilities = model_capabilities(probe)
    return ModelRecipe(label, make, capabilities)


def _make_estimator(
    est: object, game: GameData, labels: tuple, threshold: float | None = None
) -> Callable[[int], EstimatorModel]:
    def make(seed: int) -> EstimatorModel:
        return EstimatorModel(
            est,
            game.preprocessor,
            labels=labels,
            feature_names=game.dataset.feature_names,
            random_state=seed,
            threshold=threshold,
        )

    return make


def _check_columns(est: object, columns: tuple[str, ...], label: str) -> None:
    names = getattr(est, "feature_names_in_", None)
    if names is None:
        n = getattr(est, "n_features_in_", None)
        if n is not None and int(n) != len(columns):
            raise InvalidInputError(
                f"model {label} was fitted on {int(n)} unnamed columns; the data has {len(columns)} feature "
                f"columns {list(columns)[:10]}: fit it on a DataFrame so that columns are matched by name"
            )
        return
    names = [str(c) for c in names]
    missing = [c for c in names if c not in columns]
    if missing:
        raise InvalidInputError(f"model {label} reads the columns {missing}, which the data lacks")
    extra = [c for c in columns if c not in names]
    if extra:
        raise InvalidInputError(
            f"the data has feature columns {extra} that model {label} does not know (it reads {names}): "
            "drop them from the data, or refit the model on them"
        )


def _check_categories(est: object, X: pd.DataFrame, label: str) -> None:
    """Every categorical value of the data must be a category the model's fitted one-hot encoders know."""
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

    for part in _fitted_parts(est):
        if not isinstance(part, OneHotEncoder | OrdinalEncoder) or not hasattr(part, "categories_"):
            continue
        names = getattr(part, "feature_names_in_", None)
        if names is None:
            continue
        for col, cats in zip(names, part.categories_):
            if str(col) not in X.columns:
                continue
            known = {str(c) for c in cats}
            unseen = sorted({str(v) for v in pd.unique(X[str(col)])} - known)
            if unseen:
                raise InvalidInputError(
                    f"column {col!r} holds values {unseen[:5]} that model {label}'s {type(part).__name__} has not "
                    f"seen (it knows {sorted(known)[:10]}): refit the model on data with every category"
                )


def _check_scores(est: object, X: pd.DataFrame, label: str) -> None:
    """The fitted model scores a few rows (every categorical level among them) into (n, 2) probabilities."""
    rows = {0}
    for col in X.columns:
        if X[col].dtype == object:
            rows.update(int(i) for i in X[col].drop_duplicates().index[:50])
    sample = X.iloc[sorted(rows)]
    names = getattr(est, "feature_names_in_", None)
    inputs = sample[[str(c) for c in names]] if names is not None else sample.to_numpy()
    try:
        p = np.asarray(est.predict_proba(inputs), dtype=np.float64)
    except Exception as err:  # noqa: BLE001 - whatever the user's model raises, say which
        raise InvalidInputError(f"model {label} cannot score rows of the data: {type(err).__name__}: {err}") from None
    if p.shape != (len(sample), 2) or not np.isfinite(p).all():
        raise InvalidInputError(
            f"model {label}.predict_proba returns shape {p.shape} (finite: {bool(np.isfinite(p).all())}) for "
            f"{len(sample)} rows; expected ({len(sample)}, 2) finite probabilities"
        )


def check_fitted_recourse(config: AuditConfig, model: BaseClassifier, label: str) -> None:
    """After the owner's model is fitted: the recourse method gets what it needs (linear, gradients)."""
    try:
        check_compatible(config.effective_recourse, model_capabilities(model), f"model {label}")
    except IncompatibleError as err:
        raise IncompatibleError(f"{err} (decided on the fitted model)") from None


def action_set_for(config: AuditConfig, game: GameData) -> ActionSet | None:
    """The one ActionSet of the audit.

    Named datasets: the dataset's constraints with ``actionable``, else none (the paper's
    setting); the ranges are the dataset's documented public bounds where it declares them
    (:mod:`~recourse_privacy.data.domain`), else those of the fit data. A user's data: always the structure (one-hot groups stay a single category,
    integer columns integer), the ``immutable`` / ``increasing`` columns the user named, the
    fit data's ranges with ``actionable``, and the user's ``bounds`` (original units).
    """
    pre = game.preprocessor
    if config.data is None:
        if not config.actionable:
            return None
        acts = ActionSet.from_preprocessor(pre)
        domain = getattr(game.dataset, "domain", None)
        if domain is None or getattr(pre, "normalize_rows", False):
            return acts
        lower, upper, _ = encoded_bounds(pre, domain.bounds)
        return acts.with_ranges(lower, upper)
    acts = ActionSet.from_preprocessor(pre, actionable=True, bounds=config.actionable)
    if not config.bounds:
        return acts
    lower, upper = acts.lower.copy(), acts.upper.copy()
    names = list(pre.feature_names_out_)
    for column, (lo, hi) in config.bounds.items():
        j = names.index(column)
        scale, offset = pre.unit_scale_[j], pre.unit_offset_[j]
        enc = sorted(((lo - offset) / scale, (hi - offset) / scale))
        lower[j], upper[j] = enc
    return replace(acts, lower=lower, upper=upper)


def public_bounds_for(config: AuditConfig, game: GameData) -> tuple[np.ndarray, np.ndarray] | None:
    """Encoded public (lower, upper) bounds of every feature, for the private methods that scale with them.

    A named dataset's documented domain (:mod:`~recourse_privacy.data.domain`) with the user's
    ``--bounds`` over it; a user's table where ``--bounds`` cover every numeric column. None where
    some numeric feature has no public bound (the method then asks for them, naming the remedy) or
    rows are normalised (the bounds do not survive the normalisation). Never read from the rows.
    """
    pre = game.preprocessor
    if getattr(pre, "normalize_rows", False):
        return None
    domain = getattr(game.dataset, "domain", None) if config.data is None else None
    public = dict(domain.bounds) if domain is not None and getattr(domain, "public", True) else {}
    public.update(config.bounds)
    lower, upper, missing = encoded_bounds(pre, public)
    return None if missing else (lower, upper)


def check_public_bounds(config: AuditConfig, game: GameData) -> None:
    """Refuse, before any model trains, a private method that would refuse the rows later: more cluster nodes than
    members (PrivRecourse's k-means), or rows outside the public bounds of a method that scales with them and
    raises on such a row (PrivRecourse; no ``--recourse-param bounds`` or ``out_of_bounds=clip`` given): the
    unit box where some numeric column has no public bound. The error names the columns and the audit's options."""
    import inspect

    from recourse_privacy.privrecourse.scaling import outside_unit_box
    from recourse_privacy.recourse.registry import RECOURSE_METHODS

    cls = RECOURSE_METHODS.get(config.recourse).obj
    signature = inspect.signature(cls).parameters
    params = config.recourse_params
    k = params.get("n_clusters", signature["n_clusters"].default if "n_clusters" in signature else 0)
    fit_X, _ = game.recourse_fitting(config.recourse_fit)
    if getattr(cls, "source", None) == "clusters" and isinstance(k, int) and k > len(fit_X):
        raise InvalidInputError(
            f"--recourse {config.recourse} clusters the training rows into n_clusters={k} nodes, more than the "
            f"{len(fit_X)} rows it learns from: give --recourse-param n_clusters=K with K at most {len(fit_X)} "
            "(or more members)"
        )
    if not {"bounds", "out_of_bounds"} <= set(signature) or "bounds" in params:
        return
    if params.get("out_of_bounds", signature["out_of_bounds"].default) != "raise":
        return
    if getattr(game.preprocessor, "normalize_rows", False):
        return
    public = public_bounds_for(config, game)
    lower, upper = public if public is not None else (0.0, 1.0)  # the unit box the method scales with by default
    outside = np.zeros(game.X_members.shape[1], bool)
    for X in (game.owner_training[0], game.X_pool):  # the owner's rows and the shadow worlds'
        Z = (np.asarray(X, np.float64) - lower) / (np.asarray(upper) - lower)
        outside |= outside_unit_box(Z).any(axis=0)  # the method's own test (privrecourse/scaling.py)
    if not outside.any():
        return
    if public is not None:
        cols = list(dict.fromkeys(game.preprocessor.feature_sources_[j] for j in np.flatnonzero(outside)))
        raise InvalidInputError(
            f"--recourse {config.recourse} refuses rows outside the public bounds, and rows of the data fall "
            f"outside them in {', '.join(cols)}: widen --bounds for those columns (the values they can take, from "
            "domain knowledge), or --recourse-param out_of_bounds=clip (rows clipped into the bounds)"
        )
    _, _, missing = encoded_bounds(game.preprocessor, dict(config.bounds))
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    raise InvalidInputError(
        f"--recourse {config.recourse} scales with public bounds, and {len(missing)} numeric column(s) have none: "
        f"{shown}; give --bounds COL=LO:HI for each (the values the column can take, from domain knowledge, not "
        "the data), or --recourse-param out_of_bounds=clip (rows clipped into the unit box), or --recourse-param "
        "bounds=data (the rows' min and max: not covered by the DP guarantee)"
    )


def check_bounds_columns(config: AuditConfig, game: GameData) -> None:
    """Every column named in ``bounds`` is a numeric column kept by the preprocessing."""
    pre = game.preprocessor
    for column in config.bounds:
        if column not in game.dataset.feature_names:
            raise InvalidInputError(
                f"bounds names unknown column {column!r}; feature columns are {list(game.dataset.feature_names)}"
            )
        if column not in pre.numeric_:
            raise InvalidInputError(
                f"bounds[{column!r}]: {column!r} is categorical; bounds apply to numeric columns (use immutable "
                "to keep a categorical column as it is)"
            )
        if column not in pre.feature_names_out_:
            raise InvalidInputError(
                f"bounds[{column!r}]: the correlation filter dropped {column!r} (pass corr_threshold=None)"
            )
