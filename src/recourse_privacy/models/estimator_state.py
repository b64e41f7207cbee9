"""A user's fitted scikit-learn model as cacheable state: the reference models of a user's recipe trained once.

The artifact cache (:mod:`recourse_privacy.cache`) keeps plain arrays and never unpickles. A
trained :class:`~recourse_privacy.models.estimator.EstimatorModel` is kept as the ``skops``
bytes of its fitted estimator (a uint8 array) and read back with ``skops.io.loads``, trusting
only the types that the user's own object already holds in memory (the types of
``skops.io.dumps`` of the recipe the audit was handed); an entry with any other type is
refused and recomputed, never loaded.

Keys and fingerprints hash bytes and never load them: the recipe by the SHA-256 of the pickle
of its unfitted clone (``sklearn.base.clone``: its class and hyperparameters, not its fitted
state), the decoding by the pickle of the audit's fitted
:class:`~recourse_privacy.data.Preprocessor`, and a fitted model by the pickle of its fitted
estimator (pickle output is deterministic for the same objects; ``skops`` archives carry
timestamps, so they are stored but not hashed). A recipe that cannot be pickled (a lambda in a
``FunctionTransformer``) is not cached.
"""

from __future__ import annotations

import functools
import hashlib
import pickle

import numpy as np

from recourse_privacy.cache import Uncacheable

__all__ = ["estimator_config", "estimator_fingerprint", "export_estimator", "restore_estimator"]


def _sha(obj: object) -> str:
    try:
        return hashlib.sha256(pickle.dumps(obj, protocol=4)).hexdigest()
    except Exception as err:  # noqa: BLE001 - whatever pickling a user's object raises
        raise Uncacheable(f"cannot hash {type(obj).__name__}: {type(err).__name__}: {err}") from None


def _recipe_sha(model) -> str:
    from sklearn.base import clone

    return _sha(clone(model.estimator))


def estimator_config(model) -> dict:
    """The key of a training: the class, the recipe's bytes, the decoding, the labels, the columns and the seed."""
    cls = type(model)
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "recipe_sha256": _recipe_sha(model),
        "preprocessor_sha256": _sha(model.preprocessor),
        "labels": [repr(v) for v in model.labels],
        "feature_names": list(model.feature_names or ()),
        "random_state": model.random_state,
    }


def estimator_fingerprint(model) -> str:
    """SHA-256 of a fitted model's behaviour: the key of the cached training that made it (``fit_key_``, set by
    :func:`~recourse_privacy.models.cached.fit_cached`), else its fitted estimator's bytes, the decoding and the
    labels (a model read back from skops need not pickle to the bytes of the one that was stored), and the
    decision cutoff where it is not one half."""
    cutoff = getattr(model, "threshold_", None)
    moved = cutoff is not None and not cutoff.is_default  # a cutoff changes the decisions, not the training
    if getattr(model, "fit_key_", None):
        key = str(model.fit_key_)
        return hashlib.sha256(f"{key}\0threshold={cutoff.value!r}".encode()).hexdigest() if moved else key
    parts = [_sha(model.estimator_), _sha(model.preprocessor), repr(model.labels), repr(model.feature_names)]
    if moved:
        parts.append(f"threshold={cutoff.value!r}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def export_estimator(model) -> dict[str, np.ndarray]:
    """The fitted estimator as skops bytes, the linear fast path's coefficients where it has one, and the
    affine map into a network inside it where that network has gradients."""
    import skops.io as sio

    state = {"skops": np.frombuffer(sio.dumps(model.estimator_), dtype=np.uint8).copy()}
    if getattr(model, "is_linear", False):
        state["coef"] = np.asarray(model.coef_, np.float64)
        # the estimator's own intercept (the decision cutoff is re-read from the estimator when it is loaded)
        state["intercept"] = np.array(float(model.intercept_) + float(getattr(model, "decision_offset_", 0.0)))
    elif getattr(model, "network_map_", None) is not None:
        state["network_A"], state["network_b"] = (np.asarray(a, np.float64) for a in model.network_map_)
    return state


@functools.lru_cache(maxsize=32)
def _types_in(blob: bytes) -> frozenset[str]:
    import skops.io as sio

    return frozenset(sio.get_untrusted_types(data=blob))


def _trusted_for(model) -> frozenset[str]:
    """The non-default types of the user's own object (fitted where the user's object is)."""
    import skops.io as sio

    try:
        return _types_in(sio.dumps(model.estimator))
    except Exception as err:  # noqa: BLE001 - an object skops cannot write
        raise Uncacheable(f"skops cannot write {type(model.estimator).__name__}: {err}") from None


def restore_estimator(model, state: dict[str, np.ndarray]) -> None:
    """Load the stored estimator onto ``model``; raise Uncacheable where it holds a type the recipe does not."""
    import skops.io as sio

    blob = np.asarray(state["skops"], dtype=np.uint8).tobytes()
    found, trusted = _types_in(blob), _trusted_for(model)
    if not found <= trusted:
        raise Uncacheable(f"the cached model holds types the recipe does not: {sorted(found - trusted)}")
    model._adopt(sio.loads(blob, trusted=sorted(found)))
    if "coef" in state:
        model.coef_ = np.asarray(state["coef"], np.float64)
        model.intercept_ = float(state["intercept"]) - model.decision_offset_
        model.is_linear = model.is_differentiable = True
    elif "network_A" in state:
        model.use_network_map(np.asarray(state["network_A"]), np.asarray(state["network_b"]))
