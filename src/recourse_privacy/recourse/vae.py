"""A small variational autoencoder for the manifold-based recourse methods (CCHVAE, REVISE)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.recourse.growing_spheres import world_seed
from recourse_privacy.validation import (
    check_matrix,
    check_positive_float,
    check_positive_int,
    derive_seed,
)


class VAE:
    """CARLA's recourse VAE (``VariationalAutoencoder``), seeded, in float64 PyTorch.

    Architecture with the defaults (Pawelczyk et al. 2023, Appendix C.2: 8 latent dimensions, 20 nodes
    in the first and third hidden layers; CARLA ``layers=[d, 20, 8]``):
    encoder ``d_m -> 20 (ReLU) -> mu, log-variance (8 each)``; decoder
    ``8 + d_i -> 20 (ReLU) -> d_m`` (linear output), where ``d_m`` / ``d_i`` count the
    mutable / immutable features given to :meth:`fit`. As in CARLA, only the mutable
    features are encoded, the immutable ones condition the decoder and are copied from the
    factual into every decoded row. Features are standardised internally (mean and standard
    deviation of the fitting data), so any scaling of the input works.

    Training follows CARLA's ``fit``: Adam (``lr`` 1e-3, ``weight_decay`` 1e-6), batches of
    32, ``epochs`` 5, loss = reconstruction + beta * KL summed over the batch, with beta
    annealed linearly as ``epoch * kl_weight / epochs`` (kl_weight 0.3). CARLA's
    reconstruction term is a Bernoulli likelihood on [0, 1]-scaled data (sigmoid output);
    ours is the unit-variance Gaussian likelihood 0.5 * ||x_hat - x||^2 on standardised
    features (linear output), since this project's features are standardised, not in [0, 1].
    """

    def __init__(
        self,
        *,
        latent_dim: int = 8,
        hidden_layers: Sequence[int] = (20,),
        epochs: int = 5,
        lr: float = 1e-3,
        batch_size: int = 32,
        kl_weight: float = 0.3,
        weight_decay: float = 1e-6,
        random_state=None,
    ):
        self.latent_dim = check_positive_int(latent_dim, "latent_dim")
        self.hidden_layers = tuple(check_positive_int(h, "hidden_layers") for h in hidden_layers)
        self.epochs = check_positive_int(epochs, "epochs")
        self.lr = check_positive_float(lr, "lr")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        if kl_weight < 0 or weight_decay < 0:
            raise InvalidInputError(f"kl_weight and weight_decay must be >= 0; got {kl_weight!r}, {weight_decay!r}")
        self.kl_weight = float(kl_weight)
        self.weight_decay = float(weight_decay)
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit(self, X: np.ndarray, mutable: np.ndarray | None = None) -> VAE:
        """Train on the rows of ``X``; ``mutable`` (bool mask, default all) says which features are encoded."""
        import torch

        from recourse_privacy.models.torch_utils import torch_threads

        X = check_matrix(X)
        d = X.shape[1]
        mutable = np.ones(d, bool) if mutable is None else np.asarray(mutable, dtype=bool)
        if mutable.shape != (d,):
            raise InvalidInputError(f"mutable must be a boolean mask of {d} features; got shape {mutable.shape}")
        if not mutable.any():
            raise InvalidInputError("mutable: at least one feature must be mutable for a VAE to encode")
        if len(X) < 2:
            raise InvalidInputError(f"X: a VAE needs at least 2 rows to fit; got {len(X)}")
        self.n_features_in_ = d
        self.mutable_ = mutable
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        seed = derive_seed(self.random_state, 0)
        self._build(seed)
        self._tensors()

        Xs = torch.as_tensor((X - self.mean_) / self.scale_, dtype=torch.float64)
        x_m, x_i = Xs[:, self._mut], Xs[:, self._imm]
        params = [
            *self.encoder_.parameters(),
            *self.mu_.parameters(),
            *self.logvar_.parameters(),
            *self.decoder_.parameters(),
        ]
        opt = torch.optim.Adam(params, lr=self.lr, weight_decay=self.weight_decay)
        gen = torch.Generator().manual_seed(seed)
        with torch_threads(1):  # tiny layers: a second thread only waits (for a busy core, under load)
            self._train(x_m, x_i, opt, gen)
        for module in (self.encoder_, self.mu_, self.logvar_, self.decoder_):
            module.eval()
            module.requires_grad_(False)
        self.fitted_ = True
        return self

    def _train(self, x_m, x_i, opt, gen) -> None:
        """CARLA's training loop (see the class docstring) on the standardised mutable and immutable features."""
        import torch

        self.history_ = []
        n = len(x_m)
        for epoch in range(self.epochs):
            beta = epoch * self.kl_weight / self.epochs
            order = torch.randperm(n, generator=gen)
            total = 0.0
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                h = self.encoder_(x_m[idx])
                mu, logvar = self.mu_(h), self.logvar_(h)
                eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
                z = mu + torch.exp(0.5 * logvar) * eps
                recon = self.decoder_(torch.cat([z, x_i[idx]], dim=1))
                rec = 0.5 * (recon - x_m[idx]).pow(2).sum()
                kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum()
                loss = rec + beta * kld
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.detach().item()
            self.history_.append(total / n)

    def _build(self, seed: int) -> None:
        import torch
        from torch import nn

        from recourse_privacy.models.torch_utils import seeded_linear

        # from a generator of this VAE's own (seeded_linear): the reference worlds' VAEs are fitted side by side in
        # Python threads (attacks/shadow.py), where the global generator re-seeded by each moved every world's VAE
        gen = torch.Generator().manual_seed(seed)

        def linear(n_in: int, n_out: int) -> nn.Linear:
            return seeded_linear(n_in, n_out, gen, torch.float64)

        d_m, d_i = int(self.mutable_.sum()), int((~self.mutable_).sum())
        enc: list[nn.Module] = []
        width = d_m
        for h in self.hidden_layers:
            enc += [linear(width, h), nn.ReLU()]
            width = h
        self.encoder_ = nn.Sequential(*enc)
        self.mu_ = linear(width, self.latent_dim)
        self.logvar_ = linear(width, self.latent_dim)
        dec: list[nn.Module] = []
        width = self.latent_dim + d_i
        for h in reversed(self.hidden_layers):
            dec += [linear(width, h), nn.ReLU()]
            width = h
        dec.append(linear(width, d_m))
        self.decoder_ = nn.Sequential(*dec)

    def _tensors(self) -> None:
        import torch

        self._mut = torch.as_tensor(np.flatnonzero(self.mutable_))
        self._imm = torch.as_tensor(np.flatnonzero(~self.mutable_))
        self._mean = torch.as_tensor(self.mean_, dtype=torch.float64)
        self._scale = torch.as_tensor(self.scale_, dtype=torch.float64)

    def _check_fitted(self) -> None:
        if not getattr(self, "fitted_", False):
            raise NotFittedError("VAE is not fitted; call fit(X) first")

    # ------------------------------------------------------------------ torch API (for gradients)
    def encode_tensor(self, x):
        """Posterior mean of z for a float64 tensor of full rows (n, d)."""
        xs = (x - self._mean) / self._scale
        return self.mu_(self.encoder_(xs[:, self._mut]))

    def decode_tensor(self, z, x=None):
        """Full rows (n, d) decoded from latents ``z`` (n, latent_dim); immutables (and their conditioning) from ``x``."""
        import torch

        if len(self._imm):
            if x is None:
                raise InvalidInputError(
                    "x: decoding needs the factual rows, whose immutable features condition the decoder"
                )
            cond = ((x - self._mean) / self._scale)[:, self._imm]
            out_m = self.decoder_(torch.cat([z, cond], dim=1))
        else:
            out_m = self.decoder_(z)
        out_m = out_m * self._scale[self._mut] + self._mean[self._mut]
        if not len(self._imm):
            return out_m
        return x.index_copy(1, self._mut, out_m)

    # ------------------------------------------------------------------ numpy API
    def encode(self, X: np.ndarray) -> np.ndarray:
        """Posterior means (n, latent_dim) of the rows of ``X``."""
        import torch

        self._check_fitted()
        X = check_matrix(X, n_features=self.n_features_in_)
        with torch.no_grad():
            return self.encode_tensor(torch.as_tensor(X, dtype=torch.float64)).numpy()

    def decode(self, Z: np.ndarray, X: np.ndarray | None = None) -> np.ndarray:
        """Rows (n, d) decoded from ``Z`` (n, latent_dim); ``X`` gives the immutable features where there are any."""
        import torch

        self._check_fitted()
        Z = check_matrix(Z, "Z", n_features=self.latent_dim)
        xt = None
        if X is not None:
            X = check_matrix(X, n_features=self.n_features_in_)
            if len(X) != len(Z):
                raise InvalidInputError(f"X has {len(X)} rows but Z has {len(Z)}")
            xt = torch.as_tensor(X, dtype=torch.float64)
        with torch.no_grad():
            return self.decode_tensor(torch.as_tensor(Z, dtype=torch.float64), xt).numpy()

    def search_decode(self, Z: np.ndarray, X: np.ndarray | None = None) -> np.ndarray:
        """:meth:`decode` without its checks, for latents a search built itself: the same values.

        ``X`` (the factual of each row) is needed only where a feature is immutable
        (:attr:`has_immutables`); a search decodes hundreds of thousands of latents per shell, and
        repeating and checking the factuals for each was a third of C-CHVAE's decoding time.
        """
        import torch

        xt = None if X is None else torch.from_numpy(np.ascontiguousarray(X, dtype=np.float64))
        with torch.no_grad():
            return self.decode_tensor(torch.from_numpy(np.ascontiguousarray(Z, dtype=np.float64)), xt).numpy()

    @property
    def has_immutables(self) -> bool:
        """Whether some features are immutable (copied from the factual and conditioning the decoder)."""
        self._check_fitted()
        return bool(len(self._imm))

    # ------------------------------------------------------------------ the decoder as code -> affine head
    def linear_head(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(A, a0)`` with ``decode(Z) = hidden(Z) @ A.T + a0`` in the data's units; None when a feature is immutable.

        The decoder's output layer and the standardisation are linear, so a decoded row is an
        affine image of the decoder's last hidden layer (q = 20 values by default). Searches
        that score many decoded points fold ``A`` into the model's first layer
        (:meth:`~recourse_privacy.models.base.BaseClassifier.affine_logits`).
        """
        self._check_fitted()
        if len(self._imm):
            return None
        last = self.decoder_[-1]
        W = last.weight.detach().numpy()
        b = last.bias.detach().numpy()
        return self.scale_[:, None] * W, self.scale_ * b + self.mean_

    def hidden(self, Z: np.ndarray) -> np.ndarray:
        """The decoder's last hidden layer (n, q) at the latents ``Z`` (n, latent_dim) (every feature mutable)."""
        import torch

        with torch.no_grad():
            return self.decoder_[:-1](torch.as_tensor(Z, dtype=torch.float64)).numpy()

    def shifted_hidden(self, codes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The last hidden layer at every ``codes[i] + offsets[j]``, float32 (m, s, q), and a bound (m, q) on its error.

        For a decoder with one hidden layer and no immutable features (the default), from two
        small products, ``relu((W c_i + b) + W o_j)``, as Growing Spheres scores its offsets;
        the bound covers the difference to :meth:`hidden` at the float64 latent ``c_i + o_j``
        (the float32 casts and sum: ``4 u32 (|W c_i + b| + max_j |W o_j|)``, and both float64
        evaluations: :meth:`hidden_error`). None for other decoders.
        """
        if len(self.hidden_layers) != 1 or len(self._imm):
            return None
        first = self.decoder_[0]
        W, b = first.weight.detach().numpy(), first.bias.detach().numpy()
        U, V = codes @ W.T + b, offsets @ W.T
        H = np.add(U.astype(np.float32)[:, None, :], V.astype(np.float32)[None])
        np.maximum(H, 0, out=H)
        u32 = np.finfo(np.float32).eps / 2
        z_abs = np.abs(codes) + np.abs(offsets).max(axis=0, initial=0.0)
        h_err = 4 * u32 * (np.abs(U) + np.abs(V).max(axis=0, initial=0.0)) + self.hidden_error(z_abs)
        return H, h_err

    def hidden_error(self, Z_abs: np.ndarray) -> np.ndarray:
        """A bound (n, q) on the difference of two float64 evaluations of :meth:`hidden` at latents with ``|Z| <= Z_abs``.

        Each layer's rounding is at most ``gamma_{k+1} (|W| |input| + |b|)`` (Higham 2002,
        section 3.5) in either evaluation, whatever the order of its sums; differences carry
        through ``|W|`` (ReLU is 1-Lipschitz).
        """
        u = np.finfo(np.float64).eps / 2
        mag, err = np.asarray(Z_abs, dtype=np.float64), np.zeros_like(Z_abs, dtype=np.float64)
        for layer in self.decoder_[:-1]:
            if not hasattr(layer, "weight"):
                continue  # ReLU: magnitudes and differences do not grow
            Wa = layer.weight.detach().abs().numpy()
            k = Wa.shape[1] + 1
            mag = mag @ Wa.T + layer.bias.detach().abs().numpy()
            err = err @ Wa.T + 2.0 * k * u / (1 - k * u) * mag
        return err

    def reconstruct(self, X: np.ndarray) -> np.ndarray:
        """decode(encode(X), X): the VAE's reconstruction of each row."""
        return self.decode(self.encode(X), X)


def make_vae(vae_params: dict | None, random_state) -> VAE:
    """A VAE with ``vae_params`` over the defaults; unknown keys raise a ValueError naming them."""
    params = dict(vae_params or {})
    known = {"latent_dim", "hidden_layers", "epochs", "lr", "batch_size", "kl_weight", "weight_decay"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise InvalidInputError(f"vae_params: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return VAE(**params, random_state=random_state)


class VAEBackedMethod:
    """Shared by CCHVAE and REVISE: ``fit`` trains the method's VAE on the data of its world.

    Subclasses set ``vae_params``, ``action_set`` and ``random_state`` in ``__init__``.
    """

    def fit(self, X: np.ndarray, y=None, model=None):
        """Train the VAE on ``X`` (``y`` and ``model`` are not used: the VAE models the data, not the labels)."""
        X = check_matrix(X)
        mutable = None
        if self.action_set is not None:
            self.action_set.check(X.shape[1])
            mutable = self.action_set.mutable
        self.seed_ = world_seed(self.random_state, X, y)
        self.vae_: VAE = make_vae(self.vae_params, derive_seed(self.seed_, 1)).fit(X, mutable)
        return self

    def _check_fitted(self, X: np.ndarray) -> None:
        """Raise unless the VAE is fitted, on as many features as ``X`` (called by the recourse driver)."""
        if not hasattr(self, "vae_"):
            raise NotFittedError(
                f"{type(self).__name__} is not fitted; call fit(X, y, model) on the model's training data first"
            )
        if X.shape[1] != self.vae_.n_features_in_:
            raise InvalidInputError(f"X has {X.shape[1]} features; the VAE was fitted on {self.vae_.n_features_in_}")
