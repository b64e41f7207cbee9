"""``recourse-privacy audit``: the recourse membership-inference game and its report.

Its options are generated from :class:`~recourse_privacy.audit.AuditConfig`'s field metadata
(:func:`recourse_privacy.cli.options.config_options`): a new setting with ``metadata=cli(help=...)``
is a new option, with no edit here. The command plays the game (:func:`~recourse_privacy.audit.play_audit`)
and writes its outputs (:func:`~recourse_privacy.report.outputs.write_outputs`).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import typer

from recourse_privacy.cli._common import (
    _command,
    _fail,
    _given_options,
    _name_list,
    _user_inputs,
    check_output_dir,
    claim_output_dir,
)
from recourse_privacy.cli.options import (
    _CACHE_DIR,
    _MODEL_FILE,
    _OVERWRITE,
    _TRUST,
    _TRUST_PICKLE,
    _out_path,
    audit_options,
    with_options,
)
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError


def _deployed_inputs(data: Path | None, members: str | None, train: Path | None, holdout: Path | None) -> dict:
    """The as-deployed options as AuditConfig fields: ``--members COL`` or ``--train-data A --holdout-data B``."""
    if (train is None) != (holdout is None):
        raise InvalidInputError(
            "--train-data and --holdout-data go together (the rows that trained the model, the rest)"
        )
    if train is None:
        return {"members": members} if members else {}
    if data is not None or members:
        raise InvalidInputError("--train-data/--holdout-data replace --data and --members: pass one or the other")
    return {"data": str(train), "holdout": str(holdout)}


#: the fields that the shared data and model inputs (``_user_inputs``) and the as-deployed ones set
_INPUT_FIELDS = ("data", "target", "positive_label", "categorical", "immutable", "increasing", "bounds", "model")
_DEPLOYED_FIELDS = ("members", "holdout")
#: the command's options that are no AuditConfig field, placed after the generated option they belong with
_AFTER = {
    "epsilon": [
        inspect.Parameter(
            "dp_audit",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                False,
                "--dp-audit",
                help="also audit the DP defense's mechanism at --epsilon, or else the private recourse method's release at its "
                "own epsilon (empirical lower bounds on trained neighbours, in the report)",
            ),
            annotation=bool,
        )
    ],
    "bounds": [
        inspect.Parameter("model_file", inspect.Parameter.KEYWORD_ONLY, default=_MODEL_FILE, annotation=Path | None),
        inspect.Parameter("trust", inspect.Parameter.KEYWORD_ONLY, default=_TRUST, annotation=list[str] | None),
        inspect.Parameter("trust_pickle", inspect.Parameter.KEYWORD_ONLY, default=_TRUST_PICKLE, annotation=bool),
    ],
    "members": [
        inspect.Parameter(
            "train_data",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None, "--train-data", help="as-deployed audit: the rows that trained --model-file (with --holdout-data)"
            ),
            annotation=Path | None,
        ),
        inspect.Parameter(
            "holdout_data",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None, "--holdout-data", help="as-deployed audit: rows --model-file never trained on (with --train-data)"
            ),
            annotation=Path | None,
        ),
    ],
}
_LAST = [
    inspect.Parameter(
        "out",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(Path("audit-results"), help="output directory", parser=_out_path),
        annotation=Path,
    ),
    inspect.Parameter("overwrite", inspect.Parameter.KEYWORD_ONLY, default=_OVERWRITE, annotation=bool),
    inspect.Parameter("cache_dir", inspect.Parameter.KEYWORD_ONLY, default=_CACHE_DIR, annotation=str | None),
]


def _parameters() -> list[inspect.Parameter]:
    """The audit's options: every AuditConfig field with CLI metadata, in field order, and the command's own."""
    out = []
    for option in audit_options().values():
        out.append(option.parameter())
        out += _AFTER.get(option.field, [])
    return out + _LAST


def _config(options: dict):
    """The validated AuditConfig of the command's ``options`` (one error naming the option, before any work)."""
    from recourse_privacy.audit import AuditConfig

    values = {
        **_user_inputs(options),
        **_deployed_inputs(options["data"], options["members"], options["train_data"], options["holdout_data"]),
    }
    _check_threat_options(options)
    _check_release_options(options)
    for name, option in audit_options().items():
        if name not in _INPUT_FIELDS + _DEPLOYED_FIELDS:
            values[name] = option.read(options[option.param])
    return AuditConfig(**values).validate()


def audit(**options) -> None:
    """Play the recourse membership-inference game and report every attack."""
    from rich.console import Console

    from recourse_privacy.cache import open_cache
    from recourse_privacy.dp_audit.defense_audit import check_auditable

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    out = options["out"]
    try:
        config = _config(options)
        mechanism = (
            check_auditable(
                config.defense,
                config.model,
                config.epsilon,
                config.model_params,
                recourse=config.recourse,
                recourse_params=config.recourse_params,
            )
            if options["dp_audit"]
            else None
        )
        artifacts = open_cache(options["cache_dir"])
        claim = claim_output_dir(out, "audit", options["overwrite"])
    except RecoursePrivacyError as err:
        _fail(err)
    result, evidence = _play(console, config, out, artifacts, claim, mechanism)
    if evidence is not None:
        _print_dp_audit(console, evidence)
    _print_summary(console, result)
    _print_exposure(console, result)
    if artifacts is not None:
        artifacts.write_last_run(f"audit --out {out}", artifacts.stats_dict())
        console.print(
            f"artifact cache {artifacts.root}: {_hit_text(artifacts.stats_dict())}", style="dim", highlight=False
        )


audit = _command()(with_options(audit, _parameters()))


def _play(console, config, out: Path, artifacts, claim, mechanism: str | None = None):
    """Play the audit under progress bars (one per stage), then (``--dp-audit``: ``mechanism``) audit the
    defense's mechanism; the result and the DP-audit evidence (or None), the output directory finished."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from recourse_privacy.audit import play_audit
    from recourse_privacy.report.outputs import write_outputs

    with Progress(
        TextColumn("{task.description:<14}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            result = play_audit(config, resume_dir=out, progress=progress, cache=artifacts or "off")
            evidence = None
            if mechanism is not None:
                evidence = _audit_claim(config)
            files = write_outputs(result, check_output_dir(out), dp_audit=evidence)  # the command writes, not the game
            result = result.with_files(files)
            claim.finish()
        except RecoursePrivacyError as err:
            bar.stop()
            _fail(err)
    return result, evidence


def _print_dp_audit(console, evidence) -> None:
    """``--dp-audit``'s lines: the audited mechanism's bound and the verdict, its positive control, then each part."""
    from recourse_privacy.report.dp_audit import number_text

    for e in (evidence, *evidence.parts):
        best = e.strongest
        what = f"empirical audit of {e.mechanism}" if e is evidence else f"  also audited, {e.mechanism}"
        verdict = evidence.verdict if e is evidence else f"its own test: {e.verdict}"
        console.print(
            f"{what} at claim {e.claimed_epsilon:g}: epsilon >= {number_text(best.epsilon_lower_bound)} "
            f"({best.name}): {verdict}",
            highlight=False,
        )
        c = e.control
        if c is not None:
            console.print(
                f"{'' if e is evidence else '  '}positive control {c.mechanism} ({c.broken}): epsilon >= "
                f"{number_text(c.epsilon_lower_bound)} at {c.n_trials} runs per neighbour: "
                f"{'caught' if c.caught else 'NOT caught: the test has no power here'}",
                highlight=False,
            )


def _audit_claim(config):
    """``--dp-audit``: the DP defense's mechanism at the audit's epsilon, or else the private recourse method's release
    at its own (the choice :func:`~recourse_privacy.dp_audit.defense_audit.check_auditable` made)."""
    from recourse_privacy.dp_audit.defense_audit import DEFENSE_AUDITS, audit_defense, audit_recourse

    if config.defense in DEFENSE_AUDITS:
        return audit_defense(
            config.defense, config.model, config.epsilon, seed=config.seed, model_params=config.model_params
        )
    return audit_recourse(config.recourse, config.recourse_params, seed=config.seed)


def _check_release_options(options: dict) -> None:
    """--release-size without the release threat is an error."""
    names = _name_list(options["threats"], "--threats")
    if "release_size" in _given_options() and not {"release", "all"} & set(names):
        raise InvalidInputError(
            "--release-size applies to the release threat: add --threats release (or all), or drop it"
        )


def _check_threat_options(options: dict) -> None:
    """An extraction option (--query-budgets, --extraction-repeats) without its threat is an error."""
    names = _name_list(options["threats"], "--threats")
    extracting = bool({"extraction", "attribute", "all"} & set(names))
    for option in ("query_budgets", "extraction_repeats"):
        if option in _given_options() and not extracting:
            raise InvalidInputError(
                f"--{option.replace('_', '-')} applies to the extraction and attribute threats: add --threats "
                "extraction (or all), or drop it"
            )


def _print_threats(console, report) -> None:
    """The extraction table, the attribute result and what recourse adds over labels (audit --threats)."""
    from rich.table import Table

    if report is None:
        return
    ex = report.extraction
    if ex is not None:
        table = Table(title="Model extraction: fidelity on held-out applicants (95% interval over repeats)")
        for col in ("queries", *dict.fromkeys(p.attack for p in ex.points)):
            table.add_column(col, justify="right")
        for q in ex.budgets:
            cells = [
                f"{p.fidelity:.3f} [{p.fidelity_low:.3f},\u00a0{p.fidelity_high:.3f}]"
                for p in ex.points
                if p.queries == q
            ]
            table.add_row(str(q), *cells)
        console.print(table)
        console.print(ex.sentence(), highlight=False, markup=False)
    if report.attribute is not None:
        console.print(report.attribute.sentence(), highlight=False, markup=False)
    over = report.recourse_over_labels()
    if over:
        console.print(over, highlight=False, markup=False)
    if report.release is not None:
        from recourse_privacy.report.release import release_table

        console.print(release_table(report.release))
        if report.release.warning():
            console.print(f"warning: {report.release.warning()}", style="bold yellow", highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", style="dim", highlight=False, markup=False)


def _hit_text(stats: dict) -> str:
    """``owner model 1/1, shadow models 10/10 ...``: hits / lookups per role of the artifact cache."""
    parts = [f"{role} {s['hits']}/{s['hits'] + s['misses']}" for role, s in stats.items()]
    return "hits/lookups " + (", ".join(parts) if parts else "none")


def _print_exposure(console, result) -> None:
    """Which question the audit answered, the members identified at low FPR, and the flagged groups."""
    console.print(f"question answered: [bold]{result.question}[/]", highlight=False)
    ex = result.exposure
    if ex is not None:
        found = [i for i in ex.identified if i.attack == ex.ranking_attack]
        counts = ", ".join(f"{i.n_identified} of {i.n_members} at FPR {i.fpr:g}" for i in found)
        rows = ", ".join(str(r.row) for r in ex.most_exposed)
        console.print(f"{ex.ranking_attack} identifies {counts}; most exposed members (rows): {rows}", highlight=False)
    flagged = [g for g in result.groups if g.flagged]
    for g in flagged:
        console.print(
            f"group {g.column}={g.value}: {g.attack} AUC {g.auc:.3f} above the rest's {g.auc_rest:.3f} "
            f"(Holm p {g.p_holm:.3g})",
            style="red",
            highlight=False,
        )


def _print_summary(console, result) -> None:
    from rich.table import Table

    cfg, model, rec = result.config, result.model, result.recourse
    console.print(
        f"\n[bold]{result.data.dataset}[/] | model {cfg.model_label} "
        f"(train acc {model.train_accuracy:.3f}, test acc {model.test_accuracy:.3f}"
        f"{f', {model.cutoff_line}' if model.cutoff_line else ''}) | "
        f"recourse {cfg.recourse} (validity {rec.validity:.3f}, "
        f"mean L1 {rec.mean_l1:.3g}, mean L2 {rec.mean_l2:.3g}) | "
        f"targets: {result.n_members} members, {result.n_nonmembers} non-members",
        highlight=False,
    )
    from recourse_privacy.report.verdict import verdict_of

    def ci(value: float, pair, spec: str) -> str:  # "0.62 [0.58, 0.66]"; the value alone without an interval
        lo, hi = pair if pair is not None else (float("nan"), float("nan"))
        return f"{value:{spec}}" + (f" [{lo:{spec}},\u00a0{hi:{spec}}]" if lo == lo and hi == hi else "")

    table = Table(title="Membership inference from recourse (95% intervals; TPR at FPR 0.1 / 0.01 / 0.001)")
    for col in ("attack", "AUC", "BA", "TPR@0.1", "TPR@0.01", "TPR@0.001", "direction"):
        left = col in ("attack", "direction")  # on a narrow terminal an interval folds below its value
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "attack", min_width=5)
    from recourse_privacy.audit.stages import attack_signal

    groups = {"score": "scores", "distance": "recourse", "none": "controls"}
    order = [*groups, *sorted({a.signal for a in result.attacks.values()} - set(groups))]
    for signal in order:  # one block per signal: what the scores leak, what recourse leaks, the controls
        block = [(n, a) for n, a in result.attacks.items() if a.signal == signal]
        missing = [n for n in result.attacks_not_run if attack_signal(n) == signal]  # asked for, could not run
        if not block and not missing:
            continue
        table.add_row(f"[dim]{groups.get(signal, signal or 'unknown')}[/]")
        for name, a in block:
            cells = [
                ci(a.tpr_at_fpr[k], a.tpr_at_fpr_ci.get(k) if k == "0.01" else None, ".3f")
                + ("" if a.tpr_at_fpr_reliable[k] else "*")
                for k in ("0.1", "0.01", "0.001")
            ]
            fallback = " (paper's; shadow game null)" if a.conventions.get("direction_fallback") else ""
            table.add_row(
                f"  {name}", ci(a.auc, a.auc_ci, ".2f"), f"{a.balanced_accuracy:.3f}", *cells, a.direction + fallback
            )
        for name in missing:
            table.add_row(f"  {name}", "not run", "", "", "", "", "(see below)")
        table.add_section()
    console.print(table)
    verdict = verdict_of(result)
    console.print(f"[bold]{verdict.headline}[/]", highlight=False)
    for finding in (verdict.scores, verdict.recourse, verdict.beyond):
        if finding is not None:
            console.print(f"  {finding.text}", highlight=False, markup=False)
    if verdict.not_run:
        console.print(f"  {verdict.not_run}", highlight=False, markup=False, style="yellow")
    if verdict.detectable is not None:
        console.print(f"  {verdict.detectable.text}", highlight=False, markup=False, style="dim")
    if verdict.family_wise is not None:
        console.print(f"  {verdict.family_wise.text}", highlight=False, markup=False, style="dim")
    _print_dp(console, result.dp, model.name)
    _print_threats(console, result.threats)
    if any(not r for a in result.attacks.values() for r in a.tpr_at_fpr_reliable.values()):
        console.print("* fewer non-members than 1/FPR: that TPR cannot be resolved at this FPR", style="dim")
    for w in result.warnings:
        console.print(f"warning: {w}", style="yellow", highlight=False)
    console.print(
        f"wrote {', '.join(Path(p).name for p in result.files.values())} to "
        f"{Path(result.files['metrics']).parent} in {result.timing_seconds['total']:.1f} s",
        highlight=False,
    )


def _print_dp(console, dp, model_name: str) -> None:
    """A DP defense's epsilons, every bound it implies, its verdict and (Laplace Recourse) the direction attack."""
    from recourse_privacy.report.dp_verdict import dp_bound_rows

    if dp is None:
        return
    console.print(
        f"DP defense {dp.defense} (model {model_name}): epsilon per query "
        f"{dp.epsilon_per_query:.4g}, total {dp.epsilon_total:.4g}; bounds on balanced accuracy:",
        highlight=False,
    )
    for bound in dp_bound_rows(dp):
        console.print(f"  {bound.text}", highlight=False, markup=False)
    if dp.verdict is not None:
        console.print(f"verdict: {dp.verdict.text}", style="red" if dp.verdict.exceeds else None, highlight=False)
    if dp.direction_attack is not None:
        da = dp.direction_attack
        console.print(
            f"warning: LR's counterfactuals reveal w's direction, which is not private: ranking the "
            f"targets along it gives AUC {da.auc:.4f}, BA {da.balanced_accuracy:.4f} (the "
            "baseline CFD attack, at any epsilon; docs/dp-defenses.md)",
            style="yellow",
            highlight=False,
        )
