"""The registry of membership-inference attacks and the typed inputs every attack reads.

An attack is a function ``(inputs: AttackInputs) -> AttackScores``, registered with
:func:`register_attack`; it declares what it needs so that the audit trains shadow models
only when an attack asks for them:

- ``shadow_models``: the adversary's shadow models, with the targets' statistics under each;
- ``shadow_recourse``: recourse of the targets under every shadow model (counterfactual distances),
  the expensive part of a shadow world (of the online reference models too, with ``online_shadow``);
- ``online_shadow``: reference models trained on halves of the pool and the targets (LiRA's online
  setting), each target in half of them;
- ``recourse_queries``: recourse of extra points (a population sample) under the owner's model, each
  one a query the attack counts and reports.

``signal`` says what an attack reads (``distance``: the released recourse; ``score``: the
model's outputs; ``none``), so a report can keep what recourse leaks apart from what the
model's scores already leak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.shadow import ShadowData
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.recourse.base import RecourseResult
from recourse_privacy.registry import Registry

__all__ = [
    "ATTACKS",
    "ATTACK_NEEDS",
    "AttackInputs",
    "LRTOptions",
    "RMIAOptions",
    "check_attack_names",
    "register_attack",
    "run_attack",
]

ATTACK_NEEDS = ("shadow_models", "shadow_recourse", "online_shadow", "recourse_queries")
SIGNALS = ("distance", "score", "none")

Attack = Callable[["AttackInputs"], AttackScores]

ATTACKS: Registry[Attack] = Registry(
    "attack",
    packages=("recourse_privacy.attacks",),  # every module of this package: a new attack is one file
    needs_vocabulary=ATTACK_NEEDS,
)


@dataclass(frozen=True)
class LRTOptions:
    """How the likelihood-ratio attacks fit their reference distributions (see :mod:`attacks.lrt`)."""

    center: str = "mean"
    variance: str = "per-example"
    cdf: str = "normal"


@dataclass(frozen=True)
class RMIAOptions:
    """RMIA's settings (Zarifzadeh, Liu, Shokri 2024): see :mod:`recourse_privacy.attacks.rmia`.

    ``a``: the offline approximation Pr_IN(x) ~ a Pr_OUT(x) + (1 - a) (None: tuned on the adversary's
    shadow game, as the paper tunes it on reference models); ``gamma``: the pairwise
    likelihood-ratio threshold; ``n_population``: the population points z drawn from the
    adversary's pool whose recourse under the owner's model is queried.
    """

    a: float | None = None
    gamma: float = 1.0
    n_population: int = 500


@dataclass(frozen=True)
class AttackInputs:
    """Everything an attack may read, all of it available to the adversary of the game.

    ``cfd`` is the cost of each target's released counterfactual (in the audit's distance);
    ``recourse`` the released recourse itself; ``model`` the owner's model, queried for scores
    by the score attacks; ``X``, ``y`` the targets and their labels; ``shadow`` the statistics of
    the adversary's shadow models (None unless an attack needs them); ``X_pool``, ``y_pool``
    the adversary's own data; ``seed`` the audit's seed. ``online_shadow`` holds the statistics of
    the online reference models (trained on halves of the pool and the targets; None unless an attack
    needs them); ``query_cfd(X)`` asks the owner's recourse for more points and returns the cost of
    each released counterfactual in the audit's distance, each row one query (None where the caller
    offers no such access).
    """

    cfd: np.ndarray
    recourse: RecourseResult | None
    model: object
    X: np.ndarray
    y: np.ndarray
    shadow: ShadowData | None = None
    X_pool: np.ndarray | None = None
    y_pool: np.ndarray | None = None
    lrt: LRTOptions = LRTOptions()
    seed: int = 0
    online_shadow: ShadowData | None = None
    query_cfd: Callable[[np.ndarray], np.ndarray] | None = None
    rmia: RMIAOptions = RMIAOptions()

    @property
    def n_targets(self) -> int:
        """Number of targets."""
        return int(len(self.cfd))


def register_attack(
    name: str,
    *,
    description: str,
    needs=(),
    signal: str = "distance",
    replace: bool = False,
    reads_out_targets: bool = False,
):
    """Decorator: register ``fn(inputs: AttackInputs) -> AttackScores`` as attack ``name``.

    ``reads_out_targets``: an offline attack (``shadow_models``) that reads each target's statistics only
    under :attr:`ShadowData.out_targets`, so online reference models may serve as its shadow set (the
    audit then trains one set for both kinds); an attack without it gets offline shadow models of its own.
    """
    if signal not in SIGNALS:
        raise InvalidInputError(f"signal must be one of {', '.join(SIGNALS)}; got {signal!r}")
    return ATTACKS.register(
        name, description=description, needs=needs, replace=replace, signal=signal, reads_out_targets=reads_out_targets
    )


def check_attack_names(names) -> tuple[str, ...]:
    """Validate a list of attack names; an unknown one raises, listing the registered ones."""
    names = tuple(names)
    if not names:
        raise InvalidInputError("attacks must name at least one attack")
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        raise InvalidInputError(
            f"unknown attack(s) {', '.join(map(repr, unknown))}; choose from {', '.join(ATTACKS.names())}"
        )
    return names


def run_attack(name: str, inputs: AttackInputs) -> AttackScores:
    """Run the registered attack ``name``; its scores carry the registered name."""
    entry = ATTACKS.get(name)
    if "shadow_models" in entry.needs and inputs.shadow is None:
        raise InvalidInputError(f"attack {name!r} needs shadow models; none were trained")
    if "online_shadow" in entry.needs and inputs.online_shadow is None:
        raise InvalidInputError(f"attack {name!r} needs online reference models; none were trained")
    if "recourse_queries" in entry.needs and inputs.query_cfd is None:
        raise InvalidInputError(f"attack {name!r} queries the owner's recourse for population points; no access given")
    scores = entry.obj(inputs)
    if not isinstance(scores, AttackScores):
        raise InvalidInputError(f"attack {name!r} returned {type(scores).__name__}, not AttackScores")
    if len(scores.scores) != inputs.n_targets:
        raise InvalidInputError(f"attack {name!r} returned {len(scores.scores)} scores for {inputs.n_targets} targets")
    return scores if scores.name == name else AttackScores(name, scores.scores, scores.direction, scores.conventions)
