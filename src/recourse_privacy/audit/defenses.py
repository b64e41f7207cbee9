"""How each defense changes the game: the registry of defenses the audit can play against.

A defense decides, from the audit's configuration, which model the owner (and, knowing the
mechanism, the adversary's shadow models) trains, which recourse the owner releases and how,
what the adversary simulates in its shadow worlds, and the claim it makes (the ``dp`` block).
The built-ins are ``none``, ``dpm`` (the model trained with DP) and ``laplace`` (Laplace
Recourse), both of Huang et al. (2023); a new defense is one class registered with
:func:`register_defense`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from recourse_privacy.attacks.direction import direction_attack
from recourse_privacy.attacks.registry import ATTACKS
from recourse_privacy.audit.summaries import AttackResult, DirectionAttackSummary, DPSummary, DPVerdict
from recourse_privacy.defenses.accounting import RecourseSession
from recourse_privacy.defenses.laplace import LaplaceRecourse, SimulatedLaplaceRecourse
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.metrics.membership import attack_metrics
from recourse_privacy.models.registry import MODELS, dp_counterpart
from recourse_privacy.recourse.base import RecourseResult, fit_for
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import RECOURSE_METHODS, honours_action_set, make_recourse
from recourse_privacy.registry import Registry
from recourse_privacy.report.dp_verdict import ba_lower_confidence, dp_bounds
from recourse_privacy.validation import check_delta, check_epsilon, derive_seed

if TYPE_CHECKING:  # the config module imports this one
    from recourse_privacy.audit.config import AuditConfig

__all__ = [
    "DEFENSES",
    "Defense",
    "DPMDefense",
    "LaplaceDefense",
    "NoDefense",
    "dp_bounds",
    "dp_verdict",
    "register_defense",
]


def _takes(method: str, parameter: str) -> bool:
    """Whether the registered recourse method ``method`` takes the keyword ``parameter``."""
    import inspect

    return parameter in inspect.signature(RECOURSE_METHODS.get(method).obj).parameters


def dp_verdict(
    dp: DPSummary, attacks: Mapping[str, AttackResult], covered_signals: tuple[str, ...], *, alpha: float = 0.05
) -> DPSummary:
    """``dp`` with its verdict: the worst case (highest BA) over the attacks whose signal the claim covers.

    The claim is refuted when the worst attack's BA, lowered to its 1 - alpha/K confidence bound (K the
    number of covered attacks: a union bound over the attacks), still exceeds ``dp.ba_bound``.
    """
    covered = tuple(n for n in attacks if n in ATTACKS and ATTACKS.get(n).meta.get("signal") in covered_signals)
    if not covered:
        return dp
    worst = max(covered, key=lambda n: (attacks[n].balanced_accuracy, attacks[n].auc))
    a = attacks[worst]
    lower = max(ba_lower_confidence(attacks[n], alpha / len(covered)) for n in covered)
    exceeds = bool(lower > dp.ba_bound)
    text = (
        f"worst case over {len(covered)} attack(s) reading {' or '.join(covered_signals)}: {worst}, BA "
        f"{a.balanced_accuracy:.4f} (AUC {a.auc:.4f}; {1 - alpha:g} lower confidence bound {lower:.4f}) "
        f"{'>' if exceeds else '<='} the tight bound {dp.ba_bound:.4f} at selected epsilon "
        f"{dp.selected_epsilon:.4g}: "
        + (
            "the DP claim is refuted for this release"
            if exceeds
            else "consistent with the claim (not a proof of privacy)"
        )
    )
    return replace(
        dp,
        verdict=DPVerdict(
            attack=worst,
            balanced_accuracy=a.balanced_accuracy,
            auc=a.auc,
            tpr_at_fpr_001=a.tpr("0.01"),
            ba_bound=dp.ba_bound,
            exceeds=exceeds,
            covered=covered,
            text=text,
            ba_lower_confidence=lower,
        ),
    )


DEFENSES: Registry[Defense] = Registry("defense")


def register_defense(name: str, *, description: str, replace: bool = False):
    """Class decorator: register an instance of the decorated :class:`Defense` subclass as ``name``."""

    def decorate(cls: type) -> type:
        DEFENSES.add(name, cls(), description=description, replace=replace)
        return cls

    return decorate


class Defense:
    """No defense: the owner's model and recourse as configured. Subclasses override what they change."""

    name = "none"
    #: which attack signals (see :func:`~recourse_privacy.attacks.registry.register_attack`) the claim covers
    covered_signals: tuple[str, ...] = ()
    #: attacks that know this mechanism, run by the audit whatever ``attacks`` says
    adaptive_attacks: tuple[str, ...] = ()

    def validate(self, config: AuditConfig) -> None:
        """Refuse settings this defense cannot play, before any work."""
        if config.epsilon is not None:
            raise InvalidInputError("epsilon is given but defense is 'none'; choose --defense dpm or laplace")
        if MODELS.get(config.model).meta["dp"]:
            raise IncompatibleError(f"model {config.model!r} is the DPM defense: use --defense dpm --epsilon E")
        if config.recourse == "laplace":
            raise IncompatibleError("recourse 'laplace' is the LR defense: use --defense laplace --epsilon E")

    def model(self, config: AuditConfig) -> tuple[str, dict]:
        """(model name, params) that the owner and the shadow models train."""
        return config.model, dict(config.model_params)

    def recourse(self, config: AuditConfig) -> str:
        """The recourse method the owner releases."""
        return config.recourse

    def shadow_recourse(self, config: AuditConfig, action_set: ActionSet | None, public_bounds=None):
        """The recourse method as the adversary runs it in its shadow worlds (and the owner, unless overridden).

        ``public_bounds``: encoded public (lower, upper), given to a method that scales with them (the
        private ones: PrivRecourse, DPC) unless ``--recourse-param bounds=...`` says otherwise.
        """
        params = dict(config.recourse_params)
        if public_bounds is not None and "bounds" not in params and _takes(config.recourse, "bounds"):
            params["bounds"] = public_bounds
        # the audit passes one when asked (--actionable) and for a user's data; a method that takes none was
        # refused in AuditConfig.validate where constraints were asked for (check_action_set_support)
        if action_set is not None and honours_action_set(config.recourse):
            params.setdefault("action_set", action_set)
        if RECOURSE_METHODS.get(config.recourse).meta["randomized"]:
            params.setdefault("random_state", derive_seed(config.seed, 8))  # same seed, same numbers
        return make_recourse(config.recourse, **params)

    def owner_recourse(
        self, config: AuditConfig, method, model, X_members: np.ndarray, y_members: np.ndarray, X_targets: np.ndarray
    ) -> tuple[RecourseResult, RecourseSession | None]:
        """The owner's recourse for the targets (and the budget session where the defense spends one)."""
        return fit_for(method, X_members, y_members, model).generate(model, X_targets), None

    def summary(
        self,
        config: AuditConfig,
        model,
        session: RecourseSession | None,
        recourse: RecourseResult,
        is_member: np.ndarray,
        X_pool: np.ndarray,
        y_pool: np.ndarray,
    ) -> DPSummary | None:
        """The defense's claim for metrics.json (None: no claim)."""
        return None


@register_defense("none", description="no defense: the model and recourse as configured")
class NoDefense(Defense):
    """The undefended game."""


class _DPDefense(Defense):
    def validate(self, config: AuditConfig) -> None:
        if config.epsilon is None or isinstance(config.epsilon, bool):
            raise InvalidInputError(
                f"defense {config.defense!r} needs epsilon, a finite number > 0 (--epsilon); got {config.epsilon!r}"
            )
        check_epsilon(config.epsilon, "epsilon")
        if "epsilon" in config.model_params or "epsilon" in config.recourse_params:
            raise InvalidInputError("give epsilon once, with --epsilon, not in --model-param / --recourse-param")


@register_defense(
    "dpm",
    description="the model trained with DP (Huang et al. 2023, DPM): diffprivlib logistic "
    "regression or Opacus DP-SGD; recourse is post-processing of the model",
)
class DPMDefense(_DPDefense):
    """DPM: the owner (and every shadow model) trains the DP counterpart of the configured model."""

    name = "dpm"
    covered_signals = ("distance", "score")  # the model is DP: its scores and every recourse are post-processing

    def validate(self, config: AuditConfig) -> None:
        super().validate(config)
        if config.recourse == "laplace":
            raise IncompatibleError("recourse 'laplace' belongs to --defense laplace, not dpm")
        entry = RECOURSE_METHODS.get(self.recourse(config))
        if callable(getattr(entry.obj, "fit", None)) and config.recourse_fit != "adversary":
            raise IncompatibleError(
                f"recourse {config.recourse!r} is fitted on data (a graph, a VAE, ranges or a seed); fitted on the "
                "members it is not a function of the DP model, and its counterfactuals can copy member rows (FACE "
                "returns member rows verbatim), so DPM's guarantee does not cover it. Fit it on data the adversary "
                "may see with --recourse-fit adversary, or choose a recourse that reads only the model (linear, "
                "scfe, cadex, laplace via --defense dpm-laplace)"
            )
        if (
            self.model(config)[0] == "dp-logistic"
            and not config.normalize_rows
            and "data_norm" not in config.model_params
        ):
            raise InvalidInputError(
                "DPM logistic regression (diffprivlib) is DP only for rows of L2 norm <= data_norm "
                "= 1: add --normalize-rows (unit rows, Huang et al. 2023's preprocessing), or give "
                "a bound chosen without looking at the data (--model-param data_norm=...)"
            )

        self._check_delta(config)

    def _check_delta(self, config: AuditConfig) -> None:
        """DP-SGD's delta, before any training: the bound on the targets needs it below their smallest share."""
        import inspect

        name, params = self.model(config)
        try:
            default = inspect.signature(MODELS.get(name).obj).parameters.get("delta")
        except (TypeError, ValueError):  # a plugin's model without a signature: it checks its own delta
            return
        if default is None:
            return
        delta = params.get("delta", default.default)
        n_mem, n_non, _ = config.pool_sizes
        check_delta(delta, "--model-param delta")
        if not 0 < delta < 1 / (n_mem + n_non):
            raise InvalidInputError(
                f"--model-param delta must be in (0, {1 / (n_mem + n_non):.3g}), below 1 / (members + non-members) = "
                f"1/{n_mem + n_non} (DP-SGD's delta; the bound on the targets needs it below their smallest share); "
                f"got {delta!r}" + ("" if "delta" in config.model_params else " (the default)")
            )

    def model(self, config: AuditConfig) -> tuple[str, dict]:
        name, extra = dp_counterpart(config.model)
        return name, {**extra, **config.model_params, "epsilon": config.epsilon}

    def summary(self, config, model, session, recourse, is_member, X_pool, y_pool) -> DPSummary:
        eps = float(model.epsilon_)
        delta = float(getattr(model, "delta_", 0.0))
        fitted = callable(getattr(RECOURSE_METHODS.get(self.recourse(config)).obj, "fit", None))
        return DPSummary(
            guarantee="the model is (epsilon, delta)-DP in the members; the recourse reads only the model, the query"
            + (" and the adversary's own pool (--recourse-fit adversary)" if fitted else "")
            + ", so the release is "
            "post-processing of it (Huang et al. 2023, Theorem 3.4). Not covered: the preprocessing fitted on the "
            "members (docs/dp-defenses.md)",
            defense=config.defense,
            mechanism=f"DP-trained model {self.model(config)[0]!r} (Huang et al. 2023, DPM)",
            epsilon_target=float(config.epsilon),
            epsilon_per_query=eps,
            epsilon_total=eps,
            delta=delta,
            bound_epsilon=eps,
            **dp_bounds(eps, delta, _selected_share(config, is_member)),
            composition="the model is trained once with (epsilon, delta)-DP; every recourse is post-processing "
            "of it, so any number of queries costs nothing more: epsilon_total = epsilon_per_query = the model's "
            "epsilon" + (" (Opacus' accountant, achieved)" if delta > 0 else ""),
        )


@register_defense(
    "laplace",
    description="plain Laplace Recourse (Huang et al. 2023): an epsilon-DP noisy score, then "
    "a move along the non-private w; NOT a DP release (the move reveals the model); linear models",
)
class LaplaceDefense(_DPDefense):
    """Laplace Recourse replaces the configured recourse; the owner answers through a budget session."""

    name = "laplace"
    covered_signals = ("distance",)  # the claim is about the released recourse; the model's scores are not protected
    adaptive_attacks = ("lr-direction", "lr-reconstruction")

    def validate(self, config: AuditConfig) -> None:
        super().validate(config)
        entry = MODELS.get(config.model)
        if "linear" not in entry.meta["capabilities"] or entry.meta["dp"]:
            raise IncompatibleError(
                f"Laplace Recourse moves along the weight vector of a linear model; model "
                f"{config.model!r} is not one: use --model logistic"
            )
        if config.recourse not in ("linear", "laplace"):
            raise IncompatibleError(
                f"Laplace Recourse replaces exact linear recourse; got recourse "
                f"{config.recourse!r}: use --recourse linear"
            )
        if config.actionable:
            raise IncompatibleError(
                "Laplace Recourse moves along the full weight vector; --actionable is not supported"
            )

    def recourse(self, config: AuditConfig) -> str:
        return "laplace"

    def shadow_recourse(self, config: AuditConfig, action_set: ActionSet | None, public_bounds=None):
        # the adversary's shadow worlds simulate LR (it knows the mechanism, not the owner's noise or budget)
        return SimulatedLaplaceRecourse(
            epsilon=config.epsilon, random_state=derive_seed(config.seed, 7), **config.recourse_params
        )

    def owner_recourse(self, config, method, model, X_members, y_members, X_targets):
        lr = LaplaceRecourse(epsilon=config.epsilon, random_state=derive_seed(config.seed, 6), **config.recourse_params)
        session = RecourseSession(lr, model, budget=len(X_targets) * config.epsilon)
        return session.answer(X_targets), session

    def summary(self, config, model, session, recourse, is_member, X_pool, y_pool) -> DPSummary:
        eps = float(config.epsilon)
        clamped = recourse.info["clamped_low"] | recourse.info["clamped_high"]
        return DPSummary(
            defense="laplace",
            mechanism=f"plain Laplace Recourse (Huang et al. 2023, sec. 4.2.2) over the "
            f"non-private model, sensitivity {recourse.info['sensitivity']:g}: NOT a DP release (guarantee)",
            epsilon_per_query=eps,
            epsilon_total=session.spent,
            delta=0.0,
            budget=session.budget,
            n_queries=session.n_queries,
            bound_epsilon=eps,
            **dp_bounds(eps, 0.0, _selected_share(config, is_member)),
            clamped_share=float(clamped.mean()) if len(clamped) else 0.0,
            composition="basic (sequential): every target's recourse is one query costing epsilon_per_query, "
            "so the release costs epsilon_total = n_queries x epsilon_per_query (the session's budget, all spent). "
            "ba_bound uses epsilon_per_query: each attack scores a target from that target's own recourse, one "
            "epsilon-DP query (Theorem 2's game); an attacker combining all released recourses is bounded only "
            "by epsilon_total.",
            guarantee="only the noisy score f'(x) (steps 1-3) is epsilon-DP per query. The counterfactual x' = x + "
            "(s - f'(x)) w / ||w||^2 reveals the direction of w, and a clamped move its norm (length 36.04/||w||): "
            "with the intercept fitted on public data the adversary rebuilds the exact non-private distance of "
            "every target (attack lr-reconstruction), so the released recourse is NOT epsilon-DP and no bound "
            "covers it; ba_bound is what the paper's claim would imply, and the verdict tests that claim. For a DP "
            "release use --defense dpm-laplace (LR over a DP-trained model)",
            direction_attack=_direction_summary(recourse, is_member, X_pool, y_pool),
        )


@register_defense(
    "dpm-laplace",
    description="Laplace Recourse over a DP-trained logistic regression: the sound "
    "private path (the release is a function of the DP model, the query and fresh noise)",
)
class DPMLaplaceDefense(DPMDefense):
    """LR's noisy move computed from a DP model (diffprivlib): epsilon-DP for any number of queries."""

    name = "dpm-laplace"
    adaptive_attacks = ("lr-direction", "lr-reconstruction")

    def validate(self, config: AuditConfig) -> None:
        _DPDefense.validate(self, config)
        if self.model(config)[0] != "dp-logistic":
            raise IncompatibleError(
                f"dpm-laplace moves along the weight vector of a DP logistic regression; model "
                f"{config.model!r} is not one: use --model logistic"
            )
        if config.recourse not in ("linear", "laplace"):
            raise IncompatibleError(
                f"dpm-laplace replaces the recourse with Laplace Recourse; got recourse "
                f"{config.recourse!r}: use --recourse linear"
            )
        if config.actionable:
            raise IncompatibleError(
                "Laplace Recourse moves along the full weight vector; --actionable is not supported"
            )
        if not config.normalize_rows and "data_norm" not in config.model_params:
            raise InvalidInputError(
                "DPM logistic regression (diffprivlib) is DP only for rows of L2 norm <= data_norm "
                "= 1: add --normalize-rows, or give a bound chosen without looking at the data "
                "(--model-param data_norm=...)"
            )

    def recourse(self, config: AuditConfig) -> str:
        return "laplace"

    def shadow_recourse(self, config, action_set, public_bounds=None):
        return LaplaceDefense.shadow_recourse(self, config, action_set)

    def owner_recourse(self, config, method, model, X_members, y_members, X_targets):
        return LaplaceDefense.owner_recourse(self, config, method, model, X_members, y_members, X_targets)

    def summary(self, config, model, session, recourse, is_member, X_pool, y_pool) -> DPSummary:
        eps = float(model.epsilon_)
        clamped = recourse.info["clamped_low"] | recourse.info["clamped_high"]
        return DPSummary(
            defense="dpm-laplace",
            mechanism="Laplace Recourse (Huang et al. 2023, sec. 4.2.2) over the DP-trained "
            "'dp-logistic' (diffprivlib objective perturbation)",
            epsilon_target=float(config.epsilon),
            epsilon_per_query=eps,
            epsilon_total=eps,
            delta=0.0,
            budget=session.budget,
            n_queries=session.n_queries,
            bound_epsilon=eps,
            **dp_bounds(eps, 0.0, _selected_share(config, is_member)),
            clamped_share=float(clamped.mean()) if len(clamped) else 0.0,
            composition="the model is epsilon-DP in the members; every released counterfactual is a function of "
            "the DP model, the query and fresh Laplace noise, hence post-processing: any number of queries costs "
            "epsilon_total = the model's epsilon. The noisy score adds no privacy for the members beyond that "
            "(its own epsilon per query is a guarantee about the model's score, which is already DP)",
            guarantee="epsilon-DP (the model's epsilon) for the whole release: directions, lengths and scores of "
            "every counterfactual, and the model's decisions. Not covered: the preprocessing fitted on the members",
        )


def _selected_share(config: AuditConfig, is_member: np.ndarray) -> float:
    """The share of the members and non-members that the owner's model rejects (the targets)."""
    n_mem, n_non, _ = config.pool_sizes
    return max(len(is_member) / (n_mem + n_non), 1e-300)


def _direction_summary(recourse: RecourseResult, is_member, X_pool, y_pool) -> DirectionAttackSummary | None:
    scores = direction_attack(recourse, X_pool, y_pool)
    if scores is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = attack_metrics(is_member, scores.scores)
    return DirectionAttackSummary(
        auc=m.auc,
        balanced_accuracy=m.balanced_accuracy,
        tpr_at_fpr={k: v.tpr for k, v in m.tpr_at_fpr.items()},
        what="targets ranked by -u.x with u = w/||w|| read off the released counterfactual moves: the "
        "baseline CFD ranking, whatever epsilon",
    )
