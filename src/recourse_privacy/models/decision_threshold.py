"""A deployed model's decision threshold: the probability of the favourable label from which it says favourable.

A lender rarely approves at a probability of one half. scikit-learn states a cutoff with
``FixedThresholdClassifier`` or ``TunedThresholdClassifierCV`` (the cutoff tuned on a metric), skorch
with ``NeuralNetBinaryClassifier(threshold=...)``; either way ``predict`` and ``predict_proba``
disagree with "favourable where p >= 0.5". Which rows are rejected (the audit's targets) and which
counterfactual is valid follow the model's decisions, so the audit reads the cutoff
(:func:`declared_threshold`), or takes one from the user, and checks it against the model's own
``predict`` (:func:`check_decisions`) before any long work.

The threshold ``t`` is on the favourable label's probability: a cutoff stated on the other label
(``pos_label`` the unfavourable one, "predict default where P(default) >= 0.2") is the cutoff
``1 - t`` on the favourable one (the rows at exactly the cutoff aside).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import same_label

__all__ = [
    "DEFAULT_SOURCE",
    "DEFAULT_THRESHOLD",
    "THRESHOLD_READERS",
    "TIE_SHIFT",
    "DecisionThreshold",
    "argmax_ties_favourable",
    "check_decisions",
    "check_rows",
    "declared_threshold",
    "inner_estimator",
    "last_step",
    "resolve_threshold",
]

#: the cutoff of a classifier that states none: favourable where its probability is at least one half
DEFAULT_THRESHOLD = 0.5
#: where that cutoff comes from, as the result and the report say it
DEFAULT_SOURCE = "default (one half)"
#: decisions of rows whose probability is this close to the cutoff are not compared (float32 nets, ties)
_NEAR = 1e-5
#: rows of the data the decisions are compared on
_CHECK_ROWS = 512
#: added to the log-odds of a cutoff at which a tie is unfavourable: below the log-odds of any float64 probability
#: above one half (4.4e-16 for the next one), so that only an exact tie (a tree's leaf at 0.5) changes side
TIE_SHIFT = 1e-16


@dataclass(frozen=True)
class DecisionThreshold:
    """The cutoff ``value`` on the favourable label's probability and where it came from (``source``).

    ``in_predict``: whether the model's own ``predict`` applies it (a cutoff it states, or one half); a
    cutoff the user gives for a model that states none is applied outside the model (the lender's
    rule on its score), so the model's ``predict`` is not compared with it. ``ties_favourable``: whether a
    probability exactly at the cutoff is favourable (``>=``: scikit-learn's threshold wrappers, a lender's rule),
    or not (scikit-learn's ``predict`` takes the first class on a tie of ``predict_proba``; skorch's binary net
    decides ``p > threshold``).
    """

    value: float
    source: str
    in_predict: bool = True
    ties_favourable: bool = True

    @property
    def offset(self) -> float:
        """The log-odds of the cutoff: the model's decision logit is its log-odds minus this (0 at one half), and it
        decides favourable where that logit is >= 0 (:data:`TIE_SHIFT` more where a tie is unfavourable)."""
        return math.log(self.value) - math.log1p(-self.value) + (0.0 if self.ties_favourable else TIE_SHIFT)

    @property
    def is_default(self) -> bool:
        """Whether the cutoff is one half (the model decides as its probabilities do)."""
        return self.value == DEFAULT_THRESHOLD


def _on_favourable(t: float, stated_on: Any, favourable: Any) -> float:
    """A cutoff stated on the probability of ``stated_on``, as a cutoff on the favourable label's."""
    return float(t) if same_label(stated_on, favourable) else 1.0 - float(t)


def last_step(est: object) -> object:
    """The estimator a Pipeline decides with (its last step), else ``est`` itself."""
    steps = getattr(est, "steps", None)
    return steps[-1][1] if steps else est


def _threshold_wrapper(est: object) -> tuple[DecisionThreshold, Any] | None:
    """scikit-learn's ``FixedThresholdClassifier`` and ``TunedThresholdClassifierCV`` on ``predict_proba``."""
    try:
        from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV
    except ImportError:  # pragma: no cover - scikit-learn < 1.5
        return None
    est = last_step(est)
    if not isinstance(est, FixedThresholdClassifier | TunedThresholdClassifierCV):
        return None
    on_log_odds = est.response_method == "decision_function"
    if on_log_odds and not _decides_on_log_odds(est):
        return None  # a cutoff on a score that is no log-odds: check_decisions says what to pass
    if est.response_method not in ("auto", "predict_proba", "decision_function"):
        return None
    classes = list(getattr(est, "classes_", []))
    if isinstance(est, FixedThresholdClassifier):
        t = (0.0 if on_log_odds else DEFAULT_THRESHOLD) if est.threshold == "auto" else est.threshold
        pos = est.pos_label
        name = f"FixedThresholdClassifier(threshold={est.threshold!r})"
    else:
        t = getattr(est, "best_threshold_", None)
        if t is None:
            return None
        scorer = getattr(est, "_curve_scorer", None)  # where TunedThresholdClassifierCV keeps its pos_label
        pos = scorer._get_pos_label() if scorer is not None and hasattr(scorer, "_get_pos_label") else None
        name = f"TunedThresholdClassifierCV (best_threshold_={float(t):.6g})"
    if on_log_odds:  # scikit-learn's score for pos_label is its log-odds: P(pos_label) >= sigmoid(t)
        name = f"{name[:-1]}, response_method='decision_function'): log-odds {float(t):g}"
        t = 1.0 / (1.0 + math.exp(-float(t)))
    if pos is None:
        pos = classes[1] if len(classes) == 2 else None
    return (DecisionThreshold(float(t), name), pos) if pos is not None else None


def _decides_on_log_odds(wrapper: object) -> bool:
    """Whether the wrapped classifier's ``decision_function`` is the log-odds of its ``predict_proba`` (scikit-learn's
    logistic regressions and gradient boosting on the log loss: ``predict_proba`` is the sigmoid of it)."""
    from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV

    fitted = getattr(wrapper, "estimator_", None)
    clf = last_step(fitted if fitted is not None else getattr(wrapper, "estimator", None))
    if isinstance(clf, LogisticRegression | LogisticRegressionCV):
        return True
    boosted = isinstance(clf, GradientBoostingClassifier | HistGradientBoostingClassifier)
    return boosted and getattr(clf, "loss", "log_loss") == "log_loss"


def _skorch_binary(est: object) -> tuple[DecisionThreshold, Any] | None:
    """skorch's ``NeuralNetBinaryClassifier`` (itself or the last step of a Pipeline): ``p > threshold``."""
    skorch = sys.modules.get("skorch")
    if skorch is None:
        return None
    net = last_step(est)
    if not isinstance(net, skorch.NeuralNetBinaryClassifier):
        return None
    classes = getattr(est, "classes_", None)
    t = float(net.threshold)
    stated = DecisionThreshold(t, f"NeuralNetBinaryClassifier(threshold={t:g})", ties_favourable=False)
    return stated, 1 if classes is None else classes[1]


#: how a cutoff is read from an estimator: each gives (the cutoff as stated, the label it is stated on) or None
THRESHOLD_READERS: tuple[Callable[[object], tuple[DecisionThreshold, Any] | None], ...] = (
    _threshold_wrapper,
    _skorch_binary,
)


def inner_estimator(est: object) -> object:
    """The estimator a scikit-learn threshold wrapper decides with (its fitted ``estimator_``), else ``est``."""
    try:
        from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV
    except ImportError:  # pragma: no cover - scikit-learn < 1.5
        return est
    if isinstance(est, FixedThresholdClassifier | TunedThresholdClassifierCV):
        return getattr(est, "estimator_", est.estimator)
    return est


def declared_threshold(est: object, favourable: Any) -> DecisionThreshold | None:
    """The cutoff on the favourable label's probability that ``est`` states itself, or None (it states none)."""
    for reader in THRESHOLD_READERS:
        found = reader(est)
        if found is not None:
            stated, on = found
            value = _on_favourable(stated.value, on, favourable)
            source = stated.source if value == stated.value else f"{stated.source} on {on!r}"
            ties = stated.ties_favourable if same_label(on, favourable) else not stated.ties_favourable
            return DecisionThreshold(value, source, ties_favourable=ties)
    return None


def argmax_ties_favourable(est: object, favourable: Any) -> bool:
    """Whether ``est.predict`` calls a tie of ``predict_proba`` (0.5 each) favourable: scikit-learn takes the first
    of ``classes_`` (``argmax``), so a tie is favourable only where the favourable label is the first class."""
    classes = list(getattr(est, "classes_", []))
    return not classes or same_label(classes[0], favourable)


def _check_value(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not 0.0 < v < 1.0:
        raise InvalidInputError(f"{name}={value!r} must be a probability strictly between 0 and 1")
    return v


def resolve_threshold(est: object, favourable: Any, given: float | None = None) -> DecisionThreshold:
    """The cutoff the audit applies: ``given`` (decision_threshold=...), else the model's own, else one half.

    A ``given`` cutoff that differs from the one the model states is refused: its ``predict`` would disagree.
    """
    declared = declared_threshold(est, favourable)
    if declared is not None:
        _check_value(declared.value, f"the cutoff of {type(est).__name__}")
    if given is None:
        if declared is not None:
            return declared
        return DecisionThreshold(
            DEFAULT_THRESHOLD, DEFAULT_SOURCE, ties_favourable=argmax_ties_favourable(est, favourable)
        )
    value = _check_value(given, "decision_threshold")
    if declared is not None and not math.isclose(declared.value, value, rel_tol=0, abs_tol=1e-12):
        raise InvalidInputError(
            f"decision_threshold={value:g} (--decision-threshold), but the model decides at P({favourable!r}) >= "
            f"{declared.value:g} ({declared.source}): leave decision_threshold out, or refit the model with the cutoff"
        )
    if declared is None:
        return DecisionThreshold(value, "decision_threshold", in_predict=False)
    return declared


def check_decisions(
    est: object,
    inputs: object,
    p_favourable: np.ndarray,
    favourable: Any,
    threshold: DecisionThreshold,
    label: str = "model",
) -> None:
    """Raise unless ``est.predict(inputs)`` says favourable exactly where ``p_favourable >= threshold``
    (a cutoff the model's ``predict`` applies: ``threshold.in_predict``; any other passes).

    Rows within 1e-5 of the cutoff are not compared (a tie, or a float32 net's rounding). The error says
    between which probabilities the model's own cutoff lies, or that its ``predict`` is not a cutoff
    on its ``predict_proba`` at all.
    """
    if not threshold.in_predict:
        return
    p = np.asarray(p_favourable, dtype=np.float64)
    try:
        said = np.asarray(est.predict(inputs))
    except Exception as err:  # noqa: BLE001 - whatever the user's model raises, say which
        raise InvalidInputError(f"{label}.predict fails on rows of the data: {type(err).__name__}: {err}") from None
    if said.shape != p.shape:
        raise InvalidInputError(f"{label}.predict returns shape {said.shape} for {len(p)} rows; expected ({len(p)},)")
    theirs = (said == favourable) | (said.astype(str) == str(favourable))
    ours = p >= threshold.value
    wrong = (theirs != ours) & (np.abs(p - threshold.value) > _NEAR)
    if not wrong.any():
        return
    lo = float(p[theirs].min()) if theirs.any() else 1.0
    hi = float(p[~theirs].max()) if (~theirs).any() else 0.0
    head = (
        f"{label}.predict disagrees with P({favourable!r}) >= {threshold.value:g} ({threshold.source}) on "
        f"{int(wrong.sum())} of {len(p)} rows: "
    )
    if hi < lo:
        raise InvalidInputError(
            head + f"it says {favourable!r} from P({favourable!r}) = {lo:.6g} up and not up to {hi:.6g}, so its cutoff "
            f"lies between the two: pass decision_threshold=T (--decision-threshold T), the cutoff it applies"
        )
    raise InvalidInputError(
        head + f"it says {favourable!r} at P({favourable!r}) = {lo:.6g} and not at {hi:.6g}: its predict is not a "
        "cutoff on its predict_proba, and the audit reads decisions as P(favourable) >= a cutoff"
    )


def check_rows(n: int) -> int:
    """How many of ``n`` rows :func:`check_decisions` compares (the first ones)."""
    return min(int(n), _CHECK_ROWS)
