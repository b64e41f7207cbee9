"""Typed results of the threats beyond membership: extraction, attribute inference, and queries per attack.

They sit in the attacks layer, below the report that renders them and the audit that fills them
(as TensorFlow Privacy's result dataclasses sit under both its attacks and its plots).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from recourse_privacy.attacks.query_extraction import ExtractionCurve
from recourse_privacy.attacks.release_report import ReleaseSummary
from recourse_privacy.metrics.exposure import preferred_attack

__all__ = ["AttributeSummary", "QueryPoint", "ThreatReport"]


def _num(v):
    return float("nan") if v is None else v


@dataclass(frozen=True)
class AttributeSummary:
    """Attribute inference of ``column`` through a surrogate extracted with ``surrogate_queries`` queries
    (Yang et al. 2022, Sec. 5.3.3): the adversary's accuracy on the targets against the prior's
    (the majority value in its own data), each with a 95% Clopper-Pearson interval, and the
    label-only baseline (the majority value per label)."""

    column: str
    values: tuple[str, ...]
    n_targets: int
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    prior_accuracy: float
    prior_low: float
    prior_high: float
    label_baseline_accuracy: float
    balanced_accuracy: float
    member_accuracy: float
    nonmember_accuracy: float
    surrogate: str
    surrogate_queries: int

    def to_dict(self) -> dict:
        """JSON-ready."""
        d = dict(self.__dict__)
        d["values"] = list(self.values)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> AttributeSummary:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: (tuple(v) if k == "values" else _num(v)) for k, v in d.items()})

    def sentence(self) -> str:
        """The report's line."""
        gain = self.accuracy - self.prior_accuracy
        return (
            f"inferring {self.column} from a copy of your model ({self.surrogate}, {self.surrogate_queries} queries): "
            f"accuracy {self.accuracy:.1%} [{self.accuracy_low:.1%}, {self.accuracy_high:.1%}] against the prior's "
            f"{self.prior_accuracy:.1%} [{self.prior_low:.1%}, {self.prior_high:.1%}] ({gain:+.1%}); "
            f"{'the intervals overlap: no gain shown' if self.accuracy_low <= self.prior_high else 'above the prior'}"
        )


@dataclass(frozen=True)
class QueryPoint:
    """A membership attack at a number of owner queries per target: AUC and TPR at FPR 1% (with its interval)."""

    attack: str
    queries_per_target: float
    access: str  # recourse | decisions | scores | none
    auc: float
    tpr_at_1pct: float
    tpr_low: float
    tpr_high: float

    def to_dict(self) -> dict:
        """JSON-ready."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ThreatReport:
    """What ``audit --threats`` found beyond the membership table."""

    threats: tuple[str, ...]
    extraction: ExtractionCurve | None = None
    attribute: AttributeSummary | None = None
    queries: tuple[QueryPoint, ...] = ()
    notes: tuple[str, ...] = ()
    release: ReleaseSummary | None = None

    def recourse_over_labels(self) -> str | None:
        """What recourse adds over decisions alone at equal queries, from the query curve (None without label-only).

        The recourse attack compared is the lead one of a fixed order (:func:`preferred_attack`), never the
        best AUC on the targets, which would read their membership labels.
        """
        lab = [p for p in self.queries if p.access == "decisions"]
        rec = [p for p in self.queries if p.access == "recourse"]
        if not lab or not rec:
            return None
        lead = preferred_attack({p.attack: "recourse" for p in rec})
        best = max((p for p in rec if p.attack == lead), key=lambda p: p.queries_per_target)
        match = [p for p in sorted(lab, key=lambda p: p.queries_per_target) if p.auc >= best.auc]
        top = max(lab, key=lambda p: p.queries_per_target)
        reach = (
            f"labels alone reach it after {match[0].queries_per_target:g} decisions per target"
            if match
            else f"labels alone reach only AUC {top.auc:.3f} with {top.queries_per_target:g} decisions per target"
        )
        return (
            f"{best.attack} reaches AUC {best.auc:.3f} (TPR {best.tpr_at_1pct:.3f} at FPR 1%) with "
            f"{best.queries_per_target:g} recourse {'query' if best.queries_per_target == 1 else 'queries'} per target; with as many decisions the adversary learns "
            f"only the decision it already knows (AUC 0.5); {reach}"
        )

    def to_dict(self) -> dict:
        """JSON-ready (metrics.json's ``threats``)."""
        return {
            "threats": list(self.threats),
            "extraction": None if self.extraction is None else self.extraction.to_dict(),
            "attribute": None if self.attribute is None else self.attribute.to_dict(),
            "queries": [p.to_dict() for p in self.queries],
            "recourse_over_labels": self.recourse_over_labels(),
            "notes": list(self.notes),
            "release": None if self.release is None else self.release.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> ThreatReport:
        """Inverse of :meth:`to_dict`."""
        return cls(
            tuple(d.get("threats", ())),
            ExtractionCurve.from_dict(d["extraction"]) if d.get("extraction") else None,
            AttributeSummary.from_dict(d["attribute"]) if d.get("attribute") else None,
            tuple(QueryPoint(**{k: _num(v) for k, v in p.items()}) for p in d.get("queries", ())),
            tuple(d.get("notes", ())),
            ReleaseSummary.from_dict(d["release"]) if d.get("release") else None,
        )

    def extraction_rows(self) -> list[dict]:
        """extraction.csv's rows: attack, queries, fidelity, fidelity_low, fidelity_high, accuracy (then the domain's)."""
        if self.extraction is None:
            return []
        return [p.to_dict() for p in self.extraction.points]
