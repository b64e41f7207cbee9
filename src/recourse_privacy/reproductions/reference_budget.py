"""`recourse-privacy reproduce reference-budget`: attack strength over reference-model budgets.

Offline CFD-LRT (Pawelczyk et al. 2023, Algorithm 1), online CFD-LRT (LiRA's two-sided test,
Carlini et al. 2022), RMIA on counterfactual distances offline and online (Zarifzadeh, Liu, Shokri
2024) and Loss-LRT offline and online, at 1, 2, 4, 8, 16, 32 and 64 reference models, on synthetic data
(d = 5,000, logistic regression, exact linear recourse: Figure 2's setting) and HELOC (the paper's MLP,
SCFE: Table 2's setting). A budget of B means B trained reference models: B online reference models
(each target in B/2), which also serve the offline attacks (each target's B/2 out-models;
``stages.shares_references``).

Per dataset, the largest budget is trained once (offline and online sets) and the smaller budgets
use its first B models (the keep matrices come in complementary pairs, so every target stays in
exactly half of an even budget's online models); all budgets attack the same targets. Each
dataset's scores are written to ``<out>/<dataset>/scores.npz`` as it finishes and reused on a rerun
(and the reference models' statistics are cached under ``<out>/<dataset>/.cache``), so a killed run
resumes. Output: ``reference_budget.csv`` (one row per dataset, attack and budget) and
``reference_budget.png`` (TPR at FPR 0.01, 0.001 and AUC against the budget, log x, one line per attack).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from recourse_privacy.reproductions.registry import register_reproduction

__all__ = ["ATTACKS", "BUDGETS", "BudgetRow", "BudgetStudy", "GameInfo", "run_reference_budget"]

BUDGETS = (1, 2, 4, 8, 16, 32, 64)
#: measured whole: synthetic d = 5,000 with 64 reference models 61 s (104 CPU s, load 1.3, 2.16 GB peak),
#: HELOC with 64 MLP references 101 s on the quiet machine (stop 34; 665 MB peak; stop 33: 35 min at load 20-24)
EXPECTED_TIME = "~3 min on 2 cores"
#: measured: `reproduce reference-budget-quick` took 153 CPU s (user + sys; one process) on a loaded machine
EXPECTED_TIME_QUICK = "~3 min on 2 cores"
ATTACKS = ("cfd-lrt", "cfd-lrt-online", "rmia-cfd", "rmia-cfd-online", "loss-lrt", "loss-lrt-online")


def _settings(quick: bool) -> dict[str, dict]:
    """The audit configuration of each dataset (AuditConfig fields)."""
    if quick:  # minutes: for tests and a first look
        return {
            "synthetic": dict(dataset="synthetic", n_features=300, model="logistic", recourse="linear", n_members=300),
            "heloc": dict(
                dataset="heloc",
                model="mlp",
                recourse="scfe",
                n_members=300,
                n_nonmembers=300,
                n_adversary=600,
                model_params={"hidden_layers": (32,), "epochs": 20, "lr": 1e-3},
            ),
        }
    return {
        # Figure 2's setting at d = 5,000 (pawelczyk2023-fig2): d = n, the interpolation threshold
        "synthetic": dict(
            dataset="synthetic",
            n_features=5000,
            model="logistic",
            recourse="linear",
            n_members=5000,
            n_nonmembers=5000,
            n_adversary=10000,
        ),
        # Table 2's HELOC setting (pawelczyk2023-table2)
        "heloc": dict(
            dataset="heloc",
            model="mlp",
            recourse="scfe",
            n_members=3000,
            n_nonmembers=3000,
            n_adversary=3800,
            model_params={"lr": 1e-3},
        ),
    }


@dataclass(frozen=True)
class BudgetStudy:
    """What to run: datasets (name -> AuditConfig fields), budgets, attacks, seed."""

    settings: dict = field(default_factory=lambda: _settings(False))
    budgets: tuple[int, ...] = BUDGETS
    attacks: tuple[str, ...] = ATTACKS
    seed: int = 0

    @classmethod
    def quick(cls, datasets: tuple[str, ...] = ("synthetic", "heloc"), budgets=(1, 2, 4, 8)) -> BudgetStudy:
        """A small study that runs in minutes (tests, a first look)."""
        s = _settings(True)
        return cls(settings={k: s[k] for k in datasets}, budgets=tuple(budgets))


@dataclass(frozen=True)
class GameInfo:
    """What one dataset's game was (stored beside its scores in ``scores.npz`` and printed)."""

    n_targets: int
    n_members: int
    train_accuracy: float
    test_accuracy: float
    offline_train_rows: int  # the fewest training rows of an offline reference model
    online_train_rows: int
    population_recourse_queries: dict[str, int]  # attack -> recourse queries on population rows
    timing_seconds: dict[str, float]  # stage -> seconds


@dataclass(frozen=True)
class BudgetRow:
    """One attack on one dataset at one budget of reference models (a row of ``reference_budget.csv``)."""

    dataset: str
    attack: str
    budget: int
    auc: float
    tpr_at_001: float  # TPR at FPR 0.01
    tpr_at_0001: float  # TPR at FPR 0.001
    tpr_at_001_reliable: bool  # enough non-members to read FPR 0.01
    tpr_at_0001_reliable: bool
    n_members: int
    n_nonmembers: int

    def as_record(self) -> dict:
        """The row with the CSV's column names (``tpr@0.01``, ``tpr@0.01_reliable``, ...)."""
        return {
            "dataset": self.dataset,
            "attack": self.attack,
            "budget": self.budget,
            "auc": self.auc,
            "tpr@0.01": self.tpr_at_001,
            "tpr@0.001": self.tpr_at_0001,
            "tpr@0.01_reliable": self.tpr_at_001_reliable,
            "tpr@0.001_reliable": self.tpr_at_0001_reliable,
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
        }


def _dataset_scores(name: str, fields: dict, study: BudgetStudy, out: Path, say) -> dict:
    """Play one dataset's game with the largest budget, then attack with every budget; scores to disk."""
    import recourse_privacy.audit.stages as stages
    from recourse_privacy.audit.config import AuditConfig
    from recourse_privacy.models.registry import model_factory

    path = out / name / "scores.npz"
    config = AuditConfig(**fields, shadow_models=max(study.budgets), attacks=study.attacks, seed=study.seed).validate()
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            if str(f["_config"]) == json.dumps(config.to_dict(), sort_keys=True, default=str):
                say(f"{name}: scores found in {path}, reused")
                return {k: f[k] for k in f.files}
    timing: dict[str, float] = {}
    t = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timing[stage] = round(now - t, 2)
        t = now

    defense = config.defense_entry
    game = stages.prepare_game(config, stages.load_data(config))
    method = defense.shadow_recourse(config, None)
    model_name, model_params = config.effective_model
    make_model = model_factory(model_name, **model_params)
    targets = stages.train_owner(make_model, game, config.seed)
    res, _ = defense.owner_recourse(config, method, targets.model, game.X_members, game.y_members, targets.X)
    cfd = res.distance(config.distance)
    lap("data, owner model, recourse")
    cache = out / name / ".cache"
    quiet = lambda *a: None  # noqa: E731
    online = stages.train_online_models(config, make_model, method, game, targets, cache_dir=cache, progress=quiet)
    lap("online reference models")
    # the online models serve as the offline set too (each target's out-half), where stages.shares_references
    shadow = stages.train_shadow_models(
        config, make_model, method, game, targets, cache_dir=cache, progress=quiet, online=online
    )
    lap("offline reference models")
    query = stages.owner_cfd_query(
        lambda X: defense.owner_recourse(config, method, targets.model, game.X_members, game.y_members, X)[0],
        config.distance,
    )
    arrays: dict[str, np.ndarray] = {"is_member": targets.is_member}
    queries = {}
    for b in study.budgets:
        cols = np.arange(b)
        inputs = stages.attack_inputs(config, game, targets, res, cfd, shadow.subset(cols), online.subset(cols), query)
        for attack, sc in stages.run_attacks(config, inputs).items():
            arrays[f"{attack}@{b}"] = sc.scores
            if "population_recourse_queries" in sc.conventions:
                queries[attack] = int(sc.conventions["population_recourse_queries"])
    lap("attacks at every budget")
    info = GameInfo(
        n_targets=int(len(targets.is_member)),
        n_members=int(targets.is_member.sum()),
        train_accuracy=float(np.mean(targets.model.predict(game.X_members) == game.y_members)),
        test_accuracy=float(np.mean(targets.model.predict(game.X_nonmembers) == game.y_nonmembers)),
        offline_train_rows=int(shadow.train_rows.min()),
        online_train_rows=int(online.train_rows.min()),
        population_recourse_queries=queries,
        timing_seconds=timing,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        **arrays,
        _config=np.array(json.dumps(config.to_dict(), sort_keys=True, default=str)),
        _info=np.array(json.dumps(asdict(info))),
    )
    tmp.replace(path)
    say(f"{name}: {asdict(info)}")
    return {**arrays, "_info": np.array(json.dumps(asdict(info)))}


def budget_rows(scores: dict[str, dict], study: BudgetStudy) -> list[BudgetRow]:
    """One row per (dataset, attack, budget): AUC and TPR at FPR 0.01 / 0.001 with their reliability."""
    import warnings

    from recourse_privacy.metrics.membership import attack_metrics

    rows = []
    for name, arr in scores.items():
        y = arr["is_member"]
        for attack in study.attacks:
            for b in study.budgets:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = attack_metrics(y, arr[f"{attack}@{b}"], fprs=(0.01, 0.001))
                rows.append(
                    BudgetRow(
                        dataset=name,
                        attack=attack,
                        budget=b,
                        auc=m.auc,
                        tpr_at_001=m.tpr_at_fpr["0.01"].tpr,
                        tpr_at_0001=m.tpr_at_fpr["0.001"].tpr,
                        tpr_at_001_reliable=m.tpr_at_fpr["0.01"].reliable,
                        tpr_at_0001_reliable=m.tpr_at_fpr["0.001"].reliable,
                        n_members=int(y.sum()),
                        n_nonmembers=int((y == 0).sum()),
                    )
                )
    return rows


def budget_table(scores: dict[str, dict], study: BudgetStudy):
    """The rows of :func:`budget_rows` as a DataFrame, with the columns of ``reference_budget.csv``."""
    import pandas as pd

    return pd.DataFrame([row.as_record() for row in budget_rows(scores, study)])


def plot_budget(table, path: Path) -> Path:
    """TPR at FPR 0.01, 0.001 and AUC against the budget (log x), one line per attack, a row per dataset."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(table["dataset"]))
    metrics = [("tpr@0.01", "TPR at FPR 0.01"), ("tpr@0.001", "TPR at FPR 0.001"), ("auc", "AUC")]
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.6 * len(datasets)), squeeze=False)
    for i, name in enumerate(datasets):
        sub = table[table["dataset"] == name]
        for j, (col, label) in enumerate(metrics):
            ax = axes[i, j]
            for attack, g in sub.groupby("attack", sort=False):
                ax.plot(g["budget"], g[col], marker="o", label=attack, ls="--" if "online" not in attack else "-")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("reference models (budget)")
            ax.set_ylabel(label)
            ax.set_title(f"{name}: {label}")
            if col == "auc":
                ax.axhline(0.5, color="grey", lw=0.8)
            else:
                ax.axhline(float(col.split("@")[1]), color="grey", lw=0.8)  # random guessing: TPR = FPR
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run_reference_budget(out_dir: Path, study: BudgetStudy | None = None, *, console=None):
    """Run (or resume) the study; write the CSV table and the plot; return the table."""
    study = study or BudgetStudy()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    say = print if console is None else (lambda s: console.print(s, markup=False, highlight=False, soft_wrap=True))
    scores = {}
    for name, fields in study.settings.items():
        t0 = time.perf_counter()
        scores[name] = _dataset_scores(name, fields, study, out, say)
        say(f"{name}: {time.perf_counter() - t0:.1f} s")
    table = budget_table(scores, study)
    table.to_csv(out / "reference_budget.csv", index=False)
    plot_budget(table, out / "reference_budget.png")
    with_fmt = table.pivot_table(index=["dataset", "attack"], columns="budget", values=["tpr@0.01", "auc"], sort=False)
    say(with_fmt.round(4).to_string())
    say(f"wrote {out / 'reference_budget.csv'} and {out / 'reference_budget.png'}")
    return table


@register_reproduction(
    "reference-budget",
    description="CFD-LRT offline/online, RMIA-CFD offline/online and Loss-LRT offline/online over 1-64 reference "
    "models on synthetic d=5,000 (logistic, linear recourse) and HELOC (MLP, SCFE)",
    expected_time=EXPECTED_TIME,
)
def reproduce_reference_budget(out_dir: Path, *, seeds=None, console=None) -> None:
    """The shipped study (see the module docstring); ``seeds``: the first one is the game's seed."""
    study = BudgetStudy() if not seeds else replace(BudgetStudy(), seed=int(seeds[0]))
    run_reference_budget(out_dir, study, console=console)


@register_reproduction(
    "reference-budget-quick",
    description="the reference-budget study at small sizes (minutes): budgets 1-8, small synthetic and HELOC games",
    expected_time=EXPECTED_TIME_QUICK,
)
def reproduce_reference_budget_quick(out_dir: Path, *, seeds=None, console=None) -> None:
    """The quick study."""
    study = BudgetStudy.quick() if not seeds else replace(BudgetStudy.quick(), seed=int(seeds[0]))
    run_reference_budget(out_dir, study, console=console)
