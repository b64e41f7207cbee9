"""The functional mechanism (Zhang et al. 2012), the FM autoencoder and DPC (Yang et al. 2022)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from recourse_privacy.dpc.functional import (
    QuadraticObjective,
    fm_linear_regression,
    fm_logistic_regression,
    linear_regression_objective,
    linear_regression_sensitivity,
    logistic_regression_sensitivity,
    per_tuple_coefficients,
    perturb_coefficients,
    solve_quadratic,
)
from recourse_privacy.errors import InvalidInputError


def _logistic_data(n=6000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    w = np.linspace(1.5, -1.0, d)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(X @ w * 2)))).astype(int)
    return X, y


# ---------------------------------------------------------------- functional mechanism


@pytest.mark.parametrize(
    "kind,sens", [("linear", linear_regression_sensitivity), ("logistic", logistic_regression_sensitivity)]
)
def test_sensitivity_bounds_every_pair_of_tuples(kind, sens):
    """Lemma 1: ||lambda_t - lambda_t'||_1 <= Delta for any two tuples in the box, and the box corner reaches Delta / 2."""
    d = 4
    rng = np.random.default_rng(1)
    delta = sens(d) if kind == "logistic" else sens(d, count_constant=True)
    corners = np.array([[1.0] * d, [-1.0] * d])
    labels = [-1.0, 1.0] if kind == "linear" else [0.0, 1.0]
    xs = np.vstack([rng.uniform(-1, 1, (200, d)), rng.choice([-1.0, 1.0], (200, d)), corners])
    ys = rng.choice(labels, len(xs))
    coefs = np.array([per_tuple_coefficients(kind, x, y) for x, y in zip(xs, ys)])
    diffs = np.abs(coefs[:, None, :] - coefs[None, :, :]).sum(-1)
    assert diffs.max() <= delta + 1e-9
    if kind == "linear":  # the per-tuple maximum (1 + d)^2 is reached at a corner: the bound is tight in Lemma 1's form
        assert np.abs(coefs).sum(1).max() == pytest.approx(delta / 2)


def test_noise_on_coefficients_is_laplace_with_scale_sensitivity_over_epsilon():
    """Every coefficient gets Laplace(Delta/eps): mean |noise| = b, std = sqrt(2) b (tolerance: 5 standard errors)."""
    d, delta, eps, reps = 3, 21.0, 0.7, 4000
    obj = QuadraticObjective(np.zeros((d, d)), np.zeros(d))
    draws = np.array(
        [
            np.concatenate([(p := perturb_coefficients(obj, delta, eps, random_state=s)).M.ravel(), p.alpha])
            for s in range(reps)
        ]
    )
    b = delta / eps
    n = draws.size
    assert np.abs(draws).mean() == pytest.approx(b, abs=5 * b / math.sqrt(n))  # |Lap(b)| has mean b, std b
    assert draws.std() == pytest.approx(math.sqrt(2) * b, rel=5 * math.sqrt(5 / 4 / n) + 0.01)
    assert np.abs(draws.mean()) < 5 * math.sqrt(2) * b / math.sqrt(n)


def test_same_seed_same_release_and_bad_epsilon_refused():
    X, y = _logistic_data(500)
    a = fm_logistic_regression(X, y, 1.0, random_state=3)
    b = fm_logistic_regression(X, y, 1.0, random_state=3)
    np.testing.assert_array_equal(a.coef, b.coef)
    for bad in (0, -1, float("nan"), "1"):
        with pytest.raises(InvalidInputError, match="epsilon"):
            fm_logistic_regression(X, y, bad)
    with pytest.raises(InvalidInputError, match=r"\[-1, 1\]"):
        fm_logistic_regression(X * 3, y, 1.0)


def test_noise_free_solution_is_the_quadratic_minimiser_and_linear_regression_least_squares():
    X, _ = _logistic_data(800)
    rng = np.random.default_rng(0)
    y = np.clip(X @ np.array([0.3, -0.2, 0.1, 0.0, 0.2]) + 0.05 * rng.normal(size=len(X)), -1, 1)
    fit = fm_linear_regression(X, y, math.inf)
    Xb = np.hstack([X, np.ones((len(X), 1))])
    np.testing.assert_allclose(fit.coef, np.linalg.lstsq(Xb, y, rcond=None)[0], atol=1e-10)
    obj = linear_regression_objective(X, y)
    assert obj(fit.coef) == pytest.approx(((Xb @ fit.coef - y) ** 2).sum())


def test_regularisation_and_trimming_keep_an_indefinite_noisy_objective_bounded():
    obj = QuadraticObjective(np.diag([1.0, -2.0, 1e-12]), np.array([1.0, 1.0, 1.0]))
    w, trimmed = solve_quadratic(obj)
    assert trimmed == 2 and np.isfinite(w).all() and w[1] == pytest.approx(0) and w[2] == pytest.approx(0)
    w, trimmed = solve_quadratic(obj, regularization=3.0)
    assert trimmed == 0 and w == pytest.approx([-1 / 8, -1 / 2, -1 / 6])  # -alpha / (2 (m + 3))


def test_fm_logistic_regression_converges_to_the_non_private_fit_as_epsilon_grows():
    """Coefficient error and accuracy gap to the noise-free Taylor fit shrink as epsilon grows (10 seeds each)."""
    X, y = _logistic_data()
    ref = fm_logistic_regression(X, y, math.inf)
    acc_ref = np.mean((ref.decision_function(X) > 0) == y)
    errs, gaps = [], []
    for eps in (0.05, 1.0, 20.0, 1000.0):
        fits = [fm_logistic_regression(X, y, eps, random_state=s) for s in range(10)]
        errs.append(np.mean([np.linalg.norm(f.coef - ref.coef) for f in fits]))
        gaps.append(np.mean([abs(np.mean((f.decision_function(X) > 0) == y) - acc_ref) for f in fits]))
    assert all(a > b for a, b in zip(errs, errs[1:])), errs
    assert gaps[-1] < 0.005 < gaps[0], gaps
    # the noise-free Taylor fit is itself close to the exact logistic regression (Zhang et al.'s approximation bound)
    from sklearn.linear_model import LogisticRegression

    acc_lr = LogisticRegression(C=1e6).fit(X, y).score(X, y)
    assert abs(acc_ref - acc_lr) < 0.02


# ---------------------------------------------------------------- the FM autoencoder and DPC

from recourse_privacy.dpc.autoencoder import (  # noqa: E402
    COLLAPSED_SPREAD,
    DEFAULT_MIN_STEPS,
    FMAutoencoder,
    fm_autoencoder_sensitivity,
)
from recourse_privacy.dpc.core import DPCExplainer, class_prototypes  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.data / 16.0, d.target


@pytest.fixture(scope="module")
def digits_model(digits):
    from recourse_privacy.dpc.classifier import MulticlassMLP

    X, y = digits
    return MulticlassMLP(epochs=40, random_state=0).fit(X[:1200], y[:1200])


def test_autoencoder_sensitivity_and_reconstruction_error_over_epsilon(digits):
    """Delta = 8 d with d = max(n_in, widths); MSE falls as epsilon grows (Yang et al.'s Figure 2 trend).

    On 900 rows FM's noise per coefficient, Delta / (epsilon N) = 512 / (epsilon 900), is 569 at
    epsilon 1e-3 and 0.57 at 1: above the collapse warning's 0.1, the noise swamps the data and the
    decoder collapses (the warning fires, as it should); noise-free, 400 Adam steps train a decoder
    that does not (48 steps did not: it still predicted the feature means).
    """
    assert fm_autoencoder_sensitivity(64, (128, 32)) == (8 * 128, 128)
    assert fm_autoencoder_sensitivity(64, (32, 16), sensitivity_mode="6d", d_mode="paper") == (6 * 32, 32)
    X, _ = digits

    def fit(eps):
        return FMAutoencoder(encoder_layers=(32, 16), epsilon=eps, epochs=100, random_state=0).fit(X[:900])

    aes = {}
    for eps in (1e-3, 1.0):
        with pytest.warns(UserWarning, match="nearly one point"):
            aes[eps] = fit(eps)
        assert aes[eps].noise_scale_ / aes[eps].n_train_ > 0.1  # the reason the warning gives
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        aes[math.inf] = fit(math.inf)
    assert aes[math.inf].decoder_spread_ >= COLLAPSED_SPREAD
    mse = {eps: ae.reconstruction_mse(X[900:]) for eps, ae in aes.items()}
    assert mse[1e-3] > mse[1.0] > mse[math.inf]
    with pytest.warns(UserWarning, match="1 Adam steps on 100 rows"):  # one step, noise 10 per coefficient
        ae = FMAutoencoder(encoder_layers=(32, 16), epsilon=0.5, epochs=1, random_state=0).fit(X[:100])
    assert ae.noise_scale_ == pytest.approx(8 * 64 / 0.5)


def test_the_default_autoencoder_learns_more_than_the_feature_means_on_a_small_training_set(digits):
    """360 rows in batches of 256: 50 epochs were 100 Adam steps, after which the autoencoder still predicted every
    feature's mean (held-out MSE equal to the means', codes one point), so every DPC counterfactual was the same
    decoded point and reproduction yang2022's flip ratio was 0 or 1. The default now trains at least 1,000 steps."""
    X, labels = digits
    train, held = X[:360], X[900:]
    means_mse = float(np.mean((held - train.mean(0)) ** 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ae = FMAutoencoder(epsilon=math.inf, random_state=0).fit(train)
    assert not [w for w in caught if "nearly one point" in str(w.message)]
    assert ae.decoder_spread_ >= COLLAPSED_SPREAD
    assert ae.n_steps_ >= DEFAULT_MIN_STEPS and ae.epochs_ * 2 == ae.n_steps_  # 360 rows: 2 batches per epoch
    # a learned code: well below the means' error (before: their ratio was 1.00) and codes that vary per row
    assert ae.reconstruction_mse(held) < 0.5 * means_mse
    assert ae.encode(held).std(0).mean() > 0.1  # before: 0.02
    # the two classes' prototypes (DPC's class means of the codes) decode to different points
    protos = class_prototypes(ae.encode(train), (labels[:360] > 4).astype(int), 2)
    decoded = ae.decode(protos.centers)
    assert np.abs(decoded[0] - decoded[1]).max() > 0.1
    # a given number of epochs is kept as given, and a decoder that is still one point says so
    with pytest.warns(UserWarning, match="nearly one point.*trained 2 Adam steps on 360 rows"):
        short = FMAutoencoder(epsilon=math.inf, epochs=1, random_state=0).fit(train)
    assert short.n_steps_ == 2 and short.decoder_spread_ < COLLAPSED_SPREAD


def test_bad_input_is_refused_before_training(digits):
    X, y = digits
    with pytest.raises(InvalidInputError, match="public bounds"):
        DPCExplainer(ae_epochs=1).fit(X * 16, y)  # pixels 0..16 declared as [0, 1]
    DPCExplainer(ae_epochs=1, encoder_layers=(8,), bounds=(0, 16), max_iter=1).fit(X[:50] * 16, y[:50])
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(InvalidInputError, match="epsilon"):
            DPCExplainer(epsilon=bad)
    with pytest.raises(InvalidInputError, match="latent size 80 exceeds"):
        DPCExplainer(encoder_layers=(128, 80)).fit(X, y)
    with pytest.raises(InvalidInputError, match="public bounds"):
        DPCExplainer(mode="hardened", bounds="data")
    with pytest.raises(InvalidInputError, match="mode"):
        DPCExplainer(mode="strict")
    e = DPCExplainer(ae_epochs=1, encoder_layers=(8,), max_iter=1).fit(X[:60], y[:60], n_classes=10)
    with pytest.raises(InvalidInputError, match="class 12 is not a class"):
        e.explain(X[:3], lambda x: x[:, :10], targets=12)


def test_hardened_prototypes_noise_and_ledger():
    rng = np.random.default_rng(0)
    codes, labels = rng.uniform(size=(400, 4)), rng.integers(0, 2, 400)
    exact = class_prototypes(codes, labels, 2)
    np.testing.assert_allclose(exact.centers[1], codes[labels == 1].mean(0))
    noisy = class_prototypes(codes, labels, 2, epsilon=2.0, random_state=1)
    assert noisy.sum_noise_scale == pytest.approx(2 * 4 / 1.0) and noisy.count_noise_scale == pytest.approx(2 / 1.0)
    assert not np.allclose(noisy.centers, exact.centers)
    from sklearn.datasets import load_digits

    X = load_digits().data[:200] / 16
    e = DPCExplainer(mode="hardened", epsilon=1.0, epsilon_prototypes=0.5, ae_epochs=1, encoder_layers=(8,)).fit(
        X, (load_digits().target[:200] > 4).astype(int)
    )
    assert e.ledger.epsilon_total == pytest.approx(1.5)
    assert e.prototypes_.epsilon == 0.5 and e.prototypes_.sum_noise_scale == pytest.approx(
        2 * e.prototypes_.centers.shape[1] / 0.25
    )
    faithful = DPCExplainer(epsilon=1.0, ae_epochs=1, encoder_layers=(8,)).fit(X, (load_digits().target[:200] > 4))
    assert faithful.ledger.epsilon_total is None and "prototypes" in faithful.ledger.not_covered[0]


def test_hardened_prototype_noise_has_the_calibrated_laplace_scale():
    """The noise class_prototypes draws, read back from its output, against Laplace(b).

    b = 2m / (eps / 2) for the class sums and 2 / (eps / 2) for the counts (replace-one L1
    sensitivities 2m and 2, half the budget each). 2,000 classes of 10 rows with every code 0.5 and
    eps = 160 (b = 0.1 and 0.025) keep each noisy mean inside (0, 1), so the sums' noise is
    centers * noisy_counts - 5 exactly (up to rounding). |Laplace(b)| is Exponential(b), so the sum
    of n absolute draws is Gamma(n, b) exactly: refused outside its 1e-6 / 2 tails (+-5% at
    n = 8,000 sums, +-11% at 2,000 counts; noise ten times too small is at -90%). A
    Kolmogorov-Smirnov test against Laplace(0, b) at p > 1e-6 checks the shape.
    """
    from scipy import stats

    k, m, per, eps = 2_000, 4, 10, 160.0
    codes = np.full((k * per, m), 0.5)
    proto = class_prototypes(codes, np.repeat(np.arange(k), per), k, epsilon=eps, random_state=0)
    b_sum, b_count = 2 * m / (eps / 2), 2 / (eps / 2)
    assert (proto.sum_noise_scale, proto.count_noise_scale) == pytest.approx((b_sum, b_count))
    assert (proto.centers > 0).all() and (proto.centers < 1).all() and (proto.counts > 1).all()
    count_noise = proto.counts - per
    sum_noise = (proto.centers * proto.counts[:, None] - per * 0.5).ravel()
    for noise, b in ((sum_noise, b_sum), (count_noise, b_count)):
        lo, hi = stats.gamma.ppf(0.5e-6, noise.size, scale=b), stats.gamma.isf(0.5e-6, noise.size, scale=b)
        assert lo < np.abs(noise).sum() < hi, (np.abs(noise).mean(), b)
        assert stats.kstest(noise, "laplace", args=(0.0, b)).pvalue > 1e-6


def test_dpc_multiclass_specific_and_nonspecific_targets(digits, digits_model):
    X, y = digits
    Q = X[1200:1300]
    pred = digits_model.predict(Q)
    e = DPCExplainer(epsilon=math.inf, encoder_layers=(48, 24), ae_epochs=60, max_iter=200, random_state=0)
    e.fit(X[:1200], y[:1200], n_classes=10)
    spec = e.explain(Q, digits_model.logits_fn, targets=(pred + 3) % 10, predicted=pred)
    non = e.explain(Q, digits_model.logits_fn, targets="nonspecific", predicted=pred)
    assert (non.targets != pred).all() and (spec.targets == (pred + 3) % 10).all()
    assert spec.flip_ratio > 0.8 and non.flip_ratio > 0.8
    np.testing.assert_array_equal(digits_model.predict(spec.counterfactuals)[spec.valid], spec.targets[spec.valid])
    again = e.explain(Q, digits_model.logits_fn, targets=(pred + 3) % 10, predicted=pred)
    np.testing.assert_array_equal(again.counterfactuals, spec.counterfactuals)


def test_flip_ratio_counts_any_changed_class_for_nonspecific_targets(digits, digits_model):
    """Yang et al. (2022), Eq. 20: n/spec. flips when the model's class changes, whichever the new class; spec. when
    it is the given class. Before, both counted only the rows reaching the search's target class (``valid``), so
    an n/spec. counterfactual that changed the class but not to the nearest other prototype's was not counted."""
    X, y = digits
    Q = X[1200:1300]
    pred = digits_model.predict(Q)
    # a short search from a barely trained autoencoder: many counterfactuals change class without reaching the target
    e = DPCExplainer(epsilon=math.inf, encoder_layers=(48, 24), ae_epochs=2, max_iter=5, random_state=0)
    with pytest.warns(UserWarning, match="nearly one point"):
        e.fit(X[:1200], y[:1200], n_classes=10)
    non = e.explain(Q, digits_model.logits_fn, targets="nonspecific", predicted=pred)
    cf_class = digits_model.predict(non.counterfactuals)
    np.testing.assert_array_equal(non.cf_predicted, cf_class)
    assert non.flip_ratio == pytest.approx(np.mean(cf_class != pred))
    assert non.flip_ratio > non.valid.mean()  # the case tells the two rules apart
    spec = e.explain(Q, digits_model.logits_fn, targets=(pred + 3) % 10, predicted=pred)
    assert spec.flip_ratio == pytest.approx(np.mean(digits_model.predict(spec.counterfactuals) == (pred + 3) % 10))
    assert spec.flip_ratio == pytest.approx(spec.valid.mean())  # spec.: reaching the target is the flip


def test_dpc_is_a_registered_recourse_method_on_a_binary_model(digits):
    from recourse_privacy.models.mlp import MLPModel
    from recourse_privacy.recourse import fit_for
    from recourse_privacy.recourse.registry import RECOURSE_METHODS, make_recourse

    assert "dpc" in RECOURSE_METHODS and RECOURSE_METHODS.get("dpc").needs == frozenset({"gradients", "fitting_data"})
    X, t = digits
    y = (t >= 5).astype(int)
    model = MLPModel(hidden_layers=(32,), epochs=20, lr=1e-3, random_state=0).fit(X[:1000], y[:1000])
    method = fit_for(
        make_recourse("dpc", epsilon=math.inf, encoder_layers=(32, 16), ae_epochs=100, max_iter=150, random_state=0),
        X[:1000],
        y[:1000],
        model,
    )
    Q = X[1000:1200][model.predict(X[1000:1200]) == 0][:60]
    res = method.generate(model, Q)
    assert res.method == "dpc" and res.validity > 0.8 and res.info["mode"] == "faithful"
