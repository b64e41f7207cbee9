"""PrivRecourse (Pentyala et al. 2023): DP k-means, ledger, artefact, graph, Algorithm 2, baselines."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recourse_privacy.accounting import ReleaseBudget
from recourse_privacy.errors import BudgetExceededError, IncompatibleError, InvalidInputError, NotFittedError
from recourse_privacy.models.dp import DPLogisticModel
from recourse_privacy.privrecourse import (
    ConvergentDPKMeans,
    DiffprivlibKMeans,
    PrivRecourse,
    PublicScaler,
    build_graph,
    load_artefact,
)
from recourse_privacy.privrecourse.baselines import cdp_rho, laplace_noisy_data, mst_synthetic_data
from recourse_privacy.privrecourse.clustering import exponential_mechanism_probabilities
from recourse_privacy.privrecourse.graph import (
    candidate_costs,
    direct_log_density,
    midpoint_log_density,
    recourse_paths,
)
from recourse_privacy.recourse import ActionSet, make_recourse
from recourse_privacy.recourse.registry import RECOURSE_METHODS


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.random((600, 4)) ** 2
    y = (X.sum(axis=1) + rng.normal(0, 0.2, len(X)) > 1.2).astype(int)
    model = DPLogisticModel(epsilon=5.0, data_norm=2.0, random_state=0).fit(X, y)
    return X, y, model


# ---------------------------------------------------------------- ledger and DP k-means
def test_ledger_sums_and_refuses_overspend():
    led = ReleaseBudget(1.0)
    for _ in range(10):
        led.spend("em", 0.075)
        led.spend("lap", 0.025)
    assert led.total_epsilon == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError, match="overspends"):
        led.spend("extra", 0.01)
    assert ReleaseBudget.from_dict(json.loads(json.dumps(led.to_dict()))).total_epsilon == pytest.approx(1.0)


@pytest.mark.parametrize(
    "lap_use,release", [("subzone", "em_point"), ("final", "noisy_mean_paper"), ("final", "noisy_mean_strict")]
)
def test_planned_ledger_totals_epsilon_k(lap_use, release):
    km = ConvergentDPKMeans(10, epsilon=1.0, lap_use=lap_use, release=release)
    led = km.planned_ledger()
    em = [e for e in led.entries if "EM" in e.step and "round" in e.step]
    assert len(em) == 10 and all(e.epsilon == pytest.approx(0.075) for e in em)
    assert led.total_epsilon == pytest.approx(1.0 if lap_use == "final" or release == "em_point" else 1.025)


def test_overspending_readings_are_refused():
    with pytest.raises(BudgetExceededError):  # 11 budgeted rounds at epsilon/10 each
        ConvergentDPKMeans(5, rounds=11, budget_rounds=10).planned_ledger()
    with pytest.raises(BudgetExceededError):  # the Laplace share spent twice
        ConvergentDPKMeans(5, lap_use="subzone", release="noisy_mean_paper").planned_ledger()
    with pytest.raises(BudgetExceededError):
        ConvergentDPKMeans(5, em_frac=0.8, lap_frac=0.3)
    led = ConvergentDPKMeans(5, rounds=11, budget_rounds=10, allow_overspend=True).planned_ledger()
    assert led.overspent and led.total_epsilon == pytest.approx(1.1)


@pytest.mark.parametrize(
    "bad",
    [
        dict(epsilon=0),
        dict(epsilon=-1),
        dict(epsilon=float("inf")),
        dict(delta=1.0),
        dict(delta=-0.1),
        dict(release="mean"),
        dict(zone="box"),
        dict(lap_use="x"),
    ],
)
def test_bad_clustering_input_names_the_parameter(bad):
    key = next(iter(bad))
    with pytest.raises(InvalidInputError, match=key):
        ConvergentDPKMeans(5, **bad)


def test_k_larger_than_data_and_outside_bounds(data):
    X = data[0]
    with pytest.raises(InvalidInputError, match="larger than the data"):
        ConvergentDPKMeans(len(X) + 1).fit(X)
    with pytest.raises(InvalidInputError, match="outside"):
        ConvergentDPKMeans(5).fit(X * 3)
    with pytest.raises(InvalidInputError, match="public bounds"):
        PublicScaler([0, 0], [1, 1]).transform([[0.5, 1.5]])
    assert PublicScaler([0, 0], [2, 4]).transform([[1, 1]], out_of_bounds="raise")[0] == pytest.approx([0.5, 0.25])


@pytest.mark.parametrize("eps,sensitivity", [(8.0, 1.0), (4.0, 0.5)])
def test_em_draws_of_a_round_match_the_softmax(eps, sensitivity):
    """The EM draw of ``ConvergentDPKMeans._round`` itself: frequencies vs exp(eps u / (2 Delta)), normalised.

    K identical clusters of the 4 records x, with zone="cluster" and internal_k=1, so that each
    cluster's EM candidates are exactly its records, utility -|x - m| (m = mean(x)): one round makes K
    independent draws. Pearson's statistic sum (O - Kp)^2 / (Kp) is chi-square with 3 degrees of
    freedom under the exact softmax (every expected count >= 1,400, so the approximation holds):
    refused above its 1 - 1e-6 quantile, 30.7. A mechanism at twice its epsilon (p' proportional
    to p^2) gives a statistic of about 3,000 at these K and eps / sensitivity = 8.
    """
    from scipy.stats import chi2

    x = np.array([0.0, 0.2, 0.5, 1.0])
    K = 20_000
    X = np.tile(x, K)[:, None]
    labels = np.repeat(np.arange(K), len(x))
    km = ConvergentDPKMeans(K, zone="cluster", internal_k=1, em_sensitivity=sensitivity)
    C = np.full((K, 1), 0.5)
    new = km._round(X, labels, C, C.copy(), eps, 1.0, np.random.default_rng(0))[:, 0]
    counts = (new[:, None] == x[None, :]).sum(axis=0)
    assert counts.sum() == K  # every centre is one of the records
    u = -np.abs(x - x.mean())
    w = np.exp(eps * u / (2 * sensitivity))
    p = w / w.sum()  # McSherry and Talwar 2007, by hand
    np.testing.assert_allclose(exponential_mechanism_probabilities(u, eps, sensitivity), p, rtol=1e-12)
    assert (K * p).min() >= 1_400
    stat = float(((counts - K * p) ** 2 / (K * p)).sum())
    assert stat < chi2.isf(1e-6, len(x) - 1), (stat, counts / K, p)


def test_fit_gives_every_round_the_em_and_laplace_shares_its_ledger_records(data, monkeypatch):
    """The EM's epsilon is the one the ledger charges: fit passes each round the ledger's EM and Laplace shares."""
    seen = []
    round_ = ConvergentDPKMeans._round

    def spy(self, X, labels, C, C_prev, eps_e, eps_l, rng):
        seen.append((eps_e, eps_l))
        return round_(self, X, labels, C, C_prev, eps_e, eps_l, rng)

    monkeypatch.setattr(ConvergentDPKMeans, "_round", spy)
    km = ConvergentDPKMeans(20, epsilon=2.0, rounds=4, random_state=0).fit(data[0])
    em = [e.epsilon for e in km.ledger_.entries if "EM" in e.step and "round" in e.step]
    lap = [e.epsilon for e in km.ledger_.entries if "Laplace sub-zone" in e.step]
    assert len(seen) == km.n_rounds_ >= 1
    np.testing.assert_allclose(seen, list(zip(em, lap)), rtol=1e-12)
    assert em[0] == pytest.approx(0.75 * 2.0 / 4)  # em_frac of epsilon / rounds


def test_convergent_kmeans_is_seeded_and_records_rounds(data):
    X = data[0]
    a = ConvergentDPKMeans(30, random_state=3).fit(X)
    b = ConvergentDPKMeans(30, random_state=3).fit(X)
    assert np.array_equal(a.cluster_centers_, b.cluster_centers_)
    assert a.ledger_.total_epsilon <= 1.0 + 1e-12 and len(a.objective_) == a.n_rounds_
    # em_point publishes records (not DP as written; the ledger says so)
    assert not a.ledger_.is_dp
    assert (np.abs(X[:, None, :] - a.cluster_centers_[None]).sum(axis=2).min(axis=0) < 1e-12).all()


def test_zone_candidates_lie_in_the_convergent_zone():
    """Every point of the sampling zone (ball on the diameter [C, m]) is no farther from m than C is."""
    rng = np.random.default_rng(2)
    C, m = rng.random(5), rng.random(5)
    P = rng.random((20000, 5))
    centre, r = (C + m) / 2, np.linalg.norm(C - m) / 2
    inside = np.linalg.norm(P - centre, axis=1) <= r
    assert np.all(np.linalg.norm(P[inside] - m, axis=1) <= np.linalg.norm(C - m) + 1e-12)


def test_diffprivlib_kmeans_is_dp(data):
    km = DiffprivlibKMeans(10, epsilon=1.0, random_state=0).fit(data[0])
    assert km.ledger_.is_dp and km.ledger_.total_epsilon == pytest.approx(1.0)
    assert ((km.cluster_centers_ >= 0) & (km.cluster_centers_ <= 1)).all()


def test_dplloyd_noises_an_empty_cluster_where_diffprivlib_keeps_its_centre():
    """Su et al. (2016)'s DPLloyd releases every cluster's noisy count and sum; diffprivlib skips an empty one."""
    import warnings

    from diffprivlib.models import KMeans

    from recourse_privacy.privrecourse.clustering import _dplloyd_class

    X = np.random.default_rng(0).uniform(0, 0.3, size=(50, 1))
    labels = np.zeros(50, dtype=int)  # cluster 1 is empty
    start = np.array([[0.2], [0.8]])
    moved = []
    for cls in (KMeans, _dplloyd_class()):
        km = cls(n_clusters=2, epsilon=1.0, bounds=([0.0], [1.0]))
        km.bounds = km._check_bounds(km.bounds, 1, min_separation=1e-5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = np.vstack(
                [km._update_centers(X, start.copy(), labels, 1, 2, np.random.RandomState(s))[1] for s in range(20)]
            )
        moved.append(out)
    assert (moved[0] == 0.8).all()  # diffprivlib: the empty cluster's centre never moves
    assert (moved[1] != 0.8).all() and ((moved[1] >= 0) & (moved[1] <= 1)).all()
    assert len(np.unique(moved[1])) == 20  # noise drawn in every call


def test_bounded_laplace_draws_diffprivlibs_distribution_all_at_once():
    """The vectorised draws follow Laplace(v, b) conditioned on [lower, upper] (v clamped in, as diffprivlib does), and
    match diffprivlib's own scalar LaplaceBoundedDomain draws at its calibrated scale; a scale 1.5x off is rejected.
    Kolmogorov-Smirnov at fixed seeds: a p-value below 1e-3 would be a 1-in-1,000 event for the right law."""
    from diffprivlib.mechanisms import LaplaceBoundedDomain
    from scipy import stats

    from recourse_privacy.privrecourse.clustering import bounded_laplace

    n = 20_000

    def law(v, lo, hi, b):
        F = stats.laplace(loc=min(max(v, lo), hi), scale=b).cdf
        return lambda t: (F(t) - F(lo)) / (F(hi) - F(lo))

    def draw(v, lo, hi, b, seed):
        return bounded_laplace(
            np.full(n, v), np.full(n, b), np.full(n, lo), np.full(n, hi), np.random.RandomState(seed)
        )

    for k, (v, lo, hi, b) in enumerate(
        [(0.0, 0.0, 3.0, 5.0), (2.9, 0.0, 3.0, 0.3), (1.5, 0.0, 3.0, 0.05), (4.0, 0.0, 3.0, 1.0)]
    ):
        x = draw(v, lo, hi, b, k)
        assert lo <= x.min() and x.max() <= hi
        assert stats.kstest(x, law(v, lo, hi, b)).pvalue > 1e-3, (v, b)
    assert stats.kstest(draw(1.5, 0.0, 3.0, 0.45, 9), law(1.5, 0.0, 3.0, 0.3)).pvalue < 1e-3
    mech = LaplaceBoundedDomain(epsilon=0.3, sensitivity=1.0, lower=0.0, upper=3.0, random_state=1)
    ref = np.array([mech.randomise(0.4) for _ in range(3000)])
    ours = draw(0.4, 0.0, 3.0, 1.0 / mech.effective_epsilon(), 2)[:3000]
    assert stats.ks_2samp(ref, ours).pvalue > 1e-3


def test_dplloyd_rounds_are_public_and_are_what_diffprivlibs_rule_gives_privrecourse():
    """The rounds never read the row count (add/remove neighbours change it); for PrivRecourse's cluster counts
    diffprivlib's rule (which reads it) gives the same 2 rounds for 100 or 500 clusters in 5 dimensions or more at up
    to 200,000 rows, so nothing else moves there."""
    from diffprivlib.models import KMeans

    from recourse_privacy.privrecourse.clustering import DPLLOYD_ROUNDS, _dplloyd_class

    for k in (100, 500):
        for n in (1_000, 30_000, 200_000):
            for eps in (0.5, 1.0, 4.0):
                assert KMeans(n_clusters=k, epsilon=eps)._calc_iters(5, n) == DPLLOYD_ROUNDS
    km = _dplloyd_class()(n_clusters=2, epsilon=1.0)
    km._public_rounds = 3
    assert km._calc_iters(1, 10) == km._calc_iters(1, 10**6) == 3
    X = np.random.default_rng(1).random((40, 2))
    fit = DiffprivlibKMeans(4, epsilon=1.0, rounds=3, random_state=0).fit(X)
    assert fit.n_rounds_ == 3 and "3 public rounds" in fit.ledger_.entries[0].note
    with pytest.raises(InvalidInputError, match="rounds"):
        DiffprivlibKMeans(4, rounds=0)


# ---------------------------------------------------------------- the graph and Algorithm 2
def test_midpoint_density_is_exact():
    rng = np.random.default_rng(0)
    from sklearn.neighbors import KernelDensity

    for h, scale in ((0.03, 1.0), (0.4, 1.0), (0.3, 20.0)):
        X = rng.random((120, 3)) * scale
        i, j = np.triu_indices(len(X), 1)
        kde = KernelDensity(bandwidth=h).fit(X)
        ref = direct_log_density((X[i] + X[j]) / 2, X, h)
        assert np.abs(midpoint_log_density(X, i, j, kde) - ref).max() < 1e-9


def test_graph_constraints_threshold_and_weights():
    rng = np.random.default_rng(1)
    C = rng.random((60, 3))
    inc = np.array([True, False, False])
    imm = np.array([False, False, False])
    G, kde = build_graph(C, max_distance=0.5, increasing=inc, immutable=imm)
    r, c = G.nonzero()
    assert (C[c, 0] >= C[r, 0] - 1e-9).all()  # increase-only: no edge decreases feature 0
    dist = np.linalg.norm(C[r] - C[c], axis=1)
    assert (dist < 0.5).all()  # d_th
    rho = np.exp(kde.score_samples((C[r] + C[c]) / 2))
    assert np.allclose(np.asarray(G[r, c]).ravel(), dist / rho, rtol=1e-8)  # w = d / rho(midpoint)
    G2, _ = build_graph(C, immutable=np.array([False, True, False]))
    assert G2.nnz == 0  # distinct values of an immutable feature: no edge


def test_algorithm2_paths(data):
    X, y, model = data
    rng = np.random.default_rng(4)
    nodes = rng.random((80, 4))
    cand = model.predict(nodes) == 1
    G, _ = build_graph(nodes)
    cost, pred = candidate_costs(G, cand)
    Q = X[model.predict(X) == 0][:50]
    ans = recourse_paths(nodes, cand, Q, cost, pred)
    assert ans.found.all()
    assert (~cand[ans.start]).all()  # Z_1 is not a candidate
    from scipy.sparse.csgraph import dijkstra

    for q in range(len(Q)):
        p = ans.node_paths[q][ans.node_paths[q] >= 0]
        assert p[0] == ans.start[q] and cand[p[-1]] and (~cand[p[:-1]]).all()
        w = sum(G[a, b] for a, b in zip(p[:-1], p[1:]))
        assert w == pytest.approx(ans.cost[q])
        d = dijkstra(G, indices=p[0])  # the cheapest candidate from Z_1
        assert ans.cost[q] == pytest.approx(d[cand].min())


def test_failures_are_kept_and_counted():
    nodes = np.array([[0.0, 0.0], [0.1, 0.0], [0.9, 0.9]])
    cand = np.array([False, False, True])
    G, _ = build_graph(nodes, max_distance=0.3)  # the candidate is out of reach
    cost, pred = candidate_costs(G, cand)
    ans = recourse_paths(nodes, cand, np.array([[0.0, 0.05], [0.2, 0.1]]), cost, pred)
    assert ans.n_failed == 2 and (ans.end == -1).all()


# ---------------------------------------------------------------- publishing, the artefact, the method
def test_dp_nodes_keep_each_applicants_continuous_immutable_value(data):
    """immutables="project": a noisy node never equals an applicant's age, so paths read each node with
    the applicant's immutable values; the answer keeps them exactly, is accepted by the model, and the
    artefact is unchanged by the queries (post-processing). The "match" reading finds (almost) nothing. Validity is
    one DP draw of the nodes: over seeds 0-11 with 200 queries it ranged 0.875-0.98 (stop 46)."""
    X, y, model = data
    imm = np.array([True, False, False, False])  # a continuous immutable feature, as age is
    aset = ActionSet(imm, np.zeros(4, bool), np.zeros(4), np.ones(4))
    Q = X[model.predict(X) == 0][:40]
    answers = {}
    for mode in ("project", "match"):
        m = make_recourse("privrecourse", n_clusters=40, action_set=aset, immutables=mode, random_state=0)
        m.fit(X, y, model)
        nodes_before = m.artefact_.nodes.copy()
        answers[mode] = res = m.generate(model, Q)
        assert np.array_equal(m.artefact_.nodes, nodes_before)
        if mode == "project":
            ok = res.valid
            assert ok.mean() > 0.8
            np.testing.assert_array_equal(res.counterfactuals[ok][:, 0], Q[ok][:, 0])
            assert (model.predict(res.counterfactuals[ok]) == 1).all()
            for path, q in zip(res.paths, Q):  # every step of a path keeps the immutable value
                np.testing.assert_array_equal(path[:, 0], np.full(len(path), q[0]))
    assert answers["match"].valid.mean() < answers["project"].valid.mean()


def test_a_projecting_artefact_needs_the_model_to_answer(data):
    X, y, model = data
    aset = ActionSet(np.array([True, False, False, False]), np.zeros(4, bool), np.zeros(4), np.ones(4))
    art = PrivRecourse(n_clusters=20, action_set=aset, random_state=0).publish(X, y, model)
    assert art.projects_immutables
    with pytest.raises(InvalidInputError, match="model"):
        art.query(X[:3])
    assert art.query(X[:3], model=model).found.shape == (3,)
    assert make_recourse("privrecourse-data", action_set=aset).immutables == "match"  # records: FACE's reading


def test_the_default_release_is_dp_as_run_and_publishes_no_training_row(data):
    """The registered default is diffprivlib's k-means (Su et al. 2016): the ledger says DP, no node is a record.

    The paper's convergent k-means (``clustering="convergent"``) releases EM-selected records by default,
    which its own ledger marks not DP; a private method's default must be DP as run.
    """
    X, y, _ = data
    art = PrivRecourse(n_clusters=40, epsilon=1.0, random_state=0).publish(X, y)
    assert art.privacy["is_dp"] is True
    same = (art.nodes[:, None, :] == X[None, :, :]).all(axis=2)
    assert not same.any(), "a published node equals a training row"
    paper = PrivRecourse(n_clusters=40, epsilon=1.0, random_state=0, clustering="convergent").publish(X, y)
    assert paper.privacy["is_dp"] is False  # the contrast that made the default change


def test_snapped_nodes_are_the_release_mapped_and_the_candidates_are_judged_on_them(data):
    """``snap_nodes`` maps the DP nodes (post-processing, no privacy): the same release snapped afterwards, its
    candidates the model's decisions on the snapped nodes, one more ledger line at epsilon 0 and the same total."""
    X, y, model = data
    grid = lambda N: np.round(N * 4) / 4  # noqa: E731 (a coarse grid of "values an applicant can hold")
    plain = PrivRecourse(n_clusters=40, epsilon=1.0, random_state=0).publish(X, y, model)
    snapped = PrivRecourse(n_clusters=40, epsilon=1.0, random_state=0).publish(X, y, model, snap_nodes=grid)
    np.testing.assert_allclose(snapped.nodes, np.clip(grid(plain.nodes), plain.lower, plain.upper), atol=1e-12)
    assert not np.allclose(snapped.nodes, plain.nodes)  # the map did something (the test's power)
    np.testing.assert_array_equal(snapped.candidates, model.predict(snapped.nodes) == 1)
    assert snapped.privacy["epsilon"] == plain.privacy["epsilon"] and snapped.privacy["is_dp"]
    extra = [e for e in snapped.privacy["nodes"]["entries"] if "snapped" in e["step"]]
    assert len(extra) == 1 and extra[0]["epsilon"] == 0.0 and extra[0]["dp"]
    assert len(snapped.privacy["nodes"]["entries"]) == len(plain.privacy["nodes"]["entries"]) + 1


def test_publish_states_total_budget_and_roundtrips(data, tmp_path):
    X, y, _ = data
    pr = PrivRecourse(
        n_clusters=40,
        epsilon=1.0,
        model_epsilon=1.0,
        random_state=0,
        clustering="convergent",
        clustering_params={"release": "noisy_mean_strict", "lap_use": "final"},
    )
    art = pr.publish(X, y)
    assert art.epsilon == pytest.approx(1.0 + art.privacy["nodes"]["total"]["epsilon"])
    assert art.privacy["model"]["epsilon"] == pytest.approx(1.0) and art.delta == 0.0
    npz, meta = art.save(tmp_path / "art")
    back = load_artefact(tmp_path / "art")
    Q = X[:20]
    a, b = art.query(Q), back.query(Q)
    assert np.array_equal(a.node_paths, b.node_paths) and back.epsilon == art.epsilon
    with pytest.raises(InvalidInputError, match="feature space"):
        back.query(X[:5, :3])
    # another version, corruption
    doc = json.loads(meta.read_text())
    meta.write_text(json.dumps({**doc, "version": 99}))
    with pytest.raises(IncompatibleError, match="version"):
        load_artefact(tmp_path / "art")
    meta.write_text(json.dumps(doc))
    raw = bytearray(npz.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    npz.write_bytes(bytes(raw))
    with pytest.raises(InvalidInputError, match="corrupted"):
        load_artefact(tmp_path / "art")
    meta.write_text("{not json")
    with pytest.raises(InvalidInputError, match="corrupted"):
        load_artefact(tmp_path / "art")


def test_publish_bad_input(data):
    X, y, model = data
    with pytest.raises(InvalidInputError, match="public bounds"):
        PrivRecourse(n_clusters=5).publish(X * 2, y, model)
    with pytest.raises(InvalidInputError, match="larger than the data"):
        PrivRecourse(n_clusters=len(X) + 1).publish(X, y, model)
    with pytest.raises(InvalidInputError, match="bounds"):
        PrivRecourse(bounds=([0, 0], [1, 1])).publish(X, y, model)
    with pytest.raises(InvalidInputError, match="bounds"):
        PrivRecourse(bounds="wide").publish(X, y, model)
    art = PrivRecourse(n_clusters=10, bounds=([-1], [2]), random_state=0).publish(X, y, model)  # one pair for all
    assert np.array_equal(art.lower, np.full(4, -1.0)) and np.array_equal(art.upper, np.full(4, 2.0))
    with pytest.raises(InvalidInputError, match="delta"):
        make_recourse("privrecourse-mst", delta=0.0)
    with pytest.raises(InvalidInputError, match="epsilon"):
        PrivRecourse(epsilon=0)


@pytest.mark.parametrize("name", ["privrecourse", "privrecourse-laplace", "privrecourse-data"])
def test_registered_methods_give_paths(data, name):
    X, y, model = data
    assert name in RECOURSE_METHODS
    m = make_recourse(name, n_clusters=60, random_state=0)
    with pytest.raises(NotFittedError):
        m.generate(model, X[:3])
    m.fit(X[:300], y[:300], model)
    Q = X[300:][model.predict(X[300:]) == 0][:40]
    res = m.generate(model, Q)
    assert res.paths is not None and len(res.paths) == len(Q)
    assert res.info["n_failed"] == int((~res.valid).sum()) or not res.valid.all()
    for q, p in zip(Q, res.paths):
        assert np.array_equal(p[0], q)
    assert res.valid.mean() > 0.9


def test_action_set_directs_paths(data):
    X, y, model = data
    aset = ActionSet(np.zeros(4, bool), np.array([True, False, False, False]), np.full(4, -np.inf), np.full(4, np.inf))
    m = make_recourse("privrecourse-data", action_set=aset, random_state=0).fit(X[:200], y[:200], model)
    res = m.generate(model, X[200:260][model.predict(X[200:260]) == 0])
    for p in res.paths:
        assert (np.diff(p[1:, 0]) >= -1e-9).all()


def test_laplace_and_mst_baselines():
    rng = np.random.default_rng(0)
    X = rng.random((300, 3))
    noisy, led = laplace_noisy_data(X, epsilon=1.0, random_state=0)
    assert led.total_epsilon == 1.0 and led.is_dp
    # scale d / epsilon = 3: the sample standard deviation of the noise is sqrt(2) * 3 (tolerance ~ 5 sd of its estimate)
    assert abs((noisy - X).std() - np.sqrt(2) * 3) < 0.3
    assert cdp_rho(1.0, 1e-9) == pytest.approx(0.014973, abs=1e-6)
    syn, led, info = mst_synthetic_data(X, epsilon=1.0, random_state=0, iters=200)
    assert syn.shape == (info["n_rows"], 3) and ((syn >= 0) & (syn <= 1)).all()
    assert len(info["tree"]) == 2 and led.total_delta == pytest.approx(1e-9)
    syn2, _, _ = mst_synthetic_data(X, epsilon=1.0, random_state=0, iters=200)
    assert np.array_equal(syn, syn2)


def test_mst_never_releases_the_exact_number_of_private_rows():
    """MST's noise is calibrated to neighbours that add or remove a row, so its synthetic rows must not number the
    private rows (n against n + 1 would be told apart with certainty). By default their number is the model's
    estimate of the total from the noisy 1-way marginals: each marginal's sum has noise of sd sigma sqrt(bins)
    (sigma per cell times sqrt(d) for d marginals sharing rho / 3, averaged over the d of them), so the count is
    n plus noise of sd sigma sqrt(bins) (31.7 here), truncated. A stated ``n_rows`` is public and is used as it is."""
    X = np.random.default_rng(1).random((300, 3))
    sigma = np.sqrt(3.0 / (2.0 * cdp_rho(1.0, 1e-9)))
    counts = []
    for seed in range(8):
        syn, led, info = mst_synthetic_data(X, epsilon=1.0, random_state=seed, iters=20)
        counts.append(len(syn))
        assert info["n_rows"] == len(syn) and "noisy marginals" in led.to_dict()["entries"][0]["note"]
    sd = sigma * np.sqrt(10)
    assert len(set(counts)) >= 6 and 300 not in counts  # exactly 300: about 1.3% a draw (these seeds draw none)
    assert abs(np.mean(counts) - 300) < 4 * sd / np.sqrt(8) and max(abs(c - 300) for c in counts) < 6 * sd
    syn, led, _ = mst_synthetic_data(X, epsilon=1.0, random_state=0, iters=20, n_rows=500)
    assert len(syn) == 500 and led.to_dict()["entries"][0]["note"].endswith("rows: public")


# ---------------------------------------------------------------- the reproduction
def _has_adult():
    import os
    from pathlib import Path

    return (Path(os.environ.get("RECOURSE_PRIVACY_DATA", "/nonexistent")) / "adult.csv").exists()


@pytest.mark.skipif(not _has_adult(), reason="needs adult.csv under RECOURSE_PRIVACY_DATA")
def test_reproduction_small_on_adult(tmp_path):
    from recourse_privacy.reproductions.pentyala2023 import READINGS, run_pentyala2023
    from recourse_privacy.reproductions.registry import REPRODUCTIONS

    assert "pentyala2023" in REPRODUCTIONS and "pentyala2023-audit" in REPRODUCTIONS
    out = run_pentyala2023(
        tmp_path,
        seeds=[0],
        datasets=("adult",),
        n_clusters=100,
        with_table3=False,
        readings={k: READINGS[k] for k in ("FACE", "Ours (em_point)", "Ours (noisy_mean_strict)")},
    )
    df = out.table2.set_index("method")
    assert (tmp_path / "table2.csv").exists() and (tmp_path / "ledger.json").exists()
    assert df.loc["FACE", "pdistance_manifold"] == 0.0  # FACE's nodes are training records
    assert df.loc["Ours (em_point)", "pdistance_manifold"] == 0.0  # em_point publishes records too
    assert df.loc["Ours (noisy_mean_strict)", "pdistance_manifold"] > 0
    assert (df["validity"] > 0.9).all() and (df["n_queries"] == 266).all()
    assert not df.loc["Ours (em_point)", "is_dp"] and df.loc["Ours (noisy_mean_strict)", "is_dp"] == False  # noqa: E712


@pytest.mark.slow
def test_reproduction_full(tmp_path):
    from recourse_privacy.reproductions.pentyala2023 import run_pentyala2023

    out = run_pentyala2023(tmp_path)
    table3 = {row.method: row for row in out.table3}
    assert len(out.table2) == 2 * 3 * 8 and table3["FACE"].increase_only_respected


def test_truncated_density_matches_exact_on_sparse_graphs():
    from recourse_privacy.privrecourse.graph import truncated_log_density

    rng = np.random.default_rng(5)
    X = rng.random((400, 3))
    M = (X[:50] + X[50:100]) / 2
    exact = direct_log_density(M, X, 0.05)
    assert np.abs(truncated_log_density(M, X, 0.05) - exact).max() < 1e-9


def test_knn_density_graph_for_large_sparse_graphs():
    from recourse_privacy.privrecourse.graph import knn_log_density

    rng = np.random.default_rng(6)
    X = rng.random((500, 2))
    G, _ = build_graph(X, n_neighbors=5, density="knn")
    assert G.nnz > 0 and np.isfinite(G.data).all() and (G.data > 0).all()
    # uniform data on [0,1]^2: the k-NN estimate of the density (1) is within a factor 2 in the bulk
    dens = np.exp(knn_log_density(np.full((1, 2), 0.5), X, 20))
    assert 0.5 < dens[0] < 2.0


def test_msts_pair_marginals_of_the_one_way_model_are_outer_products():
    """MST scores every pair from the 1-way model; its 2-way marginals are outer products (independence),
    equal to what mbi's projection of the graphical model computes, pair by pair."""
    from recourse_privacy.privrecourse.baselines import _import_mbi, _independent_pair_marginals, _measure

    mbi = _import_mbi()
    rng = np.random.default_rng(0)
    B = rng.integers(0, 3, size=(300, 4))
    B[:, 1] = np.minimum(B[:, 0] + rng.integers(0, 2, 300), 2)  # dependence in the data, not in the model
    domain = mbi.Domain([f"x{k}" for k in range(4)], [3] * 4)
    model = mbi.MirrorDescent().estimate(domain, _measure(mbi, B, [(k,) for k in range(4)], 3, 5.0, rng), iters=200)
    i, j, est = _independent_pair_marginals(model, 4)
    for k, (a, b) in enumerate(zip(i, j)):
        want = np.asarray(model.project((f"x{a}", f"x{b}")).datavector()).reshape(3, 3)
        np.testing.assert_allclose(est[k], want, rtol=1e-6, atol=1e-6)


def test_sparse_answers_keep_only_the_changes_the_model_needs(data):
    """``sparse=True`` (what a published bundle answers): every answer the plain method gives validly stays valid
    and changes a subset of its features, each to the plain answer's value, and no kept change can go alone;
    a one-hot group changes as one feature (all its columns or none); the rest as the plain method's."""
    from types import SimpleNamespace

    from recourse_privacy.recourse.sparse import feature_units, sparse_counterfactuals

    X, y, model = data
    Q = X[model.predict(X) == 0][:60]
    plain = make_recourse("privrecourse", n_clusters=40, random_state=0).fit(X, y, model).generate(model, Q)
    sparse = make_recourse("privrecourse", n_clusters=40, sparse=True, random_state=0).fit(X, y, model)
    res = sparse.generate(model, Q)
    np.testing.assert_array_equal(res.valid, plain.valid)
    ok = plain.valid
    assert ok.mean() > 0.8 and res.info["sparse"] and res.paths is None
    moved = res.counterfactuals != Q
    assert not (moved & ~(plain.counterfactuals != Q)).any()  # a subset of the plain answer's changes
    np.testing.assert_array_equal(res.counterfactuals[moved], plain.counterfactuals[moved])  # at its values
    np.testing.assert_array_equal(res.counterfactuals[~ok], plain.counterfactuals[~ok])
    assert moved[ok].sum(1).mean() < (plain.counterfactuals != Q)[ok].sum(1).mean()
    for i in np.flatnonzero(ok):  # no kept change could be set back alone
        for f in np.flatnonzero(moved[i]):
            back = res.counterfactuals[i].copy()
            back[f] = Q[i, f]
            assert model.predict(back[None])[0] == 0
    # a one-hot group (columns 2 and 3 here) is one unit: set back whole or kept whole
    units = feature_units(4, (SimpleNamespace(index=np.array([2, 3])),))  # a group's index is all it reads
    assert [u.tolist() for u in units] == [[2, 3], [0], [1]]
    Xg, Xc = np.array([[0.1, 0.1, 1.0, 0.0]] * 3), np.array([[0.9, 0.9, 0.0, 1.0]] * 3)

    class _Rule:  # accepts where the first column is high, or the group's second level is on
        @staticmethod
        def predict(Z):
            return ((Z[:, 0] > 0.5) | (Z[:, 3] > 0.5)).astype(int)

    out = sparse_counterfactuals(_Rule, Xg, Xc, np.ones(3, bool), units)
    assert ((out[:, 2:] == Xg[:, 2:]).all(1) | (out[:, 2:] == Xc[:, 2:]).all(1)).all()
    assert (_Rule.predict(out) == 1).all() and ((out != Xg).sum(1) <= 2).all()


def test_a_graph_whose_every_node_is_accepted_marks_each_query_without_a_start_node(data):
    """Pentyala et al.'s Algorithm 2 starts at the nearest node the model rejects: where the model accepts every
    node there is none, every query fails, and ``info["no_start"]`` says why (the audit's warning reads it)."""
    X, y, model = data

    class _Lenient:  # the published model's decisions: every node accepted, the queries rejected
        n_features_in_ = X.shape[1]

        @staticmethod
        def predict(Z):
            return (np.asarray(Z).sum(1) > 0.05).astype(int)

    Q = np.full((5, X.shape[1]), 0.001)
    m = make_recourse("privrecourse", n_clusters=30, random_state=0).fit(X, y, _Lenient)
    assert _Lenient.predict(m.artefact_.nodes).all()
    res = m.generate(_Lenient, Q)
    assert res.info["no_start"].all() and not res.valid.any()
    ok = make_recourse("privrecourse", n_clusters=30, random_state=0).fit(X, y, model).generate(model, X[:20])
    assert not ok.info["no_start"].any()
