"""`recourse-privacy reproduce dissanayake2024`: model reconstruction from counterfactuals, CCA against ``cf``.

Dissanayake and Dutta (NeurIPS 2024, "Model reconstruction using counterfactual explanations: a
perspective from polytope theory"): the adversary queries a target and, for each query the target
rejects, receives the closest counterfactual whose favourable-class probability is at least a
minimum confidence (one-sided counterfactuals, their main setting). It trains a surrogate on the
queries (with the target's decisions) and the counterfactuals, either as ordinary points labelled
favourable (``cf``, Aivodji et al. 2020) or with the counterfactual clamping loss (``cca``,
:mod:`~recourse_privacy.attacks.cca`). Fidelity is the agreement of surrogate and target on a
held-out reference set D_ref, over query budgets in batches of 20 up to 400, averaged over many
target/surrogate pairs (each pair: a target trained on its own random subset, queries drawn
afresh), with a 95% Student-t interval over the pairs.

Everything is batched: every pair's target is one network of a stack (:func:`fit_surrogates`), the
counterfactual search runs on all pairs at once, and each budget fits all surrogates in one call.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from recourse_privacy.errors import InvalidInputError
from recourse_privacy.reproductions.registry import printer, register_reproduction
from recourse_privacy.validation import as_generator, check_positive_int, derive_seed

__all__ = ["PAPER", "Dissanayake2024Config", "FidelityRow", "closest_counterfactuals", "run_dissanayake2024"]

#: The paper's fidelity figures per dataset and attack. Its text was not available to this project (not in
#: shared/papers; only its abstract and reviews were found), so no number is read off: they stay None rather
#: than guessed. What the paper claims, and what is checked against ours: CCA's fidelity is at least the
#: baseline's at every query count, most clearly at few queries, on every dataset.
PAPER: dict[str, dict[str, dict[int, float] | None]] = {
    d: {"cf": None, "cca": None} for d in ("heloc", "adult", "compas")
}

KNOWN_DIFFERENCES = (
    "The paper's figures are not reproduced beside ours: its text was not available here, and no value was "
    "read off a figure; its qualitative claim is checked instead.",
    "Targets and surrogates are both ReLU networks with hidden layers (20, 10), trained full batch with Adam "
    "(the project's batched trainer); the paper's epochs and learning rates are not known here.",
    "Closest counterfactuals are Wachter et al.'s (2017) L2 search with a hinge at the minimum confidence, then "
    "a bisection along the segment to the query (the closest point on it that still meets the confidence), "
    "not the authors' counterfactual library.",
    "Features are one-hot and min-max scaled to [0, 1] over the whole published dataset, as in the yang2022 "
    "reproduction.",
)


@dataclass(frozen=True)
class Dissanayake2024Config:
    """Sizes and settings (defaults finish in minutes on 2 CPU cores); ``n_pairs`` target/surrogate pairs."""

    datasets: tuple[str, ...] = ("heloc", "adult", "compas")
    hidden: tuple[int, ...] = (20, 10)
    n_target_train: int = 1000
    n_pool: int = 2000
    n_ref: int = 1000
    batch: int = 20
    max_queries: int = 400
    min_confidence: float = 0.7
    n_pairs: int = 10
    target_epochs: int = 300
    surrogate_epochs: int = 300
    cf_steps: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_target_train", "n_pool", "n_ref", "batch", "max_queries", "n_pairs", "cf_steps"):
            check_positive_int(getattr(self, name), name)
        if not 0.5 <= self.min_confidence < 1:
            raise InvalidInputError(f"min_confidence must be in [0.5, 1), got {self.min_confidence}")
        if self.max_queries > self.n_pool:
            raise InvalidInputError(f"max_queries ({self.max_queries}) exceeds the attack pool (n_pool={self.n_pool})")

    @property
    def budgets(self) -> tuple[int, ...]:
        """Query counts: batches of ``batch`` up to ``max_queries``."""
        return tuple(range(self.batch, self.max_queries + 1, self.batch))


@dataclass(frozen=True)
class FidelityRow:
    """One attack at one query count on one dataset: mean fidelity over the pairs with its 95% interval."""

    dataset: str
    attack: str
    queries: int
    fidelity: float
    fidelity_low: float
    fidelity_high: float
    n_pairs: int
    counterfactuals: float  # mean number of counterfactuals received at this budget
    paper: float = float("nan")

    def to_dict(self) -> dict:
        """The CSV row."""
        return asdict(self)


def _forward(h, weights, biases):
    import torch

    for i, (W, b) in enumerate(zip(weights, biases, strict=True)):
        h = torch.baddbmm(b, h, W)
        if i < len(weights) - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def closest_counterfactuals(nets, X: np.ndarray, min_confidence: float, steps: int = 200, lr: float = 0.02):
    """Per network k and row i of ``X`` (K, n, d): the closest point (L2) in [0, 1]^d with favourable-class
    probability >= ``min_confidence``, and whether one was found. Wachter et al.'s (2017) objective
    ||x' - x||^2 + lam * max(0, logit(c) - z(x')), Adam on all rows at once, then 30 bisection steps along
    the segment from x to the result for the closest point on it that still meets the confidence."""
    import torch

    from recourse_privacy.models.torch_utils import torch_threads

    target = math.log(min_confidence / (1 - min_confidence))
    W = tuple(w.detach() for w in nets.weights)
    b = tuple(v.detach() for v in nets.biases)
    x0 = torch.as_tensor(np.asarray(X, np.float32))
    with torch_threads(1):
        delta = torch.zeros_like(x0, requires_grad=True)
        opt = torch.optim.Adam([delta], lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            z = _forward(torch.clamp(x0 + delta, 0.0, 1.0), W, b)
            loss = (delta**2).sum(-1) + 10.0 * torch.relu(target + 0.05 - z)
            loss.sum().backward()
            opt.step()
        with torch.no_grad():
            end = torch.clamp(x0 + delta, 0.0, 1.0)
            ok = _forward(end, W, b) >= target
            lo, hi = torch.zeros(ok.shape), torch.ones(ok.shape)
            for _ in range(30):  # the smallest t with z(x + t (end - x)) >= target
                mid = (lo + hi) / 2
                hit = _forward(x0 + mid.unsqueeze(-1) * (end - x0), W, b) >= target
                hi, lo = torch.where(hit, mid, hi), torch.where(hit, lo, mid)
            cf = x0 + hi.unsqueeze(-1) * (end - x0)
    return cf.numpy().astype(np.float64), ok.numpy()


def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    from recourse_privacy.data import load_dataset
    from recourse_privacy.data.preprocessing import Preprocessor

    ds = load_dataset(name)
    pre = Preprocessor(scaling="minmax", corr_threshold=None)
    return np.clip(pre.fit_transform(ds.X, ds), 0.0, 1.0), np.asarray(ds.y, np.int64)


def _t_interval(v: np.ndarray) -> tuple[float, float, float]:
    from scipy.stats import t

    m = float(v.mean())
    if len(v) < 2:
        return m, m, m
    h = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return m, max(m - h, 0.0), min(m + h, 1.0)


def run_dataset(X: np.ndarray, y: np.ndarray, name: str, cfg: Dissanayake2024Config) -> list[FidelityRow]:
    """Fidelity against queries for ``cf`` and ``cca`` on one dataset (module docstring)."""
    from recourse_privacy.attacks.cca import TransferSet, fit_surrogates
    from recourse_privacy.attacks.query_extraction import SURROGATES, ApiAnswers

    need = cfg.n_target_train + cfg.n_pool + cfg.n_ref
    if len(X) < need:
        raise InvalidInputError(f"{name}: {len(X)} rows, the configuration needs {need}")
    rng = as_generator(derive_seed(cfg.seed, 7))
    perm = rng.permutation(len(X))
    ref, rest = perm[: cfg.n_ref], perm[cfg.n_ref :]
    K = cfg.n_pairs
    tsets, pools = [], []
    for k in range(K):  # each pair: its own target training rows and its own disjoint attack pool
        r = as_generator(derive_seed(cfg.seed, 100 + k)).permutation(rest)
        tr = r[: cfg.n_target_train]
        tsets.append(TransferSet(X[tr], y[tr], np.zeros(len(tr), bool)))
        pools.append(r[cfg.n_target_train : cfg.n_target_train + cfg.max_queries])
    targets = fit_surrogates(tsets, cfg.hidden, epochs=cfg.target_epochs, random_state=derive_seed(cfg.seed, 11))
    Q = np.stack([X[p] for p in pools])  # (K, max_queries, d)
    dec = (_forward_np(targets, Q) >= 0).astype(np.int64)
    cf, ok = closest_counterfactuals(targets, Q, cfg.min_confidence, steps=cfg.cf_steps)
    answers = [ApiAnswers(Q[k], dec[k], cf[k], ok[k] & (dec[k] == 0)) for k in range(K)]
    t_ref = targets.predict(X[ref])  # (K, n_ref)
    rows, order = [], np.arange(cfg.max_queries)
    attacks = ("cf", "cca")
    for b in cfg.budgets:
        sets = [SURROGATES.get(a).obj(answers[k], order, b) for a in attacks for k in range(K)]
        s = fit_surrogates(sets, cfg.hidden, epochs=cfg.surrogate_epochs, random_state=derive_seed(cfg.seed, b))
        pred = s.predict(X[ref]).reshape(len(attacks), K, -1)
        n_cf = float(np.mean([a.cf_ok[:b].sum() for a in answers]))
        for i, a in enumerate(attacks):
            fid = (pred[i] == t_ref).mean(1)
            paper = (PAPER.get(name, {}).get(a) or {}).get(b, float("nan"))
            rows.append(FidelityRow(name, a, b, *_t_interval(fid), K, n_cf, paper))
    return rows


def _forward_np(nets, Q: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return _forward(torch.as_tensor(np.asarray(Q, np.float32)), nets.weights, nets.biases).numpy()


def _plot(rows: list[FidelityRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.dataset for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for a in ("cf", "cca"):
            rr = [r for r in rows if r.dataset == name and r.attack == a]
            q = [r.queries for r in rr]
            ax.plot(q, [r.fidelity for r in rr], label=a)
            ax.fill_between(q, [r.fidelity_low for r in rr], [r.fidelity_high for r in rr], alpha=0.2)
        ax.set(title=name, xlabel="queries", ylabel="fidelity on D_ref")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_dissanayake2024(
    out_dir: Path, *, seeds: list[int] | None = None, console=None, config: Dissanayake2024Config | None = None
) -> list[FidelityRow]:
    """Run it, write ``fidelity.csv`` and ``fidelity.png`` into ``out_dir`` and print ours (paper's)."""
    import pandas as pd

    cfg = config or Dissanayake2024Config()
    if seeds:  # --seeds: how many target/surrogate pairs, and the first seed
        cfg = Dissanayake2024Config(**{**asdict(cfg), "n_pairs": max(len(seeds), 2), "seed": int(seeds[0])})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    log = printer(console)

    rows: list[FidelityRow] = []
    for name in cfg.datasets:
        X, y = _load(name)
        rows += run_dataset(X, y, name, cfg)
        pd.DataFrame([r.to_dict() for r in rows]).to_csv(out_dir / "fidelity.csv", index=False)
    _plot(rows, out_dir / "fidelity.png")
    log(f"Dissanayake and Dutta 2024: fidelity on D_ref, mean [95% interval] over {cfg.n_pairs} pairs (paper)")
    show = sorted(
        {cfg.budgets[0], cfg.budgets[len(cfg.budgets) // 4], cfg.budgets[len(cfg.budgets) // 2], cfg.budgets[-1]}
    )
    for r in rows:
        if r.queries in show:
            paper = "n/a" if math.isnan(r.paper) else f"{r.paper:.3f}"
            log(
                f"  {r.dataset:7s} {r.attack:4s} q={r.queries:4d}: {r.fidelity:.3f} [{r.fidelity_low:.3f}, "
                f"{r.fidelity_high:.3f}] ({paper}); {r.counterfactuals:.0f} counterfactuals"
            )
    log("Known differences:")
    for d in KNOWN_DIFFERENCES:
        log(f"  - {d}")
    return rows


@register_reproduction(
    "dissanayake2024",
    description="Dissanayake and Dutta 2024: surrogate fidelity against counterfactual queries on HELOC, Adult "
    "and COMPAS, the counterfactual clamping attack (CCA) beside the plain counterfactual surrogate",
    expected_time="~15 min on 2 cores",  # estimated from reduced runs on a loaded machine (issue 22 note)
)
def _reproduce(out_dir: Path, *, seeds: list[int] | None = None, console=None) -> None:
    run_dissanayake2024(out_dir, seeds=seeds, console=console)
