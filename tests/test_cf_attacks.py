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
    assert set(res["table4"]) >= {"base", "nondp", "nondp_dualcf", "dpc_faithful", "dpc_hardened"}
    assert res["quality"]["dpc_hardened_low"]["epsilon_total"] == pytest.approx(2 * cfg.eps_low)
