"""Proofs that a latent ball holds no accepted candidate: C-CHVAE skips the shells inside one.

C-CHVAE (:mod:`recourse_privacy.recourse.cchvae`) scores hundreds of decoded samples in every shell
around a point's code, and most shells hold none the model accepts. For a decoder with one hidden
ReLU layer and a model with one hidden ReLU layer (the defaults, and the paper's MLP), a linear
relaxation bounds the model's logit over every decoded point of a ball in the latent space: CROWN
(Zhang, Weng, Chen, Hsieh and Daniel 2018, "Efficient Neural Network Robustness Certification with
General Activation Functions", Sec. 3.2 and Table 1 for ReLU: the upper line through ``(l, 0)`` and
``(u, u)``, the lower line of slope 0 or 1, whichever is closer). Where the bound plus the error of
computing the logit is below zero, no sample of the shells inside the ball can be accepted, and the
search skips them without drawing them into the model: the same counterfactuals, less work.
"""

from __future__ import annotations

import numpy as np

from recourse_privacy.recourse.growing_spheres import Floor

#: relative slack on every float64 quantity of the bound (their rounding is about 1e-16 relative)
_SLACK = 1e-9
#: rows per block of the bound's products (the (width, rows x latent) products stay in cache)
_BLOCK = 64


def _relax(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CROWN's lines for ReLU on ``[lo, hi]``: ``sl * x <= relu(x) <= su * x + iu`` (Zhang et al. 2018, Table 1)."""
    unstable = (lo < 0) & (hi > 0)
    su = np.where(hi <= 0, 0.0, np.where(lo >= 0, 1.0, hi / np.where(unstable, hi - lo, 1.0)))
    iu = np.where(unstable, -su * lo, 0.0)
    sl = np.where(hi <= 0, 0.0, np.where(lo >= 0, 1.0, (hi > -lo).astype(np.float64)))
    return su, iu, sl


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float64 through torch's BLAS (in the caller's torch threads): numpy's, called from two searches'
    threads at once, spent most of the bound's time waiting on its own locks and threads."""
    import torch

    ta, tb = torch.from_numpy(np.asarray(a)), torch.from_numpy(np.asarray(b))
    return (torch.mv(ta, tb) if tb.ndim == 1 else torch.mm(ta, tb)).numpy()


def _dual(V: np.ndarray, p: int) -> np.ndarray:
    """The dual norm of the last axis: the largest of ``v . o`` over ``||o||_p <= 1`` (p = 1: max |v|; p = 2: ||v||_2)."""
    return np.abs(V).max(axis=-1) if p == 1 else np.sqrt((V * V).sum(axis=-1))


class DecodedLogitBound:
    """An upper bound on a one-hidden-layer ReLU model's logit at the decoded points of a latent ball.

    The decoder is ``x = A relu(Wd z + bd) + a0`` (:meth:`~recourse_privacy.recourse.vae.VAE.linear_head`),
    the model ``w2 . relu(W1 x + b1) + b2`` (a :func:`~recourse_privacy.models.torch_utils.linear_chain` of two
    layers), the ball ``||z - code||_p <= r``. The decoder's pre-activations have their exact range (one layer
    of a ball: the centre plus or minus ``r`` times the dual norm of each row of ``Wd``); the model's
    pre-activations ``a = M h + m0`` (``M = W1 A``) are bounded by interval arithmetic; the logit by CROWN back
    through both ReLU layers to the ball. :meth:`upper` is that bound in exact arithmetic; :meth:`proven` adds the
    rounding of what the search computes (the float64 latents and decoding, the cast to the model's dtype, the
    model's own products: :func:`~recourse_privacy.models.torch_utils.chain_rounding_bound`) before it says no
    point is accepted.
    """

    def __init__(self, layers, head: tuple[np.ndarray, np.ndarray], Wd: np.ndarray, bd: np.ndarray,
                 codes: np.ndarray, p: int):  # fmt: skip
        import torch

        (W1, b1), (w2, b2) = ((W.detach().double().cpu().numpy(), b.detach().double().cpu().numpy()) for W, b in layers)
        A, a0 = head
        self.layers, self.codes, self.p = layers, codes, p
        self.Wd, self.bd, self.a0 = Wd, bd, a0
        self.M, self.m0 = W1 @ A, W1 @ a0 + b1
        self.M_abs, self.m0_abs, self.A_abs, self.Wd_abs = np.abs(self.M), np.abs(self.m0), np.abs(A), np.abs(Wd)
        self.w2, self.b2 = w2[0], float(b2[0])
        self.wp = np.maximum(self.w2, 0.0)
        self.wd_dual = _dual(Wd, p)  # how far each decoder unit moves per unit of radius
        # the model's rounding (:meth:`rounding`): |W1|^T |w2|, |b1| . |w2| and Higham's gamma of each layer
        self.v, self.s0 = np.abs(W1).T @ np.abs(self.w2), float(np.abs(b1) @ np.abs(self.w2))
        u = float(torch.finfo(layers[0][0].dtype).eps) / 2  # also the cast of a decoded point to the model's dtype
        self.gam1, self.gam2 = ((k * u) / (1 - k * u) for k in (W1.shape[1] + 1, W1.shape[0] + 1))
        self.cast = u

    def upper(self, rows: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
        """The bound (m,) on the exact logit over the ball around each row's code, and the largest ``|x|`` (m, d) there."""
        ups, xabs = [], []
        for lo in range(0, len(rows), _BLOCK):
            u, x = self._upper(rows[lo : lo + _BLOCK], radius)
            ups.append(u)
            xabs.append(x)
        return np.concatenate(ups), np.concatenate(xabs)

    def proven(self, rows: np.ndarray, radius: float) -> np.ndarray:
        """True (m,) where the model, as a search computes it, rejects every decoded point within ``radius``."""
        up, xabs = self.upper(rows, radius * (1 + _SLACK))  # offsets drawn to a radius may round past it
        return up + self.rounding(xabs) < 0.0

    def rounding(self, xabs: np.ndarray) -> np.ndarray:
        """A bound (m,) on the model's logit as computed (cast to its dtype, its two products) minus the exact logit,
        at points with ``|x| <= xabs`` (m, d): :func:`~recourse_privacy.models.torch_utils.chain_rounding_bound`
        for two layers, whose magnitudes are linear in ``|x|`` (``S = |x| |W1|^T |w2| + |b1| |w2|``), plus the
        cast's ``u |x|`` carried by ``|w2| |W1|``."""
        xv = _mm(xabs, self.v)
        S = xv + self.s0
        err = self.gam1 * S + self.gam2 * ((1 + self.gam1) * S + abs(self.b2))
        return 2.0 * err + (self.cast + _SLACK) * xv

    def _upper(self, rows: np.ndarray, r: float) -> tuple[np.ndarray, np.ndarray]:
        Z = self.codes[rows]
        Wd, M = self.Wd, self.M
        c = _mm(Z, Wd.T) + self.bd  # (m, q): the decoder's pre-activations at the codes
        # their range over the ball (exact for one layer), widened by the float64 latents' and products' rounding
        eps = _SLACK * (_mm(np.abs(Z), self.Wd_abs.T) + np.abs(self.bd) + r * self.wd_dual)
        lo, hi = c - r * self.wd_dual - eps, c + r * self.wd_dual + eps
        su, iu, sl = _relax(lo, hi)
        h_lo, h_hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        xabs = _mm(h_hi, self.A_abs.T) + np.abs(self.a0)  # (m, d): |decoded point| (h >= 0)
        # the model's pre-activations a = M h + m0 (m, width) by intervals, widened by their float64 rounding so
        # that the lines below hold on the whole range (CROWN through the decoder's lines certified about a tenth
        # more shells, but its per-unit products cost more than they saved)
        m = len(rows)
        a_mid = _mm((h_lo + h_hi) / 2, M.T) + self.m0
        rad, amag = np.split(_mm(np.concatenate([(h_hi - h_lo) / 2, h_hi]), self.M_abs.T), [m])
        amag += self.m0_abs  # |a| <= |M| h_hi + |m0|
        rad += _SLACK * amag
        a_lo, a_hi = a_mid - rad, a_mid + rad
        # CROWN's lines for the output ReLUs (Table 1): logit <= g . a + wp . (tu max(-a_lo, 0)) + b2
        tu = np.clip(a_hi / np.maximum(a_hi - a_lo, 1e-300), 0.0, 1.0)  # 1 active, 0 inactive, the chord's slope
        g = np.where(self.w2 >= 0, self.w2 * tu, self.w2 * (a_hi > -a_lo))
        lift = _mm(tu * np.maximum(-a_lo, 0.0), self.wp)
        e = _mm(g, M)  # g . a = e . h + g . m0
        ep, en = np.maximum(e, 0.0), np.minimum(e, 0.0)
        f = ep * su + en * sl  # e . h <= f . u + ep . iu
        up = (
            (f * c).sum(1)
            + r * _dual(_mm(f, Wd), self.p)
            + (np.abs(f) * eps).sum(1)
            + (ep * iu).sum(1)
            + _mm(g, self.m0)
            + lift
            + self.b2
        )
        # the bound's own float64 sums, relative to the magnitudes they add (their rounding is about 1e-16 of them)
        mag = (
            (np.abs(g) * amag).sum(1)
            + (np.abs(e) * h_hi).sum(1)
            + (np.abs(f) * (np.abs(c) + r * self.wd_dual + eps)).sum(1)
            + (ep * iu).sum(1)
            + lift
            + abs(self.b2)
        )
        return up + _SLACK * mag, xabs


def decoded_rejection_floor(model, vae, codes: np.ndarray, p: int) -> Floor | None:
    """``floor(rows, radius)`` for C-CHVAE's search around ``codes`` in the ``p``-norm, or None where it does not apply.

    It applies to a VAE with one hidden decoder layer and no immutable features, and a model whose network is
    ``Linear, ReLU, Linear(., 1)`` (:class:`~recourse_privacy.models.mlp.MLPModel` with one hidden layer).
    """
    from recourse_privacy.models.torch_utils import linear_chain

    head = vae.linear_head()
    torch_module = getattr(model, "torch_module", None)
    if head is None or len(vae.hidden_layers) != 1 or torch_module is None or p not in (1, 2):
        return None
    try:
        layers = linear_chain(torch_module())
    except (AttributeError, NotImplementedError, TypeError):
        return None
    if layers is None or len(layers) != 2:
        return None
    first = vae.decoder_[0]
    bound = DecodedLogitBound(
        layers, head, first.weight.detach().numpy(), first.bias.detach().numpy(), np.asarray(codes, np.float64), p
    )
    return bound.proven
