"""The published PrivRecourse artefact: nodes, directed weighted graph, candidates, bounds and ledger.

It answers any number of recourse queries without the training data (Pentyala et al. 2023,
sec. 4.2: post-processing of the release). It saves to two files, never pickle:
``<path>.npz`` (arrays only, loaded with ``allow_pickle=False``) and ``<path>.json``
(format name, version, SHA-256 of the npz, feature names, public bounds, the ledger and the
configuration). :func:`load_artefact` refuses another format version, a checksum mismatch
and arrays of inconsistent shapes, each with a clear error.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recourse_privacy import strict_json
from recourse_privacy.errors import IncompatibleError, InvalidInputError, MissingFileError
from recourse_privacy.privrecourse.graph import GraphPaths, candidate_costs, recourse_paths
from recourse_privacy.validation import check_matrix

__all__ = ["ARTEFACT_FORMAT", "ARTEFACT_VERSION", "PublishedGraph", "load_artefact"]

ARTEFACT_FORMAT = "recourse-privacy/privrecourse-artefact"
ARTEFACT_VERSION = 1
_ARRAYS = ("nodes", "candidates", "indptr", "indices", "weights", "lower", "upper")
_GROUP_CACHE = 4096  # distinct immutable values whose Dijkstra a "project" artefact keeps


@dataclass
class PublishedGraph:
    """What the owner publishes: graph G on ``nodes`` (model space), candidate mask Z_CF, public bounds.

    ``privacy`` holds the total (epsilon, delta), the ledger lines and whether every step is DP
    as run; ``config`` the parameters that produced it. :meth:`query` runs Algorithm 2.
    """

    nodes: np.ndarray
    graph: object  # scipy.sparse.csr_matrix (m, m), directed
    candidates: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    feature_names: tuple[str, ...] = ()
    privacy: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.nodes = check_matrix(self.nodes, "nodes")
        m = len(self.nodes)
        self.candidates = np.asarray(self.candidates, bool)
        if self.candidates.shape != (m,) or self.graph.shape != (m, m):
            raise InvalidInputError(
                f"artefact arrays disagree: {m} nodes, candidates {self.candidates.shape}, graph {self.graph.shape}"
            )
        if np.asarray(self.lower).shape != (self.nodes.shape[1],) or np.asarray(self.upper).shape != (
            self.nodes.shape[1],
        ):
            raise InvalidInputError("artefact bounds do not match the node dimension")
        self._cost = self._pred = self._nn = None
        self._by_immutables: dict[bytes, tuple] = {}  # "project" mode: per immutable values, the Dijkstra

    @property
    def n_features(self) -> int:
        return int(self.nodes.shape[1])

    @property
    def epsilon(self) -> float:
        return float(self.privacy.get("epsilon", float("nan")))

    @property
    def delta(self) -> float:
        return float(self.privacy.get("delta", float("nan")))

    def prepare(self) -> PublishedGraph:
        """Precompute every node's cost to its cheapest candidate (one Dijkstra) and the start-node index."""
        from sklearn.neighbors import NearestNeighbors

        if self._cost is None:
            self._cost, self._pred = candidate_costs(self.graph, self.candidates)
            non = np.flatnonzero(~self.candidates)
            self._nn = NearestNeighbors(n_neighbors=1).fit(self._unit(self.nodes[non])) if len(non) else None
        return self

    @property
    def immutable(self) -> np.ndarray:
        """The immutable-feature mask the graph was built with (all False when none)."""
        return np.asarray(self.config.get("immutable", np.zeros(self.n_features, bool)), bool)

    @property
    def projects_immutables(self) -> bool:
        """True when paths read every node with the query's immutable values (``immutables="project"``)."""
        return self.config.get("immutables", "match") == "project" and bool(self.immutable.any())

    def node_points(self, idx: np.ndarray, X: np.ndarray) -> np.ndarray:
        """The nodes ``idx`` as counterfactual points for the queries ``X`` (rows, or one row for a path).

        In "project" mode a node takes the query's immutable values (post-processing of the release).
        """
        P = self.nodes[np.maximum(np.asarray(idx), 0)]
        if self.projects_immutables:
            P = P.copy()
            P[..., self.immutable] = np.asarray(X, np.float64)[..., self.immutable]
        return P

    def query(self, X: np.ndarray, model=None) -> GraphPaths:
        """Algorithm 2 for every row of ``X`` (same feature space as the artefact).

        In "project" mode the candidates depend on the query's immutable values, so ``model``
        (the published one) decides them: one multi-source Dijkstra per distinct immutable value.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            names = f" ({', '.join(self.feature_names)})" if self.feature_names else ""
            raise InvalidInputError(
                f"the query has {X.shape[-1] if X.ndim else 0} features; the artefact was "
                f"published on {self.n_features}{names}: query in the artefact's feature space"
            )
        X = check_matrix(X, n_features=self.n_features)
        if self.projects_immutables:
            return self._query_projected(X, model)
        self.prepare()
        imm = self.immutable
        return recourse_paths(
            self._unit(self.nodes),
            self.candidates,
            self._unit(X),
            self._cost,
            self._pred,
            nn_index=self._nn,
            immutable=imm if imm.any() else None,
        )

    def _query_projected(self, X: np.ndarray, model) -> GraphPaths:
        """Algorithm 2 in the mutable features, queries grouped by their immutable values."""
        if model is None:
            raise InvalidInputError(
                "this artefact reads its nodes with each applicant's immutable values (immutables='project'): "
                "query(X, model=the published model)"
            )
        imm, mut = self.immutable, ~self.immutable
        U, XU = self._unit(self.nodes)[:, mut], self._unit(X)[:, mut]
        keys, inv = np.unique(X[:, imm], axis=0, return_inverse=True)
        inv = inv.ravel()
        new = [g for g in range(len(keys)) if keys[g].tobytes() not in self._by_immutables]
        if new:  # the candidates of every new group in one batched prediction
            m = len(self.nodes)
            P = np.repeat(self.nodes[None], len(new), axis=0)
            P[:, :, imm] = keys[new][:, None, :]
            accepted = (np.asarray(model.predict(P.reshape(-1, self.n_features))) == 1).reshape(len(new), m)
            if len(self._by_immutables) + len(new) > _GROUP_CACHE:
                self._by_immutables.clear()
            for k, g in enumerate(new):
                self._by_immutables[keys[g].tobytes()] = (accepted[k], *candidate_costs(self.graph, accepted[k]))
        n = len(X)
        start, end, cost = np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.full(n, np.inf)
        found, parts = np.zeros(n, bool), []
        for g in range(len(keys)):  # a few groups for categorical immutables, one per query at worst
            qi = np.flatnonzero(inv == g)
            cand, c, pred = self._by_immutables[keys[g].tobytes()]
            ans = recourse_paths(U, cand, XU[qi], c, pred)
            start[qi], end[qi], cost[qi], found[qi] = ans.start, ans.end, ans.cost, ans.found
            parts.append((qi, ans.node_paths))
        node_paths = np.full((n, max((p.shape[1] for _, p in parts), default=1)), -1, np.int64)
        for qi, paths in parts:
            node_paths[qi, : paths.shape[1]] = paths
        return GraphPaths(start, end, cost, found, node_paths)

    def _unit(self, X: np.ndarray) -> np.ndarray:
        """Model space -> the public-bounds-scaled space where distances are measured."""
        return (X - self.lower) / (self.upper - self.lower)

    # ------------------------------------------------------------------ files
    def save(self, path: str | Path) -> tuple[Path, Path]:
        """Write ``<path>.npz`` and ``<path>.json``; returns both paths."""
        base = Path(path)
        base = base.with_suffix("") if base.suffix in (".npz", ".json") else base
        base.parent.mkdir(parents=True, exist_ok=True)
        npz, meta = base.with_name(base.name + ".npz"), base.with_name(base.name + ".json")
        g = self.graph.tocsr()
        np.savez(
            npz,
            nodes=self.nodes,
            candidates=self.candidates,
            indptr=g.indptr.astype(np.int64),
            indices=g.indices.astype(np.int64),
            weights=g.data.astype(np.float64),
            lower=np.asarray(self.lower, np.float64),
            upper=np.asarray(self.upper, np.float64),
        )
        doc = {
            "format": ARTEFACT_FORMAT,
            "version": ARTEFACT_VERSION,
            "sha256": hashlib.sha256(npz.read_bytes()).hexdigest(),
            "feature_names": list(self.feature_names),
            "privacy": self.privacy,
            "config": self.config,
        }
        meta.write_text(strict_json.dumps(doc, indent=2, default=_json_default))
        return npz, meta


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def load_artefact(path: str | Path) -> PublishedGraph:
    """Read an artefact written by :meth:`PublishedGraph.save`; refuse other versions and corrupted files."""
    from scipy import sparse

    base = Path(path)
    base = base.with_suffix("") if base.suffix in (".npz", ".json") else base
    npz, meta = base.with_name(base.name + ".npz"), base.with_name(base.name + ".json")
    for f in (npz, meta):
        if not f.exists():
            raise MissingFileError(f"artefact file {f} not found")
    try:
        doc = json.loads(meta.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"artefact {meta} is corrupted: not valid JSON ({err})") from None
    if not isinstance(doc, dict) or doc.get("format") != ARTEFACT_FORMAT:
        raise InvalidInputError(
            f"{meta} is not a PrivRecourse artefact (format {doc.get('format') if isinstance(doc, dict) else None!r})"
        )
    if doc.get("version") != ARTEFACT_VERSION:
        raise IncompatibleError(
            f"artefact {meta} has format version {doc.get('version')!r}; this release reads "
            f"version {ARTEFACT_VERSION} only: republish it with this release"
        )
    if hashlib.sha256(npz.read_bytes()).hexdigest() != doc.get("sha256"):
        raise InvalidInputError(f"artefact {npz} is corrupted: its SHA-256 differs from the one in {meta.name}")
    try:
        with np.load(npz, allow_pickle=False) as z:
            arr = {k: z[k] for k in _ARRAYS}
    except (KeyError, ValueError, OSError) as err:
        raise InvalidInputError(f"artefact {npz} is corrupted or incomplete: {err}") from None
    m = len(arr["nodes"])
    try:
        graph = sparse.csr_matrix((arr["weights"], arr["indices"], arr["indptr"]), shape=(m, m))
    except ValueError as err:
        raise InvalidInputError(f"artefact {npz} is corrupted: inconsistent graph arrays ({err})") from None
    return PublishedGraph(
        arr["nodes"],
        graph,
        arr["candidates"],
        arr["lower"],
        arr["upper"],
        tuple(doc.get("feature_names", ())),
        doc.get("privacy", {}),
        doc.get("config", {}),
    )
