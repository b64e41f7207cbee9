"""How much of C-CHVAE's work a bound could skip: the measurements behind docs/performance.md's C-CHVAE section.

C-CHVAE (Pawelczyk, Broelemann and Kasneci 2020) scores ``n_search_samples`` decoded latents per
shell for every row still searching; nearly all its time is the model's hidden layer on them. On
the table-2 MLP (one hidden layer of 1,000 ReLU; trained by ``bench_recourse_speed.py``'s
``prepare``), this replays the search of ``--n-points`` rejected non-members and reports, over
every (row, shell) the search visits:

- ``unstable``: the share of hidden units whose pre-activation can change sign over the box of the
  shell's decoder codes ``h`` (interval arithmetic on ``M h + m0``, ``M = V A``; exact for a box). Only
  those need evaluating per sample; the others fold into one linear term per row and shell.
  ``--groups G`` splits each shell's samples into G clusters of directions (k-means on the
  offsets, scikit-learn) with a box each;
- ``crown``: the share of samples that a linear upper bound of the logit over the box (CROWN's
  relaxation, Zhang et al. 2018: chords for unstable units with a positive output weight, ``a u``
  below them for negative ones) cannot rule out, overall and in the shells that find nothing;
- ``accepted``: the share of samples the model accepts;
- ``columns``: the columns a sample's first-layer product would need if the decoder's units that keep their
  sign over the shell's samples were folded (stop 36): a decoder unit active for every sample is linear in the
  latent, one inactive for all is zero, so a sample needs its ``latent_dim`` coordinates plus one column per
  decoder unit that changes sign, against the model's ``d`` inputs (or the decoder's ``q`` hidden units,
  C-CHVAE's screen where ``q < d``);
- ``--bf16``: the first layer's product at the search's block shape (256 rows of 300 samples' blocks, the
  model's width) in float32 and in bfloat16, GFLOP/s in one torch thread (what a bfloat16 screen could gain
  before its error bound and re-checks).

    python benchmarks/bench_cchvae_bounds.py [--datasets heloc adult] [--n-points 300] [--groups 1 4 16 32] [--bf16]
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def replay(path: Path, n_points: int, seed: int):
    """The fitted C-CHVAE, its search's shells per row, the search seed and the pieces of the folded network."""
    from recourse_privacy import recourse
    from recourse_privacy.models.torch_utils import linear_chain

    with open(path, "rb") as f:
        data = pickle.load(f)
    model, Xq = data["model"], data["X_query"]
    X = Xq[model.predict(Xq) == 0][:n_points]
    method = recourse.fit_for(recourse.CCHVAE(random_state=seed), data["X_train"], data["y_train"], model)
    res = method.generate(model, X)
    vae = method.vae_
    A, a0 = vae.linear_head()
    layers = linear_chain(model.module_)
    (V, v0), (w, b) = [(W_.double().numpy(), b_.double().numpy()) for W_, b_ in layers]
    first = vae.decoder_[0]
    net = {
        "M": V @ A,
        "m0": V @ a0 + v0,
        "w": w[0],
        "b": float(b[0]),
        "W1": first.weight.numpy(),
        "P": vae.encode(X) @ first.weight.numpy().T + first.bias.numpy(),
        "d": V.shape[1],
    }
    return method, res.n_iter, method._begin(model), net


def measure(method, n_iter: np.ndarray, seed: int, net: dict, groups: int) -> dict:
    """The shares described in the module docstring, over every (row, shell) the search visits."""
    from sklearn.cluster import KMeans

    from recourse_privacy.recourse.base import NORM_ORD
    from recourse_privacy.recourse.growing_spheres import shell_draws

    p = NORM_ORD[method.norm]

    M, m0, w, b = net["M"], net["m0"], net["w"], net["b"]
    last = np.where(n_iter > 0, n_iter, method.max_iter)
    keys = ("units", "unstable", "samples", "open", "accepted", "fail_samples", "fail_open", "row_shells", "columns")
    tally = dict.fromkeys(keys, 0.0)
    for shell in range(int(last.max())):
        rows = np.flatnonzero(last > shell)
        offsets = shell_draws(seed, shell, method.n_search_samples, net["W1"].shape[1], p, method.step)
        pre = net["P"][rows, None, :] + (offsets @ net["W1"].T)[None]  # (m, s, q) decoder pre-activations
        H = np.maximum(pre, 0)  # the decoder codes
        sign_changes = ((pre.min(axis=1) < 0) & (pre.max(axis=1) > 0)).sum(axis=1)
        tally["row_shells"] += len(rows)
        tally["columns"] += float((offsets.shape[1] + sign_changes).sum())
        # the logits, 16 rows at a time (a shell's (rows, samples, units) float64 would be 720 MB)
        exact = np.concatenate([np.maximum(H[i : i + 16] @ M.T + m0, 0) @ w + b for i in range(0, len(H), 16)])
        fail = (n_iter[rows] != shell + 1)[:, None] & np.ones(H.shape[1], bool)
        labels = np.zeros(len(offsets), int)
        if groups > 1:
            unit = offsets / np.abs(offsets).sum(axis=1, keepdims=True)
            labels = KMeans(groups, n_init=1, random_state=0).fit(unit).labels_
        for g in range(groups):
            Hg = H[:, labels == g]
            lo, hi = Hg.min(axis=1), Hg.max(axis=1)
            uc, ur = (lo + hi) / 2 @ M.T + m0, (hi - lo) / 2 @ np.abs(M).T
            low, up = uc - ur, uc + ur
            unstable = (low < 0) & (up > 0)
            tally["unstable"] += float(unstable.sum()) * Hg.shape[1]
            tally["units"] += float(unstable.size) * Hg.shape[1]
            if g == 0 and groups == 1:
                ub = _crown_upper(Hg, M, m0, w, b, low, up, unstable)
                tally["open"] += float((ub >= 0).sum())
                tally["fail_open"] += float((ub >= 0)[fail].sum())
        tally["samples"] += exact.size
        tally["accepted"] += float((exact >= 0).sum())
        tally["fail_samples"] += float(fail.sum())
    return tally


def _crown_upper(H, M, m0, w, b, low, up, unstable) -> np.ndarray:
    """A linear upper bound of ``w . relu(M h + m0) + b`` over the box, at each code (m, s)."""
    active = low >= 0
    chord = np.where(unstable, up / np.where(unstable, up - low, 1.0), 0.0)
    below = np.where(unstable, (up > -low).astype(float), 0.0)
    slope = np.where(active, 1.0, np.where(w > 0, chord, below))
    shift = np.where(unstable & (w > 0), -chord * low, 0.0)
    coef = (slope * w) @ M
    const = (slope * w) @ m0 + shift @ w + b
    return np.einsum("msq,mq->ms", H, coef) + const[:, None]


def first_layer_rates(d: int, width: int, rows: int = 256, repeats: int = 200) -> dict[str, float]:
    """GFLOP/s of ``addmm`` on a (rows, d) block and a (width, d) weight in one torch thread, float32 and bfloat16."""
    import time

    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    gen = torch.Generator().manual_seed(0)
    X, W, b = (
        torch.randn(rows, d, generator=gen),
        torch.randn(width, d, generator=gen),
        torch.randn(width, generator=gen),
    )
    out = {}
    with torch_threads(1):
        for dtype in (torch.float32, torch.bfloat16):
            Xc, Wc, bc = X.to(dtype), W.to(dtype), b.to(dtype)
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                for _ in range(repeats):
                    torch.addmm(bc, Xc, Wc.T)
                best = min(best, (time.perf_counter() - t) / repeats)
            out[str(dtype).removeprefix("torch.")] = 2 * rows * d * width / best / 1e9
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["heloc", "adult"])
    ap.add_argument("--n-points", type=int, default=300)
    ap.add_argument("--groups", nargs="+", type=int, default=[1, 4, 16, 32])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="also time the first layer's product in float32 and bfloat16")
    ap.add_argument("--model-dir", default=str(ROOT / "benchmarks/results/models"))
    args = ap.parse_args()
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_recourse_speed import prepare

    for dataset in args.datasets:
        path = prepare(dataset, Path(args.model_dir), args.seed)
        method, n_iter, seed, net = replay(path, args.n_points, args.seed)
        found = n_iter[n_iter > 0]
        print(
            f"{dataset}: {len(n_iter)} rows, validity {np.mean(n_iter > 0):.3f}, shells mean {found.mean():.1f} "
            f"median {np.median(found):.0f} max {found.max()}; {int(found.sum())} (row, shell) pairs",
            flush=True,
        )
        if args.bf16:
            rates = first_layer_rates(net["d"], net["M"].shape[0])
            print("  first layer, GFLOP/s in one thread: " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()))
        for groups in args.groups:
            t = measure(method, n_iter, seed, net, groups)
            line = f"  groups {groups:3d}: unstable units {t['unstable'] / t['units']:.3f}"
            if groups == 1:
                line += (
                    f"; columns per sample with the decoder's sign-keeping units folded "
                    f"{t['columns'] / t['row_shells']:.1f} (d = {net['d']}, "
                    f"q = {net['W1'].shape[0]})"
                )
                line += (
                    f"; accepted samples {t['accepted'] / t['samples']:.3f}; not ruled out by the linear bound "
                    f"{t['open'] / t['samples']:.3f} (in shells that find nothing {t['fail_open'] / t['fail_samples']:.3f})"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
