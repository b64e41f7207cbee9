"""The budget ledger of a PrivRecourse release: :class:`~recourse_privacy.accounting.ReleaseBudget`.

The class lives in :mod:`recourse_privacy.accounting` with the other privacy accounting (it is also
DPC's); ``BudgetLedger`` and ``LedgerEntry`` are its former names here, kept for users that
import them.
"""

from __future__ import annotations

from recourse_privacy.accounting import BudgetLine, ReleaseBudget

__all__ = ["BudgetLedger", "BudgetLine", "LedgerEntry", "ReleaseBudget"]

#: former name of :class:`~recourse_privacy.accounting.ReleaseBudget`
BudgetLedger = ReleaseBudget
#: former name of :class:`~recourse_privacy.accounting.BudgetLine`
LedgerEntry = BudgetLine
