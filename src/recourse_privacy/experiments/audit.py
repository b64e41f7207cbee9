"""The recourse-based membership-inference audit (paper 000, Definition 1), end to end.

:func:`run_audit` plays the game once: pools, preprocessing fitted on the owner's data,
the owner's model, recourse for the rejected members and non-members, the adversary's shadow
models, every attack's scores and their metrics. The CLI's ``audit`` command is this
function plus a progress bar and a printed table.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from recourse_privacy._validation import derive_seed
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
    from recourse_privacy.recourse import ActionSet, make_recourse

    params = dict(config.recourse_params)
    if config.actionable:
        params.setdefault("action_set", ActionSet.from_preprocessor(pre))
    return make_recourse(config.recourse, **params)


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
    from recourse_privacy.recourse import fit_for

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
    make_model = model_factory(config.model, **config.model_params)
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
    res = fit_for(recourse, Xm, ym, model).generate(model, X_t)
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
        "model": {"name": config.model, "train_accuracy": accuracy(model, Xm, ym),
                  "test_accuracy": accuracy(model, Xn, yn)},
        "recourse": summary,
        "n_members": int(is_member.sum()),
        "n_nonmembers": int((is_member == 0).sum()),
        "attacks": attack_results,
        "warnings": caught,
    }
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
