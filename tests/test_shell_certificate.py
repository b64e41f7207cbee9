"""C-CHVAE's shell certificates (recourse/shell_certificate.py): the bound holds, is exact at radius 0, and skipping
the shells it proves empty leaves every counterfactual as it was."""

from __future__ import annotations

import numpy as np
import pytest

from _nonlinear_mlp import nonlinear_mlp
from recourse_privacy.models import make_model
from recourse_privacy.models.torch_utils import chain_rounding_bound, linear_chain
from recourse_privacy.recourse import CCHVAE, ActionSet, fit_for
from recourse_privacy.recourse import cchvae as cchvae_module
from recourse_privacy.recourse.shell_certificate import DecodedLogitBound, decoded_rejection_floor


@pytest.fixture(scope="module")
def world():
    """A one-hidden-layer ReLU MLP on a non-linear rule, C-CHVAE's default VAE on its data, and rows it rejects."""
    model, X, y = nonlinear_mlp()
    vae = fit_for(CCHVAE(random_state=0), X, y, model).vae_
    return model, vae, X, y, X[model.predict(X) == 0][:40]


def _exact_logits(model, X: np.ndarray) -> np.ndarray:
    """The network's logit in float64 at the float64 points ``X`` (the bound's exact arithmetic, near enough)."""
    (W1, b1), (w2, b2) = ((W.double().numpy(), b.double().numpy()) for W, b in linear_chain(model.torch_module()))
    return np.maximum(X @ W1.T + b1, 0.0) @ w2[0] + b2[0]


def _ball(rng, n: int, k: int, r: float, p: int) -> np.ndarray:
    """``n`` offsets in the p-ball of radius r (uniform directions, radii to r) and its 2k extreme points on the axes."""
    g = rng.standard_normal((n, k)) if p == 2 else rng.laplace(size=(n, k))
    inside = g / np.linalg.norm(g, ord=p, axis=1, keepdims=True) * r * rng.random((n, 1)) ** (1 / k)
    return np.concatenate([inside, r * np.eye(k), -r * np.eye(k)])


def _bound(model, vae, codes, p) -> DecodedLogitBound:
    floor = decoded_rejection_floor(model, vae, codes, p)
    assert floor is not None
    return floor.__self__


@pytest.mark.parametrize("p", [1, 2])
def test_the_bound_is_above_the_logit_everywhere_in_the_ball(world, p):
    """At 2,000 latents per row and radius inside each ball, and at its extreme points on the axes, the decoded point's
    exact logit is at most the bound: CROWN's lines hold wherever the ball reaches."""
    model, vae, X, y, Xr = world
    codes = vae.encode(Xr)
    bound = _bound(model, vae, codes, p)
    rng = np.random.default_rng(1)
    rows = np.arange(len(Xr))
    for r in (0.05, 0.3, 1.0, 3.0):
        up, xabs = bound.upper(rows, r)
        for i in rows[::4]:
            Z = codes[i] + _ball(rng, 2000, codes.shape[1], r, p)
            decoded = vae.decode(Z)
            assert _exact_logits(model, decoded).max() <= up[i]
            assert (np.abs(decoded) <= xabs[i] * (1 + 1e-12)).all()


def test_at_radius_zero_the_bound_is_the_logit_at_the_code(world):
    """A ball of radius 0 leaves every ReLU stable, where CROWN's lines are the function itself: the bound is the
    decoded code's logit up to its float slack (1e-9 relative)."""
    model, vae, X, y, Xr = world
    codes = vae.encode(Xr)
    up, _ = _bound(model, vae, codes, 1).upper(np.arange(len(Xr)), 0.0)
    exact = _exact_logits(model, vae.decode(codes))
    assert (up >= exact).all()
    np.testing.assert_allclose(up, exact, rtol=1e-7, atol=1e-7)


def test_the_rounding_bound_is_chain_rounding_bounds_plus_the_cast(world):
    """``rounding`` is the general two-layer formula of ``chain_rounding_bound`` written in one product, plus the
    cast of a decoded point to float32 carried by ``|w2| |W1|``, and the float64 slack (1e-9 of that product: about
    1e-4 of the whole here)."""
    model, vae, X, y, Xr = world
    bound = _bound(model, vae, vae.encode(Xr), 1)
    xabs = np.abs(np.random.default_rng(2).normal(size=(30, 6))) * 3
    general = chain_rounding_bound(bound.layers, xabs)
    cast = (np.finfo(np.float32).eps / 2) * (xabs @ bound.v)
    ours = bound.rounding(xabs)
    assert (ours >= general + cast).all()
    np.testing.assert_allclose(ours, general + cast, rtol=1e-3)


def test_where_it_proves_a_ball_empty_the_model_rejects_every_point_of_it(world):
    """Every row and radius the floor proves: the model's own logits (float32, as the search computes them) at the
    ball's sampled and extreme decoded points are all negative; and it does prove some balls, not only the small."""
    model, vae, X, y, Xr = world
    codes = vae.encode(Xr)
    floor = decoded_rejection_floor(model, vae, codes, 1)
    rng = np.random.default_rng(3)
    proven_any = 0
    for r in (0.1, 0.5, 1.0):
        proven = floor(np.arange(len(Xr)), r)
        proven_any += proven.sum()
        for i in np.flatnonzero(proven):
            decoded = vae.decode(codes[i] + _ball(rng, 1000, codes.shape[1], r, 1))
            assert (model.search_logits(decoded) < 0).all()
    assert proven_any >= 10


def test_the_floor_applies_only_where_its_bound_is_written(world):
    """None for a deeper model, a logistic one, a decoder of two hidden layers and a VAE with immutable features."""
    model, vae, X, y, Xr = world
    codes = vae.encode(Xr)
    deep = make_model("mlp", hidden_layers=(16, 8), epochs=5, random_state=0).fit(X, y)
    assert decoded_rejection_floor(deep, vae, codes, 1) is None
    assert decoded_rejection_floor(make_model("logistic").fit(X, y), vae, codes, 1) is None
    vae2 = fit_for(CCHVAE(vae_params={"hidden_layers": (8, 8)}, random_state=0), X, y, model).vae_
    assert decoded_rejection_floor(model, vae2, vae2.encode(Xr), 1) is None
    free = ActionSet.unconstrained(6)
    aset = ActionSet(np.array([False] * 5 + [True]), free.increasing, free.lower, free.upper)  # the last immutable
    vae3 = fit_for(CCHVAE(action_set=aset, random_state=0), X, y, model).vae_
    assert decoded_rejection_floor(model, vae3, vae3.encode(Xr), 1) is None


def test_cchvae_skips_proven_shells_and_finds_the_same_counterfactuals(world, monkeypatch):
    """With and without the floor, C-CHVAE gives the same counterfactuals and shells, row for row, and the floor
    did skip shells (rows it proved before they found recourse)."""
    model, vae, X, y, Xr = world
    method = fit_for(CCHVAE(n_search_samples=100, random_state=0), X, y, model)
    asked = []

    def counting(model_, vae_, codes, p):
        floor = decoded_rejection_floor(model_, vae_, codes, p)

        def wrapped(rows, radius):
            proven = floor(rows, radius)
            asked.append(int(proven.sum()))
            return proven

        return wrapped

    monkeypatch.setattr(cchvae_module, "decoded_rejection_floor", counting)
    with_floor = method.generate(model, Xr)
    monkeypatch.setattr(cchvae_module, "decoded_rejection_floor", lambda *a: None)
    without = method.generate(model, Xr)
    np.testing.assert_array_equal(with_floor.counterfactuals, without.counterfactuals)
    np.testing.assert_array_equal(with_floor.n_iter, without.n_iter)
    assert sum(asked) >= 10 and with_floor.valid.all()
