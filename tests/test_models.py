"""Models: the protocol's derived quantities, reproducibility, wrappers and input errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from recourse_privacy.models import (
    SklearnModel,
    TorchModel,
    accuracy,
    logit_confidence,
    make_model,
    per_example_loss,
)


@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=400) > 0).astype(int)
    return X, y


def test_logistic_logit_proba_loss_confidence(xy):
    X, y = xy
    m = make_model("logistic").fit(X, y)
    z = m.decision_function(X)
    np.testing.assert_allclose(z, X @ m.coef_ + m.intercept_)
    p = m.predict_proba(X)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p[:, 1], 1 / (1 + np.exp(-z)))
    loss = per_example_loss(m, X, y)
    assert loss.mean() == pytest.approx(log_loss(y, p[:, 1]), rel=1e-10)
    conf = logit_confidence(m, X, y)
    p_y = np.where(y == 1, p[:, 1], p[:, 0])
    np.testing.assert_allclose(conf, np.log(p_y) - np.log1p(-p_y), rtol=1e-6, atol=1e-9)
    assert accuracy(m, X, y) > 0.9
    np.testing.assert_array_equal(m.predict(X), (p[:, 1] >= 0.5).astype(int))


def test_model_errors(xy):
    X, y = xy
    m = make_model("logistic")
    with pytest.raises(RuntimeError, match="not fitted"):
        m.decision_function(X)
    m.fit(X, y)
    with pytest.raises(ValueError, match="5"):
        m.decision_function(X[:, :3])
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        make_model("logistic").fit(bad, y)
    with pytest.raises(ValueError, match="binary"):
        make_model("logistic").fit(X, y + 1)
    with pytest.raises(ValueError, match="unknown model 'svm'"):
        make_model("svm")


def test_mlp_seeded_and_learns(xy):
    X, y = xy
    a = make_model("mlp", random_state=3, epochs=30, hidden_layers=(32,), lr=1e-2).fit(X, y)
    b = make_model("mlp", random_state=3, epochs=30, hidden_layers=(32,), lr=1e-2).fit(X, y)
    c = make_model("mlp", random_state=4, epochs=30, hidden_layers=(32,), lr=1e-2).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.allclose(a.decision_function(X), c.decision_function(X))
    assert accuracy(a, X, y) > 0.9


def test_paper_architectures():
    import torch

    widths = {}
    for name in ("mlp", "mlp3-100", "mlp3-333", "mlp3-1000"):
        m = make_model(name, epochs=1).fit(np.eye(4), np.array([0, 1, 0, 1]))
        widths[name] = [
            layer.out_features for layer in m.torch_module().modules() if isinstance(layer, torch.nn.Linear)
        ]
    assert widths == {
        "mlp": [1000, 1],
        "mlp3-100": [100, 100, 100, 1],
        "mlp3-333": [333, 333, 333, 1],
        "mlp3-1000": [1000, 1000, 1000, 1],
    }


def test_sklearn_wrapper_linear_and_not(xy):
    X, y = xy
    lin = SklearnModel(LogisticRegression().fit(X, y))
    assert lin.is_linear and lin.is_differentiable
    np.testing.assert_allclose(lin.decision_function(X), lin.estimator_.decision_function(X))
    rf = SklearnModel(RandomForestClassifier(n_estimators=10, random_state=0)).fit(X, y)
    assert not rf.is_linear and not rf.is_differentiable
    p = np.clip(rf.estimator_.predict_proba(X)[:, 1], 1e-12, 1 - 1e-12)
    np.testing.assert_allclose(rf.predict_proba(X)[:, 1], p, rtol=1e-9)
    with pytest.raises(TypeError, match="not differentiable"):
        rf.torch_module()
    with pytest.raises(ValueError, match=r"classes_ must be \[0, 1\]"):
        SklearnModel(LogisticRegression().fit(X, y + 1))


def test_torch_wrapper_two_logit_output(xy):
    import torch

    X, _ = xy
    net = torch.nn.Sequential(torch.nn.Linear(5, 2)).double()
    m = TorchModel(net)
    out = net(torch.as_tensor(X)).detach().numpy()
    np.testing.assert_allclose(m.decision_function(X), out[:, 1] - out[:, 0])
    with pytest.raises(TypeError, match="module_factory"):
        m.fit(X, np.zeros(len(X), int))


def test_batched_mlp_training_equals_one_at_a_time():
    from _autograd_mlp import fit_autograd
    from recourse_privacy.models.batched import can_batch, fit_mlps_batched

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    rows = [np.sort(rng.choice(300, 150, replace=False)) for _ in range(3)] + [np.arange(100)]
    kw = dict(epochs=4, hidden_layers=(16,), lr=1e-2, batch_size=32)
    alone = [fit_autograd(make_model("mlp", random_state=k, **kw), X[r], y[r]) for k, r in enumerate(rows)]
    together = fit_mlps_batched([make_model("mlp", random_state=k, **kw) for k in range(4)], X, y, rows)
    for a, b in zip(alone, together):
        np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-5)
    assert not can_batch([make_model("mlp", epochs=1), make_model("mlp", epochs=2)])
    assert not can_batch([make_model("logistic"), make_model("logistic")])


def test_a_new_model_is_one_registration_shown_by_list_and_played_by_an_audit():
    """The contract of 'a new model is one file': one registered factory, then `list model` and a tiny audit see it."""
    from typer.testing import CliRunner

    from recourse_privacy.audit import AuditConfig, run_audit
    from recourse_privacy.cli import app
    from recourse_privacy.models.logistic import LogisticModel
    from recourse_privacy.models.registry import MODELS, register_model

    @register_model("throwaway-logistic", description="a strongly regularised logistic regression (contract test)",
                    capabilities=("linear", "gradients"))  # fmt: skip
    def make(random_state=None, **params):
        return LogisticModel(C=0.1, random_state=random_state, **params)

    try:
        listed = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["list", "model"], terminal_width=400)
        assert listed.exit_code == 0 and "throwaway-logistic" in listed.output
        cfg = AuditConfig(model="throwaway-logistic", n_features=10, n_members=60, attacks=("cfd",), shadow_models=2)
        result = run_audit(cfg, None)
        assert result.config.model == "throwaway-logistic"
        assert result.attacks["cfd"].n_members > 0 and 0.0 <= result.attacks["cfd"].auc <= 1.0
    finally:
        MODELS.remove("throwaway-logistic")
