"""Recourse through the artifact cache (:mod:`recourse_privacy.cache`): a method's output computed once.

A recourse call is keyed by the method's class and constructor parameters (seed and action set
included), the data a fitted method learns from (its SHA-256; the method is fitted only when the
cache lacks the result), the model's fitted parameters (:func:`~recourse_privacy.models.cached.model_fingerprint`)
and the SHA-256 of the query points. Two kinds of entries:

* ``recourse``: the whole :class:`RecourseResult` (the owner's recourse: the attacks read its
  counterfactuals); larger entries than the cache's size limit are recomputed each time.
* ``recourse-costs``: only what the shadow statistics read, validity and the cost of every
  counterfactual in the norms asked for (:class:`RecourseCosts`): a few numbers per point.

A method or model without a canonical description (see :func:`~recourse_privacy.cache.canonical`),
or a method whose class sets ``cache_results = False`` (a closed form such as exact linear
recourse, cheaper to compute than to hash its query points), is run as without the cache.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass

import numpy as np

from recourse_privacy.cache import ArtifactCache, Uncacheable, artifact_key, canonical
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.cached import model_fingerprint
from recourse_privacy.provenance import sha256_arrays
from recourse_privacy.recourse.base import NORMS, RecourseResult, fit_for

__all__ = ["RecourseCosts", "cached_fit_for", "cached_generate", "method_config"]

RESULT_KIND = "recourse"
COSTS_KIND = "recourse-costs"


def method_config(method) -> dict:
    """The method's class and constructor parameters, canonical; raises Uncacheable where one has no description."""
    cls = type(method)
    if not getattr(method, "cache_results", True):  # closed form: computing it is cheaper than keying the points
        raise Uncacheable(f"{cls.__name__} is not worth caching")
    names = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    missing = [n for n in names if not hasattr(method, n)]
    if missing:
        raise Uncacheable(f"{cls.__name__} keeps no attribute {missing[0]!r}")
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "params": canonical({n: getattr(method, n) for n in names}),
    }


def _fit_digest(method, X: np.ndarray, y: np.ndarray) -> str | None:
    return sha256_arrays(np.asarray(X), np.asarray(y)) if callable(getattr(method, "fit", None)) else None


def _key(kind: str, config: dict, fit_digest: str | None, model, X: np.ndarray) -> str:
    X = np.asarray(X, dtype=np.float64)
    return artifact_key(kind, config, fit_digest, model_fingerprint(model), sha256_arrays(X))


@dataclass(frozen=True)
class RecourseCosts:
    """Validity and the cost of each counterfactual in some norms: what a shadow world's statistics read."""

    valid: np.ndarray
    costs: dict[str, np.ndarray]

    def distance(self, norm: str = "l1") -> np.ndarray:
        """Cost of each counterfactual in ``norm`` (as :meth:`RecourseResult.distance`)."""
        if norm not in self.costs:
            raise InvalidInputError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")
        return self.costs[norm]

    @classmethod
    def from_result(cls, res: RecourseResult, norms: tuple[str, ...] = NORMS) -> RecourseCosts:
        """The validity and the costs in ``norms`` of a computed result."""
        return cls(np.asarray(res.valid, bool), {n: res.distance(n) for n in norms})

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"valid": self.valid, **{f"cost.{n}": c for n, c in self.costs.items()}}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> RecourseCosts:
        costs = {name[5:]: a for name, a in arrays.items() if name.startswith("cost.")}
        return cls(arrays["valid"].astype(bool), costs)


class _CostsOnly:
    """A method whose ``generate(model, X)`` gives :class:`RecourseCosts`, read from the cache where it can.

    The method is fitted on ``(fit_X, fit_y)`` only when a result is missing.
    """

    def __init__(self, method, config, fit_X, fit_y, fit_model, artifacts: ArtifactCache, role: str, norms):
        self.method, self.config, self.norms = method, config, tuple(norms)
        self.fit_X, self.fit_y, self.fit_model = fit_X, fit_y, fit_model
        self.fit_digest = _fit_digest(method, fit_X, fit_y)
        self.artifacts, self.role = artifacts, role
        self.name = getattr(method, "name", type(method).__name__)
        self._fitted = None

    def fitted(self):
        if self._fitted is None:
            self._fitted = fit_for(self.method, self.fit_X, self.fit_y, self.fit_model)
        return self._fitted

    def generate(self, model, X: np.ndarray) -> RecourseCosts:
        """Validity and costs of the method's recourse for ``X`` under ``model``."""
        key = _key(COSTS_KIND, self.config, [self.fit_digest, self.norms], model, X)
        arrays = self.artifacts.get_or_compute(
            COSTS_KIND,
            key,
            lambda: RecourseCosts.from_result(self.fitted().generate(model, X), self.norms).to_arrays(),
            self.role,
        )
        return RecourseCosts.from_arrays(arrays)


def cached_fit_for(
    method,
    X: np.ndarray,
    y: np.ndarray,
    model,
    artifacts: ArtifactCache | None,
    *,
    role: str,
    norms: tuple[str, ...] = NORMS,
):
    """:func:`fit_for` ``(method, X, y, model)``; with ``artifacts``, a method giving :class:`RecourseCosts` from it.

    ``norms``: the costs the caller reads (each one costs a pass over the counterfactuals).

    Without a cache, or for a method or model the cache cannot key, the fitted method itself.
    """
    if artifacts is None:
        return fit_for(method, X, y, model)
    try:
        config = method_config(method)
        model_fingerprint(model)
    except Uncacheable:
        return fit_for(method, X, y, model)
    for norm in norms:
        if norm not in NORMS:
            raise InvalidInputError(f"unknown norm {norm!r}; choose one of {', '.join(NORMS)}")
    return _CostsOnly(method, config, X, y, model, artifacts, role, norms)


def _result_arrays(res: RecourseResult) -> dict[str, np.ndarray]:
    arrays = {
        "counterfactuals": res.counterfactuals,
        "valid": res.valid,
        "seconds": np.array(float(res.seconds)),
        "method": np.array(str(res.method)),
    }
    if res.n_iter is not None:
        arrays["n_iter"] = np.asarray(res.n_iter)
    scalars = {}
    for name, value in res.info.items():
        if isinstance(value, np.ndarray):
            if value.dtype.hasobject:
                raise Uncacheable(f"info {name!r} is an object array")
            arrays[f"info.{name}"] = value
        else:
            scalars[name] = value
    try:
        text = json.dumps(scalars, sort_keys=True)
    except (TypeError, ValueError):
        raise Uncacheable("info holds values JSON cannot write") from None
    if repr(json.loads(text)) != repr(dict(sorted(scalars.items()))):  # read back exactly (types included)
        raise Uncacheable("info holds values JSON would change")
    arrays["info"] = np.array(text)
    if res.paths is not None:
        d = res.counterfactuals.shape[1]
        arrays["paths.lengths"] = np.array([len(p) for p in res.paths], dtype=np.int64)
        arrays["paths.points"] = np.concatenate(
            [np.asarray(p, np.float64).reshape(-1, d) for p in res.paths] or [np.zeros((0, d))]
        )
    return arrays


def _result_from_arrays(X: np.ndarray, a: dict[str, np.ndarray]) -> RecourseResult:
    info = json.loads(str(a["info"]))
    info.update({name[5:]: v for name, v in a.items() if name.startswith("info.")})
    paths = None
    if "paths.lengths" in a:
        ends = np.cumsum(a["paths.lengths"])
        paths = tuple(np.split(a["paths.points"], ends[:-1])) if len(ends) else ()
    return RecourseResult(
        np.asarray(X, dtype=np.float64),
        a["counterfactuals"],
        a["valid"].astype(bool),
        str(a["method"]),
        n_iter=a.get("n_iter"),
        seconds=float(a["seconds"]),
        info=info,
        paths=paths,
    )


def cached_generate(
    method, model, fit_X: np.ndarray, fit_y: np.ndarray, X: np.ndarray, artifacts: ArtifactCache | None, *, role: str
) -> RecourseResult:
    """``fit_for(method, fit_X, fit_y, model).generate(model, X)``, read from ``artifacts`` where computed before."""
    if artifacts is None:
        return fit_for(method, fit_X, fit_y, model).generate(model, X)
    try:
        key = _key(RESULT_KIND, method_config(method), _fit_digest(method, fit_X, fit_y), model, X)
    except Uncacheable:
        return fit_for(method, fit_X, fit_y, model).generate(model, X)
    computed: list[RecourseResult] = []

    def compute() -> dict[str, np.ndarray]:
        computed.append(fit_for(method, fit_X, fit_y, model).generate(model, X))
        return _result_arrays(computed[0])

    try:
        arrays = artifacts.get_or_compute(RESULT_KIND, key, compute, role)
    except Uncacheable:  # this result cannot be stored exactly: used as computed
        return computed[0]
    return computed[0] if computed else _result_from_arrays(X, arrays)
