"""What a user may hand the audit besides registered names: a model object, a DataFrame.

Small, import-light helpers the configuration uses to check, describe and hash them:
:func:`model_kind` sorts a model into ``registered`` (a name), ``estimator`` (a scikit-learn
classifier or pipeline reading the original columns), ``torch`` (a
:class:`~recourse_privacy.models.TorchModel`) or ``classifier`` (any
:class:`~recourse_privacy.models.BaseClassifier`, used on the encoded features as it is);
:func:`describe_model` and :func:`object_digest` give the JSON-safe text and hash that
``metrics.json`` and the caches record in their place.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

from recourse_privacy.errors import InvalidInputError

__all__ = ["check_deployed_config", "describe_data", "describe_model", "model_kind", "object_digest"]


def _is_frame(obj: object) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def model_kind(model: object) -> str:
    """``registered``, ``estimator``, ``torch`` or ``classifier``; raise naming what a model object lacks."""
    if isinstance(model, str):
        return "registered"
    from recourse_privacy.models.base import BaseClassifier
    from recourse_privacy.models.wrappers import TorchModel

    if isinstance(model, TorchModel):
        return "torch"
    if isinstance(model, BaseClassifier):
        return "classifier"
    if type(model).__module__.startswith("torch") or hasattr(model, "state_dict") and hasattr(model, "forward"):
        raise InvalidInputError(
            f"model {type(model).__name__} is a bare torch module: wrap it as TorchModel(module, "
            "module_factory=..., train_fn=...) so that the owner's and the shadow models can be trained"
        )
    missing = [m for m in ("fit", "predict_proba") if not callable(getattr(model, m, None))]
    if missing:
        raise InvalidInputError(
            f"model {type(model).__name__} lacks {' and '.join(missing)}: the audit needs a registered model "
            "name, a scikit-learn classifier or Pipeline with fit and predict_proba, or a TorchModel"
        )
    if not callable(getattr(model, "get_params", None)):
        raise InvalidInputError(
            f"model {type(model).__name__} has no get_params: it cannot be cloned (sklearn.base.clone), and the "
            "audit trains fresh copies of it for the owner and every shadow model"
        )
    return "estimator"


#: scikit-learn's decision-threshold wrappers: described with the estimator they hold
_WRAPPERS = ("FixedThresholdClassifier", "TunedThresholdClassifierCV")


def describe_model(model: object) -> str:
    """A short JSON-safe label: the registered name, or e.g. ``Pipeline(ColumnTransformer, GradientBoostingClassifier)``
    (a threshold wrapper around it: ``FixedThresholdClassifier(Pipeline(...))``)."""
    if isinstance(model, str):
        return model
    held = getattr(model, "estimator", None)
    if type(model).__name__ in _WRAPPERS and held is not None and not isinstance(held, str):
        return f"{type(model).__name__}({describe_model(held)})"
    steps = getattr(model, "steps", None)
    if steps:
        inner = ", ".join(type(step).__name__ for _, step in steps if step not in (None, "passthrough"))
        return f"{type(model).__name__}({inner})"
    return type(model).__name__


def describe_data(data: object) -> str | None:
    """The data's path, or ``DataFrame(rows x columns)``."""
    if data is None or isinstance(data, str):
        return data
    if _is_frame(data):
        return f"DataFrame({data.shape[0]}x{data.shape[1]})"
    return type(data).__name__


def _jsonable(value: Any) -> Any:
    """Parameters as JSON: estimators by type and their own parameters, functions by qualified name and source."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if callable(getattr(value, "get_params", None)) and not isinstance(value, type):
        return {"type": f"{type(value).__module__}.{type(value).__qualname__}", **_jsonable(value.get_params(False))}
    if callable(value):
        try:
            source = inspect.getsource(value)
        except (OSError, TypeError):
            source = ""
        return {"callable": getattr(value, "__qualname__", repr(value)), "source": source}
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if hasattr(value, "__dict__"):  # a model object: its settings, not its fitted state (names ending in _)
        return {"type": kind, **{k: _jsonable(v) for k, v in vars(value).items() if not k.endswith("_")}}
    return {"type": kind, "repr": repr(value)}


def object_digest(obj: object) -> str:
    """SHA-256 of a model or a DataFrame, stable across processes.

    A DataFrame hashes by its values, index, column names and dtypes
    (``pandas.util.hash_pandas_object``); a scikit-learn estimator by its type and parameters
    (not its fitted state: the audit retrains it); a TorchModel by its factory and training
    function (names and source) and the wrapped module's parameters; anything else by type
    and repr.
    """
    h = hashlib.sha256()
    if _is_frame(obj):
        import pandas as pd

        h.update(pd.util.hash_pandas_object(obj, index=True).to_numpy().tobytes())
        h.update(json.dumps([[str(c), str(t)] for c, t in obj.dtypes.items()]).encode())
        return h.hexdigest()
    from recourse_privacy.models.wrappers import TorchModel

    if isinstance(obj, TorchModel):
        h.update(json.dumps(_jsonable([obj.module_factory, obj.train_fn, obj.n_features])).encode())
        if obj.module is not None:
            for name, tensor in obj.module.state_dict().items():
                h.update(name.encode())
                h.update(tensor.detach().cpu().numpy().tobytes())
        return h.hexdigest()
    h.update(json.dumps(_jsonable(obj), sort_keys=True, default=repr).encode())
    return h.hexdigest()


def check_deployed_config(config) -> None:
    """The as-deployed settings make sense together: a fitted scikit-learn model, the user's data, one source."""
    if config.members is not None and config.holdout is not None:
        raise InvalidInputError(
            "pass either members=COLUMN (--members) or holdout=... (--train-data A --holdout-data B), not both"
        )
    if config.data is None:
        raise InvalidInputError("the as-deployed audit needs your data (--data with --members, or --train-data)")
    if not config.user_model or model_kind(config.model) != "estimator":
        raise InvalidInputError(
            "the as-deployed audit reads your fitted scikit-learn model (--model-file, or model=fitted_pipeline): "
            "a registered model name has no deployed instance; a PyTorch network goes in as skorch's "
            "NeuralNetClassifier, the last step of the pipeline that encodes its columns"
        )
    if not hasattr(config.model, "classes_"):
        raise InvalidInputError(
            f"model {config.model_label} is not fitted: the as-deployed audit audits the fitted instance as it is "
            "(without --members / --holdout-data the audit re-trains the recipe instead)"
        )
    if isinstance(config.members, str) and config.members == config.target:
        raise InvalidInputError(f"members column {config.members!r} is the label column")
