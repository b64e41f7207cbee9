"""The private recourse methods under the extraction and attribute threats (issue 25), the exposure ranking that
never reads the targets' membership labels (issue 24), and Anonymeter's install hint (issue 26)."""

from __future__ import annotations

import builtins

import numpy as np
import pandas as pd
import pytest

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.audit import run_audit
from recourse_privacy.audit.exposure import ranking_attack, record_exposure
from recourse_privacy.audit.stages import Targets
from recourse_privacy.metrics.exposure import RANKING_PREFERENCE, RANKING_RULE
from recourse_privacy.metrics.membership import auc
from recourse_privacy.models.logistic import LogisticModel
from recourse_privacy.results.summaries import AttackResult


def _frame(n=700, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50, 15, n).round(1),
            "age": rng.integers(20, 70, n).astype(float),
            "group": rng.choice(["a", "b"], n, p=[0.7, 0.3]),
        }
    )
    z = (df.income - 50) / 15 + 0.9 * (df.group == "a") + rng.normal(0, 0.7, n)
    df["approved"] = (z > 0.3).astype(int)
    return df


# (recourse, defense, extra settings): every private method, as the audit selects it
PRIVATE = [
    # a DataFrame declares no public domain: the private methods read their bounds from the data (not DP; a test)
    ("privrecourse", "none", {"recourse_params": {"n_clusters": 12, "bounds": "data"}}),
    ("dpc", "none", {"recourse_params": {"ae_epochs": 20, "max_iter": 100, "bounds": "data"}}),
    ("linear", "laplace", {"epsilon": 1.0}),
    ("scfe", "dpm", {"epsilon": 1.0, "normalize_rows": True}),
]
BUDGETS = (20, 60)


@pytest.mark.slow
@pytest.mark.parametrize(("recourse", "defense", "extra"), PRIVATE, ids=[p[0] + "-" + p[1] for p in PRIVATE])
def test_private_methods_under_extraction_and_attribute(tmp_path, recourse, defense, extra):
    r = run_audit(
        data=_frame(),
        target="approved",
        model="logistic",
        recourse=recourse,
        defense=defense,
        n_members=150,
        n_adversary=300,
        attacks=("cfd",),
        threats=("extraction", "attribute"),
        sensitive="group",
        query_budgets=BUDGETS,
        extraction_repeats=2,
        out_dir=tmp_path,
        cache="off",
        **extra,
    )
    csv = pd.read_csv(tmp_path / "extraction.csv")
    assert set(csv["queries"]) == set(BUDGETS)
    assert set(csv["attack"]) == {"base", "cf", "dualcf", "cca"}
    for col in ("fidelity", "fidelity_low", "fidelity_high", "accuracy"):
        assert csv[col].between(0, 1).all(), col
    assert (csv["fidelity_low"] <= csv["fidelity"] + 1e-12).all() and (
        csv["fidelity"] <= csv["fidelity_high"] + 1e-12
    ).all()
    a = r.threats.attribute
    assert a.column == "group" and a.n_targets > 0
    assert 0 <= a.accuracy_low <= a.accuracy <= a.accuracy_high <= 1
    assert 0 <= a.prior_low <= a.prior_accuracy <= a.prior_high <= 1
    assert a.surrogate_queries == max(BUDGETS)


def _result(name, scores, member, signal):
    return AttackResult(
        name=name,
        auc=auc(member, scores),
        balanced_accuracy=0.5,
        tpr_at_fpr={},
        achieved_fpr={},
        tpr_at_fpr_reliable={},
        n_members=int(member.sum()),
        n_nonmembers=int((~member).sum()),
        direction="greater",
        signal=signal,
    )


def test_exposure_ranking_never_reads_membership_labels():
    rng = np.random.default_rng(3)
    n = 200
    member = np.arange(n) < n // 2
    # cfd scores members lower (AUC well below 0.5: flipped it would be the strongest); loss is mildly informative
    cfd = rng.normal(size=n) - 1.5 * member
    loss = rng.normal(size=n) + 0.5 * member
    scores = {"loss": AttackScores("loss", loss), "cfd": AttackScores("cfd", cfd)}
    attacks = {"loss": _result("loss", loss, member, "score"), "cfd": _result("cfd", cfd, member, "distance")}
    assert attacks["cfd"].auc < 0.5 < attacks["loss"].auc < 1 - attacks["cfd"].auc
    # the choice follows the fixed order, whatever the AUCs; swapping the labels changes no choice
    assert RANKING_PREFERENCE.index("cfd") < RANKING_PREFERENCE.index("loss")
    assert ranking_attack(attacks) == "cfd"
    swapped = {k: _result(k, scores[k].scores, ~member, v.signal) for k, v in attacks.items()}
    assert ranking_attack(swapped) == "cfd"
    # a control is never preferred, an unlisted attack follows the listed ones of its signal
    with_random = {**attacks, "random": _result("random", rng.random(n), member, "none")}
    assert ranking_attack({"random": with_random["random"], "loss": attacks["loss"]}) == "loss"
    plugin = {"my-attack": _result("my-attack", cfd, member, "distance"), "loss": attacks["loss"]}
    assert ranking_attack(plugin) == "my-attack"
    assert "never the targets' AUC" in RANKING_RULE

    model = LogisticModel(random_state=0).fit(rng.normal(size=(50, 2)), np.arange(50) % 2)
    targets = Targets(model, rng.normal(size=(n, 2)), np.zeros(n, int), member.astype(int), np.arange(n) + 1000)
    frame, summary = record_exposure(scores, attacks, targets)
    assert summary.ranking_attack == "cfd"
    # ranked in the attack's own direction (higher score = more exposed), not flipped by its AUC
    top = [e.row for e in summary.most_exposed]
    by_score = 1000 + np.flatnonzero(member)[np.argsort(-cfd[member], kind="stable")][: len(top)]
    assert top == by_score.tolist()
    assert frame["cfd_percentile"].corr(frame["cfd_score"], method="spearman") > 0.99


def test_anonymeter_hint_when_it_does_not_import(monkeypatch):
    from recourse_privacy.audit import anonymeter_risks as ar

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.startswith("anonymeter"):
            raise ImportError("No module named 'anonymeter'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    ok, why = ar.anonymeter_available()
    assert not ok
    assert ar.INSTALL_HINT in why
    assert "python -m venv" in ar.INSTALL_HINT and "-c constraints.txt" in ar.INSTALL_HINT
    assert "'.[anonymeter]'" in ar.INSTALL_HINT and "--no-deps anonymeter==" in ar.INSTALL_HINT and "numpy" in why


def test_the_adversary_gets_laplace_recourses_noisy_answers_unchecked():
    from recourse_privacy.audit.threats import released
    from recourse_privacy.defenses.laplace import LaplaceRecourse

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    model = LogisticModel(random_state=0).fit(X, (X @ np.array([1.0, -0.5, 0.3]) > 0).astype(int))
    rejected = X[model.predict(X) == 0]
    res = LaplaceRecourse(epsilon=0.5, random_state=1).generate(model, rejected)
    short = ~res.valid  # answers the noise left on the rejected side
    assert 0 < short.sum() < len(res.valid)
    # the API releases every noisy answer (the adversary cannot tell which fell short) ...
    assert released(res, model, 1).all()
    # ... while a search method's failures are reported as failures
    plain = type(res)(res.factuals, res.counterfactuals, res.valid, "gs")
    assert (released(plain, model, 1) == res.valid).all()
