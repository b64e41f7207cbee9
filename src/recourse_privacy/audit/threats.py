"""Every threat a recourse API opens, on the audit's model: membership, extraction and attribute inference.

``audit --threats`` names them (a registry, like the attacks'): ``membership`` is the game of
Pawelczyk, Lakkaraju and Neel (2023) that the audit always plays (it defines the targets); the
others reuse its pools and its owner's model:

- ``extraction``: the adversary queries the owner's recourse API with rows of its own pool and
  trains a copy (:mod:`~recourse_privacy.attacks.query_extraction`: ``base``, ``cf`` of Aivodji
  et al. 2020, ``dualcf`` of Wang et al. 2022, ``cca`` of Dissanayake and Dutta 2024) at each query
  budget; fidelity on the non-members (held out, never queried) and on uniform samples of the
  dataset's public domain metadata (without any, each column drawn on its own from the adversary's rows);
- ``attribute``: with the best copy at the largest budget, the adversary infers the targets'
  ``--sensitive`` column from their other features and label (Yang et al. 2022, Sec. 5.3.3),
  against the prior (the majority value of its own data).

The queries each membership attack sends to the owner are counted per target, and the
label-only attack (:mod:`~recourse_privacy.attacks.label_only`) is read at each of its query
budgets, so the report can say what recourse adds over decisions alone at equal queries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from recourse_privacy.attacks.base import AttackScores
from recourse_privacy.attacks.query_extraction import ApiAnswers, NegatedModel, extraction_curve
from recourse_privacy.attacks.threat_report import AttributeSummary, QueryPoint, ThreatReport
from recourse_privacy.errors import InvalidInputError, RecoursePrivacyError
from recourse_privacy.metrics.intervals import clopper_pearson
from recourse_privacy.registry import Registry
from recourse_privacy.validation import as_generator, derive_seed

if TYPE_CHECKING:
    from recourse_privacy.audit.config import AuditConfig
    from recourse_privacy.audit.stages import GameData, Targets

__all__ = [
    "THREATS",
    "ThreatContext",
    "check_threats",
    "domain_sample",
    "released",
    "run_threats",
    "sensitive_candidates",
]

#: how many uniform samples of the public domain the extraction's fidelity is also measured on
N_DOMAIN = 2000
#: the note where the method releases its noisy answers unchecked (Laplace Recourse)
NOISY_NOTE = (
    "extraction: the API releases Laplace Recourse's noisy counterfactuals unchecked (Huang et al. 2023), so the "
    "adversary's copy trains on every answer labelled with the decision it claims, including those the noise "
    "left on the wrong side"
)
#: the sensitive column may have at most this many values (a categorical or a small integer code)
MAX_SENSITIVE_VALUES = 20

#: the release threat registers itself in its own module (audit.release), imported on the first lookup
THREATS: Registry[Callable] = Registry(
    "threat", builtins=("recourse_privacy.audit.release",), needs_vocabulary=("sensitive",)
)


def check_threats(names) -> tuple[str, ...]:
    """The threats named (``all``: every registered one), membership first; an unknown name raises listing them."""
    names = tuple(names)
    if not names:
        raise InvalidInputError("--threats is empty: name at least one of " + ", ".join(THREATS.names()))
    if "all" in names:
        names = THREATS.names()
    for n in names:
        THREATS.check(n)
    return ("membership", *dict.fromkeys(n for n in names if n != "membership"))


@dataclass
class ThreatContext:
    """What the threats read: the game, the owner's model and its recourse API (as the adversary sees it)."""

    config: AuditConfig
    game: GameData
    targets: Targets
    #: the owner's recourse on a model (the owner's or its negation) for points X
    recourse: Callable
    scores: Mapping[str, AttackScores] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    memo: dict = field(default_factory=dict)
    #: the owner's recipe, for threats that simulate it (release's set-shadow): a model from a seed, and the
    #: owner's recourse fitted on given data, (model, fit_X, fit_y, X) -> result
    make_model: Callable | None = None
    fit_recourse: Callable | None = None

    def answer(self, rows: np.ndarray, dual: bool) -> ApiAnswers:
        """The API's answers for adversary-pool ``rows``: decisions and counterfactuals toward the other decision."""
        model = self.targets.model
        X = self.game.X_pool[rows]
        d = np.asarray(model.predict(X)).astype(np.int64)
        cf, ok = self._toward(X, 1 - d)
        ccf = ccf_ok = None
        if dual:
            ccf, ccf_ok = self._toward(cf, d)
            ccf_ok &= ok
        return ApiAnswers(X, d, cf, ok, ccf, ccf_ok)

    def _toward(self, X: np.ndarray, side: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Counterfactuals of ``X`` toward class ``side`` per row (side 0: recourse on the negated model)."""
        cf, ok = X.copy(), np.zeros(len(X), bool)
        model = self.targets.model
        for s, m in ((1, model), (0, self.memo.setdefault("negated", NegatedModel(model)))):
            rows = np.flatnonzero(side == s)
            if not len(rows):
                continue
            try:
                res = self.recourse(m, X[rows])
            except RecoursePrivacyError as err:
                note = f"the recourse method gave no counterfactuals toward class {s} ({err}); those queries count as labels"
                if note not in self.notes:
                    self.notes.append(note)
                continue
            cf[rows] = res.counterfactuals
            ok[rows] = released(res, model, s)
            if "noisy_probability" in res.info and NOISY_NOTE not in self.notes:
                self.notes.append(NOISY_NOTE)
        return cf, ok


def released(res, model, side: int) -> np.ndarray:
    """Which answers the API hands the client as counterfactuals toward class ``side``: what the method
    really answers, never the owner's private check of it.

    A search method (SCFE, Growing Spheres, PrivRecourse's path, DPC's latent search) reports a failed
    search as no counterfactual: its answers are those it found and the owner's model accepts. Laplace
    Recourse (Huang et al. 2023) moves every row by its formula and releases the noisy answer whatever the
    model says of it (its result carries the released ``noisy_probability``): every answer is released, and
    the adversary labels it with the decision it claims, wrong where the noise fell short.
    """
    if "noisy_probability" in res.info:
        return np.ones(len(res.counterfactuals), bool)
    return np.asarray(res.valid, bool) & (np.asarray(model.predict(res.counterfactuals)) == side)


def domain_sample(dataset, preprocessor, n: int, seed: int, fallback: pd.DataFrame) -> tuple[np.ndarray, str]:
    """``n`` samples of the public domain, encoded, and a note on how they were drawn ("" when all are uniform).

    Numeric: uniform in [lower, upper] (rounded for integer features); categorical: a uniform level.
    A column the metadata leaves unbounded is drawn from ``fallback`` (the adversary's own rows), as said;
    data that declares no domain at all (no ``--schema``) has every column drawn so, each on its own: the
    samples then keep each column's values but not the rows' combinations.
    """
    domain = getattr(dataset, "domain", None)
    rng = as_generator(derive_seed(seed, 59))
    cols, fell_back = {}, []
    for c in dataset.X.columns:
        f = domain[c] if domain is not None and c in domain else None
        if f is not None and f.kind == "categorical" and f.categories:
            cols[c] = rng.choice(np.asarray(f.categories, dtype=object), n)
        elif f is not None and f.lower is not None and f.upper is not None:
            v = rng.uniform(f.lower, f.upper, n)
            cols[c] = np.round(v) if f.kind == "integer" else v
        else:
            cols[c] = rng.choice(fallback[c].to_numpy(), n)
            fell_back.append(str(c))
    frame = pd.DataFrame(cols)[list(dataset.X.columns)]
    if domain is None:
        note = (
            "the data declares no public domain (--schema): the domain samples draw every column on its own from "
            "the adversary's rows (their combinations are new, their values are not)"
        )
    elif fell_back:
        note = f"domain samples: {', '.join(fell_back)} drawn from the adversary's rows (no public bounds)"
    else:
        note = ""
    return preprocessor.transform(frame), note


@THREATS.register(
    "membership",
    description="the recourse membership game (Pawelczyk et al. 2023): every attack's AUC and TPR at low FPR, "
    "with the owner queries each attack sends per target",
)
def _membership(ctx: ThreatContext) -> dict:
    from recourse_privacy.attacks.label_only import boundary_distance

    member = ctx.targets.is_member
    n = len(member)
    points = []
    for name, s in ctx.scores.items():
        conv = s.conventions
        if name == "label-only":
            est = boundary_distance(
                ctx.targets.model.predict, ctx.targets.X, random_state=derive_seed(ctx.config.seed, 53)
            )
            # one decision per target tells the adversary only what it knows: every target is rejected
            points.append(_query_point(name, 1, "decisions", member, np.zeros(n)))
            for q, dist in est.by_queries.items():
                points.append(_query_point(name, q, "decisions", member, dist))
            continue
        signal = _signal(name)
        access = {"distance": "recourse", "score": "scores"}.get(signal, "none")
        q = {"recourse": 1.0, "scores": 1.0}.get(access, 0.0) + conv.get("population_recourse_queries", 0) / max(n, 1)
        points.append(_query_point(name, q, access, member, s.scores))
    return {"queries": tuple(points)}


def _signal(name: str) -> str:
    from recourse_privacy.attacks.registry import ATTACKS

    return str(ATTACKS.get(name).meta.get("signal", "")) if name in ATTACKS else ""


def _query_point(name, q, access, member, scores) -> QueryPoint:
    import warnings

    from recourse_privacy.metrics.membership import auc, tpr_at_fpr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = tpr_at_fpr(member, scores, 0.01)
    return QueryPoint(name, float(q), access, float(auc(member, scores)), float(t.tpr), *map(float, t.ci))


def _extraction(ctx: ThreatContext, budgets=None, surrogates=("base", "cf", "dualcf", "cca"), repeats=None):
    key = ("extraction", budgets, surrogates, repeats)
    if key not in ctx.memo:
        cfg, game = ctx.config, ctx.game
        budgets = budgets or cfg.query_budgets
        n_pool = len(game.X_pool)
        kept = tuple(b for b in budgets if b <= n_pool)
        if len(kept) < len(budgets):
            ctx.notes.append(
                f"query budgets above the adversary's {n_pool} pool rows were dropped: "
                f"{', '.join(str(b) for b in budgets if b > n_pool)}"
            )
        if not kept:
            raise InvalidInputError(
                f"every query budget exceeds the adversary's {n_pool} pool rows: lower --query-budgets"
            )
        fallback = game.dataset.X.iloc[game.pools.adversary]
        X_dom, note = domain_sample(game.dataset, game.preprocessor, N_DOMAIN, cfg.seed, fallback)
        if note and note not in ctx.notes:
            ctx.notes.append(note)
        ctx.memo[key] = extraction_curve(
            ctx.answer,
            n_pool,
            ctx.targets.model.predict,
            game.X_nonmembers,
            game.y_nonmembers,
            X_domain=X_dom,
            budgets=kept,
            surrogates=surrogates,
            repeats=repeats or cfg.extraction_repeats,
            random_state=derive_seed(cfg.seed, 61),
        )
    return ctx.memo[key]


@THREATS.register(
    "extraction",
    description="copies of the model from decisions and counterfactuals at each query budget (base, cf, dualcf, "
    "cca): fidelity on held-out rows and on the public domain, the query caps for 90% and 95%",
)
def _extraction_threat(ctx: ThreatContext) -> dict:
    return {"extraction": _extraction(ctx)[0]}


@THREATS.register(
    "attribute",
    description="the targets' --sensitive column inferred through an extracted copy (Yang et al. 2022), "
    "against the prior",
    needs=("sensitive",),
)
def _attribute(ctx: ThreatContext) -> dict:
    from recourse_privacy.attacks.attribute import attribute_inference_candidates

    cfg, game, t = ctx.config, ctx.game, ctx.targets
    if "extraction" in cfg.threats:
        curve, proba = _extraction(ctx)
    else:  # one copy at the largest budget suffices
        curve, proba = _extraction(ctx, budgets=(max(cfg.query_budgets),), surrogates=("cf", "cca"), repeats=1)
    best = curve.best_at(curve.budgets[-1])
    cand = sensitive_candidates(game, cfg.sensitive, t.rows)
    res = attribute_inference_candidates(
        proba,
        cand.targets,
        t.y,
        cand.truth_targets,
        cand.adversary,
        game.y_pool,
        cand.truth_adversary,
        cand.labels,
        random_state=derive_seed(cfg.seed, 67),
    )
    a_t, pred, labels = res.truth, res.predicted, cand.labels
    known = cand.truth_adversary[cand.truth_adversary >= 0]
    prior = np.bincount(known, minlength=len(labels)).argmax()
    n = len(a_t)
    k_acc, k_prior = int((pred == a_t).sum()), int((a_t == prior).sum())
    acc_lo, acc_hi = clopper_pearson(k_acc, n)
    pr_lo, pr_hi = clopper_pearson(k_prior, n)
    per_side = {s: float((pred == a_t)[t.is_member == s].mean()) for s in (0, 1)}
    return {
        "attribute": AttributeSummary(
            column=str(cfg.sensitive),
            values=tuple(labels),
            n_targets=n,
            accuracy=k_acc / n,
            accuracy_low=float(acc_lo),
            accuracy_high=float(acc_hi),
            prior_accuracy=k_prior / n,
            prior_low=float(pr_lo),
            prior_high=float(pr_hi),
            label_baseline_accuracy=float(res.baseline_accuracy),
            balanced_accuracy=float(res.balanced_accuracy),
            member_accuracy=per_side[1],
            nonmember_accuracy=per_side[0],
            surrogate=best.attack,
            surrogate_queries=best.queries,
        )
    }


@dataclass(frozen=True)
class SensitiveCandidates:
    """The sensitive column's values (labels, from the adversary's rows), every row re-encoded with each value
    (``targets[v]``, ``adversary[v]``), and each row's true value as an index into the labels (-1: another)."""

    labels: tuple[str, ...]
    targets: tuple[np.ndarray, ...]
    adversary: tuple[np.ndarray, ...]
    truth_targets: np.ndarray
    truth_adversary: np.ndarray


def sensitive_candidates(game: GameData, column: str, target_rows: np.ndarray | None) -> SensitiveCandidates:
    """Each target's and adversary row's raw record with ``column`` set to each of its values, encoded by the
    game's preprocessor: right for any encoding (one-hot, scaled, rows normalised to unit norm, where a value
    has no fixed encoded form). The values are those of the adversary's rows (2 to ``MAX_SENSITIVE_VALUES``)."""
    if target_rows is None:
        raise InvalidInputError(f"--sensitive {column}: the targets' rows in the data are unknown")
    pre, X = game.preprocessor, game.dataset.X
    if not any(str(src) == str(column) for src in pre.feature_sources_):
        raise InvalidInputError(
            f"--sensitive {column}: the preprocessing dropped every encoded column of it (a correlated or constant "
            "feature); choose another column"
        )
    adv_raw = X.iloc[game.pools.adversary].reset_index(drop=True)
    tgt_raw = X.iloc[np.asarray(target_rows)].reset_index(drop=True)
    levels = pd.unique(adv_raw[column].dropna())
    if len(levels) < 2 or len(levels) > MAX_SENSITIVE_VALUES:
        raise InvalidInputError(
            f"--sensitive {column} takes {len(levels)} values in the adversary's rows; attribute inference needs "
            f"2 to {MAX_SENSITIVE_VALUES} (a categorical column or a small integer code)"
        )
    levels = sorted(levels, key=str)
    index = {v: i for i, v in enumerate(levels)}

    def truth(raw: pd.DataFrame) -> np.ndarray:
        return np.asarray([index.get(v, -1) for v in raw[column]], dtype=np.int64)

    def encoded(raw: pd.DataFrame) -> tuple[np.ndarray, ...]:
        return tuple(pre.transform(raw.assign(**{column: [v] * len(raw)})) for v in levels)

    return SensitiveCandidates(
        tuple(str(v) for v in levels), encoded(tgt_raw), encoded(adv_raw), truth(tgt_raw), truth(adv_raw)
    )


def check_sensitive(config: AuditConfig, dataset) -> None:
    """Before any model trains: the --sensitive column exists in the data and is a feature."""
    if config.sensitive is None:
        return
    columns = [str(c) for c in dataset.X.columns]
    if config.sensitive not in columns:
        raise InvalidInputError(
            f"--sensitive {config.sensitive!r} is not a feature of {dataset.name}; its features are {', '.join(columns)}"
        )
    gaps = int(dataset.X[config.sensitive].isna().sum())
    if gaps:
        raise InvalidInputError(
            f"--sensitive {config.sensitive}: the column is missing in {gaps} rows; attribute inference needs its "
            "value in every row (choose another column, or audit the rows that have it)"
        )
    n = dataset.X[config.sensitive].nunique()
    if not 2 <= n <= MAX_SENSITIVE_VALUES:
        raise InvalidInputError(
            f"--sensitive {config.sensitive} takes {n} values; attribute inference needs 2 to "
            f"{MAX_SENSITIVE_VALUES} (a categorical column or a small integer code)"
        )


def run_threats(ctx: ThreatContext) -> ThreatReport:
    """Every threat of ``ctx.config.threats``, through the registry, in one typed report."""
    parts: dict = {}
    for name in ctx.config.threats:
        parts.update(THREATS.get(name).obj(ctx))
    return ThreatReport(
        threats=tuple(ctx.config.threats),
        extraction=parts.get("extraction"),
        attribute=parts.get("attribute"),
        queries=parts.get("queries", ()),
        notes=tuple(ctx.notes),
        release=parts.get("release"),
    )
