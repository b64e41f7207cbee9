"""One DP verdict: the terminal and the HTML report show the same bounds, each with its epsilon and formula.

The bug this guards against: the terminal printed Theorem 2 at epsilon 1 (0.8161) while the HTML
report printed the selected-target bound at epsilon 2 (0.8808) under Theorem 2's formula, and
compared score attacks that the Laplace Recourse claim does not cover.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from typer.testing import CliRunner

from recourse_privacy.audit.summaries import DPSummary
from recourse_privacy.cli import app
from recourse_privacy.metrics import theorem2_bound, tight_ba_bound
from recourse_privacy.report.dp_verdict import compare_with_bound, dp_bound_rows, dp_bounds

DEFENSES = {
    "laplace": ["--recourse", "linear"],
    "dpm": ["--normalize-rows"],
    "dpm-laplace": ["--recourse", "linear", "--normalize-rows"],
}


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("defense", sorted(DEFENSES))
def test_terminal_and_report_show_the_same_bounds(tmp_path, defense):
    out = tmp_path / "out"
    args = ["audit", "--defense", defense, "--epsilon", "1", "--n-features", "6", "--n-members", "120"]
    args += ["--shadow-models", "2", "--out", str(out), "--cache-dir", "off", *DEFENSES[defense]]
    res = CliRunner().invoke(app, args, terminal_width=400)
    assert res.exit_code == 0, res.output
    dp = DPSummary(**json.loads((out / "metrics.json").read_text())["dp"])
    rows = dp_bound_rows(dp)
    assert [r.key for r in rows] == ["verdict", "tight", "theorem2"]
    page = html.unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text(encoding="utf-8")))
    terminal, page = _flat(res.output), _flat(page)
    for row in rows:
        assert row.text in terminal, row.text
    # the report states the verdict's bound by the same line, and lists every bound's value beside its epsilon
    assert rows[0].text in page
    for row in rows:
        assert f"{row.name} {row.formula} {row.epsilon:.4g} {row.delta:.3g} {row.value:.4f}" in page
    # the numbers are those of their formulas at their epsilons
    assert rows[0].value == pytest.approx(tight_ba_bound(dp.selected_epsilon, dp.selected_delta))
    assert rows[2].value == pytest.approx(
        theorem2_bound(dp.bound_epsilon) + dp.delta * 2.718281828459045**-dp.bound_epsilon / 2
    )
    # the verdict's bound is compared only with the attacks its claim covers
    assert set(rows[0].applies_to) == set(dp.verdict.covered)
    if defense == "laplace":  # Laplace Recourse protects the recourse, not the model's scores (dpm-laplace: both)
        assert "loss" not in rows[0].applies_to and "Not covered by this claim" in page


def test_compare_with_bound_reads_the_verdicts_bound_and_covered_attacks():
    fields = dp_bounds(1.0, 0.0, 0.5)
    dp = DPSummary(defense="laplace", mechanism="m", epsilon_per_query=1.0, epsilon_total=100.0, delta=0.0,
                   bound_epsilon=1.0, composition="c", verdict={"attack": "cfd", "balanced_accuracy": 0.6, "auc": 0.6,
                   "tpr_at_fpr_001": 0.01, "ba_bound": fields["ba_bound"], "exceeds": False, "covered": ["cfd"],
                   "text": "t", "ba_lower_confidence": 0.5}, **fields)  # fmt: skip
    attacks = [
        type("A", (), {"name": "cfd", "balanced_accuracy": 0.6})(),
        type("A", (), {"name": "loss", "balanced_accuracy": 0.95})(),
    ]
    cmp = compare_with_bound(dp, attacks)
    assert cmp.bound == pytest.approx(tight_ba_bound(2.0))  # selected targets: twice the claim
    assert [c.attack for c in cmp.checks] == ["cfd"] and cmp.not_covered == ("loss",) and cmp.exceeded == ()
    assert "ε = 2" in cmp.source and "e^ε/(1 + e^ε)" in cmp.source


def test_dp_verdict_names_the_attack_whose_lower_bound_is_compared():
    """The refuting comparison and the attack named are one attack's: the largest union-bound lower
    confidence bound, not the highest measured BA (which on few targets is mostly sampling noise)."""
    from types import SimpleNamespace

    from recourse_privacy.defenses.verdict import dp_verdict
    from recourse_privacy.report.dp_verdict import ba_lower_confidence

    def attack(ba, n):
        return SimpleNamespace(balanced_accuracy=ba, auc=ba, n_members=n, n_nonmembers=n, tpr=lambda key: 0.0)

    fields = dp_bounds(1.0, 0.0, 0.5)
    dp = DPSummary(defense="laplace", mechanism="m", epsilon_per_query=1.0, epsilon_total=1.0, delta=0.0,
                   bound_epsilon=1.0, composition="c", **fields)  # fmt: skip
    # cfd: the higher BA on 20 + 20 targets; cfd-lrt: a lower BA on 5,000 + 5,000, so a far tighter bound
    attacks = {"cfd": attack(0.80, 20), "cfd-lrt": attack(0.70, 5000)}
    v = dp_verdict(dp, attacks, ("distance",)).verdict
    lows = {n: ba_lower_confidence(a, 0.05 / 2) for n, a in attacks.items()}
    assert lows["cfd-lrt"] > lows["cfd"]
    assert v.attack == "cfd-lrt" and v.ba_lower_confidence == pytest.approx(lows["cfd-lrt"])
    assert v.balanced_accuracy == 0.70 and f"{lows['cfd-lrt']:.4f}" in v.text
