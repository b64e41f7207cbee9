"""The registry of defenses the audit plays against, and the :class:`Defense` interface.

A defense decides, from the audit's configuration, which model the owner (and, knowing the
mechanism, the adversary's shadow models) trains, which recourse the owner releases and how,
what the adversary simulates in its shadow worlds, and the claim it makes (the ``dp`` block).
Each defense is one :class:`Defense` subclass decorated with :func:`register_defense`, in the
module of its mechanism: ``none`` here, ``dpm`` in :mod:`~recourse_privacy.defenses.dpm` (the
model trained with DP), ``laplace`` and ``dpm-laplace`` in :mod:`~recourse_privacy.defenses.laplace_defense`
(Laplace Recourse), all of Huang et al. (2023). Every module of this package is imported on the
first lookup, so a new defense is one new file here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.models.registry import MODELS
from recourse_privacy.recourse.base import RecourseResult, fit_for
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import RECOURSE_METHODS, honours_action_set, make_recourse
from recourse_privacy.registry import Registry
from recourse_privacy.validation import derive_seed

if TYPE_CHECKING:  # the audit (a higher layer) passes its configuration in; type hints only
    from recourse_privacy.audit.config import AuditConfig
    from recourse_privacy.defenses.accounting import RecourseSession
    from recourse_privacy.results.summaries import DPSummary

__all__ = ["DEFENSES", "Defense", "NoDefense", "register_defense", "selected_share", "takes"]


def takes(method: str, parameter: str) -> bool:
    """Whether the registered recourse method ``method`` takes the keyword ``parameter``."""
    import inspect

    return parameter in inspect.signature(RECOURSE_METHODS.get(method).obj).parameters


DEFENSES: Registry[Defense] = Registry("defense", packages=("recourse_privacy.defenses",))


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
        if public_bounds is not None and "bounds" not in params and takes(config.recourse, "bounds"):
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


def selected_share(config: AuditConfig, is_member: np.ndarray) -> float:
    """The share of the members and non-members that the owner's model rejects (the targets)."""
    n_mem, n_non, _ = config.pool_sizes
    return max(len(is_member) / (n_mem + n_non), 1e-300)
