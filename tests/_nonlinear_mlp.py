"""The small ReLU MLP on a non-linear rule that the shell-search tests search against (Growing Spheres, C-CHVAE)."""

from __future__ import annotations

import numpy as np

from recourse_privacy.models import make_model


def nonlinear_mlp():
    """``(model, X, y)``: 600 seeded rows of 6 features, the rule ``x0 + x1^2 - x2 x3 > 0.5``, a 64-unit MLP on it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 6))
    y = ((X[:, 0] + X[:, 1] ** 2 - X[:, 2] * X[:, 3]) > 0.5).astype(int)
    model = make_model("mlp", hidden_layers=(64,), epochs=30, lr=1e-2, random_state=0).fit(X, y)
    return model, X, y
