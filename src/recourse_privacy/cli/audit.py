"""``recourse-privacy audit``: the recourse membership-inference game and its report."""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy.cli._common import (
    _capped,
    _columns,
    _command,
    _fail,
    _given_options,
    _name_list,
    _names,
    _numbers,
    _parse_params,
    _user_inputs,
    claim_output_dir,
)
from recourse_privacy.cli.options import (
    _BOUNDS,
    _CACHE_DIR,
    _CATEGORICAL,
    _DATA,
    _DEVICE,
    _IMMUTABLE,
    _INCREASING,
    _MODEL_FILE,
    _OVERWRITE,
    _POSITIVE_LABEL,
    _SEED,
    _TARGET,
    _TRUST,
    _TRUST_PICKLE,
    _out_path,
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


@_command()
def audit(
    dataset: str = typer.Option("synthetic", help=f"a registered dataset: {_names('dataset')}"),
    data: Path | None = _DATA,
    target: str | None = _TARGET,
    positive_label: str | None = _POSITIVE_LABEL,
    categorical: list[str] | None = _CATEGORICAL,
    immutable: list[str] | None = _IMMUTABLE,
    increasing: list[str] | None = _INCREASING,
    bounds: list[str] | None = _BOUNDS,
    model_file: Path | None = _MODEL_FILE,
    trust: list[str] | None = _TRUST,
    trust_pickle: bool = _TRUST_PICKLE,
    members: str | None = typer.Option(
        None,
        "--members",
        help="as-deployed audit: the column of --data saying per row (1/0, true/false) whether it trained the "
        "--model-file instance. Without it the audit answers 'this recipe, re-trained' (a fresh clone trained on "
        "members it draws); with it, or --train-data/--holdout-data, 'this deployed model': the fitted instance as "
        "loaded, never refitted, against its real training rows",
    ),
    train_data: Path | None = typer.Option(
        None, "--train-data", help="as-deployed audit: the rows that trained --model-file (with --holdout-data)"
    ),
    holdout_data: Path | None = typer.Option(
        None, "--holdout-data", help="as-deployed audit: rows --model-file never trained on (with --train-data)"
    ),
    group: list[str] | None = typer.Option(
        None, "--group", help="a column whose values' exposure is measured apart (repeatable; groups.csv)"
    ),
    data_dir: Path | None = typer.Option(
        None, help="directory of the real datasets (else $RECOURSE_PRIVACY_DATA, else a download cache)"
    ),
    n_features: int = typer.Option(1000, help="number of features of the synthetic data"),
    model: str = typer.Option("logistic", help=f"a registered model: {_names('model')}"),
    recourse: str = typer.Option(
        "linear",
        help=f"a registered recourse method: {_names('recourse')} "
        "(`recourse-privacy list` says which model each needs)",
    ),
    attacks: str = typer.Option(
        "cfd,cfd-lrt,loss,loss-lrt,random", help=f"comma-separated registered attacks: {_names('attack')}"
    ),
    shadow_models: int = typer.Option(10, help="shadow models of the adversary (LRT attacks)"),
    shadow_fraction: float = typer.Option(0.5, help="share of the adversary's pool each shadow model trains on"),
    n_members: int = typer.Option(
        2000, help="owner's training set size; the non-member and adversary pools default to the same size"
    ),
    n_nonmembers: int | None = typer.Option(None, help="non-member pool size (default: --n-members)"),
    n_adversary: int | None = typer.Option(
        None, help="adversary's pool size (default: twice --n-members, or every row left)"
    ),
    distance: str = typer.Option("l1", help="cost c(x, x') the attacks read: l1 (Pawelczyk et al. 2023) or l2"),
    variance: str = typer.Option("per-example", help="LRT variance: per-example or global"),
    center: str = typer.Option("mean", help="LRT center: mean (MLE, Algorithm 1) or median"),
    cdf: str = typer.Option("normal", help="LRT score: normal or t (Student-t) CDF"),
    rmia_a: float | None = typer.Option(
        None,
        help="RMIA's offline scaling a in [0, 1] (Zarifzadeh et al. 2024; default: chosen on the adversary's "
        "shadow game, never on the targets)",
    ),
    rmia_gamma: float = typer.Option(1.0, help="RMIA's likelihood-ratio threshold gamma against population points"),
    rmia_population: int = typer.Option(
        500, help="RMIA's population points z, drawn from the adversary's pool (their recourse queries are counted)"
    ),
    threats: str = typer.Option(
        "membership",
        help=f"comma-separated threats to audit, or all: {_names('threat')} (membership, the game, is always played)",
    ),
    query_budgets: str = typer.Option(
        "20,50,100,200,400,1000",
        help="extraction: the adversary's numbers of recourse queries (each a decision and a counterfactual); "
        f"every registered surrogate is trained on them: {_names('surrogate')}",
    ),
    extraction_repeats: int = typer.Option(5, help="extraction: repeats with fresh queries per budget (intervals)"),
    sensitive: str | None = typer.Option(
        None, help="attribute threat: the column the adversary infers (release: Anonymeter's inference risk)"
    ),
    release_size: int = typer.Option(
        1000,
        help="release threat: rejected applicants from outside the game whose counterfactuals the owner publishes; "
        f"the released-set attacks: {_names('release-attack')}",
    ),
    release_with_factuals: bool = typer.Option(
        False, help="release threat: publish the (factual, counterfactual) pairs, not the counterfactuals alone"
    ),
    actionable: bool = typer.Option(False, help="apply the dataset's actionability constraints to recourse"),
    normalize_rows: bool = typer.Option(False, help="scale every row to unit L2 norm (Huang et al. 2023)"),
    data_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the data (synthetic: class_sep, flip_y)"),
    model_param: list[str] | None = typer.Option(None, help="KEY=VALUE for the model (epochs, batch_size, lr, C, ...)"),
    recourse_param: list[str] | None = typer.Option(
        None, help="KEY=VALUE for the recourse method (lam, lr, max_iter, ...)"
    ),
    defense: str = typer.Option(
        "none",
        help=f"a registered defense: {_names('defense')} (dpm: the model trained "
        "with DP, logistic -> diffprivlib, needs --normalize-rows; mlp* -> Opacus DP-SGD; "
        "laplace: plain Laplace Recourse, not DP; dpm-laplace: LR over a DP model)",
    ),
    recourse_fit: str = typer.Option(
        "members",
        help="data a fitted recourse method (face, cchvae, revise, dice, "
        "gs) learns from: members, or adversary (the adversary's pool: needed under dpm)",
    ),
    epsilon: float | None = typer.Option(None, help="DP epsilon: the model's (dpm) or per recourse query (laplace)"),
    dp_audit: bool = typer.Option(
        False,
        "--dp-audit",
        help="also audit the defense's mechanism at --epsilon (empirical lower bounds, in the report)",
    ),
    seed: int = _SEED,
    n_jobs: int = typer.Option(1, help="parallel shadow-model trainings (joblib processes)"),
    device: str = _DEVICE,
    out: Path = typer.Option(Path("audit-results"), help="output directory", parser=_out_path),
    overwrite: bool = _OVERWRITE,
    cache_dir: str | None = _CACHE_DIR,
) -> None:
    """Play the recourse membership-inference game and report every attack."""
    from rich.console import Console

    from recourse_privacy.audit import AuditConfig
    from recourse_privacy.cache import open_cache
    from recourse_privacy.dp_audit.defense_audit import audit_defense, check_auditable
    from recourse_privacy.report.dp_audit import report_figures
    from recourse_privacy.report.html import write_html_report

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 110))
    try:
        config = AuditConfig(
            dataset=dataset,
            **{**_user_inputs(locals()), **_deployed_inputs(data, members, train_data, holdout_data)},
            groups=_columns(group, "--group"),
            data_dir=str(data_dir) if data_dir else None,
            n_features=n_features,
            recourse=recourse,
            attacks=_name_list(attacks, "--attacks"),
            shadow_models=shadow_models,
            shadow_fraction=shadow_fraction,
            n_members=n_members,
            n_nonmembers=n_nonmembers,
            n_adversary=n_adversary,
            distance=distance,
            variance=variance,
            center=center,
            cdf=cdf,
            rmia_a=rmia_a,
            rmia_gamma=rmia_gamma,
            rmia_population=rmia_population,
            **_threat_options(threats, query_budgets, extraction_repeats, sensitive),
            **_release_options(threats, release_size, release_with_factuals),
            actionable=actionable,
            normalize_rows=normalize_rows,
            data_params=_parse_params(data_param, "--data-param"),
            model_params=_parse_params(model_param, "--model-param"),
            recourse_params=_parse_params(recourse_param, "--recourse-param"),
            seed=seed,
            n_jobs=_capped(n_jobs, "--n-jobs"),
            device=device,
            defense=defense,
            epsilon=epsilon,
            recourse_fit=recourse_fit,
        ).validate()
        mechanism = check_auditable(defense, config.model, config.epsilon) if dp_audit else None
        artifacts = open_cache(cache_dir)
        claim = claim_output_dir(out, "audit", overwrite)
    except RecoursePrivacyError as err:
        _fail(err)
    result = _play(console, config, out, artifacts, claim)
    if mechanism is not None:
        evidence = audit_defense(defense, config.model, config.epsilon, seed=seed)
        report = Path(result.files["report"])  # written again, with the empirical bound beside the claim
        write_html_report(result, report.parent, images=report_figures(result), filename=report.name, dp_audit=evidence)
        best = evidence.strongest
        console.print(
            f"empirical audit of {mechanism} at claim {evidence.claimed_epsilon:g}: epsilon >= "
            f"{best.epsilon_lower_bound:.3f} ({best.name}): {evidence.verdict}",
            highlight=False,
        )
    _print_summary(console, result)
    _print_exposure(console, result)
    if artifacts is not None:
        artifacts.write_last_run(f"audit --out {out}", artifacts.stats_dict())
        console.print(
            f"artifact cache {artifacts.root}: {_hit_text(artifacts.stats_dict())}", style="dim", highlight=False
        )


def _play(console, config, out: Path, artifacts, claim):
    """Play the audit under progress bars (one per stage); its result, the output directory finished."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from recourse_privacy.audit import run_audit

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
            result = run_audit(config, out, progress=progress, cache=artifacts or "off")
            claim.finish()
        except RecoursePrivacyError as err:
            bar.stop()
            _fail(err)
    return result


def _release_options(threats: str, release_size: int, release_with_factuals: bool) -> dict:
    """The AuditConfig fields of the release threat; --release-size without the threat is an error."""
    names = _name_list(threats, "--threats")
    if "release_size" in _given_options() and not {"release", "all"} & set(names):
        raise InvalidInputError(
            "--release-size applies to the release threat: add --threats release (or all), or drop it"
        )
    return {"release_size": release_size, "release_with_factuals": release_with_factuals}


def _threat_options(threats: str, query_budgets: str, extraction_repeats: int, sensitive: str | None) -> dict:
    """The AuditConfig fields of --threats and its options; an extraction option without the threat is an error."""
    names = _name_list(threats, "--threats")
    extracting = bool({"extraction", "attribute", "all"} & set(names))
    for option in ("query_budgets", "extraction_repeats"):
        if option in _given_options() and not extracting:
            raise InvalidInputError(
                f"--{option.replace('_', '-')} applies to the extraction and attribute threats: add --threats "
                "extraction (or all), or drop it"
            )
    return {
        "threats": names,
        "query_budgets": tuple(_numbers(query_budgets, int, "--query-budgets")),
        "extraction_repeats": extraction_repeats,
        "sensitive": sensitive,
    }


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
        f"(train acc {model.train_accuracy:.3f}, test acc {model.test_accuracy:.3f}) | "
        f"recourse {cfg.recourse} (validity {rec.validity:.3f}, "
        f"mean L1 {rec.mean_l1:.3g}, mean L2 {rec.mean_l2:.3g}) | "
        f"targets: {result.n_members} members, {result.n_nonmembers} non-members",
        highlight=False,
    )
    from recourse_privacy.report.dp_verdict import dp_bound_rows
    from recourse_privacy.report.verdict import verdict_of

    def ci(value: float, pair, spec: str) -> str:  # "0.62 [0.58, 0.66]"; the value alone without an interval
        lo, hi = pair if pair is not None else (float("nan"), float("nan"))
        return f"{value:{spec}}" + (f" [{lo:{spec}},\u00a0{hi:{spec}}]" if lo == lo and hi == hi else "")

    table = Table(title="Membership inference from recourse (95% intervals; TPR at FPR 0.1 / 0.01 / 0.001)")
    for col in ("attack", "AUC", "BA", "TPR@0.1", "TPR@0.01", "TPR@0.001", "direction"):
        left = col in ("attack", "direction")  # on a narrow terminal an interval folds below its value
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "attack", min_width=5)
    groups = {"score": "scores", "distance": "recourse", "none": "controls"}
    order = [*groups, *sorted({a.signal for a in result.attacks.values()} - set(groups))]
    for signal in order:  # one block per signal: what the scores leak, what recourse leaks, the controls
        block = [(n, a) for n, a in result.attacks.items() if a.signal == signal]
        if not block:
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
        table.add_section()
    console.print(table)
    verdict = verdict_of(result)
    console.print(f"[bold]{verdict.headline}[/]", highlight=False)
    for finding in (verdict.scores, verdict.recourse, verdict.beyond):
        if finding is not None:
            console.print(f"  {finding.text}", highlight=False, markup=False)
    if verdict.detectable is not None:
        console.print(f"  {verdict.detectable.text}", highlight=False, markup=False, style="dim")
    dp = result.dp
    if dp is not None:
        console.print(
            f"DP defense {dp.defense} (model {model.name}): epsilon per query "
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
    _print_threats(console, getattr(result, "threats", None))
    if any(not r for a in result.attacks.values() for r in a.tpr_at_fpr_reliable.values()):
        console.print("* fewer non-members than 1/FPR: that TPR cannot be resolved at this FPR", style="dim")
    for w in result.warnings:
        console.print(f"warning: {w}", style="yellow", highlight=False)
    console.print(
        f"wrote {', '.join(Path(p).name for p in result.files.values())} to "
        f"{Path(result.files['metrics']).parent} in {result.timing_seconds['total']:.1f} s",
        highlight=False,
    )
