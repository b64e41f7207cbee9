"""Recourse: closed-form answers for linear models, SCFE's batching, constraints, honest failures."""

from __future__ import annotations

import numpy as np
import pytest

from recourse_privacy.models import TorchModel, make_model
from recourse_privacy.recourse import SCFE, ActionSet, LinearRecourse, distances


@pytest.fixture
def linear():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 6))
    y = (X @ np.array([1.0, -2.0, 0.5, 0.0, 1.5, -1.0]) + 0.5 * rng.normal(size=500) > 0).astype(int)
    model = make_model("logistic").fit(X, y)
    return model, X[model.predict(X) == 0]


def test_distances_are_true_norms():
    a, b = np.zeros((1, 2)), np.array([[3.0, -4.0]])
    assert distances(a, b, "l2")[0] == 5.0  # not squared
    assert distances(a, b, "l1")[0] == 7.0
    assert distances(a, b, "linf")[0] == 4.0
    assert distances(a, b, "l0")[0] == 2.0
    with pytest.raises(ValueError, match="unknown norm"):
        distances(a, b, "l3")


def test_linear_l2_is_the_projection(linear):
    model, X = linear
    res = LinearRecourse(margin=0.0).generate(model, X)
    w = model.coef_
    np.testing.assert_allclose(res.distance("l2"), np.abs(model.decision_function(X)) / np.linalg.norm(w), rtol=1e-10)
    delta = res.counterfactuals - X
    cos = delta @ w / (np.linalg.norm(delta, axis=1) * np.linalg.norm(w))
    np.testing.assert_allclose(cos, 1.0, atol=1e-12)  # moves along w
    np.testing.assert_allclose(model.decision_function(res.counterfactuals), 0.0, atol=1e-9)
    assert LinearRecourse().generate(model, X).valid.all()


def test_linear_l1_moves_one_feature(linear):
    model, X = linear
    res = LinearRecourse(norm="l1").generate(model, X)
    assert res.valid.all()
    assert (distances(X, res.counterfactuals, "l0") == 1).all()
    j = np.argmax(np.abs(model.coef_))
    gap = 1e-6 - model.decision_function(X)
    np.testing.assert_allclose(res.distance("l1"), gap / abs(model.coef_[j]), rtol=1e-9)


def test_linear_immutable_and_accepted_points(linear):
    model, X = linear
    imm = np.zeros(6, bool)
    imm[[1, 4]] = True  # the two largest weights
    aset = ActionSet(imm, np.zeros(6, bool), np.full(6, -np.inf), np.full(6, np.inf))
    res = LinearRecourse(action_set=aset).generate(model, X)
    np.testing.assert_array_equal(res.counterfactuals[:, imm], X[:, imm])
    w_m = np.where(imm, 0, model.coef_)
    np.testing.assert_allclose(res.distance("l2"), (1e-6 - model.decision_function(X)) / np.linalg.norm(w_m), rtol=1e-9)
    accepted = np.zeros((3, 6)) + 10 * model.coef_ / np.linalg.norm(model.coef_)
    np.testing.assert_array_equal(LinearRecourse().generate(model, accepted).counterfactuals, accepted)


def test_linear_recourse_refuses_mlp():
    m = make_model("mlp", epochs=1, hidden_layers=(4,)).fit(np.eye(3), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="needs a linear model"):
        LinearRecourse().generate(m, np.eye(3))


def _double_mlp(X, y):
    m = make_model("mlp", random_state=0, epochs=20, hidden_layers=(32,)).fit(X, y)
    return TorchModel(m.torch_module().net.double())


def test_scfe_batched_equals_one_at_a_time():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    model = _double_mlp(X, y)
    Xr = X[model.predict(X) == 0][:40]
    batched = SCFE().generate(model, Xr)
    single = SCFE(batch_size=1).generate(model, Xr)
    np.testing.assert_array_equal(batched.n_iter, single.n_iter)
    np.testing.assert_allclose(batched.counterfactuals, single.counterfactuals, atol=1e-10)
    assert batched.validity > 0.9
    # each row stops at its first valid iterate: valid now, and it needed at least one step
    assert (model.decision_function(batched.counterfactuals[batched.valid]) >= 0).all()
    assert (batched.n_iter[batched.valid] >= 1).all()


def test_scfe_first_valid_iterate_on_linear(linear):
    model, X = linear
    res = SCFE().generate(model, X[:50])
    assert res.valid.all()
    # one Adam step moves each coordinate by at most about lr, so the logit at the first
    # valid iterate exceeds 0 by at most lr * ||w||_1 (plus Adam's overshoot margin)
    assert model.decision_function(res.counterfactuals).max() <= 1.5 * 0.01 * np.abs(model.coef_).sum()


def test_scfe_respects_action_set(linear):
    model, X = linear
    imm = np.array([False, True, False, False, False, False])
    inc = np.array([True, False, False, False, False, False])
    lo, hi = np.full(6, -np.inf), np.full(6, np.inf)
    lo[4], hi[4] = -0.5, 0.5
    aset = ActionSet(imm, inc, lo, hi)
    res = SCFE(action_set=aset).generate(model, X)
    cf = res.counterfactuals
    np.testing.assert_array_equal(cf[:, 1], X[:, 1])
    assert (cf[:, 0] >= X[:, 0] - 1e-12).all()
    inside = (X[:, 4] >= -0.5) & (X[:, 4] <= 0.5)
    assert ((cf[inside, 4] >= -0.5 - 1e-12) & (cf[inside, 4] <= 0.5 + 1e-12)).all()
    assert (aset.violations(cf[inside], X[inside]) == 0).all()


def test_scfe_reports_failures_instead_of_dropping(linear):
    model, X = linear
    far = X[np.argsort(model.decision_function(X))[:20]]
    res = SCFE(max_iter=2, max_rounds=1).generate(model, far)
    assert len(res.valid) == 20 and res.counterfactuals.shape == far.shape
    assert not res.valid.any()
    assert res.summary()["n_invalid"] == 20


def test_scfe_leaves_unmoved_features_exactly_unchanged(linear):
    model, X = linear
    imm = np.array([False, False, False, True, False, False])
    aset = ActionSet(imm, np.zeros(6, bool), np.full(6, -np.inf), np.full(6, np.inf))
    res = SCFE(action_set=aset).generate(model, X[:30])
    np.testing.assert_array_equal(res.counterfactuals[:, 3], X[:30, 3])
