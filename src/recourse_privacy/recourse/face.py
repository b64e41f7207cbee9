"""FACE (Poyiadzi et al. 2020): recourse paths along a density-weighted graph of data points."""

from __future__ import annotations

import math
import time

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.hyperparams import Float, Int
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.validation import as_generator, check_matrix, check_positive_float, check_positive_int

MODES = ("knn", "epsilon")
DENSITY_WEIGHTS = ("neglog", "inverse")
_MIN_WEIGHT = 1e-12  # scipy.sparse.csgraph reads a stored 0 as an edge only in some paths: keep weights > 0


@register_recourse(
    "face",
    description="Poyiadzi et al. FACE: shortest density-weighted paths on a graph of data points",
    needs=("fitting_data",),
    cost=10,
)
class FACE:
    """Poyiadzi et al.'s FACE: shortest density-weighted paths from a query to accepted data points.

    :meth:`fit` builds one directed graph on the training points (the nodes), used for every
    query afterwards:

    - **edges**: ``mode="knn"``: i and j are joined when one is among the other's
      ``n_neighbors`` nearest (L2); ``mode="epsilon"``: when ||x_i - x_j|| <= ``radius``
      (``radius=inf`` gives the fully connected graph of Pentyala et al. 2023, Table 2);
    - **actionability** (Pentyala et al. 2023, Algorithm 1, lines 5-10): an edge i -> j exists only
      if the move respects ``action_set``: immutable features equal (neighbours are searched
      within groups of equal immutable values), increase-only features not decreasing, and
      x_j inside the ranges. Both directions are kept when both are allowed, one when only
      one is;
    - **weights** from the edge length and a Gaussian kernel density estimate p (scikit-learn
      ``KernelDensity`` on the nodes, ``bandwidth`` default Scott's rule) at the midpoint:
      ``density_weight="neglog"`` is FACE's w = -log p((x_i + x_j)/2) * ||x_i - x_j||
      (the density-weighted path integral with f = -log, floored at 1e-12 so that a density
      above 1 cannot give a negative weight); ``"inverse"`` is the weight of Pentyala et al. 2023,
      w = ||x_i - x_j|| / p((x_i + x_j)/2) (Algorithm 1, line 4).

    :meth:`generate` joins each query to the graph by the same rule (its k nearest nodes or
    the nodes within ``radius``, in its immutable group, through allowed moves only, with the
    same weights): the query is a source node with outgoing edges only. Candidate targets are
    the nodes the model accepts (optionally with probability >= ``min_confidence`` and KDE
    log-density >= ``min_log_density``, FACE's t_p and t_d). One multi-source Dijkstra
    (``scipy.sparse.csgraph.dijkstra`` with ``min_only``) on the reversed graph gives every
    node's cost to its cheapest candidate and the path to it, so all queries are answered
    from one shortest-path run. The counterfactual is the end of the cheapest path; the whole
    path, factual first, is in ``RecourseResult.paths``; ``info["path_cost"]`` holds its
    weighted length. A query with no reachable candidate keeps itself as counterfactual
    (path of one point) and is flagged invalid.

    Differences from CARLA's FACE: weighted edges (CARLA's graph is unweighted), ``mode``,
    ``n_neighbors`` and ``radius`` are parameters (CARLA hard-codes 50 and 0.25, in a
    min-max space; our ``radius=1.0`` default is for standardised features), the graph is
    built once (CARLA rebuilds it per query on a random fraction of the data; ``max_nodes``
    subsamples once, seeded) and increase-only features are honoured.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "n_neighbors": Int(1, 10**6),
        "radius": Float(0, math.inf, low_open=True, finite=False),
        "max_nodes": Int(2, 10**8, optional=True),
        "tol": Float(0, 1),
    }

    def __init__(
        self,
        *,
        mode: str = "knn",
        n_neighbors: int = 50,
        radius: float = 1.0,
        density_weight: str = "neglog",
        bandwidth: float | str = "scott",
        min_confidence: float | None = None,
        min_log_density: float | None = None,
        max_nodes: int | None = None,
        action_set: ActionSet | None = None,
        tol: float = 1e-8,
        random_state=None,
    ):
        if mode not in MODES:
            raise InvalidInputError(f"mode must be one of {MODES}; got {mode!r}")
        if density_weight not in DENSITY_WEIGHTS:
            raise InvalidInputError(f"density_weight must be one of {DENSITY_WEIGHTS}; got {density_weight!r}")
        if min_confidence is not None and not 0 < min_confidence < 1:
            raise InvalidInputError(f"min_confidence must be in (0, 1) or None; got {min_confidence!r}")
        if not (isinstance(bandwidth, str) and bandwidth in ("scott", "silverman")):
            check_positive_float(bandwidth, "bandwidth")
        self.mode = mode
        self.n_neighbors = check_positive_int(n_neighbors, "n_neighbors")
        self.radius = check_positive_float(radius, "radius") if not np.isinf(radius) else float("inf")
        self.density_weight = density_weight
        self.bandwidth = bandwidth
        self.min_confidence = min_confidence
        self.min_log_density = min_log_density
        self.max_nodes = None if max_nodes is None else check_positive_int(max_nodes, "max_nodes", minimum=2)
        self.action_set = action_set
        self.tol = tol
        self.random_state = random_state

    # ------------------------------------------------------------------ the graph
    def fit(self, X: np.ndarray, y: np.ndarray | None = None, model=None) -> FACE:
        """Build the graph on the rows of ``X`` (the nodes); ``y`` and ``model`` are not needed."""
        from scipy import sparse
        from sklearn.neighbors import KernelDensity

        X = check_matrix(X)
        if len(X) < 2:
            raise InvalidInputError("FACE.fit needs at least 2 data points")
        if self.action_set is not None:
            self.action_set.check(X.shape[1])
        t0 = time.perf_counter()
        if self.max_nodes is not None and len(X) > self.max_nodes:
            keep = np.sort(as_generator(self.random_state).choice(len(X), self.max_nodes, replace=False))
            X = X[keep]
        self.nodes_ = X
        self.kde_ = KernelDensity(kernel="gaussian", bandwidth=self.bandwidth).fit(X)
        self.log_density_ = gaussian_log_density(X, X, self.kde_.bandwidth_)
        imm = self._aset(X.shape[1]).immutable
        keys = X[:, imm]
        self.group_keys_, self.node_group_ = np.unique(keys, axis=0, return_inverse=True)
        self.node_group_ = self.node_group_.ravel()
        self.group_nn_ = [
            self._group_index(X, np.flatnonzero(self.node_group_ == g)) for g in range(len(self.group_keys_))
        ]

        # undirected candidate pairs (i < j), within immutable groups (a few groups: a loop over them)
        pairs = []
        for members, nn in self.group_nn_:
            if len(members) < 2:
                continue
            if self.mode == "epsilon" and np.isinf(self.radius):
                r, c = np.triu_indices(len(members), k=1)
            else:
                if self.mode == "knn":
                    A = nn.kneighbors_graph(n_neighbors=min(self.n_neighbors, len(members) - 1), mode="connectivity")
                else:
                    A = nn.radius_neighbors_graph(radius=self.radius, mode="connectivity")
                A = sparse.triu(A + A.T, k=1).tocoo()
                r, c = A.row, A.col
            pairs.append(np.column_stack([members[r], members[c]]))
        ij = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
        logp = midpoint_log_density(X, ij[:, 0], ij[:, 1], self.kde_.bandwidth_)
        w = self._weights(X[ij[:, 0]], X[ij[:, 1]], logp)
        fwd = self._allowed(X[ij[:, 0]], X[ij[:, 1]]) & np.isfinite(w)
        bwd = self._allowed(X[ij[:, 1]], X[ij[:, 0]]) & np.isfinite(w)
        src = np.concatenate([ij[fwd, 0], ij[bwd, 1]])
        dst = np.concatenate([ij[fwd, 1], ij[bwd, 0]])
        self.graph_ = sparse.csr_matrix((np.concatenate([w[fwd], w[bwd]]), (src, dst)), shape=(len(X), len(X)))
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _aset(self, d: int) -> ActionSet:
        return self.action_set if self.action_set is not None else ActionSet.unconstrained(d)

    @staticmethod
    def _group_index(X: np.ndarray, members: np.ndarray):
        """The node indices of one immutable group and a NearestNeighbors index on them."""
        from sklearn.neighbors import NearestNeighbors

        return members, NearestNeighbors().fit(X[members])

    # ------------------------------------------------------------------ queries
    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """The cheapest path from each row of ``X`` to a node the model accepts; its end is the counterfactual."""
        return generate_recourse(self, model, X, info={"mode": self.mode, "density_weight": self.density_weight})

    def _check_fitted(self, X: np.ndarray) -> None:
        if not hasattr(self, "graph_"):
            raise NotFittedError(
                "FACE needs fit(X_train, y_train, model) first: it builds its graph on data "
                "points (use recourse_privacy.recourse.fit_for)"
            )
        if X.shape[1] != self.nodes_.shape[1]:
            raise InvalidInputError(f"X has {X.shape[1]} features; FACE's graph was built on {self.nodes_.shape[1]}")

    def _search(self, model, X: np.ndarray, state=None) -> SearchOutput:
        """One multi-source Dijkstra for all rows; the paths walked back from every query at once."""
        from scipy.sparse.csgraph import dijkstra

        nodes, n = self.nodes_, len(X)
        target = self._candidates(model)
        cost = np.full(len(nodes), np.inf)
        pred = np.full(len(nodes), -9999, dtype=np.int64)
        if target.any():  # one multi-source run on the reversed graph: every node's cost to its nearest candidate
            cost, pred = dijkstra(
                self.graph_.T.tocsr(),
                directed=True,
                indices=np.flatnonzero(target),
                min_only=True,
                return_predecessors=True,
            )[:2]
        q, j, w = self._query_edges(X)
        total = w + cost[j]
        order = np.lexsort((total, q))  # by query, then by cost
        q, j, total = q[order], j[order], total[order]
        first = np.ones(len(q), bool)
        first[1:] = q[1:] != q[:-1]
        best_node = np.full(n, -1, dtype=np.int64)
        best_cost = np.full(n, np.inf)
        best_node[q[first]], best_cost[q[first]] = j[first], total[first]
        found = np.isfinite(best_cost)
        best_node[~found] = -1

        # walk the predecessor chains of all queries at once (pred points toward the candidate)
        chain = [best_node]
        cur = best_node.copy()
        active = found & (pred[np.maximum(cur, 0)] >= 0)
        while active.any():
            cur = np.where(active, pred[np.maximum(cur, 0)], cur)
            chain.append(np.where(active, cur, -1))
            active = active & (pred[np.maximum(cur, 0)] >= 0)
        chain = np.stack(chain, axis=1)  # (n, longest path), -1 padded
        end = np.where(found, chain[np.arange(n), (chain >= 0).sum(axis=1) - 1], -1)
        X_cf = np.where(found[:, None], nodes[np.maximum(end, 0)], X)
        paths = tuple(np.vstack([X[i], nodes[chain[i][chain[i] >= 0]]]) for i in range(n))
        info = {
            "path_cost": best_cost,
            "path_nodes": chain,
            "graph_nodes": len(nodes),
            "graph_edges": int(self.graph_.nnz),
            "n_candidates": int(target.sum()),
            "fit_seconds": getattr(self, "fit_seconds_", float("nan")),
        }
        return SearchOutput(X_cf, found=found, paths=paths, info=info)

    def _candidates(self, model) -> np.ndarray:
        """Nodes the model accepts (FACE's I_CT), with the optional confidence and density thresholds."""
        z = model.decision_function(self.nodes_)
        ok = z >= 0
        if self.min_confidence is not None:  # the classifier's own probability (Poyiadzi et al. 2020), not the cutoff's
            if callable(getattr(model, "log_odds", None)):
                t = self.min_confidence
                ok &= model.log_odds(self.nodes_) >= math.log(t / (1.0 - t))
            else:
                ok &= model.predict_proba(self.nodes_)[:, 1] >= self.min_confidence
        if self.min_log_density is not None:
            ok &= self.log_density_ >= self.min_log_density
        return ok

    def _query_edges(self, X: np.ndarray):
        """Edges query -> node by the graph's rule: (query index, node index, weight), allowed moves only."""
        G = len(self.group_keys_)
        imm = self._aset(X.shape[1]).immutable
        allk = np.vstack([self.group_keys_, X[:, imm]])
        inv = np.unique(allk, axis=0, return_inverse=True)[1].ravel()
        lookup = np.full(inv.max() + 1, -1, dtype=np.int64)
        lookup[inv[:G]] = np.arange(G)
        qgroup = lookup[inv[G:]]  # -1: no node shares the query's immutable values
        qs, js = [], []
        for g in np.unique(qgroup[qgroup >= 0]):
            members, nn = self.group_nn_[g]
            qi = np.flatnonzero(qgroup == g)
            if self.mode == "epsilon" and np.isinf(self.radius):
                qs.append(np.repeat(qi, len(members)))
                js.append(np.tile(members, len(qi)))
                continue
            if self.mode == "knn":
                ind = nn.kneighbors(X[qi], n_neighbors=min(self.n_neighbors, len(members)), return_distance=False)
                qs.append(np.repeat(qi, ind.shape[1]))
                js.append(members[ind.ravel()])
            else:
                ind = nn.radius_neighbors(X[qi], radius=self.radius, return_distance=False)
                lens = np.array([len(a) for a in ind])
                qs.append(np.repeat(qi, lens))
                js.append(members[np.concatenate(ind)] if lens.sum() else np.zeros(0, np.int64))
        q = np.concatenate(qs) if qs else np.zeros(0, np.int64)
        j = np.concatenate(js).astype(np.int64) if js else np.zeros(0, np.int64)
        ok = self._allowed(X[q], self.nodes_[j])
        q, j = q[ok], j[ok]
        w = self._weights(X[q], self.nodes_[j])
        fin = np.isfinite(w)
        return q[fin], j[fin], w[fin]

    def _weights(self, A: np.ndarray, B: np.ndarray, logp: np.ndarray | None = None) -> np.ndarray:
        """Edge weight of each move A[e] -> B[e] (symmetric in A, B); ``logp``: the log density at the midpoints, if known."""
        if not len(A):
            return np.zeros(0)
        dist = np.sqrt(((B - A) ** 2).sum(axis=1))
        if logp is None:
            logp = gaussian_log_density((A + B) / 2.0, self.nodes_, self.kde_.bandwidth_)
        if self.density_weight == "neglog":
            w = dist * np.maximum(-logp, _MIN_WEIGHT)
        else:
            with np.errstate(over="ignore"):
                w = dist * np.exp(-logp)
        return np.maximum(w, _MIN_WEIGHT)

    def _allowed(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Whether each move A[e] -> B[e] respects the action set (Pentyala et al. 2023, Algorithm 1, lines 6-9)."""
        a = self._aset(A.shape[1])
        ok = ~((np.abs(B - A) > self.tol) & a.immutable).any(axis=1)
        ok &= ~((B < A - self.tol) & a.increasing).any(axis=1)
        ok &= ~((B < a.lower - self.tol) | (B > a.upper + self.tol)).any(axis=1)
        return ok


#: values (rows x nodes) per block of the KDE functions: 2 MiB of float64, which stays in cache
KDE_BLOCK_ELEMENTS = 1 << 18


def _kde_rows(n_nodes: int) -> int:
    """Rows per block of :func:`gaussian_log_density` and :func:`midpoint_log_density` (at least 16)."""
    return max(16, KDE_BLOCK_ELEMENTS // max(n_nodes, 1))


def gaussian_log_density(M: np.ndarray, nodes: np.ndarray, h: float) -> np.ndarray:
    """Log density of the Gaussian KDE on ``nodes`` with bandwidth ``h`` at the rows of ``M`` (exact, blocked).

    ``log(mean_i N(m; x_i, h^2 I))`` by log-sum-exp over every node, the value scikit-learn's
    ``KernelDensity(kernel="gaussian").score_samples`` approximates with a tree: squared distances
    ``|m|^2 + |x|^2 - 2 m.x`` from float64 matrix products on blocks of rows that stay in cache
    (:data:`KDE_BLOCK_ELEMENTS`), in one thread. Equal to scikit-learn's within 1e-8 where that is
    accurate (it loses accuracy far in the tails: up to 7e-3 at log densities near -30 on HELOC),
    and over ten times faster.
    """
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    m, d = nodes.shape
    norm = np.log(m) + 0.5 * d * np.log(2 * np.pi * h * h)
    x = torch.as_tensor(nodes, dtype=torch.float64)
    q = torch.as_tensor(M, dtype=torch.float64)
    xx = (x * x).sum(1)
    out = torch.empty(len(q), dtype=torch.float64)
    rows = _kde_rows(m)
    with torch_threads(1), torch.no_grad():
        for lo in range(0, len(q), rows):
            b = q[lo : lo + rows]
            sq = torch.addmm(xx[None, :], b, x.T, alpha=-2.0).add_((b * b).sum(1, keepdim=True)).clamp_(min=0.0)
            out[lo : lo + rows] = torch.logsumexp(sq.mul_(-0.5 / (h * h)), dim=1)
    return out.numpy() - norm


#: most nodes for which :func:`midpoint_log_density` keeps the (nodes x nodes) float64 kernel matrix (256 MiB)
MAX_KERNEL_NODES = 5792


def midpoint_log_density(nodes: np.ndarray, i: np.ndarray, j: np.ndarray, h: float) -> np.ndarray:
    """:func:`gaussian_log_density` on ``nodes`` at the midpoints of the edges ``(i[e], j[e])`` between nodes.

    By the parallelogram law, |(a + b)/2 - x|^2 = (|a - x|^2 + |b - x|^2)/2 - |a - b|^2/4, so
    the kernel sum at the midpoint of nodes a, b is exp(|a - b|^2 / (8 h^2)) * sum_k K[a, k] K[b, k]
    with K = exp(-D / (4 h^2)) on the nodes' squared distances D: one kernel matrix (n^2 exponentials)
    and a product of two of its rows per edge, instead of n exponentials per edge. The sum is
    at least K[a, a] K[b, a] = exp(-D[a, b] / (4 h^2)); edges that long (it underflows) and graphs of
    more than :data:`MAX_KERNEL_NODES` nodes are computed directly.
    """
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    n = len(nodes)
    if not len(i) or n > MAX_KERNEL_NODES:
        return gaussian_log_density((nodes[i] + nodes[j]) / 2.0, nodes, h)
    norm = np.log(n) + 0.5 * nodes.shape[1] * np.log(2 * np.pi * h * h)
    x = torch.as_tensor(nodes, dtype=torch.float64)
    ti, tj = torch.as_tensor(i), torch.as_tensor(j)
    out = torch.empty(len(i), dtype=torch.float64)
    with torch_threads(1), torch.no_grad():
        xx = (x * x).sum(1)
        K = torch.addmm(xx[None, :], x, x.T, alpha=-2.0).add_(xx[:, None]).clamp_(min=0.0)
        dij = K[ti, tj]
        K.mul_(-0.25 / (h * h)).exp_()
        rows = _kde_rows(n)
        for lo in range(0, len(i), rows):
            a, b = ti[lo : lo + rows], tj[lo : lo + rows]
            out[lo : lo + rows] = (K[a] * K[b]).sum(1).log_()
    out = (out + dij / (8 * h * h)).numpy()
    bad = ~np.isfinite(out)
    if bad.any():
        out[bad] = gaussian_log_density((nodes[i[bad]] + nodes[j[bad]]) / 2.0, nodes, h) + norm
    return out - norm
