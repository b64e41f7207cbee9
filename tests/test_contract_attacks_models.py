"""Contract tests over the attack, model and defense registries (in the spirit of scikit-learn's estimator checks).

Every registered entry is checked by being registered: a new attack must return one finite score per
target and a direction, deterministically; a new model must implement the model protocol and keep
the capabilities it declares (a linear model's logit is w.x + b; a differentiable model's torch
module gives the same logit); a new defense must accept or refuse a configuration before any work.
"""

from __future__ import annotations

import numpy as np
import pytest

from recourse_privacy.attacks import ATTACKS, AttackScores, run_attack
from recourse_privacy.attacks.registry import ATTACK_NEEDS, SIGNALS
from recourse_privacy.audit import DEFENSES, AuditConfig, stages
from recourse_privacy.audit.defenses import Defense
from recourse_privacy.errors import InvalidInputError, NotFittedError, UnknownNameError
from recourse_privacy.models import MODELS, make_model
from recourse_privacy.recourse.registry import MODEL_CAPABILITIES

GAME = AuditConfig(
    dataset="synthetic",
    n_features=12,
    n_members=200,
    shadow_models=4,
    n_calibration=100,
    attacks=tuple(ATTACKS.names()),
)


@pytest.fixture(scope="module")
def inputs():
    """What the adversary sees in one small game: recourse of every target, shadow models, its pool."""
    cfg = GAME.validate()
    game = stages.prepare_game(cfg, stages.load_data(cfg))
    defense = DEFENSES.get("none").obj
    method = defense.shadow_recourse(cfg, None)
    make = lambda seed: make_model("logistic", random_state=seed)  # noqa: E731
    targets = stages.train_owner(make, game, cfg.seed)
    res, _ = defense.owner_recourse(cfg, method, targets.model, game.X_members, game.y_members, targets.X)
    cfd = res.distance(cfg.distance)
    shadow = stages.train_shadow_models(cfg, make, method, game, targets, cache_dir=None, progress=lambda *a: None)
    online = stages.train_online_models(cfg, make, method, game, targets, cache_dir=None, progress=lambda *a: None)
    query = stages.owner_cfd_query(lambda X: method.generate(targets.model, X), cfg.distance)
    return stages.attack_inputs(cfg, game, targets, res, cfd, shadow, online, query)


@pytest.mark.parametrize("entry", ATTACKS.entries(), ids=lambda e: e.name)
def test_attack_contract(entry, inputs):
    assert entry.description and entry.needs <= set(ATTACK_NEEDS) and entry.meta["signal"] in SIGNALS
    scores = run_attack(entry.name, inputs)
    assert isinstance(scores, AttackScores) and scores.name == entry.name
    s = np.asarray(scores.scores)
    assert s.shape == (inputs.n_targets,) and np.isfinite(s).all()
    assert scores.direction in ("greater", "less", "n/a")
    again = run_attack(entry.name, inputs)
    np.testing.assert_array_equal(again.scores, s)  # same inputs, same seed: same scores


def test_an_attack_needing_shadow_models_refuses_to_run_without_them(inputs):
    needy = [e.name for e in ATTACKS.entries() if "shadow_models" in e.needs]
    assert needy
    from dataclasses import replace

    with pytest.raises(InvalidInputError, match="needs shadow models"):
        run_attack(needy[0], replace(inputs, shadow=None))


def test_unknown_names_are_errors_that_list_the_registered_ones():
    for registry in (ATTACKS, MODELS, DEFENSES):
        with pytest.raises(UnknownNameError) as err:
            registry.get("no-such-entry")
        assert all(name in str(err.value) for name in registry.names())


def _tiny_data(seed: int = 0, n: int = 120, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)  # rows within the DP models' norm bound 1
    y = (X @ np.linspace(1, -1, d) + 0.1 * rng.normal(size=n) > 0).astype(int)
    return X, y


#: parameters that keep each built-in model tiny; an unlisted (new) entry is fitted with its defaults
SMALL_PARAMS = {
    "mlp": {"hidden_layers": (8,), "epochs": 3},
    "mlp3-100": {"hidden_layers": (8, 8, 8), "epochs": 3},
    "mlp3-333": {"hidden_layers": (8, 8, 8), "epochs": 3},
    "mlp3-1000": {"hidden_layers": (8, 8, 8), "epochs": 3},
    "dp-mlp": {"hidden_layers": (8,), "epochs": 2, "batch_size": 40, "delta": 1e-3},
}


@pytest.mark.parametrize("entry", MODELS.entries(), ids=lambda e: e.name)
def test_model_contract(entry):
    caps = entry.meta["capabilities"]
    assert entry.description and caps <= set(MODEL_CAPABILITIES)
    params = dict(SMALL_PARAMS.get(entry.name, {}))
    if entry.meta["dp"]:
        params["epsilon"] = 2.0
        with pytest.raises(InvalidInputError, match="epsilon"):
            make_model(entry.name)
    X, y = _tiny_data()
    unfitted = make_model(entry.name, random_state=0, **params)
    with pytest.raises(NotFittedError):
        unfitted.decision_function(X)
    model = unfitted.fit(X, y)
    assert model is unfitted and model.n_features_in_ == X.shape[1]
    z = model.decision_function(X)
    assert z.shape == (len(X),) and np.isfinite(z).all()
    p = model.predict_proba(X)
    assert p.shape == (len(X), 2) and np.allclose(p.sum(axis=1), 1) and ((0 <= p) & (p <= 1)).all()
    np.testing.assert_array_equal(model.predict(X), (p[:, 1] >= 0.5).astype(int))
    if "linear" in caps:
        assert model.is_linear
        np.testing.assert_allclose(z, X @ model.coef_ + model.intercept_, rtol=1e-10, atol=1e-10)
    if "gradients" in caps:
        import torch

        assert model.is_differentiable
        module = model.torch_module()
        dtype = next(module.parameters()).dtype
        with torch.no_grad():
            zt = module(torch.as_tensor(X, dtype=dtype)).numpy()
        np.testing.assert_allclose(zt, z, rtol=1e-4, atol=1e-4)
    twin = make_model(entry.name, random_state=0, **params).fit(X, y)  # same seed, same model
    np.testing.assert_allclose(twin.decision_function(X), z, rtol=1e-6, atol=1e-6)
    with pytest.raises(InvalidInputError, match="features"):
        model.decision_function(X[:, :-1])


@pytest.mark.parametrize("entry", DEFENSES.entries(), ids=lambda e: e.name)
def test_defense_contract(entry):
    defense = entry.obj
    assert isinstance(defense, Defense) and entry.description
    # each defense either accepts the undefended default (with an epsilon where it needs one) or says why not
    base = dict(dataset="synthetic", n_features=10, n_members=100, normalize_rows=True)
    needs_eps = entry.name != "none"
    cfg = AuditConfig(**base, defense=entry.name, epsilon=1.0 if needs_eps else None).validate()
    name, params = defense.model(cfg)
    assert name in MODELS and defense.recourse(cfg) in ("linear", "laplace")
    if needs_eps:
        with pytest.raises(InvalidInputError, match="epsilon"):
            AuditConfig(**base, defense=entry.name).validate()
