"""Trained-neighbour audits of every private release (dp_audit.releases): honest ones pass, broken twins are caught.

Seeds are fixed, so every verdict here is deterministic. Why the margins hold: the audit's bound is
a 95% lower bound (two Clopper-Pearson upper ends on the measurement half, jointly >= 95%), so an
honest release exceeds its claim in at most about 5% of seeds; the fixed seed below is one of the
others, and the bounds of the honest releases sit well below the claim (0 for most). A broken twin's
true epsilon is far above the claim (noise / 10, or unbounded), so its measurement half shows a
near-perfect test: with 0 false positives and f false negatives out of n, the bound is
log((1 - h0) / h_f) with h_k the Clopper-Pearson upper end for k of n.
"""

from __future__ import annotations

import pytest

from recourse_privacy.dp_audit import MECHANISMS
from recourse_privacy.dp_audit.releases import RELEASE_AUDITS, audit_release, release_experiment
from recourse_privacy.errors import InvalidInputError

HONEST = ["trained-dpsgd", "trained-privrecourse", "trained-dpc", "trained-mst", "trained-laplace-answer"]


def test_every_release_and_its_broken_twin_is_registered():
    for name in HONEST:
        assert name in MECHANISMS and f"{name}-broken" in MECHANISMS
        assert "BROKEN" in MECHANISMS.get(f"{name}-broken").description
        assert "statistic" in MECHANISMS.get(name).description
    assert "trained-dpc-faithful" in MECHANISMS
    assert set(RELEASE_AUDITS) <= set(MECHANISMS)


def test_parameters_are_checked_before_any_run():
    with pytest.raises(InvalidInputError, match="has no parameter 'canary_norm'"):
        release_experiment("trained-mst", 1.0, canary_norm=2.0)
    with pytest.raises(InvalidInputError, match="n_rows"):
        release_experiment("trained-dpc", 1.0, n_rows=2)


@pytest.mark.parametrize("eps", [0.5, 1.0])
def test_laplace_answer_honest_passes_broken_is_caught(eps):
    honest = audit_release("trained-laplace-answer", eps, n_trials=400, random_state=0)
    broken = audit_release("trained-laplace-answer-broken", eps, n_trials=400, random_state=0)
    assert not honest.many_run.violates_claim
    assert broken.many_run.violates_claim, broken.row()
    assert broken.scores["one_run"].epsilon_lower_bound > honest.scores["one_run"].epsilon_lower_bound


def test_privrecourse_kmeans_honest_passes_broken_is_caught():
    honest = audit_release("trained-privrecourse", 0.5, n_trials=60, random_state=0)
    broken = audit_release("trained-privrecourse-broken", 0.5, n_trials=60, random_state=0)
    assert not honest.many_run.violates_claim
    # bounds read from the data: on D every centre stays in [0, 0.3]^2, at distance >= 0.99 from the canary
    assert broken.many_run.violates_claim, broken.row()


_WEAK = pytest.mark.xfail(
    reason="open (issue 29 item 1): at 100 trials the statistic does not separate the broken twin yet "
    "(measured bound 0.00 at claim 0.5, docs/dp-audit.md)",
    strict=False,
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=_WEAK) for n in ("trained-dpsgd", "trained-dpc", "trained-mst")]
)
def test_slow_releases_honest_pass_broken_caught(name):
    honest = audit_release(name, 0.5, n_trials=100, random_state=0)
    broken = audit_release(f"{name}-broken", 0.5, n_trials=100, random_state=0)
    assert not honest.many_run.violates_claim
    assert broken.many_run.violates_claim, broken.row()
