"""Typed results of the release threat: the released-set attacks, the copies of training rows, Anonymeter's risks.

Like :mod:`~recourse_privacy.attacks.threat_report`, they sit below the report that renders them
(``release.csv``, the report's section) and the audit that fills them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AnonymeterRisk", "ReleaseRow", "ReleaseSummary"]


def _num(v):
    return float("nan") if v is None else v


@dataclass(frozen=True)
class ReleaseRow:
    """One released-set attack on one method's release: release.csv's row."""

    method: str
    attack: str
    auc: float
    auc_low: float
    auc_high: float
    tpr_at_1pct_fpr: float
    tpr_low: float
    tpr_high: float
    exact_copies: int
    copied_members: int
    #: share of the targets at the attack's most common score (-1: not recorded, a row of an older run)
    tied_share: float = -1.0

    @property
    def no_power(self) -> bool:
        """Every target got the same score: the attack told no one apart, so its AUC of 0.5 is no evidence."""
        return self.tied_share >= 1.0

    def power_note(self) -> str:
        """What the report says beside the AUC about ties ("" when fewer than half the targets tie)."""
        if self.no_power:
            return "no power: every target got the same score"
        if self.tied_share >= 0.5:
            return f"{self.tied_share:.0%} of the targets tied at one score"
        return ""

    def to_dict(self) -> dict:
        """JSON-ready."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class AnonymeterRisk:
    """One of Anonymeter's risks (Giomi et al. 2023) of the released set against a control set, with its interval."""

    risk: str  # singling-out | linkability | inference
    value: float
    low: float
    high: float
    n_attacks: int
    detail: str = ""

    def to_dict(self) -> dict:
        """JSON-ready."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReleaseSummary:
    """What a published set of counterfactuals gives away without a query.

    ``exact_copies``: released counterfactuals equal to a training row; ``copied_row_ids``: those
    training rows' ids in the dataset (ids only, never their values); ``copied_members``: targets
    among them.
    """

    method: str
    release_size: int
    n_published: int
    with_factuals: bool
    applicants: str
    rows: tuple[ReleaseRow, ...]
    exact_copies: int
    copied_members: int
    copied_row_ids: tuple[int, ...] = ()
    anonymeter: tuple[AnonymeterRisk, ...] = ()
    anonymeter_note: str = ""
    notes: tuple[str, ...] = ()

    @property
    def publishes_training_rows(self) -> bool:
        """Whether any published counterfactual is a training row, verbatim."""
        return self.exact_copies > 0

    def warning(self) -> str | None:
        """The report's and the CLI's warning where the method publishes training rows (None otherwise)."""
        if not self.publishes_training_rows:
            return None
        return (
            f"{self.method} publishes training rows: {self.exact_copies} of the {self.n_published} released "
            f"counterfactuals are verbatim records of the owner's training set ({len(self.copied_row_ids)} distinct "
            f"rows; {self.copied_members} of them targets of the game)"
        )

    def to_dict(self) -> dict:
        """JSON-ready (metrics.json's ``threats.release``)."""
        d = dict(self.__dict__)
        d["rows"] = [r.to_dict() for r in self.rows]
        d["copied_row_ids"] = [int(i) for i in self.copied_row_ids]
        d["anonymeter"] = [a.to_dict() for a in self.anonymeter]
        d["notes"] = list(self.notes)
        d["warning"] = self.warning()
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> ReleaseSummary:
        """Inverse of :meth:`to_dict`."""
        d = {k: v for k, v in d.items() if k != "warning"}
        return cls(
            **{
                **d,
                "rows": tuple(ReleaseRow(**{k: _num(v) for k, v in r.items()}) for r in d.get("rows", ())),
                "copied_row_ids": tuple(int(i) for i in d.get("copied_row_ids", ())),
                "anonymeter": tuple(
                    AnonymeterRisk(**{k: _num(v) for k, v in a.items()}) for a in d.get("anonymeter", ())
                ),
                "notes": tuple(d.get("notes", ())),
            }
        )
