"""DPC as a registered recourse method (binary models of the project: target class 1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.dpc.core import DPCExplainer
from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.validation import check_binary_labels, check_positive_int

__all__ = ["DPC"]


@register_recourse(
    "dpc",
    description="DPC (Yang et al. 2022): FM-trained autoencoder, class prototypes, latent "
    "search; mode faithful|hardened",
    needs=("gradients", "fitting_data"),
)
class DPC:
    """Differentially private counterfactuals (Yang et al. 2022) behind the recourse interface.

    Every keyword is a :class:`~recourse_privacy.dpc.core.DPCExplainer` parameter (``mode``,
    ``epsilon``, ``epsilon_prototypes``, ``bounds``, ``encoder_layers``, ``sensitivity_mode``,
    ``d_mode``, ``ae_epochs``, ``ae_batch_size``, ``ae_lr``, ``alpha``, ``beta``, ``gamma``,
    ``norm``, ``lr``, ``max_iter``, ``random_state``). ``fit(X, y, model)`` trains the FM
    autoencoder and the two class prototypes on the owner's (or a shadow's) training rows;
    ``generate`` searches from the class-1 prototype for every rejected row at once. The audit
    works in standardised features: pass public ``bounds`` (or ``bounds="data"`` in faithful
    mode, which the ledger flags as leaky). ``ledger`` states the epsilon and what it covers.
    ``encoder_layers`` None (default) sizes the autoencoder to the feature count
    (:func:`~recourse_privacy.dpc.autoencoder.default_encoder_layers`).

    ``action_set`` (an :class:`~recourse_privacy.recourse.ActionSet`): every counterfactual is
    projected onto it (immutable features back to the factual, increase-only features not
    below it, bounds and one-hot groups valid) by the shared driver
    (:func:`~recourse_privacy.recourse.base.generate_recourse`), and validity is judged after the
    projection. The projection reads only the public action set, the query and the model the
    search already queries: post-processing, at no extra privacy cost.
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
        batch_size: int | None = None,
        action_set=None,
        random_state=None,
    ):
        self.action_set = action_set
        self.params = dict(
            mode=mode,
            epsilon=epsilon,
            epsilon_prototypes=epsilon_prototypes,
            bounds=bounds,
            encoder_layers=encoder_layers,
            sensitivity_mode=sensitivity_mode,
            d_mode=d_mode,
            ae_epochs=ae_epochs,
            ae_batch_size=ae_batch_size,
            ae_lr=ae_lr,
            alpha=alpha,
            beta=beta,
            gamma=gamma,
            norm=norm,
            lr=lr,
            max_iter=max_iter,
            random_state=random_state,
        )
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        self.random_state = random_state
        self.explainer = DPCExplainer(**self.params)  # every parameter checked now, before any training

    def fit(self, X: np.ndarray, y: np.ndarray, model=None) -> DPC:
        """Train the FM autoencoder and the prototypes on ``(X, y)`` (labels 0/1)."""
        y = check_binary_labels(y, n=len(X))
        self.explainer.fit(X, y, n_classes=2)
        self.n_features_in_ = self.explainer.n_features_in_
        return self

    @property
    def ledger(self):
        return self.explainer.ledger

    def _check_fitted(self, X: np.ndarray) -> None:
        if not hasattr(self, "n_features_in_"):
            raise NotFittedError("DPC needs fit(X_train, y_train, model) first (use recourse_privacy.recourse.fit_for)")
        if X.shape[1] != self.n_features_in_:
            raise InvalidInputError(f"X has {X.shape[1]} features; DPC was fitted on {self.n_features_in_}")

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """A counterfactual for every row of ``X`` (rows already accepted are returned unchanged)."""
        e = self.explainer
        return generate_recourse(
            self,
            model,
            X,
            skip_accepted=True,
            info={
                "mode": e.mode,
                "epsilon": e.epsilon,
                "epsilon_prototypes": e.epsilon_prototypes,
                "alpha": e.alpha,
                "beta": e.beta,
                "gamma": e.gamma,
                "norm": e.norm,
                "max_iter": e.max_iter,
            },
        )

    def _search(self, model, X: np.ndarray, module) -> SearchOutput:
        import torch

        dtype = next(module.parameters()).dtype

        def logits_fn(x):
            z = module(x.to(dtype)).to(torch.float64)
            return torch.stack([torch.zeros_like(z), z], 1)

        out = self.explainer.explain(X, logits_fn, targets=np.ones(len(X), np.int64), predicted=np.zeros(len(X)))
        return SearchOutput(
            out.counterfactuals, np.where(out.valid, out.n_iter, -1), info={"epsilon_total": self.ledger.epsilon_total}
        )
