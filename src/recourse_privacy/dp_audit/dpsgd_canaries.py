"""White-box input-space "dirac" canaries for the DP-SGD MLP (Opacus), many canaries per training run.

The strongest test we can build for :class:`~recourse_privacy.models.dp.DPMLPModel` without changing
its training loop: each canary is ``scale * e_j`` on an input coordinate j that no other row (and
no other canary) uses, so the first-layer column W[:, j] receives the canary's clipped gradient and
DP-SGD's noise, and nothing else: an input-space version of the Dirac gradient canary of Nasr et
al. (2023), a gradient that is zero except on its own coordinates. The auditor is white-box: it knows the
initialisation (seeded) and reads the final weights. Its score for canary j is the move of W[:, j]
along the descent direction of the canary's own loss at the initialisation,

    s_j = < W_final[:, j] - W_init[:, j], -g_j / ||g_j|| >,   g_j = d loss(scale e_j, y_j) / d W[:, j] at W_init,

a one-dimensional projection in which the noise is symmetric (the Gaussian noise, through Adam's
per-coordinate normalisation) and the included canary's clipped gradient adds a positive drift.
Each canary's label is the class the initial model gets wrong (|p - y| >= 1/2: its gradient is
never saturated); this reads only the initialisation, which DP-SGD's analysis allows to be any
fixed value, so the guarantee holds conditionally on it and the choice keeps the audit valid.

Canaries are included independently with probability 1/2 (the one-run audit's assumption, Steinke
et al. 2023) in one run; independent runs pool into one set of scores.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from recourse_privacy.validation import check_positive_float, check_positive_int, derive_seed

__all__ = ["BROKEN_NOISE_FACTOR", "CANARY_SCALE", "dpsgd_canary_scores", "dpsgd_one_run"]

#: the broken DP-SGD's noise multiplier is the calibrated one divided by this
BROKEN_NOISE_FACTOR = 10.0

#: the canary's value on its own coordinate: large enough that its gradient is clipped (norm >= the
#: clipping norm 1) while the initial logit at the canary stays far from saturation
CANARY_SCALE = 10.0

#: the audited network's hidden units (one layer). Adam normalises each coordinate's step, so a canary's score is
#: nearly a sum of signs over the hidden units its point activates (about half): with 4 units a non-member matches a
#: member's signs often enough that the test cannot refute more than about 2.7 even for noise / 10; with 32 it catches
#: that twin up to a claim of 4 (the one-run bound's reach with 5,000 canaries at delta 1e-5 is about 4.2)
HIDDEN_UNITS = 32

#: the private data: this many features (the canaries' coordinates come after them)
N_DATA_FEATURES = 2


@contextlib.contextmanager
def _noise_divided(factor: float):
    """Opacus with the calibrated noise multiplier divided by ``factor`` (a broken DP-SGD), clipping kept."""
    from opacus import PrivacyEngine

    original = PrivacyEngine.make_private_with_epsilon

    def broken(self, *args, **kwargs):
        module, opt, loader = original(self, *args, **kwargs)
        opt.noise_multiplier = opt.noise_multiplier / factor
        return module, opt, loader

    PrivacyEngine.make_private_with_epsilon = broken
    try:
        yield
    finally:
        PrivacyEngine.make_private_with_epsilon = original


def _first_layers(module) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(W1, b1, w2, b2) of a one-hidden-layer logit module, as numpy."""
    import torch

    lin = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    w1, w2 = lin[0], lin[1]
    return (
        w1.weight.detach().numpy().astype(np.float64),
        w1.bias.detach().numpy().astype(np.float64),
        w2.weight.detach().numpy().astype(np.float64).reshape(-1),
        float(w2.bias.detach().numpy()[0]),
    )


def dpsgd_canary_scores(
    epsilon: float,
    include: np.ndarray,
    *,
    seed: int,
    broken: bool = False,
    n_rows: int = 32,
    data_seed: int = 0,
    epochs: int = 4,
) -> np.ndarray:
    """One DP-SGD training with ``len(include)`` dirac canaries (``include[j]``: canary j is trained on).

    Returns the white-box score s_j of every canary (module docstring). The model is the shipped
    ``DPMLPModel`` (one hidden layer of :data:`HIDDEN_UNITS` ReLU, full-batch Poisson sampling, clip 1, delta 1e-5,
    ``epochs`` epochs); ``broken`` divides Opacus' calibrated noise multiplier by
    :data:`BROKEN_NOISE_FACTOR` while the claim stays ``epsilon``.
    """
    import torch

    from recourse_privacy.dp_audit.experiments import dpm_canary_data
    from recourse_privacy.models.dp import DPMLPModel
    from recourse_privacy.models.mlp import MLPModel
    from recourse_privacy.models.torch_utils import torch_threads

    epsilon = check_positive_float(epsilon, "epsilon")
    include = np.asarray(include, dtype=bool).reshape(-1)
    m = check_positive_int(include.size, "number of canaries")
    d = N_DATA_FEATURES + m
    X0, y0, _ = dpm_canary_data(n_rows + 1, N_DATA_FEATURES, 1.0, data_seed)
    X_d = np.hstack([X0[1:], np.zeros((n_rows, m))])
    y_d = y0[1:]
    model = DPMLPModel(
        epsilon=epsilon,
        delta=1e-5,
        hidden_layers=(HIDDEN_UNITS,),
        lr=0.1,
        epochs=epochs,
        batch_size=10**6,
        random_state=seed,
    )
    with torch.random.fork_rng(devices=[]), torch_threads(1):
        W, b, w2, b2 = _first_layers(MLPModel._build(model, d, derive_seed(seed, 0)))
        # the initial model at each canary: pre-activations W[:, j] * scale + b, logit, gradient on W[:, j]
        pre = W[:, N_DATA_FEATURES:].T * CANARY_SCALE + b  # (m, hidden)
        logit = np.maximum(pre, 0.0) @ w2 + b2
        p = 1.0 / (1.0 + np.exp(-logit))
        y_c = (p < 0.5).astype(np.float64)  # the class the initial model gets wrong
        g = ((p - y_c)[:, None] * (pre > 0) * w2[None, :]) * CANARY_SCALE  # d BCE / d W[:, j], (m, hidden)
        norm = np.linalg.norm(g, axis=1)
        direction = np.divide(-g, norm[:, None], out=np.zeros_like(g), where=norm[:, None] > 0)
        rows = np.flatnonzero(include)
        X_c = np.zeros((rows.size, d))
        X_c[np.arange(rows.size), N_DATA_FEATURES + rows] = CANARY_SCALE
        X = np.vstack([X_d, X_c])
        y = np.append(y_d, y_c[rows]).astype(np.int64)
        with warnings.catch_warnings(), _noise_divided(BROKEN_NOISE_FACTOR) if broken else contextlib.nullcontext():
            warnings.simplefilter("ignore")
            model.fit(X, y)
        W_final = _first_layers(model.module_)[0]
    moved = (W_final - W)[:, N_DATA_FEATURES:].T  # (m, hidden)
    return np.einsum("jh,jh->j", moved, direction)


def dpsgd_one_run(
    epsilon: float,
    *,
    broken: bool = False,
    n_canaries: int = 200,
    n_runs: int = 5,
    random_state: int = 0,
    n_rows: int = 32,
    data_seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``n_runs`` independent trainings with ``n_canaries`` dirac canaries each, each included with probability 1/2.

    Returns (scores, member), pooled over the runs: the input of
    :func:`~recourse_privacy.dp_audit.canary_scores.audit_scores` (one-run and f-DP bounds).
    """
    n_canaries = check_positive_int(n_canaries, "n_canaries", minimum=2)
    n_runs = check_positive_int(n_runs, "n_runs")
    rng = np.random.default_rng(derive_seed(random_state, 31))
    scores, member = [], []
    for seed in rng.integers(0, 2**31 - 1, size=n_runs):
        inc = rng.random(n_canaries) < 0.5
        scores.append(
            dpsgd_canary_scores(epsilon, inc, seed=int(seed), broken=broken, n_rows=n_rows, data_seed=data_seed)
        )
        member.append(inc)
    return np.concatenate(scores), np.concatenate(member).astype(np.int64)
