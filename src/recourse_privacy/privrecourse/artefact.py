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

    def query(self, X: np.ndarray) -> GraphPaths:
        """Algorithm 2 for every row of ``X`` (same feature space as the artefact)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            names = f" ({', '.join(self.feature_names)})" if self.feature_names else ""
            raise InvalidInputError(
                f"the query has {X.shape[-1] if X.ndim else 0} features; the artefact was "
                f"published on {self.n_features}{names}: query in the artefact's feature space"
            )
        X = check_matrix(X, n_features=self.n_features)
        self.prepare()
        imm = np.asarray(self.config.get("immutable", np.zeros(self.n_features, bool)), bool)
        return recourse_paths(
            self._unit(self.nodes),
            self.candidates,
            self._unit(X),
            self._cost,
            self._pred,
            nn_index=self._nn,
            immutable=imm if imm.any() else None,
        )

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
