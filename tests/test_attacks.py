"""Attacks: the LRT's estimators against their formulas, planted signals, direction calibration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from recourse_privacy.attacks import (
    AttackScores,
    ShadowData,
    balanced_keep,
    calibrate_direction,
    cfd_attack,
    cfd_lrt_attack,
    check_attack_names,
    fit_reference,
    loss_attack,
    lrt_scores,
    random_attack,
    run_shadow_models,
)
from recourse_privacy.models import make_model
from recourse_privacy.recourse import LinearRecourse


def test_fit_reference_per_example_is_the_mle():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(50, 8))
    mask = rng.random((50, 8)) < 0.7
    mask[:, :2] = True
    r = fit_reference(ref, mask)
    for i in range(50):
        v = ref[i, mask[i]]
        assert r.mu[i] == pytest.approx(v.mean())
        assert r.sigma[i] == pytest.approx(v.std(ddof=0))  # Algorithm 1, line 11: 1/N, not 1/(N-1)
        assert r.dof[i] == mask[i].sum() - 1
    med = fit_reference(ref, mask, center="median")
    assert med.mu[3] == pytest.approx(np.median(ref[3, mask[3]]))


def test_fit_reference_global_pools_within_row_variance():
    ref = np.array([[0.0, 2.0, 4.0], [10.0, 10.0, 13.0]])
    mask = np.ones_like(ref, bool)
    r = fit_reference(ref, mask, variance="global")
    pooled = ((0 - 2) ** 2 + 0 + (4 - 2) ** 2 + 1 + 1 + 4) / 6
    np.testing.assert_allclose(r.sigma, np.sqrt(pooled))
    np.testing.assert_allclose(r.mu, [2.0, 11.0])


def test_fit_reference_fallback_for_rows_without_enough_shadows():
    ref = np.array([[1.0, 3.0, 5.0], [100.0, 0.0, 0.0]])
    mask = np.array([[True, True, True], [True, False, False]])
    r = fit_reference(ref, mask)
    assert r.n_fallback == 1
    assert r.mu[1] == pytest.approx((1 + 3 + 5 + 100) / 4)
    assert r.sigma[1] == pytest.approx(np.sqrt(8 / 3))
    with pytest.raises(ValueError, match="fewer than 2"):
        fit_reference(ref, np.zeros_like(mask))


def test_lrt_scores_are_log_cdfs():
    ref = fit_reference(np.array([[0.0, 2.0], [1.0, 3.0]]), np.ones((2, 2), bool))
    stat = np.array([2.5, -1.0])
    z = (stat - ref.mu) / ref.sigma
    np.testing.assert_allclose(lrt_scores(stat, ref), stats.norm.logcdf(z))
    np.testing.assert_allclose(lrt_scores(stat, ref, direction="less"), stats.norm.logsf(z))
    # Student-t: the predictive scale of one new value, s sqrt(1 + 1/n) with s^2 = 2 x MLE (n = 2, dof 1)
    np.testing.assert_allclose(lrt_scores(stat, ref, cdf="t"), stats.t.logcdf(z / np.sqrt(3.0), df=1))
    far = lrt_scores(np.array([1e9, -1e9]), ref)
    assert np.isfinite(far).all() and far[0] > far[1]


def test_planted_shift_auc_matches_theory():
    # out-statistic ~ N(mu_i, 1) per example; members are shifted by delta. With the true
    # reference, the LRT's AUC is Phi(delta / sqrt(2)); the shadow fit (N=64) comes close.
    rng = np.random.default_rng(1)
    n, N, delta = 4000, 64, 0.5
    mu = rng.normal(scale=3.0, size=n)
    member = rng.random(n) < 0.5
    stat = mu + rng.normal(size=n) + delta * member
    ref = mu[:, None] + rng.normal(size=(n, N))
    scores = lrt_scores(stat, fit_reference(ref, np.ones((n, N), bool)))
    auc = roc_auc_score(member, scores)
    se = np.sqrt((n + 1) / (12 * (n / 2) ** 2))  # Mann-Whitney standard error
    assert abs(auc - stats.norm.cdf(delta / np.sqrt(2))) < 4 * se + 0.01
    # without the per-example center, the threshold attack on the raw statistic is much weaker
    assert roc_auc_score(member, stat) < auc - 0.05  # theory: Phi(0.5/sqrt(20)) = 0.544 vs 0.638


@pytest.mark.parametrize("sign,expected", [(+1, "greater"), (-1, "less")])
def test_direction_is_decided_on_the_shadow_game(sign, expected):
    rng = np.random.default_rng(2)
    n, N = 600, 8
    keep = balanced_keep(n, N, 0.5, rng)
    stat = rng.normal(size=(n, 1)) + rng.normal(scale=0.5, size=(n, N)) + sign * 0.8 * keep
    everyone = np.ones((n, N), bool)
    d = calibrate_direction(stat, everyone, everyone, keep)
    assert d.direction == expected
    assert (d.shadow_auc > 0.6) if sign > 0 else (d.shadow_auc < 0.4)
    assert d.n_pseudo_targets == n * N


def test_balanced_keep():
    keep = balanced_keep(1000, 10, 0.5, 3)
    assert (keep.sum(axis=1) == 5).all()
    np.testing.assert_array_equal(keep, balanced_keep(1000, 10, 0.5, 3))
    assert abs(keep.sum(axis=0).mean() - 500) < 1e-9
    with pytest.raises(ValueError, match="shadow_fraction"):
        balanced_keep(10, 4, 1.0)


def test_simple_attacks_and_names():
    cfd = np.array([1.0, 3.0, 2.0])
    np.testing.assert_array_equal(cfd_attack(cfd).scores, cfd)
    np.testing.assert_array_equal(loss_attack(cfd).scores, -cfd)
    r = random_attack(20000, 0)
    assert abs(roc_auc_score(np.arange(20000) % 2, r.scores) - 0.5) < 4 * np.sqrt(20001 / (12 * 1e8))
    np.testing.assert_array_equal(r.scores, random_attack(20000, 0).scores)
    with pytest.raises(ValueError, match="'cfdx'"):
        check_attack_names(["cfd", "cfdx"])
    with pytest.raises(ValueError, match="non-finite"):
        AttackScores("x", np.array([0.0, np.nan]))


def _linear_world(seed=0, d=30):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)

    def draw(n):
        X = rng.normal(size=(n, d))
        return X, (X @ w + rng.normal(scale=2.0, size=n) > 0).astype(int)

    return draw


def test_shadow_models_shapes_and_resume(tmp_path):
    draw = _linear_world()
    Xa, ya = draw(400)
    Xt, yt = draw(60)
    make = lambda k: make_model("logistic", C=10.0)
    kw = dict(n_shadow=4, n_calibration=100, random_state=5)
    first = run_shadow_models(make, LinearRecourse(), Xa, ya, Xt, yt, cache_dir=tmp_path, **kw)
    assert first.cfd_targets.shape == (60, 4) and first.keep_calib.shape == (100, 4)
    assert (first.keep_calib.sum(axis=1) == 2).all()
    assert (first.cfd_targets[first.usable_targets] > 0).all()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"shadow_{k}.npz" for k in range(4)]

    def boom(k):
        raise AssertionError("a cached shadow model was trained again")

    again = run_shadow_models(boom, LinearRecourse(), Xa, ya, Xt, yt, cache_dir=tmp_path, **kw)
    for name in ("cfd_targets", "conf_targets", "cfd_calib", "keep_calib"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))


def test_cfd_lrt_end_to_end_beats_random_on_overfit_linear_models():
    draw = _linear_world(seed=4, d=300)  # d > n: the models interpolate, as at Pawelczyk et al.'s (2023) high d
    Xm, ym = draw(200)
    Xn, yn = draw(200)
    Xa, ya = draw(400)
    make = lambda k: make_model("logistic", C=100.0)
    owner = make(0).fit(Xm, ym)
    rm, rn = owner.predict(Xm) == 0, owner.predict(Xn) == 0
    Xt, yt = np.vstack([Xm[rm], Xn[rn]]), np.concatenate([ym[rm], yn[rn]])
    member = np.r_[np.ones(rm.sum()), np.zeros(rn.sum())]
    cfd = LinearRecourse().generate(owner, Xt).distance("l2")
    shadow = run_shadow_models(
        make, LinearRecourse(), Xa, ya, Xt, yt, n_shadow=8, n_calibration=400, distance="l2", random_state=1
    )
    s = cfd_lrt_attack(cfd, shadow)
    assert s.direction == "greater"
    n1, n0 = member.sum(), (1 - member).sum()
    null_se = np.sqrt((n1 + n0 + 1) / (12 * n1 * n0))  # AUC's standard error under no leakage
    assert roc_auc_score(member, s.scores) > 0.5 + 4 * null_se
    assert isinstance(shadow, ShadowData) and s.conventions["variance"] == "per-example"


def test_complementary_pairs_give_equal_shadow_sizes():
    keep = balanced_keep(101, 6, 0.5, 0)
    assert set(keep.sum(axis=0)) == {50}
    assert (keep[:, 0::2] & keep[:, 1::2]).sum() == 0  # the two shadows of a pair share no row
    assert set(keep.sum(axis=1)) <= {2, 3}
    odd = balanced_keep(100, 5, 0.5, 0)  # exact sizes for an odd count: each shadow 50 rows, each point in 2 or 3
    assert set(odd.sum(axis=0)) == {50} and set(odd.sum(axis=1)) == {2, 3}


@pytest.mark.parametrize("n,k,f", [(1000, 5, 0.5), (1001, 3, 0.5), (10, 7, 0.3), (997, 9, 0.25)])
def test_keep_sizes_are_exact_for_any_shadow_count(n, k, f):
    keep = balanced_keep(n, k, f, 1)
    m = int(np.floor(f * n))
    assert (keep.sum(axis=0) == m).all()
    per_point = keep.sum(axis=1)
    assert per_point.max() - per_point.min() <= 1 and per_point.sum() == k * m


def test_equal_out_references_keeps_exactly_n_per_row():
    from recourse_privacy.attacks.lrt import equal_out_references

    rng = np.random.default_rng(0)
    out = rng.random((500, 9)) < 0.6
    out[:, :3] = True  # every row has at least 3
    kept = equal_out_references(out, 3, np.random.default_rng(1))
    assert (kept.sum(axis=1) == 3).all() and not (kept & ~out).any()


@pytest.mark.parametrize("n_shadow", [4, 5])
def test_direction_calibration_on_a_null_game_falls_back(n_shadow):
    """No signal at all (the statistic ignores membership): the shadow AUC stays in its null band."""
    from recourse_privacy.attacks.lrt import resolve_direction

    fired, aucs = 0, []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        n = 400
        keep = balanced_keep(n, n_shadow, 0.5, rng)
        stat = rng.normal(size=(n, 1)) + rng.normal(scale=0.5, size=(n, n_shadow))
        stat = np.where(rng.random((n, n_shadow)) < 0.6, 3.0, stat)  # a spike of ties, as LR's clamp makes
        usable = rng.random((n, n_shadow)) < 0.7  # validity filtering, independent of membership
        conv: dict = {}
        d = resolve_direction("auto", conv, stat, usable, usable, keep, random_state=seed)
        aucs.append(conv["shadow_auc"])
        fired += conv["direction_fallback"]
        assert conv["n_out_references"] == {4: 1, 5: 2}[n_shadow]  # the fewer out-shadows of a pseudo-non-member
        assert d == "greater" or not conv["direction_fallback"]
    # each game's AUC is null: at most one of six outside its 95% band (binomial: P[>= 2] ~ 0.03)
    assert fired >= 5
    # with one more out-reference per pseudo-member (the old game) the mean AUC was 0.468 (4 shadows), 0.481 (5)
    assert abs(np.mean(aucs) - 0.5) < 0.015


def test_lr_reconstruction_rebuilds_the_model_from_the_release():
    """Under Laplace Recourse the release gives u exactly and ||w|| from the clamping spike; b is fitted on the pool."""
    from recourse_privacy.attacks.reconstruction import rebuild_linear_model
    from recourse_privacy.data import load_dataset
    from recourse_privacy.defenses import LaplaceRecourse
    from recourse_privacy.models import make_model

    ds = load_dataset("synthetic", n_samples=3000, n_features=20, random_state=0)
    X = ds.X.to_numpy() / np.linalg.norm(ds.X.to_numpy(), axis=1, keepdims=True)
    y = ds.y
    model = make_model("logistic").fit(X[:1000], y[:1000])
    rejected = X[1000:2000][model.predict(X[1000:2000]) == 0]
    from diffprivlib.accountant import BudgetAccountant

    res = LaplaceRecourse(epsilon=0.5, random_state=0, accountant=BudgetAccountant()).generate(model, rejected)
    rb = rebuild_linear_model(res, X[2000:], y[2000:])
    w = model.coef_
    assert rb.u @ w / np.linalg.norm(w) == pytest.approx(1.0, abs=1e-12)
    assert rb.norm == pytest.approx(np.linalg.norm(w), rel=1e-9) and "spike" in rb.norm_source
    # b from 1,000 pool rows: the boundary offset b/||w|| within a tenth of the rows' spread along u
    assert abs(rb.intercept / rb.norm - model.intercept_ / np.linalg.norm(w)) < 0.1 * np.std(X[2000:] @ rb.u)


def test_keep_sets_differ_between_shadows():
    # 5 shadows of half a pool: no two shadows may train on the same rows (a wrap-around window design would
    # give shadows 0, 2 and 4 identical sets when 5 x m is a multiple of the pool)
    keep = balanced_keep(1000, 5, 0.5, 0)
    overlap = keep.T.astype(int) @ keep.astype(int)
    assert (overlap[~np.eye(5, dtype=bool)] < 400).all()  # about 250 shared rows expected for independent halves


def test_student_t_scores_are_calibrated_for_a_new_draw():
    # 4 reference values and one new value from the same normal: the t predictive p-value is exactly uniform
    rng = np.random.default_rng(0)
    n_rows = 40_000
    ref = fit_reference(rng.normal(size=(n_rows, 4)), np.ones((n_rows, 4), bool))
    p = np.exp(lrt_scores(rng.normal(size=n_rows), ref, cdf="t"))
    se = np.sqrt(0.05 * 0.95 / n_rows)
    assert abs(np.mean(p <= 0.05) - 0.05) < 4 * se  # MLE sigma with t(3) would give about 0.09


def test_a_direction_game_that_could_not_be_played_says_why_without_nan():
    """One out-reference per pseudo-target (two reference models shared by offline and online attacks):
    the conventions say the game could not be played, not "AUC nan"."""
    from recourse_privacy.attacks.lrt import DirectionDecision

    text = DirectionDecision("greater", float("nan"), 50, fallback=True, n_out_references=1).describe()
    assert "could not be played" in text and "1 out-references" in text and "nan" not in text
    played = DirectionDecision("less", 0.62, 50, null_halfwidth=0.05, n_out_references=4).describe()
    assert played.startswith("shadow calibration: AUC 0.6200")
