"""``recourse-privacy reproduce pentyala2023-audit``: the membership game against PrivRecourse and its baselines.

The recourse membership game (Pawelczyk et al. 2023) on Adult with each method as the owner's
recourse (:func:`membership_game`), then what the returned paths expose to an adversary who
matches them against candidate records, in Pentyala et al.'s (2023) setting
(:func:`exposure_study`) and in the game's (:func:`game_exposure`). Writes
``membership_game.json``, ``exposure.json`` and ``game_exposure.json`` from the typed rows.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from recourse_privacy import strict_json
from recourse_privacy.audit.config import AuditConfig
from recourse_privacy.audit.pipeline import run_audit
from recourse_privacy.recourse import make_recourse
from recourse_privacy.reproductions.pentyala2023_setup import Reading, dp_model, load_split, printer
from recourse_privacy.reproductions.registry import register_reproduction
from recourse_privacy.validation import derive_seed

__all__ = ["GAME_METHODS", "Exposure", "GameRow", "exposure_study", "game_exposure", "membership_game"]

#: the owner's recourse in the membership game: label -> reading (registered method, parameters)
GAME_METHODS: dict[str, Reading] = {
    "PrivRecourse (em_point)": Reading("privrecourse", {"clustering": "convergent", "out_of_bounds": "clip"}),
    "PrivRecourse (noisy_mean_strict)": Reading(
        "privrecourse",
        {
            "clustering": "convergent",
            "out_of_bounds": "clip",
            "clustering_params": {"release": "noisy_mean_strict", "lap_use": "final"},
        },
    ),
    "PrivRecourse (diffprivlib)": Reading("privrecourse", {"out_of_bounds": "clip", "clustering": "diffprivlib"}),
    "FACE (Alg. 1/2 on raw data)": Reading("privrecourse-data", {"out_of_bounds": "clip"}),
    "DP-SD (MST)": Reading("privrecourse-mst", {"out_of_bounds": "clip"}),
    "Baseline (Laplace)": Reading("privrecourse-laplace", {"out_of_bounds": "clip"}),
    "FACE (knn, existing)": Reading("face", {}),
}
#: estimated from docs/privrecourse.md: the game's seconds per method sum to 714 s (6 shadow models), plus the
#: two exposure studies (one artefact per method)
EXPECTED_TIME = "~15 min on 2 cores"
#: the methods of the exposure study in Pentyala et al.'s setting: label -> (registered method, parameters)
EXPOSURE_METHODS = (
    ("FACE", "privrecourse-data", {}),
    ("PrivRecourse (em_point)", "privrecourse", {"clustering": "convergent"}),
    ("Baseline", "privrecourse-laplace", {}),
    ("DP-SD", "privrecourse-mst", {}),
)


@dataclass(frozen=True)
class AttackReading:
    """One attack's AUC and TPR at FPR 0.01 in the game."""

    attack: str
    auc: float
    tpr_at_001: float


@dataclass(frozen=True)
class GameRow:
    """One method and seed of the membership game (a row of ``membership_game.json``)."""

    method: str
    seed: int
    seconds: float
    validity: float
    attacks: tuple[AttackReading, ...]

    def as_record(self) -> dict:
        """The row as ``membership_game.json`` holds it: ``<attack>_auc`` and ``<attack>_tpr@0.01`` per attack."""
        out = {"method": self.method, "seed": self.seed, "seconds": self.seconds, "validity": self.validity}
        for a in self.attacks:
            out[f"{a.attack}_auc"] = a.auc
            out[f"{a.attack}_tpr@0.01"] = a.tpr_at_001
        return out


@dataclass(frozen=True)
class Exposure:
    """What the returned paths give an adversary who matches them against candidate records."""

    cf_is_member_row: float
    distinct_nodes_returned: int
    match_attack_tpr: float
    match_attack_fpr: float


def record_exposure(result, X_members, X_nonmembers, tol: float = 1e-9) -> Exposure:
    """What the returned paths give an adversary who matches them against candidate records.

    Attack: "x is a member iff x equals a node of a returned path". TPR = share of member rows
    (the graph's training records) that some returned node equals; FPR = the same share among
    non-member rows (exact duplicates on the five features make it non-zero). Also the share of
    counterfactuals that are member rows.
    """
    from sklearn.neighbors import NearestNeighbors

    cf = result.counterfactuals[result.valid]
    nodes = np.concatenate([p[1:] for p in result.paths if len(p) > 1]) if result.paths is not None else cf
    nodes = np.unique(nodes, axis=0) if len(nodes) else nodes

    def hit(X):  # which rows of X equal a returned node
        if not len(nodes):
            return np.zeros(len(X), bool)
        return NearestNeighbors(n_neighbors=1).fit(nodes).kneighbors(X)[0][:, 0] <= tol

    cf_member = (NearestNeighbors(n_neighbors=1).fit(X_members).kneighbors(cf)[0][:, 0] <= tol) if len(cf) else []
    return Exposure(
        cf_is_member_row=float(np.mean(cf_member)) if len(cf) else float("nan"),
        distinct_nodes_returned=int(len(nodes)),
        match_attack_tpr=float(hit(X_members).mean()),
        match_attack_fpr=float(hit(X_nonmembers).mean()),
    )


def _play(label: str, reading: Reading, seed: int, shadow_models: int, n_members: int) -> GameRow:
    """One audit of the game with ``reading`` as the owner's recourse."""
    t0 = time.perf_counter()
    cfg = AuditConfig(
        dataset="adult",
        model="logistic",
        recourse=reading.method,
        recourse_params=reading.params,
        scaling="minmax",
        n_members=n_members,
        shadow_models=shadow_models,
        attacks=("cfd", "cfd-lrt", "random"),
        seed=seed,
    )
    res = run_audit(cfg)
    attacks = tuple(AttackReading(a["attack"], a["auc"], a["tpr@0.01"]) for a in res.table())
    return GameRow(label, seed, time.perf_counter() - t0, res.recourse.validity, attacks)


def membership_game(
    out_dir: Path, *, seeds=None, console=None, methods=None, shadow_models: int = 10, n_members: int = 2000
) -> list[GameRow]:
    """The recourse membership game (Pawelczyk et al. 2023) on Adult with each method as the owner's recourse.
    The adversary knows the mechanism: its shadow worlds run the same registered method,
    publishing their own artefacts from their own data. Reported: AUC and TPR at FPR 0.01 of
    the distance attacks (cfd, cfd-lrt) and what the returned rows expose.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say = printer(console)
    methods = GAME_METHODS if methods is None else methods
    rows: list[GameRow] = []
    for seed in list(seeds) if seeds else [0]:
        for label, reading in methods.items():
            row = _play(label, reading, seed, shadow_models, n_members)
            rows.append(row)
            record = row.as_record()
            say(
                f"[game] {label} seed={seed}: "
                + ", ".join(f"{k}={v:.3f}" for k, v in record.items() if isinstance(v, float))
            )
            records = [r.as_record() for r in rows]
            (out_dir / "membership_game.json").write_text(strict_json.dumps(records, indent=2))  # after each method
    return rows


@register_reproduction(
    "pentyala2023-audit",
    description="the membership game on Adult against PrivRecourse, FACE and "
    "the Laplace and MST baselines (distance attacks)",
    expected_time=EXPECTED_TIME,
)
def reproduce_pentyala2023_audit(out_dir: Path, *, seeds=None, console=None) -> None:
    """The membership game (see :func:`membership_game`) and the record exposure of each method's output."""
    membership_game(out_dir, seeds=seeds, console=console, shadow_models=6)
    exposure_study(out_dir, console=console)
    game_exposure(out_dir, console=console)


def _write_exposure(out_dir: Path, name: str, out: dict[str, Exposure]) -> None:
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / name).write_text(strict_json.dumps({k: asdict(v) for k, v in out.items()}, indent=2))


def game_exposure(out_dir: Path, *, console=None, seed: int = 0, n_members: int = 2000) -> dict[str, Exposure]:
    """The matching attack in the game's own setting (Adult, all features, min-max, logistic model).

    The owner answers every rejected target (members and non-members); the adversary declares
    a target's record a member iff it equals a node of some returned path. Reported per method:
    TPR on the members, FPR on the non-members (both over the whole pools).
    """
    from recourse_privacy.audit.stages import load_data, prepare_game, train_owner
    from recourse_privacy.models.registry import make_model

    say = printer(console)
    cfg = AuditConfig(dataset="adult", model="logistic", scaling="minmax", n_members=n_members, seed=seed)
    game = prepare_game(cfg, load_data(cfg))
    targets = train_owner(lambda s: make_model("logistic", random_state=s), game, seed)
    out = {}
    for label, reading in GAME_METHODS.items():
        if reading.method == "privrecourse-laplace":
            continue  # returns no record-like node (see exposure.json); its graph build is the slow one
        seeded = {"random_state": seed} if reading.method != "face" else {}
        m = make_recourse(reading.method, **reading.params, **seeded)
        res = m.fit(game.X_members, game.y_members, targets.model).generate(targets.model, targets.X)
        out[label] = record_exposure(res, game.X_members, game.X_nonmembers)
        say(f"[game exposure] {label}: {asdict(out[label])}")
    _write_exposure(out_dir, "game_exposure.json", out)
    return out


def exposure_study(out_dir: Path, *, console=None, seed: int = 0) -> dict[str, Exposure]:
    """What the returned paths expose on Adult (paper 003's features): shares of outputs that are training rows."""
    say = printer(console)
    split = load_split("adult", None, seed)
    model = dp_model(split, 1.0, seed)
    Q = split.X_test[model.predict(split.X_test) == 0][:266]
    # control: test rows (non-members); adult's 5 features have many exact duplicates, so the control is not 0
    out = {}
    for label, method, params in EXPOSURE_METHODS:
        m = make_recourse(method, random_state=derive_seed(seed, 3), **params).fit(split.X_graph, split.y_graph, model)
        res = m.generate(model, Q)
        out[label] = record_exposure(res, split.X_graph, split.X_test)
        say(f"[exposure] {label}: {asdict(out[label])}")
    _write_exposure(out_dir, "exposure.json", out)
    return out
