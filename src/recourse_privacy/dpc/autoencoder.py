"""The autoencoder of DPC (Yang et al. 2022, Sec. 4.1) trained with the functional mechanism.

Inputs live in [0, 1]^n (mapped there with PUBLIC bounds, :class:`PublicBounds`). Every layer
is dense + sigmoid, so the input of each hidden layer and the latent code are in [0, 1] and
computed per sample (the paper's "normalisation layer before each hidden layer", without batch
statistics, which would mix records). The decoder mirrors the encoder and ends in a sigmoid.

Training objective (spec dpc.md, Eqs. 7, 11-13 and recipe 5.9, reconstructed): the summed
squared error sum_x sum_j (x_j - x~_j)^2 is a polynomial in the outputs x~_j with per-tuple
coefficients x_j^2 (degree 0), -2 x_j (basis x~_j) and 1 (basis x~_j^2). The functional
mechanism draws, ONCE before training, eta1, eta2 in R^n i.i.d. Laplace(Delta / epsilon) and
minimises the per-sample noisy loss

    l(x) = sum_j [ (-2 x_j + eta1_j / N) x~_j + (1 + eta2_j / N) x~_j^2 ]

with Delta = 8 d (``sensitivity_mode="8d"``, constant term counted; "6d" without it) and d =
max(n, widths) (``d_mode="safe"``) or the largest hidden width (``d_mode="paper"``). Because
x~ is in (0, 1) the noisy objective is bounded and needs no regularisation or trimming.

Caveat (dpc.md Sec. 11.1): x~ depends on the tuple through the encoder, so the coefficients of
the bases are not data-free as Zhang et al.'s theorem assumes; the epsilon of the autoencoder
rests on Yang et al.'s argument, not on the FM theorem. :attr:`FMAutoencoder.guarantee` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError, NotFittedError
from recourse_privacy.validation import (
    check_choice,
    check_epsilon,
    check_matrix,
    check_positive_float,
    check_positive_int,
    derive_seed,
)

__all__ = [
    "COLLAPSED_SPREAD",
    "DEFAULT_EPOCHS",
    "DEFAULT_MIN_STEPS",
    "FMAutoencoder",
    "PublicBounds",
    "check_epsilon_or_inf",
    "default_encoder_layers",
    "fm_autoencoder_sensitivity",
]

SENSITIVITY_MODES = ("8d", "6d")
#: the default training length: DEFAULT_EPOCHS passes over the rows, and at least DEFAULT_MIN_STEPS Adam steps.
#: Counted in epochs alone, a small training set gets few steps (1,000 rows in batches of 256: 200 steps in 50
#: epochs), and the sigmoid autoencoder has not left its first phase, predicting every feature's mean: its codes
#: are one point, its decoder maps every latent to nearly one output, so every DPC counterfactual is the same
#: point and the flip ratio is 0 or 1 (reproduction yang2022 at 1,000 rows). The steps read no data beyond the
#: row count; FM's noise is drawn once whatever the length, so the epsilon does not depend on it.
DEFAULT_EPOCHS = 50
DEFAULT_MIN_STEPS = 1000
#: a decoder whose every output feature varies by less than this (standard deviation, features in [0, 1]) over
#: 256 points drawn uniformly from the latent cube maps the whole latent space to nearly one point: a warning
#: (collapsed decoders measured below 0.01, trained ones above 0.2, on Adult and digits at 360-1,000 rows)
COLLAPSED_SPREAD = 0.02
D_MODES = ("safe", "paper")


def check_epsilon_or_inf(epsilon, name: str = "epsilon") -> float:
    """A finite epsilon > 0, or math.inf meaning "no noise" (the non-private reference)."""
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and epsilon == math.inf:
        return math.inf
    return check_epsilon(epsilon, name)


@dataclass(frozen=True)
class PublicBounds:
    """Per-feature public (a-priori) bounds mapping data to [0, 1]; rows outside them are refused."""

    lower: np.ndarray
    upper: np.ndarray
    #: clip rows outside the bounds instead of refusing them (only for bounds read from the data)
    clip: bool = False

    @classmethod
    def make(cls, bounds, n_features: int, *, clip: bool = False) -> PublicBounds:
        """From None (data already in [0, 1]), a (low, high) pair of scalars or of arrays of ``n_features``."""
        if isinstance(bounds, PublicBounds):
            lo, hi = bounds.lower, bounds.upper
        elif bounds is None:
            lo, hi = 0.0, 1.0
        else:
            try:
                lo, hi = bounds
            except (TypeError, ValueError):
                raise InvalidInputError(f"bounds must be None or a (lower, upper) pair; got {bounds!r}") from None
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n_features,)).copy()
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n_features,)).copy()
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or (hi <= lo).any():
            raise InvalidInputError("bounds: every feature needs finite public bounds with lower < upper")
        return cls(lo, hi, clip)

    def to_unit(self, X: np.ndarray, name: str = "X") -> np.ndarray:
        """(X - lower) / (upper - lower), refusing values outside the declared bounds."""
        X = check_matrix(X, name, n_features=len(self.lower))
        tol = 1e-9 * (self.upper - self.lower)
        out = (X < self.lower - tol) | (X > self.upper + tol)
        if out.any() and not self.clip:
            j = int(np.flatnonzero(out.any(axis=0))[0])
            raise InvalidInputError(
                f"{name}: {int(out.any(axis=1).sum())} row(s) fall outside the declared public bounds (feature {j}: "
                f"[{self.lower[j]:.4g}, {self.upper[j]:.4g}], values {X[:, j].min():.4g}..{X[:, j].max():.4g}); "
                "DPC's sensitivity needs inputs in [0, 1] after scaling with public bounds: declare public bounds "
                "that hold the data (--schema FILE or --bounds COL=LO:HI; Python: bounds=(lower, upper)), or read "
                "them from the data with --bounds-from-data (Python: bounds='data'; not covered by the DP guarantee)"
            )
        return np.clip((X - self.lower) / (self.upper - self.lower), 0.0, 1.0)

    def from_unit(self, U: np.ndarray) -> np.ndarray:
        """The inverse map from [0, 1] back to the feature scale."""
        return self.lower + np.asarray(U, dtype=np.float64) * (self.upper - self.lower)


def default_encoder_layers(n_in: int) -> tuple[int, int]:
    """DPC's default widths for ``n_in`` features: Yang et al.'s (64, 32) for mixed data from 64 features
    on; below, a latent of half the features (at least 1) and a hidden layer twice as wide (at most 64)."""
    if n_in >= 64:
        return (64, 32)
    latent = max(1, n_in // 2)
    return (min(64, 2 * latent), latent)


def fm_autoencoder_sensitivity(
    n_in: int, widths: Sequence[int], *, sensitivity_mode: str = "8d", d_mode: str = "safe"
) -> tuple[float, int]:
    """(Delta, d) of the FM autoencoder's objective: Delta = 8 d or 6 d (dpc.md Eq. 13)."""
    check_choice(sensitivity_mode, "sensitivity_mode", SENSITIVITY_MODES)
    check_choice(d_mode, "d_mode", D_MODES)
    d = max(n_in, *widths) if d_mode == "safe" else max(widths)
    return float((8 if sensitivity_mode == "8d" else 6) * d), int(d)


class FMAutoencoder:
    """Dense sigmoid autoencoder trained with the functional mechanism (see the module docstring).

    ``encoder_layers``: the widths of the encoder's dense layers; the last is the latent size
    (Yang et al.: (64, 32) mixed data; (512, 256, 128, 64) images; (1024, ..., 64) binary).
    None (the default): sized to the input at :meth:`fit` (:func:`default_encoder_layers`: Yang
    et al.'s (64, 32) from 64 features on, else a latent of half the features and a hidden layer
    twice that).
    ``epsilon``: the autoencoder's budget (math.inf: no noise). ``epochs``: passes over the rows; None
    (the default): :data:`DEFAULT_EPOCHS`, or more where that gives fewer than :data:`DEFAULT_MIN_STEPS`
    Adam steps (small training sets); a given number is kept as given. After :meth:`fit`:
    ``sensitivity_``, ``d_``, ``noise_scale_`` (Delta / epsilon), ``n_train_``, ``epochs_`` and ``n_steps_``
    (what ran), ``decoder_spread_`` (a warning where the decoder is nearly constant, :data:`COLLAPSED_SPREAD`).
    """

    def __init__(
        self,
        *,
        encoder_layers: Sequence[int] | None = None,
        epsilon: float = 1.0,
        sensitivity_mode: str = "8d",
        d_mode: str = "safe",
        epochs: int | None = None,
        batch_size: int = 256,
        lr: float = 5e-3,
        random_state=None,
    ):
        self.auto_layers = encoder_layers is None
        if encoder_layers is None:
            self.encoder_layers: tuple[int, ...] = ()
        else:
            layers = tuple(encoder_layers)
            if not layers:
                raise InvalidInputError("encoder_layers must name at least one layer (the last is the latent size)")
            self.encoder_layers = tuple(check_positive_int(w, "encoder_layers") for w in layers)
        self.epsilon = check_epsilon_or_inf(epsilon)
        self.sensitivity_mode = check_choice(sensitivity_mode, "sensitivity_mode", SENSITIVITY_MODES)
        self.d_mode = check_choice(d_mode, "d_mode", D_MODES)
        self.epochs = None if epochs is None else check_positive_int(epochs, "epochs")
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.lr = check_positive_float(lr, "lr")
        self.random_state = random_state

    @property
    def latent_dim(self) -> int:
        return self.encoder_layers[-1]

    def check_fits(self, n_in: int) -> None:
        """Size the default architecture to ``n_in`` features; refuse a given one whose latent code is wider."""
        if self.auto_layers:
            self.encoder_layers = default_encoder_layers(n_in)
            return
        if self.latent_dim > n_in:
            raise InvalidInputError(
                f"encoder_layers: latent size {self.latent_dim} exceeds the {n_in} input features; "
                "an autoencoder's code must not be wider than its input: leave encoder_layers unset (sized to "
                "the features) or pass e.g. --method-param 'dpc.encoder_layers=[{},{}]'".format(
                    *default_encoder_layers(n_in)
                )
            )

    def _build(self, n_in: int, seed: int):
        import torch
        from torch import nn

        from recourse_privacy.models.torch_utils import seeded_linear

        gen = torch.Generator().manual_seed(seed)  # never the global generator (thread-safe: seeded_linear)

        def stack(widths):
            mods = []
            for a, b in zip(widths, widths[1:]):
                mods += [seeded_linear(a, b, gen, torch.float64), nn.Sigmoid()]
            return nn.Sequential(*mods)

        widths = (n_in, *self.encoder_layers)
        return stack(widths), stack(widths[::-1])

    def fit(self, U: np.ndarray) -> FMAutoencoder:
        """Train on rows in [0, 1] (already mapped with public bounds); noise drawn once from ``random_state``."""
        import torch

        from recourse_privacy.models.torch_utils import torch_threads

        U = check_matrix(U, "X")
        if U.size and (U.min() < 0 or U.max() > 1):
            raise InvalidInputError("X: the FM autoencoder needs inputs in [0, 1]; map them with public bounds first")
        n, n_in = U.shape
        if n < 2:
            raise InvalidInputError(f"X: the FM autoencoder needs at least 2 rows; got {n}")
        self.check_fits(n_in)
        self.sensitivity_, self.d_ = fm_autoencoder_sensitivity(
            n_in, self.encoder_layers, sensitivity_mode=self.sensitivity_mode, d_mode=self.d_mode
        )
        seed = derive_seed(self.random_state, 7)
        self.encoder_, self.decoder_ = self._build(n_in, seed)
        rng = np.random.default_rng(derive_seed(self.random_state, 8))
        self.noise_scale_ = 0.0 if self.epsilon == math.inf else self.sensitivity_ / self.epsilon
        eta1 = rng.laplace(0.0, self.noise_scale_, n_in) if self.noise_scale_ else np.zeros(n_in)
        eta2 = rng.laplace(0.0, self.noise_scale_, n_in) if self.noise_scale_ else np.zeros(n_in)
        c1 = torch.as_tensor(eta1 / n)
        c2 = torch.as_tensor(1.0 + eta2 / n)
        Ut = torch.as_tensor(U)
        params = [*self.encoder_.parameters(), *self.decoder_.parameters()]
        opt = torch.optim.Adam(params, lr=self.lr)
        gen = torch.Generator().manual_seed(seed)
        per_epoch = math.ceil(n / self.batch_size)
        self.epochs_ = (
            self.epochs if self.epochs is not None else max(DEFAULT_EPOCHS, math.ceil(DEFAULT_MIN_STEPS / per_epoch))
        )
        self.n_steps_ = self.epochs_ * per_epoch
        with torch_threads(1):
            for _ in range(self.epochs_):
                order = torch.randperm(n, generator=gen)
                for s in range(0, n, self.batch_size):
                    x = Ut[order[s : s + self.batch_size]]
                    xt = self.decoder_(self.encoder_(x))
                    loss = ((-2.0 * x + c1) * xt + c2 * xt * xt).sum(1).mean()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
        for m in (self.encoder_, self.decoder_):
            m.eval()
            m.requires_grad_(False)
        self.n_features_in_ = n_in
        self.n_train_ = n
        self._check_spread()
        return self

    def _check_spread(self) -> None:
        """Set ``decoder_spread_`` and warn where the decoder maps the latent cube to nearly one point.

        The spread is the largest per-feature standard deviation of the decoded outputs of 256 latent
        points drawn uniformly from [0, 1]^m (seeded): it reads the released decoder alone, never the
        training rows, so it costs no privacy. A collapsed decoder makes every DPC counterfactual nearly
        the same point (the flip ratio is then 0 or 1): too few Adam steps, or FM noise per coefficient
        (Delta / (epsilon N)) that swamps the data.
        """
        Z = np.random.default_rng(derive_seed(self.random_state, 9)).uniform(size=(256, self.latent_dim))
        self.decoder_spread_ = float(self.decode(Z).std(axis=0).max())
        if self.decoder_spread_ < COLLAPSED_SPREAD:
            import warnings

            per_row = self.noise_scale_ / self.n_train_
            warnings.warn(
                f"DPC's autoencoder maps its whole latent space to nearly one point (largest spread "
                f"{self.decoder_spread_:.2g} < {COLLAPSED_SPREAD:g}): every counterfactual will be nearly the same "
                f"point. It trained {self.n_steps_} Adam steps on {self.n_train_} rows (ae_epochs: more steps) with "
                f"FM noise Delta / (epsilon N) = {per_row:.3g} per coefficient (above about 0.1 the noise swamps "
                "the data: more rows or a larger epsilon)",
                stacklevel=3,
            )

    @property
    def guarantee(self) -> str:
        """What the autoencoder's epsilon covers, in words."""
        if self.epsilon == math.inf:
            return "no privacy (epsilon = inf: noise-free training)"
        return (
            f"epsilon={self.epsilon:g} for the training data by Yang et al.'s functional-mechanism argument "
            f"(Delta={getattr(self, 'sensitivity_', float('nan')):g}); not covered by Zhang et al.'s theorem, "
            "since the bases depend on the tuple (dpc.md Sec. 11.1)"
        )

    def _check(self):
        if not hasattr(self, "encoder_"):
            raise NotFittedError("FMAutoencoder is not fitted; call fit(X) first")

    def encode(self, U: np.ndarray) -> np.ndarray:
        """Latent codes in (0, 1)^m of rows in [0, 1]."""
        import torch

        self._check()
        with torch.no_grad():
            return self.encoder_(torch.as_tensor(check_matrix(U, n_features=self.n_features_in_))).numpy()

    def decode(self, Z: np.ndarray) -> np.ndarray:
        """Reconstructions in (0, 1)^n of latent codes."""
        import torch

        self._check()
        with torch.no_grad():
            return self.decoder_(torch.as_tensor(np.asarray(Z, dtype=np.float64))).numpy()

    def reconstruction_mse(self, U: np.ndarray) -> float:
        """Mean squared reconstruction error per feature (the paper's Figure 2)."""
        U = check_matrix(U, n_features=getattr(self, "n_features_in_", None))
        return float(np.mean((self.decode(self.encode(U)) - U) ** 2))
