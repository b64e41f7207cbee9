"""Trained-neighbour audits of every private release the package ships, each with a broken twin.

Every experiment here trains the shipped mechanism on D and on D' = D plus one canary (an outlier
at the public bound), runs after run, and reads one statistic of the release chosen for that
mechanism (its description says which). Each honest release has a deliberately broken variant
(``NAME-broken``) whose true epsilon is far above the claim; the audit must flag it (see
``docs/dp-audit.md``, "Every private release").

========================  ==================================================================
mechanism                 release, canary, statistic
========================  ==================================================================
trained-dpsgd             DPMLPModel (Opacus DP-SGD); canary c*e_1 labelled 0 on a coordinate
                          no other row uses; f(c) - f(0), the logit the canary's coordinate
                          carries (only the canary's clipped gradient and the noise touch it)
trained-privrecourse      PrivRecourse's diffprivlib DP k-means centres on [0, 1]^d; canary at
                          the corner (1, ..., 1) far from the data; distance from the canary
                          to its nearest released centre
trained-dpc               DPC, hardened mode (FM autoencoder + Laplace prototypes, the budget
                          split in half); canary (1, ..., 1) of class 1; distance between the
                          released class-1 prototype and the released encoder's code of the canary
trained-mst               MST synthetic data (mbi); canary (1, ..., 1) in the corner cell;
                          number of synthetic rows in the canary's cell
trained-laplace-answer    Laplace Recourse's answer: the noisy probability of the canary under a
                          logistic regression trained on D or D'; the noisy probability
========================  ==================================================================

Broken twins: DP-SGD with the noise multiplier Opacus calibrated divided by 10; k-means, DPC
prototypes and MST handed 10 x the claimed epsilon (noise scale divided by about 10); Laplace
Recourse with sensitivity 0.1 instead of 1 (noise divided by 10). Also registered, not broken on
purpose but known not to be covered: ``trained-dpc-faithful`` (the paper's DPC, prototypes as raw
class means; only the autoencoder is noised).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from recourse_privacy.dp_audit.bounds import DistinguishingExperiment, EpsilonAudit
from recourse_privacy.dp_audit.experiments import make_experiment, register_mechanism
from recourse_privacy.hyperparams import Int
from recourse_privacy.validation import MAX_SEED, RandomState, check_positive_float, derive_seed

__all__ = ["RELEASE_AUDITS", "ReleaseAudit", "audit_release", "release_experiment"]

#: the broken variants divide the noise scale by this factor
BROKEN_FACTOR = 10.0

#: the parameters every release experiment takes (small data keeps each run fast)
_PARAMS = {"n_rows": Int(8, 10_000), "data_seed": Int(0, MAX_SEED)}


def _cluster_data(n_rows: int, d: int, data_seed: int, high: float = 0.3) -> np.ndarray:
    """``n_rows`` points uniform in [0, high]^d: the private data, far from the canary (1, ..., 1)."""
    return np.random.default_rng(derive_seed(data_seed, 29)).uniform(0.0, high, size=(n_rows, d))


@contextlib.contextmanager
def _quiet():
    from threadpoolctl import threadpool_limits

    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        yield


def _experiment(name, epsilon, run, *, statistic, neighbours, delta=0.0) -> DistinguishingExperiment:
    """Wrap ``run(which, seed) -> float`` (one whole training and release) as a batched sampler."""

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        seeds = rng.integers(0, 2**31 - 1, size=n)
        with _quiet():
            return np.array([run(which, int(s)) for s in seeds], dtype=np.float64)

    return DistinguishingExperiment(
        name=name, sample=sample, claimed_epsilon=epsilon, delta=delta, statistic=statistic, neighbours=neighbours
    )


# ----------------------------------------------------------------------------- DP-SGD (Opacus)


#: the broken DP-SGD's clipping norm: no clipping in effect
NO_CLIP = 1e6


@contextlib.contextmanager
def _no_clipping():
    """Opacus without clipping (a broken DP-SGD): clip at NO_CLIP, the noise std kept at the calibrated nm * C."""
    from opacus import PrivacyEngine

    original = PrivacyEngine.make_private_with_epsilon

    def broken(self, *args, **kwargs):
        module, opt, loader = original(self, *args, **kwargs)
        opt.noise_multiplier = opt.noise_multiplier * opt.max_grad_norm / NO_CLIP
        opt.max_grad_norm = NO_CLIP
        return module, opt, loader

    PrivacyEngine.make_private_with_epsilon = broken
    try:
        yield
    finally:
        PrivacyEngine.make_private_with_epsilon = original


def dpsgd_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 32, data_seed: int = 0):
    """DPMLPModel (DP-SGD, clip 1, delta 1e-5) on D vs D' = D + canary 100 e_1 labelled 0; f(c) - f(0)."""
    from recourse_privacy.dp_audit.experiments import dpm_canary_data
    from recourse_privacy.models.dp import DPMLPModel

    epsilon = check_positive_float(epsilon, "epsilon")
    X, y, _ = dpm_canary_data(n_rows + 1, 2, 1.0, data_seed)
    X_d, y_d = X[1:], y[1:]
    c = np.array([[100.0, 0.0]])  # DP-SGD bounds each row's gradient by clipping, not the rows: any canary
    data = ((X_d, y_d), (np.vstack([X_d, c]), np.append(y_d, 0)))
    probe = np.vstack([c, np.zeros((1, 2))])

    def run(which: int, seed: int) -> float:
        import torch

        from recourse_privacy.models.mlp import MLPModel

        Xw, yw = data[which]
        m = DPMLPModel(
            epsilon=epsilon, delta=1e-5, hidden_layers=(4,), lr=0.1, epochs=4, batch_size=len(Xw), random_state=seed
        )
        with torch.random.fork_rng(devices=[]), _no_clipping() if broken else contextlib.nullcontext():
            torch.set_num_threads(1)
            m.fit(Xw, yw)
            init = MLPModel._build(m, 2, derive_seed(seed, 0))  # the white-box auditor knows the initialisation
            with torch.no_grad():
                before = init(torch.as_tensor(probe, dtype=torch.float32)).numpy().reshape(-1)
        after = np.asarray(m.decision_function(probe), dtype=np.float64).reshape(-1)
        return float((after[0] - after[1]) - (before[0] - before[1]))

    return _experiment(
        "trained-dpsgd" + ("-broken" if broken else ""),
        epsilon,
        run,
        delta=1e-5,
        statistic="the change of f(c) - f(0) from the (known) initialisation: what training put on the canary's coordinate",
        neighbours=f"D: {n_rows} rows x 2 (first coordinate 0); D' = D + canary 100 e_1 labelled 0; DPMLPModel (4,) "
        "ReLU, full-batch Poisson sampling, 4 epochs, clip 1, delta 1e-5"
        + ("; BROKEN: no clipping (noise std unchanged)" if broken else ""),
    )


# ----------------------------------------------------------------------------- PrivRecourse k-means


def kmeans_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """PrivRecourse's DiffprivlibKMeans centres; distance from the canary (1, 1) to the nearest centre."""
    from recourse_privacy.privrecourse.clustering import DiffprivlibKMeans

    epsilon = check_positive_float(epsilon, "epsilon")
    X_d = _cluster_data(n_rows, 2, data_seed)
    c = np.ones((1, 2))
    data = (X_d, np.vstack([X_d, c]))

    def run(which: int, seed: int) -> float:
        Xw = data[which]
        if broken:  # the bounds read from the private data, rescaled to [0, 1]^d as PrivRecourse would
            lo, hi = Xw.min(0), Xw.max(0)
            km = DiffprivlibKMeans(n_clusters=2, epsilon=epsilon, drop_empty=False, random_state=seed)
            C = km.fit((Xw - lo) / (hi - lo)).cluster_centers_ * (hi - lo) + lo
        else:
            C = (
                DiffprivlibKMeans(n_clusters=2, epsilon=epsilon, drop_empty=False, random_state=seed)
                .fit(Xw)
                .cluster_centers_
            )
        return float(np.linalg.norm(C - c, axis=1).min()) if len(C) else math.sqrt(2.0)

    return _experiment(
        "trained-privrecourse" + ("-broken" if broken else ""),
        epsilon,
        run,
        statistic="distance from the canary to its nearest released centre",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^2; D' = D + canary (1, 1); DiffprivlibKMeans k=2, public "
        "bounds [0, 1]^2" + ("; BROKEN: bounds read from the private data" if broken else ""),
    )


# ----------------------------------------------------------------------------- DPC


def dpc_experiment(epsilon: float, *, mode: str = "hardened", broken: bool = False, n_rows: int = 24, data_seed=0):
    """DPC (FM autoencoder + class prototypes); distance from Enc(canary) to the class-1 prototype."""
    from recourse_privacy.dpc.core import DPCExplainer

    epsilon = check_positive_float(epsilon, "epsilon")
    d = 3
    X_d = _cluster_data(n_rows, d, data_seed)
    y_d = (np.arange(n_rows) < 2).astype(np.int64)  # class 1 is rare: two rows, so one more row moves its prototype
    c = np.ones((1, d))
    data = ((X_d, y_d), (np.vstack([X_d, c]), np.append(y_d, 1)))
    if mode == "faithful":  # the paper: the whole budget to the autoencoder, raw class means
        kw = {"mode": "faithful", "epsilon": epsilon}
    else:
        used = epsilon * (BROKEN_FACTOR if broken else 1.0)
        kw = {"mode": "hardened", "epsilon": used / 2, "epsilon_prototypes": used / 2}

    def run(which: int, seed: int) -> float:
        import torch

        Xw, yw = data[which]
        with torch.random.fork_rng(devices=[]):
            torch.set_num_threads(1)
            dpc = DPCExplainer(bounds=(np.zeros(d), np.ones(d)), ae_epochs=3, random_state=seed, **kw)
            dpc.fit(Xw, yw, n_classes=2)
            code = dpc.autoencoder.encode(c)
        return float(np.linalg.norm(dpc.prototypes_.centers[1] - code[0]))

    name = "trained-dpc" + ("-faithful" if mode == "faithful" else "") + ("-broken" if broken else "")
    what = {
        "faithful": "faithful (the paper): autoencoder epsilon, prototypes raw class means",
        "hardened": "hardened: epsilon/2 autoencoder + epsilon/2 Laplace prototypes",
    }[mode]
    return _experiment(
        name,
        epsilon,
        run,
        statistic="distance between the class-1 prototype and the released encoder's code of the canary",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^3, two of class 1; D' = D + canary (1, 1, 1) of class "
        f"1; DPC {what}, public bounds [0, 1]^3" + (f"; BROKEN: handed {BROKEN_FACTOR:g} x epsilon" if broken else ""),
    )


# ----------------------------------------------------------------------------- MST


def mst_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """MST synthetic data (delta 1e-9); the number of synthetic rows in the canary's corner cell."""
    from recourse_privacy.privrecourse.baselines import mst_synthetic_data

    epsilon = check_positive_float(epsilon, "epsilon")
    X_d = _cluster_data(n_rows, 2, data_seed)
    c = np.ones((1, 2))
    data = (X_d, np.vstack([X_d, c]))
    used = epsilon * (BROKEN_FACTOR if broken else 1.0)
    bins = 4

    def run(which: int, seed: int) -> float:
        pts, _, _ = mst_synthetic_data(
            data[which], epsilon=used, delta=1e-9, n_rows=10 * n_rows, bins=bins, iters=30, random_state=seed
        )
        return float(np.all(pts >= 1.0 - 1.0 / bins, axis=1).sum())

    return _experiment(
        "trained-mst" + ("-broken" if broken else ""),
        epsilon,
        run,
        delta=1e-9,
        statistic="synthetic rows in the canary's cell",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^2; D' = D + canary (1, 1); MST, {bins} bins, delta 1e-9, "
        f"{10 * n_rows} synthetic rows" + (f"; BROKEN: handed {BROKEN_FACTOR:g} x epsilon" if broken else ""),
    )


# ----------------------------------------------------------------------------- Laplace Recourse


def laplace_answer_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """Laplace Recourse's noisy probability at the canary, over an LR trained on D or D'."""
    from recourse_privacy.defenses.laplace import noisy_probability
    from recourse_privacy.dp_audit.experiments import dpm_canary_data
    from recourse_privacy.models import make_model

    epsilon = check_positive_float(epsilon, "epsilon")
    X, y, _ = dpm_canary_data(n_rows + 1, 2, 1.0, data_seed)
    X_d, y_d = X[1:], y[1:]
    c = np.array([[10.0, 0.0]])  # any row: the claim (sensitivity 1 of a probability) holds for every neighbour
    probs = []
    with _quiet():
        for Xw, yw in ((X_d, y_d), (np.vstack([X_d, c]), np.append(y_d, 0))):
            probs.append(float(make_model("logistic").fit(Xw, yw).predict_proba(c)[0, 1]))
    sens = 1.0 / BROKEN_FACTOR if broken else 1.0

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        return noisy_probability(np.full(n, probs[which]), epsilon, sensitivity=sens, random_state=rng)

    return DistinguishingExperiment(
        name="trained-laplace-answer" + ("-broken" if broken else ""),
        sample=sample,
        claimed_epsilon=epsilon,
        statistic="the noisy probability of the canary (Laplace Recourse's answer)",
        neighbours=f"D: {n_rows} rows x 2 (first coordinate 0); D' = D + canary 10 e_1 labelled 0; logistic regression "
        f"trained on each (p = {probs[0]:.3f} vs {probs[1]:.3f} at the canary)"
        + (f"; BROKEN: sensitivity 1/{BROKEN_FACTOR:g}" if broken else ""),
    )


# ----------------------------------------------------------------------------- registry


#: name -> (builder, what it audits, the side of the statistic D' is expected on, fixed before any run)
RELEASE_AUDITS: dict[str, tuple[Callable[..., DistinguishingExperiment], str, str]] = {}


def _register(name: str, builder: Callable, description: str, side: str) -> None:
    RELEASE_AUDITS[name] = (builder, description, side)
    register_mechanism(name, description=description, params=_PARAMS)(builder)


def _variant(fn, **fixed):
    def build(epsilon: float, **params):
        return fn(epsilon, **fixed, **params)

    build.__qualname__ = f"{fn.__name__}[{', '.join(f'{k}={v}' for k, v in fixed.items())}]"
    return build


_BROKEN = "BROKEN on purpose (the audit must flag it): "
for _name, _fn, _side, _what, _broke in (
    (
        "trained-dpsgd",
        dpsgd_experiment,
        "<=",
        "DP-SGD MLP (Opacus), trained with and without an outlier canary; statistic f(canary) - f(0)",
        "the noise multiplier divided by 10",
    ),
    (
        "trained-privrecourse",
        kmeans_experiment,
        "<=",
        "PrivRecourse's DP k-means centres (diffprivlib), trained with "
        "and without a corner canary; statistic the canary's distance to its nearest centre",
        "10 x epsilon",
    ),
    (
        "trained-dpc",
        _variant(dpc_experiment, mode="hardened"),
        "<=",
        "DPC hardened (FM autoencoder + Laplace "
        "prototypes), with and without a corner canary of class 1; statistic |prototype_1 - Enc(canary)|",
        "prototypes handed 10 x their epsilon",
    ),
    (
        "trained-mst",
        mst_experiment,
        ">=",
        "MST synthetic data (mbi), with and without a corner canary; statistic the synthetic rows in the canary's cell",
        "10 x epsilon",
    ),
    (
        "trained-laplace-answer",
        laplace_answer_experiment,
        "<=",
        "Laplace Recourse's answer (noisy probability of the "
        "canary) over an LR trained with and without the canary; statistic the noisy probability",
        "sensitivity 0.1 instead of 1",
    ),
):
    _register(_name, _variant(_fn), _what, _side)
    _register(f"{_name}-broken", _variant(_fn, broken=True), _BROKEN + _broke, _side)
_register(
    "trained-dpc-faithful",
    _variant(dpc_experiment, mode="faithful"),
    "DPC faithful (the paper: prototypes are raw class means, only the autoencoder noised; NOT covered by its "
    "claim, see dpc.md sec. 11); statistic |prototype_1 - Enc(canary)|",
    "<=",
)


@dataclass(frozen=True)
class ReleaseAudit:
    """A release audited at one claim: the many-run Clopper-Pearson audit and the score-based bounds."""

    many_run: EpsilonAudit
    scores: object  # canary_scores.ScoresAudit on a coin-flip subset of the same runs

    def row(self) -> dict:
        s = self.scores
        return {
            "release": self.many_run.mechanism,
            "claim": self.many_run.claimed_epsilon,
            "delta": self.many_run.delta,
            "clopper_pearson": self.many_run.epsilon_lower_bound,
            "one_run": s["one_run"].epsilon_lower_bound,
            "one_run_fdp": s["one_run_fdp"].epsilon_lower_bound,
            "one_run_fdp_mu": s["one_run_fdp"].mu_lower_bound,
            "gdp_mu": s["gdp"].mu_lower_bound,
            "verdict": self.many_run.verdict,
            "violates_claim": self.many_run.violates_claim,
            "seconds": self.many_run.seconds,
        }


def release_experiment(name: str, epsilon: float, **params) -> DistinguishingExperiment:
    """The registered release experiment ``name`` at claim ``epsilon`` (validated)."""
    return make_experiment(name, epsilon, **params)


def audit_release(
    name: str, epsilon: float, *, n_trials: int = 100, alpha: float = 0.05, random_state: RandomState = 0, **params
) -> ReleaseAudit:
    """Audit ``name`` at ``epsilon``: the many-run audit, then the four score bounds on the same runs.

    The score bounds (:func:`~recourse_privacy.dp_audit.canary_scores.audit_scores`) read a
    subset of the same runs as independent canaries: for each of ``n_trials`` canaries a fair coin
    says D or D', and the next unused run of that neighbour gives its score (runs are independent
    and identically distributed within a neighbour, so this is exactly one independent run per
    canary with coin-flip inclusion, the one-run theorems' assumption, and stronger).
    """
    from recourse_privacy.dp_audit.bounds import audit_mechanism
    from recourse_privacy.dp_audit.canary_scores import audit_scores

    exp = release_experiment(name, epsilon, **params)
    kept: list[np.ndarray] = []

    def sample(which, rng, n):
        out = exp.sample(which, rng, n)
        kept.append(out)
        return out

    many = audit_mechanism(
        sample,
        n_trials=n_trials,
        claimed_epsilon=exp.claimed_epsilon,
        delta=exp.delta,
        alpha=alpha,
        random_state=random_state,
        mechanism=exp.name,
        statistic=exp.statistic,
        neighbours=exp.neighbours,
    )
    s0, s1 = kept
    rng = np.random.default_rng(derive_seed(random_state if isinstance(random_state, int) else 0, 2))
    member = rng.random(n_trials) < 0.5
    scores = np.empty(n_trials)
    scores[member] = s1[: int(member.sum())]
    scores[~member] = s0[: int((~member).sum())]
    if RELEASE_AUDITS[name][2] == "<=":  # higher score = "in", on the side fixed before any run
        scores = -scores
    sa = audit_scores(scores, member.astype(int), delta=exp.delta, alpha=alpha, random_state=0)
    return ReleaseAudit(many, sa)
