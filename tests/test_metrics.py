"""Membership-inference metrics: hand-computed cases, warnings, statistics, plots."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from recourse_privacy.metrics import (
    AttackMetrics,
    LowFprWarning,
    attack_metrics,
    auc,
    auc_null_halfwidth,
    balanced_accuracy,
    plot_roc_loglog,
    plot_score_histogram,
    roc,
    roc_loglog_figure,
    score_histogram_figure,
    theorem2_bound,
    tpr_at_fpr,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- known answers


def test_perfect_separation():
    labels = np.array([1] * 10 + [0] * 10)
    scores = np.concatenate([np.arange(10) + 100.0, np.arange(10.0)])
    assert auc(labels, scores) == 1.0
    assert balanced_accuracy(labels, scores) == 1.0
    t = tpr_at_fpr(labels, scores, 0.1)  # 10 non-members: 0.1 is resolvable
    assert t.tpr == 1.0
    assert t.achieved_fpr == 0.0
    assert t.reliable


def test_reversed_scores():
    labels = np.array([1] * 10 + [0] * 10)
    scores = np.concatenate([np.arange(10.0), np.arange(10) + 100.0])
    assert auc(labels, scores) == 0.0
    # BA at the best threshold of "member if score >= t": only the trivial thresholds.
    assert balanced_accuracy(labels, scores) == 0.5
    assert tpr_at_fpr(labels, scores, 0.1).tpr == 0.0


def test_tpr_read_at_roc_point_without_interpolation():
    # scores 6(m) 5(m) 4(m) 4(n) 2(n) 1(n); the tie at 4 makes a diagonal ROC segment.
    # ROC points: (0,0) (0,1/3) (0,2/3) (1/3,1) (2/3,1) (1,1).
    labels = np.array([1, 1, 1, 0, 0, 0])
    scores = np.array([6.0, 5.0, 4.0, 4.0, 2.0, 1.0])
    curve = roc(labels, scores)
    np.testing.assert_allclose(curve.fpr, [0, 0, 0, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(curve.tpr, [0, 1 / 3, 2 / 3, 1, 1, 1])
    with pytest.warns(LowFprWarning):  # 3 non-members < 1/0.25
        t = tpr_at_fpr(labels, scores, 0.25)
    # Linear interpolation would give 2/3 + 0.25 = 0.9167; the rule reads the point (0, 2/3).
    assert t.tpr == pytest.approx(2 / 3)
    assert t.achieved_fpr == 0.0
    assert t.target_fpr == 0.25
    assert t.reliable is False


def test_tpr_at_fpr_exact_point_and_achieved_fpr():
    # 4 members, 4 non-members. Scores 8m 7n 6m 5m 5n 3m 2n 1n.
    # ROC: (0,0) (0,.25) (.25,.25) (.25,.5) (.5,.75) (.5,1) (.75,1) (1,1).
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 0])
    scores = np.array([8, 7, 6, 5, 5, 3, 2, 1], dtype=float)
    t = tpr_at_fpr(labels, scores, 0.25)
    assert (t.tpr, t.achieved_fpr, t.reliable) == (0.5, 0.25, True)
    # Target 0.4 is between ROC points: still (0.25, 0.5), not 0.65 by interpolation.
    t2 = tpr_at_fpr(labels, scores, 0.4)  # 4 non-members >= ceil(1/0.4) = 3: reliable
    assert (t2.tpr, t2.achieved_fpr, t2.reliable) == (0.5, 0.25, True)
    # Balanced accuracy: best of (tpr + 1 - fpr)/2 is at (0.5, 1) -> 0.75.
    assert balanced_accuracy(labels, scores) == 0.75
    # AUC by hand: pairs (m > n) + 0.5 ties over 16 pairs.
    # m=8: 4; m=6: 3; m=5: 2 + 0.5 (tie with n=5); m=3: 2 -> 11.5 / 16.
    assert auc(labels, scores) == pytest.approx(11.5 / 16)


def test_ties_all_equal_give_half():
    labels = np.array([1, 0] * 20)
    scores = np.full(40, 3.0)
    assert auc(labels, scores) == 0.5
    assert balanced_accuracy(labels, scores) == 0.5
    assert tpr_at_fpr(labels, scores, 0.1).tpr == 0.0


# --------------------------------------------------------------------------- low-FPR warning


def test_low_fpr_warning_and_reliable_flag():
    rng = np.random.default_rng(1)
    labels = np.array([1] * 50 + [0] * 50)
    scores = rng.normal(size=100)
    with pytest.warns(LowFprWarning, match=r"only 50 non-members.*at least 1000"):
        t = tpr_at_fpr(labels, scores, 0.001)
    assert t.reliable is False
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowFprWarning)
        t = tpr_at_fpr(labels, scores, 0.1)
    assert t.reliable is True


def test_attack_metrics_dict_and_keys():
    rng = np.random.default_rng(2)
    labels = np.array([1] * 200 + [0] * 300)
    scores = rng.normal(size=500) + 0.5 * labels
    with pytest.warns(LowFprWarning):  # 300 < 1000 at FPR 0.001
        m = attack_metrics(labels, scores)
    assert isinstance(m, AttackMetrics)
    assert list(m.tpr_at_fpr) == ["0.1", "0.01", "0.001"]
    d = m.to_dict()
    assert set(d) == {
        "auc",
        "balanced_accuracy",
        "tpr_at_fpr",
        "achieved_fpr",
        "tpr_at_fpr_reliable",
        "n_members",
        "n_nonmembers",
        "auc_ci",
        "tpr_at_fpr_ci",
        "achieved_fpr_ci",
        "ci_level",
        "n_bootstrap",
    }
    lo, hi = d["auc_ci"]
    assert lo < d["auc"] < hi and d["n_bootstrap"] == 1000 and d["ci_level"] == 0.95
    for k in ("0.1", "0.01", "0.001"):
        assert d["tpr_at_fpr_ci"][k][0] <= d["tpr_at_fpr"][k] <= d["tpr_at_fpr_ci"][k][1]
        assert d["achieved_fpr_ci"][k][0] <= d["achieved_fpr"][k] <= d["achieved_fpr_ci"][k][1]
    assert d["tpr_at_fpr_reliable"] == {"0.1": True, "0.01": True, "0.001": False}
    assert (d["n_members"], d["n_nonmembers"]) == (200, 300)
    assert d["auc"] == pytest.approx(auc(labels, scores))
    for k in ("0.1", "0.01", "0.001"):
        assert d["achieved_fpr"][k] <= float(k)
    assert d["tpr_at_fpr"]["0.1"] >= d["tpr_at_fpr"]["0.01"] >= d["tpr_at_fpr"]["0.001"]
    # Keys come from format(f, "g").
    m2 = attack_metrics(labels, scores, fprs=(0.25,))
    assert list(m2.tpr_at_fpr) == ["0.25"]


# --------------------------------------------------------------------------- statistics


def test_random_scores_statistics():
    rng = np.random.default_rng(12345)
    n = 20000
    labels = rng.integers(0, 2, size=n)
    scores = rng.random(n)
    n1 = int(labels.sum())
    n0 = n - n1
    sd_auc = math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))  # Mann-Whitney null sd
    assert abs(auc(labels, scores) - 0.5) <= 4 * sd_auc
    t = tpr_at_fpr(labels, scores, 0.01)
    assert t.reliable
    # Under the null the members' exceedance count is Binomial(n1, ~0.01): sd = sqrt(p q / n1).
    # The threshold itself is an empirical non-member quantile, which adds p q / n0.
    p = 0.01
    sd_tpr = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n0))
    assert abs(t.tpr - p) <= 4 * sd_tpr
    assert t.achieved_fpr <= 0.01
    # achieved FPR is the smallest FPR reaching that TPR, so it may sit below the target.
    assert 0.0 <= t.achieved_fpr
    # Null band helper matches the formula.
    assert auc_null_halfwidth(n1, n0) == pytest.approx(1.96 * sd_auc)


# --------------------------------------------------------------------------- Theorem 2


def test_theorem2_bound():
    with pytest.raises(ValueError, match="epsilon"):
        theorem2_bound(0)
    with pytest.raises(ValueError, match="epsilon"):
        theorem2_bound(-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        theorem2_bound(float("inf"))
    with pytest.raises(ValueError, match="epsilon"):
        theorem2_bound(float("nan"))
    assert theorem2_bound(1) == 0.5 + (1 - math.exp(-1)) / 2
    eps = np.linspace(0.01, 20, 200)
    b = np.array([theorem2_bound(e) for e in eps])
    assert np.all(np.diff(b) > 0)
    assert np.all(b < 1) and np.all(b > 0.5)
    assert theorem2_bound(1e-6) == pytest.approx(0.5, abs=1e-6)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "labels, scores, match",
    [
        ([1, 0, 1], [0.1, float("nan"), 0.3], r"scores must be finite.*1 non-finite"),
        ([1, 0, 1], [0.1, float("inf"), 0.3], r"scores must be finite"),
        ([1, 0, 2], [0.1, 0.2, 0.3], r"labels must contain only 0"),
        ([1, 0, -1], [0.1, 0.2, 0.3], r"labels"),
        ([1, 1, 1], [0.1, 0.2, 0.3], r"labels must contain both"),
        ([0, 0], [0.1, 0.2], r"labels must contain both"),
        ([1, 0, 1], [0.1, 0.2], r"scores has length 2 but labels has length 3"),
        ([[1, 0], [0, 1]], [0.1, 0.2, 0.3, 0.4], r"labels must be 1-D"),
        ([1, 0], [[0.1], [0.2]], r"scores must be 1-D"),
        (["a", "b"], [0.1, 0.2], r"labels must be numeric"),
    ],
)
def test_validation_errors(labels, scores, match):
    for fn in (auc, balanced_accuracy, roc, attack_metrics):
        with pytest.raises(ValueError, match=match):
            fn(labels, scores)
    with pytest.raises(ValueError, match=match):
        tpr_at_fpr(labels, scores, 0.1)


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan")])
def test_fpr_validation(bad):
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr([1, 0], [1.0, 0.0], bad)


def test_bool_labels_accepted():
    assert auc(np.array([True, False]), [1.0, 0.0]) == 1.0


# --------------------------------------------------------------------------- plots


def _curves(seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = np.array([1] * 300 + [0] * 300)
    return {
        "cfd-lrt": (labels, rng.normal(size=600) + 0.8 * labels),
        "random": (labels, rng.random(600)),
    }


def test_plot_roc_loglog(tmp_path):
    out = plot_roc_loglog(_curves(), tmp_path / "sub" / "roc.png", title="ROC")
    assert out == tmp_path / "sub" / "roc.png"
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000
    fig = roc_loglog_figure(_curves(), title="ROC")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lo, hi = ax.get_xlim()
    assert hi == 1.0 and lo == pytest.approx(1e-3)  # 300 non-members: floor is 1e-3
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lbl.startswith("cfd-lrt  AUC ") and "TPR@1%FPR" in lbl for lbl in labels)
    assert any("random guessing" in lbl for lbl in labels)
    # The dashed diagonal is present.
    assert any(line.get_linestyle() == "--" for line in ax.get_lines())


def test_plot_roc_floor_follows_nonmembers():
    rng = np.random.default_rng(3)
    labels = np.array([1] * 5000 + [0] * 5000)
    fig = roc_loglog_figure({"a": (labels, rng.random(10000))})
    assert fig.axes[0].get_xlim()[0] == pytest.approx(1 / 5000)


def test_plot_roc_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="scores must be finite"):
        plot_roc_loglog({"a": ([1, 0], [np.nan, 1.0])}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="curves"):
        plot_roc_loglog({}, tmp_path / "x.png")


def test_plot_score_histogram(tmp_path):
    rng = np.random.default_rng(4)
    mem = rng.lognormal(0.3, 0.5, 400)
    non = rng.lognormal(0.0, 0.5, 400)
    out = plot_score_histogram(mem, non, tmp_path / "hist.png")
    assert out.read_bytes()[:8] == PNG_MAGIC
    fig = score_histogram_figure(mem, non)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "counterfactual distance"
    # Shared bins: both histograms use identical edges.
    xs = [round(p.get_x(), 12) for p in ax.patches]
    half = len(xs) // 2
    assert half > 0 and len(xs) == 2 * half and xs[:half] == xs[half:]
    # Log-spaced bins: constant ratio between consecutive left edges.
    ratios = np.diff(np.log(xs[:half]))
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-6)
    # Non-positive values: linear bins and the title says so.
    fig2 = score_histogram_figure(np.append(mem, 0.0), non, title="T")
    ax2 = fig2.axes[0]
    assert ax2.get_xscale() == "linear"
    assert "non-positive" in ax2.get_title() and ax2.get_title().startswith("T")
    # log=False: linear without a note.
    ax3 = score_histogram_figure(mem, non, log=False).axes[0]
    assert ax3.get_xscale() == "linear" and ax3.get_title() == ""
    with pytest.raises(ValueError, match="member_values"):
        plot_score_histogram([], non, tmp_path / "h2.png")


def test_tight_ba_bound_is_randomized_response_and_below_theorem2():
    from recourse_privacy.metrics import tight_ba_bound

    eps = np.array([0.01, 0.1, 0.5, 1.0, 3.0, 10.0])
    tight = np.array([tight_ba_bound(e) for e in eps])
    # randomized response with P[truth] = e^eps / (1 + e^eps) is eps-DP and reaches exactly this BA
    assert np.allclose(tight, np.exp(eps) / (1 + np.exp(eps)), rtol=0, atol=1e-15)
    assert np.all(tight < np.array([theorem2_bound(e) for e in eps]))
    assert tight_ba_bound(0.5) == pytest.approx(0.6225, abs=5e-5) and theorem2_bound(0.5) == pytest.approx(
        0.6967, abs=5e-5
    )
    d = 1e-3  # the delta form: 1/2 + delta/2 + (1 - delta)(e^eps - 1)/(2(e^eps + 1))
    assert tight_ba_bound(1.0, d) == pytest.approx(0.5 + d / 2 + (1 - d) * (np.e - 1) / (2 * (np.e + 1)), rel=1e-12)
    assert tight_ba_bound(1e4) == 1.0
    with pytest.raises(ValueError, match="delta"):
        tight_ba_bound(1.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        tight_ba_bound(0.0)


def test_selected_target_privacy_doubles_epsilon():
    from recourse_privacy.metrics import selected_target_privacy

    assert selected_target_privacy(0.5) == (1.0, 0.0)
    eps, delta = selected_target_privacy(1.0, 1e-5, 0.5)
    assert eps == pytest.approx(2.0 + math.log(0.5 / (0.5 - 1e-5))) and delta == pytest.approx(
        1e-5 * math.e / (0.5 - 1e-5)
    )
    with pytest.raises(ValueError, match="selected_share"):
        selected_target_privacy(1.0, 1e-3, 1e-4)
