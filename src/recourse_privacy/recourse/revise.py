"""REVISE (Joshi et al. 2019): gradient search in a VAE's latent space, batched over all points."""

from __future__ import annotations

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.hyperparams import Bool, Float, Int
from recourse_privacy.recourse.base import RecourseResult, SearchOutput, generate_recourse
from recourse_privacy.recourse.constraints import ActionSet
from recourse_privacy.recourse.registry import register_recourse
from recourse_privacy.recourse.scfe import compact_adam
from recourse_privacy.recourse.vae import VAEBackedMethod, make_vae
from recourse_privacy.validation import check_positive_float, check_positive_int


@register_recourse(
    "revise",
    description="REVISE (Joshi et al.): Adam in a VAE's latent space (BCE + lam * L1), batched",
    needs=("gradients", "fitting_data"),
    cost=30,
)
class REVISE(VAEBackedMethod):
    """REVISE (Joshi, Koyejo, Vijitbenjaronk, Kim and Ghosh 2019; a baseline of Yang et al. 2022).

    ``fit`` trains a :class:`~recourse_privacy.recourse.vae.VAE` on the data (the same
    architecture as CCHVAE's). ``generate`` starts from z = encode(x) and runs Adam on
    min_z BCE(f(x'), 1) + lam * ||x' - x||_1 with x' = decode(z) (immutable features copied
    from x, then projected onto the ``action_set``), for all rows at once. Defaults are
    CARLA's ``revise``: lam ("lambda") 0.5, Adam, lr 0.1, 1,000 iterations; the VAE's in
    ``vae_params``. With ``early_stop`` (default, Joshi et al.'s Algorithm 1: iterate until
    the prediction flips) each row stops at its first valid iterate and leaves the batch
    with its Adam state carried over, so a batch gives each row the trajectory it has alone
    (``batch_size=1``); ``early_stop=False`` is CARLA's variant: run all iterations and keep
    the valid iterate of least loss. Rows never valid keep their last iterate, flagged
    invalid; points the model already accepts are returned unchanged. The VAE is seeded from
    ``random_state`` and a fingerprint of the fitting rows (one independent VAE per world).
    """

    #: every constructor parameter's type and range, checked before any work (recourse_privacy.hyperparams)
    PARAMS = {
        "lam": Float(0, 1e6),
        "lr": Float(0, 100, low_open=True),
        "max_iter": Int(1, 10**7),
        "early_stop": Bool(),
        "batch_size": Int(1, 10**7, optional=True),
    }

    def __init__(
        self,
        *,
        lam: float = 0.5,
        lr: float = 0.1,
        max_iter: int = 1000,
        early_stop: bool = True,
        vae_params: dict | None = None,
        action_set: ActionSet | None = None,
        batch_size: int | None = None,
        random_state=None,
    ):
        if not np.isfinite(lam) or lam < 0:
            raise InvalidInputError(f"lam must be a finite number >= 0; got {lam!r}")
        self.lam = float(lam)
        self.lr = check_positive_float(lr, "lr")
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.early_stop = bool(early_stop)
        self.vae_params = dict(vae_params or {})
        self.action_set = action_set
        self.batch_size = None if batch_size is None else check_positive_int(batch_size, "batch_size")
        self.random_state = random_state
        make_vae(self.vae_params, None)  # fail now on a bad key

    def generate(self, model, X: np.ndarray) -> RecourseResult:
        """Counterfactuals for every row of ``X``; rows without recourse keep their last iterate, flagged invalid."""
        return generate_recourse(
            self,
            model,
            X,
            skip_accepted=True,
            info={"lam": self.lam, "lr": self.lr, "max_iter": self.max_iter, "early_stop": self.early_stop},
        )

    def _feasible(self, xp, x0, torch):
        """Project decoded rows onto the action set (differentiable almost everywhere)."""
        a = self.action_set
        if a is None:
            return xp
        xp = torch.where(torch.as_tensor(a.increasing), torch.maximum(xp, x0), xp)
        lo = torch.minimum(torch.as_tensor(a.lower, dtype=xp.dtype), x0)
        hi = torch.maximum(torch.as_tensor(a.upper, dtype=xp.dtype), x0)
        return torch.minimum(torch.maximum(xp, lo), hi)

    def _search(self, model, X: np.ndarray, module) -> SearchOutput:
        """Adam in the latent space for the rows of ``X``: (counterfactuals, iteration kept, -1 where none)."""
        from recourse_privacy.models.torch_utils import torch_threads

        with torch_threads(1):  # small tensors: a second thread only waits (for a busy core, under load)
            return self._adam(X, module)

    def _adam(self, X: np.ndarray, module) -> SearchOutput:
        """The search of :meth:`_search`, under one thread."""
        import torch
        import torch.nn.functional as F

        vae = self.vae_
        info = {"latent_dim": vae.latent_dim}
        if not len(X):
            return SearchOutput(X.copy(), np.zeros(0, dtype=np.int64), info=info)
        mdtype = next(module.parameters()).dtype
        x0 = torch.as_tensor(X, dtype=torch.float64)
        out = x0.clone()
        n_iter = np.full(len(X), -1, dtype=np.int64)
        best = torch.full((len(X),), float("inf"), dtype=torch.float64)
        rows = torch.arange(len(X))  # original row of each row still searching
        with torch.no_grad():
            z = vae.encode_tensor(x0)
        z = z.clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=self.lr)
        x0a = x0

        def objective(z, x0a):
            xp = self._feasible(vae.decode_tensor(z, x0a), x0a, torch)
            logit = module(xp.to(mdtype)).to(torch.float64)
            return xp, logit, F.softplus(-logit) + self.lam * (xp - x0a).abs().sum(1)

        for it in range(self.max_iter + 1):
            xp, logit, loss = objective(z, x0a)
            ok = logit.detach() >= 0
            if self.early_stop and ok.any():
                out[rows[ok]] = xp.detach()[ok]
                n_iter[rows[ok].numpy()] = it
                keep = ~ok
                if not keep.any():
                    return SearchOutput(out.numpy(), n_iter, info=info)
                z, opt = compact_adam(z, opt, keep)
                rows, x0a = rows[keep], x0a[keep]
                xp, logit, loss = objective(z, x0a)
            elif not self.early_stop:
                better = ok & (loss.detach() < best)
                if better.any():
                    best[better] = loss.detach()[better]
                    out[rows[better]] = xp.detach()[better]
                    n_iter[rows[better].numpy()] = it
            if it == self.max_iter:
                break
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
        missing = torch.as_tensor(n_iter[rows.numpy()] < 0)
        out[rows[missing]] = xp.detach()[missing]
        return SearchOutput(out.numpy(), n_iter, info=info)
