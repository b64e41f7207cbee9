"""The exact privacy loss of DP logistic regression: diffprivlib as it is against DPLogisticModel.

    PYTHONPATH=src python benchmarks/dp_logistic_privacy_loss.py [--eps 0.5 1 2 4] [--starts 6] [--samples 200]

Neighbours: D holds 200 rows within norm 0.8 of 0 (two features, labels from the first, seed 0) and the
canary (1, 0) labelled 0; D' lacks it (add/remove) or holds (-1, 0) labelled 1 instead (replace). For each
mechanism, neighbour relation and epsilon, one markdown row: the privacy loss at the output (a, 0, -a), a = 100
(scaled to the unit rows for DPLogisticModel: the canary on the boundary, every other row decided), the largest
loss found by ``worst_privacy_loss`` (radii 30 and 300, both directions), the bound of Chaudhuri et al.'s proof
(epsilon, or epsilon / 2 for add/remove), and over ``--samples`` outputs trained on D the largest loss and the
fraction above epsilon (DPLogisticModel's own fits; diffprivlib's ``LogisticRegression`` for the other row).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from recourse_privacy.dp_audit.objective_perturbation import ObjectivePerturbation, worst_privacy_loss
from recourse_privacy.models.dp import DPLogisticModel, unit_rows


def _neighbours(rows) -> dict:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    X *= 0.8 / np.linalg.norm(X, axis=1).max()
    y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(float)
    D = (rows(np.vstack([X, [[1.0, 0.0]]])), np.r_[y, 0.0])
    return {
        "add": (D, (rows(X), y)),
        "replace": (D, (rows(np.vstack([X, [[-1.0, 0.0]]])), np.r_[y, 1.0])),
    }, (np.vstack([X, [[1.0, 0.0]]]), np.r_[y, 0.0])


def _sampled(kind: str, eps: float, n: int) -> np.ndarray:
    """Outputs of the mechanism on D, in the coordinates its privacy loss reads (unit rows for ours)."""
    from diffprivlib.models import LogisticRegression

    _, (X, y) = _neighbours(lambda A: A)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(n):
            if kind == "ours":
                m = DPLogisticModel(epsilon=eps, random_state=k).fit(X, y)
                out.append(np.r_[m.coef_, m.intercept_] * unit_rows(X, 1.0)[1])
            else:
                m = LogisticRegression(epsilon=eps, data_norm=1.0, random_state=k).fit(X, y)
                out.append(np.r_[m.coef_.ravel(), m.intercept_])
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--starts", type=int, default=6)
    ap.add_argument("--samples", type=int, default=200)
    args = ap.parse_args()
    kinds = {
        "diffprivlib as it is": ("plain", lambda A: np.hstack([A, np.ones((len(A), 1))]), False, 1.0),
        "DPLogisticModel": ("ours", lambda A: unit_rows(A, 1.0)[0], True, np.sqrt(2.0)),
    }
    print(
        "| mechanism | neighbours | epsilon | loss at the boundary output | largest found | proof's bound | sampled: largest, above epsilon |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (kind, rows, penalized, scale_w) in kinds.items():
        pairs, _ = _neighbours(rows)
        for eps in args.eps:
            mech = ObjectivePerturbation.as_diffprivlib_runs(eps, 1.0, 3, intercept_penalized=penalized)
            outputs = _sampled(kind, eps, args.samples)
            for relation, (A, B) in pairs.items():
                at = mech.privacy_loss(np.array([100.0, 0.0, -100.0]) * scale_w, A, B)
                found = max(
                    worst_privacy_loss(mech, a, b, r, starts=args.starts, random_state=0)[0]
                    for r in (30.0, 300.0)
                    for a, b in ((A, B), (B, A))
                )
                losses = np.array([mech.privacy_loss(w, A, B) for w in outputs])
                bound = eps / 2 if relation == "add" else eps
                print(
                    f"| {name} | {relation} | {eps:g} | {at:.2f} | {max(at, found):.2f} | "
                    f"{bound:g} (proof holds: {'yes' if penalized else 'no'}) | {losses.max():.2f}, "
                    f"{np.mean(losses > eps):.3f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
