"""Growing Spheres, CCHVAE and REVISE: closed-form checks on linear models, batching, constraints, failures."""

from __future__ import annotations

import numpy as np
import pytest

from recourse_privacy.models import TorchModel, make_model
from recourse_privacy.recourse import (
    CCHVAE,
    REVISE,
    VAE,
    ActionSet,
    GrowingSpheres,
    fit_for,
    make_recourse,
    recourse_needs,
)
from recourse_privacy.recourse.growing_spheres import search_seed, shell_draws

W = np.array([1.0, -2.0, 0.5, 0.0, 1.5, -1.0])


@pytest.fixture(scope="module")
def linear():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 6))
    y = (X @ W + 0.5 * rng.normal(size=500) > 0).astype(int)
    model = make_model("logistic").fit(X, y)
    return model, X, y, X[model.predict(X) == 0]


@pytest.fixture(scope="module")
def manifold():
    """Rows near a 2-D plane in 6-D (a manifold a small VAE can learn), labelled by a linear rule."""
    rng = np.random.default_rng(3)
    t = rng.normal(size=(600, 2))
    X = t @ rng.normal(size=(2, 6)) + 0.05 * rng.normal(size=(600, 6))
    y = (X @ W > 0).astype(int)
    model = make_model("logistic").fit(X, y)
    return model, X, y


def _aset(d, imm=(), inc=(), lo=None, hi=None):
    m = np.zeros(d, bool)
    m[list(imm)] = True
    n = np.zeros(d, bool)
    n[list(inc)] = True
    return ActionSet(m, n, np.full(d, -np.inf) if lo is None else lo, np.full(d, np.inf) if hi is None else hi)


# ---------------------------------------------------------------- Growing Spheres
def test_shell_draws_lie_in_their_shell():
    for p in (1, 2):
        off = shell_draws(7, 4, 2000, 5, p, 0.2)
        r = np.linalg.norm(off, ord=p, axis=1)
        assert r.min() >= 0.8 - 1e-12 and r.max() < 1.0
        # radius uniform on [0.8, 1.0): mean 0.9, sd 0.2 / sqrt(12) / sqrt(2000) ~ 0.0013
        assert abs(r.mean() - 0.9) < 0.006
        np.testing.assert_array_equal(off, shell_draws(7, 4, 2000, 5, p, 0.2))


def test_gs_cost_is_close_to_and_never_below_the_exact_l2_distance(linear):
    model, _, _, X = linear
    res = GrowingSpheres(random_state=0).generate(model, X)
    assert res.valid.all() and (res.n_iter >= 1).all()
    exact = np.abs(model.decision_function(X)) / np.linalg.norm(model.coef_)
    d = res.distance("l2")
    assert (d >= exact - 1e-9).all()  # nothing valid lies closer than the hyperplane
    assert (d < res.n_iter * 0.2 + 1e-12).all() and (d >= (res.n_iter - 1) * 0.2 - 1e-12).all()  # found in its shell
    gap = d - exact
    assert np.median(gap) < 0.2  # within one shell step for most points
    assert gap.max() < 2 * 0.2  # at worst the next shell


def test_gs_l1_shells(linear):
    model, _, _, X = linear
    res = GrowingSpheres(norm="l1", random_state=0).generate(model, X[:60])
    assert res.valid.all()
    exact_l1 = np.abs(model.decision_function(X[:60])) / np.abs(model.coef_).max()  # L1-optimal cost
    d = res.distance("l1")
    assert (d >= exact_l1 - 1e-9).all() and (d < res.n_iter * 0.2 + 1e-12).all()


def test_gs_same_seed_same_output_and_batch_independence(linear):
    model, _, _, X = linear
    a = GrowingSpheres(random_state=5).generate(model, X[:80])
    b = GrowingSpheres(random_state=5).generate(model, X[:80])
    np.testing.assert_array_equal(a.counterfactuals, b.counterfactuals)
    # every row searches with the same shell offsets whatever its batch: subsets give the same rows
    parts = [GrowingSpheres(random_state=5).generate(model, X[i : min(i + 13, 80)]) for i in range(0, 80, 13)]
    np.testing.assert_array_equal(a.counterfactuals, np.concatenate([p.counterfactuals for p in parts]))
    np.testing.assert_array_equal(a.n_iter, np.concatenate([p.n_iter for p in parts]))
    c = GrowingSpheres(random_state=6).generate(model, X[:80])
    assert not np.array_equal(a.counterfactuals, c.counterfactuals)


def test_gs_worlds_draw_independently_and_reproducibly(linear):
    model, X_all, y, X = linear
    gs = GrowingSpheres(random_state=3)
    a = fit_for(gs, X_all[:250], y[:250], model).generate(model, X[:40])
    b = fit_for(gs, X_all[:250], y[:250], model).generate(model, X[:40])
    c = fit_for(gs, X_all[250:], y[250:], model).generate(model, X[:40])
    np.testing.assert_array_equal(a.counterfactuals, b.counterfactuals)  # same world, same draws
    assert not np.array_equal(a.counterfactuals, c.counterfactuals)  # another world, other draws
    assert not hasattr(gs, "seed_")  # fit_for fitted copies


def test_gs_respects_the_action_set(linear):
    model, _, _, X = linear
    lo, hi = np.full(6, -np.inf), np.full(6, np.inf)
    lo[4], hi[4] = -0.5, 0.5
    aset = _aset(6, imm=[1], inc=[0], lo=lo, hi=hi)
    res = GrowingSpheres(action_set=aset, random_state=0).generate(model, X)
    cf = res.counterfactuals
    np.testing.assert_array_equal(cf[:, 1], X[:, 1])
    assert (cf[:, 0] >= X[:, 0]).all()
    inside = (X[:, 4] >= -0.5) & (X[:, 4] <= 0.5)
    assert (aset.violations(cf[inside], X[inside]) == 0).all()
    assert res.validity > 0.9


def test_gs_reports_failures_and_keeps_accepted_points(linear):
    model, X_all, _, X = linear
    far = X[np.argsort(model.decision_function(X))[:10]]
    res = GrowingSpheres(max_iter=1, random_state=0).generate(model, far)
    assert len(res.valid) == 10 and not res.valid.any()
    np.testing.assert_array_equal(res.counterfactuals, far)  # failures keep the factual
    assert (res.n_iter == -1).all() and res.summary()["n_invalid"] == 10
    # nothing mutable: no recourse, reported, not dropped
    frozen = GrowingSpheres(action_set=_aset(6, imm=range(6)), random_state=0).generate(model, X[:5])
    assert not frozen.valid.any() and (frozen.n_iter == -1).all()
    acc = X_all[model.predict(X_all) == 1][:5]
    res = GrowingSpheres(random_state=0).generate(model, acc)
    np.testing.assert_array_equal(res.counterfactuals, acc)
    assert res.valid.all() and (res.n_iter == 0).all()


def test_gs_feature_selection_sparsifies_and_stays_valid(linear):
    model, _, _, X = linear
    dense = GrowingSpheres(random_state=0).generate(model, X[:60])
    sparse = GrowingSpheres(random_state=0, feature_selection=True).generate(model, X[:60])
    assert sparse.valid.all()
    assert (sparse.distance("l0") <= dense.distance("l0")).all()
    assert sparse.distance("l0").mean() < dense.distance("l0").mean()
    # each feature is either reset to the factual or keeps the search's value
    cf, d = sparse.counterfactuals, dense.counterfactuals
    assert ((cf == X[:60]) | (cf == d)).all()


def test_gs_runs_on_any_model():
    from sklearn.ensemble import RandomForestClassifier

    from recourse_privacy.models import SklearnModel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = SklearnModel(RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y))
    Xr = X[model.predict(X) == 0][:20]
    res = GrowingSpheres(n_search_samples=200, random_state=0).generate(model, Xr)
    assert res.validity == 1.0


# ---------------------------------------------------------------- VAE
def test_vae_reconstruction_improves_with_training(manifold):
    X = manifold[1][:300]
    short = VAE(epochs=1, batch_size=64, random_state=0).fit(X)
    long = VAE(epochs=25, batch_size=64, random_state=0).fit(X)
    err = lambda v: np.mean((v.reconstruct(X) - X) ** 2)
    assert err(long) < 0.5 * err(short)
    assert long.history_[-1] < long.history_[0]
    again = VAE(epochs=1, batch_size=64, random_state=0).fit(X)
    np.testing.assert_array_equal(short.encode(X), again.encode(X))  # seeded
    assert short.encode(X).shape == (len(X), 8)


def test_vae_immutables_condition_the_decoder_and_are_copied(manifold):
    _, X, _ = manifold
    mut = np.array([True, True, False, True, True, False])
    v = VAE(epochs=2, random_state=0).fit(X, mut)
    out = v.decode(v.encode(X[:10]), X[:10])
    np.testing.assert_array_equal(out[:, ~mut], X[:10, ~mut])
    with pytest.raises(ValueError, match="factual rows"):
        v.decode(v.encode(X[:10]))
    with pytest.raises(RuntimeError, match="not fitted"):
        VAE().encode(X)


# ---------------------------------------------------------------- CCHVAE
def test_cchvae_output_is_a_decoded_candidate_and_valid(manifold):
    model, X, y = manifold
    method = CCHVAE(vae_params={"epochs": 30}, random_state=0).fit(X, y, model)
    Xr = X[model.predict(X) == 0][:40]
    res = method.generate(model, Xr)
    assert res.validity > 0.9
    assert (model.predict(res.counterfactuals[res.valid]) == 1).all()
    # each counterfactual is decode(encode(x) + offset) for an offset of the shell it was found in
    seed = search_seed(method.seed_)
    vae = method.vae_
    for i in np.flatnonzero(res.valid)[:10]:
        off = shell_draws(seed, res.n_iter[i] - 1, 300, 8, 1, 0.1)
        cands = vae.decode(vae.encode(Xr[i : i + 1]) + off, np.repeat(Xr[i : i + 1], 300, axis=0))
        assert np.abs(cands - res.counterfactuals[i]).sum(axis=1).min() < 1e-12
        ok = model.predict(cands) == 1
        # the closest accepted candidate in L1
        dist = np.abs(cands - Xr[i]).sum(axis=1)
        assert np.isclose(dist[ok].min(), res.distance("l1")[i])


def test_cchvae_immutables_and_fit_per_world(manifold):
    model, X, y = manifold
    aset = _aset(6, imm=[3], inc=[0])  # feature 3 has no weight; raising feature 0 helps
    method = CCHVAE(action_set=aset, max_iter=100, random_state=0)
    with pytest.raises(RuntimeError, match="not fitted"):
        method.generate(model, X[:3])
    fitted = fit_for(method, X, y, model)
    assert fitted is not method and not hasattr(method, "vae_")
    Xr = X[model.predict(X) == 0][:30]
    res = fitted.generate(model, Xr)
    np.testing.assert_array_equal(res.counterfactuals[:, 3], Xr[:, 3])
    assert (res.counterfactuals[:, 0] >= Xr[:, 0]).all()
    assert res.validity > 0.8
    again = fit_for(method, X, y, model).generate(model, Xr)
    np.testing.assert_array_equal(res.counterfactuals, again.counterfactuals)


def _never_accepts(d):
    import torch

    layer = torch.nn.Linear(d, 1, dtype=torch.float64)
    with torch.no_grad():
        layer.weight.fill_(1e-3)
        layer.bias.fill_(-100.0)
    return TorchModel(layer)


def test_cchvae_reports_failures(manifold):
    _, X, y = manifold
    model = _never_accepts(6)
    method = CCHVAE(max_iter=20, n_search_samples=20, random_state=0).fit(X, y, model)
    res = method.generate(model, X[:10])
    assert len(res.valid) == 10 and not res.valid.any() and (res.n_iter == -1).all()
    np.testing.assert_array_equal(res.counterfactuals, X[:10])  # failures keep the factual


# ---------------------------------------------------------------- REVISE
def _double_mlp(X, y):
    m = make_model("mlp", random_state=0, epochs=20, hidden_layers=(32,)).fit(X, y)
    return TorchModel(m.torch_module().net.double())


def test_revise_batched_equals_one_at_a_time(manifold):
    _, X, _ = manifold
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int)
    model = _double_mlp(X, y)
    # lam 0.5 (CARLA's, for [0, 1]-scaled data) outweighs this weak network's gradient at unit scale
    method = REVISE(lam=0.01, max_iter=300, vae_params={"epochs": 10}, random_state=0).fit(X, y, model)
    Xr = X[model.predict(X) == 0][:20]
    batched = method.generate(model, Xr)
    method.batch_size = 1
    single = method.generate(model, Xr)
    np.testing.assert_array_equal(batched.n_iter, single.n_iter)
    np.testing.assert_allclose(batched.counterfactuals, single.counterfactuals, atol=1e-10)
    assert batched.validity > 0.9
    assert (model.decision_function(batched.counterfactuals[batched.valid]) >= 0).all()


def test_revise_first_valid_iterate_and_best_variant(manifold):
    model, X, y = manifold
    method = REVISE(vae_params={"epochs": 10}, random_state=0).fit(X, y, model)
    Xr = X[model.predict(X) == 0][:30]
    first = method.generate(model, Xr)
    assert first.valid.all()
    # the first valid iterate is decode(z) for the z Adam reached: re-decoding gives it back
    method.early_stop = False
    method.max_iter = 200
    best = method.generate(model, Xr)
    assert best.valid.all()

    def loss(res):
        z = model.decision_function(res.counterfactuals)
        return np.logaddexp(0, -z) + 0.5 * res.distance("l1")

    # CARLA's variant keeps the least-loss valid iterate, which the first valid one is a candidate for
    assert (loss(best) <= loss(first) + 1e-9).all()


def test_revise_action_set_and_failures(manifold):
    model, X, y = manifold
    aset = _aset(6, imm=[5], inc=[1])
    method = REVISE(action_set=aset, vae_params={"epochs": 5}, random_state=0).fit(X, y, model)
    Xr = X[model.predict(X) == 0][:30]
    res = method.generate(model, Xr)
    np.testing.assert_array_equal(res.counterfactuals[:, 5], Xr[:, 5])
    assert (res.counterfactuals[:, 1] >= Xr[:, 1]).all()
    never = _never_accepts(6)
    out = REVISE(max_iter=20, random_state=0).fit(X, y, never).generate(never, X[:8])
    assert len(out.valid) == 8 and not out.valid.any() and (out.n_iter == -1).all()
    assert not np.array_equal(out.counterfactuals, X[:8])  # the last iterate, flagged invalid


def test_registry_and_audit_config_accept_the_methods():
    from recourse_privacy.audit import AuditConfig

    assert "gradients" not in recourse_needs("gs") and "gradients" not in recourse_needs("cchvae")
    assert "gradients" in recourse_needs("revise")
    assert isinstance(make_recourse("gs", step=0.5), GrowingSpheres)
    for name in ("gs", "cchvae", "revise"):
        AuditConfig(dataset="heloc", model="mlp", recourse=name).validate()
    with pytest.raises(ValueError, match="norm"):
        make_recourse("gs", norm=3)
    with pytest.raises(ValueError, match="vae_params"):
        make_recourse("cchvae", vae_params={"layers": [20]})
