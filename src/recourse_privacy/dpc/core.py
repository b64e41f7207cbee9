"""DPC's class prototypes and latent counterfactual search (Yang et al. 2022, Secs. 4.1-4.2), batched.

:class:`DPCExplainer` is the multi-class engine: ``fit`` maps the training rows to [0, 1] with
public bounds, trains the :class:`~recourse_privacy.dpc.autoencoder.FMAutoencoder` and builds
one prototype per class; ``explain`` searches, for all queries at once,

    min_delta  alpha * CE(f(x'), k) + beta * ||x' - x||_p + gamma * ||Enc(x') - c_k||_p,
    x' = Dec(c_k + delta),  delta initialised at 0 (the search starts at the target prototype),

with Adam, and keeps per query the valid iterate of least loss (the last iterate, flagged
invalid, when none was valid). Targets: ``"specific"`` (a class per query) or
``"nonspecific"`` (binary: the other class; multi-class: the nearest other-class prototype to
Enc(x), dpc.md Sec. 6, reconstructed).

Modes (dpc.md Sec. 11):

- ``faithful``: the paper. Prototypes are the plain class means of Enc(x) over the training
  rows (Eq. 14). Yang et al. call the result epsilon-DP by post-processing, but the means read
  the training data again, so only the autoencoder's weights carry the epsilon; the ledger
  says the prototypes are NOT covered.
- ``hardened``: the prototypes are released with their own budget ``epsilon_prototypes``:
  noisy per-class sums of the codes (in [0, 1]^m: replace-one L1 sensitivity 2m) and noisy
  class counts (sensitivity 2), each Laplace with half of ``epsilon_prototypes``; the
  prototype is sum / max(count, 1). Total epsilon = epsilon + epsilon_prototypes by sequential
  composition; the search then touches only (x, f, Enc, Dec, prototypes). Public bounds are
  required (data-derived bounds are refused).

Neither mode covers the classifier f itself (trained on the same data, used by the search).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.accounting import ReleaseBudget
from recourse_privacy.deprecation import renamed_names
from recourse_privacy.dpc.autoencoder import FMAutoencoder, PublicBounds, check_epsilon_or_inf
from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.validation import (
    check_choice,
    check_matrix,
    check_positive_float,
    check_positive_int,
    derive_seed,
)

__all__ = ["MODES", "DPCExplainer", "DPCExplanation", "Prototypes", "class_prototypes"]

MODES = ("faithful", "hardened")


#: DPC's old public names (its ledger is now the package's one release budget): (the warning, the new object)
RENAMED = {
    "PrivacyLedger": (
        "recourse_privacy.dpc.PrivacyLedger is renamed recourse_privacy.accounting.ReleaseBudget",
        ReleaseBudget,
    )
}
__getattr__ = renamed_names(__name__, RENAMED)


@dataclass(frozen=True)
class Prototypes:
    """One latent prototype per class, with the noise that was added (0 in faithful mode)."""

    centers: np.ndarray
    counts: np.ndarray
    epsilon: float | None = None
    sum_noise_scale: float = 0.0
    count_noise_scale: float = 0.0


def class_prototypes(
    codes: np.ndarray, labels: np.ndarray, n_classes: int, *, epsilon: float | None = None, random_state=None
) -> Prototypes:
    """Class means of the latent codes (Eq. 14); with ``epsilon``, noisy sums / noisy counts (hardened).

    Codes must lie in [0, 1]^m (sigmoid latents), which bounds the replace-one L1 sensitivity of
    the stacked class sums by 2m and of the counts by 2.
    """
    codes = check_matrix(codes, "codes")
    labels = np.asarray(labels).astype(np.int64)
    if codes.size and (codes.min() < 0 or codes.max() > 1):
        raise InvalidInputError("codes: prototypes' sensitivity needs latent codes in [0, 1]")
    m = codes.shape[1]
    onehot = np.eye(n_classes)[labels]
    sums, counts = onehot.T @ codes, onehot.sum(0)
    if epsilon is None:
        if (counts == 0).any():
            raise InvalidInputError(f"labels: class(es) {np.flatnonzero(counts == 0).tolist()} have no training rows")
        return Prototypes(sums / counts[:, None], counts)
    eps = check_epsilon_or_inf(epsilon, "epsilon_prototypes")
    rng = np.random.default_rng(derive_seed(random_state, 11))
    b_sum, b_count = 2.0 * m / (eps / 2), 2.0 / (eps / 2)
    noisy_sums = sums + rng.laplace(0.0, b_sum, sums.shape)
    noisy_counts = counts + rng.laplace(0.0, b_count, counts.shape)
    centers = np.clip(noisy_sums / np.maximum(noisy_counts, 1.0)[:, None], 0.0, 1.0)
    return Prototypes(centers, noisy_counts, eps, b_sum, b_count)


@dataclass(frozen=True)
class DPCExplanation:
    """Counterfactuals for a batch of queries, row-aligned; ``valid``: the model predicts the search's target class.

    ``predicted``: the model's labels of the queries; ``cf_predicted``: of the counterfactuals returned;
    ``specific``: the targets were given (spec.), not chosen per query (n/spec., the nearest other
    prototype's class).
    """

    counterfactuals: np.ndarray
    targets: np.ndarray
    valid: np.ndarray
    n_iter: np.ndarray
    seconds: float
    info: dict = field(default_factory=dict)
    predicted: np.ndarray | None = None
    cf_predicted: np.ndarray | None = None
    specific: bool = True

    @property
    def flip_ratio(self) -> float:
        """Yang et al. (2022), Eq. 20: |Q_flip| / |Q|, the share of queries whose counterfactual gets the required outcome.

        spec.: the model predicts the given class k; n/spec.: it predicts any class other than the
        query's, whichever (the search aims at the nearest other prototype's class, but reaching another
        changed class flips the decision too). Without the labels recorded: the share reaching the target.
        """
        if not len(self.valid):
            return float("nan")
        if self.cf_predicted is None or self.predicted is None:
            return float(self.valid.mean())
        hit = self.cf_predicted == self.targets if self.specific else self.cf_predicted != self.predicted
        return float(np.mean(hit))


class DPCExplainer:
    """Multi-class DPC (see the module docstring); every reconstructed choice a parameter with dpc.md's default.

    ``bounds``: public feature bounds (None: data already in [0, 1]; ``"data"``: the training
    rows' min/max, leaky, faithful mode only). ``prototype_labels``: "true" (y, default) or
    "predicted"... only "true" (the ground truth y, dpc.md Eq. 14 default) is implemented. With
    ``bounds="data"`` queries outside the training range are clipped into it. Search: ``alpha, beta, gamma`` (1.0, 0.5, 0.1), ``norm`` "l2", Adam ``lr``
    0.05, ``max_iter`` 300. Autoencoder: ``ae_epochs`` None (default) trains 50 epochs and at least
    1,000 Adam steps (:class:`~recourse_privacy.dpc.autoencoder.FMAutoencoder`: fewer leave a small
    training set's autoencoder predicting the feature means, and every counterfactual the same point).
    """

    def __init__(
        self,
        *,
        mode: str = "faithful",
        epsilon: float = 1.0,
        epsilon_prototypes: float | None = None,
        bounds=None,
        encoder_layers: Sequence[int] | None = None,
        sensitivity_mode: str = "8d",
        d_mode: str = "safe",
        ae_epochs: int | None = None,
        ae_batch_size: int = 256,
        ae_lr: float = 5e-3,
        alpha: float = 1.0,
        beta: float = 0.5,
        gamma: float = 0.1,
        norm: str = "l2",
        lr: float = 0.05,
        max_iter: int = 300,
        random_state=None,
    ):
        self.mode = check_choice(mode, "mode", MODES)
        self.epsilon = check_epsilon_or_inf(epsilon)
        if epsilon_prototypes is not None and self.mode == "faithful":
            raise InvalidInputError(
                "epsilon_prototypes applies to mode='hardened' (faithful prototypes are not noised)"
            )
        self.epsilon_prototypes = (
            None
            if self.mode == "faithful"
            else check_epsilon_or_inf(
                self.epsilon if epsilon_prototypes is None else epsilon_prototypes, "epsilon_prototypes"
            )
        )
        if isinstance(bounds, str):
            if bounds != "data":
                raise InvalidInputError(f"bounds must be None, (lower, upper) or 'data'; got {bounds!r}")
            if self.mode == "hardened":
                raise InvalidInputError(
                    "bounds='data' reads min/max from the private data; mode='hardened' needs "
                    "public bounds (pass bounds=(lower, upper))"
                )
        self.bounds = bounds
        for name, v in (("alpha", alpha), ("beta", beta), ("gamma", gamma)):
            if not np.isfinite(v) or v < 0:
                raise InvalidInputError(f"{name} must be a finite number >= 0; got {v!r}")
        self.alpha, self.beta, self.gamma = float(alpha), float(beta), float(gamma)
        self.norm = check_choice(norm, "norm", ("l1", "l2"))
        self.lr = check_positive_float(lr, "lr")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.autoencoder = FMAutoencoder(
            encoder_layers=encoder_layers,
            epsilon=self.epsilon,
            sensitivity_mode=sensitivity_mode,
            d_mode=d_mode,
            epochs=ae_epochs,
            batch_size=ae_batch_size,
            lr=ae_lr,
            random_state=random_state,
        )
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X: np.ndarray, y: np.ndarray, n_classes: int | None = None) -> DPCExplainer:
        """Bounds, FM autoencoder, prototypes of classes 0..n_classes-1 (checked before training)."""
        X = check_matrix(X)
        y = np.asarray(y)
        if y.shape != (len(X),) or (len(y) and (y.min() < 0 or not np.all(y == np.round(y)))):
            raise InvalidInputError("y must hold one integer class label >= 0 per row of X")
        y = y.astype(np.int64)
        k = int(y.max()) + 1 if n_classes is None else check_positive_int(n_classes, "n_classes", minimum=2)
        if len(y) and y.max() >= k:
            raise InvalidInputError(f"y has label {int(y.max())} but n_classes={k}")
        self.autoencoder.check_fits(X.shape[1])
        if isinstance(self.bounds, str):
            self.bounds_ = PublicBounds.make(
                (X.min(0), np.where(X.max(0) > X.min(0), X.max(0), X.min(0) + 1)), X.shape[1], clip=True
            )
        else:
            self.bounds_ = PublicBounds.make(self.bounds, X.shape[1])
        U = self.bounds_.to_unit(X)
        self.autoencoder.fit(U)
        codes = self.autoencoder.encode(U)
        eps_p = self.epsilon_prototypes if self.mode == "hardened" else None
        if eps_p == math.inf:
            eps_p = None
        self.prototypes_ = class_prototypes(codes, y, k, epsilon=eps_p, random_state=self.random_state)
        self.n_classes_ = k
        self.n_features_in_ = X.shape[1]
        return self

    @property
    def ledger(self) -> ReleaseBudget:
        """The budget of the fitted explainer's release: one line per released part, what lies outside it.

        Faithful: the autoencoder's epsilon, then the prototypes as a line that is not DP (class
        means re-read the training rows), so ``epsilon_total`` is None. Hardened: autoencoder and
        prototypes, ``epsilon_total`` their sum by sequential composition. Either way the
        classifier the search queries is outside the budget.
        """
        ae = self.autoencoder
        eps_p = self.epsilon_prototypes if self.mode == "hardened" else 0.0
        budget = ReleaseBudget(
            ae.epsilon + eps_p, outside=("the classifier f the search queries (trained on the same data)",)
        )
        if isinstance(self.bounds, str):
            budget.spend("the feature bounds", 0.0, dp=False, note="min/max of the training rows")
        budget.spend("the autoencoder's weights", ae.epsilon, note=ae.guarantee)
        if self.mode == "faithful":
            budget.spend(
                "the prototypes",
                0.0,
                dp=False,
                note="class means re-read the training rows; Yang et al.'s post-processing argument does not apply",
            )
        else:
            budget.spend(
                "the prototypes",
                eps_p,
                note=f"Laplace on class sums and counts, epsilon={eps_p:g}; counterfactuals are post-processing "
                "of these and the queries",
            )
        return budget

    # ------------------------------------------------------------------ explain
    def _check_fitted(self):
        if not hasattr(self, "prototypes_"):
            raise NotFittedError("DPCExplainer is not fitted; call fit(X, y) first")

    def resolve_targets(self, X: np.ndarray, predicted: np.ndarray, targets) -> np.ndarray:
        """Per-query target classes: given ints, or "nonspecific" (other class / nearest other prototype)."""
        self._check_fitted()
        K = self.n_classes_
        predicted = np.asarray(predicted).astype(np.int64)
        if isinstance(targets, str):
            check_choice(targets, "targets", ("nonspecific",))
            if K == 2:
                return 1 - predicted
            codes = self.autoencoder.encode(self.bounds_.to_unit(X))
            dist = ((codes[:, None, :] - self.prototypes_.centers[None]) ** 2).sum(-1)
            dist[np.arange(len(X)), predicted] = np.inf
            return dist.argmin(1)
        t = np.broadcast_to(np.asarray(targets), (len(X),)).astype(np.int64)
        bad = (t < 0) | (t >= K)
        if bad.any():
            raise InvalidInputError(f"targets: class {int(t[bad][0])} is not a class of the model (0..{K - 1})")
        return t.copy()

    def explain(self, X: np.ndarray, logits_fn: Callable, targets="nonspecific", predicted=None) -> DPCExplanation:
        """Counterfactuals for every row of ``X`` (feature scale) at once.

        ``logits_fn``: torch (n, d) feature-scale tensor -> (n, K) logits (differentiable).
        ``predicted``: the model's labels of X (needed for "nonspecific"; computed when None).
        """
        import time

        import torch

        self._check_fitted()
        X = check_matrix(X, n_features=self.n_features_in_)
        U = self.bounds_.to_unit(X, "queries")
        ae = self.autoencoder
        lo = torch.as_tensor(self.bounds_.lower)
        span = torch.as_tensor(self.bounds_.upper - self.bounds_.lower)
        t0 = time.perf_counter()
        if predicted is None:
            with torch.no_grad():
                predicted = logits_fn(torch.as_tensor(X)).argmax(1).numpy() if len(X) else np.zeros(0, np.int64)
        tgt = self.resolve_targets(X, predicted, targets)
        n = len(X)
        if n == 0:
            return DPCExplanation(X.copy(), tgt, np.zeros(0, bool), np.zeros(0, np.int64), 0.0)
        p = 1 if self.norm == "l1" else 2
        c = torch.as_tensor(self.prototypes_.centers[tgt])
        u0 = torch.as_tensor(U)
        tt = torch.as_tensor(tgt)
        delta = torch.zeros_like(c, requires_grad=True)
        opt = torch.optim.Adam([delta], lr=self.lr)
        best = torch.full((n,), math.inf, dtype=torch.float64)
        out = torch.zeros_like(u0)
        n_iter = np.full(n, -1, dtype=np.int64)
        from recourse_privacy.models.torch_utils import torch_threads

        with torch_threads(1):
            n_iter, up = self._adam(ae, c, delta, opt, logits_fn, lo, span, u0, tt, best, out, n_iter, p)
        with torch.no_grad():
            missing = torch.as_tensor(n_iter < 0)
            out[missing] = up[missing]
        cf = self.bounds_.from_unit(out.numpy())
        with torch.no_grad():
            cf_pred = logits_fn(torch.as_tensor(cf)).argmax(1).numpy()
        return DPCExplanation(
            cf,
            tgt,
            n_iter >= 0,
            n_iter,
            time.perf_counter() - t0,
            info={"mode": self.mode, "ledger": self.ledger.to_dict()},
            predicted=np.asarray(predicted).astype(np.int64),
            cf_predicted=cf_pred,
            specific=not isinstance(targets, str),
        )

    def _adam(self, ae, c, delta, opt, logits_fn, lo, span, u0, tt, best, out, n_iter, p):
        """The batched Adam loop; keeps each row's valid iterate of least loss in ``out``."""
        import torch

        for it in range(self.max_iter + 1):
            up = ae.decoder_(c + delta)
            logits = logits_fn(lo + up * span)
            pred_loss = torch.nn.functional.cross_entropy(logits, tt, reduction="none")
            loss = (
                self.alpha * pred_loss
                + self.beta * torch.linalg.vector_norm(up - u0, ord=p, dim=1)
                + self.gamma * torch.linalg.vector_norm(ae.encoder_(up) - c, ord=p, dim=1)
            )
            with torch.no_grad():
                ok = logits.argmax(1) == tt
                better = ok & (loss < best)
                if better.any():
                    best[better] = loss[better]
                    out[better] = up[better]
                    n_iter[better.numpy()] = it
            if it == self.max_iter:
                break
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
        return n_iter, up.detach()
