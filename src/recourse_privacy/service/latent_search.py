"""DPC's latent counterfactual search on a published release, in numpy, for serving (Yang et al. 2022, sec. 4.2).

The same computation as :meth:`recourse_privacy.dpc.DPCExplainer.explain` for the release a
bundle serves (a dense-sigmoid autoencoder, a linear binary classifier, inputs already in
[0, 1]): per query, from the target prototype ``c``, Adam on ``delta`` minimises

    alpha * CE(f(x'), 1) + beta * ||x' - x||_p + gamma * ||Enc(x') - c||_p,   x' = Dec(c + delta),

and keeps the valid iterate (``f(x') > 0``) of least loss, else the last iterate. The gradients
are written out (the chain rule through the sigmoid layers) and Adam is torch's default
(Kingma and Ba 2015: betas 0.9 and 0.999, eps 1e-8, bias-corrected), so a whole batch costs a
few small matrix products per step: torch's autograd spends milliseconds per step on its own
bookkeeping at these sizes (a 20-feature, 20-10 autoencoder), which made a served answer cost
seconds. ``tests/test_service.py`` checks the result against the torch explainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit

__all__ = ["LatentSearch", "load_latent_search"]

_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


def _layers(z, name: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The (weight, bias) pairs of the torch ``Sequential`` saved under ``name.<index>.weight|bias``."""
    idx = sorted({int(k.split(".")[1]) for k in z.files if k.startswith(name + ".")})
    return tuple((np.asarray(z[f"{name}.{i}.weight"], np.float64), np.asarray(z[f"{name}.{i}.bias"])) for i in idx)


def _forward(layers, x: np.ndarray) -> list[np.ndarray]:
    acts = [x]
    for W, b in layers:
        acts.append(expit(acts[-1] @ W.T + b))
    return acts


def _backward(layers, acts: list[np.ndarray], g: np.ndarray) -> np.ndarray:
    """dL/d(input) of a dense-sigmoid stack from dL/d(output)."""
    for (W, _), a in zip(reversed(layers), reversed(acts[1:])):
        g = (g * a * (1.0 - a)) @ W
    return g


def _norm_and_grad(x: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Row norms and their gradients (0 where the norm is 0, as torch's subgradient)."""
    if p == 1:
        return np.abs(x).sum(1), np.sign(x)
    n = np.sqrt((x * x).sum(1))
    return n, np.divide(x, n[:, None], out=np.zeros_like(x), where=n[:, None] > 0)


@dataclass(frozen=True)
class LatentSearch:
    """A published DPC release as arrays: the autoencoder's layers, the prototypes and the search's parameters."""

    encoder: tuple
    decoder: tuple
    prototypes: np.ndarray
    alpha: float
    beta: float
    gamma: float
    norm: str
    lr: float
    max_iter: int

    def search(
        self, U: np.ndarray, coef: np.ndarray, intercept: float, target: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """Counterfactuals (in [0, 1]) of the rows ``U`` for the linear classifier ``U @ coef + intercept`` (class 1
        when positive), searched from prototype ``target``; and whether each is valid (the class is ``target``)."""
        U = np.asarray(U, np.float64)
        n = len(U)
        sign = 1.0 if target == 1 else -1.0
        c = np.broadcast_to(self.prototypes[target], (n, self.prototypes.shape[1]))
        p = 1 if self.norm == "l1" else 2
        delta, m, v = np.zeros_like(c), np.zeros_like(c), np.zeros_like(c)
        best = np.full(n, np.inf)
        out = np.zeros_like(U)
        found = np.zeros(n, bool)
        w = np.asarray(coef, np.float64)
        for it in range(self.max_iter + 1):
            dec = _forward(self.decoder, c + delta)
            up = dec[-1]
            s = sign * (up @ w + intercept)  # the target class's logit minus the other's
            d_norm, d_grad = _norm_and_grad(up - U, p)
            enc = _forward(self.encoder, up)
            e_norm, e_grad = _norm_and_grad(enc[-1] - c, p)
            loss = self.alpha * np.logaddexp(0.0, -s) + self.beta * d_norm + self.gamma * e_norm
            better = (s > 0) & (loss < best)
            best[better], out[better], found[better] = loss[better], up[better], True
            if it == self.max_iter:
                break
            g_up = (self.alpha * sign * (expit(s) - 1.0))[:, None] * w + self.beta * d_grad
            g_up += _backward(self.encoder, enc, self.gamma * e_grad)
            g = _backward(self.decoder, dec, g_up)
            t = it + 1
            m = _BETA1 * m + (1 - _BETA1) * g
            v = _BETA2 * v + (1 - _BETA2) * g * g
            delta = delta - (self.lr / (1 - _BETA1**t)) * m / (np.sqrt(v) / np.sqrt(1 - _BETA2**t) + _EPS)
        out[~found] = up[~found]
        return out, found


def load_latent_search(path: Path, meta: dict) -> LatentSearch:
    """The release in ``path / "dpc.npz"`` with the search parameters of ``meta`` (``dpc.json``)."""
    with np.load(path / "dpc.npz", allow_pickle=False) as z:
        encoder, decoder = _layers(z, "encoder"), _layers(z, "decoder")
        prototypes = np.asarray(z["prototypes"], np.float64)
    s = meta["search"]
    return LatentSearch(encoder, decoder, prototypes, float(s["alpha"]), float(s["beta"]), float(s["gamma"]),
                        str(s["norm"]), float(s["lr"]), int(s["max_iter"]))  # fmt: skip
