"""CADEX (Moore, Hammerla and Watkins 2019): constrained adversarial examples as counterfactuals, batched."""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Float, Int
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.recourse.scfe import compact_adam
from recourse_privacy.validation import check_positive_int


@register_recourse(
    "cadex",
    description="Moore et al. constrained adversarial examples (masked Adam toward the favourable class), batched",
    needs=("gradients",),
)
class CADEX:
    """Moore et al.'s CADEX: Adam on the input toward the favourable class, under a gradient mask.

    The objective is the cross-entropy of the favourable class, softplus(-f(x')) for the
    favourable logit f (a baseline of Yang et al. 2022; no distance term: proximity comes from the
    constrained, early-stopped search). CADEX's constraints act on the gradient, not on the
    iterate:

    1. a mask ``M`` fixed at the first step: immutable features are 0; a feature that may
       only increase is 0 when the first gradient step would decrease it; of the rest only
       the ``n_changed`` features with the largest first-gradient magnitude stay 1 (the
       paper's limit on the number of changed attributes; ``None`` keeps all);
    2. at every step an increase-only feature whose current step would decrease it gets a
       zero gradient (the paper's directional vector ``C``);
    3. the search stops at the first iterate the model accepts (f(x') >= 0).

    Defaults follow the reference implementation's: Adam with learning rate 0.01, at most
    1,000 steps, ``n_changed=5``. Differences: rows run as one batch (Adam is elementwise
    and the loss a sum of per-row terms, so each row follows its own single-point
    trajectory; finished rows leave the batch with their Adam state, as in :class:`SCFE`);
    ``action_set`` ranges are enforced by projecting every iterate (CADEX has no ranges);
    the one-hot rounding of categorical groups is not done (our encoded features carry no
    group structure). A row without recourse keeps its last iterate and is flagged invalid.
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "lr": Float(0, 100, low_open=True),
        "max_iter": Int(1, 10**7),
        "n_changed": Int(1, 10**6, optional=True),
        "batch_size": Int(1, 10**7, optional=True),
    }

    def __init__(
        self,
        *,
        lr: float = 0.01,
        max_iter: int = 1000,
        n_changed: int | None = 5,
        action_set: ActionSet | None = None,
        batch_size: int | None = None,
    ):
        if not lr > 0:
            raise InvalidInputError(f"lr must be > 0; got {lr!r}")
        self.lr = lr
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.n_changed = None if n_changed is None else check_positive_int(n_changed, "n_changed")
        self.action_set = action_set
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X``; rows without recourse keep their last iterate, flagged invalid."""
        return generate_recourse(
            self, model, X, info={"lr": self.lr, "max_iter": self.max_iter, "n_changed": self.n_changed}
        )

    #: the search runs on the device of the current ``use_device`` block (recourse_privacy.models.device)
    device_aware = True

    def _search(self, model, X: np.ndarray, module) -> SearchOutput:
        """Masked Adam on the rows of ``X``: (counterfactuals, first-valid iteration, -1 where none)."""
        import torch
        import torch.nn.functional as F

        if not len(X):
            return SearchOutput(X.copy(), np.zeros(0, dtype=np.int64))
        p = next(module.parameters())
        n, d = X.shape
        x0 = torch.as_tensor(X, dtype=p.dtype, device=p.device)
        out = x0.clone()
        n_iter = np.full(n, -1, dtype=np.int64)
        bounds = _torch_bounds(self.action_set, d, p.dtype, torch, p.device)
        imm, inc = bounds[0], bounds[1]
        # a row's missing values: not moved (else the search leans on them and the projection takes the move back)
        held = torch.as_tensor(self.action_set.held(X), device=p.device) if self.action_set is not None else None
        rows = torch.arange(n, device=p.device)
        x = x0.clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=self.lr)
        x0a, mask = x0, None
        for it in range(self.max_iter + 1):
            z = module(x)
            found = (z >= 0).detach()
            if found.any():
                out[rows[found]] = x.detach()[found]
                n_iter[rows[found].cpu().numpy()] = it
                keep = ~found
                if not keep.any():
                    return SearchOutput(self._exact(X, out, x0), n_iter)
                x, opt = compact_adam(x, opt, keep)
                rows, x0a = rows[keep], x0a[keep]
                mask = mask[keep] if mask is not None else None
                z = module(x)
            if it == self.max_iter:
                break
            loss = F.softplus(-z).sum()
            (grad,) = torch.autograd.grad(loss, x)
            if mask is None:  # the first gradient fixes the mask (Moore et al. 2019)
                mask = self._initial_mask(grad, imm | held[rows] if held is not None else imm, inc, torch)
            step_mask = mask & ~(inc & (grad > 0))  # increase-only: no step that decreases
            x.grad = grad * step_mask
            opt.step()
            _project(x, x0a, bounds, torch)
        out[rows] = x.detach()  # rows still searching keep their last iterate (n_iter stays -1)
        return SearchOutput(self._exact(X, out, x0), n_iter)

    def _exact(self, X: np.ndarray, out, x0) -> np.ndarray:
        """float64 counterfactuals: the factual plus the step taken, so untouched features keep their exact value.

        Continuous: the driver projects onto the structure (groups, integers) and repairs.
        """
        X_cf = X + (out - x0).cpu().numpy().astype(np.float64)
        return self.action_set.actionability.project(X_cf, X) if self.action_set is not None else X_cf

    def _initial_mask(self, grad, imm, inc, torch):
        """The features each row may change (``imm``: (d,) or per row (n, d)), the ``n_changed`` of largest
        gradient among them."""
        mask = ~imm.expand_as(grad) & ~(inc & (grad > 0))
        if self.n_changed is not None and self.n_changed < grad.shape[1]:
            score = torch.where(mask, grad.abs(), torch.full_like(grad, -1.0))
            top = torch.topk(score, self.n_changed, dim=1).indices
            chosen = torch.zeros_like(mask).scatter_(1, top, True)
            mask = mask & chosen
        return mask


def _torch_bounds(action_set: ActionSet | None, d: int, dtype, torch, device=None):
    """(immutable, increasing, lower, upper) as tensors on ``device``; no constraint where ``action_set`` is None."""
    a = action_set or ActionSet.unconstrained(d)
    return (
        torch.as_tensor(a.immutable, device=device),
        torch.as_tensor(a.increasing, device=device),
        torch.as_tensor(a.lower, dtype=dtype, device=device),
        torch.as_tensor(a.upper, dtype=dtype, device=device),
    )


def _project(x, x0, bounds, torch) -> None:
    """In place: ``ActionSet.project`` for tensors (immutable reset, no decrease, ranges widened to hold x0)."""
    imm, inc, lo, hi = bounds
    with torch.no_grad():
        x.copy_(torch.where(imm, x0, x))
        x.copy_(torch.where(inc, torch.maximum(x, x0), x))
        x.copy_(torch.clamp(x, torch.minimum(lo, x0), torch.maximum(hi, x0)))
