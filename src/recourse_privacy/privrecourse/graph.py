"""The recourse graph on published nodes (Pentyala et al. 2023, Algorithm 1 lines 3-18) and Algorithm 2, batched.

:func:`build_graph`: a Gaussian KDE rho fitted on the nodes only (post-processing of the
release), weights w_ij = d(C_i, C_j) / rho((C_i + C_j) / 2) (``weight="inverse"``, Algorithm 1
line 4; ``"neglog"`` is FACE's -log rho), an edge when d < ``max_distance`` (d_th), optionally
only among each node's ``n_neighbors`` nearest (a sparse neighbour graph for large node sets),
directed where a feature may only increase (an edge i -> j needs C_j >= C_i there), none where
an immutable feature differs.

:func:`recourse_paths` answers a whole batch: each query's start node is its nearest
non-favourable node (Z_1, Algorithm 2 lines 1-2 as sec. 4.2 describes it), then ONE
multi-source Dijkstra from all candidates on the reversed graph gives every node's cheapest
candidate and the path to it (Algorithm 2 lines 3-6 for all queries at once). Queries whose
start node reaches no candidate are kept and flagged (``found`` False).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_choice, check_matrix

__all__ = ["GraphPaths", "build_graph", "recourse_paths", "WEIGHTS"]

WEIGHTS = ("inverse", "neglog")
_MIN_WEIGHT = 1e-12  # csgraph treats explicit zeros inconsistently: keep every weight > 0
_MIN_DENSITY = 1e-12


def _allowed(A: np.ndarray, B: np.ndarray, increasing: np.ndarray, immutable: np.ndarray, tol: float) -> np.ndarray:
    ok = ~((B < A - tol) & increasing).any(axis=1)
    ok &= ~((np.abs(B - A) > tol) & immutable).any(axis=1)
    return ok


def build_graph(
    nodes: np.ndarray,
    *,
    weight: str = "inverse",
    bandwidth: float | str = "scott",
    max_distance: float = np.inf,
    n_neighbors: int | None = None,
    increasing=None,
    immutable=None,
    tol: float = 1e-9,
    density: str = "kde",
):
    """Directed weighted graph (scipy CSR, ``(m, m)``) on ``nodes``; returns ``(graph, kde)``.

    ``density="kde"`` (default): the Gaussian KDE at each edge midpoint; ``"knn"``: FACE's k-NN
    density proxy k / (m * V_d * r_k^d), r_k the distance from the midpoint to its k-th nearest
    node (k = ``n_neighbors`` or 10), for large sparse graphs where a KDE sum is too slow.
    """
    from scipy import sparse
    from sklearn.neighbors import KernelDensity, NearestNeighbors

    nodes = check_matrix(nodes, "nodes")
    m, d = nodes.shape
    if m < 2:
        raise InvalidInputError("the graph needs at least 2 nodes")
    check_choice(weight, "weight", WEIGHTS)
    inc = np.zeros(d, bool) if increasing is None else np.asarray(increasing, bool)
    imm = np.zeros(d, bool) if immutable is None else np.asarray(immutable, bool)
    if inc.shape != (d,) or imm.shape != (d,):
        raise InvalidInputError(f"increasing/immutable masks must have {d} entries")
    if not (max_distance > 0):
        raise InvalidInputError(f"max_distance must be > 0; got {max_distance!r}")
    kde = KernelDensity(kernel="gaussian", bandwidth=bandwidth).fit(nodes)
    if n_neighbors is None and np.isinf(max_distance):
        i, j = np.triu_indices(m, k=1)
    else:
        nn = NearestNeighbors().fit(nodes)
        if n_neighbors is not None:
            A = nn.kneighbors_graph(n_neighbors=min(int(n_neighbors), m - 1), mode="distance")
            if np.isfinite(max_distance):
                A.data[A.data >= max_distance] = 0
                A.eliminate_zeros()
        else:
            A = nn.radius_neighbors_graph(radius=max_distance, mode="distance")
        A = sparse.triu(A + A.T, k=1).tocoo()
        i, j = A.row.astype(np.int64), A.col.astype(np.int64)
    Ci, Cj = nodes[i], nodes[j]
    dist = np.sqrt(((Ci - Cj) ** 2).sum(axis=1))
    near = dist < max_distance
    i, j, Ci, Cj, dist = i[near], j[near], Ci[near], Cj[near], dist[near]
    check_choice(density, "density", ("kde", "knn"))
    if density == "knn":
        logp = knn_log_density((Ci + Cj) / 2.0, nodes, n_neighbors or 10)
    else:
        logp = midpoint_log_density(nodes, i, j, kde, floor=np.log(_MIN_DENSITY) if weight == "inverse" else None)
    w = weights_from_log_density(logp, dist, weight)
    fwd = _allowed(Ci, Cj, inc, imm, tol)
    bwd = _allowed(Cj, Ci, inc, imm, tol)
    src = np.concatenate([i[fwd], j[bwd]])
    dst = np.concatenate([j[fwd], i[bwd]])
    graph = sparse.csr_matrix((np.concatenate([w[fwd], w[bwd]]), (src, dst)), shape=(m, m))
    return graph, kde


def midpoint_log_density(nodes: np.ndarray, i: np.ndarray, j: np.ndarray, kde, *, floor: float | None = None):
    """log of the Gaussian KDE (``kde``, fitted on ``nodes``) at the midpoints (x_i + x_j) / 2 of the edges (i, j).

    Dense graphs (at least m^2 / 20 edges) on up to 5,000 nodes: exact, through one matrix product: with u = x_i - x_k and v = x_j - x_k,
    ||(u + v) / 2||^2 = (||u||^2 + ||v||^2) / 2 - ||x_i - x_j||^2 / 4, so
    sum_k exp(-||m_ij - x_k||^2 / 2h^2) = exp(||x_i - x_j||^2 / 8h^2) (S S^T)_ij with
    S_ik = exp(-||x_i - x_k||^2 / 4h^2). A factor that underflows drops a term below 1e-323, so
    the product is exact to double precision wherever (S S^T)_ij > 1e-250; the other edges are
    evaluated directly (scikit-learn), except those whose density is then provably below
    ``floor`` (a log density under which the weight is floored anyway). Sparse or larger graphs:
    :func:`truncated_log_density` at the midpoints.
    """
    from scipy.spatial.distance import cdist

    m, d = nodes.shape
    h = float(kde.bandwidth_)
    if m > 5000 or len(i) < m * m / 20:
        # a sparse graph: the kernel sum over the nodes within sqrt(2 * 30) h of each midpoint
        return truncated_log_density((nodes[i] + nodes[j]) / 2.0, nodes, h)
    D2 = cdist(nodes, nodes, "sqeuclidean")
    with np.errstate(under="ignore"):
        S = np.exp(-D2 / (4 * h * h))
    G = (S @ S.T)[i, j]
    corr = D2[i, j] / (8 * h * h)
    norm = np.log(m) + 0.5 * d * np.log(2 * np.pi * h * h)
    with np.errstate(divide="ignore"):
        logp = np.log(G) + corr - norm
    tiny = G <= 1e-250
    if floor is not None:
        tiny &= np.log(1e-250 + m * 1e-323) + corr - norm > floor
        logp[(G <= 1e-250) & ~tiny] = -np.inf  # provably below the floor
    if tiny.any() and floor is not None:  # the nearest node bounds the density: skip provably floored edges
        from sklearn.neighbors import KDTree

        t = np.flatnonzero(tiny)
        r = KDTree(nodes).query((nodes[i[t]] + nodes[j[t]]) / 2.0, k=1)[0][:, 0]
        low = -r * r / (2 * h * h) + np.log(m) - norm <= floor
        logp[t[low]] = -np.inf
        tiny[t[low]] = False
    if tiny.any():
        logp[tiny] = direct_log_density((nodes[i[tiny]] + nodes[j[tiny]]) / 2.0, nodes, h)
    return logp


def knn_log_density(M: np.ndarray, nodes: np.ndarray, k: int) -> np.ndarray:
    """log of the k-NN density estimate k / (m V_d r_k^d) at the rows of ``M`` (Poyiadzi et al. 2020's proxy)."""
    from scipy.special import gammaln
    from sklearn.neighbors import NearestNeighbors

    m, d = nodes.shape
    k = min(int(k), m)
    r = NearestNeighbors(n_neighbors=k).fit(nodes).kneighbors(M, return_distance=True)[0][:, -1]
    log_vd = 0.5 * d * np.log(np.pi) - gammaln(0.5 * d + 1)
    with np.errstate(divide="ignore"):
        return np.log(k) - np.log(m) - log_vd - d * np.log(np.maximum(r, 1e-12))


def truncated_log_density(
    M: np.ndarray, nodes: np.ndarray, h: float, *, cutoff: float = 30.0, chunk: int = 20000
) -> np.ndarray:
    """The Gaussian KDE's log density at the rows of ``M``, summing only kernels above exp(-``cutoff``).

    Each dropped kernel is below e^-30 (about 1e-13) of a kernel's peak, so the density is
    under-estimated by less than e^-30 times the kernel's peak value; a midpoint with no node
    that close gets -inf (its weight is then floored). Cost: the nodes within sqrt(2 cutoff) h of
    each midpoint (a KD-tree radius query), not all m nodes.
    """
    from sklearn.neighbors import NearestNeighbors

    m, d = nodes.shape
    norm = np.log(m) + 0.5 * d * np.log(2 * np.pi * h * h)
    nn = NearestNeighbors(radius=h * np.sqrt(2 * cutoff)).fit(nodes)
    out = np.empty(len(M))
    for a in range(0, len(M), chunk):
        dist, _ = nn.radius_neighbors(M[a : a + chunk], return_distance=True)
        lens = np.fromiter((len(x) for x in dist), np.int64, len(dist))
        D = np.concatenate(dist) if lens.sum() else np.zeros(0)
        s = np.bincount(
            np.repeat(np.arange(len(dist)), lens), weights=np.exp(-D * D / (2 * h * h)), minlength=len(dist)
        )
        with np.errstate(divide="ignore"):
            out[a : a + chunk] = np.log(s) - norm
    return out


def direct_log_density(M: np.ndarray, nodes: np.ndarray, h: float, chunk: int = 2048) -> np.ndarray:
    """The Gaussian KDE's log density at the rows of ``M``, by log-sum-exp over all nodes (exact, chunked).

    scikit-learn's ``KernelDensity.score_samples`` loses accuracy far in the tails (values
    near -23 where the density is e^-170), so the exact form is used here.
    """
    from scipy.spatial.distance import cdist
    from scipy.special import logsumexp

    m, d = nodes.shape
    norm = np.log(m) + 0.5 * d * np.log(2 * np.pi * h * h)
    out = np.empty(len(M))
    for a in range(0, len(M), chunk):
        out[a : a + chunk] = logsumexp(-cdist(M[a : a + chunk], nodes, "sqeuclidean") / (2 * h * h), axis=1) - norm
    return out


def weights_from_log_density(logp: np.ndarray, dist: np.ndarray, weight: str) -> np.ndarray:
    """w = d / rho (paper 003) or d * -log rho (FACE) from log rho at the midpoints, floored at 1e-12."""
    if weight == "inverse":
        w = dist / np.maximum(np.exp(logp), _MIN_DENSITY)
    else:
        w = dist * np.maximum(-logp, _MIN_WEIGHT)
    return np.maximum(w, _MIN_WEIGHT)


def edge_weights(kde, A: np.ndarray, B: np.ndarray, dist: np.ndarray, weight: str = "inverse") -> np.ndarray:
    """w = d / rho(midpoint) (paper 003) or d * -log rho(midpoint) (FACE), floored at 1e-12."""
    if not len(A):
        return np.zeros(0)
    return weights_from_log_density(kde.score_samples((A + B) / 2.0), dist, weight)


@dataclass(frozen=True)
class GraphPaths:
    """Answers of Algorithm 2 for a batch: per query the start node, the end node, the cost and the path."""

    start: np.ndarray  # (n,) Z_1's node index (-1: no non-favourable node)
    end: np.ndarray  # (n,) Z*'s node index (-1: no reachable candidate)
    cost: np.ndarray  # (n,) weighted path length from Z_1 to Z* (inf: failure)
    found: np.ndarray  # (n,) bool
    node_paths: np.ndarray  # (n, longest) node indices Z_1 .. Z*, -1 padded

    @property
    def n_failed(self) -> int:
        return int((~self.found).sum())


def candidate_costs(graph, candidates: np.ndarray):
    """One multi-source Dijkstra from all candidates on the reversed graph: (cost, pred toward a candidate)."""
    from scipy.sparse.csgraph import dijkstra

    m = graph.shape[0]
    if not candidates.any():
        return np.full(m, np.inf), np.full(m, -9999, np.int64)
    cost, pred, _ = dijkstra(
        graph.T.tocsr(), directed=True, indices=np.flatnonzero(candidates), min_only=True, return_predecessors=True
    )
    return cost, pred.astype(np.int64)


def recourse_paths(
    nodes: np.ndarray,
    candidates: np.ndarray,
    queries: np.ndarray,
    cost: np.ndarray,
    pred: np.ndarray,
    nn_index=None,
    immutable=None,
) -> GraphPaths:
    """Algorithm 2 for every row of ``queries`` from the precomputed :func:`candidate_costs`.

    With an ``immutable`` mask, the start node is the nearest non-favourable node with the
    query's immutable values (none: a failure).
    """
    from sklearn.neighbors import NearestNeighbors

    n = len(queries)
    non = np.flatnonzero(~candidates)
    start = np.full(n, -1, np.int64)
    imm = np.zeros(nodes.shape[1], bool) if immutable is None else np.asarray(immutable, bool)
    if len(non) and n and not imm.any():
        nn = nn_index if nn_index is not None else NearestNeighbors(n_neighbors=1).fit(nodes[non])
        start = non[nn.kneighbors(queries, n_neighbors=1, return_distance=False)[:, 0]]
    elif len(non) and n:  # Z_1 must share the query's immutable values (no edge changes them either)
        keys, inv = np.unique(np.vstack([nodes[non][:, imm], queries[:, imm]]), axis=0, return_inverse=True)
        inv = inv.ravel()
        node_key, query_key = inv[: len(non)], inv[len(non) :]
        for g in np.intersect1d(node_key, query_key):  # one group per distinct immutable value (a few)
            members, qi = non[node_key == g], np.flatnonzero(query_key == g)
            ind = NearestNeighbors(n_neighbors=1).fit(nodes[members]).kneighbors(queries[qi], return_distance=False)
            start[qi] = members[ind[:, 0]]
    c = np.where(start >= 0, cost[np.maximum(start, 0)], np.inf)
    found = np.isfinite(c)
    chain = [np.where(found, start, -1)]
    cur = chain[0].copy()
    active = found & (pred[np.maximum(cur, 0)] >= 0)
    while active.any():
        cur = np.where(active, pred[np.maximum(cur, 0)], cur)
        chain.append(np.where(active, cur, -1))
        active &= pred[np.maximum(cur, 0)] >= 0
    node_paths = np.stack(chain, axis=1) if n else np.zeros((0, 1), np.int64)
    end = np.where(found, node_paths[np.arange(n), (node_paths >= 0).sum(axis=1) - 1] if n else -1, -1)
    return GraphPaths(start, end.astype(np.int64), c, found, node_paths)
