"""The attack a verdict names, and the score attack a recourse attack is compared with, are fixed before any score.

Taking the attack of highest AUC (or TPR) on the targets is a choice made with their membership
labels: its number is optimistic (the winner's curse). These tests give a non-lead attack a high
AUC by construction and check that it is never promoted, that the named numbers are the lead's,
and that no attack's direction is flipped.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.audit.stages import measure_attacks
from recourse_privacy.metrics.exposure import RANKING_PREFERENCE, preferred_attack
from recourse_privacy.report import make_verdict
from recourse_privacy.results.summaries import VERSUS_CHOICE, VERSUS_CHOICES, AttackResult, VersusScores

N = 400  # members and non-members each


def _labels() -> np.ndarray:
    return np.repeat([1, 0], N)


def _null(seed: int) -> np.ndarray:
    """Scores that carry no membership: their AUC is 0.5 up to sampling noise."""
    return np.random.default_rng(seed).normal(size=2 * N)


def _leaky(seed: int, shift: float) -> np.ndarray:
    """Scores whose members are shifted up by ``shift`` standard deviations: AUC Phi(shift / sqrt 2)."""
    return _null(seed) + shift * _labels()


def test_preferred_attack_reads_names_and_signals_only():
    signals = {"loss": "score", "cfd": "distance", "random": "none", "cfd-lrt": "distance", "plugin": "distance"}
    assert preferred_attack(signals) == "cfd-lrt"
    assert preferred_attack(signals, "score") == "loss"
    assert preferred_attack({"random": "none", "plugin": ""}) == "plugin"  # a control comes last
    assert preferred_attack({"plugin-b": "distance", "plugin-a": "distance"}) == "plugin-b"  # unlisted: as given
    assert preferred_attack(signals, "weights") is None and preferred_attack({}) is None
    # every order of the same attacks gives the same lead
    for perm in itertools.permutations(["loss", "cfd", "cfd-lrt", "loss-lrt"]):
        sig = {n: signals.get(n, "score") for n in perm}
        assert preferred_attack(sig) == "cfd-lrt" and preferred_attack(sig, "score") == "loss-lrt"
    # the weak label-only attack is never the lead score attack beside a loss attack
    assert RANKING_PREFERENCE.index("label-only") > RANKING_PREFERENCE.index("loss")


def test_measure_attacks_compares_with_the_lead_score_attack_not_the_best_one():
    y = _labels()
    scores = {
        "loss": AttackScores("loss", _leaky(1, 1.0)),  # AUC ~ 0.76: the best score attack on these targets
        "loss-lrt": AttackScores("loss-lrt", _null(2)),  # AUC ~ 0.5: the lead score attack
        "cfd-lrt": AttackScores("cfd-lrt", _leaky(3, 0.5)),
        "cfd": AttackScores("cfd", -_leaky(4, 0.5)),  # members scored low: AUC below 0.5, kept so
    }
    results, _ = measure_attacks(scores, y, seed=0)
    assert results["loss"].auc > results["loss-lrt"].auc + 0.15  # the old rule would have picked loss
    for name in ("cfd-lrt", "cfd"):
        v = results[name].versus_scores
        assert v.attack == "loss-lrt" and v.choice == VERSUS_CHOICE
        assert v.auc_difference == pytest.approx(results[name].auc - results["loss-lrt"].auc, abs=1e-12)
    assert results["cfd"].auc < 0.5 and results["cfd"].direction == "greater"  # never flipped
    assert results["loss"].versus_scores is None  # only recourse attacks are compared with the scores


def test_the_lead_score_attack_does_not_depend_on_which_one_leaks():
    # The same four attacks with the leaky scores given to each score attack in turn: the comparison's
    # score attack stays loss-lrt whichever score attack comes out best.
    y = _labels()
    for leaky in ("loss", "loss-lrt"):
        scores = {
            n: AttackScores(n, _leaky(i, 1.0) if n == leaky else _null(i))
            for i, n in enumerate(("loss", "loss-lrt", "cfd-lrt"))
        }
        results, _ = measure_attacks(scores, y, seed=0)
        assert results["cfd-lrt"].versus_scores.attack == "loss-lrt"


def _result(name, signal, auc, lo, hi, tpr, tlo, thi, versus=None) -> AttackResult:
    return AttackResult(
        name=name,
        auc=auc,
        balanced_accuracy=0.5 + abs(auc - 0.5),
        tpr_at_fpr={"0.01": tpr},
        achieved_fpr={"0.01": 0.0098},
        tpr_at_fpr_reliable={"0.01": True},
        n_members=1000,
        n_nonmembers=1000,
        direction="greater",
        signal=signal,
        auc_ci=(lo, hi),
        tpr_at_fpr_ci={"0.01": (tlo, thi)},
        achieved_fpr_ci={"0.01": (0.0045, 0.018)},
        n_bootstrap=1000,
        versus_scores=versus,
    )


def test_an_attack_that_is_high_by_chance_is_not_promoted_in_the_verdict():
    # cfd looks strong on these targets (and its comparison with the scores lies above 0), the lead cfd-lrt
    # does not: the verdict lists cfd's detection but states cfd-lrt's numbers, and decides "beyond" on
    # cfd-lrt's pre-specified comparison. The old rule said "beyond" by cfd.
    lucky = VersusScores("loss-lrt", 0.09, 0.06, 0.12, choice=VERSUS_CHOICE)
    lead = VersusScores("loss-lrt", 0.004, -0.02, 0.03, choice=VERSUS_CHOICE)
    attacks = {
        "loss-lrt": _result("loss-lrt", "score", 0.60, 0.575, 0.625, 0.02, 0.012, 0.031),
        "cfd": _result("cfd", "distance", 0.69, 0.665, 0.715, 0.03, 0.02, 0.043, lucky),
        "cfd-lrt": _result("cfd-lrt", "distance", 0.604, 0.58, 0.63, 0.021, 0.013, 0.032, lead),
    }
    v = make_verdict(attacks)
    assert v.recourse.lead == "cfd-lrt" and v.scores.lead == "loss-lrt"
    assert v.attack == "cfd-lrt" and v.auc == pytest.approx(0.604)
    assert v.beyond.outcome == "not-beyond" and v.beyond.attack == "cfd-lrt" and v.beyond.versus == "loss-lrt"
    assert "(cfd, cfd-lrt). The lead attack, cfd-lrt, has AUC 0.604" in v.recourse.text
    # whatever numbers each attack carries, the named attacks are the same (they read names and signals only)
    rng = np.random.default_rng(0)
    names = ["cfd", "cfd-lrt"]
    for _ in range(5):
        aucs = rng.uniform(0.55, 0.9, size=2)
        perm = {
            n: _result(n, "distance", a, a - 0.02, a + 0.02, a / 10, a / 10 - 0.01, a / 10 + 0.01, lead)
            for n, a in zip(names, aucs)
        }
        w = make_verdict({**perm, "loss-lrt": attacks["loss-lrt"]})
        assert w.recourse.lead == "cfd-lrt" and w.attack == "cfd-lrt" and w.auc == pytest.approx(aucs[1])


def test_an_older_file_says_its_score_attack_was_chosen_by_auc():
    old = VersusScores("loss", 0.09, 0.06, 0.12)  # files written before the choice was recorded
    assert old.choice == "" and "highest AUC" in old.choice_text and "optimistic" in old.choice_text
    assert VersusScores("loss", 0.0, 0.0, 0.0, choice=VERSUS_CHOICE).choice_text == VERSUS_CHOICES[VERSUS_CHOICE]
    attacks = {
        "loss": _result("loss", "score", 0.60, 0.575, 0.625, 0.02, 0.012, 0.031),
        "cfd-lrt": _result("cfd-lrt", "distance", 0.69, 0.665, 0.715, 0.03, 0.02, 0.043, old),
    }
    v = make_verdict(attacks)
    assert v.beyond.outcome == "beyond" and "highest AUC on these targets" in v.beyond.text


def test_recourse_over_labels_compares_the_lead_recourse_attack_not_the_luckiest():
    """The labels-alone sentence names the lead recourse attack (cfd-lrt before cfd), even when cfd's AUC is higher."""
    from recourse_privacy.attacks.threat_report import QueryPoint, ThreatReport

    pts = (
        QueryPoint("cfd", 1, "recourse", 0.80, 0.2, 0.1, 0.3),
        QueryPoint("cfd-lrt", 1, "recourse", 0.60, 0.05, 0.02, 0.1),
        QueryPoint("label-only", 50, "decisions", 0.55, 0.02, 0.0, 0.05),
    )
    text = ThreatReport(threats=("membership",), queries=pts).recourse_over_labels()
    assert text is not None and text.startswith("cfd-lrt reaches AUC 0.600")
