"""The stages of the game (Pawelczyk et al. 2023, Definition 1), each a small function on typed values.

data and pools -> the owner's model and its targets -> the owner's recourse -> the adversary's
reference (shadow) models -> every attack's scores -> their metrics. :func:`run_audit
<recourse_privacy.audit.pipeline.run_audit>` chains them.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.registry import ATTACKS, AttackInputs, LRTOptions, RMIAOptions, run_attack
from recourse_privacy.attacks.shadow import (
    FittedShadows,
    ShadowData,
    fit_shadow_models,
    generate_in_row_chunks,
    run_shadow_models,
)
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.cache import ArtifactCache
from recourse_privacy.data import Dataset, Pools, Preprocessor, load_dataset, split_pools
from recourse_privacy.data.tabular import read_table, validate_frame
from recourse_privacy.defenses.registry import Defense
from recourse_privacy.errors import AttackUnavailableError, InvalidInputError
from recourse_privacy.metrics.exposure import preferred_attack
from recourse_privacy.metrics.intervals import paired_auc_difference
from recourse_privacy.metrics.membership import attack_metrics
from recourse_privacy.models.base import BaseClassifier
from recourse_privacy.models.cached import fit_cached
from recourse_privacy.provenance import sha256_arrays
from recourse_privacy.recourse.base import RecourseResult
from recourse_privacy.recourse.cached import cached_generate
from recourse_privacy.results.summaries import (
    VERSUS_CHOICE,
    AttackResult,
    RecourseSummary,
    ShadowSummary,
    VersusScores,
)
from recourse_privacy.validation import as_generator, derive_seed

__all__ = [
    "GameData",
    "Targets",
    "counterfactual_table",
    "load_data",
    "attack_signal",
    "measure_attacks",
    "owner_recourse",
    "prepare_game",
    "reads_raw_frame",
    "release_frame",
    "stores_float32",
    "transform_rows",
    "run_attacks",
    "select_targets",
    "shadow_summary",
    "summarize_recourse",
    "owner_cfd_query",
    "train_online_models",
    "train_owner",
    "train_shadow_models",
    "shadow_models_ahead",
    "shares_references",
]

#: progress callback: (stage, completed, total)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class GameData:
    """The three disjoint pools, preprocessed with a preprocessor fitted on the members only."""

    dataset: Dataset
    pools: Pools
    preprocessor: Preprocessor
    X_members: np.ndarray
    y_members: np.ndarray
    X_nonmembers: np.ndarray
    y_nonmembers: np.ndarray
    X_pool: np.ndarray
    y_pool: np.ndarray
    notes: tuple[str, ...] = ()  # said once, in the result's warnings (e.g. an adversary pool smaller than 2 x members)
    #: the deployed model's whole training set, preprocessed, where the members are a sample of it (as deployed)
    X_owner: np.ndarray | None = None
    y_owner: np.ndarray | None = None
    owner_index: np.ndarray | None = None  # their row positions in the dataset
    #: the deployed model's whole holdout side, preprocessed (as deployed; None: the non-members)
    X_heldout: np.ndarray | None = None
    y_heldout: np.ndarray | None = None

    @property
    def n_owner_rows(self) -> int:
        """How many rows the owner's model trained on: the members, or the deployed training set."""
        return len(self.owner_training[0])

    @property
    def owner_training(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows the owner's model trained on, which its fitted recourse (a graph, a VAE) learns from as the
        reference models' recourse learns from theirs: the members, or the deployed model's whole training set."""
        return (self.X_members, self.y_members) if self.X_owner is None else (self.X_owner, self.y_owner)

    def recourse_fitting(self, recourse_fit: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows the owner's fitted recourse learns from (``--recourse-fit``): the adversary's pool, or the rows
        the owner's model trained on (:attr:`owner_training`)."""
        return (self.X_pool, self.y_pool) if recourse_fit == "adversary" else self.owner_training

    @property
    def owner_rows(self) -> np.ndarray:
        """The dataset row positions of :attr:`owner_training`'s rows, in its order."""
        return self.pools.members if self.owner_index is None else self.owner_index

    @property
    def owner_heldout(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows the owner's model never trained on, for its test accuracy: the non-members, or (as deployed) the
        whole holdout side."""
        return (self.X_nonmembers, self.y_nonmembers) if self.X_heldout is None else (self.X_heldout, self.y_heldout)

    @property
    def pool_sizes(self) -> tuple[int, int, int]:
        """(members, non-members, adversary) as drawn."""
        return len(self.X_members), len(self.X_nonmembers), len(self.X_pool)


@dataclass(frozen=True)
class Targets:
    """The owner's fitted model and the targets: the members and non-members it rejects."""

    model: BaseClassifier
    X: np.ndarray
    y: np.ndarray
    is_member: np.ndarray
    rows: np.ndarray | None = None  # each target's row position in the dataset


def load_data(config: AuditConfig) -> Dataset:
    """The configured dataset: a user's file, the synthetic data sized for the pools, or a named dataset."""
    if config.data is not None:
        from pathlib import Path

        is_path = isinstance(config.data, str)
        frame = read_table(config.data) if is_path else config.data
        name = Path(config.data).name.split(".")[0] if is_path else "dataframe"
        return validate_frame(
            frame,
            config.target,
            categorical=config.categorical or None,
            immutable=config.immutable,
            increasing=config.increasing,
            positive_label=config.positive_label,
            name=name or "tabular",
            description=f"user table {Path(config.data).name}" if is_path else "user DataFrame",
        )
    if config.dataset == "synthetic":
        return load_dataset(
            "synthetic",
            n_samples=sum(config.pool_sizes),
            n_features=config.n_features,
            random_state=derive_seed(config.seed, 1),
            **config.data_params,
        )
    return load_dataset(config.dataset, config.data_dir, **config.data_params)


def resolve_pool_sizes(config: AuditConfig, n_rows: int) -> tuple[tuple[int, int, int], str | None]:
    """(members, non-members, adversary) for a dataset of ``n_rows``, and a note when the default shrank.

    An adversary pool left at its default (2 x members) that the data cannot supply becomes the
    largest possible, every row left after the members and non-members; the note says so. A pool
    size given explicitly is never changed (too large a one raises in :func:`split_pools`).
    """
    n_mem, n_non, n_adv = config.pool_sizes
    if config.n_adversary is None and n_mem + n_non + n_adv > n_rows and n_rows - n_mem - n_non >= 1:
        left = n_rows - n_mem - n_non
        return (n_mem, n_non, left), (
            f"the dataset has {n_rows} rows: the adversary's pool is the {left} left after "
            f"the members and non-members, not 2 x {n_mem} (the default)"
        )
    return (n_mem, n_non, n_adv), None


def missing_values_note(dataset: Dataset, pre: Preprocessor) -> str | None:
    """A note naming the columns with missing values (most first) and what the audit does with them, or None."""
    columns = [*getattr(pre, "missable_", ()), *getattr(pre, "categorical_gaps_", ())]
    if not columns:
        return None
    counts = dataset.X[columns].isna().sum().sort_values(ascending=False, kind="stable")
    listed = ", ".join(f"{c} ({int(n)})" for c, n in counts.head(3).items())
    more = f" and {len(counts) - 3} more" if len(counts) > 3 else ""
    rows = int(dataset.X[counts.index].isna().any(axis=1).sum())
    return (
        f"{rows} of {dataset.n_rows} rows have missing values, in {len(counts)} columns: {listed}{more}. A missing "
        "value stays missing in every counterfactual (recourse acts on what the record holds) and reaches the model "
        "as NaN; a rejected row missing every changeable column gets no recourse"
    )


def prepare_game(config: AuditConfig, dataset: Dataset) -> GameData:
    """Draw the disjoint pools with one seeded permutation and preprocess them (fitted on the members)."""
    (n_mem, n_non, n_adv), note = resolve_pool_sizes(config, dataset.n_rows)
    pools = split_pools(dataset.n_rows, n_mem, n_non, n_adv, random_state=derive_seed(config.seed, 2))
    # a user's own model reads every original column: every encoded point must decode (no filter)
    corr = None if config.user_model else config.corr_threshold
    pre = Preprocessor(scaling=config.scaling, corr_threshold=corr, normalize_rows=config.normalize_rows).fit(
        dataset.X.iloc[pools.members], dataset
    )
    if len(pre.immutable_mask_) and pre.immutable_mask_.all():
        raise InvalidInputError(
            f"no feature can change: every column is immutable ({', '.join(dataset.immutable)}; --immutable), so "
            "recourse cannot move any target; leave at least one column mutable"
        )
    dtype = np.float32 if stores_float32(dataset) else np.float64
    Xm, Xn, Xa = (
        transform_rows(pre, dataset.X, idx, dtype=dtype) for idx in (pools.members, pools.nonmembers, pools.adversary)
    )
    y = dataset.y
    return GameData(
        dataset,
        pools,
        pre,
        Xm,
        y[pools.members],
        Xn,
        y[pools.nonmembers],
        Xa,
        y[pools.adversary],
        notes=tuple(n for n in (note, missing_values_note(dataset, pre)) if n),
    )


#: a raw frame above this many bytes is large: its encoded pools are stored in float32 where it is float32
#: (:func:`stores_float32`), and it is released after encoding where no later stage reads it (:func:`reads_raw_frame`)
LARGE_FRAME_BYTES = 2**28


def _large(dataset: Dataset) -> bool:
    return int(dataset.X.memory_usage(index=False, deep=False).sum()) > LARGE_FRAME_BYTES


def stores_float32(dataset: Dataset) -> bool:
    """Whether the encoded pools are stored in float32: a large frame whose every column is float32 already.

    The synthetic frame of Figure 2 at d = 5,000 and 7,000 is float32 (the float64 draws rounded,
    :func:`~recourse_privacy.data.synthetic.make_synthetic`); its encoded pools are the float64 encoding
    rounded once more to float32 (2^-24 relative), half the memory (560 MB, not 1.1 GB, at d = 7,000).
    Every model and recourse method reads them widened to float64 (exactly).
    """
    return _large(dataset) and all(dt == np.float32 for dt in dataset.X.dtypes)


def reads_raw_frame(config: AuditConfig) -> bool:
    """Whether a stage after the encoding reads the raw frame: a user's table (the counterfactuals' table),
    a deployed model, ``groups`` columns, threats beyond membership, or the label-only attack (its threat stage)."""
    return bool(
        config.data is not None
        or config.deployed
        or config.groups
        or tuple(config.threats) != ("membership",)
        or "label-only" in config.attack_names
    )


def release_frame(config: AuditConfig, game: GameData) -> GameData:
    """``game`` without its dataset's raw frame where the frame is large and no later stage reads it
    (:func:`reads_raw_frame`; 538 MB at Figure 2's d = 7,000): the dataset keeps its rows and no raw column,
    so a reader of a column would fail by name, never read stale values; ``n_rows``, ``y``, the name and the
    domain are kept, and every encoded pool."""
    if reads_raw_frame(config) or not _large(game.dataset):
        return game
    dataset = game.dataset
    kept = Dataset(
        name=dataset.name,
        X=pd.DataFrame(index=pd.RangeIndex(dataset.n_rows)),
        y=dataset.y,
        target=dataset.target,
        description=dataset.description,
        label_values=dataset.label_values,
        domain=dataset.domain,
    )
    return replace(game, dataset=kept)


def transform_rows(
    pre: Preprocessor, frame: pd.DataFrame, rows: np.ndarray, chunk: int = 512, *, dtype=np.float64
) -> np.ndarray:
    """``pre.transform(frame.iloc[rows])``, ``chunk`` rows at a time into one preallocated array of ``dtype``.

    The same numbers (every step of the transform is row-wise: encoding, scaling by fitted statistics,
    column selection, row normalisation), with a transient of one chunk instead of the several
    whole-pool copies one call makes (at d = 7,000 a 10,000-row pool is 560 MB per copy). ``dtype``
    float32: each value the float64 transform's rounded to nearest.
    """
    rows = np.asarray(rows)
    if len(rows) <= chunk:
        return pre.transform(frame.iloc[rows]).astype(dtype, copy=False)
    first = pre.transform(frame.iloc[rows[:chunk]])
    out = np.empty((len(rows), first.shape[1]), dtype=dtype)
    out[:chunk] = first
    for start in range(chunk, len(rows), chunk):
        out[start : start + chunk] = pre.transform(frame.iloc[rows[start : start + chunk]])
    return out


def train_owner(
    make_model: Callable[[int], BaseClassifier], game: GameData, seed: int, artifacts: ArtifactCache | None = None
) -> Targets:
    """Fit the owner's model on the members (or read it from ``artifacts``); the targets are the members and
    non-members it rejects."""
    model = fit_cached(make_model(derive_seed(seed, 3)), game.X_members, game.y_members, artifacts, role="owner model")
    return select_targets(model, game)


def select_targets(model: BaseClassifier, game: GameData) -> Targets:
    """The targets of a fitted owner's model: the members and non-members it rejects."""
    rej_m, rej_n = model.predict(game.X_members) == 0, model.predict(game.X_nonmembers) == 0
    if not rej_m.any() or not rej_n.any():
        raise InvalidInputError(
            f"the owner's model rejects {int(rej_m.sum())} of the {len(rej_m)} members (--n-members) and "
            f"{int(rej_n.sum())} of the {len(rej_n)} non-members (--n-nonmembers); the game needs rejected points "
            "of both kinds: give the side with none more rows"
        )
    # float64 (the pools may be stored in float32, stores_float32): the one copy the recourse and the attacks read
    X = np.vstack([game.X_members[rej_m], game.X_nonmembers[rej_n]], dtype=np.float64)
    y = np.concatenate([game.y_members[rej_m], game.y_nonmembers[rej_n]])
    is_member = np.concatenate([np.ones(rej_m.sum(), int), np.zeros(rej_n.sum(), int)])
    rows = np.concatenate([game.pools.members[rej_m], game.pools.nonmembers[rej_n]])
    return Targets(model, X, y, is_member, rows)


def train_shadow_models(
    config: AuditConfig,
    make_model: Callable[[int], BaseClassifier],
    method,
    game: GameData,
    targets: Targets,
    *,
    cache_dir: Path | None,
    progress: Progress,
    artifacts: ArtifactCache | None = None,
    online: ShadowData | None = None,
    fitted: FittedShadows | None = None,
    spare_core: bool | None = None,
) -> ShadowData | None:
    """The adversary's shadow models and the targets' statistics under each; None when no attack needs them.

    ``online``: the audit's online reference models, which serve as the shadow set where
    :func:`shares_references` says they can (nothing more is trained). ``fitted``: the shadow models
    trained ahead (:func:`shadow_models_ahead`), queried here, not trained again.
    """
    if not config.needs_shadow_models:
        return None
    if online is not None and shares_references(config):
        return online
    return _reference_models(
        config,
        lambda k: make_model(derive_seed(config.seed, 100 + k)),
        method,
        game,
        targets,
        stage="shadow models",
        progress=progress,
        fraction=config.shadow_fraction,
        need_cfd=config.needs_shadow_recourse,
        random_state=derive_seed(config.seed, 4),
        cache_dir=cache_dir,
        artifacts=artifacts,
        fitted=fitted,
        spare_core=spare_core,
    )


def trains_shadow_set(config: AuditConfig) -> bool:
    """Whether the audit trains an offline shadow set of its own (not served by the online reference models)."""
    return config.needs_shadow_models and not shares_references(config)


def shadow_set_ahead(config: AuditConfig, make_model: Callable[[int], BaseClassifier]) -> bool:
    """Whether :func:`shadow_models_ahead` trains the shadow set: the audit trains one of its own, of MLPs trained
    together (:func:`~recourse_privacy.models.batched.can_batch`)."""
    from recourse_privacy.models.batched import can_batch

    n = config.shadow_models
    return trains_shadow_set(config) and can_batch([make_model(derive_seed(config.seed, 100 + k)) for k in range(n)])


def trains_references_together(config: AuditConfig, make_model: Callable[[int], BaseClassifier]) -> bool:
    """Whether the audit trains reference models (an offline shadow set or online references) that are MLPs trained
    together (:func:`~recourse_privacy.models.batched.can_batch`): the only audits that put a second core to work
    (their training beside the owner's, their worlds queried in two threads)."""
    from recourse_privacy.models.batched import can_batch

    if not (config.needs_shadow_models or config.needs_online_shadow):
        return False
    return can_batch([make_model(derive_seed(config.seed, 100 + k)) for k in range(2)])


def shadow_models_ahead(
    config: AuditConfig, make_model: Callable[[int], BaseClassifier], game: GameData, artifacts: ArtifactCache | None
) -> FittedShadows | None:
    """The offline shadow models of :func:`train_shadow_models`, trained before the owner's targets are known.

    They train on rows of the adversary's pool only (the targets are read when the models are queried), so
    they can train beside the owner's model (:func:`recourse_privacy.audit.pipeline.play_audit`): the same
    seeds and keep matrix, the same networks. None where the audit trains no shadow set of its own or its
    models are not MLPs trained together.
    """
    if not trains_shadow_set(config):
        return None
    return fit_shadow_models(
        lambda k: make_model(derive_seed(config.seed, 100 + k)),
        game.X_pool,
        game.y_pool,
        n_shadow=config.shadow_models,
        fraction=config.shadow_fraction,
        random_state=derive_seed(config.seed, 4),
        artifacts=artifacts,
    )


def shares_references(config: AuditConfig) -> bool:
    """Whether one set of reference models serves the offline attacks and the online ones.

    LiRA's online reference models (Carlini et al. 2022) each train on half of the targets, so every
    target has half of them as out-models: an offline attack that reads only those
    (registered ``reads_out_targets``) needs no shadow set of its own. Shared where the audit runs
    both kinds, every offline attack reads out-models only, and the shadow fraction is LiRA's half.
    """
    if not (config.needs_shadow_models and config.needs_online_shadow) or config.shadow_fraction != 0.5:
        return False
    offline = [a for a in config.attack_names if "shadow_models" in ATTACKS.get(a).needs]
    return all(ATTACKS.get(a).meta.get("reads_out_targets", False) for a in offline)


def _reference_models(
    config: AuditConfig,
    make_model,
    method,
    game: GameData,
    targets: Targets,
    *,
    stage: str,
    progress: Progress,
    **options,
) -> ShadowData:
    """:func:`run_shadow_models` on the adversary's pool and the targets, reporting each finished model to ``progress``."""
    progress(stage, 0, config.shadow_models)
    done = [0]

    def on_done(_k: int) -> None:
        done[0] += 1
        progress(stage, done[0], config.shadow_models)

    return run_shadow_models(
        make_model,
        method,
        game.X_pool,
        game.y_pool,
        targets.X,
        targets.y,
        n_shadow=config.shadow_models,
        n_calibration=config.n_calibration,
        distance=config.distance,
        n_jobs=config.n_jobs,
        on_done=on_done,
        **options,
    )


def owner_recourse(
    config: AuditConfig,
    defense: Defense,
    method,
    targets: Targets,
    fit_X: np.ndarray,
    fit_y: np.ndarray,
    artifacts: ArtifactCache | None = None,
):
    """The owner's recourse for the targets and the defense's budget session (None where it spends none).

    A defense that releases the plain recourse (it does not override ``owner_recourse``) has it
    read from ``artifacts`` where an audit of the same model, method and targets computed it.
    """
    if type(defense).owner_recourse is Defense.owner_recourse:
        res = generate_in_row_chunks(  # row chunks where the targets are large (d = 7,000): the same rows
            lambda X: cached_generate(method, targets.model, fit_X, fit_y, X, artifacts, role="owner recourse"),
            targets.X,
        )
        return res, None
    return defense.owner_recourse(config, method, targets.model, fit_X, fit_y, targets.X)


def train_online_models(
    config: AuditConfig,
    make_model: Callable[[int], BaseClassifier],
    method,
    game: GameData,
    targets: Targets,
    *,
    cache_dir: Path | None,
    progress: Progress,
    artifacts: ArtifactCache | None = None,
    spare_core: bool | None = None,
) -> ShadowData | None:
    """LiRA's online reference models (halves of the pool and the targets); None when no attack needs them.

    ``config.shadow_models`` of them, seeded apart from the offline shadow models, on a balanced keep
    matrix over pool rows and the targets (each target in half of them); the targets' labels are the
    adversary's view of each target, their membership is not read.

    The pool rows are chosen so that every model's training set is made like the owner's: the owner's
    members are the rejected ones (targets) and accepted ones, so the pool rows joining the targets are
    2 n_members - n_targets rows the owner's model accepts (its decisions on the pool, queries the
    adversary makes), and half of the targets plus half of those rows is n_members rows, about half of
    them rejected, as in the owner's training set. (Random pool rows instead would give training sets
    richer in rejected points than the owner's, whose models are more confident on the targets: every
    target would then look "out".) Where the pool has too few accepted rows, all of them join.
    """
    if not config.needs_online_shadow:
        return None
    return _reference_models(
        config,
        lambda k: make_model(derive_seed(config.seed, 300 + k)),
        method,
        game,
        targets,
        stage="online reference models",
        progress=progress,
        fraction=0.5,
        need_cfd=config.needs_online_recourse or (shares_references(config) and config.needs_shadow_recourse),
        random_state=derive_seed(config.seed, 7),
        cache_dir=cache_dir,
        artifacts=artifacts,
        online=True,
        spare_core=spare_core,
        online_rows=online_pool_rows(targets.model, game.X_pool, game.n_owner_rows, len(targets.X), config.seed),
    )


def online_pool_rows(
    model: BaseClassifier, X_pool: np.ndarray, n_members: int, n_targets: int, seed: int
) -> np.ndarray:
    """2 n_members - n_targets pool rows the owner's model accepts (a seeded random choice; all if fewer)."""
    accepted = np.flatnonzero(model.predict(X_pool) == 1)
    n = min(max(2 * n_members - n_targets, 0), len(accepted))
    return np.sort(as_generator(derive_seed(seed, 8)).choice(accepted, size=n, replace=False))


def owner_cfd_query(query: Callable[[np.ndarray], RecourseResult], distance: str) -> Callable[[np.ndarray], np.ndarray]:
    """The owner's recourse as a query API returning distances; the last answer is kept, so two attacks
    asking for the same points (RMIA offline and online) cost one computation."""
    memo: dict[str, np.ndarray] = {}

    def ask(X: np.ndarray) -> np.ndarray:
        key = sha256_arrays(np.ascontiguousarray(X))
        if key not in memo:
            memo.clear()
            memo[key] = query(X).distance(distance) if len(X) else np.zeros(0)
        return memo[key]

    return ask


def run_attacks(config: AuditConfig, inputs: AttackInputs) -> dict[str, AttackScores]:
    """Every configured attack's scores, by name, through the attack registry."""
    return {name: run_attack(name, inputs) for name in config.attack_names}


def run_available_attacks(config: AuditConfig, inputs: AttackInputs) -> tuple[dict[str, AttackScores], dict[str, str]]:
    """Every configured attack's scores, and, by name, why each attack that cannot score these targets did not
    run (:class:`~recourse_privacy.errors.AttackUnavailableError`); none able to run raises, with every reason."""
    scores: dict[str, AttackScores] = {}
    not_run: dict[str, str] = {}
    for name in config.attack_names:
        try:
            scores[name] = run_attack(name, inputs)
        except AttackUnavailableError as e:
            not_run[name] = str(e)
    if not scores:
        raise AttackUnavailableError("no attack could run: " + "; ".join(f"{n}: {why}" for n, why in not_run.items()))
    return scores, not_run


def attack_inputs(
    config: AuditConfig,
    game: GameData,
    targets: Targets,
    recourse: RecourseResult,
    cfd: np.ndarray,
    shadow: ShadowData | None,
    online_shadow: ShadowData | None = None,
    query_cfd: Callable[[np.ndarray], np.ndarray] | None = None,
) -> AttackInputs:
    """What the adversary sees, for the attacks."""
    return AttackInputs(
        cfd=cfd,
        recourse=recourse,
        model=targets.model,
        X=targets.X,
        y=targets.y,
        shadow=shadow,
        X_pool=game.X_pool,
        y_pool=game.y_pool,
        lrt=LRTOptions(center=config.center, variance=config.variance, cdf=config.cdf),
        seed=config.seed,
        online_shadow=online_shadow,
        query_cfd=query_cfd,
        rmia=RMIAOptions(a=config.rmia_a, gamma=config.rmia_gamma, n_population=config.rmia_population),
    )


def attack_signal(name: str) -> str:
    """What the registered attack ``name`` reads: distance, score or none ("" when not registered)."""
    return str(ATTACKS.get(name).meta.get("signal", "")) if name in ATTACKS else ""


def measure_attacks(
    scores: dict[str, AttackScores], is_member: np.ndarray, seed: int = 0
) -> tuple[dict[str, AttackResult], list[str]]:
    """Each attack's metrics (AUC, balanced accuracy, TPR at low FPR, with intervals), and the warnings they raised.

    Every bootstrap draws the same resamples of the targets (one seed derived from ``seed``), and each
    distance attack's AUC is set against the lead score attack's on those resamples (paired): the first score
    attack that ran of a fixed order (:func:`~recourse_privacy.metrics.exposure.preferred_attack`), never the
    one of highest AUC, which would be chosen with the targets' membership labels.
    """
    boot_seed = derive_seed(seed, 11)
    signals = {name: attack_signal(name) for name in scores}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = {name: attack_metrics(is_member, s.scores, seed=boot_seed) for name, s in scores.items()}
    best = preferred_attack({n: signals[n] for n in scores if math.isfinite(metrics[n].auc)}, "score")
    versus: dict[str, VersusScores] = {}
    for name in scores:
        if best is not None and signals[name] == "distance":
            d = paired_auc_difference(is_member, scores[name].scores, scores[best].scores, seed=boot_seed)
            versus[name] = VersusScores(
                best, d.difference, d.ci_low, d.ci_high, d.ci_level, d.n_boot, choice=VERSUS_CHOICE
            )
    results = {
        name: AttackResult.from_scores(metrics[name], s, signal=signals[name], versus_scores=versus.get(name))
        for name, s in scores.items()
    }
    return results, sorted({str(w.message) for w in caught})


def summarize_recourse(res: RecourseResult, is_member: np.ndarray, distance: str) -> RecourseSummary:
    """Validity and costs of the owner's recourse, overall and per membership."""
    return RecourseSummary(
        **res.summary(),
        validity_members=float(res.valid[is_member == 1].mean()),
        validity_nonmembers=float(res.valid[is_member == 0].mean()),
        distance=distance,
    )


def shadow_summary(config: AuditConfig, shadow: ShadowData, n_members: int) -> tuple[ShadowSummary, list[str]]:
    """How many rows each shadow model trained on, and a warning where that is fewer than the owner's ``n_members``."""
    rows = int(shadow.train_rows.min())
    warns = []
    if rows < 0.9 * n_members:
        need = int(np.ceil(n_members / config.shadow_fraction))
        warns.append(
            f"each shadow model trains on {rows} rows (fewest), the owner's model on {n_members}: shadow "
            "models that see fewer rows overfit differently, which weakens the LRT attacks; give the "
            f"adversary a pool of at least {need} rows (--n-adversary; each shadow trains on "
            f"floor({config.shadow_fraction:g} x pool) rows) so that they match"
        )
    return ShadowSummary(
        n=shadow.n_shadow,
        fraction=config.shadow_fraction,
        train_rows=rows,
        mean_train_accuracy=float(shadow.train_accuracy.mean()),
        n_calibration=int(shadow.keep_calib.shape[0]),
        train_rows_each=tuple(int(r) for r in shadow.train_rows),
    ), warns


def counterfactual_table(
    pre: Preprocessor,
    dataset: Dataset,
    rows: np.ndarray | None,
    res: RecourseResult,
    distance: str,
    is_member: np.ndarray | None = None,
) -> tuple[pd.DataFrame | None, str | None]:
    """One row per factual in the data's own columns and units: ``row`` (position in the data),
    ``member`` (with ``is_member``), ``valid``, ``cost_<distance>`` (encoded space, what the attacks
    read), ``n_changed`` and ``changed`` (the columns recourse changes), then each column's
    original value and its recourse value (``COL_cf``).

    (None, why) where the encoded points cannot be decoded (a numeric column dropped by the
    correlation filter, or rows normalised).
    """
    from recourse_privacy.errors import IncompatibleError

    try:
        before = pre.inverse_transform(res.factuals)
        after = pre.inverse_transform(res.counterfactuals)
    except IncompatibleError as err:
        return None, f"counterfactuals.csv not written: {err}"
    if rows is not None:  # the data's own values, not their round trip through the scaling
        before = dataset.X.iloc[rows].reset_index(drop=True)[list(before.columns)]
    changed = np.zeros((len(before), before.shape[1]), dtype=bool)
    for j, col in enumerate(before.columns):  # (decoding already snaps an integer column's noise to its integers)
        a, b = before[col].to_numpy(), after[col].to_numpy()
        if col in pre.numeric_:
            a, b = a.astype(np.float64), b.astype(np.float64)
            changed[:, j] = np.abs(b - a) > 1e-9 * np.maximum(1.0, np.abs(a))
            after[col] = np.where(changed[:, j], b, a)  # unchanged: exactly the original value
        else:  # a gap kept is no change
            changed[:, j] = (a != b) & ~(pd.isna(a) & pd.isna(b))
    names = np.asarray([str(c) for c in before.columns], dtype=object)
    outside, note = _outside_range(dataset, before.columns, after, changed, pre.numeric_)
    table = pd.DataFrame(
        {
            "row": rows if rows is not None else np.arange(len(before)),
            **({"member": np.asarray(is_member).astype(bool)} if is_member is not None else {}),
            "valid": res.valid.astype(bool),
            f"cost_{distance}": res.distance(distance),
            "n_changed": changed.sum(axis=1),
            "changed": ["; ".join(names[m]) for m in changed],
            "outside_range": ["; ".join(names[m]) for m in outside],
        }
    )
    parts = [table]
    for col in before.columns:
        parts.append(pd.DataFrame({str(col): before[col].to_numpy(), f"{col}_cf": after[col].to_numpy()}))
    return pd.concat(parts, axis=1), note


def _outside_range(
    dataset: Dataset, columns, after: pd.DataFrame, changed: np.ndarray, numeric
) -> tuple[np.ndarray, str | None]:
    """Which changed numeric values of the counterfactuals lie outside the column's range in the data (n, columns),
    and a warning naming the columns (most first) and the ``--bounds`` that keep recourse inside, or None."""
    outside = np.zeros(changed.shape, dtype=bool)
    ranges = {}
    for j, col in enumerate(columns):
        if col not in numeric or col not in dataset.X.columns:
            continue
        lo, hi = float(dataset.X[col].min()), float(dataset.X[col].max())
        v = after[col].to_numpy(np.float64)
        tol = 1e-9 * max(1.0, abs(lo), abs(hi))
        outside[:, j] = changed[:, j] & ((v < lo - tol) | (v > hi + tol))
        ranges[j] = (lo, hi)
    rows = outside.any(axis=1)
    if not rows.any():
        return outside, None
    count = outside.sum(axis=0)
    worst = [j for j in np.argsort(-count, kind="stable") if count[j]][:3]
    listed = ", ".join(f"{columns[j]} ({int(count[j])})" for j in worst)
    bounds = " ".join(f"--bounds {columns[j]}={ranges[j][0]:g}:{ranges[j][1]:g}" for j in worst)
    return outside, (
        f"{int(rows.sum())} of {len(rows)} counterfactuals move a column outside its range in the data: {listed} "
        f"(counterfactuals.csv, outside_range): advice no applicant can follow. Keep recourse inside with "
        f"--actionable (every column in the members' range), or {bounds} (the data's ranges), or --immutable for a "
        "column no one can change"
    )
