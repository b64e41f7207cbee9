"""DP logistic regression is Chaudhuri et al.'s objective perturbation, and its exact privacy loss stays within epsilon.

``dp_audit.objective_perturbation`` computes the privacy loss L(w) of any output exactly (its module docstring);
pure epsilon-DP is L <= epsilon everywhere. diffprivlib's ``LogisticRegression`` as it is (the intercept outside
the L2 term and outside ``data_norm``) breaks that bound; ``DPLogisticModel`` (unit rows, the intercept a
regularised column) keeps it, for neighbours that replace a row and, with epsilon / 2, for ones that add one.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from recourse_privacy.dp_audit.objective_perturbation import ObjectivePerturbation, worst_privacy_loss
from recourse_privacy.models.dp import DPLogisticModel, unit_rows


def _data(n: int = 200, radius: float = 0.8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two features within ``radius`` of 0, labels from the first; the canary (1, 0) lies outside them."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X *= radius / np.linalg.norm(X, axis=1).max()
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(float)


def _with_intercept(X: np.ndarray) -> np.ndarray:
    return np.hstack([X, np.ones((len(X), 1))])


def test_dp_logistic_releases_the_noise_of_chaudhuri_algorithm_2():
    """Every fitted model fixes its noise, b = -grad of the unperturbed objective; its norm must be Gamma(d + 1,
    2 / epsilon') in both of the paper's branches (epsilon 1: epsilon' = 0.554; epsilon 0.3: Delta's branch,
    epsilon' = 0.15). A scale 1.5x off is rejected by the same test (its power)."""
    X, y = _data(radius=1.0)
    Z, q = unit_rows(X, 1.0)
    for eps in (1.0, 0.3):
        mech = ObjectivePerturbation.as_diffprivlib_runs(eps, 1.0, 3)
        norms = []
        for k in range(200):
            m = DPLogisticModel(epsilon=eps, random_state=k).fit(X, y)
            norms.append(np.linalg.norm(mech.noise(np.r_[m.coef_, m.intercept_] * q, Z, y)))
        assert stats.kstest(norms, stats.gamma(3, scale=mech.scale).cdf).pvalue > 0.01
        assert stats.kstest(norms, stats.gamma(3, scale=1.5 * mech.scale).cdf).pvalue < 1e-3
        assert (mech.gamma > 0) == (eps == 0.3)


def test_the_log_determinant_is_the_jacobian_of_the_noise():
    """d b_D / d w = -H_D(w): finite differences of ``noise`` against ``log_det_hessian``, with and without the
    intercept in the L2 term."""
    X, y = _data(n=30)
    Z = _with_intercept(X)
    w = np.array([1.5, -0.7, 0.3])
    for pen in (True, False):
        mech = ObjectivePerturbation.as_diffprivlib_runs(0.3, 2.0, 3, intercept_penalized=pen)
        h = 1e-6
        J = np.column_stack([(mech.noise(w + h * e, Z, y) - mech.noise(w - h * e, Z, y)) / (2 * h) for e in np.eye(3)])
        assert abs(np.linalg.slogdet(-J)[1] - mech.log_det_hessian(w, Z)) < 1e-6


def test_the_privacy_loss_of_dp_logistic_stays_within_epsilon_and_diffprivlibs_as_it_is_does_not():
    """D holds 200 rows within norm 0.8 and the canary (1, 0) labelled 0; D' lacks it (add/remove) or holds (-1, 0)
    labelled 1 instead (replace). diffprivlib as it is, at the output w = (a, 0, -a) with a = 100 (the canary on the
    boundary, every other row decided with a score <= -20, so nothing but the canary curves the unregularised
    intercept's direction), has a privacy loss far above epsilon: no pure epsilon-DP. DPLogisticModel's mechanism,
    searched from 6 starts at radii 30 and 300, stays within epsilon (replace) and epsilon / 2 (add/remove), the
    bounds of the paper's proof."""
    X, y = _data()
    canary, other = np.array([[1.0, 0.0]]), np.array([[-1.0, 0.0]])
    for eps in (1.0, 4.0):
        plain = ObjectivePerturbation.as_diffprivlib_runs(eps, 1.0, 3, intercept_penalized=False)
        D, D2 = (_with_intercept(np.vstack([X, canary])), np.r_[y, 0.0]), (_with_intercept(X), y)
        assert plain.privacy_loss(np.array([100.0, 0.0, -100.0]), D, D2) > 3 * eps

        ours = ObjectivePerturbation.as_diffprivlib_runs(eps, 1.0, 3)
        pairs = {
            "add": ((unit_rows(np.vstack([X, canary]), 1.0)[0], np.r_[y, 0.0]), (unit_rows(X, 1.0)[0], y)),
            "replace": (
                (unit_rows(np.vstack([X, canary]), 1.0)[0], np.r_[y, 0.0]),
                (unit_rows(np.vstack([X, other]), 1.0)[0], np.r_[y, 1.0]),
            ),
        }
        for relation, (A, B) in pairs.items():
            bound = eps / 2 if relation == "add" else eps
            for radius in (30.0, 300.0):
                for first, second in ((A, B), (B, A)):
                    worst, _ = worst_privacy_loss(ours, first, second, radius, starts=6, random_state=0)
                    assert worst <= bound + 1e-9, (eps, relation, radius, worst)
