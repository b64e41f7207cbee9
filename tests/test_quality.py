"""CADEX and DiCE (batched == alone, constraints, diversity); CARLA's metrics and Pentyala et al.'s (2023) path
metrics on hand-computed examples; the quality experiment and the `recourse` command end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recourse_privacy.metrics import constraint_violations, path_metrics, quality_metrics, redundancy, ynn
from recourse_privacy.models import TorchModel, make_model
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.recourse import CADEX, ActionSet, DiverseCounterfactuals, RecourseResult, fit_for


class Threshold(BaseClassifier):
    """Accepts x iff w.x + b >= 0."""

    def __init__(self, w, b):
        self.w, self.b = np.asarray(w, float), float(b)
        self.n_features_in_ = len(self.w)
        self.fitted_ = True

    def decision_function(self, X):
        return self._check_X(X) @ self.w + self.b


@pytest.fixture(scope="module")
def mlp64():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] ** 2 - X[:, 2] > 1).astype(int)
    m = make_model("mlp", random_state=0, epochs=20, hidden_layers=(32,)).fit(X, y)
    model = TorchModel(m.torch_module().net.double())  # float64: batched and single runs agree to rounding
    return model, X, y, X[model.predict(X) == 0][:30]


def aset(d, immutable=(), increasing=()):
    imm, inc = np.zeros(d, bool), np.zeros(d, bool)
    imm[list(immutable)], inc[list(increasing)] = True, True
    return ActionSet(imm, inc, np.full(d, -np.inf), np.full(d, np.inf))


# ---------------------------------------------------------------- CADEX
def test_cadex_batched_equals_one_at_a_time(mlp64):
    model, _, _, Q = mlp64
    a = aset(5, immutable=[3], increasing=[0])
    batched = CADEX(action_set=a).generate(model, Q)
    single = CADEX(action_set=a, batch_size=1).generate(model, Q)
    np.testing.assert_array_equal(batched.n_iter, single.n_iter)
    np.testing.assert_allclose(batched.counterfactuals, single.counterfactuals, atol=1e-10)
    assert batched.validity > 0.9
    cf = batched.counterfactuals
    np.testing.assert_array_equal(cf[:, 3], Q[:, 3])  # immutable: exactly the factual value
    assert (cf[:, 0] >= Q[:, 0]).all()  # increase-only
    assert (model.decision_function(cf[batched.valid]) >= 0).all()


def test_cadex_changes_at_most_n_changed_features(mlp64):
    model, _, _, Q = mlp64
    for k in (1, 2):
        res = CADEX(n_changed=k).generate(model, Q)
        assert (res.distance("l0") <= k).all()
        assert res.validity > 0
    # the mask keeps the features of largest first gradient: with k=1 the one moved is argmax |grad|
    import torch

    x = torch.as_tensor(Q, dtype=torch.float64).requires_grad_(True)
    torch.nn.functional.softplus(-model.torch_module()(x)).sum().backward()
    top = x.grad.abs().argmax(dim=1).numpy()
    res = CADEX(n_changed=1).generate(model, Q)
    moved = res.distance("l0") > 0
    np.testing.assert_array_equal(np.argmax(np.abs(res.counterfactuals - Q), axis=1)[moved], top[moved])


def test_cadex_flags_failures():
    model = Threshold([1.0, 0.0], -100.0)

    class Lin(Threshold):
        is_differentiable = True

        def torch_module(self):
            from recourse_privacy.models.torch_utils import linear_module

            return linear_module(self.w, self.b)

    lin = Lin([1.0, 0.0], -100.0)
    res = CADEX(max_iter=5).generate(lin, np.zeros((3, 2)))
    assert not res.valid.any() and (res.n_iter == -1).all()
    with pytest.raises(ValueError, match="needs gradients"):
        CADEX().generate(model, np.zeros((1, 2)))


# ---------------------------------------------------------------- DiCE
def _dice(**kw):
    kw.setdefault("min_iter", 20)
    kw.setdefault("max_iter", 120)
    return DiverseCounterfactuals(**kw)


def test_dice_batched_equals_one_at_a_time(mlp64):
    model, X, y, Q = mlp64
    a = aset(5, immutable=[3])
    d = _dice(action_set=a).fit(X, y, model)
    batched = d.generate(model, Q[:8])
    d.batch_size = 1
    single = d.generate(model, Q[:8])
    np.testing.assert_array_equal(batched.n_iter, single.n_iter)
    np.testing.assert_allclose(batched.info["diverse"], single.info["diverse"], atol=1e-10)
    div = batched.info["diverse"]
    assert div.shape == (8, 4, 5) and batched.info["diverse_valid"].shape == (8, 4)
    np.testing.assert_array_equal(div[:, :, 3], np.repeat(Q[:8, 3:4], 4, axis=1))  # immutable unchanged
    assert batched.validity > 0.8
    # the reported counterfactual is the closest valid one of the k
    w = d.weights_ / d.scale_
    dist = (np.abs(div - Q[:8, None, :]) * w).sum(axis=2)
    for i in np.flatnonzero(batched.valid):
        ok = batched.info["diverse_valid"][i]
        np.testing.assert_array_equal(batched.counterfactuals[i], div[i][ok][np.argmin(dist[i][ok])])


def test_dice_diversity_term_spreads_the_counterfactuals(mlp64):
    model, X, y, Q = mlp64

    def spread(res):
        div = res.info["diverse"]
        pair = np.abs(div[:, :, None, :] - div[:, None, :, :]).sum(axis=3)
        return pair[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]]

    diverse = _dice(posthoc_sparsity_param=None).fit(X, y, model).generate(model, Q[:15])
    plain = _dice(posthoc_sparsity_param=None, diversity_weight=0.0).fit(X, y, model).generate(model, Q[:15])
    assert (spread(diverse) > 1e-3).all()  # the k counterfactuals are distinct
    assert spread(diverse).mean() > 2 * spread(plain).mean()


def test_dice_posthoc_sparsity_only_moves_toward_the_query(mlp64):
    model, X, y, Q = mlp64
    raw = _dice(posthoc_sparsity_param=None).fit(X, y, model).generate(model, Q[:8])
    sparse = _dice().fit(X, y, model).generate(model, Q[:8])
    before = np.abs(raw.info["diverse"] - Q[:8, None, :])
    after = np.abs(sparse.info["diverse"] - Q[:8, None, :])
    assert (after <= before + 1e-12).all() and (after < before - 1e-6).any()
    assert (raw.info["diverse_valid"] <= sparse.info["diverse_valid"]).all()  # stays valid where it was


def test_dice_needs_fit(mlp64):
    model, _, _, Q = mlp64
    with pytest.raises(RuntimeError, match="fit"):
        DiverseCounterfactuals().generate(model, Q)
    with pytest.raises(ValueError, match="feature_weights"):
        DiverseCounterfactuals(feature_weights="mad")
    assert isinstance(fit_for(DiverseCounterfactuals(), Q, np.zeros(len(Q), int), model), DiverseCounterfactuals)


# ---------------------------------------------------------------- metrics
def test_redundancy_hand_example():
    model = Threshold([1.0, 1.0, 0.0], -1.0)  # accepts x0 + x1 >= 1
    X = np.zeros((2, 3))
    X_cf = np.array(
        [
            [2.0, 0.5, 0.3],  # revert x0: 0.5 < 1 (needed); x1: 2 ok; x2: 2.5 ok -> 2
            [0.2, 0.3, 0.0],
        ]
    )  # rejected: NaN
    r = redundancy(model, X, X_cf)
    assert r[0] == 2 and np.isnan(r[1])


def test_ynn_hand_example():
    model = Threshold([1.0], -2.5)
    X_train = np.array([[0.0], [1.0], [2.0], [3.0], [10.0], [11.0]])
    # 5 nearest of 2.6: 3, 2, 1, 0, 10 -> accepted: 3 and 10
    np.testing.assert_allclose(ynn(model, np.array([[2.6], [10.5]]), X_train), [0.4, 0.6])
    assert np.isnan(ynn(model, np.array([[2.6]]), X_train, valid=np.array([False]))[0])


def test_path_metrics_hand_example():
    X_train = np.array([[1.0, 0.0], [3.0, 1.0]])
    path = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 1.0]])  # factual, Z1, Z2 (p = 2)
    from sklearn.neighbors import KernelDensity

    kde = KernelDensity(bandwidth=1.0).fit(X_train)
    m = path_metrics([path, path[:1]], X_train, kde=kde)
    np.testing.assert_allclose(m["pl1"][0], (1 + 2) / 2)
    np.testing.assert_allclose(m["pl2"][0], (1 + np.sqrt(2)) / 2)
    np.testing.assert_allclose(m["pl0"][0], (1 + 2) / 2)
    np.testing.assert_allclose(m["pdistance_manifold"][0], (0 + 1) / 2)  # Z2's nearest training point is (3, 1)

    def log_gauss(z):  # (1/n) sum N(z; x_i, I), by hand
        sq = ((z - X_train) ** 2).sum(axis=1)
        return np.log(np.mean(np.exp(-sq / 2) / (2 * np.pi)))

    np.testing.assert_allclose(m["pdensity"][0], (log_gauss(path[1]) + log_gauss(path[2])) / 2, rtol=1e-10)
    assert all(np.isnan(v[1]) for v in m.values())  # a path of the factual alone has no steps


def test_constraint_violations_widen_ranges_to_the_factual():
    a = ActionSet(
        np.array([True, False, False]),
        np.array([False, True, False]),
        np.array([-np.inf, -np.inf, -1.0]),
        np.array([np.inf, np.inf, 1.0]),
    )
    X = np.array([[0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    X_cf = np.array(
        [
            [0.0, 1.0, 3.0],  # feature 2 already out of range and unchanged: no violation
            [1.0, -1.0, 2.0],
        ]
    )  # immutable changed, decreased, moved out of range: 3
    np.testing.assert_array_equal(constraint_violations(a, X, X_cf), [0, 3])


def test_quality_metrics_average_over_valid_rows():
    model = Threshold([1.0, 1.0], -1.0)
    X = np.zeros((3, 2))
    X_cf = np.array([[1.0, 0.0], [2.0, 2.0], [0.1, 0.0]])
    res = RecourseResult(X, X_cf, model.predict(X_cf) == 1, "x", seconds=3.0)
    q = quality_metrics(res, model, np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 0.0], [0.0, 3.0]]), k=2)
    assert q["validity"] == pytest.approx(2 / 3) and q["n_valid"] == 2
    assert q["l1"] == pytest.approx((1 + 4) / 2) and q["l0"] == pytest.approx(1.5)
    assert q["l2"] == pytest.approx((1 + np.sqrt(8)) / 2) and q["linf"] == pytest.approx(1.5)
    assert q["redundancy"] == pytest.approx((0 + 2) / 2)
    assert q["seconds_per_cf"] == pytest.approx(1.0)
    assert "pdensity" not in q


# ---------------------------------------------------------------- the experiment and the command
def test_run_quality_end_to_end(tmp_path):
    from recourse_privacy.evaluation.quality import run_quality

    res = run_quality(
        "breast_cancer",
        "mlp",
        ["linear", "scfe", "cadex", "dice", "face"],
        n_points=15,
        seed=0,
        out_dir=tmp_path,
        n_train=300,
        model_params={"hidden_layers": (16,), "epochs": 5},
        method_params={
            "dice": {"min_iter": 10, "max_iter": 60},
            "scfe": {"max_iter": 100},
            "face": {"n_neighbors": 10},
        },
    )
    table = json.loads((tmp_path / "quality.json").read_text())
    assert table["linear"] == {"skipped": res.skipped["linear"]} and "linear" in res.skipped
    for name in ("scfe", "cadex", "dice", "face"):
        assert 0 <= table[name]["validity"] <= 1 and table[name]["n"] == 15
    assert "pdensity" in table["face"] and "pdensity" not in table["scfe"]
    assert table["face"]["violations"] == 0 and table["cadex"]["violations"] == 0
    assert (tmp_path / "quality.csv").read_text().startswith("method,validity")
    assert (tmp_path / "quality.png").stat().st_size > 0
    run = json.loads((tmp_path / "quality_run.json").read_text())
    assert run["n_points"] == 15 and run["n_train"] == 300
    with pytest.raises(ValueError, match="unknown recourse method"):
        run_quality("breast_cancer", "mlp", ["nope"])


def test_recourse_command(tmp_path):
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    out = CliRunner().invoke(
        app,
        [
            "recourse",
            "--dataset",
            "breast_cancer",
            "--model",
            "logistic",
            "--methods",
            "linear,face",
            "--n-points",
            "10",
            "--n-train",
            "300",
            "--out",
            str(tmp_path),
            "--method-param",
            "face.n_neighbors=5",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "linear" in out.output and "face" in out.output and "validity" in out.output
    assert set(json.loads((tmp_path / "quality.json").read_text())) == {"linear", "face"}
    bad = CliRunner().invoke(
        app, ["recourse", "--dataset", "breast_cancer", "--methods", "nope", "--out", str(tmp_path)]
    )
    assert bad.exit_code == 2 and "unknown recourse method" in bad.output


def test_a_model_that_accepts_almost_no_one_is_named_in_the_warning():
    """Diabetes' readmission label: a logistic model accepts almost no training row, so data-driven methods
    find nothing; the run says why instead of leaving a bare validity 0."""
    from recourse_privacy.evaluation.quality import _FEW_ACCEPTED, _warning

    text = _warning(100, 100, 0.004)
    assert text is not None and "accepts 0.4% of the training rows" in text and "REVISE" in text
    assert _warning(100, 100, _FEW_ACCEPTED) is None
    both = _warning(40, 100, 0.0)
    assert "only 40 held-out rows" in both and "accepts 0% " in both
