"""The typed pieces of an audit's result: data, model, recourse, attack, shadow, deployed and DP summaries.

Small frozen dataclasses, one per block of ``metrics.json``; :class:`~recourse_privacy.results.audit.AuditResult`
puts them together. They sit below the audit (which builds them) and the report (which renders them),
as TensorFlow Privacy's ``data_structures.py`` sits below its attacks and its plots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.membership import AttackMetrics
from recourse_privacy.models.decision_threshold import DEFAULT_SOURCE, DEFAULT_THRESHOLD
from recourse_privacy.provenance import Provenance

__all__ = [
    "AttackResult",
    "DataSummary",
    "DPSummary",
    "QUESTION_DEPLOYED",
    "QUESTION_RECIPE",
    "DPVerdict",
    "DeployedSummary",
    "DirectionAttackSummary",
    "ModelSummary",
    "PoolSizes",
    "Provenance",
    "RecourseSummary",
    "ShadowSummary",
    "VERSUS_CHOICE",
    "VERSUS_CHOICES",
    "VersusScores",
    "plain",
    "take",
]


QUESTION_DEPLOYED = "this deployed model"
QUESTION_RECIPE = "this recipe, re-trained"


def frozen_map(d: Mapping | None) -> Mapping:
    """A read-only copy of ``d``."""
    return MappingProxyType(dict(d or {}))


def plain(x: Any) -> Any:
    """JSON-ready copy: mappings to dicts, tuples to lists, numpy scalars to Python numbers."""
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x


def take(cls, d: Mapping, what: str):
    """Build dataclass ``cls`` from the mapping ``d``; a missing required field is an error naming it."""
    names = [f.name for f in fields(cls)]
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [n for n in required if n not in d]
    if missing:
        raise InvalidInputError(f"{what} lacks field(s) {', '.join(missing)}")
    return cls(**{n: d[n] for n in names if n in d})


@dataclass(frozen=True)
class PoolSizes:
    """Sizes of the three disjoint pools of the game."""

    members: int
    nonmembers: int
    adversary: int


@dataclass(frozen=True)
class DataSummary:
    """The data the game was played on (after preprocessing fitted on the members)."""

    dataset: str
    n_rows: int
    n_features: int
    pools: PoolSizes
    dropped_correlated: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.pools, Mapping):
            object.__setattr__(self, "pools", take(PoolSizes, self.pools, "data.pools"))
        object.__setattr__(self, "dropped_correlated", tuple(self.dropped_correlated))


@dataclass(frozen=True)
class ModelSummary:
    """The owner's model: its registered name, accuracies, and the probability of the favourable label from
    which it decides favourable (``decision_threshold``; ``threshold_source``: where that cutoff came from)."""

    name: str
    train_accuracy: float
    test_accuracy: float
    decision_threshold: float = DEFAULT_THRESHOLD
    threshold_source: str = DEFAULT_SOURCE

    @property
    def cutoff_line(self) -> str | None:
        """ "favourable from P = 0.9" where the model decides at a cutoff other than one half, else None."""
        return (
            None if self.decision_threshold == DEFAULT_THRESHOLD else f"favourable from P = {self.decision_threshold:g}"
        )

    @property
    def generalization_gap(self) -> float:
        """Train minus test accuracy."""
        return self.train_accuracy - self.test_accuracy


@dataclass(frozen=True)
class RecourseSummary:
    """The owner's recourse for the targets: validity and mean costs (invalid rows included)."""

    method: str
    n: int
    validity: float
    n_invalid: int
    mean_l1: float
    mean_l2: float
    seconds: float
    validity_members: float
    validity_nonmembers: float
    distance: str


_NAN_PAIR = (math.nan, math.nan)


def _pair(x: Any) -> tuple[float, float]:
    """An interval [lo, hi] (a JSON list, None for a missing one) as a tuple of floats."""
    if x is None:
        return _NAN_PAIR
    lo, hi = x
    return (math.nan if lo is None else float(lo), math.nan if hi is None else float(hi))


def _json_pair(pair: tuple[float, float]) -> list[float | None]:
    """An interval for metrics.json: nan ends (not measured) as null, so that the file stays strict JSON."""
    return [None if math.isnan(x) else float(x) for x in pair]


#: how this version chooses the score attack a recourse attack is compared with (``VersusScores.choice``): the
#: lead score attack, the first that ran of a fixed order
#: (:func:`~recourse_privacy.metrics.exposure.preferred_attack`), never the one of highest AUC on the targets
VERSUS_CHOICE = "fixed-order"

#: what each recorded ``VersusScores.choice`` means, in the report's words ("": files written before the choice
#: was recorded, which took the score attack of highest AUC on the targets: an optimistic pick)
VERSUS_CHOICES = MappingProxyType(
    {
        VERSUS_CHOICE: "the lead score attack, the first that ran of a fixed order chosen before any score was seen",
        "": "the score attack of highest AUC on these targets, as files of this schema chose it: a choice made with "
        "the targets' membership labels, so that attack's AUC is optimistic",
    }
)


@dataclass(frozen=True)
class VersusScores:
    """A distance attack against the lead score attack on the same targets.

    ``auc_difference`` is AUC(this attack) - AUC(``attack``), ``attack`` being the score attack
    (the model's outputs) chosen as ``choice`` says (:data:`VERSUS_CHOICES`: this version writes
    :data:`VERSUS_CHOICE`, the first that ran of a fixed order; "" in older files, the highest AUC);
    ``ci_low`` / ``ci_high`` its paired bootstrap interval at ``ci_level``
    (:func:`~recourse_privacy.metrics.intervals.paired_auc_difference`).
    """

    attack: str
    auc_difference: float
    ci_low: float
    ci_high: float
    ci_level: float = 0.95
    n_bootstrap: int = 0
    choice: str = ""

    @property
    def choice_text(self) -> str:
        """How ``attack`` was chosen, in words."""
        return VERSUS_CHOICES.get(self.choice, f"chosen by {self.choice!r}")


@dataclass(frozen=True)
class AttackResult:
    """One attack's metrics and the conventions behind them.

    ``tpr_at_fpr``, ``achieved_fpr`` and ``tpr_at_fpr_reliable`` are keyed by the FPR as
    ``format(fpr, "g")`` ("0.01"); ``conventions`` holds what the attack says produced its
    scores (statistic, direction source, LRT options, shadow AUC ...).

    ``signal`` is what the attack reads, as registered (``distance``: the recourse; ``score``: the
    model's outputs; ``none``: a control; "" in files written before it was recorded).
    Intervals at ``ci_level`` are [lo, hi] pairs (nan ends when absent): ``auc_ci`` a bootstrap of
    ``n_bootstrap`` replicates, ``tpr_at_fpr_ci`` and ``achieved_fpr_ci`` exact Clopper-Pearson
    intervals on the members and non-members. ``versus_scores``: for a distance attack, its AUC
    against the lead score attack's (None otherwise).
    """

    name: str
    auc: float
    balanced_accuracy: float
    tpr_at_fpr: Mapping[str, float]
    achieved_fpr: Mapping[str, float]
    tpr_at_fpr_reliable: Mapping[str, bool]
    n_members: int
    n_nonmembers: int
    direction: str
    conventions: Mapping[str, Any] = field(default_factory=dict)
    signal: str = ""
    auc_ci: tuple[float, float] = _NAN_PAIR
    tpr_at_fpr_ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    achieved_fpr_ci: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    ci_level: float = 0.95
    n_bootstrap: int = 0
    versus_scores: VersusScores | None = None

    def __post_init__(self) -> None:
        for name in ("tpr_at_fpr", "achieved_fpr", "tpr_at_fpr_reliable", "conventions"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))
        object.__setattr__(self, "auc_ci", _pair(self.auc_ci))
        for name in ("tpr_at_fpr_ci", "achieved_fpr_ci"):
            object.__setattr__(self, name, frozen_map({k: _pair(v) for k, v in getattr(self, name).items()}))
        if isinstance(self.versus_scores, Mapping):
            object.__setattr__(self, "versus_scores", take(VersusScores, self.versus_scores, "versus_scores"))

    @classmethod
    def from_scores(
        cls,
        metrics: AttackMetrics,
        scores: AttackScores,
        *,
        signal: str = "",
        versus_scores: VersusScores | None = None,
    ) -> AttackResult:
        """Combine an attack's scores (direction, conventions) with their metrics."""
        m = metrics.to_dict()
        return cls(
            name=scores.name,
            direction=scores.direction,
            conventions=dict(scores.conventions),
            signal=signal,
            versus_scores=versus_scores,
            **m,
        )

    def to_dict(self) -> dict:
        """The attack's entry of metrics.json: the numbers, the direction, the intervals, then the conventions (flat)."""
        d = {
            k: plain(getattr(self, k))
            for k in (
                "auc",
                "balanced_accuracy",
                "tpr_at_fpr",
                "achieved_fpr",
                "tpr_at_fpr_reliable",
                "n_members",
                "n_nonmembers",
                "direction",
                "signal",
                "ci_level",
                "n_bootstrap",
            )
        }
        d["auc_ci"] = _json_pair(self.auc_ci)
        d["tpr_at_fpr_ci"] = {k: _json_pair(v) for k, v in self.tpr_at_fpr_ci.items()}
        d["achieved_fpr_ci"] = {k: _json_pair(v) for k, v in self.achieved_fpr_ci.items()}
        if self.versus_scores is not None:
            d["versus_scores"] = plain(self.versus_scores)
        d.update(plain(self.conventions))
        return d

    @classmethod
    def from_dict(cls, name: str, d: Mapping) -> AttackResult:
        """Inverse of :meth:`to_dict`: the keys that are not metrics are the conventions.

        The fields added in schema version 2 (signal, intervals, ``versus_scores``) may be absent
        (files of version 1): they take their defaults.
        """
        known = {f.name for f in fields(cls)} - {"name", "conventions"}
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING} - {"name"}
        missing = sorted(k for k in required if k not in d)
        if missing:
            raise InvalidInputError(f"attack {name!r} in metrics.json lacks {', '.join(missing)}")
        return cls(
            name=name,
            conventions={k: v for k, v in d.items() if k not in known},
            **{k: d[k] for k in known if k in d},
        )

    def ci(self, fpr: str = "0.01") -> tuple[float, float]:
        """The TPR's interval at the FPR key ``fpr`` (nan ends when not measured)."""
        return self.tpr_at_fpr_ci.get(fpr, _NAN_PAIR)

    def tpr(self, fpr: str = "0.01") -> float:
        """TPR at the FPR key ``fpr`` (nan when not measured)."""
        return float(self.tpr_at_fpr.get(fpr, float("nan")))


@dataclass(frozen=True)
class ShadowSummary:
    """The adversary's shadow models: how many, on how many rows each, how accurate."""

    n: int
    fraction: float
    train_rows: int
    mean_train_accuracy: float
    n_calibration: int
    train_rows_each: tuple[int, ...] = ()  # every shadow model's training rows (train_rows is the fewest)

    def __post_init__(self) -> None:
        object.__setattr__(self, "train_rows_each", tuple(self.train_rows_each))


@dataclass(frozen=True)
class DirectionAttackSummary:
    """Laplace Recourse only: targets ranked from the released move direction alone."""

    auc: float
    balanced_accuracy: float
    tpr_at_fpr: Mapping[str, float]
    what: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "tpr_at_fpr", frozen_map(self.tpr_at_fpr))


@dataclass(frozen=True)
class DPVerdict:
    """The worst case over the attacks a DP claim covers, against the bound that claim implies.

    ``attack`` is the attack with the highest measured balanced accuracy (best threshold, on the
    rejected targets) among ``covered`` attacks; ``exceeds`` is whether the largest lower confidence
    bound on a covered attack's BA (``ba_lower_confidence``, Kolmogorov-Smirnov, union bound over the
    attacks) is above ``ba_bound`` (the tight bound at the selected-target epsilon): then the claim
    is refuted for this release. ``auc`` and ``tpr_at_fpr_001`` are that attack's. A BA below the bound does not
    prove privacy.
    """

    attack: str
    balanced_accuracy: float
    auc: float
    tpr_at_fpr_001: float
    ba_bound: float
    exceeds: bool
    covered: tuple[str, ...]
    text: str
    ba_lower_confidence: float = float("nan")  # the largest 95% lower confidence bound on BA over covered attacks

    def __post_init__(self) -> None:
        object.__setattr__(self, "covered", tuple(self.covered))


@dataclass(frozen=True)
class DPSummary:
    """What a DP defense claims: epsilon per query and in total, delta, Theorem 2's bound, and how they compose.

    Fields that one defense does not have are None (``epsilon_target`` for DPM only; ``budget``,
    ``n_queries``, ``clamped_share``, ``guarantee`` and ``direction_attack`` for Laplace Recourse).

    Bounds on balanced accuracy (BA): ``ba_bound_paper`` is Theorem 2 of Pawelczyk et al. (2023)
    at (bound_epsilon, delta), 1/2 + (1 - e^-eps)/2 (+ delta e^-eps / 2); ``ba_bound_tight`` the
    tight bound e^eps / (1 + e^eps) (with delta: 1/2 + delta/2 + (1 - delta)(e^eps - 1)/(2(e^eps + 1)));
    ``ba_bound``, used in ``verdict``, is the tight bound at (``selected_epsilon``, ``selected_delta``):
    the audit measures BA only on the targets the model rejects, and conditioning on that decision
    doubles epsilon (see ``selection`` and :func:`~recourse_privacy.metrics.selected_target_privacy`).
    """

    defense: str
    mechanism: str
    epsilon_per_query: float
    epsilon_total: float
    delta: float
    bound_epsilon: float
    ba_bound: float
    composition: str
    epsilon_target: float | None = None
    budget: float | None = None
    n_queries: int | None = None
    clamped_share: float | None = None
    guarantee: str | None = None
    direction_attack: DirectionAttackSummary | None = None
    ba_bound_paper: float | None = None
    ba_bound_tight: float | None = None
    selected_epsilon: float | None = None
    selected_delta: float | None = None
    selection: str | None = None
    verdict: DPVerdict | None = None

    def __post_init__(self) -> None:
        if isinstance(self.verdict, Mapping):
            object.__setattr__(self, "verdict", take(DPVerdict, self.verdict, "dp.verdict") if self.verdict else None)
        if isinstance(self.direction_attack, Mapping):
            da = self.direction_attack
            object.__setattr__(
                self, "direction_attack", take(DirectionAttackSummary, da, "dp.direction_attack") if da else None
            )

    def to_dict(self) -> dict:
        """The dp block of metrics.json (fields that do not apply are left out)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if self.defense == "laplace" and self.direction_attack is None:
            d["direction_attack"] = {}
        return plain(d)


@dataclass(frozen=True)
class DeployedSummary:
    """What the as-deployed audit drew and how its reference models were sized (``metrics.json``'s ``deployed``)."""

    membership_from: str
    train_rows: int  # the deployed training set
    holdout_rows: int
    member_candidates: int  # drawn from the training side (the targets are those the model rejects)
    nonmember_candidates: int
    member_targets: int
    nonmember_targets: int
    positive_share_train: float
    positive_share_holdout: float
    positive_share_member_candidates: float
    positive_share_nonmember_candidates: float
    reference_pool_rows: int  # rows that are not targets: what the reference models train on
    reference_rows_each: int
    reference_fraction: float
    sized_like_deployed: bool
    online_references_include_targets: bool
    minimum_detectable_auc: float
    question: str = QUESTION_DEPLOYED
