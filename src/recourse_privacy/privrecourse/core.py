"""PrivRecourse (Pentyala et al. 2023): publish a DP recourse graph once, answer any number of queries.

:class:`PrivRecourse` is a registered recourse method (``privrecourse``) and the publisher:
``publish(X, y, model)`` scales the data with the declared PUBLIC bounds, trains the DP model
when none is given (diffprivlib logistic regression, Chaudhuri et al. 2011, published
label-only), draws the graph's nodes from ``source`` and returns a
:class:`~recourse_privacy.privrecourse.artefact.PublishedGraph` stating its total
(epsilon, delta). The same graph machinery serves the baselines, registered as
``privrecourse-laplace`` (per-record Laplace noise), ``privrecourse-mst`` (MST synthetic data)
and ``privrecourse-data`` (the raw records: paper 003's non-private FACE column, Algorithm 1/2
on V = D).
"""

from __future__ import annotations

import time

import numpy as np

from recourse_privacy.accounting import ReleaseBudget
from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.models.dp import DPLogisticModel
from recourse_privacy.privrecourse.artefact import PublishedGraph
from recourse_privacy.privrecourse.baselines import laplace_noisy_data, mst_synthetic_data
from recourse_privacy.privrecourse.clustering import CLUSTERINGS
from recourse_privacy.privrecourse.graph import WEIGHTS, build_graph
from recourse_privacy.privrecourse.scaling import check_unit_box
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_matrix,
    check_positive_int,
    derive_seed,
)

__all__ = ["SOURCES", "PrivRecourse", "PrivRecourseLaplace", "PrivRecourseMST", "PrivRecourseData"]

SOURCES = ("clusters", "laplace", "mst", "data")
#: how a path keeps the immutable features (see :class:`PrivRecourse`)
IMMUTABLE_MODES = ("match", "project")


def _cluster_nodes(method: PrivRecourse, Z: np.ndarray, seed: int):
    """PrivRecourse's nodes: the DP k-means centres (Algorithm 1)."""
    km = CLUSTERINGS[method.clustering](
        method.n_clusters, epsilon=method.epsilon, delta=method.delta, random_state=seed, **method.clustering_params
    ).fit(Z)
    return km.cluster_centers_, km.ledger_, {"rounds": km.n_rounds_}


def _laplace_nodes(method: PrivRecourse, Z: np.ndarray, seed: int):
    """The baseline's nodes: every record plus Laplace noise."""
    nodes, ledger = laplace_noisy_data(Z, epsilon=method.epsilon, clip=method.clip_noisy, random_state=seed)
    return nodes, ledger, {}


def _mst_nodes(method: PrivRecourse, Z: np.ndarray, seed: int):
    """DP-SD's nodes: MST synthetic data (McKenna et al. 2021)."""
    nodes, ledger, info = mst_synthetic_data(
        Z, epsilon=method.epsilon, delta=method.delta, n_rows=method.n_rows, random_state=seed, **method.mst_params
    )
    return nodes, ledger, {"avg_2way_tvd": info["avg_2way_tvd"], "rho": info["rho"]}


def _data_nodes(method: PrivRecourse, Z: np.ndarray, seed: int):
    """FACE's nodes: the raw records (not private)."""
    ledger = ReleaseBudget(method.epsilon, method.delta)
    ledger.spend("raw training records as nodes", 0.0, dp=False, note="non-private FACE (Poyiadzi et al. 2020)")
    return Z.copy(), ledger, {}


#: source -> fn(method, Z in the unit box, seed) -> (nodes in the unit box, ledger, info)
_NODE_SOURCES = {"clusters": _cluster_nodes, "laplace": _laplace_nodes, "mst": _mst_nodes, "data": _data_nodes}


@register_recourse(
    "privrecourse",
    needs=("fitting_data",),
    description="Pentyala et al. 2023 PrivRecourse: recourse paths on a graph of DP k-means centres",
)
class PrivRecourse:
    """PrivRecourse's publisher and recourse method (paper 003, Algorithms 1 and 2).

    Parameters (defaults from the paper's Table 2): ``source`` of the nodes (``"clusters"``);
    ``n_clusters`` K = 500; ``epsilon``/``delta`` (epsilon_k, delta_k) for the nodes (1, 0; MST
    needs delta > 0 and defaults to 1e-9); ``clustering`` ``"diffprivlib"`` (the default:
    diffprivlib's k-means, Su et al. 2016, epsilon-DP as run) or ``"convergent"`` (the paper's
    convergent DP k-means, spec sec. 3.3: its EM draws among the cluster's own records and its
    default release publishes them, so the ledger marks it not DP; the ``pentyala2023``
    reproduction runs it by name), ``clustering_params`` its options (``release``, ``lap_use``,
    ``zone`` ...);
    ``model_epsilon`` for the DP model trained when ``publish`` gets none; ``bounds``
    ``(lower, upper)`` per feature or one pair for all, public (default the unit box; the
    ``recourse`` command passes the dataset's documented domain, :mod:`~recourse_privacy.data.domain`),
    or ``"data"`` (the training rows' min/max: the ledger marks the artefact not DP),
    ``out_of_bounds`` ``"raise"`` or ``"clip"``; the graph: ``weight`` ("inverse": d / rho, Algorithm 1 line 4), ``bandwidth``
    of the KDE on the nodes, ``max_distance`` d_th (inf: fully connected), ``n_neighbors`` (a
    sparse neighbour graph), ``action_set`` (increase-only features give directed edges);
    ``immutables``: how immutable features are kept: ``"match"`` (no edge changes one and a path
    starts at a node with the query's exact immutable values: FACE's reading, the default for
    ``privrecourse-data``'s records) or ``"project"`` (the graph lives in the mutable features;
    every node is read with the query's immutable values, and the candidates are the nodes the
    model accepts so read: the default for DP nodes, whose noisy immutable coordinates never
    equal an applicant's; post-processing of the release, no privacy cost); ``n_rows`` (rows of
    MST data, public; default the MST model's estimate of the data's row count from its noisy marginals, never the
    exact count); ``sparse``: each answer keeps only the changes the model's acceptance
    needs, the others set back to the query's values (:mod:`~recourse_privacy.recourse.sparse`; what a ``publish``
    bundle answers by default; off: the paper's node as it is).
    """

    source = "clusters"

    def __init__(
        self,
        *,
        n_clusters: int = 500,
        epsilon: float = 1.0,
        delta: float | None = None,
        clustering: str = "diffprivlib",
        clustering_params: dict | None = None,
        model_epsilon: float = 1.0,
        bounds=None,
        out_of_bounds: str = "raise",
        weight: str = "inverse",
        bandwidth: float | str = "scott",
        max_distance: float = float("inf"),
        n_neighbors: int | None = None,
        action_set=None,
        clip_noisy: bool = False,
        immutables: str | None = None,
        n_rows: int | None = None,
        mst_params: dict | None = None,
        sparse: bool = False,
        random_state=None,
    ):
        check_choice(self.source, "source", SOURCES)
        self.n_clusters = check_positive_int(n_clusters, "n_clusters")
        self.epsilon = check_epsilon(epsilon, "epsilon")
        default_delta = 1e-9 if self.source == "mst" else 0.0
        self.delta = default_delta if delta is None else check_delta(delta, "delta")
        if self.source == "mst" and self.delta == 0:
            raise InvalidInputError("delta must be > 0 for MST (a zCDP mechanism); McKenna et al. use 1e-9")
        self.clustering = check_choice(clustering, "clustering", tuple(CLUSTERINGS))
        self.clustering_params = dict(clustering_params or {})
        self.model_epsilon = check_epsilon(model_epsilon, "model_epsilon")
        self.bounds = bounds
        self.out_of_bounds = check_choice(out_of_bounds, "out_of_bounds", ("raise", "clip"))
        self.weight = check_choice(weight, "weight", WEIGHTS)
        self.bandwidth = bandwidth
        self.max_distance = float(max_distance)
        if not self.max_distance > 0:
            raise InvalidInputError(f"max_distance must be > 0; got {max_distance!r}")
        self.n_neighbors = None if n_neighbors is None else check_positive_int(n_neighbors, "n_neighbors")
        self.action_set = action_set
        self.clip_noisy = bool(clip_noisy)
        default_immutables = "match" if self.source == "data" else "project"
        self.immutables = check_choice(immutables or default_immutables, "immutables", IMMUTABLE_MODES)
        self.n_rows = None if n_rows is None else check_positive_int(n_rows, "n_rows")
        self.mst_params = dict(mst_params or {})
        self.sparse = bool(sparse)
        self.random_state = random_state

    # ------------------------------------------------------------------ publishing
    def _bounds(self, d: int, X: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if self.bounds is None:
            return np.zeros(d), np.ones(d)
        if isinstance(self.bounds, str):
            if self.bounds != "data" or X is None:
                raise InvalidInputError(f"bounds must be (lower, upper) or 'data'; got {self.bounds!r}")
            lo, hi = X.min(axis=0), X.max(axis=0)
            return lo, np.where(hi > lo, hi, lo + 1.0)
        try:
            lo, hi = (np.asarray(b, np.float64).ravel() for b in self.bounds)
        except (TypeError, ValueError):
            raise InvalidInputError(f"bounds must be (lower, upper); got {self.bounds!r}") from None
        if lo.shape == (1,) and hi.shape == (1,):  # one public range for every feature, e.g. [-4, 4] sd
            lo, hi = np.full(d, lo[0]), np.full(d, hi[0])
        if lo.shape != (d,) or hi.shape != (d,):
            raise InvalidInputError(
                f"bounds must give {d} lower and {d} upper values (the data has {d} features); "
                f"got {lo.shape} and {hi.shape}"
            )
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (hi > lo).all()):
            raise InvalidInputError("bounds: every feature needs finite public lower < upper")
        return lo, hi

    def publish(
        self, X: np.ndarray, y: np.ndarray | None = None, model=None, *, feature_names=(), snap_nodes=None
    ) -> PublishedGraph:
        """Algorithm 1: nodes from ``source`` under (epsilon, delta), the graph, candidates f(C) = 1.

        ``snap_nodes`` (optional): a map of the released nodes, in the data's units, onto values an applicant can
        hold (e.g. a schema's decode and encode: one category per categorical feature, whole numbers where they are
        whole). It reads nothing private, so it is post-processing and costs no privacy; the graph and the
        candidates are built on its output, so a candidate is accepted as an applicant would hold it.
        """
        X = check_matrix(X)
        n, d = X.shape
        lo, hi = self._bounds(d, X)
        if self.action_set is not None:
            self.action_set.check(d)
        Z = check_unit_box(
            (X - lo) / (hi - lo), out_of_bounds=self.out_of_bounds, names=tuple(feature_names), method=self.name
        )
        if self.source == "clusters" and self.n_clusters > n:
            raise InvalidInputError(f"n_clusters={self.n_clusters} is larger than the data ({n} rows)")
        t0 = time.perf_counter()
        model, model_priv = self._model(X, y, model, lo, hi)
        nodes_u, ledger, info = _NODE_SOURCES[self.source](self, Z, derive_seed(self.random_state, 1))
        if isinstance(self.bounds, str):  # "data": the scaling itself reads the private rows
            ledger.spend(
                "feature bounds: min/max of the training rows",
                0.0,
                dp=False,
                note="bounds read from the data (--bounds-from-data): NOT covered by the DP guarantee",
            )
        if snap_nodes is not None:
            snapped = np.asarray(snap_nodes(lo + nodes_u * (hi - lo)), np.float64)
            nodes_u = np.clip((snapped - lo) / (hi - lo), 0.0, 1.0)
            ledger.spend("nodes snapped onto values an applicant can hold", 0.0, note="post-processing")
        graph, inc, imm = self._graph(nodes_u)
        nodes = lo + nodes_u * (hi - lo)
        candidates = model.predict(nodes) == 1
        privacy = {
            "epsilon": model_priv["epsilon"] + ledger.total_epsilon,
            "delta": model_priv["delta"] + ledger.total_delta,
            "is_dp": bool(model_priv["dp"] and ledger.is_dp),
            "composition": "sequential: model + nodes (Pentyala et al. 2023, sec. 4.1)",
            "model": model_priv,
            "nodes": ledger.to_dict(),
        }
        config = {
            **self._config(inc, imm),
            "n_nodes": int(len(nodes)),
            "n_edges": int(graph.nnz),
            "n_candidates": int(candidates.sum()),
            "build_seconds": time.perf_counter() - t0,
            **info,
        }
        return PublishedGraph(nodes, graph, candidates, lo, hi, tuple(feature_names), privacy, config)

    def _model(self, X: np.ndarray, y, model, lo: np.ndarray, hi: np.ndarray) -> tuple[object, dict]:
        """The model deciding the candidates (the DP one trained here when none is given) and its ledger line."""
        if model is None:
            if y is None:
                raise InvalidInputError("publish needs labels y to train the DP model (or a trained model)")
            model = DPLogisticModel(
                epsilon=self.model_epsilon,
                data_norm=float(np.linalg.norm(np.maximum(abs(lo), abs(hi)))),
                random_state=derive_seed(self.random_state, 0),
            ).fit(np.clip(X, lo, hi) if self.out_of_bounds == "clip" else X, y)
        if hasattr(model, "epsilon_"):
            return model, {
                "step": "model",
                "epsilon": float(model.epsilon_),
                "delta": float(getattr(model, "delta_", 0.0)),
                "dp": True,
                "note": f"{type(model).__name__}, published label-only (predict)",
            }
        return model, {
            "step": "model",
            "epsilon": 0.0,
            "delta": 0.0,
            "dp": False,
            "note": f"{type(model).__name__} supplied, not DP-trained: not covered",
        }

    def _graph(self, nodes_u: np.ndarray):
        """The graph on the unit-box nodes under the action set: (graph, increasing mask, immutable mask)."""
        d = nodes_u.shape[1]
        inc = np.zeros(d, bool) if self.action_set is None else np.asarray(self.action_set.increasing, bool)
        imm = np.zeros(d, bool) if self.action_set is None else np.asarray(self.action_set.immutable, bool)
        project = self.immutables == "project" and imm.any()
        mutable = ~imm if project else np.ones(d, bool)  # "project": the graph lives in the mutable features
        graph, _ = build_graph(
            nodes_u[:, mutable],
            weight=self.weight,
            bandwidth=self.bandwidth,
            max_distance=self.max_distance,
            n_neighbors=self.n_neighbors,
            increasing=inc[mutable],
            immutable=None if project else imm,
        )
        return graph, inc, imm

    def _config(self, inc: np.ndarray, imm: np.ndarray) -> dict:
        """The parameters the artefact records (what produced it)."""
        return {
            "source": self.source,
            "n_clusters": self.n_clusters,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "clustering": self.clustering,
            "clustering_params": self.clustering_params,
            "weight": self.weight,
            "bandwidth": self.bandwidth,
            "max_distance": self.max_distance,
            "n_neighbors": self.n_neighbors,
            "increasing": inc.tolist(),
            "immutable": imm.tolist(),
            "immutables": self.immutables,
        }

    # ------------------------------------------------------------------ the recourse method
    def fit(self, X: np.ndarray, y: np.ndarray | None = None, model=None) -> PrivRecourse:
        """Publish the artefact from ``(X, y)`` for ``model`` (the audit calls this in every world)."""
        self.artefact_ = self.publish(X, y, model).prepare()
        return self

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Algorithm 2 for every row of ``X``: the path on the published graph; its end is the counterfactual."""
        return generate_recourse(self, model, X, info={"source": self.source, "epsilon": self.epsilon})

    def _check_fitted(self, X: np.ndarray) -> None:
        if not hasattr(self, "artefact_"):
            raise NotFittedError(f"{self.name} needs fit(X_train, y_train, model) first (or from_artefact)")

    @classmethod
    def from_artefact(cls, artefact: PublishedGraph) -> PrivRecourse:
        """A method answering queries from a published (e.g. loaded) artefact, without the training data."""
        obj = cls.__new__(cls)
        obj.__init__(**{k: v for k, v in artefact.config.items() if k in ("n_clusters", "epsilon", "weight")})
        obj.artefact_ = artefact.prepare()
        return obj

    def _search(self, model, X: np.ndarray, state=None) -> SearchOutput:
        art = self.artefact_
        ans = art.query(X, model=model)
        n = len(X)
        X_cf = np.where(ans.found[:, None], art.node_points(ans.end, X), X)
        paths = tuple(
            np.vstack([X[i], art.node_points(ans.node_paths[i][ans.node_paths[i] >= 0], X[i])])
            if ans.found[i]
            else X[i][None, :]
            for i in range(n)
        )
        return SearchOutput(
            X_cf,
            found=ans.found,
            paths=paths,
            info={
                "path_cost": ans.cost,
                "start_node": ans.start,
                "graph_nodes": len(art.nodes),
                "n_failed": ans.n_failed,
                "no_start": ans.start < 0,  # per query: no node its model rejects, so Algorithm 2 cannot start
                "epsilon_total": art.epsilon,
                "delta_total": art.delta,
            },
        )


@register_recourse(
    "privrecourse-laplace",
    needs=("fitting_data",),
    description="Pentyala et al. 2023 baseline: the PrivRecourse graph on per-record Laplace-noised data",
)
class PrivRecourseLaplace(PrivRecourse):
    """The graph on the records plus Laplace noise (scale d / epsilon per feature)."""

    source = "laplace"


@register_recourse(
    "privrecourse-mst",
    needs=("fitting_data",),
    description="Pentyala et al. 2023 baseline: the PrivRecourse graph on MST synthetic data (mbi)",
)
class PrivRecourseMST(PrivRecourse):
    """The graph on MST synthetic data (McKenna et al. 2021), about as many rows as the data (its noisy count)."""

    source = "mst"


@register_recourse(
    "privrecourse-data",
    needs=("fitting_data",),
    description="non-private FACE as Pentyala et al. 2023 run it: Algorithms 1/2 on the raw records",
)
class PrivRecourseData(PrivRecourse):
    """The graph on the raw training records (not private; paper 003's FACE column)."""

    source = "data"
