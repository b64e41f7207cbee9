"""The recourse-based membership-inference audit (Pawelczyk et al. 2023, Definition 1), end to end.

:func:`run_audit` plays the game once by chaining the stages of :mod:`recourse_privacy.audit.stages`
and returns a typed :class:`~recourse_privacy.audit.result.AuditResult`; with ``out_dir`` it also
writes ``metrics.json``, the plots and the report there. The CLI's ``audit`` command is this
function plus a progress bar and a printed table.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from pathlib import Path

import recourse_privacy.audit.deployed as deployed
import recourse_privacy.audit.stages as stages
import recourse_privacy.audit.threats as threats
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.defenses import DEFENSES, dp_verdict
from recourse_privacy.audit.exposure import check_group_columns, group_table, record_exposure
from recourse_privacy.audit.result import AuditArrays, AuditResult
from recourse_privacy.audit.stages import Progress
from recourse_privacy.audit.summaries import DataSummary, ModelSummary, PoolSizes, Provenance
from recourse_privacy.audit.user_inputs import describe_data, object_digest
from recourse_privacy.audit.user_model import (
    action_set_for,
    check_bounds_columns,
    check_fitted_recourse,
    public_bounds_for,
    resolve_model,
)
from recourse_privacy.cache import ArtifactCache, open_cache
from recourse_privacy.data import dataset_file
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.intervals import minimum_targets_per_side
from recourse_privacy.models.base import accuracy
from recourse_privacy.models.device import use_device
from recourse_privacy.processes import workers_die_with_parent
from recourse_privacy.provenance import content_key, sha256_file
from recourse_privacy.report.outputs import write_outputs
from recourse_privacy.validation import check_output_dir

__all__ = ["data_provenance", "run_audit"]


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


def run_audit(
    config: AuditConfig | None = None,
    out_dir: str | Path | None = None,
    *,
    progress: Progress | None = None,
    cache: ArtifactCache | str | Path | bool | None = None,
    **overrides,
) -> AuditResult:
    """Play the recourse membership-inference game once and measure every attack.

    ``config`` fields may also be given as keyword ``overrides``, e.g.
    ``run_audit(model=pipeline, data=frame, target="approved", positive_label="yes", recourse="gs")``
    for your own fitted scikit-learn pipeline and DataFrame (see :class:`AuditConfig`). With
    ``out_dir`` it writes ``metrics.json``, ``roc.png``, ``cfd_histogram.png``,
    ``report.html`` and, where the points decode to the data's columns,
    ``counterfactuals.csv`` there, and keeps each finished shadow model's statistics under
    ``out_dir/.cache`` so that a killed run resumes where it stopped.

    ``cache``: the content-addressed store of trained models and recourse shared by audits and
    grid cells (:mod:`recourse_privacy.cache`): an :class:`~recourse_privacy.cache.ArtifactCache`
    (whose ``stats`` then count this audit's hits and misses), a directory, ``"off"`` or False for
    none, or None for ``$RECOURSE_PRIVACY_CACHE``, else the user cache directory. The numbers
    are the same with and without it; a model without a state codec (your own fitted model) is
    used as given, never cached.
    """
    unknown = sorted(set(overrides) - {f.name for f in fields(AuditConfig)})
    if unknown:
        raise InvalidInputError(f"unknown audit setting(s): {', '.join(unknown)}")
    config = replace(config or AuditConfig(), **overrides).validate()
    with use_device(config.device):  # every torch step of the game (models, gradient recourse) on this device
        return _play(config, out_dir, progress, cache)


def _play(
    config: AuditConfig,
    out_dir: str | Path | None,
    progress: Progress | None,
    cache: ArtifactCache | str | Path | bool | None = None,
) -> AuditResult:
    """The game of :func:`run_audit` with a validated ``config``."""
    if out_dir is not None:
        out_dir = check_output_dir(out_dir)
    clock = _Clock(progress or (lambda stage, done, total: None))
    artifacts = open_cache(cache)
    defense = DEFENSES.get(config.defense).obj

    clock.begin("data")
    provenance = data_provenance(config)
    deployed_data = deployed.load_deployed(config) if config.deployed else None
    if deployed_data is not None:  # the fitted instance against its real training rows (audit/deployed.py)
        config, game = deployed.prepare_deployed(config, deployed_data)
    else:
        game = stages.prepare_game(config, stages.load_data(config))
    check_bounds_columns(config, game)
    threats.check_sensitive(config, game.dataset)
    check_group_columns(config, game.dataset)
    recipe = resolve_model(config, game)  # the user's model is checked against the data here, before training
    if recipe.capabilities is not None:
        check_fitted_recourse(config, _Capable(recipe.capabilities), recipe.label)
    method = defense.shadow_recourse(config, action_set_for(config, game), public_bounds_for(config, game))
    clock.lap("data")

    clock.begin("owner model")
    make_model = recipe.make
    if deployed_data is not None:
        targets = deployed.deployed_targets(config, game)  # never refitted
    else:
        targets = stages.train_owner(make_model, game, config.seed, artifacts)
    check_fitted_recourse(config, targets.model, recipe.label)
    _check_enough_targets(config, targets.is_member, game.dataset.n_rows)
    clock.lap("owner model")

    clock.begin("recourse")
    fit_X, fit_y = (
        (game.X_pool, game.y_pool) if config.recourse_fit == "adversary" else (game.X_members, game.y_members)
    )
    res, session = stages.owner_recourse(config, defense, method, targets, fit_X, fit_y, artifacts)
    cfd = res.distance(config.distance)
    counterfactuals, note = (
        stages.counterfactual_table(
            game.preprocessor, game.dataset, targets.rows, res, config.distance, targets.is_member
        )
        if config.data is not None
        else (None, None)
    )
    clock.lap("recourse")

    # keyed by content: the configuration, the data's SHA-256 and the package version (and, inside
    # run_shadow_models, each entry by the exact arrays it was computed from)
    cache = (
        Path(out_dir) / ".cache" / content_key(config.digest(), provenance.data_sha256, game.pool_sizes[2])
        if out_dir is not None
        else None
    )
    with workers_die_with_parent():  # no shadow-model worker outlives a killed run
        online = stages.train_online_models(
            config, make_model, method, game, targets, cache_dir=cache, progress=clock.progress, artifacts=artifacts
        )
    if online is not None:
        clock.lap("online reference models", report=False)
    with workers_die_with_parent():  # the online models serve as the shadow set where they can (one set, not two)
        shadow = stages.train_shadow_models(
            config,
            make_model,
            method,
            game,
            targets,
            cache_dir=cache,
            progress=clock.progress,
            artifacts=artifacts,
            online=online,
        )
    if shadow is not None and shadow is not online:
        clock.lap("shadow models", report=False)

    # further recourse queries (RMIA's population points) go to the owner's recourse, as the targets' did
    query_cfd = stages.owner_cfd_query(
        lambda X: defense.owner_recourse(config, method, targets.model, fit_X, fit_y, X)[0], config.distance
    )
    clock.begin("attacks")
    scores = stages.run_attacks(
        config, stages.attack_inputs(config, game, targets, res, cfd, shadow, online, query_cfd)
    )
    attacks, warns = stages.measure_attacks(scores, targets.is_member, seed=config.seed)
    clock.lap("attacks")

    threat_report = None
    if config.threats != ("membership",) or "label-only" in scores:
        clock.begin("threats")
        ctx = threats.ThreatContext(
            config,
            game,
            targets,
            lambda model, X: defense.owner_recourse(config, method, model, fit_X, fit_y, X)[0],
            scores,
            make_model=make_model,
            fit_recourse=lambda model, X_fit, y_fit, X: defense.owner_recourse(config, method, model, X_fit, y_fit, X)[
                0
            ],
        )
        threat_report = threats.run_threats(ctx)
        clock.lap("threats")

    recourse = stages.summarize_recourse(res, targets.is_member, config.distance)
    if recourse.n_invalid:
        warns.append(
            f"{recourse.n_invalid} of {recourse.n} targets got no valid recourse; their "
            "distance to the last iterate is still scored"
        )
    dp = defense.summary(config, targets.model, session, res, targets.is_member, game.X_pool, game.y_pool)
    if dp is not None:  # the worst case over the attacks the claim covers, against the tight bound
        dp = dp_verdict(dp, attacks, defense.covered_signals)
    shadow_info = None
    if shadow is not None:
        shadow_info, more = stages.shadow_summary(config, shadow, game.n_owner_rows)
        warns += [] if deployed_data is not None else more  # the deployed draw says it in its own words
    deployed_info = None
    if deployed_data is not None:
        deployed_info, more = deployed.deployed_summary(config, deployed_data, game, targets)
        warns += more
    exposure_table, exposure_info = record_exposure(scores, attacks, targets, deployed_data)
    groups = group_table(config, game, targets, scores, attacks)
    warns = [*game.notes, *warns, *([note] if note else [])]
    n_mem, n_non, n_adv = game.pool_sizes
    result = AuditResult(
        config=config,
        data=DataSummary(
            dataset=describe_data(config.data) or config.dataset,
            n_rows=game.dataset.n_rows,
            n_features=int(game.X_members.shape[1]),
            pools=PoolSizes(n_mem, n_non, n_adv),
            dropped_correlated=tuple(game.preprocessor.dropped_correlated_),
        ),
        model=ModelSummary(
            name=recipe.label,
            train_accuracy=accuracy(targets.model, game.X_members, game.y_members),
            test_accuracy=accuracy(targets.model, game.X_nonmembers, game.y_nonmembers),
        ),
        recourse=recourse,
        n_members=int(targets.is_member.sum()),
        n_nonmembers=int((targets.is_member == 0).sum()),
        attacks=attacks,
        warnings=tuple(warns),
        dp=dp,
        shadow=shadow_info,
        timing_seconds=clock.total(),
        provenance=provenance,
        threats=threat_report,
        arrays=AuditArrays(
            scores=scores,
            is_member=targets.is_member,
            cfd=cfd,
            recourse=res,
            pools=game.pools,
            counterfactuals=counterfactuals,
            exposure=exposure_table,
        ),
        deployed=deployed_info,
        exposure=exposure_info,
        groups=groups,
    )
    if out_dir is not None:
        result = result.with_files(write_outputs(result, out_dir))
    return result
