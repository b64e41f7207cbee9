"""Model extraction from counterfactual explanations (Aivodji, Bolot and Gambs 2020; DualCF, Wang et al. 2022).

The adversary owns a small dataset D_A of queries. It sees what an explanation API returns:
the target's prediction vector on any point it submits and a counterfactual for each query.
Its transfer set for k counterfactuals (Yang et al. 2022, Eq. 22) is

    D_T(k) = {(x, f(x)) : x in D_A}  union  {(x_cf_i, f(x_cf_i)) : i = 1..k}

(k = 0: the base extraction without counterfactuals). A surrogate is trained on D_T(k) with the
target's labels (argmax of the prediction vector: scikit-learn's MLP takes hard labels, where
Jagielski et al. 2020 fit the soft vector). "known" architecture: the target's hidden layers;
"unknown": the same plus one dense layer (Yang et al.). Accuracy is against the true labels of
an evaluation set, fidelity the agreement with the target there.

DualCF (Wang, Qian, Xu, Li and Huang 2022) also asks for the counterfactual of each
counterfactual (a point just across the boundary on the query's side) and adds the pairs
(x_cf, x_ccf); it counters the bias of counterfactuals that all sit on one side.
Everything here is fed only what the adversary sees: ``predict_proba`` and ``explain`` are the
API's two calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import check_choice, check_matrix, derive_seed

__all__ = ["ExtractionResult", "VARIANTS", "build_transfer_set", "extract_model", "train_surrogate"]

VARIANTS = ("base", "cf", "dualcf")
ARCHITECTURES = ("known", "unknown")


@dataclass(frozen=True)
class ExtractionResult:
    """One surrogate: variant (base / cf / dualcf), k, architecture, and its accuracy and fidelity."""

    variant: str
    k: int
    architecture: str
    accuracy: float
    fidelity: float
    n_transfer: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def train_surrogate(
    X: np.ndarray, labels: np.ndarray, hidden_layers: Sequence[int], *, max_iter: int = 300, random_state=None
):
    """A scikit-learn MLP surrogate (ReLU, Adam) fitted on the transfer set's target labels."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    with warnings.catch_warnings():  # a fixed iteration budget is the attack's choice, not a fault
        warnings.simplefilter("ignore", ConvergenceWarning)
        return MLPClassifier(
            hidden_layer_sizes=tuple(hidden_layers),
            max_iter=max_iter,
            early_stopping=False,
            random_state=derive_seed(random_state, 17) % (2**31),
        ).fit(X, labels)


def build_transfer_set(
    queries: np.ndarray, predict_proba: Callable, explain: Callable | None, k: int, variant: str = "cf"
) -> tuple[np.ndarray, np.ndarray]:
    """(X_T, labels_T) of Eq. 22 for ``k`` counterfactuals of the first ``k`` queries (``variant`` see module doc).

    ``explain(X, targets) -> X_cf``: the API's counterfactuals toward class ``targets`` (per row).
    """
    check_choice(variant, "variant", VARIANTS)
    Q = check_matrix(queries, "queries")
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise InvalidInputError(f"k must be an int >= 0; got {k!r}")
    if k > len(Q):
        raise InvalidInputError(f"k={k} counterfactuals exceed the query budget of {len(Q)} queries")
    yq = np.asarray(predict_proba(Q)).argmax(1)
    parts_X, parts_y = [Q], [yq]
    if variant != "base" and k > 0:
        if explain is None:
            raise InvalidInputError(f"variant {variant!r} needs the explain(X, targets) API")
        qk = Q[:k]
        cf = check_matrix(explain(qk, 1 - yq[:k] if _binary(predict_proba, Q) else None), "counterfactuals")
        ycf = np.asarray(predict_proba(cf)).argmax(1)
        parts_X.append(cf)
        parts_y.append(ycf)
        if variant == "dualcf":
            ccf = check_matrix(explain(cf, 1 - ycf if _binary(predict_proba, Q) else None), "counterfactuals")
            parts_X.append(ccf)
            parts_y.append(np.asarray(predict_proba(ccf)).argmax(1))
    return np.vstack(parts_X), np.concatenate(parts_y)


def _binary(predict_proba, Q) -> bool:
    return np.asarray(predict_proba(Q[:1])).shape[1] == 2


def extract_model(
    queries: np.ndarray,
    predict_proba: Callable,
    explain: Callable | None,
    X_eval: np.ndarray,
    y_eval: np.ndarray,
    *,
    ks: Sequence[int] = (250, 500, 1000, 2000),
    hidden_layers: Sequence[int] = (64,),
    variants: Sequence[str] = ("base", "cf"),
    architectures: Sequence[str] = ARCHITECTURES,
    max_iter: int = 300,
    random_state=None,
) -> list[ExtractionResult]:
    """Surrogates over ``ks`` x ``variants`` x ``architectures`` (the base once per architecture).

    The API's answers for the largest k are fetched once and sliced for the smaller ones.
    """
    Q = check_matrix(queries, "queries")
    ks = sorted({int(k) for k in ks})
    for v in variants:
        check_choice(v, "variants", VARIANTS)
    for a in architectures:
        check_choice(a, "architectures", ARCHITECTURES)
    if ks and ks[-1] > len(Q):
        raise InvalidInputError(f"k={ks[-1]} counterfactuals exceed the query budget of {len(Q)} queries")
    X_eval = check_matrix(X_eval, "X_eval", n_features=Q.shape[1])
    y_target = np.asarray(predict_proba(X_eval)).argmax(1)
    y_eval = np.asarray(y_eval)
    kmax = ks[-1] if ks else 0
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    results = []
    for variant in variants:
        if variant == "base":
            cache["base"] = build_transfer_set(Q, predict_proba, None, 0, "base")
        else:
            cache[variant] = build_transfer_set(Q, predict_proba, explain, kmax, variant)
    n = len(Q)
    for arch in architectures:
        layers = tuple(hidden_layers) if arch == "known" else (*hidden_layers, hidden_layers[-1])
        for variant in variants:
            Xt, yt = cache[variant]
            for k in [0] if variant == "base" else ks:
                if variant == "base":
                    idx = np.arange(n)
                else:  # queries, then the first k answers of each block of kmax
                    blocks = (len(Xt) - n) // max(kmax, 1)
                    idx = np.concatenate([np.arange(n)] + [n + b * kmax + np.arange(k) for b in range(blocks)])
                s = train_surrogate(Xt[idx], yt[idx], layers, max_iter=max_iter, random_state=random_state)
                pred = s.predict(X_eval)
                results.append(
                    ExtractionResult(
                        variant,
                        int(k),
                        arch,
                        float(np.mean(pred == y_eval)),
                        float(np.mean(pred == y_target)),
                        int(len(idx)),
                    )
                )
    return results
