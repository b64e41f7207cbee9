"""Laplace Recourse as a defense (Huang et al. 2023): ``laplace`` (plain LR) and ``dpm-laplace`` (LR over a DP model).

The mechanism, :class:`~recourse_privacy.defenses.laplace.LaplaceRecourse`, is in
:mod:`~recourse_privacy.defenses.laplace`; this module holds how the audit plays it: the owner
answers every target through a budget session, the adversary simulates LR in its shadow worlds,
and the claim (with the direction attack that reads the released moves) goes into the ``dp`` block.
"""

from __future__ import annotations

import warnings
import weakref
from typing import TYPE_CHECKING

import numpy as np

from recourse_privacy.attacks.direction import direction_attack
from recourse_privacy.defenses.accounting import RecourseSession
from recourse_privacy.defenses.dpm import DPDefense, DPMDefense
from recourse_privacy.defenses.laplace import LaplaceRecourse, SimulatedLaplaceRecourse
from recourse_privacy.defenses.registry import register_defense, selected_share
from recourse_privacy.errors import IncompatibleError
from recourse_privacy.metrics.membership import attack_metrics
from recourse_privacy.models.registry import MODELS
from recourse_privacy.recourse.base import RecourseResult
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.report.dp_verdict import dp_bounds
from recourse_privacy.results.summaries import DirectionAttackSummary, DPSummary
from recourse_privacy.validation import derive_seed

if TYPE_CHECKING:
    from recourse_privacy.audit.config import AuditConfig

__all__ = ["DPMLaplaceDefense", "LaplaceDefense", "owner_noise"]

#: the owner's noise stream of each game: keyed by the game's recourse method object (one per game, made by
#: ``shadow_recourse``), then by the seed; weak, so a finished game's stream goes with its method
_OWNER_STREAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def owner_noise(config: AuditConfig, method) -> np.random.Generator:
    """The owner's one Laplace noise stream for the game whose recourse method is ``method``, advanced by every answer.

    Huang et al. (2023) draw fresh noise for every released answer: the game's targets, the extraction
    adversary's queries and any later batch each draw the next numbers of one generator seeded by
    ``derive_seed(config.seed, 6)``, so no two calls repeat their noise while the whole game stays
    reproducible from its seed (its calls come in a fixed order). The first call draws what a fresh
    generator of that seed draws. ``method`` identifies the game (each game makes its own); it must
    accept a weak reference.
    """
    streams = _OWNER_STREAMS.setdefault(method, {})
    seed = int(config.seed)
    if seed not in streams:
        streams[seed] = np.random.default_rng(derive_seed(seed, 6))
    return streams[seed]


def _check_laplace_setting(config: AuditConfig, *, linear_model: bool, model_kind: str) -> None:
    """What both Laplace defenses refuse (Huang et al. 2023, sec. 4.2.2, step 4 moves along w of a linear model).

    ``linear_model``: whether the model the owner trains has a weight vector to move along
    (``model_kind`` names what it should be); the recourse must be the exact linear recourse that
    LR replaces, and no action set (the move is along the full w). Messages name the defense.
    """
    name = f"defense {config.defense!r} (Laplace Recourse)"
    if not linear_model:
        raise IncompatibleError(
            f"{name} moves along the weight vector of {model_kind}; model {config.model!r} is not one: "
            "use --model logistic"
        )
    if config.recourse not in ("linear", "laplace"):
        raise IncompatibleError(
            f"{name} replaces exact linear recourse; got recourse {config.recourse!r}: use --recourse linear"
        )
    if config.actionable:
        raise IncompatibleError(f"{name} moves along the full weight vector; --actionable is not supported")


@register_defense(
    "laplace",
    description="plain Laplace Recourse (Huang et al. 2023): an epsilon-DP noisy score, then "
    "a move along the non-private w; NOT a DP release (the move reveals the model); linear models",
)
class LaplaceDefense(DPDefense):
    """Laplace Recourse replaces the configured recourse; the owner answers through a budget session."""

    name = "laplace"
    covered_signals = ("distance",)  # the claim is about the released recourse; the model's scores are not protected
    adaptive_attacks = ("lr-direction", "lr-reconstruction")

    def validate(self, config: AuditConfig) -> None:
        super().validate(config)
        entry = MODELS.get(config.model)
        _check_laplace_setting(
            config,
            linear_model="linear" in entry.meta["capabilities"] and not entry.meta["dp"],
            model_kind="a linear model",
        )

    def recourse(self, config: AuditConfig) -> str:
        return "laplace"

    def shadow_recourse(self, config: AuditConfig, action_set: ActionSet | None, public_bounds=None):
        # the adversary's shadow worlds simulate LR (it knows the mechanism, not the owner's noise or budget)
        return SimulatedLaplaceRecourse(
            epsilon=config.epsilon, random_state=derive_seed(config.seed, 7), **config.recourse_params
        )

    def owner_recourse(self, config, method, model, X_members, y_members, X_targets):
        # fresh noise for every answer: each call advances the game's one stream (never a reseeded generator)
        lr = LaplaceRecourse(epsilon=config.epsilon, random_state=owner_noise(config, method), **config.recourse_params)
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
            **dp_bounds(eps, 0.0, selected_share(config, is_member)),
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
        DPDefense.validate(self, config)
        _check_laplace_setting(
            config, linear_model=self.model(config)[0] == "dp-logistic", model_kind="a DP logistic regression"
        )
        self.check_data_norm(config)

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
            **dp_bounds(eps, 0.0, selected_share(config, is_member)),
            clamped_share=float(clamped.mean()) if len(clamped) else 0.0,
            composition="the model is epsilon-DP in the members; every released counterfactual is a function of "
            "the DP model, the query and fresh Laplace noise, hence post-processing: any number of queries costs "
            "epsilon_total = the model's epsilon. The noisy score adds no privacy for the members beyond that "
            "(its own epsilon per query is a guarantee about the model's score, which is already DP)",
            guarantee="epsilon-DP (the model's epsilon) for the whole release: directions, lengths and scores of "
            "every counterfactual, and the model's decisions. Not covered: the preprocessing fitted on the members",
        )


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
