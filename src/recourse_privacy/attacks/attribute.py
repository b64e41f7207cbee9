"""Attribute inference of a sensitive attribute through a surrogate extracted from counterfactuals.

Yang et al. (2022, Sec. 5.3.3) infer Texas-100's RACE with a learned attack on the surrogate.
Here the adversary knows a target's other features and its label and wants the sensitive
feature ``column`` (one of ``values``). For every candidate value it fills the column, reads
the surrogate's prediction vector, and feeds the stacked vectors plus the one-hot label to an
attack model trained on its own data (where the attribute is known). The baseline is the same
attack with the surrogate removed (the one-hot label alone: the majority value per label), so
the gain is what the surrogate, i.e. the explanations, adds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_matrix, derive_seed

__all__ = ["AttributeInferenceResult", "attribute_inference", "attribute_inference_candidates"]


@dataclass(frozen=True)
class AttributeInferenceResult:
    """Accuracy of the inferred attribute on the targets, the label-only baseline, and accuracy per value."""

    accuracy: float
    baseline_accuracy: float
    balanced_accuracy: float
    per_value_accuracy: dict
    #: the inferred value (an index into ``values``) per target, and the true one; not serialised
    predicted: np.ndarray | None = field(default=None, compare=False, repr=False)
    truth: np.ndarray | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("predicted", "truth")}


def _features(proba: Callable, candidates: Sequence[np.ndarray], y: np.ndarray, n_classes: int) -> np.ndarray:
    return np.hstack([np.asarray(proba(Xv)) for Xv in candidates] + [np.eye(n_classes)[y]])


def attribute_inference(
    surrogate_proba: Callable,
    X_targets: np.ndarray,
    y_targets: np.ndarray,
    column: int | Sequence[int],
    values: Sequence,
    X_adv: np.ndarray,
    y_adv: np.ndarray,
    *,
    random_state=None,
) -> AttributeInferenceResult:
    """Infer ``X_targets[:, column]`` (one of ``values``) from the surrogate (see the module docstring).

    ``column`` may also list several encoded columns (a one-hot group) with ``values`` one vector
    each (a level's encoding); a row's value is the nearest one in L1.
    """
    X_targets = check_matrix(X_targets, "X_targets")
    X_adv = check_matrix(X_adv, "X_adv", n_features=X_targets.shape[1])
    cols = np.atleast_1d(np.asarray(column))
    if cols.size == 0 or not ((cols >= 0) & (cols < X_targets.shape[1])).all():
        raise InvalidInputError(f"column {column} is not a feature index (0..{X_targets.shape[1] - 1})")
    values = list(values)
    V = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    if V.shape[1] != cols.size:
        raise InvalidInputError(f"each value must have one entry per column ({cols.size}); got {V.shape[1]}")
    column = int(cols[0]) if np.ndim(column) == 0 else cols
    if len(values) < 2:
        raise InvalidInputError("values must list at least two candidate values of the sensitive attribute")

    def code(col):
        col = np.asarray(col, dtype=np.float64).reshape(len(col), -1)
        return np.abs(col[:, None, :] - V[None, :, :]).sum(-1).argmin(1)

    def filled(X):
        out = []
        for v in values:
            Xv = X.copy()
            Xv[:, column] = v
            out.append(Xv)
        return out

    return attribute_inference_candidates(
        surrogate_proba,
        filled(X_targets),
        y_targets,
        code(X_targets[:, column]),
        filled(X_adv),
        y_adv,
        code(X_adv[:, column]),
        [str(v) for v in values],
        random_state=random_state,
    )


def attribute_inference_candidates(
    surrogate_proba: Callable,
    candidates_targets: Sequence[np.ndarray],
    y_targets: np.ndarray,
    truth_targets: np.ndarray,
    candidates_adv: Sequence[np.ndarray],
    y_adv: np.ndarray,
    truth_adv: np.ndarray,
    labels: Sequence[str],
    *,
    random_state=None,
) -> AttributeInferenceResult:
    """The attack of :func:`attribute_inference` on encoded candidates: ``candidates_*[v]`` holds every row
    encoded with the sensitive value set to value ``v`` (for an encoding in which a value has no fixed
    encoded form, e.g. rows normalised to unit norm, the caller re-encodes the raw rows); ``truth_*`` the
    index of each row's true value (-1: a value outside ``labels``, never predicted)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.neural_network import MLPClassifier

    k_values = len(labels)
    if k_values < 2 or len(candidates_targets) != k_values or len(candidates_adv) != k_values:
        raise InvalidInputError(
            f"need one candidate matrix per value ({k_values} values, at least 2); got "
            f"{len(candidates_targets)} for the targets and {len(candidates_adv)} for the adversary's rows"
        )
    y_t, y_a = np.asarray(y_targets).astype(int), np.asarray(y_adv).astype(int)
    a_t, a_adv = np.asarray(truth_targets).astype(int), np.asarray(truth_adv).astype(int)
    known = a_adv >= 0
    k = int(max(y_t.max(), y_a.max())) + 1
    F_adv = _features(surrogate_proba, candidates_adv, y_a, k)[known]
    F_t = _features(surrogate_proba, candidates_targets, y_t, k)
    model = MLPClassifier(
        hidden_layer_sizes=(64,), max_iter=400, random_state=derive_seed(random_state, 37) % 2**31
    ).fit(F_adv, a_adv[known])
    pred = model.predict(F_t)
    base = LogisticRegression(max_iter=500).fit(np.eye(k)[y_a[known]], a_adv[known]).predict(np.eye(k)[y_t])
    per = {str(labels[v]): float(np.mean(pred[a_t == v] == v)) for v in np.unique(a_t) if v >= 0}
    return AttributeInferenceResult(
        float(np.mean(pred == a_t)),
        float(np.mean(base == a_t)),
        float(balanced_accuracy_score(a_t, pred)),
        per,
        pred,
        a_t,
    )
