"""The fast paths of the black-box searches give the results of the plain algorithm.

Growing Spheres and C-CHVAE score candidates through ``search_logits`` (Linear/ReLU chains in
cache-sized blocks) and, for Growing Spheres without an action set, through ``shifted_logits``
(two small products and a float error bound); FACE's KDE is computed exactly. Each is checked
against the plain computation it replaces.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _nonlinear_mlp import nonlinear_mlp
from recourse_privacy.models import TorchModel, make_model, torch_utils
from recourse_privacy.models.torch_utils import (
    GATHER_SHARE,
    UNIT_QUANTUM,
    chain_logits,
    chain_rounding_bound,
    folded_hidden_logits,
    linear_chain,
)
from recourse_privacy.recourse import CCHVAE, ActionSet, GrowingSpheres, fit_for
from recourse_privacy.recourse.base import NORM_ORD
from recourse_privacy.recourse.cchvae import _decoded_screen
from recourse_privacy.recourse.face import gaussian_log_density, midpoint_log_density
from recourse_privacy.recourse.growing_spheres import search_seed, shell_draws


@pytest.fixture(scope="module")
def mlp():
    """A small ReLU MLP on a non-linear rule, and rows it rejects."""
    model, X, y = nonlinear_mlp()
    return model, X, y, X[model.predict(X) == 0]


def reference_shell_search(X, centers, candidates, model, *, n_samples, p, step, max_iter, seed):
    """The plain search (the code before the fast paths): every candidate of every active row scored."""
    X_cf, n_iter, active = X.copy(), np.full(len(X), -1), np.arange(len(X))
    for shell in range(max_iter):
        if not len(active):
            break
        cand = candidates(
            active, centers[active, None, :] + shell_draws(seed, shell, n_samples, centers.shape[1], p, step)
        )
        ok = (model.decision_function(cand.reshape(-1, X.shape[1])) >= 0).reshape(len(active), n_samples)
        dist = np.linalg.norm(cand - X[active, None, :], ord=p, axis=2)
        dist[~ok] = np.inf
        got = ok.any(axis=1)
        X_cf[active[got]] = cand[got, dist[got].argmin(axis=1)]
        n_iter[active[got]] = shell + 1
        active = active[~got]
    return X_cf, n_iter


def _gs_reference(method, model, X):
    aset = method.action_set or ActionSet.unconstrained(X.shape[1])

    def candidates(rows, points):
        out = np.repeat(X[rows, None, :], points.shape[1], axis=1)
        delta = np.where(aset.increasing, np.abs(points - X[rows, None, :]), points - X[rows, None, :])
        return aset.project(X[rows, None, :] + delta, out)

    return reference_shell_search(
        X,
        X,
        candidates,
        model,
        n_samples=method.n_search_samples,
        p=NORM_ORD[method.norm],
        step=method.step,
        max_iter=method.max_iter,
        seed=search_seed(method.random_state),
    )


def test_chain_logits_are_the_modules_values(mlp):
    """Blocked chain logits equal the module's own within the float32 rounding bound of both computations.

    The BLAS blocks and orders a product's sums by row count and thread count, so exact equality
    is not a property of our code: each computation is within ``gamma_k (|W||h| + |b|)`` per layer
    of the exact value (Higham 2002, section 3.5), and :func:`chain_rounding_bound` sums that
    through the layers for both. The bound is small next to the logits, so a misplaced block or
    row (an error of the logits' own size) fails.
    """
    model, X, _, _ = mlp
    Xb = np.random.default_rng(1).normal(size=(20_011, 6))  # several blocks and a ragged last one
    with torch.no_grad():
        ref = torch.cat(
            [model.module_(torch.as_tensor(Xb[i : i + 8192], dtype=torch.float32)) for i in range(0, len(Xb), 8192)]
        )
    ref = ref.double().numpy()
    layers = linear_chain(model.module_)
    bound = chain_rounding_bound(layers, Xb)
    assert bound.max() < 1e-4 * np.abs(ref).max()
    assert (np.abs(model.decision_function(Xb) - ref) <= bound).all()
    assert (np.abs(chain_logits(layers, Xb).double().numpy() - ref) <= bound).all()
    np.testing.assert_array_equal(model.search_logits(Xb), model.decision_function(Xb))  # one code path
    # a single linear layer is a chain too
    lin = TorchModel(torch.nn.Sequential(torch.nn.Linear(6, 1)), n_features=6)
    with torch.no_grad():
        lin_ref = lin.module_(torch.as_tensor(Xb, dtype=torch.float32)).double().numpy()
    lin_bound = chain_rounding_bound(linear_chain(lin.module_), Xb)
    assert (np.abs(lin.decision_function(Xb) - lin_ref) <= lin_bound).all()
    logits, bound = lin.shifted_logits(X[:5], X[:7])
    exact = lin.decision_function((X[:5, None, :] + X[None, :7]).reshape(-1, 6)).reshape(5, 7)
    assert (np.abs(logits - exact) <= bound[:, None]).all()
    # a network of another form is no chain and runs as itself
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    other = TorchModel(net, n_features=6)
    assert linear_chain(other.module_) is None and other.shifted_logits(X[:3], X[:4]) is None
    with torch.no_grad():
        np.testing.assert_allclose(
            other.decision_function(X), net(torch.as_tensor(X, dtype=torch.float32))[:, 0].double().numpy()
        )


@pytest.mark.parametrize("kind", ["mlp", "logistic"])
def test_shifted_logits_are_within_their_bound(mlp, kind):
    model, X, y, _ = mlp
    if kind == "logistic":
        model = make_model("logistic").fit(X, y)
    offsets = np.random.default_rng(2).normal(size=(300, 6)) * 3.0
    logits, bound = model.shifted_logits(X[:40], offsets)
    exact = model.decision_function((X[:40, None, :] + offsets[None]).reshape(-1, 6)).reshape(40, 300)
    err = np.abs(logits - exact)
    assert (err <= bound[:, None]).all()
    assert err.max() > 0 or kind == "logistic"  # float32: the two ways of computing differ, within the bound
    assert bound.max() < 1e-2 * np.abs(exact).max()  # and the bound is small next to the logits


def test_folded_hidden_logits_are_the_plain_sum_on_every_kind_of_row():
    """Stable units folded into one product, unstable ones gathered or computed whole: ``b + w . relu(A_i + Bt[:, j])``.

    The rows are built to reach every case: all units active (``A`` above the samples' range),
    none active (below it), a few unstable (gathered: fewer than ``GATHER_SHARE`` of the units)
    and most unstable (the whole row). The float32 result is within ``gamma_{h+4}`` times the sum
    of the terms' magnitudes (Higham 2002, section 3.1: a sum of ``h + 3`` terms, in any order,
    and the products' rounding) of the float64 sum of the same float32 inputs. A unit dropped or
    counted twice moves a logit by ``|w_k| |A + B|``, which is far larger.
    """
    rng = np.random.default_rng(5)
    h, s = 64, 200
    Bt = rng.uniform(-1, 1, size=(h, s)).astype(np.float32)
    A = np.empty((22, h), dtype=np.float32)
    A[0] = 5 + rng.random(h)  # every unit active at every sample
    A[1] = -5 - rng.random(h)  # none
    A[2:12] = rng.choice([-1.5, 1.5], size=(10, h))  # stable, but for ...
    few = rng.random((10, h)) < 0.15
    A[2:12][few] = rng.uniform(-0.5, 0.5, size=few.sum())  # ... a few units inside the range
    A[12:] = rng.uniform(-0.5, 0.5, size=(10, h))  # every unit unstable
    lo, hi = Bt.min(1), Bt.max(1)
    k = rng.permutation(h)[:8]  # units just inside either end of the range (one sample on the other side of 0)
    A[2:7, k[:4]] = -lo[k[:4]] - rng.uniform(1e-3, 0.05, size=(5, 4))
    A[7:12, k[4:]] = -hi[k[4:]] + rng.uniform(1e-3, 0.05, size=(5, 4))
    w = rng.normal(size=h).astype(np.float32)
    b = np.float32(0.3)
    share = ((A < -lo) & (A > -hi)).mean(1)
    assert share[0] == share[1] == 0 and (share[2:12] > 0).all()
    assert (share[2:12] < GATHER_SHARE).all() and (share[12:] >= GATHER_SHARE).all()  # both branches run

    got, exact, bound = _screen_and_float64_sum(A, Bt, w, b)
    assert (np.abs(got - exact) <= bound).all()
    assert np.abs(exact).max() > 1e3 * bound.max()  # the tolerance is far below the logits' size


def _screen_case(kind: str, rng):
    """``(A, Bt, w, b)`` for :func:`test_folded_screen_is_within_its_bound_on_every_kind_of_row`."""
    h, s = 96, 1 if kind == "one sample" else 150
    Bt = rng.uniform(-1, 1, size=(h, s)).astype(np.float32)
    lo, hi = Bt.min(1), Bt.max(1)
    w = rng.normal(size=h).astype(np.float32)
    b = np.float32(-0.7)
    if kind == "single row":
        A = rng.uniform(-0.8, 0.8, size=(1, h))
    else:
        # row i: units inside the samples' range with probability p_i, the rest above or below it
        p = np.r_[0.0, 0.0, 1.0, rng.uniform(0.01, 0.3, 20), rng.uniform(0.3, 0.59, 10), rng.uniform(0.6, 1.0, 6), 0.0]
        inside = rng.random((len(p), h)) < p[:, None]
        A = np.where(rng.random((len(p), h)) < 0.5, -lo + 0.5, -hi - 0.5)  # stable: every sample active / none
        A = np.where(inside, rng.uniform(-hi, -lo, size=(len(p), h)), A)
        A[0] = -lo + 0.5  # every unit active: no unstable unit
        A[1] = -hi - 0.5  # none active
        if s > 1:  # exactly on the range's ends: stable (active at its least sample / inactive at its largest)
            A[3, :4], A[4, :4] = -lo[:4], -hi[:4]
    return A.astype(np.float32), Bt, w, b


@pytest.mark.parametrize("kind", ["mixed", "single row", "one sample"])
@pytest.mark.parametrize("block", [None, 600])
def test_folded_screen_is_within_its_bound_on_every_kind_of_row(kind, block, monkeypatch):
    """The folded screen against the dense float64 sum, within the last layer's share of the screen's bound.

    Rows with no unstable unit (all active, none active, units on the range's ends), few, many
    (several padded widths of ``UNIT_QUANTUM``), most (the dense branch), a single row and a single
    sample; ``block``: blocks of 600 elements, so that every width is split over several blocks
    and the dense branch takes one row at a time. The float64 sum of the same float32 inputs
    (``b + w . relu(A_i + Bt[:, j])``) differs by at most ``gamma_{h+4}`` times the terms'
    magnitudes (Higham 2002, section 3.1), what :func:`shifted_chain_logits` allows the last layer;
    a unit dropped, counted twice or given another row's weight moves a logit by ``|w_k| |A + B|``,
    for a typical unit and ``|A + B| >= 0.01`` more than that.
    """
    if block is not None:
        monkeypatch.setattr(torch_utils, "SCREEN_BLOCK", block)
    A, Bt, w, b = _screen_case(kind, np.random.default_rng(11))
    h = A.shape[1]
    lo, hi = Bt.min(1), Bt.max(1)
    counts = ((A < -lo) & (A > -hi)).sum(1)
    if kind == "mixed":
        gathered = counts[(counts > 0) & (counts < GATHER_SHARE * h)]
        assert (counts == 0).sum() >= 3 and (counts >= GATHER_SHARE * h).sum() >= 3  # no unstable unit; dense
        assert len(np.unique((gathered + UNIT_QUANTUM - 1) // UNIT_QUANTUM)) >= 3  # several padded widths
    got, exact, bound = _screen_and_float64_sum(A, Bt, w, b)
    assert got.shape == exact.shape
    assert (np.abs(got - exact) <= bound).all()
    assert np.abs(got - exact).max() > 0 or kind == "one sample"  # float32 rounding is there, within the bound
    assert bound.max() < 1e-2 * np.median(
        np.abs(w.astype(np.float64))
    )  # a typical unit's term moved by 0.01 is beyond it


def test_gs_counterfactuals_are_those_of_the_unfolded_screen(mlp, monkeypatch):
    """Growing Spheres with the folded screen and with the plain one (``b + w . relu(A_i + Bt)`` over every unit) agree exactly.

    Both are within the same bound of the model's logits, and the screen only decides which
    candidates the model scores, so the counterfactuals and shells are identical; small blocks
    make the folded screen split its rows, and both of its branches must have run.
    """
    _, X, y, _ = mlp
    model = make_model("mlp", hidden_layers=(160,), epochs=20, lr=1e-2, random_state=1).fit(X, y)
    Xr = X[model.predict(X) == 0][:50]
    gs = GrowingSpheres(n_search_samples=200, step=0.15, random_state=3)
    monkeypatch.setattr(torch_utils, "SCREEN_BLOCK", 5000)
    seen = {"gathered": 0, "dense": 0}
    folded = torch_utils.folded_hidden_logits

    def counting(A, Bt, w, b):
        counts = ((A < -Bt.amin(1)) & (A > -Bt.amax(1))).sum(1)
        seen["dense"] += int((counts >= GATHER_SHARE * A.shape[1]).sum())
        seen["gathered"] += int(((counts > 0) & (counts < GATHER_SHARE * A.shape[1])).sum())
        return folded(A, Bt, w, b)

    monkeypatch.setattr(torch_utils, "folded_hidden_logits", counting)
    res = gs.generate(model, Xr)
    assert seen["gathered"] > 0 and seen["dense"] > 0
    monkeypatch.setattr(
        torch_utils,
        "folded_hidden_logits",
        lambda A, Bt, w, b: b + torch.relu(A[:, :, None] + Bt).mul(w[None, :, None]).sum(1),
    )
    plain = gs.generate(model, Xr)
    np.testing.assert_array_equal(res.counterfactuals, plain.counterfactuals)
    np.testing.assert_array_equal(res.n_iter, plain.n_iter)
    assert res.valid.mean() > 0.5


@pytest.mark.parametrize("norm", ["l2", "l1"])
def test_gs_fast_path_gives_the_plain_searchs_counterfactuals(mlp, norm):
    model, _, _, Xr = mlp
    gs = GrowingSpheres(n_search_samples=300, norm=norm, step=0.1, random_state=4)
    res = gs.generate(model, Xr[:60])
    X_cf, n_iter = _gs_reference(gs, model, Xr[:60])
    np.testing.assert_array_equal(res.counterfactuals, X_cf)
    np.testing.assert_array_equal(res.n_iter, n_iter)
    assert res.valid.all()


def test_gs_with_an_action_set_gives_the_plain_searchs_counterfactuals(mlp):
    model, _, _, Xr = mlp
    lo, hi = np.full(6, -np.inf), np.full(6, np.inf)
    lo[2], hi[2] = -1.0, 1.0
    aset = ActionSet(np.eye(6, dtype=bool)[5], np.eye(6, dtype=bool)[0], lo, hi)
    gs = GrowingSpheres(n_search_samples=300, step=0.1, action_set=aset, random_state=4)
    mutable = np.flatnonzero(aset.mutable)
    res = gs.generate(model, Xr[:40])

    def candidates(rows, points):  # the search runs in the mutable coordinates
        x = Xr[:40][rows, None, :]
        out = np.broadcast_to(x, points.shape[:2] + (6,)).copy()
        delta = points - x[..., mutable]
        out[..., mutable] = x[..., mutable] + np.where(aset.increasing[mutable], np.abs(delta), delta)
        return aset.project(out, x)

    X = Xr[:40]
    X_cf, n_iter = reference_shell_search(
        X, X[:, mutable], candidates, model, n_samples=300, p=2, step=0.1, max_iter=1000, seed=search_seed(4)
    )
    np.testing.assert_array_equal(res.counterfactuals, X_cf)
    np.testing.assert_array_equal(res.n_iter, n_iter)


@pytest.mark.parametrize("kind", ["mlp", "deep", "logistic", "deep-decoder", "no-screen"])
def test_cchvae_gives_the_plain_searchs_counterfactuals(mlp, kind):
    """Screened through ``affine_logits`` (or not, for a network of another form), the same search.

    The screened search decodes only the candidates it cannot rule out, the plain one all of a
    shell's: the decoder's float64 products then round in other blocks, so counterfactuals agree
    to float64 rounding (1e-15 relative), and the shell of every row exactly.
    """
    model, X, y, Xr = mlp
    if kind == "deep":
        model = make_model("mlp", hidden_layers=(32, 16), epochs=30, lr=1e-2, random_state=0).fit(X, y)
    elif kind == "logistic":
        model = make_model("logistic").fit(X, y)
    elif kind == "no-screen":
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        Xt, yt = torch.as_tensor(X), torch.as_tensor(y, dtype=torch.float64)
        for _ in range(200):
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(net(Xt)[:, 0], yt).backward()
            opt.step()
        model = TorchModel(net.requires_grad_(False), n_features=6)
        assert model.affine_logits(np.zeros((1, 1, 20)), np.zeros((6, 20)), np.zeros(6), np.zeros((1, 20))) is None
    Xr = X[model.predict(X) == 0]
    # a decoder hidden layer of 4 < 6 features: the screen folds it into the model (where it can)
    hidden = (5, 4) if kind == "deep-decoder" else (4,)  # two layers: codes from the decoder itself, not shifted
    method = fit_for(CCHVAE(n_search_samples=100, vae_params={"hidden_layers": hidden}, random_state=0), X, y, model)
    vae = method.vae_
    assert (vae.shifted_hidden(vae.encode(Xr[:2]), np.zeros((3, 8))) is None) == (kind == "deep-decoder")
    screen = _decoded_screen(model, vae, vae.encode(Xr[:2]))
    assert (screen(np.arange(2), np.zeros((3, 8))) is not None) == (kind != "no-screen")
    res = method.generate(model, Xr[:25])

    def candidates(rows, latents):
        m, s, k = latents.shape
        return vae.decode(latents.reshape(m * s, k), np.repeat(Xr[rows], s, axis=0)).reshape(m, s, -1)

    X_cf, n_iter = reference_shell_search(
        Xr[:25],
        vae.encode(Xr[:25]),
        candidates,
        model,
        n_samples=100,
        p=1,
        step=0.1,
        max_iter=1000,
        seed=search_seed(method.seed_),
    )
    np.testing.assert_allclose(res.counterfactuals, X_cf, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(res.n_iter, n_iter)
    assert res.valid.all()


@pytest.mark.parametrize("kind", ["mlp", "deep", "logistic"])
def test_affine_logits_are_within_their_bound_and_tight(mlp, kind):
    """At decoded points, the screen's logits are within their bound of the model's own, and the bound is small."""
    model, X, y, Xr = mlp
    if kind == "deep":
        model = make_model("mlp", hidden_layers=(32, 16), epochs=30, lr=1e-2, random_state=0).fit(X, y)
    elif kind == "logistic":
        model = make_model("logistic").fit(X, y)
    vae = fit_for(CCHVAE(random_state=0), X, y, model).vae_
    assert _decoded_screen(model, vae, vae.encode(Xr[:2])) is None  # q = 20 >= 6 features: no gain, no screen
    A, a0 = vae.linear_head()
    codes = vae.encode(Xr[:30])
    offsets = np.random.default_rng(3).laplace(size=(200, codes.shape[1])) * 2.0
    Z = codes[:, None, :] + offsets[None]
    H = vae.hidden(Z.reshape(-1, Z.shape[2])).reshape(30, 200, -1)
    decoded = vae.decode(Z.reshape(-1, Z.shape[2]))
    np.testing.assert_allclose(H.reshape(-1, H.shape[2]) @ A.T + a0, decoded, rtol=1e-12, atol=1e-12)
    h_err = vae.hidden_error(np.abs(Z).max(axis=1))
    assert (h_err > 0).all() and (h_err < 1e-12 * (1 + H.max(axis=1))).all()
    logits, bound = model.affine_logits(H, A, a0, h_err)
    bound = bound if bound.ndim == 2 else np.repeat(bound[:, None], 200, axis=1)  # per row or per candidate
    exact = model.decision_function(decoded).reshape(30, 200)
    err = np.abs(logits - exact)
    assert (err <= bound).all()
    assert err.max() > 0 or kind == "logistic"  # float32: the two ways of computing differ, within the bound
    assert np.median(bound) < 1e-3 * np.median(np.abs(exact))  # and the bound is small next to the logits


def test_shifted_hidden_codes_are_within_their_bound(mlp):
    """``relu((W c + b) + W o)`` in float32 against the decoder's own float64 layer at ``c + o``."""
    model, X, y, Xr = mlp
    vae = fit_for(CCHVAE(random_state=0), X, y, model).vae_
    codes = vae.encode(Xr[:40])
    offsets = np.random.default_rng(4).laplace(size=(300, codes.shape[1])) * 3.0
    H, h_err = vae.shifted_hidden(codes, offsets)
    assert H.dtype == np.float32 and H.shape == (40, 300, 20) and h_err.shape == (40, 20)
    exact = vae.hidden((codes[:, None, :] + offsets[None]).reshape(-1, codes.shape[1])).reshape(40, 300, 20)
    err = np.abs(H - exact)
    assert (err <= h_err[:, None, :]).all() and err.max() > 0
    assert h_err.max() < 1e-5 * (1 + exact.max())


def test_a_vae_with_immutable_features_has_no_linear_head(mlp):
    model, X, y, _ = mlp
    aset = ActionSet(np.eye(6, dtype=bool)[5], np.zeros(6, bool), np.full(6, -np.inf), np.full(6, np.inf))
    vae = fit_for(CCHVAE(action_set=aset, random_state=0), X, y, model).vae_
    assert vae.linear_head() is None


@pytest.mark.parametrize("immutable", [False, True])
def test_search_decode_gives_decodes_values(mlp, immutable):
    """The unchecked decode of a search's latents equals :meth:`VAE.decode` bit for bit; factuals only where needed."""
    model, X, y, Xr = mlp
    aset = None
    if immutable:
        aset = ActionSet(np.eye(6, dtype=bool)[5], np.zeros(6, bool), np.full(6, -np.inf), np.full(6, np.inf))
    vae = fit_for(CCHVAE(action_set=aset, random_state=0), X, y, model).vae_
    assert vae.has_immutables == immutable
    Z = vae.encode(Xr[:50]) + np.random.default_rng(5).laplace(size=(50, vae.latent_dim))
    np.testing.assert_array_equal(vae.search_decode(Z, Xr[:50] if immutable else None), vae.decode(Z, Xr[:50]))
    if immutable:  # the immutable feature is the factual's
        np.testing.assert_array_equal(vae.search_decode(Z, Xr[:50])[:, 5], Xr[:50, 5])


def test_face_kde_is_the_exact_gaussian_kde():
    from scipy.special import logsumexp
    from sklearn.neighbors import KernelDensity

    rng = np.random.default_rng(5)
    nodes = rng.normal(size=(400, 4))
    h = 0.6
    M = rng.normal(size=(50, 4)) * 1.5
    d2 = ((M[:, None, :] - nodes[None]) ** 2).sum(-1)
    exact = logsumexp(-d2 / (2 * h * h), axis=1) - np.log(400) - 2 * np.log(2 * np.pi * h * h)
    np.testing.assert_allclose(gaussian_log_density(M, nodes, h), exact, rtol=1e-12, atol=1e-11)
    # scikit-learn's tree gives the same where it is accurate (densities well above e^-170)
    skl = KernelDensity(bandwidth=h).fit(nodes).score_samples(M)
    np.testing.assert_allclose(gaussian_log_density(M, nodes, h), skl, rtol=0, atol=1e-8)
    # midpoints of node pairs by the parallelogram law, long edges included (direct fallback)
    far = np.vstack([nodes, [[60.0, 0, 0, 0]]])
    i, j = rng.integers(0, 401, 300), rng.integers(0, 401, 300)
    i[:3] = 400
    np.testing.assert_allclose(
        midpoint_log_density(far, i, j, h), gaussian_log_density((far[i] + far[j]) / 2, far, h), rtol=1e-11, atol=1e-10
    )


def test_scfe_small_batches_search_in_one_thread_with_the_same_counterfactuals(mlp, monkeypatch):
    """SCFE's small batches run in one torch thread; the counterfactuals are those of torch's thread count.

    The threads split a product's rows and columns, not its sums over 6 features or 64 units, so
    the float32 iterates agree to rounding (1e-5 leaves room over float32's 6e-8 per operation on
    iterates of order 1, while one Adam step of lr 0.01 moves a coordinate by up to 1e-2).
    """
    from recourse_privacy.recourse import SCFE, scfe

    model, X, _, rejected = mlp
    seen = []
    adam = scfe.SCFE._adam

    def spy(self, X_, module):
        seen.append(torch.get_num_threads())
        return adam(self, X_, module)

    monkeypatch.setattr(scfe.SCFE, "_adam", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one = SCFE(max_iter=300).generate(model, rejected[:40])
        monkeypatch.setattr(scfe, "ONE_THREAD_ELEMENTS", 0)  # every batch keeps torch's threads
        many = SCFE(max_iter=300).generate(model, rejected[:40])
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 2]
    np.testing.assert_array_equal(one.valid, many.valid)
    np.testing.assert_allclose(one.counterfactuals, many.counterfactuals, atol=1e-5)
    assert np.abs(one.counterfactuals - rejected[:40]).max() > 1e-2  # the search moved the points


def _screen_and_float64_sum(A, Bt, w, b):
    """The folded screen's logits, the exact float64 sum ``b + sum_k w_k relu(A[i, k] + Bt[k, j])`` and the bound
    between them: ``gamma_{h+4}`` (Higham 2002, fan-in + 4 terms) times the terms' magnitudes."""
    h = A.shape[1]
    got = folded_hidden_logits(*(torch.as_tensor(v) for v in (A, Bt, w, np.array([b])))).double().numpy()
    A64, B64, w64 = A.astype(np.float64), Bt.astype(np.float64), w.astype(np.float64)
    exact = b + np.einsum("k,ikj->ij", w64, np.maximum(A64[:, :, None] + B64[None], 0.0))
    u = np.finfo(np.float32).eps / 2
    gamma = (h + 4) * u / (1 - (h + 4) * u)
    mag = abs(b) + (np.abs(A64) @ np.abs(w64))[:, None] + (np.abs(w64) @ np.abs(B64))[None, :]
    return got, exact, gamma * mag


class _Opaque(torch.nn.Module):
    """The same function as ``inner``, in a form :func:`linear_chain` does not recognise: SCFE runs autograd."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


@pytest.mark.parametrize("hidden", [(), (64,), (16, 8, 12)])
def test_chain_input_gradients_are_autograds(hidden):
    """The written-out backward of a ReLU chain gives autograd's logits and input gradients.

    float32: the logits are the same products (equal); the gradients sum the same terms in another
    order (1e-5 relative leaves room over the 6e-8 rounding per operation of sums of up to 64 terms,
    while a wrong mask or layer order moves a gradient by its own size).
    """
    from recourse_privacy.models.torch_utils import chain_logits_and_input_grad

    rng = np.random.default_rng(4)
    X = rng.normal(size=(700, 6))  # several of the 4,096-row blocks of width 64, and a ragged last one
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    if hidden:
        module = make_model("mlp", hidden_layers=hidden, epochs=2, lr=1e-2, random_state=0).fit(X, y).module_
    else:
        module = TorchModel(torch.nn.Sequential(torch.nn.Linear(6, 1)), n_features=6).module_
    Xb = torch.as_tensor(np.tile(X, (7, 1)), dtype=torch.float32)  # 4,900 rows
    x = Xb.clone().requires_grad_(True)
    ref = module(x)
    ref.sum().backward()
    z, g = chain_logits_and_input_grad(linear_chain(module), Xb)
    torch.testing.assert_close(z, ref.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(g, x.grad, rtol=1e-5, atol=1e-5 * float(x.grad.abs().max()))
    assert float(x.grad.abs().max()) > 1e-2  # gradients of a size that a wrong one would miss


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_scfe_on_a_chain_gives_the_autograd_searchs_counterfactuals(mlp, norm):
    """SCFE's written-out gradient on the paper's MLPs follows the autograd search row by row.

    Both run the same Adam from the same start; their gradients differ by float32 rounding (see the
    test above), so a row whose logit crosses 0 within rounding may stop one iteration apart. Nearly
    every row ends at the same iteration (at most 1 in 50 may not), and every counterfactual within
    0.02 of the other's (two Adam steps of lr 0.01), while the search moves the points by far more.
    """
    from recourse_privacy.recourse import SCFE

    model, X, _, rejected = mlp
    method = SCFE(norm=norm, max_iter=300)
    with torch_utils.torch_threads(1):
        chain = method._adam(rejected, model.module_)
        plain = method._adam(rejected, _Opaque(model.module_))
    assert linear_chain(model.module_) is not None and linear_chain(_Opaque(model.module_)) is None
    assert (chain.n_iter != plain.n_iter).mean() <= 0.02
    assert np.abs(chain.counterfactuals - plain.counterfactuals).max() < 0.02
    same = chain.n_iter == plain.n_iter
    np.testing.assert_allclose(chain.counterfactuals[same], plain.counterfactuals[same], atol=1e-4)
    assert np.abs(plain.counterfactuals - rejected).max() > 0.1
    assert (chain.n_iter >= 0).mean() > 0.9


@pytest.mark.parametrize("method", ["gs", "cchvae"])
def test_shell_search_split_among_threads_gives_the_one_loops_counterfactuals(mlp, method, monkeypatch):
    """With two torch threads at its start, the shell search splits its rows between two Python threads (every
    other row to each); each row's draws are its own, so the counterfactuals and shells are those of one loop."""
    import threading

    from recourse_privacy.recourse import growing_spheres
    from recourse_privacy.recourse.growing_spheres import SPLIT_ROWS

    model, X, y, Xr = mlp
    rows = Xr[: 2 * SPLIT_ROWS + 5]
    make = {"gs": lambda: GrowingSpheres(n_search_samples=200, random_state=0),
            "cchvae": lambda: CCHVAE(n_search_samples=100, random_state=0)}[method]  # fmt: skip
    fitted = fit_for(make(), X, y, model)
    loops = []
    real = growing_spheres._shell_loop

    def spy(*args):
        loops.append((threading.current_thread().name, len(args[-1])))
        return real(*args)

    monkeypatch.setattr(growing_spheres, "_shell_loop", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fitted.generate(model, rows)
        torch.set_num_threads(2)
        two = fitted.generate(model, rows)
    finally:
        torch.set_num_threads(before)
    assert loops[0] == ("MainThread", len(rows))
    assert sorted(n for _, n in loops[1:]) == [len(rows) // 2, len(rows) - len(rows) // 2]
    assert all(name.startswith("shell-search") for name, _ in loops[1:])
    np.testing.assert_array_equal(two.counterfactuals, one.counterfactuals)
    np.testing.assert_array_equal(two.n_iter, one.n_iter)
