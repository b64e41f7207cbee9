"""Membership inference through an extracted surrogate (Yang et al. 2022, Sec. 5.3.3; Shokri et al. 2017).

A different game from the audit's per-target recourse scores: the adversary first extracts a
surrogate g from the explanation API (:mod:`~recourse_privacy.attacks.extraction`), then
scores each target record (x, y) with g's prediction vector. Two attacks, both calibrated on
the adversary's own data only (never on the targets' membership labels):

- ``threshold``: score = g's probability of the true label (higher = member, fixed direction);
  the threshold reported is the one that maximises balanced accuracy on shadow models the
  adversary trains on halves of its own data (Shokri et al.'s shadow technique);
- ``learned``: Shokri et al.'s attack model, an MLP (ReLU) trained on the shadow models'
  prediction vectors (sorted, plus the true-label probability) labelled in/out, applied to g's
  vectors on the targets. Yang et al. train it with Adagrad (lr 1e-2); scikit-learn's MLP uses
  Adam.

Metrics are the audit's (:func:`recourse_privacy.metrics.membership.attack_metrics`: AUC, TPR
at low FPR) on the targets' true membership, which is used only to score the attack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics.membership import AttackMetrics, attack_metrics
from recourse_privacy.validation import check_matrix, check_positive_int, derive_seed

__all__ = ["SurrogateMembershipResult", "attack_features", "surrogate_membership"]


@dataclass(frozen=True)
class SurrogateMembershipResult:
    """Both attacks' metrics on the targets, and the threshold calibrated on the shadows."""

    threshold: AttackMetrics
    learned: AttackMetrics
    threshold_value: float
    threshold_balanced_accuracy: float
    threshold_scores: np.ndarray
    learned_scores: np.ndarray

    def to_dict(self) -> dict:
        return {
            "threshold": self.threshold.to_dict(),
            "learned": self.learned.to_dict(),
            "threshold_value": self.threshold_value,
            "threshold_balanced_accuracy_on_targets": self.threshold_balanced_accuracy,
        }


def attack_features(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Shokri et al.'s attack input: the prediction vector sorted (descending) and the true-label probability."""
    proba = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    return np.column_stack([-np.sort(-proba, axis=1), proba[np.arange(len(y)), y]])


def surrogate_membership(
    surrogate_proba: Callable,
    X_targets: np.ndarray,
    y_targets: np.ndarray,
    membership: np.ndarray,
    X_adv: np.ndarray,
    y_adv: np.ndarray,
    *,
    make_shadow: Callable,
    n_shadows: int = 4,
    fprs: Sequence[float] = (0.01, 0.1),
    random_state=None,
) -> SurrogateMembershipResult:
    """Threshold and learned membership attacks on g's outputs (see the module docstring).

    ``make_shadow(X, y, seed) -> model with predict_proba``: how the adversary trains a shadow
    model on half of its data (it mimics the target's training). ``membership``: the targets'
    true 0/1 membership, used only for the metrics.
    """
    X_targets = check_matrix(X_targets, "X_targets")
    X_adv = check_matrix(X_adv, "X_adv", n_features=X_targets.shape[1])
    y_adv = np.asarray(y_adv).astype(np.int64)
    n_shadows = check_positive_int(n_shadows, "n_shadows")
    membership = np.asarray(membership).astype(np.int64)
    if membership.shape != (len(X_targets),) or not np.isin(membership, (0, 1)).all():
        raise InvalidInputError("membership must be one 0/1 flag per target")
    if len(X_adv) < 4:
        raise InvalidInputError(f"X_adv: the shadow models need at least 4 adversary rows; got {len(X_adv)}")
    rng = np.random.default_rng(derive_seed(random_state, 23))
    feats, labels = [], []
    for s in range(n_shadows):
        perm = rng.permutation(len(X_adv))
        half = len(X_adv) // 2
        inn, out = perm[:half], perm[half : 2 * half]
        shadow = make_shadow(X_adv[inn], y_adv[inn], derive_seed(random_state, 29, s))
        for idx, lab in ((inn, 1), (out, 0)):
            feats.append(attack_features(shadow.predict_proba(X_adv[idx]), y_adv[idx]))
            labels.append(np.full(len(idx), lab))
    F, L = np.vstack(feats), np.concatenate(labels)
    # threshold on the true-label probability, maximising balanced accuracy on the shadows
    cand = np.unique(F[:, -1])
    tpr = np.array([(F[L == 1, -1] >= t).mean() for t in cand])
    tnr = np.array([(F[L == 0, -1] < t).mean() for t in cand])
    thr = float(cand[np.argmax(tpr + tnr)])
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    attack = make_pipeline(
        StandardScaler(),
        MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=derive_seed(random_state, 31) % 2**31),
    )
    attack.fit(F, L)
    Ft = attack_features(surrogate_proba(X_targets), np.asarray(y_targets).astype(np.int64))
    s_thr = Ft[:, -1]
    s_learned = attack.predict_proba(Ft)[:, 1]
    pred = s_thr >= thr
    bal = 0.5 * (pred[membership == 1].mean() + (~pred[membership == 0]).mean())
    return SurrogateMembershipResult(
        attack_metrics(membership, s_thr, fprs),
        attack_metrics(membership, s_learned, fprs),
        thr,
        float(bal),
        s_thr,
        s_learned,
    )
