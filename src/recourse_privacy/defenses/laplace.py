"""Laplace Recourse (LR): Huang et al. 2023, section 4.2.2, steps 1-4.

For a logistic-regression model f(x) = w.x + b with p(x) = sigmoid(f(x)):

1. p'(x) = p(x) + Laplace(sensitivity / epsilon)      (the Laplace mechanism, Definition 3.3)
2. clamp p'(x) to [0, 1]
3. f'(x) = log(p'(x) / (1 - p'(x)))                   (the noisy score)
4. x' = x + (s - f'(x)) / ||w||^2 * w                 (the noisy move along w to the target score s)

Huang et al. 2023 write step 4 as c = (s - f'(x)) / ||w|| * w; the counterfactual that moves the
*true* logit by s - f'(x) along w is x + (s - f'(x)) / ||w||^2 * w, whose L2 length is
|s - f'(x)| / ||w||: the paper's noisy counterfactual distance.

What is private: p(x) lies in [0, 1] whatever the training set, so its global sensitivity is 1
and steps 1-3 (the noisy score f'(x)) are epsilon-DP in the training data for one query;
``k`` answered queries cost ``k * epsilon`` under basic composition (see
:mod:`recourse_privacy.defenses.accounting`). What is NOT: step 4 reads w, a non-private function
of the training data, so the released counterfactual is not post-processing of the noisy score.
Its direction is w / ||w|| exactly, a clamped move's length gives ||w||, and with an intercept
fitted on public data the adversary rebuilds the exact distance of every target (the attack
``lr-reconstruction``, :mod:`recourse_privacy.attacks.reconstruction`). Over a non-private model
the release is therefore not epsilon-DP for any epsilon; over a DP-trained model (the audit's
``dpm-laplace`` defense) it is, with the model's epsilon, by post-processing.

What carries over to non-linear models: steps 1-3 (a noisy probability and the noisy score it
implies) are epsilon-DP for any classifier, since any probability lies in [0, 1] and the rest
is post-processing. Step 4 does not: the closed-form move along w, which turns a noisy score
into a noisy distance, exists only for a linear logit. A gradient method (SCFE) would need the
noisy score as its target, e.g. search for x' whose logit equals f(x) + (s - f'(x)), and every
quantity it reads from the model along the way (gradients, intermediate logits) is a further
query of the training data that DP must pay for; the model's own gradients are not private.
Only the linear case is implemented here, as in the paper.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.recourse.base import SearchOutput, generate_recourse
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.validation import as_generator, check_epsilon, derive_seed

#: p' is clipped to [PROB_CLIP, 1 - PROB_CLIP] before the logit (2**-52: 1 - PROB_CLIP is exact in
#: float64), so a clamped p' = 0 or 1 gives the finite score -/+ 52 ln 2 = -/+ 36.04: the "clamping spike".
PROB_CLIP = 2.0**-52


def noisy_probability(p: np.ndarray, epsilon: float, *, sensitivity: float = 1.0, random_state=None) -> np.ndarray:
    """Huang et al. 2023 sec. 4.2.2 steps 1-2: ``p + Laplace(sensitivity / epsilon)``, clamped to [0, 1].

    ``p`` holds probabilities (any shape, values in [0, 1]). With the default sensitivity 1
    (the global sensitivity of a probability) each entry is an epsilon-DP release. A
    ``sensitivity`` below 1 is NOT private for probabilities; it exists to build a deliberately
    broken mechanism for empirical audits. ``epsilon`` <= 0 or not finite raises a ValueError.
    """
    eps = check_epsilon(epsilon)
    sens = check_epsilon(sensitivity, "sensitivity")
    p = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise InvalidInputError("p must hold probabilities in [0, 1]")
    rng = as_generator(random_state)
    return np.clip(p + rng.laplace(0.0, sens / eps, size=p.shape), 0.0, 1.0)


def noisy_logit(p_noisy: np.ndarray) -> np.ndarray:
    """Step 3: log(p' / (1 - p')), with p' clipped to [PROB_CLIP, 1 - PROB_CLIP] so that the
    clamped values 0 and 1 give the finite scores -/+ 36.04 (the clamping spike)."""
    q = np.clip(np.asarray(p_noisy, dtype=np.float64), PROB_CLIP, 1.0 - PROB_CLIP)
    return np.log(q) - np.log1p(-q)


@register_recourse(
    "laplace",
    description="Laplace Recourse (Huang et al. 2023): epsilon-DP noisy score, move along w; linear models",
    needs=("linear",),
)
class LaplaceRecourse:
    """Laplace Recourse (Huang et al. 2023, sec. 4.2.2) for a linear model: an epsilon-DP noisy score, then a move along w.

    The noisy score is epsilon-DP per query; the counterfactual is not, unless the model itself
    is DP (see the module docstring).

    Each row of ``generate`` is one query: it spends ``epsilon`` from ``accountant`` (a
    diffprivlib ``BudgetAccountant``; None means diffprivlib's default accountant, so
    ``with BudgetAccountant(epsilon=...)`` works as in diffprivlib) *before* any noise is drawn;
    a batch that would exceed the budget is refused whole with a ``BudgetExceededError`` naming the
    budget, the spent and the requested epsilon. The counterfactual of row x is
    x + (s - f'(x)) / ||w||^2 * w with f' the noisy score (p' clipped to [2^-52, 1 - 2^-52]
    before the logit, so a clamped p' in {0, 1} gives f' = -/+ 36.04 and the distance
    (s -/+ 36.04) / ||w||: the clamping spike of Huang et al. 2023, Figure 4). Every row is moved by
    the formula, including rows whose noise pushed f' past s (they move away from the
    boundary); the model's own verdict on x' is ``valid``: invalid rows are reported, never
    dropped. At s = 0 a row is valid exactly when its Laplace draw is negative (f' < f), so
    validity is 1/2 in expectation whatever the data and epsilon, and one seed makes the same
    rows valid at every epsilon (docs/dp-defenses.md). ``target_logit`` is the paper's s
    (0: probability 1/2); s > 0 raises validity. ``info`` holds the noisy
    probabilities and which rows were clamped.

    ``epsilon`` defaults to 1.0 per query (the middle of the range Huang et al. 2023 sweep,
    0.5..20); ``recourse-privacy recourse --methods laplace`` runs with it, and
    ``--method-param laplace.epsilon=0.5`` sets another.

    ``action_set`` (an :class:`~recourse_privacy.recourse.ActionSet`): the move along w is
    projected onto it (immutable features back to the factual, increase-only features not below
    it, bounds and one-hot groups valid; rows whose projection the model rejects are repaired
    along the same move) by the shared driver
    (:func:`~recourse_privacy.recourse.base.generate_recourse`); validity is judged after the
    projection. It reads only the public action set, the query and the model that step 4 already
    reads: post-processing of the released noisy score, at no extra privacy cost.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        sensitivity: float = 1.0,
        target_logit: float = 0.0,
        accountant=None,
        action_set=None,
        random_state=None,
    ):
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_epsilon(sensitivity, "sensitivity")
        self.target_logit = float(target_logit)
        if not np.isfinite(self.target_logit):
            raise InvalidInputError(f"target_logit must be finite; got {target_logit!r}")
        self.accountant = accountant
        self.action_set = action_set
        self.random_state = random_state
        self._rng = as_generator(random_state)

    def spend(self, n_queries: int) -> None:
        """Spend ``n_queries * epsilon`` (basic composition) or raise a BudgetExceededError; draws nothing."""
        from diffprivlib.accountant import BudgetAccountant
        from diffprivlib.utils import BudgetError

        if n_queries <= 0:
            return
        acc = BudgetAccountant.load_default(self.accountant)
        cost = n_queries * self.epsilon
        try:
            acc.check(cost, 0.0)
        except BudgetError:
            spent = acc.total()[0]
            raise BudgetExceededError(
                f"privacy budget exceeded: the batch asks for epsilon {cost:g} ({n_queries} recourse "
                f"quer{'y' if n_queries == 1 else 'ies'} at epsilon {self.epsilon:g}), but the budget is epsilon "
                f"{acc.epsilon:g} and {spent:g} is already spent ({max(acc.epsilon - spent, 0.0):g} remains); "
                "the batch was refused and no noise was drawn"
            ) from None
        acc.spend(cost, 0.0)

    def generate(self, model, X: np.ndarray):
        """Noisy counterfactuals for every row of ``X`` under the linear ``model`` (steps 1-4)."""
        return generate_recourse(
            self,
            model,
            X,
            info={"epsilon": self.epsilon, "sensitivity": self.sensitivity, "target_logit": self.target_logit},
        )

    def _search(self, model, X: np.ndarray, state=None):
        """Steps 1-4 for all rows at once, after spending the batch's budget."""
        w = np.asarray(model.coef_, dtype=np.float64)
        sq = float(w @ w)
        if sq == 0:
            raise InvalidInputError("the model's weight vector w is zero: there is no direction to move along")
        p = model.predict_proba(X)[:, 1]
        self.spend(len(X))
        p_noisy = noisy_probability(p, self.epsilon, sensitivity=self.sensitivity, random_state=self._rng)
        f_noisy = noisy_logit(p_noisy)
        return SearchOutput(
            X + np.outer((self.target_logit - f_noisy) / sq, w),
            info={
                "n_queries": int(len(X)),
                "epsilon_spent": len(X) * self.epsilon,
                "noisy_probability": p_noisy,
                "clamped_low": p_noisy <= 0.0,
                "clamped_high": p_noisy >= 1.0,
            },
        )


class SimulatedLaplaceRecourse:
    """The adversary's simulation of :class:`LaplaceRecourse` for its shadow models.

    The adversary knows the mechanism (epsilon, sensitivity, s) but not the owner's noise or
    accountant. :meth:`fit` (called per shadow model through ``fit_for``) returns a fresh
    :class:`LaplaceRecourse` without accounting (an unlimited private accountant) whose noise
    stream is seeded from ``random_state`` and a fingerprint of that shadow's training rows:
    each shadow draws independent noise, identically whether shadows run in sequence, in
    parallel processes or resume from a cache.
    """

    name = "laplace"
    needs = frozenset({"linear"})

    def __init__(self, *, epsilon: float, sensitivity: float = 1.0, target_logit: float = 0.0, random_state: int = 0):
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_epsilon(sensitivity, "sensitivity")
        self.target_logit = float(target_logit)
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, model) -> LaplaceRecourse:
        """A LaplaceRecourse for one shadow world (seeded by that world's training rows)."""
        import zlib

        from diffprivlib.accountant import BudgetAccountant

        X = np.ascontiguousarray(X, dtype=np.float64)
        tag = zlib.crc32(np.ascontiguousarray(y, dtype=np.int64).tobytes(), zlib.crc32(X.tobytes()))
        return LaplaceRecourse(
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            target_logit=self.target_logit,
            accountant=BudgetAccountant(),
            random_state=derive_seed(self.random_state, tag),
        )

    def generate(self, model, X: np.ndarray):
        """Unfitted use: one LaplaceRecourse seeded from ``random_state`` alone (no accounting)."""
        from diffprivlib.accountant import BudgetAccountant

        return LaplaceRecourse(
            epsilon=self.epsilon,
            sensitivity=self.sensitivity,
            target_logit=self.target_logit,
            accountant=BudgetAccountant(),
            random_state=self.random_state,
        ).generate(model, X)
