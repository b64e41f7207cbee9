"""The recourse interface: a batch of rejected points in, counterfactuals and costs out."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from recourse_privacy.recourse.registry import check_compatible, model_capabilities

NORMS = ("l0", "l1", "l2", "linf")


def distances(X: np.ndarray, X_cf: np.ndarray, norm: str = "l1") -> np.ndarray:
    """Row-wise cost between factuals and counterfactuals: l0 (changed features), l1, l2 (not squared), linf."""
    delta = np.asarray(X_cf, dtype=np.float64) - np.asarray(X, dtype=np.float64)
    if norm == "l1":
        return np.abs(delta).sum(axis=1)
    if norm == "l2":
        return np.sqrt((delta**2).sum(axis=1))
    if norm == "linf":
        return np.abs(delta).max(axis=1, initial=0.0)
    if norm == "l0":
        return (np.abs(delta) > 1e-8).sum(axis=1).astype(np.float64)
    raise ValueError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")


@dataclass(frozen=True)
class RecourseResult:
    """Counterfactuals aligned row by row with their factuals; failures are kept, flagged by ``valid``."""

    factuals: np.ndarray
    counterfactuals: np.ndarray
    valid: np.ndarray
    method: str
    n_iter: np.ndarray | None = None
    seconds: float = 0.0
    info: dict = field(default_factory=dict)
    #: for path-based methods (FACE): one (k_i, d) array per row, from the factual to the counterfactual
    paths: tuple | None = None

    def distance(self, norm: str = "l1") -> np.ndarray:
        """Cost of each counterfactual (see :func:`distances`)."""
        return distances(self.factuals, self.counterfactuals, norm)

    @property
    def validity(self) -> float:
        """Share of rows whose counterfactual the model accepts."""
        return float(np.mean(self.valid)) if len(self.valid) else float("nan")

    def summary(self) -> dict:
        """Validity and mean costs over all rows (invalid rows included, and counted)."""
        return {
            "method": self.method,
            "n": int(len(self.valid)),
            "validity": self.validity,
            "n_invalid": int((~self.valid).sum()),
            "mean_l1": float(self.distance("l1").mean()) if len(self.valid) else float("nan"),
            "mean_l2": float(self.distance("l2").mean()) if len(self.valid) else float("nan"),
            "seconds": float(self.seconds),
        }


@runtime_checkable
class RecourseMethod(Protocol):
    """A recourse generator: ``generate(model, X)`` for a batch of points the model rejects.

    A method that learns from data (a VAE, a graph of data points) also has
    ``fit(X, y, model) -> self``; :func:`fit_for` calls it on the right data in each world
    (the owner's training set for the owner, a shadow training set for each shadow model).
    """

    name: str

    def generate(self, model, X: np.ndarray) -> RecourseResult: ...


def fit_for(method, X: np.ndarray, y: np.ndarray, model):
    """A copy of ``method`` fitted on ``(X, y)`` for ``model`` if it learns from data; else ``method`` itself."""
    if not callable(getattr(method, "fit", None)):
        return method
    return copy.deepcopy(method).fit(X, y, model)


def run_in_chunks(method, model, X: np.ndarray, info: dict) -> RecourseResult:
    """Driver shared by the batched gradient methods (SCFE, CADEX).

    Checks the input, runs ``method._run(module, rows)`` on chunks of ``method.batch_size`` rows
    (all rows at once when it is None; 1 reproduces CARLA's one-at-a-time loop), and judges
    validity with the model itself. ``_run`` returns (counterfactuals, first-valid iteration).
    """
    import time

    from recourse_privacy.validation import check_matrix

    check_supports(method, model)
    X = check_matrix(X, n_features=model.n_features_in_)
    if method.action_set is not None:
        method.action_set.check(X.shape[1])
    t0 = time.perf_counter()
    module = model.torch_module()
    step = method.batch_size or max(len(X), 1)
    parts = [method._run(module, X[i : i + step]) for i in range(0, len(X), step)]
    X_cf = np.concatenate([p[0] for p in parts]) if parts else X.copy()
    n_iter = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    valid = model.predict(X_cf) == 1 if len(X) else np.zeros(0, bool)
    return RecourseResult(X, X_cf, valid, method.name, n_iter=n_iter, seconds=time.perf_counter() - t0, info=info)


def check_supports(method, model) -> None:
    """Raise a clear error where ``method`` cannot run on ``model`` (e.g. exact linear recourse on an MLP)."""
    check_compatible(method, model_capabilities(model), type(model).__name__)
