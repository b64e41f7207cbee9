"""A privacy budget ledger: every mechanism that touches the data writes one line.

Sequential composition adds epsilons and deltas (basic composition, Dwork and Roth 2014,
Theorem 3.16); a step that runs the same mechanism on disjoint parts of the data (the
clusters of one round, the sub-zones of one cluster) is one line by parallel composition.
A line may be marked ``dp=False``: a step of a paper's reading that is not differentially
private as written (raw counts, a released data record); the ledger then says so instead of
claiming a guarantee.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from recourse_privacy.errors import BudgetExceededError
from recourse_privacy.validation import check_delta, check_epsilon

__all__ = ["BudgetLedger", "LedgerEntry"]

#: relative slack for floating-point sums of budget shares (0.75 + 0.25 of eps/10, ten times)
_SLACK = 1e-9


@dataclass(frozen=True)
class LedgerEntry:
    """One spend: a name, its (epsilon, delta), whether it is DP as run, and a note."""

    step: str
    epsilon: float
    delta: float = 0.0
    dp: bool = True
    note: str = ""


@dataclass
class BudgetLedger:
    """Spends of one release, checked against a cap ``(epsilon, delta)``."""

    epsilon: float
    delta: float = 0.0
    allow_overspend: bool = False
    entries: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.epsilon = check_epsilon(self.epsilon, "epsilon")
        self.delta = check_delta(self.delta, "delta")

    def spend(self, step: str, epsilon: float, delta: float = 0.0, *, dp: bool = True, note: str = "") -> None:
        """Record a spend; raise :class:`BudgetExceededError` when the total passes the cap."""
        eps = check_epsilon(epsilon, f"epsilon of {step}", allow_zero=True)
        dlt = check_delta(delta, f"delta of {step}")
        entry = LedgerEntry(step, eps, dlt, dp, note)
        total_eps, total_delta = self.total_epsilon + eps, self.total_delta + dlt
        if not self.allow_overspend and (
            total_eps > self.epsilon * (1 + _SLACK) or total_delta > self.delta * (1 + _SLACK) + 1e-300
        ):
            raise BudgetExceededError(
                f"budget split overspends: {step!r} brings the total to (epsilon={total_eps:.6g}, "
                f"delta={total_delta:.3g}) above the cap (epsilon={self.epsilon:g}, delta={self.delta:g}); "
                "fix the split or pass allow_overspend=True to record it"
            )
        self.entries.append(entry)

    @property
    def total_epsilon(self) -> float:
        return float(sum(e.epsilon for e in self.entries))

    @property
    def total_delta(self) -> float:
        return float(sum(e.delta for e in self.entries))

    @property
    def is_dp(self) -> bool:
        """True when every recorded step is differentially private as run."""
        return all(e.dp for e in self.entries)

    @property
    def overspent(self) -> bool:
        return self.total_epsilon > self.epsilon * (1 + _SLACK) or self.total_delta > self.delta * (1 + _SLACK) + 1e-300

    def to_dict(self) -> dict:
        """Plain JSON-ready form: cap, entries, totals and the DP verdict."""
        return {
            "cap": {"epsilon": self.epsilon, "delta": self.delta},
            "entries": [asdict(e) for e in self.entries],
            "total": {"epsilon": self.total_epsilon, "delta": self.total_delta},
            "is_dp": self.is_dp,
            "overspent": self.overspent,
        }

    @classmethod
    def from_dict(cls, d: dict) -> BudgetLedger:
        led = cls(d["cap"]["epsilon"], d["cap"]["delta"], allow_overspend=True)
        led.entries = [LedgerEntry(**e) for e in d["entries"]]
        return led

    def lines(self) -> list[str]:
        """Human-readable ledger lines."""
        out = [
            f"{e.step:<40} eps={e.epsilon:.4g} delta={e.delta:.3g}{'' if e.dp else '  [NOT DP as run]'}"
            + (f"  ({e.note})" if e.note else "")
            for e in self.entries
        ]
        out.append(
            f"{'total':<40} eps={self.total_epsilon:.4g} delta={self.total_delta:.3g}"
            f"  (cap eps={self.epsilon:g}, delta={self.delta:g}; {'DP' if self.is_dp else 'not DP as run'})"
        )
        return out
