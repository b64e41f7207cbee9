"""The functional mechanism of Zhang, Zhang, Xiao, Yang and Winslett (2012), written once.

An objective that is a sum over tuples of a polynomial in the parameters w is written by its
coefficients; for the degree-2 objectives here (linear regression, and logistic regression
through its second-order Taylor expansion around 0)::

    f_D(w) = w^T M w + alpha^T w + beta,   M = sum_i M_i,  alpha = sum_i alpha_i

The mechanism (Zhang et al. 2012, Algorithm 1) adds i.i.d. Laplace(Delta / epsilon) noise to
every coefficient (each of the d^2 entries of M and the d entries of alpha), where Delta is the
L1 sensitivity of the coefficient vector (Lemma 1: 2 max_t sum_phi |lambda_phi,t|), and
minimises the noisy objective. The noisy quadratic can be unbounded below (M + noise not
positive definite); as in the authors' code it is made bounded by post-processing, which costs
no budget: symmetrise, add ``regularization`` * I (default 5 sqrt(2) Delta / epsilon, five
standard deviations of the noise) and drop the eigen-directions whose eigenvalue is at most
``trim_tol`` (spectral trimming), then solve in the kept directions.

Sensitivities (x with every attribute in [-1, 1], the intercept column included in d):

- linear regression, y in [-1, 1]: Delta = 2 (1 + 2d + d^2) = 2 (d + 1)^2 with the constant
  term y^2 counted (the paper's example), 2 d^2 + 4 d without it (the authors' code);
- logistic regression, y in {0, 1}: Delta = d^2 / 4 + 3 d (paper and code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import as_generator, check_binary_labels, check_epsilon, check_matrix

__all__ = [
    "FMFit",
    "QuadraticObjective",
    "fm_linear_regression",
    "fm_logistic_regression",
    "functional_mechanism",
    "linear_regression_objective",
    "linear_regression_sensitivity",
    "logistic_regression_objective",
    "logistic_regression_sensitivity",
    "per_tuple_coefficients",
    "perturb_coefficients",
    "solve_quadratic",
]


@dataclass(frozen=True)
class QuadraticObjective:
    """f(w) = w^T M w + alpha^T w + beta, the sum over tuples of a degree-2 polynomial in w."""

    M: np.ndarray
    alpha: np.ndarray
    beta: float = 0.0

    def __call__(self, w: np.ndarray) -> float:
        """The objective's value at ``w``."""
        w = np.asarray(w, dtype=np.float64)
        return float(w @ self.M @ w + self.alpha @ w + self.beta)

    @property
    def d(self) -> int:
        return int(self.alpha.shape[0])


@dataclass(frozen=True)
class FMFit:
    """What one run of the functional mechanism released and how.

    ``coef``: the minimiser of the (noisy, regularised, trimmed) objective; ``epsilon`` (inf:
    no noise, the non-private minimiser); ``sensitivity`` Delta; ``noise_scale`` Delta /
    epsilon (the Laplace b, standard deviation sqrt(2) b); ``regularization`` the lambda
    added to the diagonal; ``n_trimmed`` how many eigen-directions were dropped.
    """

    coef: np.ndarray
    epsilon: float
    sensitivity: float
    noise_scale: float
    regularization: float
    n_trimmed: int
    fit_intercept: bool = True

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """x^T w (with the intercept column appended when fitted with one)."""
        X = check_matrix(X)
        return _with_intercept(X, self.fit_intercept) @ self.coef


def _with_intercept(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    return np.hstack([X, np.ones((len(X), 1))]) if fit_intercept else X


def _check_unit_box(X: np.ndarray) -> None:
    if X.size and np.abs(X).max() > 1 + 1e-12:
        j = int(np.argmax(np.abs(X).max(axis=0)))
        raise InvalidInputError(
            f"X: the functional mechanism's sensitivity assumes every attribute in [-1, 1]; "
            f"column {j} reaches {np.abs(X[:, j]).max():.4g} (scale with public bounds first)"
        )


def linear_regression_objective(X: np.ndarray, y: np.ndarray, *, fit_intercept: bool = True) -> QuadraticObjective:
    """sum_i (y_i - x_i^T w)^2 as coefficients: M = X^T X, alpha = -2 X^T y, beta = sum y^2."""
    X = check_matrix(X)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise InvalidInputError(f"y has {y.shape[0]} values but X has {X.shape[0]} rows")
    _check_unit_box(X)
    if y.size and np.abs(y).max() > 1 + 1e-12:
        raise InvalidInputError(
            f"y: linear regression under the functional mechanism needs y in [-1, 1]; "
            f"got |y| up to {np.abs(y).max():.4g}"
        )
    Xb = _with_intercept(X, fit_intercept)
    return QuadraticObjective(Xb.T @ Xb, -2.0 * Xb.T @ y, float(y @ y))


def logistic_regression_objective(X: np.ndarray, y: np.ndarray, *, fit_intercept: bool = True) -> QuadraticObjective:
    """Zhang et al.'s degree-2 Taylor form of the logistic loss: M = X^T X / 8, alpha = X^T (1/2 - y), beta = n log 2."""
    X = check_matrix(X)
    y = check_binary_labels(y, n=X.shape[0]).astype(np.float64)
    _check_unit_box(X)
    Xb = _with_intercept(X, fit_intercept)
    return QuadraticObjective(Xb.T @ Xb / 8.0, Xb.T @ (0.5 - y), float(len(y) * math.log(2.0)))


def linear_regression_sensitivity(d: int, *, count_constant: bool = True) -> float:
    """Delta for linear regression with d coefficients: 2 (d + 1)^2 (constant counted) or 2 d^2 + 4 d."""
    return float(2 * (d + 1) ** 2 if count_constant else 2 * d * d + 4 * d)


def logistic_regression_sensitivity(d: int) -> float:
    """Delta for the Taylor-expanded logistic loss with d coefficients: d^2 / 4 + 3 d (Zhang et al. 2012)."""
    return float(d * d / 4.0 + 3 * d)


def per_tuple_coefficients(kind: str, x: np.ndarray, y: float) -> np.ndarray:
    """The coefficient vector (constant, alpha, vec(M)) one tuple contributes; its L1 norm is what Lemma 1 bounds."""
    x = np.asarray(x, dtype=np.float64)
    if kind == "linear":
        return np.concatenate([[y * y], -2.0 * y * x, np.outer(x, x).ravel()])
    if kind == "logistic":
        return np.concatenate([[math.log(2.0)], (0.5 - y) * x, np.outer(x, x).ravel() / 8.0])
    raise InvalidInputError(f"kind must be 'linear' or 'logistic'; got {kind!r}")


def perturb_coefficients(
    objective: QuadraticObjective, sensitivity: float, epsilon: float, random_state=None
) -> QuadraticObjective:
    """Algorithm 1, step 2: Laplace(sensitivity / epsilon) on each entry of M (d^2) and alpha (d)."""
    eps = check_epsilon(epsilon)
    if not np.isfinite(sensitivity) or sensitivity <= 0:
        raise InvalidInputError(f"sensitivity must be a finite number > 0; got {sensitivity!r}")
    rng = as_generator(random_state)
    b = sensitivity / eps
    d = objective.d
    return QuadraticObjective(
        objective.M + rng.laplace(0.0, b, (d, d)), objective.alpha + rng.laplace(0.0, b, d), objective.beta
    )


def solve_quadratic(
    objective: QuadraticObjective, *, regularization: float = 0.0, trim_tol: float = 1e-8
) -> tuple[np.ndarray, int]:
    """argmin of w^T (M_sym + reg I) w + alpha^T w over the eigen-directions with eigenvalue > ``trim_tol``.

    Returns (w, number of directions trimmed). With M positive definite and no regularisation
    this is the exact minimiser -M^{-1} alpha / 2.
    """
    M = 0.5 * (objective.M + objective.M.T) + float(regularization) * np.eye(objective.d)
    lam, Q = np.linalg.eigh(M)
    keep = lam > trim_tol
    g = -0.5 * (Q[:, keep].T @ objective.alpha) / lam[keep]
    return Q[:, keep] @ g, int((~keep).sum())


def functional_mechanism(
    objective: QuadraticObjective,
    sensitivity: float,
    epsilon: float,
    *,
    regularization: float | str | None = "authors",
    trim_tol: float = 1e-8,
    random_state=None,
    fit_intercept: bool = True,
) -> FMFit:
    """Minimise the objective under epsilon-DP (Zhang et al. 2012, Algorithm 1, with their post-processing).

    ``epsilon`` = inf returns the non-private minimiser (no noise, no regularisation).
    ``regularization``: "authors" (5 sqrt(2) Delta / epsilon), a number >= 0, or None (0).
    """
    if isinstance(epsilon, (int, float)) and not isinstance(epsilon, bool) and epsilon == math.inf:
        w, trimmed = solve_quadratic(objective, trim_tol=trim_tol)
        return FMFit(w, math.inf, float(sensitivity), 0.0, 0.0, trimmed, fit_intercept)
    eps = check_epsilon(epsilon)
    noisy = perturb_coefficients(objective, sensitivity, eps, random_state)
    b = sensitivity / eps
    if regularization == "authors":
        reg = 5.0 * math.sqrt(2.0) * b
    elif regularization is None:
        reg = 0.0
    elif isinstance(regularization, (int, float)) and not isinstance(regularization, bool) and regularization >= 0:
        reg = float(regularization)
    else:
        raise InvalidInputError(f"regularization must be 'authors', a number >= 0 or None; got {regularization!r}")
    w, trimmed = solve_quadratic(noisy, regularization=reg, trim_tol=trim_tol)
    return FMFit(w, eps, float(sensitivity), b, reg, trimmed, fit_intercept)


def fm_linear_regression(
    X: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    *,
    fit_intercept: bool = True,
    count_constant: bool = True,
    random_state=None,
    **kwargs,
) -> FMFit:
    """epsilon-DP linear regression by the functional mechanism (attributes in [-1, 1], y in [-1, 1])."""
    obj = linear_regression_objective(X, y, fit_intercept=fit_intercept)
    return functional_mechanism(
        obj,
        linear_regression_sensitivity(obj.d, count_constant=count_constant),
        epsilon,
        random_state=random_state,
        fit_intercept=fit_intercept,
        **kwargs,
    )


def fm_logistic_regression(
    X: np.ndarray, y: np.ndarray, epsilon: float, *, fit_intercept: bool = True, random_state=None, **kwargs
) -> FMFit:
    """epsilon-DP logistic regression by the functional mechanism on the Taylor-expanded loss (y in {0, 1})."""
    obj = logistic_regression_objective(X, y, fit_intercept=fit_intercept)
    return functional_mechanism(
        obj,
        logistic_regression_sensitivity(obj.d),
        epsilon,
        random_state=random_state,
        fit_intercept=fit_intercept,
        **kwargs,
    )
