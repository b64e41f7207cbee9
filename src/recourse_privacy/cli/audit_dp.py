"""``recourse-privacy audit-dp``: empirical lower bounds on a DP mechanism's epsilon."""

from __future__ import annotations

from pathlib import Path

import typer

from recourse_privacy import strict_json
from recourse_privacy.cli._common import (
    _command,
    _fail,
    _names,
    _parse_params,
)
from recourse_privacy.cli.options import (
    _out_path,
)
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError


@_command("audit-dp")
def audit_dp_command(
    mechanism: str = typer.Option(
        "trained-lr",
        help=f"a registered DP-audit mechanism: {_names('mechanism')} (trained-*: trained neighbours, the whole "
        "release; the others: scalar audits; `recourse-privacy list mechanism` describes each)",
    ),
    epsilon: float = typer.Option(1.0, help="the epsilon the mechanism claims"),
    trials: int = typer.Option(
        20000,
        help="runs per neighbouring input (half choose the test, half measure it); dpm-logistic trains a model per run, about 10 ms each",
    ),
    seed: int = typer.Option(0, help="seed of every run"),
    alpha: float = typer.Option(0.05, help="1 - confidence of the Clopper-Pearson bounds"),
    param: list[str] | None = typer.Option(
        None,
        help="KEY=VALUE for the experiment (laplace: release=probability; "
        "dpm-logistic: n_rows, n_features, statistic=cfd, C, ...)",
    ),
    one_run: int = typer.Option(
        0,
        help="trained-* only: also run the one-run audit of Steinke, Nasr and Jagielski "
        "(2023) with this many canaries (0: no); it takes n_rows, data_norm and canary_norm from --param, its "
        "canaries are one coordinate each (n_features and data_seed apply to the many-run audit only)",
    ),
    out: Path | None = typer.Option(
        None, help="also write the audit as JSON to this file (an existing one only with --overwrite)", parser=_out_path
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace the file --out where it exists"),
    scores: Path | None = typer.Option(
        None,
        help="audit your own training run instead: a CSV with columns score (higher = more likely a member) and "
        "member (1 = the canary was included, 0 = not); four bounds (clopper_pearson, one_run, one_run_fdp, gdp)",
    ),
    guesses: int | None = typer.Option(
        None,
        help="--scores: the one-run bounds guess the K highest scores in and the K lowest out "
        "(default: the best K of floor(m/2), floor(m/4), ..., 1, Bonferroni-corrected)",
    ),
    delta: float | None = typer.Option(None, help="--scores: the delta of the (eps, delta) bounds (default 1e-5)"),
) -> None:
    """Empirical epsilon audit: a lower bound on a DP mechanism's epsilon (Jagielski et al. 2020).

    Exit code 0 whatever the verdict (it is a measurement); 2 on bad input.
    """
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 150))
    if out is not None:
        _check_json_out(out, overwrite)
    if scores is not None:
        if one_run or param:
            _fail(InvalidInputError("--one-run and --param apply to the built-in mechanisms, not to --scores"))
        _audit_dp_scores(scores, guesses, 1e-5 if delta is None else delta, alpha, seed, out, console)
        return
    if guesses is not None or delta is not None:
        _fail(InvalidInputError("--guesses and --delta apply to --scores (a mechanism's delta is part of its claim)"))
    _check_numbers(epsilon, alpha, trials, seed, one_run)
    result, one = _run_audit_dp(mechanism, epsilon, trials, seed, alpha, param, one_run)
    one_fdp = _print_audit_dp(console, mechanism, alpha, result, one)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            strict_json.dumps(
                {
                    "command": "audit-dp",
                    "params": _parse_params(param, "--param"),
                    "seed": seed,
                    **result.to_dict(),
                    "one_run": one.to_dict() if one else None,
                    "one_run_fdp_mu": one_fdp,
                },
                indent=2,
            )
        )
        console.print(f"wrote {out}", highlight=False)


def _check_numbers(epsilon: float, alpha: float, trials: int, seed: int, one_run: int) -> None:
    """audit-dp's numeric options, checked before any work."""
    from recourse_privacy.validation import check_interval, check_positive_int, check_seed

    check_interval(epsilon, "--epsilon", 0, 1e4, closed="right")  # beyond, every DP claim is vacuous
    check_interval(alpha, "--alpha", 0, 1)
    check_positive_int(trials, "--trials", minimum=4)
    check_seed(seed, "--seed")
    if one_run != 0 and not 4 <= one_run <= 10**6:
        raise InvalidInputError(f"--one-run must be 0 (none) or a number of canaries in [4, 1_000_000]; got {one_run}")


def _check_json_out(out: Path, overwrite: bool) -> None:
    """audit-dp --out: a file (not a directory or a device), an existing one only with --overwrite."""
    if out.is_dir() or str(out) in ("/dev/null",) or (out.exists() and not out.is_file()):
        _fail(
            InvalidInputError(
                f"--out {str(out)!r} must be a file to write the audit's JSON into, not a directory or a device"
            )
        )
    from recourse_privacy.output_dir import check_output_file

    check_output_file(out, overwrite=overwrite)


#: the --param keys the one-run audit shares with the many-run one (its own canaries are one coordinate each)
ONE_RUN_SHARED = ("n_rows", "data_norm", "canary_norm")


def _run_audit_dp(mechanism: str, epsilon: float, trials: int, seed: int, alpha: float, param, one_run: int):
    """The distinguishing audit of ``mechanism`` and, with --one-run, the one-run audit: (result, one-run or None)."""
    from rich.console import Console

    from recourse_privacy.dp_audit import make_experiment

    try:
        params = _parse_params(param, "--param")
        experiment = make_experiment(mechanism, epsilon, **params)
        from recourse_privacy.dp_audit import RELEASES

        if one_run and mechanism.removeprefix("trained-") not in RELEASES:
            raise InvalidInputError(
                f"--one-run needs one of {', '.join('trained-' + r for r in RELEASES)} (the releases with a one-run "
                f"audit); {mechanism} has none"
            )
        with Console(stderr=True).status(f"auditing {mechanism}: {trials} runs on each of two neighbours"):
            result = experiment.audit(n_trials=trials, alpha=alpha, random_state=seed)
            one = None
            if one_run:
                from recourse_privacy.dp_audit import one_run_audit

                # the neighbours' rows, norm bound and canary as the many-run audit has them (its canaries are its own:
                # one coordinate each, so n_features and data_seed do not apply)
                shared = {k: params[k] for k in ONE_RUN_SHARED if k in params}
                left = sorted(set(params) & {"n_features", "data_seed"})
                if left:
                    Console(stderr=True).print(
                        f"one-run audit: {', '.join(left)} apply to the many-run audit only (the one-run "
                        "audit's canaries are one coordinate each)",
                        highlight=False,
                    )
                one = one_run_audit(
                    mechanism.removeprefix("trained-"), epsilon, n_canaries=one_run, beta=alpha, random_state=seed,
                    **shared,
                )  # fmt: skip
    except RecoursePrivacyError as err:
        _fail(err)
    return result, one


def _print_audit_dp(console, mechanism: str, alpha: float, result, one) -> float | None:
    """The audit's table and sentences; returns the one-run f-DP mu (None without --one-run)."""
    from rich.table import Table

    one_fdp = None
    table = Table(title=f"Empirical epsilon audit ({1 - alpha:.0%} confidence lower bound)")
    for col in ("mechanism", "claimed eps", "audited eps >=", "FPR", "FNR", "trials", "verdict"):
        table.add_column(col, justify="left" if col in ("mechanism", "verdict") else "right", no_wrap=True)
    table.add_row(
        mechanism,
        f"{result.claimed_epsilon:.4g}",
        f"{result.epsilon_lower_bound:.4f}",
        f"{result.fpr:.5f} [{result.fpr_ci[0]:.5f}, {result.fpr_ci[1]:.5f}]",
        f"{result.fnr:.5f} [{result.fnr_ci[0]:.5f}, {result.fnr_ci[1]:.5f}]",
        f"{result.n_trials}",
        f"[bold red]{result.verdict}[/]" if result.violates_claim else result.verdict,
    )
    console.print(table)
    console.print(
        f"neighbours: {result.neighbours}\ntest: {result.test} (chosen on {result.n_selection} runs per "
        f"neighbour, measured on {result.n_measurement} others); {result.seconds:.1f} s",
        highlight=False,
    )
    if one is not None:
        console.print(
            f"one-run audit (Steinke, Nasr and Jagielski 2023): {one.n_canaries} canaries "
            f"({one.n_included} included), {one.n_correct} of {one.n_guesses} guesses correct: epsilon >= "
            f"{one.epsilon_lower_bound:.4f} at confidence {1 - one.beta:g}, one training run: {one.verdict}",
            highlight=False,
        )
        from recourse_privacy.dp_audit.fdp import one_run_fdp_mu

        one_fdp = one_run_fdp_mu(one.n_canaries, one.n_guesses, one.n_correct, alpha=one.beta)
        console.print(
            f"one-run f-DP audit (Mahloujifar, Melis and Chaudhuri 2024) on the same guesses: Gaussian DP mu >= "
            f"{one_fdp:.4f} at confidence {1 - one.beta:g} (refutes any mu-GDP claim below it; an epsilon only "
            "for a Gaussian trade-off curve, which a pure epsilon-DP release need not have)",
            highlight=False,
        )
    return one_fdp


def _audit_dp_scores(path: Path, guesses, delta, alpha, seed, out, console) -> None:
    """audit-dp --scores: the four bounds of dp_audit.canary_scores on the user's canary scores."""
    from rich.table import Table

    from recourse_privacy.dp_audit.canary_scores import audit_scores, read_scores_csv

    try:
        result = audit_scores(*read_scores_csv(path), guesses=guesses, delta=delta, alpha=alpha, random_state=seed)
    except RecoursePrivacyError as err:
        _fail(err)
    table = Table(title=f"Epsilon lower bounds from canary scores ({1 - alpha:.0%} confidence each, delta {delta:g})")
    for col in ("method", "eps >=", "mu >=", "test", "reference"):
        table.add_column(col, justify="right" if col in ("eps >=", "mu >=") else "left")
    for b in result.bounds:
        d = b.details
        test = d.get("test") or f"K = {d['K']}: {d['n_correct']} of {d['n_guesses']} guesses correct"
        eps = "n/a (delta 0)" if b.epsilon_lower_bound is None else f"{b.epsilon_lower_bound:.4f}"
        mu = "" if b.mu_lower_bound is None else f"{b.mu_lower_bound:.4f}"
        table.add_row(b.method, eps, mu, test, b.reference.split(",")[0])
    console.print(table)
    console.print(
        f"{result.n_canaries} canaries ({result.n_members} members); assumptions per method in --out's JSON "
        "and docs/dp-audit.md; a lower bound above a claimed epsilon refutes it, below it proves nothing",
        highlight=False,
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(strict_json.dumps({"command": "audit-dp", "scores": str(path), **result.to_dict()}, indent=2))
        console.print(f"wrote {out}", highlight=False)
