"""Self-contained HTML report: content, escaping, DP block, verdict logic."""
from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from recourse_privacy.metrics import auc_null_halfwidth, plot_roc_loglog, theorem2_bound
from recourse_privacy.report import write_html_report


def _attack(auc, ba, tprs, n1, n0, **conv):
    keys = ("0.1", "0.01", "0.001")
    return {
        "auc": auc,
        "balanced_accuracy": ba,
        "tpr_at_fpr": dict(zip(keys, tprs)),
        "achieved_fpr": {k: float(k) * 0.98 for k in keys},
        "tpr_at_fpr_reliable": {k: n0 >= round(1 / float(k)) for k in keys},
        **conv,
    }


def _metrics(aucs=None, n1=1400, n0=1500, dp=False):
    aucs = aucs or {"cfd": 0.58, "cfd-lrt": 0.61, "loss": 0.66, "loss-lrt": 0.7, "random": 0.5}
    attacks = {}
    for name, a in aucs.items():
        conv = {"direction": "greater",
                "convention": "member if counterfactual distance >= threshold (Pawelczyk et al. 2023 eq. 3)"}
        if name.endswith("lrt"):
            conv.update(direction_source="shadow calibration (AUC 0.56 on the adversary's shadow game)",
                        variance="per-example", center="mean", cdf="normal")
        attacks[name] = _attack(a, 0.5 + (a - 0.5) * 0.8, (0.1 + (a - 0.5), 0.01 + (a - 0.5) / 4, 0.001),
                                n1, n0, **conv)
    m = {
        "config": {"dataset": "heloc", "model": "mlp", "recourse": "scfe",
                   "attacks": list(aucs), "shadow_models": 10, "n_members": 3000, "seed": 0,
                   "distance": "l1"},
        "model": {"train_accuracy": 1.0, "test_accuracy": 0.67},
        "recourse": {"method": "scfe", "validity": 0.99, "mean_l1": 1.2, "mean_l2": 0.6,
                     "n_invalid": 3},
        "n_members": n1,
        "n_nonmembers": n0,
        "attacks": attacks,
        "warnings": ["3 counterfactuals were invalid"],
        "timing": {"total_seconds": 80.1},
    }
    if dp:
        m["dp"] = {"defense": "laplace", "epsilon_per_query": 1.0, "epsilon_total": 1500.0,
                   "ba_bound": theorem2_bound(1.0)}
    return m


def _text(m, tmp_path, **kw):
    path = write_html_report(m, tmp_path, **kw)
    return path, path.read_text(encoding="utf-8")


def test_report_contents(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.array([1] * 200 + [0] * 200)
    png = plot_roc_loglog({"cfd": (labels, rng.normal(size=400) + labels)}, tmp_path / "roc.png")
    m = _metrics()
    path, text = _text(m, tmp_path / "out", images={"Log-log ROC curves of every attack": png})
    assert path == tmp_path / "out" / "report.html"
    assert list((tmp_path / "out").iterdir()) == [path]  # one self-contained file
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text.lower()
    assert "<link" not in text.lower()  # no external CSS
    assert "data:image/png;base64," in text
    assert "Log-log ROC curves of every attack" in text
    for name in m["attacks"]:
        assert f"<td>{name}</td>" in text
    # Verdict at the top, naming the strongest attack by TPR@0.01 (loss-lrt) and its AUC.
    verdict = re.search(r'<div class="verdict[^"]*">(.*?)</div>', text, re.S).group(1)
    assert text.index("verdict") < text.index("<h2>Configuration</h2>")
    assert "Leakage detected" in verdict
    assert "loss-lrt" in verdict and "0.700" in verdict
    assert "means the attacker identifies 6% of members while wrongly flagging 1% of non-members" in verdict
    assert "random" in verdict  # the control is explained, not counted
    # Sections and conventions.
    for needle in ("Configuration", "train accuracy", "0.67", "validity", "mean L1 cost",
                   "per-example", "shadow calibration", "Pawelczyk et al. 2023 eq. 3",
                   "How to read these numbers", "no interpolation", "knows the optimal threshold",
                   "Theorem 2", "3 counterfactuals were invalid", "80.1"):
        assert needle in text, needle
    # Unreliable low-FPR cells are marked (1500 non-members < 1/0.001 is false: 1500 >= 1000).
    assert "&dagger;" not in text
    assert "Differential privacy</h2>" not in text


def test_unreliable_cells_marked(tmp_path):
    _, text = _text(_metrics(n1=400, n0=500), tmp_path)
    assert text.count('class="num unreliable"') == 5  # TPR@0.001 of every attack
    assert "Unreliable: fewer than 1/FPR non-members" in text


def test_html_escaping(tmp_path):
    m = _metrics()
    m["config"]["dataset"] = "<b>bold</b>"
    m["attacks"]["<i>evil</i>"] = m["attacks"].pop("cfd")
    m["warnings"] = ["<script>alert(1)</script>"]
    _, text = _text(m, tmp_path)
    assert "&lt;b&gt;bold&lt;/b&gt;" in text
    assert "<b>bold</b>" not in text
    assert "<i>evil</i>" not in text and "&lt;i&gt;evil&lt;/i&gt;" in text
    assert "<script" not in text.lower()


def test_dp_block(tmp_path):
    _, text = _text(_metrics(dp=True), tmp_path)
    assert "Differential privacy</h2>" in text
    bound = theorem2_bound(1.0)
    assert f"{bound:.4f}" in text
    assert "per query" in text
    # The bound sits beside each attack's BA, and the total-epsilon bound is vacuous.
    dp_part = text[text.index("Differential privacy</h2>"):text.index("<h2>Figures</h2>")]
    for name in ("cfd", "cfd-lrt", "loss", "loss-lrt", "random"):
        assert f"<td>{name}</td>" in dp_part
    assert dp_part.count(f"{bound:.4f}") >= 5
    assert "above bound" not in dp_part  # all BAs <= 0.66 < 0.816
    assert "1.0000" in dp_part  # total epsilon 1500 -> bound 1


def test_dp_bound_computed_when_missing_and_flags_excess(tmp_path):
    m = _metrics(aucs={"loss": 0.9})
    m["dp"] = {"defense": "laplace", "epsilon_per_query": 0.1}
    _, text = _text(m, tmp_path)
    bound = theorem2_bound(0.1)
    assert f"{bound:.4f}" in text
    assert "above bound" in text  # BA 0.82 > 0.548


@pytest.mark.parametrize("tiny", [0.0, 0.002, -0.003])
def test_verdict_no_measurable_leakage(tmp_path, tiny):
    n1 = n0 = 1000
    assert abs(tiny) < auc_null_halfwidth(n1, n0)
    aucs = {"cfd": 0.5 + tiny, "cfd-lrt": 0.5 - tiny, "loss": 0.5 + tiny / 2}
    _, text = _text(_metrics(aucs=aucs, n1=n1, n0=n0), tmp_path)
    assert "No measurable leakage" in text
    assert "Leakage detected" not in text


def test_verdict_leakage_detected(tmp_path):
    _, text = _text(_metrics(aucs={"cfd": 0.8, "random": 0.5}, n1=1000, n0=1000), tmp_path)
    assert "Leakage detected" in text
    assert "No measurable leakage" not in text


def test_verdict_just_outside_band(tmp_path):
    hw = auc_null_halfwidth(1000, 1000)
    _, text = _text(_metrics(aucs={"cfd": 0.5 + 1.2 * hw}, n1=1000, n0=1000), tmp_path)
    assert "Leakage detected" in text
    _, text = _text(_metrics(aucs={"cfd": 0.5 - 1.2 * hw}, n1=1000, n0=1000), tmp_path)
    assert "Leakage detected" in text and "opposite" in text
    _, text = _text(_metrics(aucs={"cfd": 0.5 + 0.8 * hw}, n1=1000, n0=1000), tmp_path)
    assert "No measurable leakage" in text


def test_missing_optional_keys(tmp_path):
    # Nothing but attacks, no sample sizes, no config: must not crash.
    path, text = _text({"attacks": {"cfd": {"auc": 0.55}}}, tmp_path)
    assert path.exists() and "cfd" in text and "could not be" in text
    # Completely empty metrics.
    _, text = _text({}, tmp_path, filename="empty.html")
    assert "No verdict" in text
    # Odd values: None, NaN, wrong types.
    m = _metrics(dp=True)
    m["model"] = None
    m["recourse"] = {"validity": None, "mean_l1": float("nan")}
    m["attacks"]["cfd"]["tpr_at_fpr"] = None
    m["dp"] = {"defense": "none", "epsilon_per_query": None}
    m["warnings"] = "single warning"
    m["extra_block"] = {"x": [1, 2]}
    _, text = _text(m, tmp_path, filename="odd.html")
    assert "single warning" in text and "Other results" in text


def test_missing_image_is_reported_not_fatal(tmp_path):
    _, text = _text(_metrics(), tmp_path, images={"ROC": tmp_path / "nope.png"})
    assert "could not be embedded" in text
    assert "data:image" not in text


def test_metrics_not_mutated(tmp_path):
    m = _metrics(dp=True)
    before = copy.deepcopy(m)
    write_html_report(m, tmp_path)
    assert m == before
