"""`recourse-privacy reproduce release-threat`: what a published set of counterfactuals gives away, per method.

The study of issue 26 beside the preprint "Quantifying the Privacy of Counterfactuals by Leveraging
Membership Inference Attacks Against Synthetic Data" (arXiv 2606.06334), whose claims are checked in
docs/release-threat.md. Two tables:

1. ``release_threat.csv``: on Adult and HELOC, for FACE, ``privrecourse-data``, Growing Spheres, SCFE,
   DiCE, PrivRecourse, DPC and Laplace Recourse, the audit's release threat
   (:mod:`~recourse_privacy.audit.release`): the owner answers ``release_size`` rejected applicants
   and publishes the valid counterfactuals; the released-set attacks (``dcr``, ``domias``,
   ``set-shadow``) score the membership game's targets (AUC with its bootstrap interval, TPR at FPR
   1%), the released counterfactuals that are training rows verbatim and the targets among them,
   Anonymeter's risks where the ``anonymeter`` extra imports, and the lead query attack of the
   same audit (the first of ``query_attacks`` in the fixed order of
   :func:`~recourse_privacy.metrics.exposure.preferred_attack`, not the best AUC) beside each.
2. ``mst_attack.csv``: Golob et al.'s (2024) attack on MST synthetic data
   (:mod:`~recourse_privacy.attacks.mst_marginals`) against the ``privrecourse-mst`` baseline's
   generator (:func:`~recourse_privacy.privrecourse.baselines.mst_synthetic_data` with its
   defaults: 10 bins, midpoint decoding, delta 1e-9) at three epsilons, beside DOMIAS and ``dcr``,
   on Adult's first ``mst_features`` encoded features.

Defaults: a logistic owner model, 300 members (237 rejected member targets on Adult, 157 on HELOC) and
the issue's 1,000 published answers; AUC intervals are about +-0.05 wide (Adult) to +-0.06 (HELOC).
Each (dataset, method) can run in a process of its own: the run resumes from ``release_threat.csv``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from recourse_privacy.errors import RecoursePrivacyError
from recourse_privacy.metrics.exposure import preferred_attack
from recourse_privacy.reproductions.registry import printer, register_reproduction

__all__ = ["METHODS", "MstRow", "ReleaseThreatConfig", "StudyRow", "mst_attack_table", "run_release_threat"]

#: label -> (registered recourse method, its parameters, defense, the defense's epsilon); Laplace Recourse
#: (Huang et al. 2023) is a defense on the linear model's closed-form recourse, at epsilon 1 per query
METHODS: dict[str, tuple[str, dict, str, float | None]] = {
    "FACE": ("face", {}, "none", None),
    "privrecourse-data": ("privrecourse-data", {}, "none", None),
    "Growing Spheres": ("gs", {}, "none", None),
    "SCFE": ("scfe", {}, "none", None),
    "DiCE": ("dice", {"total_cfs": 1, "max_iter": 200}, "none", None),
    "PrivRecourse": ("privrecourse", {}, "none", None),
    "DPC": ("dpc", {}, "none", None),
    "Laplace Recourse": ("linear", {}, "laplace", 1.0),
}


@dataclass(frozen=True)
class ReleaseThreatConfig:
    """Sizes of the study (defaults: the study in docs/release-threat.md, about 40 minutes on 2 loaded cores)."""

    datasets: tuple[str, ...] = ("adult", "heloc")
    methods: tuple[str, ...] = tuple(METHODS)
    model: str = "logistic"
    n_members: int = 300
    release_size: int = 1000
    query_attacks: tuple[str, ...] = ("cfd", "loss")
    #: dataset -> the column whose inference Anonymeter's inference risk measures (where the extra imports)
    sensitive: tuple[tuple[str, str], ...] = (("adult", "sex"), ("heloc", "NumTrades60Ever2DerogPubRec"))
    mst_epsilons: tuple[float, ...] = (1.0, 10.0, 1000.0)
    mst_members: int = 200
    mst_features: int = 6
    mst_reference: int = 2000
    mst_iters: int = 300
    seed: int = 0


@dataclass(frozen=True)
class StudyRow:
    """One released-set attack on one method's release, with the strongest query attack of the same game."""

    dataset: str
    method: str
    attack: str
    auc: float
    auc_low: float
    auc_high: float
    tpr_at_1pct_fpr: float
    exact_copies: int
    copied_members: int
    n_published: int
    query_attack: str
    query_auc: float
    anonymeter: str
    note: str = ""
    #: distinct training rows among the published counterfactuals (-1: not recorded, a row of an older run)
    copied_rows: int = -1
    #: share of the targets at the attack's most common score (1: every target tied, no power; -1: not recorded)
    tied_share: float = -1.0

    def to_dict(self) -> dict:
        """The CSV row."""
        return asdict(self)


@dataclass(frozen=True)
class MstRow:
    """One attack on one MST release (epsilon): AUC with its interval and TPR at FPR 1%."""

    epsilon: float
    attack: str
    auc: float
    auc_low: float
    auc_high: float
    tpr_at_1pct_fpr: float
    avg_2way_tvd: float

    def to_dict(self) -> dict:
        """The CSV row."""
        return asdict(self)


def _anonymeter_text(summary) -> str:
    if not summary.anonymeter:
        return "skipped: anonymeter not installed" if "does not import" in summary.anonymeter_note else "skipped"
    return "; ".join(f"{r.risk} {r.value:.3f} [{r.low:.3f}, {r.high:.3f}]" for r in summary.anonymeter)


def _method_rows(dataset: str, label: str, cfg: ReleaseThreatConfig) -> list[StudyRow]:
    """One audit (membership game + release threat) of one method; its released-set rows."""
    from recourse_privacy.audit import run_audit

    recourse, params, defense, epsilon = METHODS[label]
    # K = 500 (Pentyala et al.) exceeds the game's rows; at K = n_members / 5 no Adult applicant got a valid answer
    if recourse == "privrecourse":
        params = {**params, "n_clusters": max(2, min(500, cfg.n_members // 2))}
    try:
        res = run_audit(
            dataset=dataset,
            model=cfg.model,
            recourse=recourse,
            recourse_params=params,
            defense=defense,
            epsilon=epsilon,
            attacks=cfg.query_attacks,
            n_members=cfg.n_members,
            shadow_models=2,
            threats=("release",),
            sensitive=dict(cfg.sensitive).get(dataset),
            release_size=cfg.release_size,
            seed=cfg.seed,
            out_dir=None,
        )
    except RecoursePrivacyError as err:
        nan = float("nan")
        return [StudyRow(dataset, label, "-", nan, nan, nan, nan, 0, 0, 0, "-", nan, "-", f"failed: {err}")]
    # the lead attack of a fixed order, never the best AUC on the targets (which reads their labels)
    best = res.attacks[preferred_attack({n: a.signal for n, a in res.attacks.items()})]
    rel = res.threats.release
    return [
        StudyRow(
            dataset,
            label,
            r.attack,
            r.auc,
            r.auc_low,
            r.auc_high,
            r.tpr_at_1pct_fpr,
            r.exact_copies,
            r.copied_members,
            rel.n_published,
            best.name,
            float(best.auc),
            _anonymeter_text(rel),
            "; ".join(rel.notes),
            len(rel.copied_row_ids),
            r.tied_share,
        )
        for r in rel.rows
    ]


def mst_attack_table(cfg: ReleaseThreatConfig) -> list[MstRow]:
    """Golob et al.'s attack, DOMIAS and dcr on the ``privrecourse-mst`` generator's data at each epsilon."""
    from recourse_privacy.attacks.mst_marginals import MSTRecipe
    from recourse_privacy.attacks.released_set import RELEASE_ATTACKS, ReleaseInputs
    from recourse_privacy.data import load_dataset
    from recourse_privacy.data.preprocessing import Preprocessor
    from recourse_privacy.metrics.membership import attack_metrics
    from recourse_privacy.privrecourse.baselines import cdp_rho, mst_synthetic_data
    from recourse_privacy.validation import derive_seed

    ds = load_dataset("adult")
    X = np.clip(Preprocessor(scaling="minmax", corr_threshold=None).fit_transform(ds.X, ds), 0.0, 1.0)
    X = X[:, : cfg.mst_features]
    perm = np.random.default_rng(cfg.seed).permutation(len(X))
    n = cfg.mst_members
    mem, non, ref = X[perm[:n]], X[perm[n : 2 * n]], X[perm[2 * n : 2 * n + cfg.mst_reference]]
    targets, labels = np.vstack([mem, non]), np.r_[np.ones(n), np.zeros(n)]
    rows = []
    for eps in cfg.mst_epsilons:
        syn, _, info = mst_synthetic_data(mem, epsilon=eps, iters=cfg.mst_iters, random_state=derive_seed(cfg.seed, 9))
        inputs = ReleaseInputs(syn, targets, ref, mst=MSTRecipe(rho=cdp_rho(eps, 1e-9)), random_state=cfg.seed)
        for name in ("golob-mst", "domias", "dcr"):
            m = attack_metrics(labels, np.asarray(RELEASE_ATTACKS.get(name).obj(inputs), float), (0.01,), seed=cfg.seed)
            tp = m.tpr_at_fpr["0.01"]
            rows.append(MstRow(eps, name, m.auc, m.auc_ci[0], m.auc_ci[1], tp.tpr, info["avg_2way_tvd"]))
    return rows


def _earlier(path: Path) -> list[StudyRow]:
    """The rows of an earlier run's ``release_threat.csv`` (to resume), failed ones included."""
    import pandas as pd

    if not path.exists():
        return []
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    kinds = {f.name: f.type for f in fields(StudyRow)}
    return [
        StudyRow(**{k: ("" if kinds[k] == "str" and isinstance(v, float) else v) for k, v in rec.items() if k in kinds})
        for rec in frame.to_dict("records")
    ]


def run_release_threat(
    out_dir: Path, *, seeds: list[int] | None = None, console=None, config: ReleaseThreatConfig | None = None
) -> tuple[list[StudyRow], list[MstRow]]:
    """Run both tables, write ``release_threat.csv`` and ``mst_attack.csv`` into ``out_dir`` and print them.

    Resumes: a (dataset, method) already in ``out_dir``'s ``release_threat.csv`` (and not failed) is kept and
    not run again, so the study can run one method per process and a killed run loses only its current method;
    a failed one runs again (its rows replaced), the rows of methods not run now are kept, and with no MST
    epsilons an existing ``mst_attack.csv`` is kept.
    """
    import warnings

    import pandas as pd

    cfg = config or ReleaseThreatConfig()
    if seeds:
        cfg = ReleaseThreatConfig(**{**asdict(cfg), "seed": int(seeds[0])})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    log = printer(console)
    csv = out_dir / "release_threat.csv"
    rows: list[StudyRow] = _earlier(csv)
    done = {(r.dataset, r.method) for r in rows if not r.note.startswith("failed")}
    for dataset in cfg.datasets:
        for label in cfg.methods:
            if (dataset, label) in done:
                log(f"  {dataset:6s} {label:18s} already in {csv} (kept; delete its rows to run it again)")
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                new = _method_rows(dataset, label, cfg)
            rows = [r for r in rows if (r.dataset, r.method) != (dataset, label)] + new
            pd.DataFrame([r.to_dict() for r in rows]).to_csv(csv, index=False)
            for r in new:
                log(_line(r))
    if not cfg.mst_epsilons:
        return rows, []
    mst = mst_attack_table(cfg)
    pd.DataFrame([r.to_dict() for r in mst]).to_csv(out_dir / "mst_attack.csv", index=False)
    log("Golob et al. (2024) on the privrecourse-mst generator's data (Adult), beside DOMIAS and dcr:")
    for r in mst:
        log(
            f"  eps={r.epsilon:g} {r.attack:9s} AUC {r.auc:.3f} [{r.auc_low:.3f}, {r.auc_high:.3f}] "
            f"TPR@1% {r.tpr_at_1pct_fpr:.3f} (2-way TVD {r.avg_2way_tvd:.3f})"
        )
    return rows, mst


def _line(r: StudyRow) -> str:
    if r.note.startswith("failed"):
        return f"  {r.dataset:6s} {r.method:18s} {r.note}"
    rows = f" ({r.copied_rows} distinct training rows)" if r.copied_rows > 0 else ""
    q = "" if math.isnan(r.query_auc) else f"; lead query attack {r.query_attack} AUC {r.query_auc:.3f}"
    q += " (NO POWER: every target got the same score)" if r.tied_share >= 1.0 else ""
    return (
        f"  {r.dataset:6s} {r.method:18s} {r.attack:10s} AUC {r.auc:.3f} [{r.auc_low:.3f}, {r.auc_high:.3f}] "
        f"TPR@1% {r.tpr_at_1pct_fpr:.3f} copies {r.exact_copies}/{r.n_published}{rows} members {r.copied_members}{q}"
    )


@register_reproduction(
    "release-threat",
    description="released counterfactuals alone (no queries): dcr, DOMIAS, set-shadow, exact copies and "
    "Anonymeter for eight methods on Adult and HELOC; Golob et al.'s attack on MST at three epsilons",
    # measured at these defaults on a loaded 2-core machine (load 10-24): Adult 15 min, HELOC 25 min, one
    # process per method; the MST table adds a few minutes
    expected_time="~45 min on 2 cores",
)
def _reproduce(out_dir: Path, *, seeds: list[int] | None = None, console=None) -> None:
    run_release_threat(out_dir, seeds=seeds, console=console)
