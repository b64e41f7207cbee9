"""The one accounting module: a release's budget split (ReleaseBudget) and the query ledger (QueryLedger)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from recourse_privacy.accounting import BudgetLine, QueryLedger, ReleaseBudget
from recourse_privacy.errors import BudgetExceededError, InvalidInputError


def test_release_budget_says_what_its_guarantee_does_not_cover() -> None:
    budget = ReleaseBudget(2.0, outside=("the classifier",))
    budget.spend("autoencoder", 1.5, note="functional mechanism")
    assert budget.epsilon_total == pytest.approx(1.5) and budget.is_dp
    assert budget.not_covered == ("the classifier",)
    budget.spend("prototypes", 0.0, dp=False, note="class means of the rows")
    assert budget.epsilon_total is None and not budget.is_dp
    assert budget.not_covered == ("prototypes (class means of the rows)", "the classifier")
    assert budget.total_epsilon == pytest.approx(1.5)  # the DP lines still add up
    assert budget.lines()[-1].endswith("the classifier") and "NOT DP as run" in budget.lines()[1]
    back = ReleaseBudget.from_dict(json.loads(json.dumps(budget.to_dict())))
    assert back.to_dict() == budget.to_dict() and back.not_covered == budget.not_covered
    with pytest.raises(BudgetExceededError, match="overspends"):
        budget.spend("more", 0.6)


def test_release_budget_reads_files_written_before_outside_existed() -> None:
    old = {
        "cap": {"epsilon": 1.0, "delta": 0.0},
        "entries": [{"step": "em", "epsilon": 0.5, "delta": 0.0, "dp": True, "note": ""}],
        "total": {"epsilon": 0.5, "delta": 0.0},
        "is_dp": True,
        "overspent": False,
    }
    budget = ReleaseBudget.from_dict(old)
    assert budget.outside == () and budget.entries == [BudgetLine("em", 0.5)]
    assert {k: v for k, v in budget.to_dict().items() if k != "outside"} == old


def test_release_budget_takes_an_infinite_cap_and_refuses_bad_epsilons() -> None:
    budget = ReleaseBudget(math.inf)
    budget.spend("no noise", math.inf)
    assert budget.epsilon_total == math.inf and not budget.overspent
    with pytest.raises(InvalidInputError, match="epsilon of x"):
        budget.spend("x", -1.0)
    with pytest.raises(InvalidInputError, match="epsilon"):
        ReleaseBudget(0.0)


def test_the_old_query_ledger_name_is_deprecated(tmp_path: Path) -> None:
    from recourse_privacy.defenses import accounting

    with pytest.warns(DeprecationWarning, match="renamed recourse_privacy.accounting.QueryLedger"):
        old = accounting.BudgetLedger
    assert old is QueryLedger
    ledger = QueryLedger(tmp_path / "b.sqlite", 1.0)
    assert ledger.spend(0.25) == pytest.approx(0.25) and ledger.remaining == pytest.approx(0.75)


def test_privrecourse_and_dpc_spend_from_the_release_budget() -> None:
    import recourse_privacy.dpc as dpc
    import recourse_privacy.dpc.core as dpc_core
    import recourse_privacy.privrecourse as privrecourse
    import recourse_privacy.privrecourse.ledger as privrecourse_ledger
    from recourse_privacy.accounting import BudgetLine

    for module in (privrecourse, privrecourse_ledger):  # PrivRecourse's former names: deprecated, still resolve
        with pytest.warns(DeprecationWarning, match="renamed recourse_privacy.accounting.ReleaseBudget"):
            assert module.BudgetLedger is ReleaseBudget
        with pytest.warns(DeprecationWarning, match="renamed recourse_privacy.accounting.BudgetLine"):
            assert module.LedgerEntry is BudgetLine
    for module in (dpc, dpc_core):  # DPC's former ledger name: deprecated, still the release budget
        with pytest.warns(DeprecationWarning, match="renamed recourse_privacy.accounting.ReleaseBudget") as caught:
            assert module.PrivacyLedger is ReleaseBudget
        assert caught[0].filename == __file__  # the warning points at the line that read the old name
        with pytest.raises(AttributeError, match="NoSuchName"):
            module.NoSuchName  # noqa: B018
