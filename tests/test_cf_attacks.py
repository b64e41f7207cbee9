"""Attacks that counterfactuals enable: extraction (Aivodji et al. 2020, DualCF), membership and attribute inference."""

from __future__ import annotations

import numpy as np
import pytest

from recourse_privacy.attacks.attribute import attribute_inference
from recourse_privacy.attacks.extraction import build_transfer_set, extract_model
from recourse_privacy.attacks.surrogate import attack_features, surrogate_membership
from recourse_privacy.errors import InvalidInputError

W = np.array([2.0, -1.5, 1.0, 0.5])


def target_proba(X):
    p = 1 / (1 + np.exp(-(X @ W - 0.3) * 3))
    return np.column_stack([1 - p, p])


def exact_explain(X, targets):
    """Closed-form recourse for the linear target: project onto its boundary and step 5% past it."""
    z = X @ W - 0.3
    return X - 1.05 * (z / (W @ W))[:, None] * W


def test_transfer_set_shapes_and_query_budget():
    rng = np.random.default_rng(0)
    Q = rng.normal(size=(50, 4))
    X, y = build_transfer_set(Q, target_proba, exact_explain, 20, "cf")
    assert X.shape == (70, 4) and (y[50:] != y[:20]).all()  # every counterfactual crosses the boundary
    X, y = build_transfer_set(Q, target_proba, exact_explain, 20, "dualcf")
    assert X.shape == (90, 4) and (y[70:] == y[:20]).all()  # the counterfactual of the counterfactual crosses back
    with pytest.raises(InvalidInputError, match="exceed the query budget"):
        build_transfer_set(Q, target_proba, exact_explain, 51)
    with pytest.raises(InvalidInputError, match="variant"):
        build_transfer_set(Q, target_proba, exact_explain, 5, "clamp")


def test_counterfactuals_raise_surrogate_fidelity_over_the_base_extraction():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(60, 4))
    X_eval = rng.normal(size=(2000, 4))
    y_eval = target_proba(X_eval).argmax(1)
    res = extract_model(
        Q,
        target_proba,
        exact_explain,
        X_eval,
        y_eval,
        ks=(60,),
        hidden_layers=(16,),
        variants=("base", "cf", "dualcf"),
        architectures=("known", "unknown"),
        random_state=0,
    )
    fid = {(r.variant, r.architecture): r.fidelity for r in res}
    assert len(res) == 6
    for arch in ("known", "unknown"):
        assert fid[("cf", arch)] > fid[("base", arch)]
        assert fid[("dualcf", arch)] > fid[("base", arch)]
    with pytest.raises(InvalidInputError, match="query budget"):
        extract_model(Q, target_proba, exact_explain, X_eval, y_eval, ks=(100,))


def _overfit_world(seed=0):
    """A target that memorises its members (1-NN like) and an adversary with its own data from the same law."""
    rng = np.random.default_rng(seed)
    n = 200
    X = rng.normal(size=(3 * n, 5))
    y = (X[:, 0] + 0.8 * rng.normal(size=3 * n) > 0).astype(int)
    return X[:n], y[:n], X[n : 2 * n], y[n : 2 * n], X[2 * n :], y[2 * n :]


def test_membership_through_an_overfitted_surrogate_beats_chance_and_features_are_shokris():
    from sklearn.neighbors import KNeighborsClassifier

    Xm, ym, Xn, yn, Xa, ya = _overfit_world()
    f = KNeighborsClassifier(n_neighbors=3, weights="distance").fit(Xm, ym)  # the "surrogate" copies an overfitted f

    def shadow(X, y, seed):
        return KNeighborsClassifier(n_neighbors=3, weights="distance").fit(X, y)

    Xt, yt = np.vstack([Xm, Xn]), np.concatenate([ym, yn])
    mem = np.r_[np.ones(len(Xm)), np.zeros(len(Xn))]
    res = surrogate_membership(f.predict_proba, Xt, yt, mem, Xa, ya, make_shadow=shadow, n_shadows=2, random_state=0)
    assert res.threshold.auc > 0.7 and res.learned.auc > 0.6
    assert set(res.threshold.tpr_at_fpr) == {"0.01", "0.1"}
    same = surrogate_membership(f.predict_proba, Xt, yt, mem, Xa, ya, make_shadow=shadow, n_shadows=2, random_state=0)
    np.testing.assert_array_equal(same.learned_scores, res.learned_scores)
    F = attack_features(np.array([[0.2, 0.8], [0.6, 0.4]]), np.array([0, 0]))
    np.testing.assert_allclose(F, [[0.8, 0.2, 0.2], [0.6, 0.4, 0.6]])
    with pytest.raises(InvalidInputError, match="membership"):
        surrogate_membership(f.predict_proba, Xt, yt, mem[:-1], Xa, ya, make_shadow=shadow)


def test_attribute_inference_recovers_an_attribute_the_surrogate_depends_on():
    rng = np.random.default_rng(2)
    n = 600
    X = rng.normal(size=(n, 4))
    X[:, 3] = rng.integers(0, 2, n)  # the sensitive binary attribute, decisive for the label
    y = ((X[:, 3] * 2 - 1) * 2 + 0.3 * X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    from sklearn.linear_model import LogisticRegression

    g = LogisticRegression().fit(X, y)
    res = attribute_inference(g.predict_proba, X[:300], y[:300], 3, (0.0, 1.0), X[300:], y[300:], random_state=0)
    assert res.accuracy > 0.85 and res.accuracy >= res.baseline_accuracy - 0.02
    with pytest.raises(InvalidInputError, match="column"):
        attribute_inference(g.predict_proba, X[:10], y[:10], 9, (0, 1), X[10:], y[10:])


# ---------------------------------------------------------------- Purchase-100 / Texas-100 loaders


def _write_purchase(path, n=30, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.column_stack([rng.integers(1, 101, n), rng.integers(0, 2, (n, 600))])
    np.savetxt(path, rows, fmt="%d", delimiter=",")
    return rows


def test_purchase_and_texas_loaders_read_the_authors_format(tmp_path):
    import hashlib

    from recourse_privacy.data import load_dataset
    from recourse_privacy.data.dataset import ChecksumError
    from recourse_privacy.data.purchase_texas import read_purchase100, read_texas100
    from recourse_privacy.errors import MissingFileError

    rows = _write_purchase(tmp_path / "dataset_purchase")
    X, y = read_purchase100(tmp_path / "dataset_purchase")
    assert X.shape == (30, 600) and (y == rows[:, 0] - 1).all()
    ds = load_dataset("purchase100", data_dir=tmp_path, positive=int(y[0]))
    assert ds.X.shape == (30, 600) and ds.y.sum() == (y == y[0]).sum()
    sha = hashlib.sha256((tmp_path / "dataset_purchase").read_bytes()).hexdigest()
    read_purchase100(tmp_path / "dataset_purchase", sha256=sha)
    with pytest.raises(ChecksumError):
        read_purchase100(tmp_path / "dataset_purchase", sha256="0" * 64)
    rng = np.random.default_rng(1)
    np.savetxt(tmp_path / "texas100_feats", rng.integers(0, 2, (12, 6169)), fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "texas100_labels", rng.integers(1, 101, 12), fmt="%d")
    X, y = read_texas100(tmp_path / "texas100_feats")
    assert X.shape == (12, 6169) and y.min() >= 0 and y.max() <= 99
    assert load_dataset("texas100", data_dir=tmp_path).n_rows == 12
    np.savetxt(tmp_path / "bad", np.column_stack([np.ones(3), 2 * np.ones((3, 600))]), fmt="%d", delimiter=",")
    with pytest.raises(InvalidInputError, match="binary"):
        read_purchase100(tmp_path / "bad")
    with pytest.raises(MissingFileError, match="privacytrustlab"):
        read_purchase100(tmp_path / "absent")
    with pytest.raises(MissingFileError, match="dataset_purchase not found"):
        load_dataset("purchase100", data_dir=tmp_path / "empty")


# ---------------------------------------------------------------- the shipped reproduction


def test_yang2022_is_a_registered_reproduction():
    from recourse_privacy.reproductions.registry import REPRODUCTIONS

    assert "yang2022" in REPRODUCTIONS
    from recourse_privacy.reproductions.yang2022 import PAPER

    assert PAPER["adult"]["t4"]["target"] == 85.6 and set(PAPER) == {"adult", "hospital", "digits"}


@pytest.mark.slow
def test_yang2022_runs_end_to_end_at_tiny_sizes(tmp_path):
    import json

    from recourse_privacy.reproductions.yang2022 import Yang2022Config, run_yang2022

    cfg = Yang2022Config(
        datasets=("digits",),
        n_train=300,
        n_nonmembers=200,
        n_adv=300,
        n_eval=300,
        ks=(100, 200),
        n_fr_queries=30,
        n_mi_targets=100,
        target_epochs=20,
        ae_epochs=5,
        dpc_max_iter=30,
        n_timing=0,
        baselines=("cadex",),
        dice_params={"total_cfs": 1, "max_iter": 100, "min_iter": 10},
    )
    run_yang2022(tmp_path, config=cfg, console=None)
    res = json.loads((tmp_path / "results.json").read_text())["results"]["digits"]
    assert set(res["table4"]) >= {"base", "nondp", "nondp_dualcf", "dpc_faithful", "dpc_hardened", "nondp_cca"}
    for label in ("nondp_cca", "nondp_cf_torch"):  # Table 4's CCA column and its same-trainer cf
        assert set(res["table4"][label]) == {"100", "200"}
        for cell in res["table4"][label].values():
            assert set(cell) == {"known", "unknown"} and all(0 <= v["fidelity"] <= 1 for v in cell.values())
    assert res["quality"]["dpc_hardened_low"]["epsilon_total"] == pytest.approx(2 * cfg.eps_low)


@pytest.mark.slow
def test_yang2022_only_table4_runs_the_target_and_table4_alone(tmp_path):
    import json

    from recourse_privacy.reproductions.yang2022 import Yang2022Config, run_yang2022

    cfg = Yang2022Config(
        datasets=("digits",), n_train=300, n_nonmembers=200, n_adv=300, n_eval=300, ks=(100, 200),
        target_epochs=20, ae_epochs=5, dpc_max_iter=30, n_timing=0, only_table4=True,
        dice_params={"total_cfs": 1, "max_iter": 100, "min_iter": 10},
    )  # fmt: skip
    run_yang2022(tmp_path, config=cfg, console=None)
    res = json.loads((tmp_path / "results.json").read_text())["results"]["digits"]
    assert not {"figure2", "quality", "multiclass", "membership", "timing"} & set(res)
    assert set(res["table4"]) >= {"base", "nondp", "dpc_faithful", "nondp_cca", "nondp_cf_torch"}
    assert set(res["table4"]["nondp_cca"]) == {"100", "200"}


def _yang_data(n=240, d=4, seed=0):
    """A tiny _Data for the yang2022 steps: a linear target on uniform points in [0, 1]^d."""
    from recourse_privacy.models.mlp import MLPModel
    from recourse_privacy.reproductions.yang2022 import _Data

    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    y = (X @ W[:d] > 0.5 * W[:d].sum() - 0.3).astype(np.int64)
    sp = {k: np.arange(i * n // 4, (i + 1) * n // 4) for i, k in enumerate(("train", "non", "adv", "eval"))}
    model = MLPModel(hidden_layers=(8,), epochs=30, lr=1e-2, random_state=0).fit(X[sp["train"]], y[sp["train"]])
    return _Data(X, y, None, [f"x{j}" for j in range(d)], sp, model)


def test_yang2022_cca_column_has_every_k_and_architecture():
    from recourse_privacy.reproductions.yang2022 import Yang2022Config, _cca_columns

    data = _yang_data()
    cfg = Yang2022Config(target_hidden=(8,))
    Qa = data.Qa
    cf = Qa + 0.0  # answers that never cross: every counterfactual is an ordinary labelled point
    out = _cca_columns(data, cfg, (20, 50), cf[:50])
    assert set(out) == {"nondp_cca", "nondp_cf_torch"}
    for label in out:
        assert set(out[label]) == {"20", "50"}
        for k in out[label].values():
            assert set(k) == {"known", "unknown"}
    # nothing crossed, so nothing is clamped: CCA's transfer sets equal cf's, and so do the surrogates
    assert out["nondp_cca"] == out["nondp_cf_torch"]


def _stacked_targets(K=3, n=300, d=3, seed=0):
    from recourse_privacy.attacks.cca import TransferSet, fit_surrogates

    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(K):
        X = rng.random((n, d))
        sets.append(TransferSet(X, (X.sum(1) > d / 2).astype(float), np.zeros(n, bool)))
    return fit_surrogates(sets, (20, 10), epochs=200, random_state=seed), rng.random((K, 40, d))


def test_closest_counterfactuals_meet_the_confidence_and_are_minimal_on_their_segment():
    from recourse_privacy.reproductions.dissanayake2024 import _forward_np, closest_counterfactuals

    nets, Q = _stacked_targets()
    conf = 0.7
    cf, ok = closest_counterfactuals(nets, Q, conf, steps=150)
    logit = np.log(conf / (1 - conf))
    z_cf = _forward_np(nets, cf)
    assert ok.mean() > 0.9  # the favourable region is reachable inside [0, 1]^3 for these targets
    assert (z_cf[ok] >= logit - 1e-4).all()
    # the bisection: 2% less of the step does not reach the confidence (unless the query already did)
    inner = Q + 0.98 * (cf - Q)
    z_q, z_in = _forward_np(nets, Q), _forward_np(nets, inner)
    moved = ok & (z_q < logit)
    assert (z_in[moved] < logit + 1e-4).all()
    assert (cf >= -1e-9).all() and (cf <= 1 + 1e-9).all()


def test_dissanayake2024_rows_are_typed_ordered_and_count_counterfactuals():
    from recourse_privacy.reproductions.dissanayake2024 import Dissanayake2024Config, FidelityRow, run_dataset

    rng = np.random.default_rng(1)
    X = rng.random((900, 4))
    y = (X @ W > 0.5 * W.sum() - 0.3).astype(np.int64)
    cfg = Dissanayake2024Config(
        n_target_train=150, n_pool=60, n_ref=100, batch=20, max_queries=60, n_pairs=3,
        target_epochs=100, surrogate_epochs=100, cf_steps=80,
    )  # fmt: skip
    rows = run_dataset(X, y, "toy", cfg)
    assert all(isinstance(r, FidelityRow) for r in rows)
    assert [(r.queries, r.surrogate, r.attack) for r in rows] == [
        (b, s, a) for b in (20, 40, 60) for s in ("M0", "M1") for a in ("cf", "cca")
    ]
    for r in rows:
        assert 0 <= r.fidelity_low <= r.fidelity <= r.fidelity_high <= 1 and r.n_pairs == 3
        assert np.isnan(r.paper)  # no paper figure for a toy dataset
    cfs = [r.counterfactuals for r in rows if r.attack == "cf" and r.surrogate == "M0"]
    assert cfs == sorted(cfs) and cfs[-1] <= 60  # one counterfactual per rejected query at most, never fewer later
    # every surrogate sees the same answers at each budget
    for s, a in (("M0", "cca"), ("M1", "cf"), ("M1", "cca")):
        assert [r.counterfactuals for r in rows if r.attack == a and r.surrogate == s] == cfs


def test_dissanayake2024_split_is_the_authors_balanced_one():
    from recourse_privacy.reproductions.dissanayake2024 import Dissanayake2024Config, paper_split

    y = np.r_[np.zeros(300, np.int64), np.ones(100, np.int64)]
    train, ref, pool = paper_split(y, Dissanayake2024Config(max_queries=40, batch=20), seed=0)
    # per class: half, a quarter and the rest of the smaller class's 100 rows
    assert [np.bincount(y[p], minlength=2).tolist() for p in (train, ref, pool)] == [[50, 50], [25, 25], [25, 25]]
    assert len(np.unique(np.r_[train, ref, pool])) == 200  # disjoint


def test_dissanayake2024_paper_figures_are_the_authors_means():
    from recourse_privacy.reproductions.dissanayake2024 import PAPER, PAPER_BUDGETS, paper_fidelity

    assert len(PAPER) == 12 and all(len(v) == len(PAPER_BUDGETS) == 20 for v in PAPER.values())
    assert paper_fidelity("heloc", "M0", "cca", 400) == PAPER["heloc", "M0", "cca"][-1]
    assert np.isnan(paper_fidelity("heloc", "M0", "cca", 50)) and np.isnan(paper_fidelity("diabetes", "M0", "cf", 20))
    # the paper's claim, in its own figures: CCA at least the baseline on the test rows at 400 queries
    assert all(
        PAPER[d, m, "cca"][-1] >= PAPER[d, m, "cf"][-1] for d in ("heloc", "adult", "compas") for m in ("M0", "M1")
    )


def test_dissanayake2024_refuses_a_budget_beyond_its_pool():
    from recourse_privacy.reproductions.dissanayake2024 import Dissanayake2024Config

    with pytest.raises(InvalidInputError, match="max_queries"):
        Dissanayake2024Config(n_pool=100, max_queries=400)
    with pytest.raises(InvalidInputError, match="surrogates"):
        Dissanayake2024Config(surrogates=("M2",))


def test_new_reproductions_are_registered():
    from recourse_privacy.reproductions.registry import REPRODUCTIONS

    assert {"dissanayake2024", "release-threat"} <= set(REPRODUCTIONS.names())
