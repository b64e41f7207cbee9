"""The recourse-based membership-inference audit (Pawelczyk et al. 2023, Definition 1), end to end.

:func:`play_audit` plays the game once by chaining the stages of :mod:`recourse_privacy.audit.stages`
and returns a typed :class:`~recourse_privacy.audit.result.AuditResult`; it writes no output file.
The CLI's ``audit`` command is this function plus a progress bar, the writer
(:func:`recourse_privacy.report.outputs.write_outputs`) and a printed table; :func:`run_audit`, the
library's one call, plays and, given ``out_dir``, writes the same files.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import recourse_privacy.audit.deployed as deployed
import recourse_privacy.audit.stages as stages
import recourse_privacy.audit.threats as threats
from recourse_privacy import processes
from recourse_privacy.attacks.shadow import PARALLEL_ENV, FittedShadows, spare_core
from recourse_privacy.audit.config import AuditConfig, closest_setting
from recourse_privacy.audit.defenses import Defense, dp_verdict
from recourse_privacy.audit.exposure import check_group_columns, group_table, record_exposure
from recourse_privacy.audit.result import AuditArrays, AuditResult
from recourse_privacy.audit.stages import Progress
from recourse_privacy.audit.user_inputs import describe_data, object_digest
from recourse_privacy.audit.user_model import (
    action_set_for,
    check_bounds_columns,
    check_fitted_recourse,
    check_public_bounds,
    public_bounds_for,
    resolve_model,
)
from recourse_privacy.cache import ArtifactCache, open_cache
from recourse_privacy.data import dataset_file
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import minimum_targets_per_side
from recourse_privacy.models.base import accuracy
from recourse_privacy.models.device import use_device
from recourse_privacy.models.mlp_trainer import STACK_WORKERS
from recourse_privacy.processes import workers_die_with_parent
from recourse_privacy.provenance import content_key, sha256_file
from recourse_privacy.report.outputs import write_outputs
from recourse_privacy.results.summaries import DataSummary, ModelSummary, PoolSizes, Provenance
from recourse_privacy.validation import check_output_dir

__all__ = ["data_provenance", "play_audit", "run_audit"]


class _Clock:
    """Wall time per stage, reported to the progress callback as each stage ends."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.start = self.t = time.perf_counter()
        self.timing: dict[str, float] = {}

    def begin(self, stage: str) -> None:
        self.progress(stage, 0, 1)

    def lap(self, stage: str, *, report: bool = True) -> None:
        now = time.perf_counter()
        self.timing[stage] = round(now - self.t, 3)
        self.t = now
        if report:
            self.progress(stage, 1, 1)

    def total(self) -> dict[str, float]:
        return {**self.timing, "total": round(time.perf_counter() - self.start, 3)}


class _Capable:
    """Capabilities known before training, in the shape :func:`check_fitted_recourse` reads."""

    def __init__(self, capabilities: frozenset[str]):
        self.is_linear = "linear" in capabilities
        self.is_differentiable = "gradients" in capabilities


def data_provenance(config: AuditConfig) -> Provenance:
    """Where the audit's data comes from: the file read and its SHA-256 (None for generated data)."""
    if config.data is not None and not isinstance(config.data, str):  # a DataFrame: its content hash
        return Provenance.current(describe_data(config.data), object_digest(config.data))
    if config.data is not None:
        path = Path(config.data).expanduser()
        return Provenance.current(str(path.resolve()), sha256_file(path) if path.is_file() else None)
    path = dataset_file(config.dataset, config.data_dir)
    if path is None:
        return Provenance.current(config.dataset, None)
    return Provenance.current(str(path.resolve()), sha256_file(path))


def _check_enough_targets(config: AuditConfig, is_member, n_rows: int) -> None:
    """Stop before the shadow models where either side has fewer targets than a verdict needs."""
    minimum = minimum_targets_per_side()
    for flag, side, n in (
        ("--n-members", "member", int((is_member == 1).sum())),
        ("--n-nonmembers", "non-member", int((is_member == 0).sum())),
    ):
        if n < minimum:
            raise InvalidInputError(
                f"the owner's model rejects {n} {side}s, so the game has {n} {side} targets; a verdict needs at "
                f"least {minimum} on each side (the fewest for which the AUC's 95% interval can detect any leak; "
                f"README, 'What the numbers mean'): raise {flag} (the data has {n_rows} rows; use a larger file "
                "if they do not allow it)"
            )


def play_audit(
    config: AuditConfig | None = None,
    *,
    resume_dir: str | Path | None = None,
    progress: Progress | None = None,
    cache: ArtifactCache | str | Path | bool | None = None,
    **overrides,
) -> AuditResult:
    """Play the recourse membership-inference game once and measure every attack; write no output file.

    Arguments as :func:`run_audit`'s; ``resume_dir``: where each finished shadow model's statistics are
    kept (under ``resume_dir/.cache``) so that a killed run resumes where it stopped (None: nowhere).
    The caller writes the outputs (:func:`recourse_privacy.report.outputs.write_outputs`), as the CLI does.
    """
    unknown = sorted(set(overrides) - {f.name for f in fields(AuditConfig)})
    if unknown:
        named = [f"{u} (did you mean {hint}?)" if (hint := closest_setting(u)) else u for u in unknown]
        raise InvalidInputError(f"unknown audit setting(s): {', '.join(named)}")
    config = replace(config or AuditConfig(), **overrides).validate()
    if resume_dir is not None:
        resume_dir = check_output_dir(resume_dir)
    with use_device(config.device):  # every torch step of the game (models, gradient recourse) on this device
        return _play(config, resume_dir, progress, cache)


def run_audit(
    config: AuditConfig | None = None,
    out_dir: str | Path | None = None,
    *,
    progress: Progress | None = None,
    cache: ArtifactCache | str | Path | bool | None = None,
    **overrides,
) -> AuditResult:
    """Play the recourse membership-inference game once, measure every attack and, with ``out_dir``, write the outputs.

    ``config`` fields may also be given as keyword ``overrides``, e.g.
    ``run_audit(model=pipeline, data=frame, target="approved", positive_label="yes", recourse="gs")``
    for your own fitted scikit-learn pipeline and DataFrame (see :class:`AuditConfig`). With
    ``out_dir`` it writes ``metrics.json``, ``roc.png``, ``cfd_histogram.png``,
    ``report.html`` and, where the points decode to the data's columns,
    ``counterfactuals.csv`` there (:func:`recourse_privacy.report.outputs.write_outputs`, after the
    game: :func:`play_audit` writes nothing), and keeps each finished shadow model's statistics under
    ``out_dir/.cache`` so that a killed run resumes where it stopped.

    ``cache``: the content-addressed store of trained models and recourse shared by audits and
    grid cells (:mod:`recourse_privacy.cache`): an :class:`~recourse_privacy.cache.ArtifactCache`
    (whose ``stats`` then count this audit's hits and misses), a directory, ``"off"`` or False for
    none, or None for ``$RECOURSE_PRIVACY_CACHE``, else the user cache directory. The numbers
    are the same with and without it; a model without a state codec (your own fitted model) is
    used as given, never cached.
    """
    result = play_audit(config, resume_dir=out_dir, progress=progress, cache=cache, **overrides)  # checks out_dir first
    return result if out_dir is None else result.with_files(write_outputs(result, check_output_dir(out_dir)))


@dataclass
class _Run:
    """The working state of one game, filled stage by stage by :func:`_play`."""

    config: AuditConfig
    clock: _Clock
    artifacts: ArtifactCache | None
    defense: Defense
    provenance: Provenance | None = None
    deployed_data: deployed.DeployedData | None = None
    game: stages.GameData | None = None
    recipe: Any = None
    method: Any = None
    targets: stages.Targets | None = None
    fit: tuple = ()  # (X, y) a fitted recourse method learns from
    res: Any = None  # the owner's recourse for the targets
    session: Any = None
    cfd: Any = None
    counterfactuals: Any = None
    note: str | None = None
    shadow: Any = None
    online: Any = None
    scores: dict = field(default_factory=dict)
    attacks: dict = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)  # attack -> why it could not score these targets
    warns: list[str] = field(default_factory=list)
    threat_report: Any = None
    spare: bool = False  # a second core free for the owner beside the shadow models and two worlds' queries at once

    def owner_recourse(self, model, X_fit, y_fit, X):
        """The owner's (defended) recourse for ``X`` from ``model`` fitted on (X_fit, y_fit)."""
        return self.defense.owner_recourse(self.config, self.method, model, X_fit, y_fit, X)[0]


def _play(
    config: AuditConfig,
    resume_dir: Path | None,
    progress: Progress | None,
    cache: ArtifactCache | str | Path | bool | None = None,
) -> AuditResult:
    """The game of :func:`play_audit` with a validated ``config``: its stages, in order."""
    run = _Run(
        config,
        _Clock(progress or (lambda stage, done, total: None)),
        open_cache(cache),
        config.defense_entry,
    )
    _data_stage(run)
    # decided once, before our own threads start (a 0.2 s sample of the idle CPUs), and only where a second core
    # would be used: other audits (e.g. logistic models, cells of a grid) skip the sample
    run.spare = stages.trains_references_together(run.config, run.recipe.make) and spare_core()
    if overlaps(run.config, run.deployed_data is not None, _resume_cache(run, resume_dir), run.recipe.make, run.spare):
        _owner_beside_shadow_models(run, resume_dir)
    else:
        _owner_stage(run)
        _recourse_stage(run)
        _reference_stage(run, resume_dir)
    _attack_stage(run)
    return _assemble(run)


#: ``RECOURSE_PRIVACY_OVERLAP``: ``1`` both cores where the process may use two, ``auto`` (the default) both where one
#: is idle, ``0`` the stages one after another and one world queried at a time (:func:`~recourse_privacy.attacks.shadow.spare_core`)
OVERLAP_ENV = PARALLEL_ENV


def overlaps(
    config: AuditConfig,
    deployed_owner: bool,
    resume_cache: Path | None = None,
    make_model: Callable[[int], Any] | None = None,
    spare: bool | None = None,
) -> bool:
    """Whether the owner's model and recourse run in a Python thread beside the training of the shadow models.

    Where a second core is free (``spare``; None: :func:`~recourse_privacy.attacks.shadow.spare_core` now),
    the audit trains an offline shadow set of its own of MLPs trained together (``make_model``: the audit's
    model recipe; the online reference models' training sets hold the targets, which the owner's model
    decides: they wait for it), the owner's model is trained here (not a deployed instance), the models are
    on the CPU, and no resumed shadow statistics are waiting under ``resume_cache``.
    """
    if not (spare_core() if spare is None else spare):
        return False
    if deployed_owner or not stages.trains_shadow_set(config):
        return False
    if make_model is not None and not stages.shadow_set_ahead(config, make_model):
        return False
    if resume_cache is not None and any(resume_cache.glob("shadow_*.npz")):
        return False  # a resumed run reads its shadow statistics: nothing to train ahead
    from recourse_privacy.models.device import resolve_device

    return resolve_device(config.device).type == "cpu"


def _resume_cache(run: _Run, resume_dir: Path | None) -> Path | None:
    """Where the reference models' statistics are kept for a resumed run (None: nowhere); keyed by content: the
    configuration, the data's SHA-256 and the package version (and, inside run_shadow_models, each entry by the
    exact arrays it was computed from)."""
    if resume_dir is None:
        return None
    return (
        Path(resume_dir)
        / ".cache"
        / content_key(run.config.digest(), run.provenance.data_sha256, run.game.pool_sizes[2])
    )


def _owner_beside_shadow_models(run: _Run, resume_dir: Path | None) -> None:
    """The owner's model and recourse in a Python thread while this one trains the shadow models, then the rest of
    the reference stage (the targets' statistics need the owner's targets).

    Each side has its own seeded generators (the networks' initial weights included), and each runs in one
    torch thread (:func:`~recourse_privacy.models.torch_utils.torch_threads`), so the numbers are those of the
    stages one after another. Times: each stage its own wall time in its own thread (``shadow models``: training
    ahead plus the queries after, not the wait for the owner), and ``overlapped``, the seconds the two sides
    ran side by side (their sum less the wall time until both had finished): the stages' times add up to the
    total less ``overlapped``. A failure of the owner's side is raised as it would be in order (before the
    shadow models' own), once both sides have stopped; then this thread's.
    """
    import contextvars

    from recourse_privacy.models.torch_utils import torch_threads

    clock, lock = run.clock, threading.Lock()
    main_progress = clock.progress

    def progress(stage: str, done: int, total: int) -> None:  # one caller at a time: a progress bar is not thread-safe
        with lock:
            main_progress(stage, done, total)

    owner_clock = _Clock(progress)
    clock.progress = progress
    outcome: dict[str, BaseException] = {}

    def owner_side() -> None:
        try:
            with use_device(run.config.device):
                _owner_stage(run, owner_clock)
                _recourse_stage(run, owner_clock)
        except BaseException as err:  # raised by the caller, after the join
            outcome["error"] = err

    start = time.perf_counter()
    try:
        with torch_threads(1):  # held here, first in and last out: both sides in one torch thread each
            thread = threading.Thread(target=contextvars.copy_context().run, args=(owner_side,), name="audit-owner")
            thread.start()
            try:
                progress("shadow models", 0, run.config.shadow_models)
                # the shadow stacks on every core (not one after another): three threads on two cores while the
                # owner's side runs, none idle after it
                workers = STACK_WORKERS.set(processes.usable_cpus())
                try:
                    fitted = stages.shadow_models_ahead(run.config, run.recipe.make, run.game, run.artifacts)
                finally:
                    STACK_WORKERS.reset(workers)
            except BaseException as err:
                outcome.setdefault("ahead", err)
            ahead = time.perf_counter() - start
            thread.join()
        for side in ("error", "ahead"):  # the owner's failure first, as in order
            if side in outcome:
                raise outcome[side]
        joined = clock.t = time.perf_counter()
        _reference_stage(run, resume_dir, fitted=fitted)
    finally:
        clock.progress = main_progress
    owner, before = sum(owner_clock.timing.values()), dict(clock.timing)
    after = {k: before.pop(k) for k in list(before) if k in ("online reference models", "shadow models")}
    clock.timing = {  # in the order of the stages in order: data, owner model, recourse, the references
        **before,
        **owner_clock.timing,
        **after,
        "shadow models": round(ahead + after.get("shadow models", 0.0), 3),
        "overlapped": round(max(owner + ahead - (joined - start), 0.0), 3),
    }


def _data_stage(run: _Run) -> None:
    """Load the data (or the deployed rows), check every column option, resolve the model and recourse."""
    clock, config = run.clock, run.config
    clock.begin("data")
    run.provenance = data_provenance(config)
    run.deployed_data = deployed.load_deployed(config) if config.deployed else None
    if run.deployed_data is not None:  # the fitted instance against its real training rows (audit/deployed.py)
        config, game = deployed.prepare_deployed(config, run.deployed_data)
    else:
        game = stages.prepare_game(config, stages.load_data(config))
    check_bounds_columns(config, game)
    check_public_bounds(config, game)  # a private method that would refuse the rows later, refused now
    threats.check_sensitive(config, game.dataset)
    check_group_columns(config, game.dataset)
    recipe = resolve_model(config, game)  # the user's model is checked against the data here, before training
    if recipe.capabilities is not None:
        check_fitted_recourse(config, _Capable(recipe.capabilities), recipe.label)
    run.method = run.defense.shadow_recourse(config, action_set_for(config, game), public_bounds_for(config, game))
    # a large raw frame no later stage reads goes now (Figure 2 at d = 7,000: 538 MB), the encoded pools stay
    run.config, run.game, run.recipe = config, stages.release_frame(config, game), recipe
    clock.lap("data")


def _owner_stage(run: _Run, clock: _Clock | None = None) -> None:
    """Train the owner's model on the members (or take the deployed instance) and select the targets."""
    clock = clock or run.clock
    clock.begin("owner model")
    if run.deployed_data is not None:
        run.targets = deployed.deployed_targets(run.config, run.game)  # never refitted
    else:
        run.targets = stages.train_owner(run.recipe.make, run.game, run.config.seed, run.artifacts)
    check_fitted_recourse(run.config, run.targets.model, run.recipe.label)
    _check_enough_targets(run.config, run.targets.is_member, run.game.dataset.n_rows)
    clock.lap("owner model")


def _recourse_stage(run: _Run, clock: _Clock | None = None) -> None:
    """The owner's recourse for the targets, its distances and (a user's data) the counterfactuals' table."""
    config, game, targets = run.config, run.game, run.targets
    clock = clock or run.clock
    clock.begin("recourse")
    run.fit = game.recourse_fitting(config.recourse_fit)
    run.res, run.session = stages.owner_recourse(config, run.defense, run.method, targets, *run.fit, run.artifacts)
    run.cfd = run.res.distance(config.distance)
    if config.data is not None:
        run.counterfactuals, run.note = stages.counterfactual_table(
            game.preprocessor, game.dataset, targets.rows, run.res, config.distance, targets.is_member
        )
    clock.lap("recourse")


def _reference_stage(run: _Run, resume_dir: Path | None, fitted: FittedShadows | None = None) -> None:
    """The adversary's shadow models and the online reference models, resumable under ``resume_dir``; ``fitted``:
    the shadow models trained ahead (:func:`_owner_beside_shadow_models`)."""
    config, game, clock = run.config, run.game, run.clock
    cache = _resume_cache(run, resume_dir)
    common = {"cache_dir": cache, "progress": clock.progress, "artifacts": run.artifacts, "spare_core": run.spare}
    with workers_die_with_parent():  # no shadow-model worker outlives a killed run
        run.online = stages.train_online_models(config, run.recipe.make, run.method, game, run.targets, **common)
    if run.online is not None:
        clock.lap("online reference models", report=False)
    with workers_die_with_parent():  # the online models serve as the shadow set where they can (one set, not two)
        run.shadow = stages.train_shadow_models(
            config, run.recipe.make, run.method, game, run.targets, **common, online=run.online, fitted=fitted
        )
    if run.shadow is not None and run.shadow is not run.online:
        clock.lap("shadow models", report=False)


def _attack_stage(run: _Run) -> None:
    """Every attack's scores and metrics, then the threats beyond membership (``--threats``)."""
    config, game, targets, clock = run.config, run.game, run.targets, run.clock
    # further recourse queries (RMIA's population points) go to the owner's recourse, as the targets' did
    query_cfd = stages.owner_cfd_query(lambda X: run.owner_recourse(targets.model, *run.fit, X), config.distance)
    clock.begin("attacks")
    inputs = stages.attack_inputs(config, game, targets, run.res, run.cfd, run.shadow, run.online, query_cfd)
    run.scores, run.not_run = stages.run_available_attacks(config, inputs)
    run.attacks, run.warns = stages.measure_attacks(run.scores, targets.is_member, seed=config.seed)
    clock.lap("attacks")
    if config.threats != ("membership",) or "label-only" in run.scores:
        clock.begin("threats")
        ctx = threats.ThreatContext(
            config,
            game,
            targets,
            lambda model, X: run.owner_recourse(model, *run.fit, X),
            run.scores,
            make_model=run.recipe.make,
            fit_recourse=run.owner_recourse,
        )
        run.threat_report = threats.run_threats(ctx)
        clock.lap("threats")


def _summaries(run: _Run) -> dict:
    """The recourse, DP, shadow and deployed summaries (their warnings added to ``run.warns``)."""
    config, game, targets = run.config, run.game, run.targets
    recourse = stages.summarize_recourse(run.res, targets.is_member, config.distance)
    if recourse.n_invalid:
        acts = action_set_for(config, game)
        stuck = int(acts.stuck(run.res.factuals).sum()) if acts is not None and acts.holds_gaps else 0
        flags = run.res.info.get("no_start")  # PrivRecourse: every node of the graph accepted
        no_start = int(flags.sum()) if flags is not None else 0
        run.warns.append(
            f"{recourse.n_invalid} of {recourse.n} targets got no valid recourse"
            + (f" ({stuck} miss every column that may change)" if stuck else "")
            + (
                f" ({no_start} found no node of the graph the model rejects, so Pentyala et al.'s Algorithm 2 has no "
                "start node: fewer --recourse-param n_clusters, each node averaging more rows, or more members)"
                if no_start
                else ""
            )
            + "; their distance to the last iterate is still scored"
        )
    dp = run.defense.summary(config, targets.model, run.session, run.res, targets.is_member, game.X_pool, game.y_pool)
    if dp is not None:  # the worst case over the attacks the claim covers, against the tight bound
        dp = dp_verdict(dp, run.attacks, run.defense.covered_signals)
    shadow_info = None
    if run.shadow is not None:
        shadow_info, more = stages.shadow_summary(config, run.shadow, game.n_owner_rows)
        run.warns += [] if run.deployed_data is not None else more  # the deployed draw says it in its own words
    deployed_info = None
    if run.deployed_data is not None:
        deployed_info, more = deployed.deployed_summary(config, run.deployed_data, game, targets)
        run.warns += more
    return {"recourse": recourse, "dp": dp, "shadow": shadow_info, "deployed": deployed_info}


def _cutoff(model) -> dict:
    """The model's decision cutoff for :class:`ModelSummary` (a user's estimator may state one of its own)."""
    cutoff = getattr(model, "threshold_", None)
    return {} if cutoff is None else {"decision_threshold": cutoff.value, "threshold_source": cutoff.source}


def _assemble(run: _Run) -> AuditResult:
    """The typed result of the finished game."""
    config, game, targets = run.config, run.game, run.targets
    summaries = _summaries(run)
    exposure_table, exposure_info = record_exposure(run.scores, run.attacks, targets, run.deployed_data)
    groups = group_table(config, game, targets, run.scores, run.attacks)
    warns = [*game.notes, *run.warns, *([run.note] if run.note else [])]
    n_mem, n_non, n_adv = game.pool_sizes
    return AuditResult(
        config=config,
        data=DataSummary(
            dataset=describe_data(config.data) or config.dataset,
            n_rows=game.dataset.n_rows,
            n_features=int(game.X_members.shape[1]),
            pools=PoolSizes(n_mem, n_non, n_adv),
            dropped_correlated=tuple(game.preprocessor.dropped_correlated_),
        ),
        model=ModelSummary(
            name=run.recipe.label,
            train_accuracy=accuracy(targets.model, *game.owner_training),  # as deployed: the whole sides
            test_accuracy=accuracy(targets.model, *game.owner_heldout),
            **_cutoff(targets.model),
        ),
        n_members=int(targets.is_member.sum()),
        n_nonmembers=int((targets.is_member == 0).sum()),
        attacks=run.attacks,
        attacks_not_run=run.not_run,
        warnings=tuple(warns),
        timing_seconds=run.clock.total(),
        provenance=run.provenance,
        threats=run.threat_report,
        arrays=AuditArrays(
            scores=run.scores,
            is_member=targets.is_member,
            cfd=run.cfd,
            recourse=run.res,
            pools=game.pools,
            counterfactuals=run.counterfactuals,
            exposure=exposure_table,
        ),
        exposure=exposure_info,
        groups=groups,
        **summaries,
    )
