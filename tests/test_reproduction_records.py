"""The typed records of the reproductions: the paper's readings, our rows and the files written from them."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np

from recourse_privacy.reproductions.pentyala2023 import PAPER_TABLE2, Table2Row, paper_value
from recourse_privacy.reproductions.pentyala2023_audit import AttackReading, GameRow, record_exposure
from recourse_privacy.reproductions.pentyala2023_table3 import Table3Row
from recourse_privacy.reproductions.reference_budget import BudgetRow


def test_paper_table2_has_each_method_on_both_datasets_once():
    keys = [(r.method, r.dataset) for r in PAPER_TABLE2]
    assert len(keys) == len(set(keys)) == 8
    assert {m for m, _ in keys} == {"FACE", "Baseline", "DP-SD", "Ours"}
    # a reading's label maps to its method's row; a metric the paper lacks has no value
    assert paper_value("Ours (em_point)", "heloc", "seconds") == 4.40
    assert paper_value("FACE", "adult", "pl0") == 1.72
    assert paper_value("FACE", "adult", "validity") is None
    assert paper_value("Ours (x)", "compas", "pl1") is None


def test_records_are_frozen():
    row = Table3Row("FACE", 1.0, True, ((1.0, 2.0),))
    try:
        row.success_rate = 0.5
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("Table3Row is not frozen")
    assert row.as_json() == {"success_rate": 1.0, "increase_only_respected": True, "example_path": [[1.0, 2.0]]}


def test_table2_row_holds_every_quality_metric_of_a_path_method():
    from recourse_privacy.metrics.quality import quality_metrics
    from recourse_privacy.models.logistic import LogisticModel

    rng = np.random.default_rng(0)
    X = rng.random((40, 2))
    y = (X[:, 0] > 0.5).astype(int)
    model = LogisticModel(random_state=0).fit(X, y)
    paths = [np.vstack([x, x + 0.1]) for x in X[:3]]
    res = SimpleNamespace(factuals=X[:3], counterfactuals=X[:3] + 0.1, valid=np.ones(3, bool), seconds=0.3, paths=paths)
    q = quality_metrics(res, model, X)
    fields = {f.name for f in dataclasses.fields(Table2Row)}
    assert set(q) <= fields, set(q) - fields


def test_record_exposure_counts_matches_exactly():
    members = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    nonmembers = np.array([[5.0, 5.0], [1.0, 1.0]])  # one exact duplicate of a member
    paths = [np.array([[9.0, 9.0], [1.0, 1.0]]), np.array([[8.0, 8.0]])]  # the factual first, then the nodes
    res = SimpleNamespace(
        counterfactuals=np.array([[1.0, 1.0], [3.0, 3.0]]), valid=np.array([True, False]), paths=paths
    )
    e = record_exposure(res, members, nonmembers)
    assert e.distinct_nodes_returned == 1  # factuals are not returned nodes
    assert e.match_attack_tpr == 1 / 3 and e.match_attack_fpr == 1 / 2
    assert e.cf_is_member_row == 1.0  # the one valid counterfactual is a member row


def test_game_and_budget_rows_keep_the_files_column_names():
    game = GameRow("FACE", 0, 1.5, 0.9, (AttackReading("cfd", 0.51, 0.02), AttackReading("cfd-lrt", 0.5, 0.01)))
    assert list(game.as_record()) == [
        "method", "seed", "seconds", "validity", "cfd_auc", "cfd_tpr@0.01", "cfd-lrt_auc", "cfd-lrt_tpr@0.01"
    ]  # fmt: skip
    budget = BudgetRow("heloc", "cfd-lrt", 4, 0.6, 0.05, 0.01, True, False, 100, 120)
    assert list(budget.as_record()) == [
        "dataset", "attack", "budget", "auc", "tpr@0.01", "tpr@0.001", "tpr@0.01_reliable", "tpr@0.001_reliable",
        "n_members", "n_nonmembers",
    ]  # fmt: skip
    assert budget.as_record()["tpr@0.001_reliable"] is False
