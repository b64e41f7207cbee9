"""The audit of a model as it is deployed: the fitted instance and the rows that really trained it.

The game of Pawelczyk et al. (2023, Definition 1) trains a fresh model on members it draws: it
answers whether *this recipe, re-trained* leaks its training data. A model-risk team with a model
in production and its real training rows asks about *this deployed model*; ML Privacy Meter and
LiRA's code (Carlini et al. 2022) audit a given target model against its known training set.
Here:

* the target is the user's fitted instance as loaded, wrapped (never refitted, never cloned);
* the data say, per row, whether it trained that instance (``members``: a column of 1/0 or
  true/false, or a boolean mask; or a training file and a holdout file);
* member and non-member targets are drawn from the two sides, stratified by label (at most
  half of each side, so that rows remain for the reference models); as in the game, the targets
  are those the model rejects;
* the reference (shadow) models are clones of the recipe trained only on rows that are not
  targets (both sides), each on as many rows as the deployed training set where the data
  allow (a share of at most :data:`MAX_REFERENCE_FRACTION` of those rows; the report says so
  where it falls short). Online attacks (LiRA's keep matrix) train references with each target
  in half of them, as an auditor who holds the rows may; the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.stages import GameData, Targets, load_data, missing_values_note, select_targets
from recourse_privacy.data import Dataset, Pools, Preprocessor
from recourse_privacy.data.tabular import read_table
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import minimum_detectable_auc
from recourse_privacy.models.estimator import EstimatorModel, estimator_labels
from recourse_privacy.results.summaries import QUESTION_DEPLOYED, QUESTION_RECIPE, DeployedSummary
from recourse_privacy.validation import as_generator, derive_seed

__all__ = [
    "MAX_REFERENCE_FRACTION",
    "QUESTION_DEPLOYED",
    "QUESTION_RECIPE",
    "DeployedData",
    "DeployedSummary",
    "deployed_summary",
    "deployed_targets",
    "load_deployed",
    "prepare_deployed",
]

#: the largest share of the non-target rows one reference model trains on (the rest give it out-rows)
MAX_REFERENCE_FRACTION = 0.75
#: below this many targets on a side, or beyond this ratio between the sides, the audit warns
SMALL_SIDE, UNBALANCED_RATIO = 200, 3.0
_TRUE, _FALSE = {"1", "true", "yes", "1.0"}, {"0", "false", "no", "0.0"}


@dataclass(frozen=True)
class DeployedData:
    """The user's rows with their membership: ``is_train[i]`` says whether row i trained the deployed model."""

    dataset: Dataset
    frame: pd.DataFrame  # the raw rows (features and label, the membership column removed), for group columns
    is_train: np.ndarray
    source: np.ndarray  # "train" / "holdout" (two files) or the data file's name
    source_row: np.ndarray  # each row's position in its own file
    how: str  # where the membership came from, in words


def _membership(values, n: int, what: str) -> np.ndarray:
    """1/0, true/false (any case) or booleans as a boolean array of length ``n``; an error names the bad values."""
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise InvalidInputError(f"{what} has {arr.size} entries for {n} rows of the data")
    if arr.dtype == bool:
        return arr.copy()
    text = pd.Series(arr).map(lambda v: str(v).strip().lower())
    bad = sorted(set(text) - _TRUE - _FALSE)
    if bad:
        raise InvalidInputError(f"{what} must hold 1/0 or true/false per row; found {bad[:5]}")
    return text.isin(_TRUE).to_numpy()


def _frame(data, what: str) -> pd.DataFrame:
    if isinstance(data, str):
        return read_table(data)
    if isinstance(data, pd.DataFrame):
        return data
    raise InvalidInputError(f"{what} must be a CSV/Parquet path or a pandas DataFrame; got {type(data).__name__}")


def load_deployed(config: AuditConfig) -> DeployedData:
    """The user's rows and, per row, whether it trained the deployed model."""
    from pathlib import Path

    name = Path(config.data).name if isinstance(config.data, str) else "data"
    frame = _frame(config.data, "data")
    if config.holdout is not None:
        hold = _frame(config.holdout, "holdout")
        if list(map(str, hold.columns)) != list(map(str, frame.columns)):
            raise InvalidInputError(
                f"the holdout data's columns {list(hold.columns)[:10]} differ from the training data's "
                f"{list(frame.columns)[:10]}"
            )
        hold = hold.set_axis(frame.columns, axis=1)
        is_train = np.r_[np.ones(len(frame), bool), np.zeros(len(hold), bool)]
        source = np.r_[np.full(len(frame), "train", object), np.full(len(hold), "holdout", object)]
        source_row = np.r_[np.arange(len(frame)), np.arange(len(hold))]
        frame = pd.concat([frame, hold], ignore_index=True)
        how = "two files: the training data (members) and the holdout data (non-members)"
    elif isinstance(config.members, str):
        if config.members not in map(str, frame.columns):
            raise InvalidInputError(
                f"members column {config.members!r} not found; the columns are {list(frame.columns)}"
            )
        is_train = _membership(frame[config.members].to_numpy(), len(frame), f"members column {config.members!r}")
        frame = frame.drop(columns=[config.members]).reset_index(drop=True)
        source, source_row = np.full(len(frame), name, object), np.arange(len(frame))
        how = f"column {config.members!r} of {name}"
    else:
        frame = frame.reset_index(drop=True)
        is_train = _membership(config.members, len(frame), "members")
        source, source_row = np.full(len(frame), name, object), np.arange(len(frame))
        how = "the members mask given with the data"
    for side, n in (("training", int(is_train.sum())), ("holdout", int((~is_train).sum()))):
        if n < 4:
            raise InvalidInputError(f"the {side} side has {n} rows; the as-deployed audit needs at least 4 on each")
    dataset = load_data(replace(config, data=frame, members=None, holdout=None))
    return DeployedData(dataset, frame, is_train, source, source_row, how)


def _stratified(rows: np.ndarray, y: np.ndarray, n: int, rng) -> np.ndarray:
    """``n`` of ``rows`` drawn without replacement, each label's share as among ``rows`` (largest remainders)."""
    labels, counts = np.unique(y[rows], return_counts=True)
    exact = n * counts / counts.sum()
    quota = np.floor(exact).astype(int)
    quota[np.argsort(-(exact - quota), kind="stable")[: n - quota.sum()]] += 1
    picked = [rng.choice(rows[y[rows] == c], size=q, replace=False) for c, q in zip(labels, quota)]
    return np.sort(np.concatenate(picked)).astype(np.int64)


def prepare_deployed(config: AuditConfig, dd: DeployedData) -> tuple[AuditConfig, GameData]:
    """Draw the candidate targets from each side and the reference pool; the config with the references' share.

    The preprocessing is fitted on the whole deployed training set; ``shadow_fraction`` becomes the
    share of the non-target rows that gives each reference model as many rows as that set (at most
    :data:`MAX_REFERENCE_FRACTION`). The owner's fitted recourse (a graph, a VAE) learns from that whole set
    (:attr:`GameData.owner_training`), as each reference model's recourse learns from its own training rows.
    """
    ds, y = dd.dataset, dd.dataset.y
    train, hold = np.flatnonzero(dd.is_train), np.flatnonzero(~dd.is_train)
    n_mem = min(config.n_members, len(train) // 2)
    n_non = min(config.n_nonmembers or config.n_members, len(hold) // 2)
    rng = as_generator(derive_seed(config.seed, 2))
    members, nonmembers = _stratified(train, y, n_mem, rng), _stratified(hold, y, n_non, rng)
    pool = np.setdiff1d(np.arange(ds.n_rows), np.r_[members, nonmembers]).astype(np.int64)
    notes = []
    if n_mem < config.n_members or n_non < (config.n_nonmembers or config.n_members):
        notes.append(
            f"drew {n_mem} of the {len(train)} training rows and {n_non} of the {len(hold)} holdout rows as "
            "candidate targets (at most half of each side, so that rows remain for the reference models)"
        )
    fraction = min(len(train) / len(pool), MAX_REFERENCE_FRACTION)
    rows_each = int(np.floor(fraction * len(pool)))
    if rows_each < 0.9 * len(train):
        notes.append(
            f"each reference model trains on {rows_each} rows, the deployed model was trained on {len(train)}: the "
            f"data have only {len(pool)} rows that are not targets (a reference takes at most "
            f"{MAX_REFERENCE_FRACTION:g} of them); fewer rows overfit differently, which weakens the LRT attacks"
        )
    pre = Preprocessor(scaling=config.scaling, corr_threshold=None, normalize_rows=False).fit(ds.X.iloc[train], ds)
    Xm, Xn, Xa, Xt, Xh = (pre.transform(ds.X.iloc[idx]) for idx in (members, nonmembers, pool, train, hold))
    gaps = missing_values_note(ds, pre)
    if gaps:
        notes.append(gaps)
    game = GameData(
        ds,
        Pools(members, nonmembers, pool),
        pre,
        Xm,
        y[members],
        Xn,
        y[nonmembers],
        Xa,
        y[pool],
        notes=tuple(notes),
        X_owner=Xt,
        y_owner=y[train],
        owner_index=train,
        X_heldout=Xh,
        y_heldout=y[hold],
    )
    return replace(config, shadow_fraction=float(fraction)), game


def deployed_targets(config: AuditConfig, game: GameData) -> Targets:
    """The user's fitted instance, wrapped as it is (never refitted), and the candidates it rejects."""
    est = config.model
    labels = estimator_labels(est, (game.dataset.label_values or (1, 0))[0])
    model = EstimatorModel(
        est,
        game.preprocessor,
        labels=labels,
        feature_names=game.dataset.feature_names,
        estimator_=est,
        random_state=0,
        threshold=config.decision_threshold,
    )
    model.probe_linearity(game.X_members)
    model.check_decisions(game.X_members)  # the targets are the rows the model's own cutoff rejects
    return select_targets(model, game)


def _share(y: np.ndarray) -> float:
    return float(np.mean(y == 1)) if len(y) else float("nan")


def deployed_summary(
    config: AuditConfig, dd: DeployedData, game: GameData, targets: Targets
) -> tuple[DeployedSummary, list[str]]:
    """The summary of the draw and the references, and a warning where the sides are small or unbalanced."""
    y = dd.dataset.y
    n1, n0 = int(targets.is_member.sum()), int((targets.is_member == 0).sum())
    mde = minimum_detectable_auc(n1, n0)
    warns = []
    if min(n1, n0) < SMALL_SIDE or max(n1, n0) > UNBALANCED_RATIO * min(n1, n0):
        warns.append(
            f"{n1} member and {n0} non-member targets ({'small' if min(n1, n0) < SMALL_SIDE else 'unbalanced'}): "
            f"the smallest AUC this audit detects with probability 95% is {mde:.3f} "
            "(recourse_privacy.metrics.minimum_detectable_auc)"
        )
    n_pool = len(game.pools.adversary)
    rows_each = int(np.floor(config.shadow_fraction * n_pool))
    summary = DeployedSummary(
        membership_from=dd.how,
        train_rows=int(dd.is_train.sum()),
        holdout_rows=int((~dd.is_train).sum()),
        member_candidates=len(game.pools.members),
        nonmember_candidates=len(game.pools.nonmembers),
        member_targets=n1,
        nonmember_targets=n0,
        positive_share_train=_share(y[dd.is_train]),
        positive_share_holdout=_share(y[~dd.is_train]),
        positive_share_member_candidates=_share(game.y_members),
        positive_share_nonmember_candidates=_share(game.y_nonmembers),
        reference_pool_rows=n_pool,
        reference_rows_each=rows_each,
        reference_fraction=float(config.shadow_fraction),
        sized_like_deployed=rows_each >= 0.9 * int(dd.is_train.sum()),
        online_references_include_targets=config.needs_online_shadow,
        minimum_detectable_auc=float(mde),
    )
    return summary, warns
