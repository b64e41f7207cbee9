"""FACE: the graph, its weights and directions, shortest paths checked against a brute-force search."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path
from sklearn.neighbors import KernelDensity

from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.recourse import FACE, ActionSet, fit_for, make_recourse, recourse_needs


class Threshold(BaseClassifier):
    """Accepts x iff w.x + b >= 0 (a fixed model for hand-made data)."""

    def __init__(self, w, b):
        self.w, self.b = np.asarray(w, float), float(b)
        self.n_features_in_ = len(self.w)
        self.fitted_ = True

    def decision_function(self, X):
        return self._check_X(X) @ self.w + self.b


def aset(d, immutable=(), increasing=()):
    imm, inc = np.zeros(d, bool), np.zeros(d, bool)
    imm[list(immutable)], inc[list(increasing)] = True, True
    return ActionSet(imm, inc, np.full(d, -np.inf), np.full(d, np.inf))


def test_chain_gives_the_known_path():
    # gaps shrink to the right, so each node's nearest neighbour is the next one: a chain graph
    xs = np.array([0.0, 1.0, 1.9, 2.7, 3.4, 4.0])
    nodes = np.column_stack([xs, np.zeros(6)])
    model = Threshold([1.0, 0.0], -3.2)  # accepts the last two nodes only
    face = FACE(n_neighbors=1).fit(nodes)
    res = face.generate(model, np.array([[-0.5, 0.0]]))
    assert res.valid[0]
    np.testing.assert_array_equal(res.paths[0], np.vstack([[-0.5, 0.0], nodes[:5]]))  # stops at the first accepted node
    np.testing.assert_array_equal(res.counterfactuals[0], nodes[4])
    assert face.graph_.nnz == 2 * 5  # 5 undirected chain edges, both directions


def test_weights_follow_the_kde_at_the_midpoint():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    for kind in ("neglog", "inverse"):
        face = FACE(n_neighbors=4, density_weight=kind, bandwidth=0.7).fit(X)
        g = face.graph_.tocoo()
        kde = KernelDensity(bandwidth=0.7).fit(X)
        a, b = X[g.row], X[g.col]
        dist = np.linalg.norm(a - b, axis=1)
        logp = kde.score_samples((a + b) / 2)
        want = dist * (-logp if kind == "neglog" else np.exp(-logp))
        np.testing.assert_allclose(g.data, want, rtol=1e-10)
        # kNN graph made undirected: j among i's 4 nearest or i among j's
        assert (np.abs(face.graph_ - face.graph_.T) > 1e-12).nnz == 0


def test_epsilon_mode_infinite_radius_is_complete():
    X = np.random.default_rng(1).normal(size=(12, 3))
    face = FACE(mode="epsilon", radius=np.inf).fit(X)
    assert face.graph_.nnz == 12 * 11
    small = FACE(mode="epsilon", radius=0.5).fit(X)
    g = small.graph_.tocoo()
    assert (np.linalg.norm(X[g.row] - X[g.col], axis=1) <= 0.5 + 1e-12).all()


def test_paths_match_brute_force_shortest_paths():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(150, 2))
    Q = rng.normal(size=(25, 2)) - [1.0, 0.0]
    model = Threshold([1.0, 0.5], -0.8)
    face = FACE(n_neighbors=6, bandwidth=0.5).fit(X)
    res = face.generate(model, Q)
    target = model.predict(X) == 1
    for i, q in enumerate(Q):  # one query at a time, as an extra node with its own edges, all-pairs solver
        qq, jj, ww = face._query_edges(q[None])
        n = len(X)
        G = face.graph_.tolil(copy=True)
        G.resize((n + 1, n + 1))
        G[n, jj] = ww
        d = shortest_path(csr_matrix(G), directed=True, indices=[n])[0, :n]
        best = d[target].min()
        if np.isfinite(best):
            assert res.valid[i]
            np.testing.assert_allclose(res.info["path_cost"][i], best, rtol=1e-9)
            # the path's own weighted length is its cost
            p = res.paths[i]
            steps = face._weights(p[:-1], p[1:])
            np.testing.assert_allclose(steps.sum(), best, rtol=1e-9)
        else:
            assert not res.valid[i]


def test_paths_start_at_the_query_and_end_at_the_counterfactual():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    model = Threshold([1.0, 1.0, 0.0], -1.0)
    Q = X[model.predict(X) == 0][:30] + 0.01
    res = fit_for(FACE(n_neighbors=8), X, model.predict(X), model).generate(model, Q)
    assert res.valid.all()
    for i, p in enumerate(res.paths):
        np.testing.assert_array_equal(p[0], Q[i])
        np.testing.assert_array_equal(p[-1], res.counterfactuals[i])
        assert len(p) >= 2
        assert (model.predict(p[1:-1]) == 0).all()  # only the end is accepted (Pentyala et al. 2023, sec. 4.2)
    assert len(res.info["path_cost"]) == 30


def test_directed_edges_forbid_decreasing_an_increase_only_feature():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    model = Threshold([0.0, 1.0], -1.0)  # accepts x1 >= 1: the search wants to move up in x1
    a = aset(2, increasing=[0])
    face = FACE(n_neighbors=8, action_set=a).fit(X)
    g = face.graph_.tocoo()
    assert (X[g.col, 0] >= X[g.row, 0]).all()  # no edge decreases feature 0
    one_way = (face.graph_ - face.graph_.T).tocoo()
    assert (one_way.data != 0).any()  # some pairs are joined in one direction only
    Q = X[model.predict(X) == 0][:40]
    res = face.generate(model, Q)
    assert res.valid.any()
    for p in res.paths:
        assert (np.diff(p[:, 0]) >= 0).all()
    assert (a.violations(res.counterfactuals, Q) == 0).all()
    # without the constraint some paths do decrease feature 0
    free = FACE(n_neighbors=8).fit(X).generate(model, Q)
    assert any((np.diff(p[:, 0]) < 0).any() for p in free.paths)


def test_immutable_features_stay_and_unreachable_queries_are_kept():
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.normal(size=(120, 2)), rng.integers(0, 2, 120).astype(float)])
    model = Threshold([1.0, 0.0, 0.0], -0.5)
    face = FACE(n_neighbors=5, action_set=aset(3, immutable=[2])).fit(X)
    g = face.graph_.tocoo()
    assert (X[g.row, 2] == X[g.col, 2]).all()
    Q = np.array([[-1.0, 0.0, 0.0], [-1.0, 0.0, 1.0], [-1.0, 0.0, 7.0]])  # group 7 does not exist
    res = face.generate(model, Q)
    assert res.valid.tolist() == [True, True, False]
    for p, q in zip(res.paths, Q):
        assert (p[:, 2] == q[2]).all()
    np.testing.assert_array_equal(res.counterfactuals[2], Q[2])
    assert res.paths[2].shape == (1, 3)


def test_candidate_thresholds_and_errors():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 2))
    model = Threshold([1.0, 0.0], 0.0)
    strict = FACE(n_neighbors=10, min_confidence=0.9).fit(X)
    res = strict.generate(model, np.array([[-2.0, 0.0]]))
    assert model.predict_proba(res.counterfactuals)[0, 1] >= 0.9
    with pytest.raises(RuntimeError, match="fit"):
        FACE().generate(model, X[:2])
    with pytest.raises(ValueError, match="mode"):
        FACE(mode="full")
    with pytest.raises(ValueError, match="density_weight"):
        FACE(density_weight="log")
    assert recourse_needs("face") == {"fitting_data"}
    assert isinstance(make_recourse("face", n_neighbors=3), FACE)
