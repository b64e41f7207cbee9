"""SCFE (Wachter et al. 2018) in PyTorch, batched over all points at once."""

from __future__ import annotations

import copy

import numpy as np

from recourse_privacy.hyperparams import Float, Int
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, check_norm, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.recourse.scfe_stacked import ONE_THREAD_ELEMENTS, WorldPlan
from recourse_privacy.validation import check_positive_int


@register_recourse(
    "scfe", description="Wachter et al. gradient search (Adam, BCE + lam * L1), batched", needs=("gradients",)
)
class SCFE:
    """Wachter et al.'s counterfactual: argmin BCE(f(x'), 1) + lam * ||x' - x||_1 (Pawelczyk et al. 2023, eq. 1).

    Adam on all rows at once; each row stops at its first valid iterate (f(x') >= 0.5), as
    CARLA's implementation does one point at a time. Defaults follow CARLA's ``wachter``:
    lr 0.01, lam 0.01, 1,000 iterations per round; where a round ends without recourse,
    lam drops by ``lam_decay`` (floored at 0, where CARLA lets it go negative) and the search
    goes on, for at most ``max_rounds`` rounds (CARLA stops on a 30 s wall-clock timeout,
    which is not reproducible). The objective is a sum of per-row terms and Adam is
    elementwise, so a batch gives each row the same trajectory as running it alone
    (``batch_size=1``, CARLA's way); finished rows are dropped from the batch with their
    Adam state carried over. ``action_set`` projects every iterate onto the feasible set.
    ``norm="l2"`` puts the (unsquared) L2 distance in the objective instead of the L1.
    """

    #: the search runs on the device of the current ``use_device`` block (recourse_privacy.models.device)
    device_aware = True
    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "lr": Float(0, 100, low_open=True),
        "lam": Float(0, 1e6),
        "max_iter": Int(1, 10**7),
        "lam_decay": Float(0, 1),
        "max_rounds": Int(1, 10_000),
        "batch_size": Int(1, 10**7, optional=True),
    }

    def __init__(
        self,
        *,
        lr: float = 0.01,
        lam: float = 0.01,
        max_iter: int = 1000,
        lam_decay: float = 0.05,
        max_rounds: int = 3,
        norm: str = "l1",
        action_set: ActionSet | None = None,
        batch_size: int | None = None,
    ):
        self.lr = lr
        self.lam = lam
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.lam_decay = lam_decay
        self.max_rounds = check_positive_int(max_rounds, "max_rounds")
        self.norm = check_norm(norm)
        self.action_set = action_set
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X``; rows without recourse keep their last iterate, flagged invalid."""
        return generate_recourse(
            self,
            model,
            X,
            info={
                "lr": self.lr,
                "lam": self.lam,
                "max_iter": self.max_iter,
                "max_rounds": self.max_rounds,
                "norm": self.norm,
            },
        )

    def for_worlds(self, models, queries) -> SCFE:
        """A copy of this method whose searches for ``models[k]`` on the rows ``queries[k][i]`` run for all
        worlds at once (:class:`~recourse_privacy.recourse.scfe_stacked.WorldPlan`, on first use).

        For the reference models of an audit (one architecture, many weights): each call of
        ``generate(models[k], queries[k][i])`` then reads its rows of the stacked search; any other call
        searches as this method does. The copy has the same parameters (and cache key).
        """
        twin = copy.copy(self)
        twin._plan = WorldPlan(self, models, queries)
        return twin

    def _project(self, x, x0, torch):
        a = self.action_set
        if a is None:
            return
        with torch.no_grad():
            imm = torch.as_tensor(a.immutable, device=x.device)
            inc = torch.as_tensor(a.increasing, device=x.device)
            x.copy_(torch.where(imm, x0, x))
            x.copy_(torch.where(inc, torch.maximum(x, x0), x))
            lo = torch.minimum(torch.as_tensor(a.lower, dtype=x.dtype, device=x.device), x0)
            hi = torch.maximum(torch.as_tensor(a.upper, dtype=x.dtype, device=x.device), x0)
            x.copy_(torch.clamp(x, lo, hi))

    def _search(self, model, X: np.ndarray, module) -> SearchOutput:
        """Adam on the rows of ``X``: (counterfactuals, first-valid iteration, -1 where none).

        On the CPU, a batch whose activations are small (:data:`ONE_THREAD_ELEMENTS`) runs in one
        torch thread: its products take microseconds, and a second thread only waits for a core
        (under load, busy-waiting: 20x the CPU time at load 30). Larger batches keep torch's threads.
        """
        from recourse_privacy.models.torch_utils import torch_threads

        plan = getattr(self, "_plan", None)
        planned = plan.lookup(model, X) if plan is not None else None
        if planned is not None:
            return planned
        p = next(module.parameters(), None)
        width = max((m.out_features for m in module.modules() if hasattr(m, "out_features")), default=1)
        if p is not None and p.device.type == "cpu" and len(X) * width <= ONE_THREAD_ELEMENTS:
            with torch_threads(1):
                return self._adam(X, module)
        return self._adam(X, module)

    def _adam(self, X: np.ndarray, module) -> SearchOutput:
        """The search of :meth:`_search`: autograd through ``module``, or for a ReLU chain
        (:func:`~recourse_privacy.models.torch_utils.linear_chain`, the paper's MLPs) its gradient written out."""
        import torch

        from recourse_privacy.models.torch_utils import linear_chain

        if not len(X):
            return SearchOutput(X.copy(), np.zeros(0, dtype=np.int64))
        chain = linear_chain(module)
        if chain is not None:
            return self._adam_chain(X, chain, torch)
        import torch.nn.functional as F

        p = next(module.parameters())
        x0 = torch.as_tensor(X, dtype=p.dtype, device=p.device)
        out = x0.clone()
        n_iter = np.full(len(X), -1, dtype=np.int64)
        rows = torch.arange(len(X), device=p.device)  # original row of each row still searching
        x = x0.clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=self.lr)
        x0a = x0
        lam, it = self.lam, 0
        for _ in range(self.max_rounds):
            for _ in range(self.max_iter):
                z = module(x)
                found = (z >= 0).detach()
                if found.any():
                    out[rows[found]] = x.detach()[found]
                    n_iter[rows[found].cpu().numpy()] = it
                    keep = ~found
                    if not keep.any():
                        return SearchOutput(X + (out - x0).cpu().numpy().astype(np.float64), n_iter)
                    x, opt, rows, x0a = self._compact(x, opt, rows, x0a, keep, torch)
                    z = module(x)
                diff = x - x0a
                cost = diff.abs().sum(1) if self.norm == "l1" else diff.pow(2).sum(1).clamp_min(1e-24).sqrt()
                loss = (F.softplus(-z) + lam * cost).sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                self._project(x, x0a, torch)
                it += 1
            lam = max(lam - self.lam_decay, 0.0)
        with torch.no_grad():
            z = module(x)
        found = z >= 0
        out[rows] = x.detach()
        n_iter[rows[found].cpu().numpy()] = it
        return SearchOutput(X + (out - x0).cpu().numpy().astype(np.float64), n_iter)

    def _adam_chain(self, X: np.ndarray, chain, torch) -> SearchOutput:
        """:meth:`_adam` on a ReLU chain: the same iterates, with the objective's gradient computed in one pass.

        d/dx [softplus(-z) + lam ||x - x0||] = -sigmoid(-z) dz/dx + lam d||x - x0||/dx, with dz/dx from
        :func:`~recourse_privacy.models.torch_utils.chain_logits_and_input_grad` (the norm's derivative as
        autograd takes it: sign(x - x0) for L1; (x - x0) / ||x - x0|| for L2, 0 below its clamp). The
        logits of the iterate that Adam then moves are those the validity check reads, so rows that leave
        the batch cost no second forward pass. Adam is torch's (its defaults, as ``torch.optim.Adam``), one
        fused step on the iterates and their moments held as plain tensors, so a finished row leaves the
        batch by indexing. Equal to the autograd search up to float rounding (tested).
        """
        from torch.optim.adam import adam as adam_step

        from recourse_privacy.models.torch_utils import chain_logits_and_input_grad

        W0 = chain[0][0]
        x0 = torch.as_tensor(X, dtype=W0.dtype, device=W0.device)
        out = x0.clone()
        n_iter = np.full(len(X), -1, dtype=np.int64)
        rows = torch.arange(len(X), device=W0.device)  # original row of each row still searching
        x, x0a = x0.clone(), x0
        m1, m2 = torch.zeros_like(x), torch.zeros_like(x)  # Adam's moments
        step = torch.zeros((), dtype=torch.float32, device=W0.device)  # Adam's shared step count
        lam, it = self.lam, 0
        for _ in range(self.max_rounds):
            for _ in range(self.max_iter):
                z, dz = chain_logits_and_input_grad(chain, x)
                found = z >= 0
                if found.any():
                    out[rows[found]] = x[found]
                    n_iter[rows[found].cpu().numpy()] = it
                    keep = ~found
                    if not keep.any():
                        return SearchOutput(X + (out - x0).cpu().numpy().astype(np.float64), n_iter)
                    x, m1, m2, rows, x0a, z, dz = (t[keep] for t in (x, m1, m2, rows, x0a, z, dz))
                grad = self._objective_grad(z, dz, x - x0a, lam, torch)
                adam_step([x], [grad], [m1], [m2], [], [step], fused=True, amsgrad=False, beta1=0.9, beta2=0.999,
                          lr=self.lr, weight_decay=0.0, eps=1e-8, maximize=False)  # fmt: skip
                self._project(x, x0a, torch)
                it += 1
            lam = max(lam - self.lam_decay, 0.0)
        z, _ = chain_logits_and_input_grad(chain, x)
        found = z >= 0
        out[rows] = x
        n_iter[rows[found].cpu().numpy()] = it
        return SearchOutput(X + (out - x0).cpu().numpy().astype(np.float64), n_iter)

    def _objective_grad(self, z, dz, diff, lam: float, torch):
        """Gradient in x of softplus(-z) + lam * cost(x - x0), row by row, from the logits' gradients ``dz``."""
        grad = dz.mul_(torch.sigmoid(-z).neg_()[:, None])
        if self.norm == "l1":
            return grad.add_(diff.sign_(), alpha=lam)
        sq = diff.pow(2).sum(1, keepdim=True)
        scale = torch.where(sq >= 1e-24, sq.clamp_min(1e-24).rsqrt(), 0.0)
        return grad.add_(diff.mul_(scale), alpha=lam)

    @staticmethod
    def _compact(x, opt, rows, x0a, keep, torch):
        """Drop finished rows, carrying Adam's per-element state of the others."""
        new_x, new_opt = compact_adam(x, opt, keep)
        return new_x, new_opt, rows[keep], x0a[keep]


def compact_adam(param, opt, keep):
    """Rows ``keep`` of the leaf tensor ``param`` as a new leaf, with an Adam optimizer carrying their state.

    For batched per-row searches (SCFE, REVISE): finished rows leave the batch, and the
    others go on exactly as if they had run alone (Adam's moments are per element; its
    step count is shared by all rows, which started together).
    """
    import torch

    new = param.detach()[keep].clone().requires_grad_(True)
    new_opt = torch.optim.Adam([new], lr=opt.param_groups[0]["lr"])
    state = opt.state.get(param)
    if state:
        new_opt.state[new] = {
            "step": state["step"].clone(),
            "exp_avg": state["exp_avg"][keep].clone(),
            "exp_avg_sq": state["exp_avg_sq"][keep].clone(),
        }
    return new, new_opt
