"""The verdict's attacks tested together: Mann-Whitney's null test of each AUC, Holm-corrected (Holm 1979).

With k attacks each checked at 5%, luck alone makes at least one leave chance up to k x 5% of the time.
The verdict keeps its per-attack findings (they err toward "leaks") and says which attacks still leave
chance once their AUCs are tested as a family. These tests check the p-value against scipy's
Mann-Whitney test, the step-down against Holm's definition, and the family-wise error rate by simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from recourse_privacy.metrics import auc_null_halfwidth, auc_null_pvalue
from recourse_privacy.report import make_verdict
from recourse_privacy.report.verdict import AttackAssessment, family_wise
from recourse_privacy.results.summaries import AttackResult

N = 1000  # members and non-members each in the hand-made results
SD = auc_null_halfwidth(N, N, z=1.0)


def _auc(scores: np.ndarray, member: np.ndarray) -> float:
    return float(stats.mannwhitneyu(scores[member], scores[~member]).statistic / (member.sum() * (~member).sum()))


@pytest.mark.parametrize("shift", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("sizes", [(40, 60), (500, 300)])
def test_the_p_value_is_mann_whitneys_asymptotic_test(shift, sizes):
    n1, n0 = sizes
    rng = np.random.default_rng(7)
    s = np.concatenate([rng.normal(shift, 1, n1), rng.normal(0, 1, n0)])  # continuous: no ties
    member = np.arange(n1 + n0) < n1
    ref = stats.mannwhitneyu(s[member], s[~member], method="asymptotic", use_continuity=False).pvalue
    assert auc_null_pvalue(_auc(s, member), n1, n0) == pytest.approx(ref, rel=1e-9)


def test_ties_make_the_p_value_conservative():
    rng = np.random.default_rng(3)
    s = np.round(np.concatenate([rng.normal(0.4, 1, 300), rng.normal(0, 1, 300)]))  # few distinct values
    member = np.arange(600) < 300
    tie_corrected = stats.mannwhitneyu(s[member], s[~member], method="asymptotic", use_continuity=False).pvalue
    assert auc_null_pvalue(_auc(s, member), 300, 300) > tie_corrected  # ties shrink the true null variance


def test_the_p_value_matches_the_band():
    # an AUC on the edge of auc_null_halfwidth's 95% band has p = 0.05
    edge = 0.5 + auc_null_halfwidth(200, 300)
    assert auc_null_pvalue(edge, 200, 300) == pytest.approx(2 * stats.norm.sf(1.96), rel=1e-12)
    assert auc_null_pvalue(0.5, 200, 300) == 1.0
    with pytest.raises(ValueError, match="auc"):
        auc_null_pvalue(1.2, 10, 10)


def _result(name: str, signal: str, auc: float) -> AttackResult:
    """An attack of N members and non-members whose bootstrap interval is auc +- 1.96 SD."""
    hw = 1.96 * SD
    return AttackResult(
        name=name,
        auc=auc,
        balanced_accuracy=0.5 + abs(auc - 0.5) / 2,
        tpr_at_fpr={"0.01": 0.01},
        achieved_fpr={"0.01": 0.0098},
        tpr_at_fpr_reliable={"0.01": True},
        n_members=N,
        n_nonmembers=N,
        direction="greater",
        signal=signal,
        auc_ci=(auc - hw, auc + hw),
        tpr_at_fpr_ci={"0.01": (0.005, 0.018)},
        achieved_fpr_ci={"0.01": (0.0045, 0.018)},
        n_bootstrap=1000,
    )


def _p(auc: float) -> float:
    return math.erfc(abs(auc - 0.5) / SD / math.sqrt(2))


def test_holm_keeps_the_strong_attack_and_drops_the_marginal_one():
    # z = 2.17 for the marginal attack: p = 0.030 alone (its interval excludes 0.5), 0.060 as the second of three
    attacks = {
        "loss-lrt": _result("loss-lrt", "score", 0.5 + 2.17 * SD),
        "cfd-lrt": _result("cfd-lrt", "distance", 0.60),
        "cfd": _result("cfd", "distance", 0.505),
        "random": _result("random", "none", 0.5 + 2.5 * SD),  # a control: never counted
    }
    v = make_verdict(attacks)
    assert v.level == "leak" and set(v.significant) == {"loss-lrt", "cfd-lrt"}
    fw = v.family_wise
    assert fw.k == 3 and set(fw.p_holm) == {"loss-lrt", "cfd-lrt", "cfd"}
    p1, p2, p3 = _p(0.60), _p(0.5 + 2.17 * SD), _p(0.505)
    assert p2 < 0.05 < 2 * p2
    assert fw.p_holm["cfd-lrt"] == pytest.approx(3 * p1, rel=1e-9)
    assert fw.p_holm["loss-lrt"] == pytest.approx(max(3 * p1, 2 * p2), rel=1e-9)
    assert fw.p_holm["cfd"] == pytest.approx(max(3 * p1, 2 * p2, p3), rel=1e-9)
    assert fw.survivors == ("cfd-lrt",)
    assert "cfd-lrt (adjusted p" in fw.text and "loss-lrt detect(s) leakage only without it" in fw.text
    assert fw.text in v.explanation


def test_leakage_that_does_not_survive_the_correction_is_said_to_rest_on_single_tests():
    attacks = {n: _result(n, s, 0.5 + 2.17 * SD) for n, s in (("loss", "score"), ("cfd", "distance"))}
    v = make_verdict(attacks)
    assert v.level == "leak"  # each attack's own 5% test still stands: the safe side
    assert v.family_wise.survivors == ()
    assert "rests on single tests" in v.family_wise.text


def test_one_attack_or_none_with_sizes_has_no_family():
    assert make_verdict({"cfd": _result("cfd", "distance", 0.6)}).family_wise is None
    no_sizes = _result("loss", "score", 0.6)
    no_sizes = AttackResult(**{**no_sizes.__dict__, "n_members": None, "n_nonmembers": None})
    v = make_verdict({"cfd": _result("cfd", "distance", 0.6), "loss": no_sizes})
    assert v.family_wise is None  # only one attack can be tested


def _null_assessment(name: str, auc: float, n: int) -> AttackAssessment:
    return AttackAssessment(name, auc, None, None, n, n, None, None, False)


def test_holm_holds_the_family_wise_error_at_five_percent_where_single_tests_do_not():
    # 400 audits of k = 5 attacks that carry no membership (independent scores, 200 targets per side).
    # Holm: P(any survivor) <= 5%, so at most 20 expected: 34 is 3.3 binomial sds above (sd 4.4).
    # Uncorrected: 1 - 0.95^5 = 22.6%, 90 expected (sd 8.4); at least 55 is 4 sds below.
    reps, k, n = 400, 5, 200
    rng = np.random.default_rng(2026)
    scores = rng.normal(size=(reps, k, 2 * n))
    ranks = stats.rankdata(scores, axis=-1)
    aucs = (ranks[..., :n].sum(-1) - n * (n + 1) / 2) / (n * n)
    family = uncorrected = 0
    for row in aucs:
        fw = family_wise([_null_assessment(f"a{j}", float(a), n) for j, a in enumerate(row)])
        family += bool(fw.survivors)
        uncorrected += any(p < 0.05 for p in fw.p_values.values())
    assert family <= 34
    assert uncorrected >= 55
