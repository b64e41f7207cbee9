"""An attack that cannot score the targets (no usable reference) is reported as not run, with its reason; the audit
keeps every other attack's result, and the verdict names the missing attack and gives no all-clear colour."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import recourse_privacy.audit.stages as stages
from recourse_privacy import AuditConfig, run_audit
from recourse_privacy.attacks.distance import cfd_lrt_attack
from recourse_privacy.audit import AuditResult
from recourse_privacy.errors import AttackUnavailableError
from recourse_privacy.models.registry import model_factory
from recourse_privacy.recourse.registry import make_recourse
from recourse_privacy.report.verdict import verdict_of


def _unmoved(shadow):
    """The shadow set as if its recourse had moved no target and no calibration point (distance 0)."""
    return replace(shadow, cfd_targets=np.zeros_like(shadow.cfd_targets), cfd_calib=np.zeros_like(shadow.cfd_calib))


@pytest.fixture(scope="module")
def game():
    cfg = AuditConfig(n_features=20, n_members=100, shadow_models=2, attacks=("cfd", "cfd-lrt", "loss")).validate()
    data = stages.prepare_game(cfg, stages.load_data(cfg))
    make = model_factory("logistic")
    targets = stages.train_owner(make, data, cfg.seed)
    method = make_recourse("linear")
    shadow = stages.train_shadow_models(cfg, make, method, data, targets, cache_dir=None, progress=lambda *a: None)
    res = method.generate(targets.model, targets.X)
    return cfg, data, targets, res, shadow


def _inputs(game, shadow):
    cfg, data, targets, res, _ = game
    return stages.attack_inputs(cfg, data, targets, res, res.distance("l1"), shadow)


def test_cfd_lrt_without_a_moved_reference_is_unavailable_and_the_others_run(game) -> None:
    cfg, _, _, _, shadow = game
    assert set(stages.run_available_attacks(cfg, _inputs(game, shadow))[0]) == {"cfd", "cfd-lrt", "loss"}
    unmoved = _unmoved(shadow)
    with pytest.raises(AttackUnavailableError, match="recourse moved the target in 0 "):
        cfd_lrt_attack(_inputs(game, unmoved).cfd, unmoved)
    scores, not_run = stages.run_available_attacks(cfg, _inputs(game, unmoved))
    assert set(scores) == {"cfd", "loss"} and set(not_run) == {"cfd-lrt"}
    assert "at least 2 are needed" in not_run["cfd-lrt"] and "--shadow-models" in not_run["cfd-lrt"]
    with pytest.raises(AttackUnavailableError):  # the strict runner (reference budgets, tests) still raises
        stages.run_attacks(cfg, _inputs(game, unmoved))
    only = replace(cfg, attacks=("cfd-lrt",))
    with pytest.raises(AttackUnavailableError, match="no attack could run: cfd-lrt: of the"):
        stages.run_available_attacks(only, _inputs(game, unmoved))


def test_an_audit_whose_shadow_recourse_moves_nobody_reports_cfd_lrt_as_not_run(monkeypatch, tmp_path) -> None:
    trained = stages.train_shadow_models
    monkeypatch.setattr(stages, "train_shadow_models", lambda *a, **k: _unmoved(trained(*a, **k)))
    cfg = AuditConfig(n_features=20, n_members=100, shadow_models=2, attacks=("cfd", "cfd-lrt", "loss"))
    result = run_audit(cfg, tmp_path, cache=False)
    assert set(result.attacks) == {"cfd", "loss"} and set(result.attacks_not_run) == {"cfd-lrt"}
    verdict = verdict_of(result)
    assert verdict.level == "noleak"  # the colour below would be the all-clear one
    assert verdict.incomplete and verdict.not_run.startswith("cfd-lrt, asked for, was not run: of the")
    assert verdict.not_run in verdict.explanation
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["attacks_not_run"] == dict(result.attacks_not_run)
    back = AuditResult.from_dict(metrics)
    assert back.attacks_not_run == result.attacks_not_run and verdict_of(back).not_run == verdict.not_run
    html = (tmp_path / "report.html").read_text()
    assert "cfd-lrt, asked for, was not run" in html
    assert 'class="verdict noleak"' not in html  # no all-clear colour while an attack asked for did not run
    # a result without the field (written before it) reads back with none
    del metrics["attacks_not_run"]
    assert not AuditResult.from_dict(metrics).attacks_not_run and not verdict_of(AuditResult.from_dict(metrics)).not_run


def test_a_reference_fit_without_two_usable_values_is_unavailable_not_a_bad_input() -> None:
    """Every LRT (offline, online, on distances or scores) fits its reference here: with fewer than 2 finite values
    under the mask it says the attack cannot run (still an InvalidInputError for callers that catch that)."""
    from recourse_privacy.attacks.lrt import fit_reference
    from recourse_privacy.errors import InvalidInputError

    ref = np.array([[1.0, np.inf], [np.nan, 2.0]])
    with pytest.raises(AttackUnavailableError, match="fewer than 2 usable") as info:
        fit_reference(ref, np.array([[True, True], [True, False]]))
    assert isinstance(info.value, InvalidInputError)
    assert fit_reference(ref, np.ones((2, 2), bool)).mu.shape == (2,)  # two finite values: it fits


ONLINE_ATTACKS = ("cfd", "cfd-lrt", "cfd-lrt-online", "rmia-cfd", "rmia-cfd-online", "loss-lrt-online")


@pytest.fixture(scope="module")
def online_game():
    """A game with online reference models (half of them trained on each target) beside the offline shadow set."""
    from _games import linear_game

    cfg = AuditConfig(n_features=20, n_members=100, shadow_models=4, attacks=ONLINE_ATTACKS).validate()
    data, targets, method, shadow, online = linear_game(cfg, shared=True)
    res = method.generate(targets.model, targets.X)
    return cfg, data, targets, method, res, shadow, online


def test_the_online_lrt_on_references_that_moved_nobody_is_not_run_and_rmia_says_what_its_score_is(online_game):
    """CFD-LRT (offline, online) needs reference distributions: not run, with the pairs counted (offline: out-models;
    online: every reference model). RMIA still runs: with every reference distance 0 its Pr(x) is one constant and
    its score orders the targets by p(x | theta), the owner's distance read with the label, which reads no membership
    (a valid test: on the lender journey it found AUC 0.58 [0.51, 0.64] where CFD found 0.50), and says so."""
    from recourse_privacy.attacks.rmia import cfd_probability

    cfg, data, targets, method, res, shadow, online = online_game

    def query(X):
        return method.generate(targets.model, X).distance(cfg.distance)

    def run(off, on):
        inputs = stages.attack_inputs(cfg, data, targets, res, res.distance("l1"), off, on, query)
        return stages.run_available_attacks(cfg, inputs)

    scores, not_run = run(shadow, online)
    assert set(scores) == set(ONLINE_ATTACKS) and not not_run
    assert all(scores[a].conventions["reference_pairs_moved"] >= 2 for a in ("rmia-cfd", "rmia-cfd-online"))
    assert "moved none" not in scores["rmia-cfd"].conventions["references"]
    scores, not_run = run(_unmoved(shadow), _unmoved(online))
    assert set(scores) == {"cfd", "loss-lrt-online", "rmia-cfd", "rmia-cfd-online"}
    assert set(not_run) == {"cfd-lrt", "cfd-lrt-online"}
    n_rejected = int(online.rejected_targets.sum())
    assert not_run["cfd-lrt-online"].startswith(f"of the {n_rejected} (target, reference model) pairs")
    n_out = int((online.rejected_targets & online.out_targets).sum())  # offline attacks read the out-models only
    assert not_run["cfd-lrt"].startswith(f"of the {n_out} (target, shadow model) pairs") and n_out < n_rejected
    cfd, y = res.distance("l1"), targets.y
    for name in ("rmia-cfd", "rmia-cfd-online"):
        conv = scores[name].conventions
        assert conv["reference_pairs_moved"] == 0 and "moved none of the targets" in conv["references"]
        for label in np.unique(y):  # within a label p(x | theta) is monotone in the distance, whatever the scale
            rows = np.flatnonzero(y == label)
            p = cfd_probability(cfd[rows], 1.0, scores[name].direction, y[rows])
            order = np.argsort(scores[name].scores[rows], kind="stable")
            assert np.all(np.diff(p[order]) >= -1e-12)  # ordered by p(x | theta) alone
        assert len(np.unique(cfd)) > 50  # distinct distances: the order is a real one
