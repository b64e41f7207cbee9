"""The exact privacy loss of objective perturbation at any output: a white-box audit of DP logistic regression.

Objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011, Algorithm 2; diffprivlib's ``Vector``
mechanism) releases the minimiser of, in the sum form diffprivlib's mean form scales to,

    F_D(w) = sum_i l(w; z_i, y_i) + (alpha / 2) ||P w||^2 + (gamma / 2) ||w||^2 + b^T w,

with l the logistic loss, alpha = 1 / C, P the coefficients the L2 term regularises, gamma = n Delta
(0 unless epsilon' <= 0) and noise b of density proportional to exp(-||b|| / scale). The objective is
strictly convex, so an output w fixes the noise that produced it, b_D(w) = -grad(F_D - b^T w)(w), and
the output's density is p(b_D(w)) |det H_D(w)| with H_D the Hessian of F_D (the paper's proof of its
Theorem 9). The privacy loss of w between neighbours D and D' is therefore exact and cheap:

    L(w) = (||b_D'(w)|| - ||b_D(w)||) / scale + log det H_D(w) - log det H_D'(w).

Pure epsilon-DP holds if and only if L(w) <= epsilon at every w, for every pair of neighbours (every w is
an output of positive density). The paper bounds it by epsilon on rows of norm <= 1 with every
coefficient regularised. :func:`worst_privacy_loss` searches outputs for the largest L: diffprivlib's
``LogisticRegression`` as it is (the intercept unregularised, its column outside ``data_norm``) exceeds
its epsilon, and ``DPLogisticModel`` (``models.dp.unit_rows``) does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from recourse_privacy.models.dp import LOGISTIC_SMOOTHNESS
from recourse_privacy.validation import RandomState, as_generator, check_epsilon


@dataclass(frozen=True)
class ObjectivePerturbation:
    """One run of diffprivlib's ``Vector`` mechanism: its regularisation, Delta and noise scale (sum form)."""

    epsilon: float
    epsilon_prime: float
    alpha: float  # the L2 term on the regularised coefficients, 1 / C
    gamma: float  # n Delta: the extra L2 term on every coefficient (0 unless epsilon' <= 0)
    scale: float  # the noise's density is proportional to exp(-||b|| / scale)
    penalized: np.ndarray  # 1 for each coefficient the alpha term regularises, 0 otherwise

    @classmethod
    def as_diffprivlib_runs(
        cls, epsilon: float, C: float, dimension: int, data_sensitivity: float = 1.0, intercept_penalized: bool = True
    ) -> ObjectivePerturbation:
        """The mechanism diffprivlib 0.6 runs (``Vector.randomise``): epsilon' = epsilon - 2 log(1 + c s / alpha).

        ``dimension`` counts every coefficient (the intercept's last); ``intercept_penalized=False`` is diffprivlib's
        ``fit_intercept=True``, whose L2 term leaves the intercept out.
        """
        eps = check_epsilon(epsilon)
        alpha = 1.0 / C
        eps_p = eps - 2.0 * np.log1p(LOGISTIC_SMOOTHNESS * data_sensitivity / alpha)
        gamma = 0.0
        if eps_p <= 0:
            gamma = LOGISTIC_SMOOTHNESS * data_sensitivity / np.expm1(eps / 4.0) - alpha
            eps_p = eps / 2.0
        penalized = np.ones(dimension)
        if not intercept_penalized:
            penalized[-1] = 0.0
        return cls(eps, float(eps_p), alpha, float(gamma), 2.0 * data_sensitivity / eps_p, penalized)

    def noise(self, w: np.ndarray, Z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """b_D(w): the noise under which w minimises F_D (rows ``Z`` with the intercept's column, labels 0/1)."""
        residual = expit(Z @ w) - y
        return -(residual @ Z + self.alpha * self.penalized * w + self.gamma * w)

    def log_det_hessian(self, w: np.ndarray, Z: np.ndarray) -> float:
        """log det H_D(w), the Jacobian of w -> b_D(w)."""
        p = expit(Z @ w)
        H = (Z * (p * (1.0 - p))[:, None]).T @ Z + np.diag(self.alpha * self.penalized + self.gamma)
        return float(np.linalg.slogdet(H)[1])

    def privacy_loss(self, w: np.ndarray, D: tuple[np.ndarray, np.ndarray], D2: tuple[np.ndarray, np.ndarray]) -> float:
        """L(w) = log p(w | D) - log p(w | D2), exact (the module docstring)."""
        b, b2 = self.noise(w, *D), self.noise(w, *D2)
        return float(
            (np.linalg.norm(b2) - np.linalg.norm(b)) / self.scale
            + self.log_det_hessian(w, D[0])
            - self.log_det_hessian(w, D2[0])
        )


def worst_privacy_loss(
    mechanism: ObjectivePerturbation,
    D: tuple[np.ndarray, np.ndarray],
    D2: tuple[np.ndarray, np.ndarray],
    radius: float,
    starts: int = 8,
    random_state: RandomState = None,
) -> tuple[float, np.ndarray]:
    """The largest L(w) over outputs of norm < ``radius`` found from ``starts`` seeded starts (Nelder-Mead).

    A lower bound on the sup: a value above epsilon refutes pure epsilon-DP for the pair (D, D2) exactly, a value
    below it is only what the search found. Outputs are searched through w = u radius tanh(|u| / radius) / |u|.
    """
    rng = as_generator(random_state)
    dim = D[0].shape[1]

    def to_w(u: np.ndarray) -> np.ndarray:
        r = float(np.linalg.norm(u))
        return u * (radius * np.tanh(r / radius) / max(r, 1e-12))

    best, best_w = -np.inf, np.zeros(dim)
    for _ in range(starts):
        res = minimize(
            lambda u: -mechanism.privacy_loss(to_w(u), D, D2),
            rng.normal(size=dim) * radius / 3.0,
            method="Nelder-Mead",
            options={"maxiter": 400 * dim, "xatol": 1e-6, "fatol": 1e-9},
        )
        if np.isfinite(res.fun) and -res.fun > best:
            best, best_w = float(-res.fun), to_w(res.x)
    return best, best_w
