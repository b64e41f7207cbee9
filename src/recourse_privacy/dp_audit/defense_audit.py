"""The empirical epsilon bound of a defense's own mechanism, beside its claim: what the audit's report shows.

``recourse-privacy audit --defense X --epsilon E --dp-audit`` audits the mechanism the defense
runs, at the audit's claim E, with fast settings, and the HTML report's DP section shows the
bounds beside the claim (:mod:`recourse_privacy.report.dp_audit`). Why an audit run now and not
the shipped table's row: the table holds a few epsilons (0.5, 1, 2) while the audit's claim is
any E, and the bound is a statement about the mechanism *at that claim*; the fast settings cost
seconds to a minute (``DEFENSE_AUDITS`` gives each). The audit runs on the package's canary
design (trained neighbours built to be the worst case the auditor can build), not on the user's
data: a DP claim is a statement about every pair of neighbouring datasets, so the strongest
neighbours are the right ones to test, and the user's rows are not needed.

Each defense names its mechanism in :data:`DEFENSE_AUDITS` (a registry, by defense name, of the
mechanism for the audit's model); the bounds are the methods of :mod:`~recourse_privacy.dp_audit`:
Clopper-Pearson (Jagielski et al. 2020) on a many-run audit, the one-run bound (Steinke, Nasr and
Jagielski 2023) and the one-run f-DP bound (Mahloujifar, Melis and Chaudhuri 2024), each at
alpha / 2 for the two that decide the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace

from recourse_privacy.dp_audit.trained import BROKEN_EPSILON_FACTOR
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_positive_float

__all__ = [
    "DEFENSE_AUDITS",
    "GAUSSIAN_DESIGNS",
    "POSITIVE_CONTROLS",
    "DPAuditEvidence",
    "DefenseAuditSpec",
    "EmpiricalBound",
    "PositiveControl",
    "PositiveControlSpec",
    "audit_defense",
    "audit_recourse",
    "check_auditable",
    "deciding_for",
]

#: the bounds that decide a verdict: no assumption on the trade-off curve (each at alpha / 2)
DECIDING = ("clopper_pearson", "one_run")

#: audited mechanisms whose canary design makes the trade-off curve in each canary exactly Gaussian, with why: their
#: verdict reads the one-run f-DP bound (Mahloujifar, Melis and Chaudhuri 2024) in place of Steinke et al.'s, still
#: two bounds at alpha / 2 each. The twin of such a mechanism is read the same way (its curve is Gaussian too).
GAUSSIAN_DESIGNS: dict[str, str] = {
    "trained-dpsgd": "full-batch DP-SGD (sampling rate 1) adds Gaussian noise of sd sigma C to the sum of clipped "
    "gradients at each of its T steps, so in each canary it is a composition of Gaussian mechanisms, mu-GDP with mu = "
    "sqrt(T) / sigma (Dong, Roth and Su 2022), and Adam and the final weights are post-processing; Opacus' accountant "
    "gives an epsilon at or above that curve's",
}


def gaussian_design(mechanism: str) -> str | None:
    """Why ``mechanism`` (or the mechanism it is the broken twin of) has a Gaussian trade-off curve, or None."""
    return GAUSSIAN_DESIGNS.get(mechanism.removesuffix("-broken"))


def deciding_for(mechanism: str) -> tuple[str, ...]:
    """The two bounds that decide ``mechanism``'s verdict: Clopper-Pearson and Steinke et al.'s one-run bound, or the
    one-run f-DP bound in its place where the design's trade-off curve is Gaussian (:data:`GAUSSIAN_DESIGNS`)."""
    return DECIDING if gaussian_design(mechanism) is None else ("clopper_pearson", "one_run_fdp")


#: user-facing names of the methods, with their papers
METHOD_NAMES = {
    "clopper_pearson": "Clopper-Pearson (Jagielski et al. 2020), many runs",
    "one_run": "one-run (Steinke, Nasr and Jagielski 2023)",
    "one_run_fdp": "one-run f-DP (Mahloujifar, Melis and Chaudhuri 2024)",
}


@dataclass(frozen=True)
class EmpiricalBound:
    """One method's 1 - alpha lower bound on the mechanism's epsilon (None: not finite at this delta; see mu)."""

    method: str
    name: str
    epsilon_lower_bound: float | None
    mu_lower_bound: float | None
    alpha: float
    assumptions: str
    runs: str


@dataclass(frozen=True)
class PositiveControl:
    """The audit's test run on the mechanism's known-broken twin at the same claim, runs and seed.

    A bound at or below the claim finds nothing wrong, and that reads as evidence only if the same test catches
    a mechanism known to break the claim. ``caught`` says whether the twin's bound (the verdict's methods) exceeded
    the claim at ``n_trials`` runs per neighbour, the runs the audited mechanism then ran at.
    """

    mechanism: str
    broken: str
    epsilon_lower_bound: float | None
    method: str
    n_trials: int
    caught: bool


@dataclass(frozen=True)
class DPAuditEvidence:
    """The empirical audit of a defense's mechanism at the audit's claim: the typed value the report renders."""

    defense: str
    mechanism: str
    description: str
    claimed_epsilon: float
    delta: float
    alpha: float
    bounds: tuple[EmpiricalBound, ...]
    decided_by: tuple[str, ...]
    source: str
    seconds: float
    subject: str = "Defense"  # what ``defense`` names: a defense, or a private recourse method ("Recourse method")
    control: PositiveControl | None = None  # the same test on the known-broken twin (None: no twin registered)
    #: further audits of the same claim (a part of the mechanism the claim rests on, e.g. the DP model a release
    #: post-processes): the verdict is the worst of all
    parts: tuple[DPAuditEvidence, ...] = ()
    role: str = ""  # for a part: why it is audited ("" for the audit itself)

    @property
    def violates_claim(self) -> bool:
        """True when a bound that decides the verdict (``decided_by``: none assumes a trade-off curve the design
        does not have) exceeds the claim, here or in a part."""
        return any(p.violates_claim for p in self.parts) or any(
            b.method in self.decided_by
            and b.epsilon_lower_bound is not None
            and b.epsilon_lower_bound > self.claimed_epsilon
            for b in self.bounds
        )

    @property
    def verdict(self) -> str:
        """VIOLATES when a deciding bound (here or in a part) exceeds the claim; INCONCLUSIVE when none does but a
        test also misses its known-broken twin (it has no power at this claim); else consistent, not a proof."""
        if self.violates_claim:
            return "VIOLATES the claim"
        for e in (self, *self.parts):
            if e.control is not None and not e.control.caught:
                of = "" if e is self else f" of {e.mechanism}"
                return (
                    f"INCONCLUSIVE: nothing found, but the same test{of} at {e.control.n_trials} runs also misses "
                    "the known-broken twin"
                )
        return "consistent with the claim (not a proof of privacy)"

    @property
    def strongest(self) -> EmpiricalBound:
        """The largest epsilon bound among the verdict's methods."""
        return _deciding_bound(self.bounds, self.decided_by)

    def to_dict(self) -> dict:
        own = {k: v for k, v in asdict(self).items() if k != "parts"}
        parts = [p.to_dict() for p in self.parts]
        return {**own, "parts": parts, "violates_claim": self.violates_claim, "verdict": self.verdict}


@dataclass(frozen=True)
class DefenseAuditSpec:
    """How a defense's mechanism is audited: the mechanism for a model, and the fast settings."""

    mechanism: Callable[[str, Mapping], str | None]  # (model name, its --model-param) -> the mechanism, or None
    n_trials: int
    n_canaries: int
    #: (model name, its --model-param) -> further mechanisms the claim rests on, each audited as a part (with why)
    parts: Callable[[str, Mapping], tuple[tuple[str, str], ...]] = lambda model, params: ()


_ASSUME_SPLIT = "one canary per run, independent runs on D and D'; threshold chosen on half, measured on the other"
_ASSUME_ONE = "each canary included independently with probability 1/2; no assumption on the trade-off curve"
_ASSUME_FDP = _ASSUME_ONE.split(";")[0] + "; the mechanism's trade-off curve is Gaussian (mu-GDP)"


def _assume_fdp(mechanism: str) -> str:
    """The f-DP bound's assumption, and for a Gaussian design why it holds there."""
    why = gaussian_design(mechanism)
    return _ASSUME_FDP if why is None else f"{_ASSUME_FDP}, which holds for this design: {why}"


#: why a release's DP model is audited as a part of its audit
_MODEL_PART = (
    "the DP model the release post-processes: the release's claim is the model's epsilon, so a model that breaks it "
    "breaks the release's"
)


def _dpm_mechanism(model: str, params: Mapping) -> str | None:
    if model == "logistic":  # the model as run: regularised for its budget (the default), or C as given
        from recourse_privacy.models.dp import REGULARIZE_FOR_BUDGET

        budgeted = params.get("regularize_for_budget", REGULARIZE_FOR_BUDGET)
        # the label flip (a replaced row) on the model: its release is post-processing of it, and this test has the
        # power the add-one release test (trained-dpm-logistic[-budget]) lacks (docs/dp-audit.md)
        return "trained-dpm-flip" if budgeted else "trained-dpm-flip-as-given"
    return "trained-dpsgd" if model.startswith("mlp") else None


#: defense name -> how its mechanism is audited (the mechanism depends on the audit's model)
DEFENSE_AUDITS: dict[str, DefenseAuditSpec] = {
    "dpm": DefenseAuditSpec(_dpm_mechanism, n_trials=200, n_canaries=1000),
    "laplace": DefenseAuditSpec(lambda model, params: "trained-lr" if model == "logistic" else None, 1000, 1000),
    # the release as a whole (its control: Laplace Recourse over a non-private model, the post-processing broken), and
    # the DP model it post-processes by the label flip: the release's own noise hides a model run at 10 x epsilon
    # from any release test (docs/dp-audit.md), so the claim's other half is audited on the model
    "dpm-laplace": DefenseAuditSpec(
        lambda model, params: "trained-dpm-lr" if model == "logistic" else None,
        200,
        1000,
        lambda model, params: ((_dpm_mechanism(model, params), _MODEL_PART),) if model == "logistic" else (),
    ),
}


@dataclass(frozen=True)
class PositiveControlSpec:
    """A mechanism's known-broken twin (a registered experiment of the same test) and how often the audit may
    double its runs, from the fast setting, to make the test catch the twin at the claim (0: run it as set)."""

    twin: str
    doublings: int = 0
    broken: str = ""  # what is broken, in a few words ("": the twin's registered description)


#: the add-one twins' registered description is long (it repeats the release's); their control says this instead
_DPM_TWIN = f"the DP logistic regression run at {BROKEN_EPSILON_FACTOR:g} x epsilon (noise / {BROKEN_EPSILON_FACTOR:g})"

#: audited mechanism -> its positive control; a mechanism without one is audited with its power unmeasured
POSITIVE_CONTROLS: dict[str, PositiveControlSpec] = {
    # about 1 s per 100 runs: up to 1,600 runs, which catch the twin up to a claim of 2 (docs/dp-audit.md)
    "trained-privrecourse-empty": PositiveControlSpec("trained-privrecourse-empty-broken", doublings=4),
    "trained-dpc": PositiveControlSpec("trained-dpc-broken"),  # about 12 s per 100 runs
    "trained-dpsgd": PositiveControlSpec("trained-dpsgd-broken"),  # its one-run design does not grow with runs
    "trained-privrecourse-laplace": PositiveControlSpec("trained-privrecourse-laplace-broken", doublings=2),
    # the DP logistic regression at 10 x epsilon: the label flip catches it at claims 0.5-2 in 200 runs; the add-one
    # release tests miss it at 0.5 within 3,200 and through Laplace Recourse (docs/dp-audit.md, "A positive control")
    "trained-dpm-flip": PositiveControlSpec("trained-dpm-flip-broken", 2),
    "trained-dpm-flip-as-given": PositiveControlSpec("trained-dpm-flip-as-given-broken", 2),
    # the add-one release tests, run by audit-dp (and by --dp-audit before stop 47's end)
    "trained-dpm-logistic-budget": PositiveControlSpec("trained-dpm-logistic-budget-broken", 4, _DPM_TWIN),
    "trained-dpm-logistic": PositiveControlSpec("trained-dpm-logistic-broken", 4, _DPM_TWIN),
    # the release test of Laplace Recourse over the DP model has no power against the model at 10 x epsilon (its
    # twin trained-dpm-lr-broken is missed at 3,200 runs); it catches the release that is not post-processing of a
    # DP model, Laplace Recourse over the non-private one, at 200 runs. --dp-audit audits the model as a part.
    "trained-dpm-lr": PositiveControlSpec(
        "trained-lr",
        broken="Laplace Recourse over a non-private logistic regression: the release reads the exact weights, not "
        "post-processing of a DP model",
    ),
}


#: a private recourse method's release: its registered experiment's fast settings (the mechanism is read per run)
RECOURSE_SPEC = DefenseAuditSpec(lambda model, params: None, n_trials=100, n_canaries=1000)


def _recourse_spec(claim) -> DefenseAuditSpec:
    """The fast settings of a private recourse method's audit: the claim's own runs where it names them."""
    return replace(RECOURSE_SPEC, n_trials=claim.n_trials or RECOURSE_SPEC.n_trials)


#: the many-run audit never trains more than this many runs per neighbour (the claim's cost grows like e^eps)
MAX_TRIALS = 16_000


def many_run_reach(n_trials: int, alpha: float = 0.05) -> float:
    """The largest epsilon the many-run audit of ``n_trials`` runs per neighbour could certify with a perfect test
    (half the runs measuring, delta 0, the bound at alpha / 2)."""
    from recourse_privacy.dp_audit.bounds import max_certifiable_epsilon

    return max_certifiable_epsilon(n_trials // 2, 0.0, alpha / 2)


def trials_for(spec: DefenseAuditSpec, epsilon: float, alpha: float = 0.05, mechanism: str = "") -> int:
    """The fast setting's runs per neighbour, doubled until a perfect test could certify more than ``epsilon``.

    Raises one error naming --epsilon when even :data:`MAX_TRIALS` could not (bounds.max_certifiable_epsilon
    at delta 0, half the runs measuring, each bound at alpha / 2). A ``mechanism`` of a Gaussian design
    (:data:`GAUSSIAN_DESIGNS`) keeps the fast setting: its one-run f-DP bound decides beside the many runs, and its
    positive control says whether its canaries reach the claim.
    """
    n = spec.n_trials
    if gaussian_design(mechanism) is not None:
        return n
    while many_run_reach(n, alpha) <= epsilon:
        if 2 * n > MAX_TRIALS:
            raise InvalidInputError(
                f"--dp-audit: --epsilon {epsilon:g} is too large to refute empirically within {MAX_TRIALS} runs per "
                "neighbour (a bound above it needs more runs than the fast audit trains)"
            )
        n *= 2
    return n


def check_auditable(
    defense: str,
    model: object,
    epsilon: float | None = None,
    model_params: Mapping | None = None,
    *,
    recourse: str | None = None,
    recourse_params: Mapping | None = None,
) -> str:
    """The mechanism that audits ``defense`` on ``model`` (run with ``model_params``), or, without a DP defense, the
    private ``recourse`` method's release (run with ``recourse_params``); else one error naming --defense / --model /
    --recourse (before any work)."""
    spec = DEFENSE_AUDITS.get(defense)
    if spec is None:
        from recourse_privacy.dp_audit.recourse_audit import RECOURSE_AUDITS, recourse_claim

        if recourse in RECOURSE_AUDITS:
            claim = recourse_claim(recourse, recourse_params)
            trials_for(_recourse_spec(claim), claim.epsilon)
            return claim.mechanism
        raise InvalidInputError(
            f"--dp-audit needs a DP defense ({', '.join(DEFENSE_AUDITS)}) or a private recourse method "
            f"({', '.join(RECOURSE_AUDITS)}); --defense is {defense!r} and --recourse {recourse!r}, which claim no epsilon"
        )
    name = spec.mechanism(model if isinstance(model, str) else "", dict(model_params or {}))
    if name is None:
        raise InvalidInputError(f"--dp-audit: no empirical audit of --defense {defense} with --model {model!r}")
    if epsilon is not None:
        trials_for(spec, check_positive_float(epsilon, "epsilon (--epsilon)"), mechanism=name)
    return name


def _from_release(name: str, epsilon: float, spec: DefenseAuditSpec, alpha: float, seed: int):
    from recourse_privacy.dp_audit.releases import audit_release

    ra = audit_release(
        name,
        epsilon,
        n_trials=spec.n_trials,
        alpha=alpha,
        random_state=seed,
        n_runs=5,
        n_canaries=spec.n_canaries,
        require_power=gaussian_design(name) is None,  # a Gaussian design: the one-run f-DP bound carries the power
    )
    s = ra.scores
    many = f"{spec.n_trials} runs per neighbour"
    cap = many_run_reach(spec.n_trials, alpha)
    if cap <= epsilon:  # a Gaussian design's fast runs: shown, but they cannot refute this claim
        many += f" (can certify at most {cap:.2f}: the f-DP bound carries the power)"
    bounds = (
        EmpiricalBound(
            "clopper_pearson",
            METHOD_NAMES["clopper_pearson"],
            ra.many_run.epsilon_lower_bound,
            None,
            alpha / 2,
            _ASSUME_SPLIT,
            many,
        ),
        EmpiricalBound(
            "one_run",
            METHOD_NAMES["one_run"],
            s["one_run"].epsilon_lower_bound,
            None,
            alpha / 2,
            _ASSUME_ONE,
            ra.design,
        ),
        EmpiricalBound(
            "one_run_fdp",
            METHOD_NAMES["one_run_fdp"],
            s["one_run_fdp"].epsilon_lower_bound,
            s["one_run_fdp"].mu_lower_bound,
            alpha / 2,
            _assume_fdp(name),
            ra.design,
        ),
    )
    return ra.many_run, bounds


def _from_trained(name: str, epsilon: float, spec: DefenseAuditSpec, alpha: float, seed: int):
    from recourse_privacy.dp_audit.experiments import make_experiment
    from recourse_privacy.dp_audit.fdp import gdp_epsilon, one_run_fdp_mu
    from recourse_privacy.dp_audit.trained import one_run_audit

    many = make_experiment(name, epsilon).audit(n_trials=spec.n_trials, alpha=alpha / 2, random_state=seed)
    one = one_run_audit(
        name.removeprefix("trained-"), epsilon, n_canaries=spec.n_canaries, beta=alpha / 2, random_state=seed
    )
    mu = one_run_fdp_mu(one.n_canaries, one.n_guesses, one.n_correct, alpha=alpha / 2)
    eps_fdp = gdp_epsilon(mu, many.delta) if many.delta > 0 else (0.0 if mu == 0 else None)
    design = f"one run, {one.n_canaries} canaries, {one.n_correct} of {one.n_guesses} guesses correct"
    bounds = (
        EmpiricalBound(
            "clopper_pearson",
            METHOD_NAMES["clopper_pearson"],
            many.epsilon_lower_bound,
            None,
            alpha / 2,
            _ASSUME_SPLIT,
            f"{spec.n_trials} runs per neighbour",
        ),
        EmpiricalBound(
            "one_run", METHOD_NAMES["one_run"], one.epsilon_lower_bound, None, alpha / 2, _ASSUME_ONE, design
        ),
        EmpiricalBound("one_run_fdp", METHOD_NAMES["one_run_fdp"], eps_fdp, mu, alpha / 2, _assume_fdp(name), design),
    )
    return many, bounds


def _deciding_bound(bounds: tuple[EmpiricalBound, ...], deciding: tuple[str, ...]) -> EmpiricalBound:
    own = [b for b in bounds if b.method in deciding]
    return max(own, key=lambda b: -1.0 if b.epsilon_lower_bound is None else b.epsilon_lower_bound)


def _with_control(
    name: str, epsilon: float, spec: DefenseAuditSpec, alpha: float, seed: int, deciding: tuple[str, ...]
) -> tuple[DefenseAuditSpec, PositiveControl | None]:
    """The runs to audit ``name`` at, and its positive control: the known-broken twin is audited first at the
    spec's runs, doubled (up to the control's ``doublings`` and :data:`MAX_TRIALS`) until the test catches it.

    The runs depend on the twin only, never on the audited mechanism's outcome, so the audited bound keeps its
    confidence.
    """
    from recourse_privacy.dp_audit.experiments import MECHANISMS
    from recourse_privacy.dp_audit.releases import RELEASE_AUDITS

    control = POSITIVE_CONTROLS.get(name)
    if control is None:
        return spec, None
    run = _from_release if control.twin in RELEASE_AUDITS else _from_trained
    for step in range(control.doublings + 1):
        _, bounds = run(control.twin, epsilon, spec, alpha, seed)
        best = _deciding_bound(bounds, deciding)
        caught = best.epsilon_lower_bound is not None and best.epsilon_lower_bound > epsilon
        if caught or step == control.doublings or 2 * spec.n_trials > MAX_TRIALS:
            break
        spec = replace(spec, n_trials=2 * spec.n_trials)
    broken = control.broken or MECHANISMS.get(control.twin).description.removeprefix(
        "BROKEN on purpose (the audit must flag it): "
    )
    return spec, PositiveControl(control.twin, broken, best.epsilon_lower_bound, best.name, spec.n_trials, bool(caught))


def audit_defense(
    defense: str,
    model: object,
    epsilon: float,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    model_params: Mapping | None = None,
) -> DPAuditEvidence:
    """Audit the mechanism of ``defense`` (on ``model``, run with ``model_params``) at the claim ``epsilon`` with its
    fast settings, and each part its spec names (``DPAuditEvidence.parts``) the same way."""
    name = check_auditable(defense, model, model_params=model_params)
    epsilon = check_positive_float(epsilon, "epsilon (--epsilon)")
    spec = DEFENSE_AUDITS[defense]
    model_name, params = model if isinstance(model, str) else "", dict(model_params or {})
    parts = tuple(
        _audit_one(defense, part, epsilon, spec, alpha, seed, role=why) for part, why in spec.parts(model_name, params)
    )
    return replace(_audit_one(defense, name, epsilon, spec, alpha, seed), parts=parts)


def _audit_one(
    defense: str, name: str, epsilon: float, spec: DefenseAuditSpec, alpha: float, seed: int, role: str = ""
) -> DPAuditEvidence:
    """The audit of one mechanism at the claim: its runs grown until a bound above the claim is possible, its
    positive control, then the mechanism."""
    from recourse_privacy.dp_audit.experiments import MECHANISMS
    from recourse_privacy.dp_audit.releases import RELEASE_AUDITS

    spec = replace(spec, n_trials=trials_for(spec, epsilon, alpha, mechanism=name))
    start = time.perf_counter()
    deciding = deciding_for(name)
    spec, control = _with_control(name, epsilon, spec, alpha, seed, deciding)
    run = _from_release if name in RELEASE_AUDITS else _from_trained
    many, bounds = run(name, epsilon, spec, alpha, seed)
    return DPAuditEvidence(
        defense=defense,
        mechanism=name,
        description=MECHANISMS.get(name).description,
        claimed_epsilon=epsilon,
        delta=many.delta,
        alpha=alpha,
        bounds=bounds,
        decided_by=deciding,
        source=f"audited now (audit --dp-audit, seed {seed}): the defense's mechanism on the package's canary "
        "design at the audit's epsilon, not on the audited data",
        seconds=time.perf_counter() - start,
        control=control,
        role=role,
    )


def audit_recourse(
    recourse: str, recourse_params: Mapping | None = None, *, alpha: float = 0.05, seed: int = 0
) -> DPAuditEvidence:
    """Audit the release of the private ``recourse`` method (run with ``recourse_params``) at its own claim
    (:func:`~recourse_privacy.dp_audit.recourse_audit.recourse_claim`) with the fast settings."""
    from recourse_privacy.dp_audit.experiments import MECHANISMS
    from recourse_privacy.dp_audit.recourse_audit import recourse_claim

    claim = recourse_claim(recourse, recourse_params)
    spec = _recourse_spec(claim)
    spec = replace(spec, n_trials=trials_for(spec, claim.epsilon, alpha))
    start = time.perf_counter()
    deciding = deciding_for(claim.mechanism)
    spec, control = _with_control(claim.mechanism, claim.epsilon, spec, alpha, seed, deciding)
    many, bounds = _from_release(claim.mechanism, claim.epsilon, spec, alpha, seed)
    return DPAuditEvidence(
        defense=recourse,
        mechanism=claim.mechanism,
        description=MECHANISMS.get(claim.mechanism).description,
        claimed_epsilon=claim.epsilon,
        delta=many.delta,
        alpha=alpha,
        bounds=bounds,
        decided_by=deciding,
        source=f"audited now (audit --dp-audit, seed {seed}): the method's release ({claim.covers}; the candidates "
        "are decided by the audit's model, outside the claim) on the package's canary design at the method's "
        "epsilon, not on the audited data",
        seconds=time.perf_counter() - start,
        subject="Recourse method",
        control=control,
    )
