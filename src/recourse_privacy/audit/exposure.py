"""Which records and which groups an audit's attacks expose: ``exposure.csv`` and ``groups.csv``.

Per target (one row each): its row in the data, its membership, the model's decision and
favourable-class probability, each attack's score and its percentile among the non-members'
scores, and for the likelihood-ratio attacks that compute one (LiRA's online test, Carlini et al.
2022) the per-record log likelihood ratio. The offline LRTs of Pawelczyk et al. (2023,
Algorithm 1) score a one-sided tail probability under the out-distribution alone: no ratio, so
none is reported for them. The report lists the ten most exposed members by row id (no feature
values) under the ranking attack (:func:`ranking_attack`: a fixed preference order, never the targets'
AUC), and how many members each attack identifies at FPR 1% and
0.1%, the thresholds read off the non-members' scores
(:func:`~recourse_privacy.metrics.exposure.identified_at_fpr`).

Per group (``groups``, columns of the data): counts, AUC and TPR at FPR 1% with 95% intervals
and a group-versus-rest test, Holm-corrected (:func:`~recourse_privacy.metrics.exposure.group_exposure`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.stages import GameData, Targets
from recourse_privacy.audit.summaries import AttackResult
from recourse_privacy.data import Dataset
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.exposure import (
    ExposedRecord,
    ExposureSummary,
    GroupExposure,
    IdentifiedMembers,
    group_exposure,
    identified_at_fpr,
    nonmember_percentiles,
    preferred_attack,
)
from recourse_privacy.validation import derive_seed

__all__ = ["EXPOSURE_FPRS", "check_group_columns", "group_table", "ranking_attack", "record_exposure"]

EXPOSURE_FPRS = (0.01, 0.001)
TOP_K = 10
LR_NOTE = (
    "log_lr columns: the online LRTs' per-record log likelihood ratio log p(s | in) - log p(s | out) (Carlini et "
    "al. 2022); the offline LRTs (cfd-lrt, loss-lrt) score a one-sided tail probability under the out-references "
    "alone (Pawelczyk et al. 2023, Algorithm 1), which is no likelihood ratio, so none is given for them"
)


def ranking_attack(attacks: Mapping[str, AttackResult]) -> str:
    """The attack whose scores rank the most exposed records: the first of :data:`~recourse_privacy.metrics.exposure.RANKING_PREFERENCE` that ran.

    The rule (:func:`~recourse_privacy.metrics.exposure.preferred_attack`) reads only the attacks' names and
    signals, never their metrics on the targets (an AUC is computed from the targets' membership labels); an
    unlisted attack follows the listed ones of its signal, a control (signal ``none``) comes last.
    """
    if not attacks:
        raise InvalidInputError("no attack ran: nothing ranks the records")
    return preferred_attack({n: a.signal for n, a in attacks.items()})


def _is_lr(s: AttackScores) -> bool:
    return "likelihood ratio" in str(s.conventions.get("score", ""))


def _favourable_proba(model, X: np.ndarray) -> np.ndarray:
    """The model's own probability of the favourable label (a user's estimator: unclipped, as its file gives it)."""
    est = getattr(model, "estimator_", None)
    if est is not None and callable(getattr(model, "decode", None)):
        return np.asarray(est.predict_proba(model.decode(X)), dtype=np.float64)[:, model.pos_index_]
    return np.asarray(model.predict_proba(X), dtype=np.float64)[:, 1]


def record_exposure(
    scores: Mapping[str, AttackScores], attacks: Mapping[str, AttackResult], targets: Targets, deployed=None
) -> tuple[pd.DataFrame, ExposureSummary]:
    """The per-target table of ``exposure.csv`` and the report's summary of it."""
    member = targets.is_member.astype(bool)
    rows = targets.rows if targets.rows is not None else np.arange(len(member))
    proba = _favourable_proba(targets.model, targets.X)
    labels = getattr(targets.model, "labels", (1, 0))
    table = {"row": rows}
    if deployed is not None:
        table["source"], table["source_row"] = deployed.source[rows], deployed.source_row[rows]
    table.update(
        member=member,
        decision=np.where(targets.model.predict(targets.X) == 1, labels[0], labels[1]),  # at the model's cutoff
        p_favourable=proba,
    )
    lr = tuple(n for n, s in scores.items() if _is_lr(s))
    for name, s in scores.items():
        table[f"{name}_score"] = s.scores
        table[f"{name}_percentile"] = nonmember_percentiles(s.scores, member)
        if name in lr:
            table[f"{name}_log_lr"] = s.scores
    best = ranking_attack(attacks)
    for fpr in EXPOSURE_FPRS:
        table[f"identified_fpr_{fpr:g}"] = identified_at_fpr(scores[best].scores, member, fpr)[0]
    frame = pd.DataFrame(table)
    top = (
        frame[frame["member"]]
        .sort_values([f"{best}_percentile", f"{best}_score"], ascending=False, kind="stable")
        .head(TOP_K)
    )
    identified = []
    for name, s in scores.items():
        for fpr in EXPOSURE_FPRS:
            flags, threshold, reached = identified_at_fpr(s.scores, member, fpr)
            identified.append(
                IdentifiedMembers(name, fpr, int((flags & member).sum()), int(member.sum()), threshold, reached)
            )
    summary = ExposureSummary(
        ranking_attack=best,
        most_exposed=tuple(
            ExposedRecord(int(row), float(pct), float(score))
            for row, pct, score in zip(top["row"], top[f"{best}_percentile"], top[f"{best}_score"])
        ),
        identified=tuple(identified),
        likelihood_ratio_attacks=lr,
        note=LR_NOTE,
    )
    return frame, summary


def check_group_columns(config: AuditConfig, dataset: Dataset) -> None:
    """Every ``groups`` column is a column of the data (a feature or the label)."""
    known = [*map(str, dataset.X.columns), dataset.target]
    missing = [c for c in config.groups if c not in known]
    if missing:
        raise InvalidInputError(f"group column(s) {missing} not found; the columns are {known}")


#: the group of the targets a column is missing in (a numeric column with gaps)
MISSING_GROUP = "(missing)"


def _values(column: str, dataset: Dataset, rows: np.ndarray) -> np.ndarray:
    if column in dataset.X.columns:
        values = dataset.X[column].to_numpy()[rows]
        gaps = pd.isna(values)
        return np.where(gaps, MISSING_GROUP, values.astype(object)) if gaps.any() else values
    fav, unfav = dataset.label_values or (1, 0)
    return np.where(dataset.y[rows] == 1, fav, unfav)


def group_table(
    config: AuditConfig,
    game: GameData,
    targets: Targets,
    scores: Mapping[str, AttackScores],
    attacks: Mapping[str, AttackResult],
) -> tuple[GroupExposure, ...]:
    """Per value of each ``config.groups`` column and per attack (the random control left out): the group's
    exposure and its test against the rest (Holm-corrected within each column and attack)."""
    if not config.groups:
        return ()
    rows = targets.rows if targets.rows is not None else np.arange(len(targets.is_member))
    out: list[GroupExposure] = []
    for column in config.groups:
        values = _values(column, game.dataset, rows)
        for name, s in scores.items():
            if attacks[name].signal == "none":
                continue
            out += group_exposure(
                column, values, s.scores, targets.is_member, attack=name, seed=derive_seed(config.seed, 12)
            )
    return tuple(out)
