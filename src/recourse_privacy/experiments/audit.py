"""The recourse-based membership-inference audit (paper 000, Definition 1), end to end.

:func:`run_audit` plays the game once: pools, preprocessing fitted on the owner's data,
the owner's model, recourse for the rejected members and non-members, the adversary's shadow
models, every attack's scores and their metrics. The CLI's ``audit`` command is this
function plus a progress bar and a printed table.
"""
from __future__ import annotations

import inspect
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from recourse_privacy.validation import derive_seed
from recourse_privacy.experiments.config import AuditConfig

#: progress callback: (stage, completed, total)
Progress = Callable[[str, int, int], None]



@dataclass
class AuditResult:
    """Everything one audit produced: the metrics.json content and the arrays behind it."""

    metrics: dict
    scores: dict                    # attack name -> AttackScores
    is_member: np.ndarray           # per target
    cfd: np.ndarray                 # per target, in config.distance
    recourse: object                # RecourseResult of the owner's recourse
    pools: object = None            # the disjoint member / non-member / adversary row indices
    files: dict = field(default_factory=dict)

    def table(self) -> list[dict]:
        """One row per attack: name, AUC, BA, TPR at each FPR."""
        rows = []
        for name, m in self.metrics["attacks"].items():
            row = {"attack": name, "auc": m["auc"], "balanced_accuracy": m["balanced_accuracy"]}
            row.update({f"tpr@{k}": v for k, v in m["tpr_at_fpr"].items()})
            rows.append(row)
        return rows


def _load(config: AuditConfig):
    from recourse_privacy.data import load_dataset, load_tabular

    if config.data is not None:
        return load_tabular(config.data, config.target)
    if config.dataset == "synthetic":
        return load_dataset("synthetic", n_samples=sum(config.pool_sizes), n_features=config.n_features,
                            random_state=derive_seed(config.seed, 1), **config.data_params)
    return load_dataset(config.dataset, config.data_dir, **config.data_params)


def _recourse_method(config: AuditConfig, pre):
    from recourse_privacy.recourse import RECOURSE_METHODS, ActionSet, make_recourse

    params = dict(config.recourse_params)
    if config.defense == "laplace":
        # the adversary's shadow worlds simulate LR (it knows the mechanism, not the owner's noise or budget)
        from recourse_privacy.defenses.laplace import SimulatedLaplaceRecourse

        return SimulatedLaplaceRecourse(epsilon=config.epsilon, random_state=derive_seed(config.seed, 7), **params)
    if config.actionable:
        params.setdefault("action_set", ActionSet.from_preprocessor(pre))
    if "random_state" in inspect.signature(RECOURSE_METHODS[config.recourse][0]).parameters:
        params.setdefault("random_state", derive_seed(config.seed, 8))  # randomized methods: same seed, same numbers
    return make_recourse(config.recourse, **params)


def _owner_recourse(config: AuditConfig, recourse, model, Xm, ym, X_t):
    """The owner's recourse for the targets; under LR, through a session whose budget is exactly n_targets * epsilon."""
    from recourse_privacy.recourse import fit_for

    if config.defense != "laplace":
        return fit_for(recourse, Xm, ym, model).generate(model, X_t), None
    from recourse_privacy.defenses import LaplaceRecourse, RecourseSession

    method = LaplaceRecourse(epsilon=config.epsilon, random_state=derive_seed(config.seed, 6), **config.recourse_params)
    session = RecourseSession(method, model, budget=len(X_t) * config.epsilon)
    return session.answer(X_t), session


def _direction_attack(res, is_member, X_pool, y_pool) -> dict:
    """Score targets from LR's released move direction alone: every x' - x is parallel to w, not private.

    The direction u = w / ||w|| is read off any released move, its sign from the adversary's
    labelled pool (favourable rows project higher); -u.x ranks the targets exactly as their
    non-private distance to the boundary |w.x + b| / ||w|| (all targets are rejected).
    """
    import warnings as _w

    from recourse_privacy.metrics import attack_metrics

    D = res.counterfactuals - res.factuals
    norms = np.linalg.norm(D, axis=1)
    if not len(norms) or norms.max() == 0:
        return {}
    u = D[int(np.argmax(norms))] / norms.max()
    if np.mean(X_pool[y_pool == 1] @ u) < np.mean(X_pool[y_pool == 0] @ u):
        u = -u
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        m = attack_metrics(is_member, -(res.factuals @ u)).to_dict()
    return {"auc": m["auc"], "balanced_accuracy": m["balanced_accuracy"], "tpr_at_fpr": m["tpr_at_fpr"],
            "what": "targets ranked by -u.x with u = w/||w|| read off the released counterfactual moves: the "
                    "baseline CFD ranking, whatever epsilon"}


def _dp_block(config: AuditConfig, model, session, res, is_member=None, X_pool=None, y_pool=None) -> dict | None:
    """metrics.json's "dp" block: the epsilon of one recourse, of the whole release, and Theorem 2's bound."""
    from recourse_privacy.defenses.accounting import dp_ba_bound

    if config.defense == "none":
        return None
    if config.defense == "laplace":
        eps = float(config.epsilon)
        clamped = res.info["clamped_low"] | res.info["clamped_high"]
        direction = _direction_attack(res, is_member, X_pool, y_pool) if is_member is not None else {}
        return {"defense": "laplace", "mechanism": "Laplace Recourse (paper 001, sec. 4.2.2), sensitivity "
                f"{res.info['sensitivity']:g}", "epsilon_per_query": eps, "epsilon_total": session.spent,
                "delta": 0.0, "budget": session.budget, "n_queries": session.n_queries,
                "bound_epsilon": eps, "ba_bound": dp_ba_bound(eps),
                "clamped_share": float(clamped.mean()) if len(clamped) else 0.0,
                "composition": "basic (sequential): every target's recourse is one query costing epsilon_per_query, "
                "so the release costs epsilon_total = n_queries x epsilon_per_query (the session's budget, all spent). "
                "ba_bound uses epsilon_per_query: each attack scores a target from that target's own recourse, one "
                "epsilon-DP query (Theorem 2's game); an attacker combining all released recourses is bounded only "
                "by epsilon_total.",
                "guarantee": "only the noisy score f'(x) (steps 1-3) is epsilon-DP. The counterfactual x' = x + "
                "(s - f'(x)) w / ||w||^2 also reveals the direction of w (and, through clamped rows, ||w||), a "
                "non-private function of the training data, so the released recourse is NOT epsilon-DP and ba_bound "
                "holds only for attacks that read the noisy distance (CFD, CFD-LRT); direction_attack shows one that "
                "reads the direction",
                "direction_attack": direction}
    eps = float(model.epsilon_)
    delta = float(getattr(model, "delta_", 0.0))
    return {"defense": "dpm", "mechanism": f"DP-trained model {config.effective_model[0]!r} (paper 001, DPM)",
            "epsilon_target": float(config.epsilon), "epsilon_per_query": eps, "epsilon_total": eps,
            "delta": delta, "bound_epsilon": eps, "ba_bound": dp_ba_bound(eps, delta),
            "composition": "the model is trained once with (epsilon, delta)-DP; every recourse is post-processing "
            "of it, so any number of queries costs nothing more: epsilon_total = epsilon_per_query = the model's "
            "epsilon" + (" (Opacus' accountant, achieved)" if delta > 0 else "")}


def run_audit(config: AuditConfig | None = None, out_dir: str | Path | None = None, *,
              progress: Progress | None = None, **overrides) -> AuditResult:
    """Play the recourse membership-inference game once and measure every attack.

    ``config`` fields may also be given as keyword ``overrides``. With ``out_dir`` it writes
    ``metrics.json``, ``roc.png``, ``cfd_histogram.png`` and ``report.html`` there, and keeps
    each finished shadow model's statistics under ``out_dir/.cache`` so that a killed run
    resumes where it stopped.
    """
    from recourse_privacy import attacks as A
    from recourse_privacy.data import Preprocessor, split_pools
    from recourse_privacy.metrics import attack_metrics
    from recourse_privacy.models import accuracy, logit_confidence, model_factory, per_example_loss

    config = AuditConfig.from_dict({**(config or AuditConfig()).to_dict(), **overrides}).validate()
    report = progress or (lambda stage, done, total: None)
    t_start = time.perf_counter()
    timing: dict[str, float] = {}

    def lap(stage: str, t0: float) -> float:
        timing[stage] = round(time.perf_counter() - t0, 3)
        report(stage, 1, 1)
        return time.perf_counter()

    # 1. data, pools, preprocessing fitted on the owner's rows only
    t = time.perf_counter()
    report("data", 0, 1)
    ds = _load(config)
    n_mem, n_non, n_adv = config.pool_sizes
    pools = split_pools(ds.n_rows, n_mem, n_non, n_adv, random_state=derive_seed(config.seed, 2))
    pre = Preprocessor(scaling=config.scaling, corr_threshold=config.corr_threshold,
                       normalize_rows=config.normalize_rows).fit(ds.X.iloc[pools.members], ds)
    Xm, Xn, Xa = (pre.transform(ds.X.iloc[idx]) for idx in (pools.members, pools.nonmembers, pools.adversary))
    ym, yn, ya = ds.y[pools.members], ds.y[pools.nonmembers], ds.y[pools.adversary]
    recourse = _recourse_method(config, pre)
    t = lap("data", t)

    # 2. the owner's model, and the targets: members and non-members it rejects
    report("owner model", 0, 1)
    model_name, model_params = config.effective_model
    make_model = model_factory(model_name, **model_params)
    model = make_model(derive_seed(config.seed, 3)).fit(Xm, ym)
    rej_m, rej_n = model.predict(Xm) == 0, model.predict(Xn) == 0
    if not rej_m.any() or not rej_n.any():
        raise ValueError(f"the owner's model rejects {int(rej_m.sum())} members and {int(rej_n.sum())} "
                         "non-members; the game needs rejected points of both kinds")
    X_t = np.vstack([Xm[rej_m], Xn[rej_n]])
    y_t = np.concatenate([ym[rej_m], yn[rej_n]])
    is_member = np.concatenate([np.ones(rej_m.sum(), int), np.zeros(rej_n.sum(), int)])
    t = lap("owner model", t)

    # 3. the owner's recourse for every target
    report("recourse", 0, 1)
    res, session = _owner_recourse(config, recourse, model, Xm, ym, X_t)
    cfd = res.distance(config.distance)
    t = lap("recourse", t)

    # 4. the adversary's shadow models (only when an LRT attack asks for them)
    shadow = None
    if any(a in A.LRT_ATTACKS for a in config.attacks):
        need_cfd = any(a.startswith("cfd-lrt") for a in config.attacks)
        report("shadow models", 0, config.shadow_models)
        done = [0]

        def on_done(_k):
            done[0] += 1
            report("shadow models", done[0], config.shadow_models)

        cache = Path(out_dir) / ".cache" / config.digest() if out_dir is not None else None
        shadow = A.run_shadow_models(
            lambda k: make_model(derive_seed(config.seed, 100 + k)), recourse, Xa, ya, X_t, y_t,
            n_shadow=config.shadow_models, fraction=config.shadow_fraction, n_calibration=config.n_calibration,
            distance=config.distance, need_cfd=need_cfd, random_state=derive_seed(config.seed, 4),
            cache_dir=cache, n_jobs=config.n_jobs, on_done=on_done)
        timing["shadow models"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()

    # 5. attacks and their metrics
    report("attacks", 0, 1)
    lrt = {"center": config.center, "cdf": config.cdf}
    scores: dict[str, A.AttackScores] = {}
    for name in config.attacks:
        if name == "cfd":
            s = A.cfd_attack(cfd)
        elif name.startswith("cfd-lrt"):
            variance = {"cfd-lrt-global": "global", "cfd-lrt-per-example": "per-example"}.get(name, config.variance)
            s = A.cfd_lrt_attack(cfd, shadow, name=name, variance=variance, **lrt)
        elif name == "loss":
            s = A.loss_attack(per_example_loss(model, X_t, y_t))
        elif name == "loss-lrt":
            s = A.loss_lrt_attack(logit_confidence(model, X_t, y_t), shadow, variance=config.variance, **lrt)
        else:
            s = A.random_attack(len(X_t), derive_seed(config.seed, 5))
        scores[name] = s

    caught: list[str] = []
    attack_results = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for name, s in scores.items():
            m = attack_metrics(is_member, s.scores).to_dict()
            m["direction"] = s.direction
            m.update({k: v for k, v in s.conventions.items()})
            attack_results[name] = m
    caught += sorted({str(x.message) for x in w})
    t = lap("attacks", t)

    summary = res.summary()
    summary.update(validity_members=float(res.valid[is_member == 1].mean()),
                   validity_nonmembers=float(res.valid[is_member == 0].mean()), distance=config.distance)
    if summary["n_invalid"]:
        caught.append(f"{summary['n_invalid']} of {summary['n']} targets got no valid recourse; their "
                      "distance to the last iterate is still scored")
    metrics = {
        "config": config.to_dict(),
        "data": {"dataset": config.data or config.dataset, "n_rows": ds.n_rows, "n_features": int(Xm.shape[1]),
                 "pools": {"members": n_mem, "nonmembers": n_non, "adversary": n_adv},
                 "dropped_correlated": list(pre.dropped_correlated_)},
        "model": {"name": model_name, "train_accuracy": accuracy(model, Xm, ym),
                  "test_accuracy": accuracy(model, Xn, yn)},
        "recourse": summary,
        "n_members": int(is_member.sum()),
        "n_nonmembers": int((is_member == 0).sum()),
        "attacks": attack_results,
        "warnings": caught,
    }
    if config.defense != "none":
        metrics["dp"] = _dp_block(config, model, session, res, is_member, Xa, ya)
    if shadow is not None:
        shadow_rows = int(round(config.shadow_fraction * shadow.n_shadow)) * n_adv // shadow.n_shadow
        if shadow_rows < 0.9 * n_mem:
            caught.append(f"each shadow model trains on about {shadow_rows} rows, the owner's model on {n_mem}: "
                          "shadow models that see fewer rows overfit differently, which weakens the LRT attacks; "
                          f"give the adversary a pool of {int(np.ceil(n_mem / config.shadow_fraction))} rows "
                          "(--n-adversary) so that they match")
        metrics["shadow"] = {"n": shadow.n_shadow, "fraction": config.shadow_fraction, "train_rows": shadow_rows,
                             "mean_train_accuracy": float(shadow.train_accuracy.mean()),
                             "n_calibration": int(shadow.keep_calib.shape[0])}
    timing["total"] = round(time.perf_counter() - t_start, 3)
    metrics["timing_seconds"] = timing
    result = AuditResult(metrics, scores, is_member, cfd, res, pools)
    if out_dir is not None:
        result.files = write_outputs(result, out_dir)
    return result


def write_outputs(result: AuditResult, out_dir: str | Path) -> dict:
    """Write metrics.json, roc.png, cfd_histogram.png and report.html into ``out_dir``."""
    from recourse_privacy.metrics import plot_roc_loglog, plot_score_histogram
    from recourse_privacy.report import write_html_report

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = result.metrics["config"]
    title = f"{cfg['data'] or cfg['dataset']} / {cfg['model']} / {cfg['recourse']}"
    files = {"roc": plot_roc_loglog({n: (result.is_member, s.scores) for n, s in result.scores.items()},
                                    out / "roc.png", title=title),
             "cfd_histogram": plot_score_histogram(result.cfd[result.is_member == 1], result.cfd[result.is_member == 0],
                                                   out / "cfd_histogram.png",
                                                   xlabel=f"counterfactual distance ({cfg['distance']})", title=title)}
    tmp = out / "metrics.json.tmp"
    tmp.write_text(json.dumps(result.metrics, indent=2, default=_json_default))
    tmp.replace(out / "metrics.json")
    files["metrics"] = out / "metrics.json"
    files["report"] = write_html_report(result.metrics, out, images={
        "Log-log ROC of every attack against random guessing": files["roc"],
        "Counterfactual distances of members and non-members": files["cfd_histogram"]})
    return {k: str(v) for k, v in files.items()}


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
