"""The budget ledger of a PrivRecourse release: :class:`~recourse_privacy.accounting.ReleaseBudget`.

The class lives in :mod:`recourse_privacy.accounting` with the other privacy accounting (it is also
DPC's); ``BudgetLedger`` and ``LedgerEntry`` are its former names here: they still resolve, with a
DeprecationWarning (:func:`~recourse_privacy.deprecation.renamed_names`).
"""

from __future__ import annotations

from recourse_privacy.accounting import BudgetLine, ReleaseBudget
from recourse_privacy.deprecation import renamed_names

__all__ = ["BudgetLine", "ReleaseBudget"]

__getattr__ = renamed_names(
    __name__,
    {
        "BudgetLedger": ("recourse_privacy.privrecourse BudgetLedger is renamed recourse_privacy.accounting.ReleaseBudget",
                         ReleaseBudget),
        "LedgerEntry": ("recourse_privacy.privrecourse LedgerEntry is renamed recourse_privacy.accounting.BudgetLine",
                        BudgetLine),
    },
)  # fmt: skip
