"""The setting that Pentyala et al. (2023), Tables 2 and 3, share: features, public bounds, split and model.

Adult and HELOC with the paper's five features, min-max scaled with PUBLIC domain bounds (not the
data's min and max), the paper's DP logistic regression (diffprivlib, epsilon_f = 1 on Adult, 3 on
HELOC, trained on the whole training split), graphs of 2,000 (Adult) and 1,851 (HELOC) sampled
training points and the queries the model rejects. Read by
:mod:`~recourse_privacy.reproductions.pentyala2023` (Table 2),
:mod:`~recourse_privacy.reproductions.pentyala2023_table3` (Table 3) and
:mod:`~recourse_privacy.reproductions.pentyala2023_audit` (the membership game).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from recourse_privacy.data import load_dataset
from recourse_privacy.models.dp import DPLogisticModel
from recourse_privacy.privrecourse import PublicScaler
from recourse_privacy.validation import derive_seed

__all__ = ["BOUNDS", "FEATURES", "Pentyala2023Split", "Reading", "dp_model", "load_split", "printer"]

FEATURES = {
    "adult": ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week"),
    "heloc": (
        "ExternalRiskEstimate",
        "MSinceOldestTradeOpen",
        "AverageMInFile",
        "NetFractionRevolvingBurden",
        "NetFractionInstallBurden",
    ),
}
#: public bounds from domain knowledge (not the data's min and max)
BOUNDS = {
    "adult": ([17, 1, 0, 0, 1], [90, 16, 99999, 4356, 99]),  # UCI's documented ranges
    "heloc": ([0, 0, 0, 0, 0], [100, 840, 420, 300, 600]),  # a score 0-100; months (70 years); percents
}
MODEL_EPSILON = {"adult": 1.0, "heloc": 3.0}
N_GRAPH = {"adult": 2000, "heloc": None}  # HELOC: 25% of each class of the training split (1,851)
N_QUERIES = {"adult": 266, "heloc": None}  # HELOC: every rejected point of its 25% test sample


@dataclass(frozen=True)
class Reading:
    """A method as run in the reproduction: a registered recourse method and its parameters."""

    method: str
    params: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Pentyala2023Split:
    """One run's data in [0, 1]^5 (public bounds): the training split, the graph's sample, the test sample."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_graph: np.ndarray
    y_graph: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def scaler(name: str) -> PublicScaler:
    """The min-max scaler of ``name``'s five features with their public bounds."""
    return PublicScaler(*BOUNDS[name], feature_names=FEATURES[name])


def load_split(name: str, data_dir, seed: int) -> Pentyala2023Split:
    """The seeded split of ``name`` (Adult: a stratified 2:1 split and 2,000 graph points; HELOC: 3:1 and 25%)."""
    from sklearn.model_selection import train_test_split

    ds = load_dataset(name, data_dir)
    X = ds.X[list(FEATURES[name])].to_numpy(np.float64)
    y = ds.y
    Z = scaler(name).transform(X)
    rng = np.random.default_rng(seed)
    if name == "adult":  # the paper: 32,561 / 16,281 (UCI's split); ours: a seeded stratified 2:1 split
        Xtr, Xte, ytr, yte = train_test_split(Z, y, test_size=16281 / 48842, stratify=y, random_state=seed)
        g = rng.choice(len(Xtr), N_GRAPH[name], replace=False)
        return Pentyala2023Split(Xtr, ytr, Xtr[g], ytr[g], Xte, yte)
    Xtr, Xte, ytr, yte = train_test_split(Z, y, test_size=0.25, stratify=y, random_state=seed)

    def quarter(Xs, ys):
        idx = np.concatenate(
            [rng.choice(np.flatnonzero(ys == c), int(round(0.25 * (ys == c).sum())), replace=False) for c in (0, 1)]
        )
        return Xs[np.sort(idx)], ys[np.sort(idx)]

    Xg, yg = quarter(Xtr, ytr)
    Xs, ys = quarter(Xte, yte)
    return Pentyala2023Split(Xtr, ytr, Xg, yg, Xs, ys)


def dp_model(split: Pentyala2023Split, epsilon: float, seed: int) -> DPLogisticModel:
    """The paper's DP logistic regression (diffprivlib, rows of norm <= sqrt(5)) on the training split."""
    return DPLogisticModel(epsilon=epsilon, data_norm=float(np.sqrt(5)), random_state=derive_seed(seed, 1)).fit(
        split.X_train, split.y_train
    )


def printer(console) -> Callable[[str], None]:
    """Plain lines on the rich console (no markup, no wrapping) or stdout."""
    if console is None:
        return print
    return lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)
