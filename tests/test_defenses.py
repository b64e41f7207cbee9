"""DP defenses of Huang et al. 2023: Laplace mechanism and Recourse, budget accounting, DP models, the audit's dp block."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from diffprivlib.utils import PrivacyLeakWarning

from recourse_privacy import AuditConfig, run_audit
from recourse_privacy.accounting import QueryLedger
from recourse_privacy.defenses import (
    LaplaceRecourse,
    RecourseSession,
    SimulatedLaplaceRecourse,
    noisy_probability,
)
from recourse_privacy.defenses.accounting import dp_ba_bound
from recourse_privacy.defenses.laplace import PROB_CLIP
from recourse_privacy.errors import BudgetExceededError, IncompatibleError, InvalidInputError
from recourse_privacy.metrics import theorem2_bound
from recourse_privacy.models import DPLogisticModel, DPMLPModel, make_model

BAD_EPSILONS = [0, -1.0, float("inf"), float("nan"), "one", None]


def _easy(n=400, d=5, seed=0, unit=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    if unit:
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
    return X, y


def _linear_model(w=(3.0, 4.0), b=0.5):
    X, y = _easy(50, 2)
    m = make_model("logistic").fit(X, y)
    m.coef_, m.intercept_ = np.asarray(w, float), float(b)
    return m


# ----------------------------------------------------------------------------- the Laplace mechanism
@pytest.mark.parametrize("epsilon,sensitivity", [(50.0, 1.0), (5.0, 0.1), (100.0, 1.0)])
def test_noise_has_laplace_mean_and_variance(epsilon, sensitivity):
    n, b = 200_000, sensitivity / epsilon
    out = noisy_probability(np.full(n, 0.5), epsilon, sensitivity=sensitivity, random_state=3)
    assert 0 < out.min() and out.max() < 1  # P(|noise| > 0.5) <= e^-25: nothing clamped
    noise = out - 0.5
    # mean 0 (sd sqrt(2) b / sqrt(n)); variance 2 b^2 (sd of the sample variance: sqrt(20 / n) b^2,
    # Laplace fourth moment 24 b^4); mean |noise| = b (sd b / sqrt(n)); 5 standard deviations each
    assert abs(noise.mean()) < 5 * np.sqrt(2) * b / np.sqrt(n)
    assert abs(noise.var() - 2 * b**2) < 5 * np.sqrt(20 / n) * b**2
    assert abs(np.abs(noise).mean() - b) < 5 * b / np.sqrt(n)


def test_noisy_probability_is_clamped_to_unit_interval():
    n, eps = 100_000, 0.01  # scale 100: most draws leave [0, 1]
    out = noisy_probability(np.full(n, 0.5), eps, random_state=1)
    assert out.min() == 0.0 and out.max() == 1.0 and np.all((out >= 0) & (out <= 1))
    # P(p' clamped to 0) = P(noise <= -0.5) = exp(-0.5 / 100) / 2
    expect = np.exp(-0.5 * eps) / 2
    for share in (np.mean(out == 0.0), np.mean(out == 1.0)):
        assert abs(share - expect) < 5 * np.sqrt(expect * (1 - expect) / n)


@pytest.mark.parametrize("eps", BAD_EPSILONS)
def test_bad_epsilon_is_refused(eps):
    with pytest.raises(ValueError, match="epsilon"):
        noisy_probability(np.array([0.5]), eps)
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceRecourse(epsilon=eps)
    with pytest.raises(ValueError, match="epsilon"):
        DPLogisticModel(epsilon=eps).fit(*_easy(50))


def test_probabilities_outside_unit_interval_are_refused():
    with pytest.raises(ValueError, match="p must"):
        noisy_probability(np.array([1.5]), 1.0)


# ----------------------------------------------------------------------------- Laplace Recourse
def test_laplace_recourse_matches_the_formula_for_a_fixed_noise_draw():
    model = _linear_model()
    w = model.coef_
    X = np.array([[-1.0, -1.0], [-0.2, 0.1], [-3.0, 0.5], [0.0, -0.3]])
    eps, seed, s = 0.8, 11, 0.25
    res = LaplaceRecourse(epsilon=eps, target_logit=s, random_state=seed).generate(model, X)
    p = 1 / (1 + np.exp(-(X @ w + 0.5)))
    p_noisy = np.clip(p + np.random.default_rng(seed).laplace(0.0, 1 / eps, size=len(X)), 0, 1)
    q = np.clip(p_noisy, PROB_CLIP, 1 - PROB_CLIP)
    f_noisy = np.log(q / (1 - q))
    expected = X + np.outer((s - f_noisy) / (w @ w), w)
    np.testing.assert_allclose(res.counterfactuals, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.info["noisy_probability"], p_noisy)
    delta = res.counterfactuals - X
    np.testing.assert_allclose(delta[:, 0] * w[1] - delta[:, 1] * w[0], 0, atol=1e-12)  # parallel to w
    np.testing.assert_allclose(res.distance("l2"), np.abs(s - f_noisy) / np.linalg.norm(w), rtol=1e-12)
    # the true logit moves by exactly s - f'(x); validity is the model's verdict, invalid rows kept
    np.testing.assert_allclose(
        model.decision_function(res.counterfactuals), model.decision_function(X) + s - f_noisy, rtol=1e-9, atol=1e-9
    )
    np.testing.assert_array_equal(res.valid, model.predict(res.counterfactuals) == 1)
    assert len(res.valid) == len(X)


def test_clamped_probabilities_give_the_spike_distance():
    model = _linear_model()
    X = np.tile([[-1.0, -1.0]], (2000, 1))
    res = LaplaceRecourse(epsilon=0.05, random_state=0).generate(model, X)  # scale 20: most rows clamp
    clamped = res.info["clamped_low"] | res.info["clamped_high"]
    assert clamped.mean() > 0.9
    spike = 52 * np.log(2) / np.linalg.norm(model.coef_)
    np.testing.assert_allclose(res.distance("l2")[clamped], spike, rtol=1e-9)
    assert not res.valid[res.info["clamped_high"]].any()  # p' = 1: the move goes away from the boundary
    assert res.valid[res.info["clamped_low"]].all()


def test_laplace_recourse_validity_is_the_sign_of_the_noise_whatever_the_data_and_epsilon():
    """At s = 0, x' is accepted exactly when f'(x) < f(x), i.e. when the Laplace draw is negative
    (clamping keeps its sign, and a rejected row has p < 1/2, far from the clip at 1 - 2^-52).
    numpy draws Laplace(0, b) as b times one standard draw, so one seed gives the same signs at
    every scale: the same valid rows on two unrelated models and at three epsilons (stop 31's
    0.54 on four datasets). A target score s > 0 is what raises validity."""
    from diffprivlib.accountant import BudgetAccountant

    rng = np.random.default_rng(4)
    signs = np.random.default_rng(9).laplace(0.0, 1.0, size=300) < 0
    valid = []
    for d, scale in ((2, 1.0), (12, 0.1)):
        X = rng.normal(size=(4000, d)) * scale
        y = (X @ rng.normal(size=d) + rng.logistic(size=len(X)) > 0).astype(int)
        model = make_model("logistic").fit(X, y)
        Q = X[model.predict(X) == 0][:300]
        p = model.predict_proba(Q)[:, 1]
        for eps in (0.5, 1.0, 20.0):
            res = LaplaceRecourse(epsilon=eps, accountant=BudgetAccountant(), random_state=9).generate(model, Q)
            np.testing.assert_array_equal(res.valid, res.info["noisy_probability"] < p)
            np.testing.assert_array_equal(res.valid, signs)
            valid.append(res.valid)
        margin = LaplaceRecourse(epsilon=20.0, target_logit=2.0, accountant=BudgetAccountant(), random_state=9)
        shifted = margin.generate(model, Q)  # accepted when the noise lowers the score by less than s
        assert shifted.valid[signs].all() and shifted.valid.mean() > signs.mean()
    assert all((v == valid[0]).all() for v in valid)


def test_batched_equals_one_row_at_a_time():
    model = _linear_model()
    X = np.random.default_rng(2).normal(size=(30, 2))
    batched = LaplaceRecourse(epsilon=1.0, random_state=5).generate(model, X)
    lr = LaplaceRecourse(epsilon=1.0, random_state=5)
    single = np.vstack([lr.generate(model, X[i : i + 1]).counterfactuals for i in range(len(X))])
    np.testing.assert_allclose(batched.counterfactuals, single, rtol=1e-12)


def test_laplace_recourse_needs_a_linear_model():
    class NotLinear:
        is_linear, is_differentiable, n_features_in_ = False, True, 2

    with pytest.raises(ValueError, match="linear"):
        LaplaceRecourse(epsilon=1.0).generate(NotLinear(), np.zeros((3, 2)))


def test_simulated_laplace_draws_independent_noise_per_shadow_world():
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(50, 2))
    sim = SimulatedLaplaceRecourse(epsilon=1.0, random_state=3)
    Xa, ya = _easy(40, 2, seed=1)
    Xb, yb = _easy(40, 2, seed=2)
    a1 = sim.fit(Xa, ya, model).generate(model, X).counterfactuals
    a2 = sim.fit(Xa, ya, model).generate(model, X).counterfactuals
    b = sim.fit(Xb, yb, model).generate(model, X).counterfactuals
    np.testing.assert_array_equal(a1, a2)
    assert not np.allclose(a1, b)


def test_laplace_defense_draws_fresh_noise_per_answer_and_replays_from_the_seed():
    # Huang et al. (2023) draw fresh noise for every answer: the targets' batch, the extraction adversary's
    # queries and any later batch must not repeat one noise sequence (before: every call reseeded the same).
    from recourse_privacy.defenses.registry import DEFENSES
    from recourse_privacy.validation import derive_seed

    eps, n = 50.0, 2000
    b = 1.0 / eps  # Laplace scale: sensitivity 1 over epsilon
    cfg = AuditConfig(**SMALL, defense="laplace", epsilon=eps)
    defense = DEFENSES.get("laplace").obj
    model = _linear_model(w=(0.3, 0.4), b=0.0)
    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(n, 2))  # |w.x| <= 0.35: p in [0.41, 0.59]
    p = model.predict_proba(X)[:, 1]

    def game(config):
        method = defense.shadow_recourse(config, None)  # one per game
        return [
            defense.owner_recourse(config, method, model, None, None, X)[0].info["noisy_probability"] - p
            for _ in range(3)
        ]

    noise = game(cfg)
    # two calls on the same inputs: independent draws (correlation within 5 / sqrt(n) of 0; before: exactly 1)
    for a, c in ((0, 1), (1, 2), (0, 2)):
        assert not np.allclose(noise[a], noise[c])
        assert abs(np.corrcoef(noise[a], noise[c])[0, 1]) < 5 / np.sqrt(n)
    # the same seed in a new game replays every call; another seed does not
    again = game(cfg)
    for a, c in zip(noise, again):
        np.testing.assert_array_equal(a, c)
    assert not np.allclose(game(AuditConfig(**{**SMALL, "seed": 1}, defense="laplace", epsilon=eps))[0], noise[0])
    # the first answer is the one a fresh generator of the owner's seed gives (the targets' numbers are unchanged)
    first = LaplaceRecourse(epsilon=eps, random_state=derive_seed(cfg.seed, 6)).generate(model, X)
    np.testing.assert_array_equal(first.info["noisy_probability"] - p, noise[0])
    # the scale still matches Laplace(1 / epsilon): nothing clamped (P(|noise| > 0.41) = e^-20.5); variance
    # 2 b^2 with the sample variance's sd sqrt(20 / m) b^2 (fourth moment 24 b^4), mean |noise| b with sd
    # b / sqrt(m); 5 standard deviations each
    pooled = np.concatenate(noise)
    m = pooled.size
    assert abs(pooled.mean()) < 5 * np.sqrt(2) * b / np.sqrt(m)
    assert abs(pooled.var() - 2 * b**2) < 5 * np.sqrt(20 / m) * b**2
    assert abs(np.abs(pooled).mean() - b) < 5 * b / np.sqrt(m)


# ----------------------------------------------------------------------------- accounting
def test_a_query_stream_exhausts_the_budget_and_the_next_query_is_refused():
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    session = RecourseSession(LaplaceRecourse(epsilon=0.5, random_state=0), model, budget=2.0)
    for i in range(4):
        session.answer(X[i : i + 1])
        assert session.spent == pytest.approx(0.5 * (i + 1))
    assert session.remaining == 0.0 and session.n_queries == 4
    state = session.method._rng.bit_generator.state
    with pytest.raises(BudgetExceededError, match=r"budget is epsilon 2 and 2 is already spent") as err:
        session.answer(X[4:5])
    assert "epsilon 0.5" in str(err.value)
    assert session.method._rng.bit_generator.state == state  # refused before any noise was drawn
    assert session.spent == 2.0 and session.n_queries == 4 and session.n_refused == 1


def test_a_batch_that_would_exceed_the_budget_is_refused_whole():
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    method = LaplaceRecourse(epsilon=1.0, random_state=0)
    session = RecourseSession(method, model, budget=4.0)
    session.answer(X[:3])
    with pytest.raises(BudgetExceededError, match="asks for epsilon 2 "):
        session.answer(X[3:5])
    assert session.spent == 3.0
    session.answer(X[3:4])  # one more fits exactly
    assert session.remaining == 0.0
    assert method.accountant is None  # the caller's object is untouched


def test_a_budget_of_n_queries_answers_all_n_however_the_product_rounds(tmp_path):
    """The LR defense's session has budget n * eps for its n targets. 3337 * 0.01 is 33.37 less a float ulp, which
    counted in units of 1e-9 fell one unit short of itself and refused HELOC's 3,337 targets (stop 45). The batch fits
    in memory and on a shared ledger, and one query more is still refused."""
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(3338, 2))
    for n, eps in ((3337, 0.01), (1001, 0.1), (7, 0.3)):
        for ledger in (None, QueryLedger(tmp_path / f"b{n}.sqlite", n * eps)):
            session = RecourseSession(
                LaplaceRecourse(epsilon=eps, random_state=0), model, budget=n * eps, ledger=ledger
            )
            session.answer(X[:n])
            assert session.remaining == pytest.approx(0.0, abs=1e-9)
            with pytest.raises(BudgetExceededError):
                session.answer(X[n : n + 1])


def test_a_multi_row_batch_on_a_shared_ledger_is_charged_per_row(tmp_path):
    """Basic composition on the shared ledger: a batch of n rows spends n * epsilon, in one atomic spend."""
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    path = tmp_path / "budget.sqlite"
    ledger = QueryLedger(path, 4.0)
    mine = RecourseSession(LaplaceRecourse(epsilon=0.5, random_state=0), model, budget=4.0, ledger=ledger)
    theirs = RecourseSession(LaplaceRecourse(epsilon=0.5, random_state=1), model, budget=4.0, ledger=path)
    mine.answer(X[:3])
    assert ledger.spent == pytest.approx(1.5, abs=1e-9) and ledger.n_spends == 1
    theirs.answer(X[3:7])  # another session (or process) on the same file
    assert mine.spent == theirs.spent == pytest.approx(3.5, abs=1e-9) and ledger.n_spends == 2
    state = mine.method._rng.bit_generator.state
    with pytest.raises(BudgetExceededError, match="asked for epsilon 1, "):  # 2 rows: 1.0 > 0.5 left
        mine.answer(X[7:9])
    assert mine.method._rng.bit_generator.state == state and mine.n_refused == 2
    assert ledger.spent == pytest.approx(3.5, abs=1e-9) and ledger.n_spends == 2
    mine.answer(X[7:8])  # one row fits exactly
    assert ledger.remaining == 0.0 and mine.n_queries == 4 and theirs.n_queries == 4


def test_a_malformed_batch_costs_no_budget_on_a_shared_ledger(tmp_path):
    """Bad input is refused before the spend: a 1-D row, a wrong width or a NaN cost the caller nothing."""
    model = _linear_model()
    ledger = QueryLedger(tmp_path / "budget.sqlite", 4.0)
    session = RecourseSession(LaplaceRecourse(epsilon=0.5, random_state=0), model, budget=4.0, ledger=ledger)
    for bad in (np.zeros(2), np.zeros((3, 5)), np.array([[np.nan, 0.0]])):
        with pytest.raises(InvalidInputError, match="X"):
            session.answer(bad)
    assert ledger.spent == 0.0 and ledger.n_spends == 0 and session.n_queries == 0
    session.answer(np.zeros((2, 2)))
    assert ledger.spent == pytest.approx(1.0, abs=1e-9)


def test_a_ledger_reopened_with_another_budget_is_refused(tmp_path):
    path = tmp_path / "budget.sqlite"
    QueryLedger(path, 2.0).spend(0.5)
    with pytest.raises(ValueError, match=r"holds a budget of epsilon 2, not 3; a budget is fixed"):
        QueryLedger(path, 3.0)
    again = QueryLedger(path, 2.0)  # the same budget: the same ledger
    assert again.spent == 0.5 and again.remaining == 1.5 and again.n_spends == 1


def test_ledger_spends_in_rounded_up_units_and_says_what_remains(tmp_path):
    ledger = QueryLedger(tmp_path / "new" / "dir" / "budget.sqlite", 1.0)  # missing folders are made
    assert ledger.spend(0.0) == 0.0  # a free step is recorded, not refused
    assert ledger.spend(1 / 3) == 0.333_333_334  # each cost rounded up to the next 1e-9
    assert ledger.spend(1 / 3) == 0.666_666_668
    with pytest.raises(BudgetExceededError, match=r"0\.666667 is already spent \(0\.333333 remains"):
        ledger.spend(1 / 3)  # 3 x 0.333333334 > 1
    assert ledger.n_spends == 3 and ledger.spent == 0.666_666_668


def test_a_finite_accountant_refuses_a_batch_that_exceeds_what_remains():
    """LaplaceRecourse checks its accountant for the whole batch's epsilon, not one answer's."""
    from diffprivlib.accountant import BudgetAccountant

    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    acc = BudgetAccountant(epsilon=2.5)
    method = LaplaceRecourse(epsilon=1.0, accountant=acc, random_state=0)
    state = method._rng.bit_generator.state
    with pytest.raises(BudgetExceededError, match=r"asks for epsilon 3 \(3 recourse queries"):
        method.generate(model, X[:3])  # each row would fit alone
    assert acc.total()[0] == 0.0 and method._rng.bit_generator.state == state  # nothing spent, no noise
    method.generate(model, X[:2])
    assert acc.total()[0] == pytest.approx(2.0)
    with pytest.raises(BudgetExceededError, match="0.5 remains"):
        method.generate(model, X[2:4])
    assert acc.total()[0] == pytest.approx(2.0)
    with BudgetAccountant(epsilon=1.5):  # diffprivlib's default accountant, as in diffprivlib
        with pytest.raises(BudgetExceededError, match="asks for epsilon 2 "):
            LaplaceRecourse(epsilon=1.0, random_state=0).generate(model, X[:2])


def test_session_refusals_name_the_batch_and_accumulate():
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    session = RecourseSession(LaplaceRecourse(epsilon=0.5, random_state=0), model, budget=1.0)
    session.answer(X[:1])
    for _ in range(2):
        with pytest.raises(BudgetExceededError) as err:
            session.answer(X[1:4])
        assert (
            "the batch asks for epsilon 1.5 (3 recourse queries at epsilon 0.5), but the budget is epsilon 1 "
            "and 0.5 is already spent (0.5 remains)" in str(err.value)
        )
    assert session.n_refused == 6 and session.n_queries == 1
    assert session.accountant.total()[0] == pytest.approx(session.spent) == 0.5  # the session's own accountant


def test_costs_are_rounded_up_so_that_rounding_never_overspends():
    """Epsilon is counted in integer units of 1e-9, costs rounded up: three queries of 1/3 do not fit in 1."""
    model = _linear_model()
    X = np.random.default_rng(0).normal(size=(10, 2))
    session = RecourseSession(LaplaceRecourse(epsilon=1 / 3, random_state=0), model, budget=1.0)
    session.answer(X[:2])
    with pytest.raises(BudgetExceededError):
        session.answer(X[2:3])
    assert session.spent == 0.666_666_667 <= session.budget  # 2/3 rounded up; + 1/3 rounded up > 1


def test_session_refuses_methods_without_a_budget():
    with pytest.raises(ValueError, match="spends no privacy budget"):
        RecourseSession(make_model("logistic"), None, budget=1.0)

    class EpsilonOnly:  # an epsilon but nothing to spend it from
        epsilon = 1.0

    with pytest.raises(ValueError, match="spends no privacy budget"):
        RecourseSession(EpsilonOnly(), None, budget=1.0)
    with pytest.raises(ValueError, match="budget"):
        RecourseSession(LaplaceRecourse(epsilon=1.0), None, budget=0)


def test_ba_bound_with_delta():
    assert dp_ba_bound(1.0) == theorem2_bound(1.0)
    assert dp_ba_bound(1.0, 1e-5) == pytest.approx(theorem2_bound(1.0) + 1e-5 * np.exp(-1) / 2)
    assert dp_ba_bound(1.0, 0.5) == pytest.approx(theorem2_bound(1.0) + 0.5 * np.exp(-1) / 2, rel=1e-12)


# ----------------------------------------------------------------------------- DP models
def test_dp_logistic_rejects_rows_above_data_norm():
    X, y = _easy(100)
    X[3] *= 2.0
    with pytest.raises(ValueError, match="data_norm"):
        DPLogisticModel(epsilon=1.0).fit(X, y)
    DPLogisticModel(epsilon=1.0, data_norm=2.0, random_state=0).fit(X, y)  # a larger bound, chosen a priori


def test_dp_logistic_regularized_for_its_budget_keeps_half_of_epsilon_and_does_not_diverge():
    """Objective perturbation (Chaudhuri et al. 2011) on unit rows runs at epsilon' = epsilon - 2 log(1 + C / 4); just
    above 0 (epsilon 0.45 at C = 1: epsilon' = 0.004) the noise's scale 2 / epsilon' is about 540 and the coefficients
    are noise. budget_C moves C into the paper's Delta branch there (epsilon' <= 0: the mechanism runs at epsilon / 2
    with more regularisation), and leaves it where epsilon' <= 0 or >= epsilon / 2 already."""
    from recourse_privacy.models.dp import budget_C

    def eps_p(eps, C):  # diffprivlib's (Vector.randomise) on rows of norm <= 1
        return eps - 2 * np.log1p(0.25 * C)

    for eps, C in ((0.45, 1.0), (1.0, 1.0), (0.5, 0.3), (8.0, 1.0), (2.0, 1.0), (0.3, 1.0), (0.6, 3.0)):
        c = budget_C(eps, C)
        before = eps_p(eps, C)
        if 0 < before < eps / 2:
            assert c > C and eps_p(eps, c) <= 0 < eps_p(eps, c * (1 - 1e-6))  # just into Delta's branch
        else:
            assert c == C  # diffprivlib's own rule already keeps epsilon / 2
    rng = np.random.default_rng(5)
    X = rng.random((4000, 46)) * (rng.random((4000, 46)) < 0.5)
    y = (X[:, :5].sum(1) + rng.normal(0, 0.3, 4000) > 1.25).astype(int)
    kw = dict(epsilon=0.45, data_norm=np.sqrt(46))
    plain = [DPLogisticModel(**kw, regularize_for_budget=False, random_state=k).fit(X, y) for k in range(3)]
    held = [DPLogisticModel(**kw, regularize_for_budget=True, random_state=k).fit(X, y) for k in range(3)]
    assert min(np.abs(m.coef_).max() for m in plain) > 300  # the noise at epsilon' = 0.004 (the test's power)
    for m in held:
        assert m.C_ == budget_C(0.45) > 1.0 and np.abs(m.coef_).max() < 50 and abs(m.intercept_) < 50
        assert 0.1 < m.predict(X).mean() < 0.9


def test_dp_logistic_accuracy_rises_with_epsilon():
    X, y = _easy(2000, 5, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # data_norm is never inferred
        acc = [
            np.mean([np.mean(DPLogisticModel(epsilon=e, random_state=k).fit(X, y).predict(X) == y) for k in range(5)])
            for e in (0.01, 1.0, 100.0)
        ]
    assert acc[0] < acc[1] - 0.05 and acc[1] < acc[2] and acc[2] > 0.9
    m = DPLogisticModel(epsilon=1.0, random_state=0).fit(X, y)
    assert m.is_linear and m.coef_.shape == (5,) and m.epsilon_ == 1.0
    np.testing.assert_array_equal(m.coef_, DPLogisticModel(epsilon=1.0, random_state=0).fit(X, y).coef_)


def test_dp_mlp_trains_and_reports_its_epsilon():
    X, y = _easy(300, 4, seed=1, unit=False)
    m = DPMLPModel(epsilon=4.0, delta=1e-3, hidden_layers=(16,), epochs=3, batch_size=100, lr=1e-2, random_state=0).fit(
        X, y
    )
    assert 0 < m.epsilon_ <= 4.0 and m.noise_multiplier_ > 0 and m.delta_ == 1e-3
    assert m.decision_function(X).shape == (300,) and m.is_differentiable
    assert np.mean(m.predict(X) == y) > 0.6
    m2 = DPMLPModel(
        epsilon=4.0, delta=1e-3, hidden_layers=(16,), epochs=3, batch_size=100, lr=1e-2, random_state=0
    ).fit(X, y)
    np.testing.assert_allclose(m.decision_function(X), m2.decision_function(X))  # seeded noise and sampling


def test_model_registry_builds_dp_models_and_needs_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        make_model("dp-logistic")
    assert isinstance(make_model("dp-logistic", epsilon=1.0), DPLogisticModel)
    assert make_model("dp-logistic", epsilon=1.0).regularize_for_budget  # the default keeps epsilon' >= epsilon / 2
    assert make_model("dp-mlp", epsilon=1.0).hidden_layers == (1000,)


# ----------------------------------------------------------------------------- the audit
SMALL = dict(
    dataset="synthetic",
    n_features=10,
    n_members=200,
    shadow_models=2,
    n_calibration=100,
    attacks=("cfd", "cfd-lrt-global"),
    normalize_rows=True,
    distance="l2",
)


def test_audit_with_laplace_writes_the_dp_block(tmp_path):
    r = run_audit(AuditConfig(**SMALL, defense="laplace", epsilon=0.5), tmp_path)
    dp = json.loads((tmp_path / "metrics.json").read_text())["dp"]
    n_targets = len(r.is_member)
    assert dp["defense"] == "laplace" and dp["epsilon_per_query"] == 0.5
    assert dp["epsilon_total"] == dp["budget"] == n_targets * 0.5 and dp["n_queries"] == n_targets
    assert dp["ba_bound_paper"] == pytest.approx(theorem2_bound(0.5)) and "basic" in dp["composition"]
    # the verdict's bound: tight, at the selected-target epsilon 2 x 0.5
    assert dp["ba_bound"] == pytest.approx(np.exp(1.0) / (1 + np.exp(1.0))) and dp["selected_epsilon"] == 1.0
    assert dp["ba_bound_tight"] == pytest.approx(np.exp(0.5) / (1 + np.exp(0.5)))
    v = dp["verdict"]
    # the adaptive attacks run whatever --attacks says, and the verdict is the worst case over the distance attacks
    assert {"lr-direction", "lr-reconstruction"} <= set(r.attacks) and set(v["covered"]) == {
        "cfd",
        "cfd-lrt-global",
        "lr-direction",
        "lr-reconstruction",
    }
    assert (
        v["exceeds"] == (v["ba_lower_confidence"] > dp["ba_bound"])
        and v["ba_lower_confidence"] < v["balanced_accuracy"]
    )
    assert v["balanced_accuracy"] == max(r.attacks[a].balanced_accuracy for a in v["covered"])
    assert r.recourse.method == "laplace" and 0 < dp["clamped_share"] < 1
    assert "Differential privacy" in (tmp_path / "report.html").read_text()
    # LR's moves reveal w's direction: projecting the targets on it ranks them exactly as the baseline's CFD
    base = run_audit(AuditConfig(**SMALL))
    assert dp["direction_attack"]["auc"] == pytest.approx(base.attacks["cfd"].auc, abs=1e-12)


def test_audit_with_dpm_trains_the_dp_model(tmp_path):
    r = run_audit(AuditConfig(**SMALL, defense="dpm", epsilon=1.0), tmp_path)
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["model"]["name"] == "dp-logistic" and m["config"]["model"] == "logistic"
    assert m["dp"]["epsilon_per_query"] == m["dp"]["epsilon_total"] == 1.0
    assert m["dp"]["ba_bound_paper"] == pytest.approx(theorem2_bound(1.0))
    assert m["dp"]["ba_bound"] == pytest.approx(np.exp(2.0) / (1 + np.exp(2.0)))
    assert r.recourse.method == "linear"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(defense="laplace"), "epsilon"),
        (dict(defense="dpm", epsilon=-1.0), "epsilon"),
        (dict(defense="dpm", epsilon=float("inf")), "epsilon"),
        (dict(defense="none", epsilon=1.0), "defense"),
        (dict(defense="noise", epsilon=1.0), "defense"),
        (dict(defense="laplace", epsilon=1.0, model="mlp", recourse="scfe"), "linear"),
        (dict(defense="dpm", epsilon=1.0, normalize_rows=False), "normalize-rows"),
        (dict(model="dp-logistic"), "--defense dpm"),
        (dict(recourse="laplace"), "--defense laplace"),
        (dict(defense="dpm", epsilon=1.0, model_params={"epsilon": 2}), "once"),
    ],
)
def test_bad_defense_settings_fail_early(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AuditConfig(**{**SMALL, **kwargs}).validate()


@pytest.mark.parametrize("defense", ["laplace", "dpm-laplace"])
@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(model="mlp", recourse="scfe"), "--model logistic"),
        (dict(recourse="scfe"), "got recourse 'scfe'"),
        (dict(actionable=True), "--actionable"),
    ],
)
def test_both_laplace_defenses_refuse_the_same_settings_naming_themselves(defense, kwargs, match):
    with pytest.raises(IncompatibleError, match=match) as err:
        AuditConfig(**{**SMALL, **kwargs}, defense=defense, epsilon=1.0).validate()
    assert f"defense {defense!r}" in str(err.value)


def test_dpm_laplace_needs_a_row_norm_bound_as_dpm_does():
    for defense in ("dpm", "dpm-laplace"):
        with pytest.raises(InvalidInputError, match="--normalize-rows"):
            AuditConfig(**{**SMALL, "normalize_rows": False}, defense=defense, epsilon=1.0).validate()
        AuditConfig(
            **{**SMALL, "normalize_rows": False}, model_params={"data_norm": 3.0}, defense=defense, epsilon=1.0
        ).validate()  # a bound given: accepted


def test_dpm_keeps_the_mlp_architecture():
    name, params = (
        AuditConfig(**{**SMALL, "model": "mlp3-100", "recourse": "scfe"}, defense="dpm", epsilon=2.0)
        .validate()
        .effective_model
    )
    assert name == "dp-mlp" and params["hidden_layers"] == (100, 100, 100) and params["epsilon"] == 2.0


def test_cli_audit_with_defense_and_bad_epsilon(tmp_path):
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    args = [
        "audit",
        "--n-features",
        "10",
        "--n-members",
        "200",
        "--shadow-models",
        "2",
        "--attacks",
        "cfd",
        "--normalize-rows",
        "--out",
        str(tmp_path),
    ]
    ok = CliRunner().invoke(app, args + ["--defense", "laplace", "--epsilon", "1"])
    assert ok.exit_code == 0, ok.output
    assert "Theorem 2" in ok.output and "verdict:" in ok.output
    assert json.loads((tmp_path / "metrics.json").read_text())["dp"]["epsilon_per_query"] == 1.0
    bad = CliRunner().invoke(app, args + ["--defense", "laplace", "--epsilon", "0"])
    assert bad.exit_code == 2 and "epsilon" in bad.output


def test_tradeoff_writes_table_and_plots_and_resumes(tmp_path):
    from recourse_privacy.evaluation.tradeoff import run_tradeoff, tradeoff_base_config

    base = tradeoff_base_config(n_features=10, n_members=200, attacks=("cfd",))
    first = run_tradeoff(base, tmp_path, epsilons=(1.0,))
    assert [r["setting"] for r in first.rows] == ["baseline", "dpm-eps1", "laplace-eps1"]
    for name in (
        "tradeoff.csv",
        "tradeoff.json",
        "attacks_vs_epsilon.png",
        "accuracy_vs_epsilon.png",
        "cfd_histograms.png",
    ):
        assert (tmp_path / name).stat().st_size > 0
    lr = first.rows[2]
    assert lr["epsilon_per_query"] == 1.0 and lr["clamped_share"] > 0 and lr["cfd:auc"] is not None
    again = run_tradeoff(base, tmp_path, epsilons=(1.0,))
    assert again.skipped == ["baseline", "dpm-eps1", "laplace-eps1"] and again.rows == first.rows


@pytest.mark.parametrize("recourse", ["face", "gs", "dice"])
def test_dpm_refuses_recourse_fitted_on_members(recourse):
    with pytest.raises(IncompatibleError, match="recourse-fit adversary"):
        AuditConfig(recourse=recourse, defense="dpm", epsilon=1.0, normalize_rows=True).validate()
    AuditConfig(
        recourse=recourse, defense="dpm", epsilon=1.0, normalize_rows=True, recourse_fit="adversary"
    ).validate()  # fitted on data the adversary sees: accepted
    with pytest.raises(ValueError, match="recourse_fit"):
        AuditConfig(recourse_fit="public").validate()


def test_dpm_laplace_is_the_sound_path(tmp_path):
    r = run_audit(AuditConfig(**SMALL, defense="dpm-laplace", epsilon=1.0))
    dp = r.dp
    assert r.model.name == "dp-logistic" and r.recourse.method == "laplace"
    assert dp.epsilon_total == dp.epsilon_per_query == 1.0 and "whole release" in dp.guarantee
    assert "lr-reconstruction" in r.attacks and set(dp.verdict.covered) == set(r.attacks)  # DP model: all covered
    with pytest.raises(IncompatibleError, match="dpm-laplace"):
        AuditConfig(**{**SMALL, "model": "mlp"}, defense="dpm-laplace", epsilon=1.0).validate()


# ----------------------------------------------------------------------------- a new defense is one file


def test_a_new_defense_is_one_class_shown_by_list_and_played_by_an_audit() -> None:
    """The contract of 'a new defense is one file': one registered Defense subclass, then `list` and a tiny audit see it."""
    from typer.testing import CliRunner

    from recourse_privacy.cli import app
    from recourse_privacy.defenses.registry import DEFENSES, Defense, register_defense

    calls: list[str] = []

    @register_defense("throwaway", description="a contract test's defense: the owner releases exact linear recourse")
    class Throwaway(Defense):
        name = "throwaway"

        def validate(self, config) -> None:
            calls.append("validate")

        def recourse(self, config) -> str:
            return "linear"

    try:
        shown = CliRunner().invoke(app, ["list", "defense"], terminal_width=400)
        assert shown.exit_code == 0 and "throwaway" in shown.output and "a contract test's defense" in shown.output
        cfg = AuditConfig(
            dataset="synthetic", n_features=4, n_members=60, attacks=("cfd",), defense="throwaway", seed=0
        )
        result = run_audit(cfg, None)
        assert "validate" in calls and result.config.defense == "throwaway"
        assert result.recourse.method == "linear" and result.dp is None and result.attacks["cfd"].n_members > 0
    finally:
        DEFENSES.remove("throwaway")


def test_audit_config_looks_its_defense_up_once_and_pickles_without_it(monkeypatch) -> None:
    """validate, the attacks, the model and the recourse all read one lookup; a pickled config drops it."""
    import pickle
    from dataclasses import replace

    from recourse_privacy.defenses.registry import DEFENSES, Defense, register_defense
    from recourse_privacy.errors import UnknownNameError

    @register_defense("lookup-once", description="a test's defense defined in a function (not importable)")
    class LookupOnce(Defense):
        name = "lookup-once"
        adaptive_attacks = ("random",)

        def recourse(self, config) -> str:
            return "linear"

    try:
        looked_up: list[str] = []
        real_get = DEFENSES.get
        monkeypatch.setattr(DEFENSES, "get", lambda name: looked_up.append(name) or real_get(name))
        cfg = AuditConfig(**SMALL, defense="lookup-once").validate()
        assert cfg.defense_entry is real_get("lookup-once").obj
        assert cfg.attack_names[-1] == "random" and cfg.effective_recourse == "linear"
        assert cfg.effective_model == ("logistic", {})
        assert looked_up == ["lookup-once"]
        back = pickle.loads(pickle.dumps(cfg))  # the local class could not be pickled
        assert back == cfg and "defense_entry" not in vars(back) and back.defense_entry is cfg.defense_entry
        assert replace(cfg, defense="none").defense_entry is real_get("none").obj  # a new config, a new lookup
    finally:
        DEFENSES.remove("lookup-once")
    with pytest.raises(UnknownNameError, match="defense"):
        AuditConfig(**SMALL, defense="lookup-once").validate()
