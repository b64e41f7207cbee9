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

from recourse_privacy.metrics import auc_null_halfwidth, auc_null_pvalue, tpr_at_fpr, tpr_null_pvalue
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


def _members_before(j: int, n1: int, k0: int, n0: int) -> float:
    """P(exactly j members rank above the (k0 + 1)-th non-member) when every order is equally likely.

    The first j + k0 + 1 places hold j members and k0 non-members in any order, then a non-member; the rest
    hold the other members and non-members: C(j + k0, j) C(n1 - j + n0 - k0 - 1, n1 - j) / C(n1 + n0, n1).
    """
    return math.comb(j + k0, j) * math.comb(n1 - j + n0 - k0 - 1, n1 - j) / math.comb(n1 + n0, n1)


@pytest.mark.parametrize(("n1", "n0", "k0"), [(30, 40, 0), (60, 50, 3), (25, 90, 9)])
def test_the_tpr_p_value_is_the_tail_of_members_ranked_before_the_threshold(n1, n0, k0):
    pmf = [_members_before(j, n1, k0, n0) for j in range(n1 + 1)]
    assert sum(pmf) == pytest.approx(1.0, abs=1e-12)
    for k1 in (0, 1, n1 // 4, n1 // 2, n1):
        assert tpr_null_pvalue(k1, n1, k0, n0) == pytest.approx(sum(pmf[k1:]), rel=1e-6, abs=1e-15)  # scipy's tail
    with pytest.raises(ValueError, match="k_nonmembers"):
        tpr_null_pvalue(1, 10, 10, 10)


def test_the_tpr_p_value_holds_its_level_on_the_audits_own_tpr_reading():
    # 1,000 null audits, 300 a side, TPR read by metrics.tpr_at_fpr at FPR 1% (k0 = 3): P(p < 0.05) <= 5%
    # (discrete: below it); 1,000 x 5% = 50 expected at most, 50 + 3.3 sd (6.9) = 73.
    rng = np.random.default_rng(11)
    y = np.repeat([1, 0], 300)
    low = 0
    for _ in range(1000):
        t = tpr_at_fpr(y, rng.normal(size=600), 0.01)
        low += tpr_null_pvalue(round(t.tpr * 300), 300, 3, 300) < 0.05
    assert low <= 73


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
    t = tpr_null_pvalue(10, N, 10, N)  # every attack: TPR 1% (10 of N members) at k0 = 10
    assert t > 0.3  # no TPR signal: the AUC arm decides
    p1, p2, p3 = (min(1.0, 2 * min(_p(a), t)) for a in (0.60, 0.5 + 2.17 * SD, 0.505))
    assert _p(0.5 + 2.17 * SD) < 0.05 < p2  # the marginal attack's AUC leaves chance alone, not doubled
    assert fw.p_values["loss-lrt"] == pytest.approx(p2, rel=1e-9) and fw.p_tpr["cfd"] == pytest.approx(t)
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


def _null_assessment(name: str, auc: float, tpr: float, n: int) -> AttackAssessment:
    return AttackAssessment(name, auc, None, tpr, n, n, None, None, False)


def test_holm_holds_the_family_wise_error_at_five_percent_where_single_tests_do_not():
    # 400 audits of k = 5 attacks that carry no membership (independent scores, 200 targets per side), each
    # tested on both arms (AUC, and TPR at 1% FPR as the audit reads it). Holm over the attacks' doubled
    # p-values: P(any survivor) <= 5%, at most 20 expected: 34 is 3.3 binomial sds above (sd 4.4).
    # Uncorrected (any arm of any attack below 0.05): at least 1 - 0.95^5 = 22.6% from the AUCs alone,
    # 90 expected (sd 8.4); at least 55 is 4 sds below.
    reps, k, n = 400, 5, 200
    rng = np.random.default_rng(2026)
    scores = rng.normal(size=(reps, k, 2 * n))
    ranks = stats.rankdata(scores, axis=-1)
    aucs = (ranks[..., :n].sum(-1) - n * (n + 1) / 2) / (n * n)
    y = np.repeat([1, 0], n)
    family = uncorrected = 0
    for row, auc_row in zip(scores, aucs):
        tprs = [tpr_at_fpr(y, s, 0.01).tpr for s in row]
        fw = family_wise([_null_assessment(f"a{j}", float(a), t, n) for j, (a, t) in enumerate(zip(auc_row, tprs))])
        assert not any(math.isnan(p) for p in fw.p_tpr.values())
        family += bool(fw.survivors)
        uncorrected += any(min(fw.p_auc[m], fw.p_tpr[m]) < 0.05 for m in fw.p_values)
    assert family <= 34
    assert uncorrected >= 55
