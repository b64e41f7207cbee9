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

__all__ = ["AttributeInferenceResult", "attribute_inference"]


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


def _features(proba: Callable, X: np.ndarray, y: np.ndarray, column, values: Sequence, n_classes: int) -> np.ndarray:
    blocks = []
    for v in values:
        Xv = X.copy()
        Xv[:, column] = v
        blocks.append(np.asarray(proba(Xv)))
    return np.hstack(blocks + [np.eye(n_classes)[y]])


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
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.neural_network import MLPClassifier

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

    y_t, y_a = np.asarray(y_targets).astype(int), np.asarray(y_adv).astype(int)
    k = int(max(y_t.max(), y_a.max())) + 1
    a_adv, a_t = code(X_adv[:, column]), code(X_targets[:, column])
    F_adv = _features(surrogate_proba, X_adv, y_a, column, values, k)
    F_t = _features(surrogate_proba, X_targets, y_t, column, values, k)
    model = MLPClassifier(
        hidden_layer_sizes=(64,), max_iter=400, random_state=derive_seed(random_state, 37) % 2**31
    ).fit(F_adv, a_adv)
    pred = model.predict(F_t)
    base = LogisticRegression(max_iter=500).fit(np.eye(k)[y_a], a_adv).predict(np.eye(k)[y_t])
    per = {str(values[v]): float(np.mean(pred[a_t == v] == v)) for v in np.unique(a_t)}
    return AttributeInferenceResult(
        float(np.mean(pred == a_t)),
        float(np.mean(base == a_t)),
        float(balanced_accuracy_score(a_t, pred)),
        per,
        pred,
        a_t,
    )
