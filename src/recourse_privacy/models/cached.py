"""Trained models through the artifact cache (:mod:`recourse_privacy.cache`): train once, reuse everywhere.

A model class whose fitted state can be written as plain arrays registers a :class:`StateCodec`
(the built-ins: :class:`~recourse_privacy.models.logistic.LogisticModel` and
:class:`~recourse_privacy.models.mlp.MLPModel`, and a user's scikit-learn recipe,
:class:`~recourse_privacy.models.estimator.EstimatorModel`, by the bytes of its recipe, see
:mod:`~recourse_privacy.models.estimator_state`; the DP-trained models are not cached). A
trained model is keyed by its class, its constructor parameters (the seed included), the
trainer (one-by-one ``fit`` or :func:`~recourse_privacy.models.batched.fit_mlps_batched`, whose
numbers agree only within float tolerance) with the device it trains on (``cpu``/``cuda``, as the
model's ``device`` or the enclosing ``use_device`` block resolves it) and the SHA-256 of its
exact training rows; a model
without a codec, or with a parameter that has no canonical description, is simply trained.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recourse_privacy.cache import ArtifactCache, Uncacheable, artifact_key, canonical
from recourse_privacy.models.estimator import EstimatorModel
from recourse_privacy.models.estimator_state import (
    estimator_config,
    estimator_fingerprint,
    export_estimator,
    restore_estimator,
)
from recourse_privacy.models.logistic import LogisticModel
from recourse_privacy.models.mlp import MLPModel
from recourse_privacy.provenance import sha256_arrays
from recourse_privacy.validation import derive_seed

__all__ = [
    "StateCodec",
    "fit_batch_cached",
    "fit_cached",
    "model_config",
    "model_fingerprint",
    "register_state_codec",
]

MODEL_KIND = "model"


@dataclass(frozen=True)
class StateCodec:
    """A fitted model's state as named arrays (``export``), and back onto an unfitted instance (``restore``)."""

    export: Callable[[object], dict[str, np.ndarray]]
    restore: Callable[[object, dict[str, np.ndarray]], None]  # may raise Uncacheable: the model is then trained
    #: the model's canonical description where its constructor parameters have none (a user's estimator)
    config: Callable[[object], dict] | None = None
    #: a fitted model's SHA-256 where its exported state is not deterministic (skops archives carry timestamps)
    fingerprint: Callable[[object], str] | None = None


#: exact class -> codec (a subclass, e.g. a DP-trained model, is not covered by its parent's codec)
STATE_CODECS: dict[type, StateCodec] = {}


def register_state_codec(cls: type, codec: StateCodec) -> None:
    """Let models of exactly ``cls`` be cached (and their recourse keyed by their parameters)."""
    STATE_CODECS[cls] = codec


def _export_linear(model) -> dict[str, np.ndarray]:
    return {"coef": np.asarray(model.coef_, np.float64), "intercept": np.array(float(model.intercept_))}


def _restore_linear(model, state: dict[str, np.ndarray]) -> None:
    model.coef_ = np.array(state["coef"], dtype=np.float64)
    model.intercept_ = float(state["intercept"])
    model.n_features_in_ = int(model.coef_.shape[0])
    model.fitted_ = True


def _export_torch(model) -> dict[str, np.ndarray]:
    state = {f"p.{name}": t.detach().cpu().numpy().copy() for name, t in model.module_.state_dict().items()}
    return {**state, "n_features": np.array(int(model.n_features_in_))}


def _restore_mlp(model, state: dict[str, np.ndarray]) -> None:
    import torch

    n_features = int(state["n_features"])
    module = model._build(n_features, derive_seed(model.random_state, 0))
    module.load_state_dict({k[2:]: torch.as_tensor(v) for k, v in state.items() if k.startswith("p.")})
    module.eval()
    module.requires_grad_(False)
    model.module_ = module
    model.n_features_in_ = n_features
    model.fitted_ = True


register_state_codec(LogisticModel, StateCodec(_export_linear, _restore_linear))
register_state_codec(MLPModel, StateCodec(_export_torch, _restore_mlp))
register_state_codec(
    EstimatorModel,
    StateCodec(export_estimator, restore_estimator, config=estimator_config, fingerprint=estimator_fingerprint),
)


def model_config(model) -> dict:
    """The model's class and constructor parameters (seed included), canonical; raises Uncacheable if it has no codec."""
    cls = type(model)
    if cls not in STATE_CODECS:
        raise Uncacheable(f"no state codec for {cls.__name__}")
    if STATE_CODECS[cls].config is not None:
        return STATE_CODECS[cls].config(model)
    names = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    missing = [n for n in names if not hasattr(model, n)]
    if missing:
        raise Uncacheable(f"{cls.__name__} keeps no attribute {missing[0]!r}")
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "params": canonical({n: getattr(model, n) for n in names})}


def model_fingerprint(model) -> str:
    """The SHA-256 of a fitted model's class and parameters (its exported state); raises Uncacheable without a codec."""
    codec = STATE_CODECS.get(type(model))
    if codec is None:
        raise Uncacheable(f"no state codec for {type(model).__name__}")
    if codec.fingerprint is not None:
        return codec.fingerprint(model)
    state = codec.export(model)
    names = sorted(state)
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    return sha256_arrays(np.frombuffer("\0".join([cls, *names]).encode(), np.uint8), *(state[n] for n in names))


def _key(model, X: np.ndarray, y: np.ndarray, trainer: str) -> str:
    config = model_config(model)  # first: raises Uncacheable for a model without a codec
    if hasattr(model, "device"):  # the device training runs on (its numbers differ within float tolerance)
        from recourse_privacy.models.device import device_kind

        trainer = f"{trainer}@{device_kind(model.device)}"
    return artifact_key(MODEL_KIND, config, trainer, sha256_arrays(np.asarray(X), np.asarray(y)))


def fit_cached(model, X: np.ndarray, y: np.ndarray, artifacts: ArtifactCache | None, *, role: str):
    """``model.fit(X, y)``, or its state read from ``artifacts`` where this very training ran before."""
    if artifacts is None:
        return model.fit(X, y)
    try:
        key = _key(model, X, y, "fit")
    except Uncacheable:
        return model.fit(X, y)
    codec = STATE_CODECS[type(model)]
    fitted = []

    def compute() -> dict[str, np.ndarray]:
        fitted.append(model.fit(X, y))
        return codec.export(model)

    state = artifacts.get_or_compute(MODEL_KIND, key, compute, role)
    if not fitted:
        try:
            codec.restore(model, state)
        except Uncacheable:  # an entry the codec refuses to load (a type the recipe lacks): train instead
            return model.fit(X, y)
    if codec.fingerprint is not None:  # trained or read by this key: the key is its fingerprint, in every process
        model.fit_key_ = key
    return model


def fit_batch_cached(
    models: Sequence[object],
    X: np.ndarray,
    y: np.ndarray,
    rows: Sequence[np.ndarray],
    artifacts: ArtifactCache | None,
    fit_batch: Callable[[list, np.ndarray, np.ndarray, list], object],
    *,
    role: str,
) -> list:
    """``fit_batch(models, X, y, rows)`` (model k on ``X[rows[k]]``) for the models ``artifacts`` lacks; the others read.

    The models trained here are trained together, in one ``fit_batch`` call, as they would be
    without the cache.
    """
    if artifacts is None:
        fit_batch(list(models), X, y, list(rows))
        return list(models)
    try:
        keys = [_key(m, X[r], y[r], fit_batch.__qualname__) for m, r in zip(models, rows, strict=True)]
    except Uncacheable:
        fit_batch(list(models), X, y, list(rows))
        return list(models)
    codecs = [STATE_CODECS[type(m)] for m in models]
    trained: set[int] = set()

    def compute(todo: list[int]) -> list[dict[str, np.ndarray]]:
        fit_batch([models[i] for i in todo], X, y, [rows[i] for i in todo])
        trained.update(todo)
        return [codecs[i].export(models[i]) for i in todo]

    states = artifacts.get_or_compute_many(MODEL_KIND, keys, compute, role)
    for i, state in enumerate(states):
        if i not in trained:
            codecs[i].restore(models[i], state)
    return list(models)
