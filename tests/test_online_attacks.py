"""Online CFD-LRT / Loss-LRT (LiRA's two-sided test) and RMIA on counterfactual distances."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

import recourse_privacy.audit.stages as stages
from _games import linear_game
from recourse_privacy import AuditConfig, run_audit
from recourse_privacy.attacks.online import cfd_lrt_online_attack
from recourse_privacy.attacks.registry import RMIAOptions
from recourse_privacy.attacks.rmia import cfd_probability, marginal, rmia_cfd_attack, rmia_scores
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.registry import model_factory

ONLINE = ("cfd-lrt-online", "loss-lrt-online", "rmia-cfd", "rmia-cfd-online")


@pytest.fixture(scope="module")
def game():
    """A tiny synthetic game (d = 1,000 > n = 300: the overfitting regime where recourse leaks), 8 references."""
    cfg = AuditConfig(
        n_features=1000, n_members=300, shadow_models=8, variance="global", attacks=("cfd-lrt", *ONLINE)
    ).validate()
    data, targets, method, offline, online = linear_game(cfg)
    return cfg, data, targets, method, offline, online


def _scores(game, targets=None, online=None):
    cfg, data, t, method, offline, on = game
    t = targets or t
    res = method.generate(t.model, t.X)
    query = stages.owner_cfd_query(lambda X: method.generate(t.model, X), cfg.distance)
    inputs = stages.attack_inputs(cfg, data, t, res, res.distance("l1"), offline, online or on, query)
    return stages.run_attacks(cfg, inputs)


def test_online_keep_matrix_puts_every_target_in_half_the_models(game):
    cfg, data, targets, _, _, online = game
    assert online.keep_targets.shape == (len(targets.X), 8)
    assert (online.keep_targets.sum(axis=1) == 4).all()
    # every model trains on the owner's number of rows, give or take the odd target of a pair
    assert np.abs(online.train_rows - len(data.X_members)).max() <= 1
    # budgets: the first B models of an even budget keep every target in exactly B / 2
    for b in (2, 4):
        assert (online.subset(np.arange(b)).keep_targets.sum(axis=1) == b // 2).all()


def test_online_attacks_beat_random_on_a_tiny_game(game):
    _, _, targets, *_ = game
    y = targets.is_member
    n1, n0 = int(y.sum()), int((y == 0).sum())
    null_sd = np.sqrt((n1 + n0 + 1) / (12 * n1 * n0))  # Mann-Whitney: the AUC's sd under no signal
    from sklearn.metrics import roc_auc_score

    for name, s in _scores(game).items():
        assert roc_auc_score(y, s.scores) > 0.5 + 3 * null_sd, name


def test_scores_do_not_read_membership(game):
    cfg, data, targets, method, offline, _ = game
    rng = np.random.default_rng(1)
    shuffled = replace(targets, is_member=rng.permutation(targets.is_member))
    online = stages.train_online_models(
        cfg, model_factory("logistic"), method, data, shuffled, cache_dir=None, progress=lambda *a: None
    )
    a, b = _scores(game), _scores(game, shuffled, online)
    for name in a:
        np.testing.assert_array_equal(a[name].scores, b[name].scores, err_msg=name)


def test_rmia_counts_its_population_queries(game):
    cfg, data, targets, method, offline, online = game
    asked = []

    def query(X):
        asked.append(len(X))
        return method.generate(targets.model, X).distance("l1")

    res = method.generate(targets.model, targets.X)
    s = rmia_cfd_attack(
        res.distance("l1"),
        offline,
        X_pool=data.X_pool,
        predict=targets.model.predict,
        query_cfd=query,
        options=RMIAOptions(n_population=50),
    )
    assert sum(asked) == s.conventions["population_recourse_queries"] == s.conventions["n_population"] == 50
    assert s.conventions["population_decision_queries"] >= 50
    assert 0 <= s.conventions["a"] <= 1 and "tuned" in s.conventions["a_source"]


def test_two_sided_lr_on_a_hand_built_example():
    # target 0: in-values log c = [2, 4] (mean 3, MLE sd 1), out-values [0, 1] (mean 0.5, sd 0.5)
    ref_c = np.exp(np.array([[2.0, 4.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]))
    keep = np.array([[True, True, False, False], [True, False, True, False]])
    ones = np.ones_like(keep)
    sh = ShadowData(
        keep_calib=keep[:1],
        cfd_targets=ref_c,
        usable_targets=ones,
        conf_targets=np.zeros(keep.shape),
        cfd_calib=ref_c[:1],
        usable_calib=ones[:1],
        rejected_calib=ones[:1],
        conf_calib=np.zeros((1, 4)),
        train_accuracy=np.ones(4),
        rejected_targets=ones,
        keep_targets=keep,
    )
    s = cfd_lrt_online_attack(np.exp([2.5, 1.0]), sh).scores
    want = stats.norm.logpdf(2.5, 3.0, 1.0) - stats.norm.logpdf(2.5, 0.5, 0.5)
    assert s[0] == pytest.approx(want, rel=1e-12)


def test_rmia_pairwise_ratio_with_the_a_approximation():
    # offline: out-signals of x under two models 0.2, 0.4 -> Pr_OUT = 0.3; a = 0.5 -> Pr(x) = (1.5 x 0.3 + 0.5)/2
    pr_x = marginal(np.array([[0.2, 0.4]]), None, a=0.5)
    assert pr_x[0] == pytest.approx(0.475)
    # a = 1: Pr(x) = Pr_OUT(x); online (a None): the mean over every model
    assert marginal(np.array([[0.2, 0.4]]), None, a=1.0)[0] == pytest.approx(0.3)
    assert marginal(np.array([[0.2, 0.4, 0.9]]), np.array([[False, False, True]]), a=None)[0] == pytest.approx(0.5)
    # a z is out of the models where keep is False only
    assert marginal(np.array([[0.2, 0.9]]), np.array([[False, True]]), a=1.0)[0] == pytest.approx(0.2)
    # LR(x, z) = (p_x / Pr(x)) / (p_z / Pr(z)) >= gamma: x's ratio 0.6 / 0.475 = 1.263; z ratios 0.5, 1.0, 1.5, 2.0
    p_z, pr_z = np.array([0.5, 1.0, 0.75, 1.0]), np.array([1.0, 1.0, 0.5, 0.5])
    s = rmia_scores(np.array([0.6]), pr_x, p_z, pr_z, gamma=1.0)
    assert np.floor(s[0] * 4) / 4 == pytest.approx(2 / 4)  # z with ratio 0.5 and 1.0
    s2 = rmia_scores(np.array([0.6]), pr_x, p_z, pr_z, gamma=2.5)  # 1.263 / 2.5 = 0.505 -> one z
    assert np.floor(s2[0] * 4) / 4 == pytest.approx(1 / 4)
    # the signal: c / (c + s), its mirror for 'less', 0 for an accepted point (no recourse)
    np.testing.assert_allclose(cfd_probability([0.0, 1.0, 3.0], 1.0), [0.0, 0.5, 0.75])
    np.testing.assert_allclose(cfd_probability([1.0, 3.0], 1.0, "less"), [0.5, 0.25])
    with pytest.raises(InvalidInputError, match="gamma"):
        rmia_scores(np.ones(1), np.ones(1), np.ones(1), np.ones(1), gamma=0)


def test_audit_trains_online_models_only_for_online_attacks():
    offline = run_audit(n_features=50, n_members=100, shadow_models=2, attacks=("cfd", "cfd-lrt"))
    assert "online reference models" not in offline.timing_seconds
    assert not AuditConfig(attacks=("cfd-lrt",)).needs_online_shadow
    cfg = AuditConfig(attacks=("loss-lrt-online",))
    assert cfg.needs_online_shadow and not cfg.needs_online_recourse and not cfg.needs_shadow_models
    with pytest.raises(InvalidInputError, match="rmia_a"):
        AuditConfig(rmia_a=1.5).validate()


def test_reference_budget_quick_writes_table_and_plot(tmp_path):
    from recourse_privacy.reproductions.reference_budget import BudgetStudy, run_reference_budget

    study = BudgetStudy.quick(datasets=("synthetic",), budgets=(1, 2))
    table = run_reference_budget(tmp_path, study)
    assert len(table) == 6 * 2 and set(table["budget"]) == {1, 2}
    assert (tmp_path / "reference_budget.csv").exists() and (tmp_path / "reference_budget.png").exists()
    again = run_reference_budget(tmp_path, study)  # resumed from scores.npz, same numbers
    np.testing.assert_array_equal(table["auc"].to_numpy(), again["auc"].to_numpy())


# ---- one set of reference models for the offline and the online attacks (issue 28, item 4) ----

OFFLINE = ("cfd-lrt", "loss-lrt", "rmia-cfd")


def _offline_scores(game, shadow):
    cfg, data, t, method, _, online = game
    cfg = replace(cfg, attacks=OFFLINE)
    res = method.generate(t.model, t.X)
    query = stages.owner_cfd_query(lambda X: method.generate(t.model, X), cfg.distance)
    inputs = stages.attack_inputs(cfg, data, t, res, res.distance("l1"), shadow, online, query)
    return stages.run_attacks(cfg, inputs)


class _Recorder:
    """A logistic model that remembers the rows it was fitted on (to check which targets each model saw)."""

    fitted: dict = {}

    def __init__(self, k):
        self.k, self.inner = k, model_factory("logistic")(k)

    def fit(self, X, y):
        _Recorder.fitted[self.k] = {row.tobytes() for row in np.asarray(X)}
        self.inner.fit(X, y)
        return self

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_offline_attacks_on_shared_references_use_only_models_whose_pools_exclude_the_target(game):
    # the offline attacks' inputs: for each target, the models it reads never trained on that target (the target's
    # row is absent from every such model's training pool), and each target still has half of the models
    cfg, data, targets, method, _, _ = game
    _Recorder.fitted = {}
    shared = stages.train_online_models(cfg, _Recorder, method, data, targets, cache_dir=None, progress=lambda *a: None)
    assert stages.shares_references(cfg)
    assert (
        stages.train_shadow_models(
            cfg, _Recorder, method, data, targets, cache_dir=None, progress=lambda *a: None, online=shared
        )
        is shared
    )
    out = shared.out_targets
    assert not (out & shared.keep_targets).any() and (out.sum(axis=1) == shared.n_shadow // 2).all()
    from recourse_privacy.validation import derive_seed

    rows = [_Recorder.fitted[derive_seed(cfg.seed, 300 + k)] for k in range(shared.n_shadow)]  # model k's seed
    seen = np.array([[x.tobytes() in rows[k] for k in range(shared.n_shadow)] for x in targets.X])
    np.testing.assert_array_equal(seen, shared.keep_targets)  # the keep matrix is what the models trained on
    assert not (seen & out).any()
    # the offline direction game: only calibration rows the keep matrix drew (in some models, out of the others)
    game_rows = shared.game_calib
    assert (
        game_rows.any() and (shared.keep_calib[game_rows].any(axis=1) & ~shared.keep_calib[game_rows].all(axis=1)).all()
    )


def test_offline_attacks_on_shared_references_never_read_a_target_under_a_model_trained_on_it(game):
    # garbage in every (target, in-model) entry leaves the offline attacks' scores exactly as they were
    _, _, _, _, _, online = game
    rng = np.random.default_rng(3)
    k = online.keep_targets
    spoiled = replace(
        online,
        cfd_targets=np.where(k, rng.exponential(50.0, k.shape), online.cfd_targets),
        conf_targets=np.where(k, rng.normal(0, 30, k.shape), online.conf_targets),
        rejected_targets=np.where(k, rng.random(k.shape) < 0.5, online.rejected_targets),
        usable_targets=np.where(k, rng.random(k.shape) < 0.5, online.usable_targets),
    )
    a, b = _offline_scores(game, online), _offline_scores(game, spoiled)
    for name in OFFLINE:
        np.testing.assert_array_equal(a[name].scores, b[name].scores, err_msg=name)


def _hanley_mcneil_var(auc, n1, n0):
    """The AUC's variance (Hanley and McNeil 1982)."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    return (auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n0 - 1) * (q2 - auc**2)) / (n1 * n0)


def test_offline_attacks_on_shared_references_match_a_separate_shadow_set(game):
    # same seed, same targets: the offline attacks' AUCs with the shared set (4 out-models per target) and with
    # 8 shadow models of their own differ by less than 3 standard errors of an AUC difference (independent bound)
    from sklearn.metrics import roc_auc_score

    _, _, targets, _, offline, online = game
    y = targets.is_member
    n1, n0 = int(y.sum()), int((y == 0).sum())
    sep, shared = _offline_scores(game, offline), _offline_scores(game, online)
    for name in OFFLINE:
        a, b = roc_auc_score(y, sep[name].scores), roc_auc_score(y, shared[name].scores)
        se = np.sqrt(_hanley_mcneil_var(a, n1, n0) + _hanley_mcneil_var(b, n1, n0))
        assert abs(a - b) <= 3 * se, (name, a, b, se)


def test_audit_of_both_kinds_trains_one_set_of_reference_models(monkeypatch):
    calls = []
    real = stages.run_shadow_models
    monkeypatch.setattr(stages, "run_shadow_models", lambda *a, **k: calls.append(k.get("online")) or real(*a, **k))
    result = run_audit(n_features=50, n_members=100, shadow_models=4, attacks=("cfd-lrt", "cfd-lrt-online"))
    assert calls == [True]
    assert "online reference models" in result.timing_seconds and "shadow models" not in result.timing_seconds
    # an offline attack that does not declare reads_out_targets keeps a shadow set of its own
    assert not stages.shares_references(AuditConfig(attacks=("cfd-lrt", "cfd-lrt-online"), shadow_fraction=0.4))
    assert not stages.shares_references(AuditConfig(attacks=("cfd-lrt",)))
