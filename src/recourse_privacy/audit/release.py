"""The ``release`` threat: the owner publishes counterfactuals; the adversary holds them and never queries the model.

The owner answers recourse, through the registered method's own ``generate`` (or the defense's
answers: Laplace Recourse its noisy ones), for ``--release-size`` applicants drawn from the
population outside the game: rows of the data in none of the three pools that the owner's model
rejects (topped up from the adversary's rejected rows, as said, where the data has too few). It
publishes the valid counterfactuals (``--release-with-factuals``: the pairs). The adversary holds
that set, its pool as the reference sample, and the targets of the membership game (Pawelczyk,
Lakkaraju and Neel 2023); the released-set attacks of
:mod:`~recourse_privacy.attacks.released_set` score them. Counted besides: the released
counterfactuals that are training rows verbatim (FACE and ``privrecourse-data`` answer with accepted
training points) and the targets among them, and, where the ``anonymeter`` extra is installed,
Anonymeter's three risks (Giomi et al. 2023) of the released set against a control set
(:mod:`~recourse_privacy.audit.anonymeter_risks`).
"""

from __future__ import annotations

import warnings

import numpy as np

from recourse_privacy.attacks.release_report import ReleaseRow, ReleaseSummary
from recourse_privacy.attacks.released_set import RELEASE_ATTACKS, ReleaseInputs, copied_rows
from recourse_privacy.audit.threats import THREATS, ThreatContext
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.validation import as_generator, derive_seed

__all__ = ["draw_applicants", "publish", "release_summary"]


def draw_applicants(ctx: ThreatContext, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(encoded applicants, their row ids, how they were drawn): rejected rows outside the pools, then the pool's."""
    game, model = ctx.game, ctx.targets.model
    pools = game.pools
    used = np.concatenate([pools.members, pools.nonmembers, pools.adversary])
    outside = np.setdiff1d(np.arange(game.dataset.n_rows), used)
    rng = as_generator(seed)
    X_out = game.preprocessor.transform(game.dataset.X.iloc[outside]) if len(outside) else np.empty((0, 0))
    rej = outside[np.asarray(model.predict(X_out)) == 0] if len(outside) else outside
    X_rej = X_out[np.asarray(model.predict(X_out)) == 0] if len(outside) else X_out
    take = rng.permutation(len(rej))[:n]
    X, ids = X_rej[take], rej[take]
    how = f"{len(ids)} rejected applicants from the {len(outside)} rows outside the game's pools"
    if len(ids) < n:
        pool_rej = np.flatnonzero(np.asarray(model.predict(game.X_pool)) == 0)
        more = rng.permutation(pool_rej)[: n - len(ids)]
        X = np.vstack([X, game.X_pool[more]]) if len(X) else game.X_pool[more]
        ids = np.concatenate([ids, pools.adversary[more]])
        how += f", topped up with {len(more)} of the adversary's rejected rows (too few rows outside the pools)"
    if not len(ids):
        raise InvalidInputError("the release threat found no rejected applicant to answer: lower --release-size")
    return X, ids, how


def publish(recourse, model, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The counterfactuals the owner publishes for applicants ``X`` (its valid answers) and their factuals."""
    res = recourse(model, X)
    ok = np.asarray(res.valid, bool) & (np.asarray(model.predict(res.counterfactuals)) == 1)
    return np.asarray(res.counterfactuals, float)[ok], X[ok]


def _simulator(ctx: ThreatContext, size: int, seed: int):
    """The adversary's simulated release from its pool plus the targets flagged in ``keep`` (the owner's recipe)."""
    game, t, cfg = ctx.game, ctx.targets, ctx.config
    n_pool = len(game.X_pool)
    n_train = max(1, min(game.n_owner_rows - int(t.is_member.sum()), n_pool // 2))  # the owner's size

    def simulate(keep: np.ndarray, k: int):
        rng = as_generator(derive_seed(seed, 300 + k))
        order = rng.permutation(n_pool)
        tr, rest = order[:n_train], order[n_train:]
        X = np.vstack([game.X_pool[tr], t.X[keep]])
        y = np.concatenate([game.y_pool[tr], t.y[keep]])
        model = ctx.make_model(derive_seed(seed, 400 + k)).fit(X, y)
        rej = rest[np.asarray(model.predict(game.X_pool[rest])) == 0][:size]
        fit_X, fit_y = (game.X_pool, game.y_pool) if cfg.recourse_fit == "adversary" else (X, y)
        cf, fac = publish(lambda m, Q: ctx.fit_recourse(m, fit_X, fit_y, Q), model, game.X_pool[rej])
        return (cf, fac) if len(cf) else (X[:1], X[:1])

    return simulate


def release_summary(ctx: ThreatContext) -> ReleaseSummary:
    """Publish the release, run every released-set attack, count the copies (and Anonymeter's risks)."""
    from recourse_privacy.metrics.membership import attack_metrics

    cfg, game, t = ctx.config, ctx.game, ctx.targets
    seed = derive_seed(cfg.seed, 71)
    X_app, _, how = draw_applicants(ctx, cfg.release_size, seed)
    released, factuals = publish(ctx.recourse, t.model, X_app)
    notes: list[str] = []
    if not len(released):
        raise InvalidInputError(
            f"the {cfg.recourse} recourse gave no valid counterfactual to the {len(X_app)} applicants: nothing to release"
        )
    X_train, _ = game.owner_training  # every row the model trained on (as deployed, beyond the members drawn)
    copies = copied_rows(X_train, released)  # per released row: a training row
    copied = copied_rows(released, X_train)  # per training row: published
    copied_ids = game.owner_rows[copied]
    member_rows = t.rows[t.is_member == 1] if t.rows is not None else np.empty(0, int)
    copied_members = int(np.isin(member_rows, copied_ids).sum())
    inputs = ReleaseInputs(
        released=released,
        targets=t.X,
        reference=game.X_pool,
        factuals=factuals if cfg.release_with_factuals else None,
        simulate=_simulator(ctx, min(cfg.release_size, len(game.X_pool)), seed)
        if ctx.make_model is not None and ctx.fit_recourse is not None
        else None,
        random_state=seed,
        notes=notes,
    )
    rows = []
    for name in RELEASE_ATTACKS.names():
        entry = RELEASE_ATTACKS.get(name)
        if "simulations" in entry.needs and inputs.simulate is None:
            notes.append(f"{name} skipped: the owner's recipe is not available to simulate releases")
            continue
        if "mst" in entry.needs and inputs.mst is None:
            continue  # an attack on MST synthetic data: this release is not one
        scores = np.nan_to_num(np.asarray(entry.obj(inputs), float), nan=-np.inf, neginf=-1e300)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = attack_metrics(t.is_member, scores, fprs=(0.01,), seed=seed)
        tp = m.tpr_at_fpr["0.01"]
        rows.append(
            ReleaseRow(
                method=_method(cfg),
                attack=name,
                auc=float(m.auc),
                auc_low=float(m.auc_ci[0]),
                auc_high=float(m.auc_ci[1]),
                tpr_at_1pct_fpr=float(tp.tpr),
                tpr_low=float(tp.ci[0]),
                tpr_high=float(tp.ci[1]),
                exact_copies=int(copies.sum()),
                copied_members=copied_members,
                tied_share=tied_share(scores),
            )
        )
    from recourse_privacy.audit.anonymeter_risks import anonymeter_risks

    risks, anon_note = anonymeter_risks(ctx, released, seed)
    return ReleaseSummary(
        method=_method(cfg),
        release_size=int(cfg.release_size),
        n_published=len(released),
        with_factuals=bool(cfg.release_with_factuals),
        applicants=how,
        rows=tuple(rows),
        exact_copies=int(copies.sum()),
        copied_members=copied_members,
        copied_row_ids=tuple(int(i) for i in np.sort(copied_ids)),
        anonymeter=risks,
        anonymeter_note=anon_note,
        notes=tuple(notes),
    )


def tied_share(scores: np.ndarray) -> float:
    """The share of ``scores`` equal to their most common value (1.0: every target tied, the attack has no power;
    -1.0 for no scores, as a row that did not record it)."""
    scores = np.asarray(scores, float).ravel()
    if not len(scores):
        return -1.0
    return float(np.unique(scores, return_counts=True)[1].max() / len(scores))


def _method(cfg) -> str:
    return cfg.recourse if cfg.defense == "none" else f"{cfg.recourse}+{cfg.defense}"


@THREATS.register(
    "release",
    description="a published set of counterfactuals, no queries: dcr, domias (van Breugel et al. 2023) and "
    "set-shadow (Stadler et al. 2022) membership, training rows copied verbatim, Anonymeter's risks",
)
def _release(ctx: ThreatContext) -> dict:
    return {"release": release_summary(ctx)}
