"""The privacy-utility trade-off of Huang et al. 2023: baseline, DPM and Laplace Recourse over epsilon.

:func:`run_tradeoff` plays one audit (:func:`~recourse_privacy.audit.run_audit`)
per setting (the undefended baseline, then DPM and LR at each epsilon), each in its own
directory under ``out_dir`` (a finished setting with the same configuration is read back,
not recomputed, so a killed sweep resumes), and writes

- ``tradeoff.csv`` / ``tradeoff.json``: one row per setting: model train / test accuracy
  (Huang et al. 2023, Tables 1-2), recourse validity, the epsilon of one recourse and of the whole
  release, the Theorem 2 bound, and per attack AUC, balanced accuracy and TPR at FPR 0.01;
- ``attacks_vs_epsilon.png``: attack AUC, TPR at FPR 0.01 and BA (with the Theorem 2 bound)
  against epsilon, baseline as horizontal lines (Huang et al. 2023, Figures 1-3 as curves);
- ``accuracy_vs_epsilon.png``: train / test accuracy against epsilon (Tables 1-2);
- ``cfd_histograms.png``: member vs non-member counterfactual distances per setting
  (Huang et al. 2023, Figures 4-5); LR's clamped rows (p' = 0 or 1) form the spike at the right.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recourse_privacy import strict_json
from recourse_privacy.audit import AuditConfig, AuditResult, run_audit
from recourse_privacy.audit.user_inputs import describe_model
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.metrics import theorem2_bound
from recourse_privacy.metrics.plots import _new_figure, _save
from recourse_privacy.models.registry import MODELS

#: Huang et al.'s (2023) epsilons (main results 0.5 and 1; appendix 5, 10, 20)
EPSILONS = (0.5, 1.0, 5.0, 10.0, 20.0)
#: Huang et al.'s (2023) attacks: CFD and CFD-LRT with global and per-example ("local") variance
TRADEOFF_ATTACKS = ("cfd", "cfd-lrt-global", "cfd-lrt-per-example")


@dataclass
class TradeoffResult:
    """One row per setting (see the module docstring) and the files written."""

    rows: list[dict]
    files: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # settings read back from a previous run
    failed: dict = field(default_factory=dict)  # setting -> error (e.g. a DP model that rejects no one)


def tradeoff_base_config(**overrides) -> AuditConfig:
    """Huang et al.'s (2023) setting: synthetic d = 100, 5,000 members, 5 shadow models, L2 distance, unit rows.

    The adversary gets twice the owner's rows so that each shadow model (trained on half of
    them) sees as many rows as the owner's model.
    """
    d = dict(
        dataset="synthetic",
        n_features=100,
        model="logistic",
        recourse="linear",
        attacks=TRADEOFF_ATTACKS,
        shadow_models=5,
        n_members=5000,
        distance="l2",
        normalize_rows=True,
    )
    d.update(overrides)
    if not isinstance(d["model"], str):
        raise InvalidInputError(
            f"tradeoff retrains the model under DP (DPM; Huang et al. 2023), which needs a registered model, not "
            f"your {describe_model(d['model'])}: audit your own model with `recourse-privacy audit --model-file ...`"
        )
    if d.get("n_adversary") is None:
        d["n_adversary"] = 2 * d["n_members"]
    return AuditConfig(**d)


def tradeoff_settings(base: AuditConfig, epsilons: Sequence[float] = EPSILONS) -> list[tuple[str, AuditConfig]]:
    """(label, config) of every setting: baseline, then DPM and LR per epsilon (LR only for linear models)."""
    eps_list = [float(e) for e in epsilons]
    for e in eps_list:
        if not np.isfinite(e) or e <= 0:
            raise InvalidInputError(f"epsilons must be finite numbers > 0; got {e!r}")
    if len(set(eps_list)) != len(eps_list):
        raise InvalidInputError(f"epsilons must be distinct; got {eps_list}")
    base_d = {**base.to_dict(), "defense": "none", "epsilon": None}
    out = [("baseline", AuditConfig.from_dict(base_d).validate())]
    linear = "linear" in MODELS.get(base.model).meta["capabilities"]
    for e in eps_list:
        out.append((f"dpm-eps{e:g}", AuditConfig.from_dict({**base_d, "defense": "dpm", "epsilon": e}).validate()))
        if linear:
            out.append(
                (f"laplace-eps{e:g}", AuditConfig.from_dict({**base_d, "defense": "laplace", "epsilon": e}).validate())
            )
    return out


def _cell(label: str, config: AuditConfig, cell_dir: Path) -> tuple[AuditResult, dict, bool]:
    """Run (or read back) one setting: (result, arrays, reused)."""
    mpath, apath = cell_dir / "metrics.json", cell_dir / "cfd.npz"
    if mpath.exists() and apath.exists():
        result = AuditResult.from_dict(json.loads(mpath.read_text()))
        if result.config == config:
            with np.load(apath) as f:
                return result, {k: f[k] for k in f.files}, True
    result = run_audit(config, cell_dir)
    info = result.recourse_result.info
    clamped = np.zeros(len(result.cfd), bool)
    if "clamped_low" in info:
        clamped = np.asarray(info["clamped_low"]) | np.asarray(info["clamped_high"])
    arrays = {"cfd": result.cfd, "is_member": result.is_member, "clamped": clamped}
    tmp = cell_dir / "cfd.tmp.npz"
    np.savez(tmp, **arrays)
    tmp.replace(apath)
    return result, arrays, False


def _row(label: str, config: AuditConfig, r: AuditResult, arrays: dict) -> dict:
    dp = r.dp
    row = {
        "setting": label,
        "defense": config.defense,
        "epsilon": config.epsilon,
        "model": r.model.name,
        "train_accuracy": r.model.train_accuracy,
        "test_accuracy": r.model.test_accuracy,
        "recourse_validity": r.recourse.validity,
        "n_members": r.n_members,
        "n_nonmembers": r.n_nonmembers,
        "epsilon_per_query": dp.epsilon_per_query if dp else None,
        "epsilon_total": dp.epsilon_total if dp else None,
        "ba_bound": dp.ba_bound if dp else None,
        "clamped_share": float(np.mean(arrays["clamped"])) if len(arrays["clamped"]) else 0.0,
    }
    for name, a in r.attacks.items():
        row[f"{name}:auc"] = a.auc
        row[f"{name}:ba"] = a.balanced_accuracy
        row[f"{name}:tpr@0.01"] = a.tpr_at_fpr["0.01"]
    direction = dp.direction_attack if dp else None
    if direction is not None:  # LR only: the attack that reads the released move's direction (not covered by ba_bound)
        row["lr-direction:auc"] = direction.auc
        row["lr-direction:ba"] = direction.balanced_accuracy
        row["lr-direction:tpr@0.01"] = direction.tpr_at_fpr["0.01"]
    return row


def run_tradeoff(
    base: AuditConfig | None = None,
    out_dir: str | Path = "tradeoff-results",
    *,
    epsilons: Sequence[float] = EPSILONS,
    progress: Callable[[str, int, int], None] | None = None,
) -> TradeoffResult:
    """Audit the baseline, DPM and LR at every epsilon; write the table and the plots into ``out_dir``.

    ``base`` (default :func:`tradeoff_base_config`) fixes everything but the defense and
    epsilon. Each setting's audit lives in ``out_dir/<setting>`` (``baseline``,
    ``dpm-eps0.5``, ``laplace-eps0.5``, ...); ``progress(label, done, total)`` is called
    before and after each setting.
    """
    base = (base or tradeoff_base_config()).validate()
    settings = tradeoff_settings(base, epsilons)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = progress or (lambda label, done, total: None)
    rows, hist, skipped, failed = [], [], [], {}
    for i, (label, config) in enumerate(settings):
        report(label, i, len(settings))
        try:
            m, arrays, reused = _cell(label, config, out / label)
        except ValueError as err:  # one setting's game cannot be played: record it, go on
            if label == "baseline":
                raise
            failed[label] = str(err)
            report(label, i + 1, len(settings))
            continue
        if reused:
            skipped.append(label)
        rows.append(_row(label, config, m, arrays))
        hist.append((label, arrays))
        report(label, i + 1, len(settings))
    files = _write_table(rows, base, out, failed)
    files.update(_plots(rows, hist, base, out))
    return TradeoffResult(rows, {k: str(v) for k, v in files.items()}, skipped, failed)


def _write_table(rows: list[dict], base: AuditConfig, out: Path, failed: dict) -> dict:
    import pandas as pd

    pd.DataFrame(rows).to_csv(out / "tradeoff.csv", index=False)
    cfg = {k: v for k, v in base.to_dict().items() if k not in ("defense", "epsilon")}
    (out / "tradeoff.json").write_text(
        strict_json.dumps({"base_config": cfg, "rows": rows, "failed": failed}, indent=2, default=str)
    )
    return {"csv": out / "tradeoff.csv", "json": out / "tradeoff.json"}


def _plots(rows: list[dict], hist: list, base: AuditConfig, out: Path) -> dict:
    title = (
        f"{base.to_dict()['data'] or base.dataset}"
        + (f" d={base.n_features}" if base.dataset == "synthetic" and base.data is None else "")
        + f", {base.model}, n={base.n_members}"
    )
    attacks = [a for a in base.attacks if f"{a}:auc" in rows[0]]
    colors = {a: f"C{i}" for i, a in enumerate(attacks)}
    styles = {"dpm": ("o", "-"), "laplace": ("s", "--")}
    baseline = rows[0]
    eps = sorted({r["epsilon"] for r in rows if r["epsilon"] is not None})

    fig = _new_figure((15.0, 4.2))
    panels = (("auc", "attack AUC", 0.5), ("tpr@0.01", "TPR at FPR 0.01", 0.01), ("ba", "balanced accuracy", 0.5))
    for j, (key, ylabel, chance) in enumerate(panels):
        ax = fig.add_subplot(1, 3, j + 1)
        for a in attacks:
            ax.axhline(baseline[f"{a}:{key}"], color=colors[a], ls=":", lw=1)
            for defense, (marker, ls) in styles.items():
                pts = [(r["epsilon"], r[f"{a}:{key}"]) for r in rows if r["defense"] == defense]
                if pts:
                    x, y = zip(*pts)
                    short = {"dpm": "DPM", "laplace": "LR"}[defense]
                    ax.plot(x, y, marker=marker, ls=ls, color=colors[a], label=f"{a} ({short})")
        ax.axhline(chance, color="grey", lw=0.8)
        if key == "ba" and eps:
            grid = np.geomspace(min(eps), max(eps), 100)
            ax.plot(grid, [theorem2_bound(e) for e in grid], color="k", lw=1.2, label="Theorem 2 bound")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (DPM: model; LR: per query)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(fontsize=7, title="dotted: baseline", title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    files = {"attacks_plot": _save(fig, out / "attacks_vs_epsilon.png")}

    fig = _new_figure((6.0, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    for key, color in (("train_accuracy", "C0"), ("test_accuracy", "C1")):
        which = key.split("_")[0]
        ax.axhline(baseline[key], color=color, ls=":", label=f"{which} (baseline; LR leaves the model as is)")
        pts = [(r["epsilon"], r[key]) for r in rows if r["defense"] == "dpm"]
        if pts:
            x, y = zip(*pts)
            ax.plot(x, y, marker="o", color=color, label=f"{which} (DPM)")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon of the DP model")
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    files["accuracy_plot"] = _save(fig, out / "accuracy_vs_epsilon.png")

    ncol = 3
    nrow = int(np.ceil(len(hist) / ncol))
    fig = _new_figure((4.2 * ncol, 3.0 * nrow))
    for i, (label, arr) in enumerate(hist):
        ax = fig.add_subplot(nrow, ncol, i + 1)
        cfd, mem = np.asarray(arr["cfd"], float), np.asarray(arr["is_member"]).astype(bool)
        ok = np.isfinite(cfd) & (cfd > 0)
        if ok.sum() < 2:
            ax.set_title(f"{label}: no distances", fontsize=9)
            continue
        bins = np.geomspace(cfd[ok].min(), cfd[ok].max() * 1.0001, 41)
        ax.hist(cfd[ok & ~mem], bins=bins, alpha=0.55, color="tab:blue", label="non-members (test)")
        ax.hist(cfd[ok & mem], bins=bins, alpha=0.55, color="tab:orange", label="members (train)")
        ax.set_xscale("log")
        clamped = float(np.mean(arr["clamped"])) if len(arr["clamped"]) else 0.0
        ax.set_title(label + (f"  (clamped p': {clamped:.0%})" if label.startswith("laplace") else ""), fontsize=9)
        ax.set_xlabel(f"counterfactual distance ({base.distance})", fontsize=8)
        if i == 0:
            ax.legend(fontsize=7)
    fig.suptitle(title + ": counterfactual distances of members and non-members", fontsize=10)
    files["cfd_histograms"] = _save(fig, out / "cfd_histograms.png")
    return files
