"""Trained-neighbour audits of every private release the package ships, each with a broken twin.

Every experiment here trains the shipped mechanism on D and on D' = D plus one canary (an outlier
at the public bound), runs after run, and reads one statistic of the release chosen for that
mechanism: the strongest test we could design that knows the mechanism (each builder's docstring
says why). Each honest release has a deliberately broken variant (``NAME-broken``) whose true
epsilon is far above the claim; the audit must flag it (see ``docs/dp-audit.md``, "Every private
release").

========================  ==================================================================
mechanism                 release, canary, statistic
========================  ==================================================================
trained-dpsgd             DPMLPModel (Opacus DP-SGD); input-space dirac canaries 10 e_j, each
                          on its own coordinate (many per run: ``dpsgd_canaries``); white-box
                          score: the move of the canary's first-layer column along its descent
                          direction at the known initialisation
trained-privrecourse      PrivRecourse's diffprivlib DP k-means centres on [0, 1]^d; canary at
                          the corner (1, ..., 1) far from the data; distance from the canary
                          to its nearest released centre
trained-privrecourse-     the same k-means in one dimension, k = 2; canary 1 alone in a region no row is
  empty                   nearest to; the largest released centre (lower on D')
trained-privrecourse-     a bundle's default answers: the graph on DP k-means nodes, the DP LR deciding the
  sparse                  candidates and which changes each answer keeps; canary (1, 1) labelled 0; the
                          model decisions the answers to a grid of applicants reveal, read against LRs
                          fitted on D and D'
trained-dpc               DPC, hardened mode (FM autoencoder + Laplace prototypes, the budget
                          split in half); canary (1, ..., 1) of class 1; distance from the
                          canary to the class-1 prototype decoded into the feature space
trained-mst               MST synthetic data (mbi); canary (1, ..., 1) in the corner cell;
                          synthetic rows in the canary's top bins
trained-mst-rows          MST with its default number of synthetic rows; canary (1, 1); the number of rows
trained-privrecourse-     PrivRecourse's Laplace baseline (every record plus Laplace noise); D' REPLACES
  laplace                 record 0 (at the origin) by the canary (1, ..., 1), as its claim's neighbours do;
                          the Laplace likelihood ratio of that record's released point
trained-dpm-flip          the DP logistic regression as ``--defense dpm`` runs it (``-as-given``: C as given);
                          D' REPLACES the canary e_1 labelled 1 by itself labelled 0, 12 rows; its logit
trained-laplace-answer    Laplace Recourse's answer: the noisy probability of the canary under a
                          logistic regression trained on D or D'; the noisy probability
========================  ==================================================================

Broken twins: DP-SGD with the noise multiplier Opacus calibrated divided by 10 (clipping kept);
k-means, DPC and MST with their bounds read from the private data (min and max, used as if public:
the bug diffprivlib warns about); for the empty-region canary, diffprivlib's ``KMeans`` as it is; Laplace Recourse with sensitivity 0.1 instead of 1 (noise divided
by 10); the Laplace baseline's records with one feature's sensitivity (noise d times too small); the sparse answers set back by a logistic regression fitted without DP; MST with as many rows as the
data; the DP logistic regression run at 10 x epsilon. Also registered, not broken on purpose but known not to be covered:
``trained-dpc-faithful`` (the paper's DPC, prototypes as raw class means; only the autoencoder is
noised).
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
from recourse_privacy.dp_audit.trained import BROKEN_EPSILON_FACTOR
from recourse_privacy.hyperparams import Int
from recourse_privacy.validation import MAX_SEED, RandomState, check_positive_float, derive_seed

__all__ = ["RELEASE_AUDITS", "ReleaseAudit", "audit_release", "release_experiment"]

#: the broken Laplace answer divides the noise scale by this factor
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


def dpsgd_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 32, data_seed: int = 0):
    """DPMLPModel (DP-SGD, clip 1, delta 1e-5) on D vs D' = D + one dirac canary; the white-box score.

    The strongest test we have that knows the mechanism: the input-space dirac canary of
    :mod:`~recourse_privacy.dp_audit.dpsgd_canaries` (its own input coordinate, so only its clipped
    gradient and the noise move its first-layer column), scored by that column's move along the
    canary's descent direction at the (known) initialisation. One canary per run here (the
    many-run Clopper-Pearson audit); :func:`~recourse_privacy.dp_audit.dpsgd_canaries.dpsgd_one_run`
    puts many in one run for the one-run bounds.
    """
    from recourse_privacy.dp_audit.dpsgd_canaries import BROKEN_NOISE_FACTOR, HIDDEN_UNITS, dpsgd_canary_scores

    epsilon = check_positive_float(epsilon, "epsilon")

    def run(which: int, seed: int) -> float:
        inc = np.array([bool(which)])
        return float(dpsgd_canary_scores(epsilon, inc, seed=seed, broken=broken, n_rows=n_rows, data_seed=data_seed)[0])

    return _experiment(
        "trained-dpsgd" + ("-broken" if broken else ""),
        epsilon,
        run,
        delta=1e-5,
        statistic="white-box: the move of the canary's first-layer column along its descent direction at the "
        "(known) initialisation",
        neighbours=f"D: {n_rows} rows x 3 (the third coordinate 0); D' = D + the dirac canary 10 e_3 labelled as the "
        f"initial model gets it wrong; DPMLPModel ({HIDDEN_UNITS},) ReLU, full-batch Poisson sampling, 4 epochs, clip 1, "
        "delta 1e-5" + (f"; BROKEN: noise multiplier / {BROKEN_NOISE_FACTOR:g}" if broken else ""),
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


def kmeans_empty_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 150, data_seed: int = 0):
    """DP k-means with the canary alone in an empty region: the largest released centre (1-D, k = 2).

    The test knows diffprivlib's ``KMeans``: its two initial centres lie in [0.125, 0.875] at least
    0.25 apart, so the upper one is at least 0.375; and a cluster no row is nearest to keeps its
    centre with no noise drawn. The rows lie in [0, 0.3]; the canary 1 is alone nearest to the
    upper centre. On D that centre is empty and stays where it started. On D' it is the canary's
    noisy mean, which lands anywhere in [0, 1], and the next round often pulls it to the rows: the
    largest centre falls below 0.3 in about a third of the runs on D' and one in 200 on D (D' on
    the low side). The broken twin is diffprivlib's ``KMeans`` as it is (``n_rows`` is small enough
    for its rule to run 2 rounds at epsilon <= 2, as the honest release does); the honest release
    noises every cluster every round.
    """
    from recourse_privacy.privrecourse.clustering import DiffprivlibKMeans

    epsilon = check_positive_float(epsilon, "epsilon")
    X_d = _cluster_data(n_rows, 1, data_seed)
    data = (X_d, np.vstack([X_d, np.ones((1, 1))]))

    def run(which: int, seed: int) -> float:
        if broken:
            from diffprivlib.models import KMeans

            km = KMeans(n_clusters=2, epsilon=epsilon, bounds=([0.0], [1.0]), random_state=seed).fit(data[which])
            return float(np.max(km.cluster_centers_))
        km = DiffprivlibKMeans(n_clusters=2, epsilon=epsilon, drop_empty=False, random_state=seed)
        return float(km.fit(data[which]).cluster_centers_.max())

    return _experiment(
        "trained-privrecourse-empty" + ("-broken" if broken else ""),
        epsilon,
        run,
        statistic="the largest released centre",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]; D' = D + canary 1, alone nearest to the upper initial "
        "centre; DiffprivlibKMeans k=2, public bounds [0, 1]"
        + ("; BROKEN: diffprivlib's KMeans as it is (an empty cluster's centre kept, no noise)" if broken else ""),
    )


# ----------------------------------------------------------------------------- DPC


def _data_bounds(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The broken twins' bug: per-feature bounds read from the private rows (min, max) and used as if public."""
    return X.min(0), X.max(0)


def dpc_experiment(epsilon: float, *, mode: str = "hardened", broken: bool = False, n_rows: int = 24, data_seed=0):
    """DPC (FM autoencoder + class prototypes); distance from the canary to the decoded class-1 prototype.

    The test knows the release: DPC publishes its decoder, its bounds and the prototypes, and the
    counterfactual search moves toward the decoded prototype of the target class. The statistic
    is ||bounds.from_unit(Dec(prototype_1)) - canary||: the canary (class 1, the rare class: two
    other rows) pulls the class-1 prototype toward its code, and through the bounds the decoded
    prototype shows the scale of the training data. The broken twin reads the bounds from the
    private data (``bounds=(X.min(0), X.max(0))`` passed as if public): without the canary every
    decoded point stays in the data's box [0, 0.3]^3, at distance >= 0.7 sqrt(3) from the canary.
    """
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
        kw = {"mode": "hardened", "epsilon": epsilon / 2, "epsilon_prototypes": epsilon / 2}

    def run(which: int, seed: int) -> float:
        import torch

        Xw, yw = data[which]
        bounds = _data_bounds(Xw) if broken else (np.zeros(d), np.ones(d))
        from recourse_privacy.models.torch_utils import torch_threads

        with torch.random.fork_rng(devices=[]), torch_threads(1):
            dpc = DPCExplainer(bounds=bounds, ae_epochs=3, random_state=seed, **kw)
            dpc.fit(Xw, yw, n_classes=2)
            decoded = dpc.bounds_.from_unit(dpc.autoencoder.decode(dpc.prototypes_.centers[1:2]))
        return float(np.linalg.norm(decoded[0] - c[0]))

    name = "trained-dpc" + ("-faithful" if mode == "faithful" else "") + ("-broken" if broken else "")
    what = {
        "faithful": "faithful (the paper): autoencoder epsilon, prototypes raw class means",
        "hardened": "hardened: epsilon/2 autoencoder + epsilon/2 Laplace prototypes",
    }[mode]
    return _experiment(
        name,
        epsilon,
        run,
        statistic="distance from the canary to the class-1 prototype decoded into the feature space "
        "(bounds.from_unit(Dec(prototype_1)))",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^3, two of class 1; D' = D + canary (1, 1, 1) of class "
        f"1; DPC {what}, public bounds [0, 1]^3" + ("; BROKEN: bounds read from the private data" if broken else ""),
    )


# ----------------------------------------------------------------------------- MST


def mst_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """MST synthetic data (delta 1e-9); the synthetic rows in the canary's top bins (some coordinate >= 0.75).

    The test knows the release: MST measures noisy 1-way marginals and a tree of 2-way marginals of
    the binned data and samples from the fitted graphical model, so the canary (1, 1) adds one to
    its two 1-way top bins and to its 2-way corner cell; the statistic counts the synthetic rows
    that those marginals put in the canary's top bins. The broken twin scales the data to [0, 1]
    with bounds read from the private data and maps the synthetic rows back (the bug diffprivlib
    warns about): without the canary no synthetic row can leave the data's box [0, 0.3]^2.
    """
    from recourse_privacy.privrecourse.baselines import mst_synthetic_data

    epsilon = check_positive_float(epsilon, "epsilon")
    X_d = _cluster_data(n_rows, 2, data_seed)
    c = np.ones((1, 2))
    data = (X_d, np.vstack([X_d, c]))
    bins = 4

    def run(which: int, seed: int) -> float:
        Xw = data[which]
        lo, hi = _data_bounds(Xw) if broken else (np.zeros(2), np.ones(2))
        pts, _, _ = mst_synthetic_data(
            (Xw - lo) / (hi - lo),
            epsilon=epsilon,
            delta=1e-9,
            n_rows=10 * n_rows,
            bins=bins,
            iters=30,
            random_state=seed,
        )
        return float(np.any(lo + pts * (hi - lo) >= 1.0 - 1.0 / bins, axis=1).sum())

    return _experiment(
        "trained-mst" + ("-broken" if broken else ""),
        epsilon,
        run,
        delta=1e-9,
        statistic="synthetic rows in the canary's top bins (some coordinate >= 0.75)",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^2; D' = D + canary (1, 1); MST, {bins} bins, delta 1e-9, "
        f"{10 * n_rows} synthetic rows" + ("; BROKEN: bounds read from the private data" if broken else ""),
    )


def mst_rows_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """MST as ``privrecourse-mst`` runs it by default (its own number of synthetic rows); the number of rows.

    The test knows the release: a neighbour with one more row is told apart with certainty by a release that numbers
    the private rows, whatever its noise; MST's default number is the model's estimate of the total from the noisy
    1-way marginals. The broken twin releases as many rows as the data (what ``mst_synthetic_data`` did before).
    """
    from recourse_privacy.privrecourse.baselines import mst_synthetic_data

    epsilon = check_positive_float(epsilon, "epsilon")
    X_d = _cluster_data(n_rows, 2, data_seed)
    data = (X_d, np.vstack([X_d, np.ones((1, 2))]))

    def run(which: int, seed: int) -> float:
        Xw = data[which]
        rows = len(Xw) if broken else None
        pts, _, _ = mst_synthetic_data(
            Xw, epsilon=epsilon, delta=1e-9, n_rows=rows, bins=4, iters=10, random_state=seed
        )
        return float(len(pts))

    return _experiment(
        "trained-mst-rows" + ("-broken" if broken else ""),
        epsilon,
        run,
        delta=1e-9,
        statistic="the number of synthetic rows",
        neighbours=f"D: {n_rows} rows uniform in [0, 0.3]^2; D' = D + canary (1, 1); MST, 4 bins, delta 1e-9, its "
        "default number of rows" + ("; BROKEN: as many rows as the data" if broken else ""),
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


# ----------------------------------------------------------------------------- the DP logistic regression, label flip

#: what the label flip's broken twin runs (the registry's description and the positive control read it)
_DPM_BROKEN = f"the DP logistic regression run at {BROKEN_EPSILON_FACTOR:g} x epsilon"


def dpm_label_flip_release(
    epsilon: float, *, broken: bool = False, regularize_for_budget: bool = True, n_rows: int = 12, data_seed: int = 0
):
    """The DP logistic regression (objective perturbation, Chaudhuri et al. 2011, by diffprivlib) as ``--defense dpm``
    runs it, on neighbours that replace a row: the canary ``e_1`` labelled 1 (D) or 0 (D'); its logit (lower on D').

    The model's claim covers replaced rows, and a label flip moves the loss gradient by the canary's whole norm for
    every weight while leaving the Hessian alone, so on few rows (12) the logit separates: this test catches the
    model run at 10 x epsilon at claims 0.5-2 in 400 runs, where the add-one release test (``trained-dpm-logistic``)
    does not. The linear recourse ``--defense dpm`` answers with is post-processing of the model, so the model's
    bound covers it. The broken twin runs the model at ``BROKEN_EPSILON_FACTOR`` x epsilon.
    """
    from dataclasses import replace

    from recourse_privacy.dp_audit.experiments import dpm_logistic_experiment
    from recourse_privacy.models.dp import DPLogisticModel

    factor = BROKEN_EPSILON_FACTOR if broken else 1.0

    def make(epsilon, data_norm, random_state, **_):
        return DPLogisticModel(
            epsilon=factor * epsilon,
            data_norm=data_norm,
            regularize_for_budget=regularize_for_budget,
            random_state=random_state,
        )

    exp = dpm_logistic_experiment(epsilon, n_rows=n_rows, data_seed=data_seed, model_factory=make)
    name = "trained-dpm-flip" + ("" if regularize_for_budget else "-as-given") + ("-broken" if broken else "")
    return replace(exp, name=name, neighbours=exp.neighbours + (f"; BROKEN: {_DPM_BROKEN}" if broken else ""))


# ----------------------------------------------------------------------------- PrivRecourse's Laplace baseline

#: features of the Laplace baseline's audit: the broken twin's noise (one feature's sensitivity) is d times too small
LAPLACE_DATA_DIMS = 4


def laplace_data_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """PrivRecourse's Laplace baseline (every record plus Laplace(d / epsilon) per feature), neighbours that replace.

    Its claim is for neighbours that replace a record (the release shows their number), so D' replaces, where every
    other experiment here adds. D holds ``n_rows`` points in [0, 0.3]^d with record 0 at the origin; D' replaces
    record 0 by the canary (1, ..., 1), the largest L1 change in the unit box (d). The statistic is the
    Neyman-Pearson one for Laplace noise on the replaced record's released point, sum_j clip(x_j, 0, 1): its
    likelihood ratio reaches e^epsilon exactly (every coordinate beyond 1), so a test can come near the claim and
    not above it. The runs are drawn at once: the mechanism (:func:`~recourse_privacy.privrecourse.baselines.
    laplace_noisy_data`) noises every entry independently, so one call on n stacked copies of the data is n
    independent runs. The broken twin uses one feature's sensitivity, Laplace(1 / epsilon): d times the claim.
    """
    from recourse_privacy.privrecourse.baselines import laplace_noisy_data

    epsilon = check_positive_float(epsilon, "epsilon")
    d = LAPLACE_DATA_DIMS
    X_d = _cluster_data(n_rows, d, data_seed)
    X_d[0] = 0.0
    X_p = X_d.copy()
    X_p[0] = 1.0

    def sample(which: int, rng: np.random.Generator, n: int) -> np.ndarray:
        X = np.tile((X_d, X_p)[which], (n, 1))
        if broken:
            noisy = X + rng.laplace(0.0, 1.0 / epsilon, X.shape)
        else:
            noisy, _ = laplace_noisy_data(X, epsilon=epsilon, random_state=rng)
        return np.clip(noisy[::n_rows], 0.0, 1.0).sum(axis=1)  # record 0 of every run

    return DistinguishingExperiment(
        name="trained-privrecourse-laplace" + ("-broken" if broken else ""),
        sample=sample,
        claimed_epsilon=epsilon,
        delta=0.0,
        statistic="sum_j clip(x_j, 0, 1) of the replaced record's released point (the Laplace likelihood ratio)",
        neighbours=f"D: {n_rows} rows in [0, 0.3]^{d}, record 0 at the origin; D' replaces it by the canary "
        "(1, ..., 1)" + ("; BROKEN: Laplace(1 / epsilon), one feature's sensitivity" if broken else ""),
    )


# ----------------------------------------------------------------------------- PrivRecourse's sparse answers

#: the applicants of the sparse-answer audit: x0 fixed near the lower bound, x1 on a grid over [0, 1]
_SPARSE_GRID = 101


def sparse_answers_experiment(epsilon: float, *, broken: bool = False, n_rows: int = 40, data_seed: int = 0):
    """PrivRecourse as a ``publish`` bundle answers by default (Pentyala et al. 2023's graph, sparse answers):
    the DP logistic regression (epsilon / 2) decides which nodes (DP k-means, 8 clusters, epsilon / 2) are candidates
    and which of an answer's changes are kept; the applicants' answers are post-processing of both.

    The statistic knows the mechanism. Applicants a_j = (0.02, t_j), t_j on a grid of [0, 1]: an answer that sets
    x1 back to t_j reveals that the model accepts (v_j, t_j), v_j the node's x0; one that keeps both changes reveals
    that it rejects it (each change alone is asked first, :mod:`~recourse_privacy.recourse.sparse`). The statistic
    counts the revealed decisions that agree with a (non-private) logistic regression fitted on D' and not with one
    fitted on D, minus the reverse: a boundary that the canary moves is read off the answers wherever the node lands.
    """
    from recourse_privacy.models import make_model
    from recourse_privacy.models.dp import DPLogisticModel
    from recourse_privacy.privrecourse.core import PrivRecourse

    epsilon = check_positive_float(epsilon, "epsilon")
    X = np.random.default_rng(derive_seed(data_seed, 31)).uniform(0.0, 1.0, size=(n_rows, 2))
    y = (X.sum(axis=1) > 1.0).astype(int)
    canary = np.ones((1, 2))  # the accepted corner, labelled 0: the most leverage on the boundary
    data = ((X, y), (np.vstack([X, canary]), np.append(y, 0)))
    t = np.linspace(0.0, 1.0, _SPARSE_GRID)
    A = np.column_stack([np.full(_SPARSE_GRID, 0.02), t])
    with _quiet():
        refs = [make_model("logistic").fit(*d) for d in data]

    def statistic(cf: np.ndarray) -> float:
        same = np.isclose(cf, A)
        x1_back = same[:, 1] & ~same[:, 0]  # (v, t) accepted
        both = ~same[:, 0] & ~same[:, 1]  # each change alone rejected: (v, t) rejected
        probe = np.column_stack([cf[:, 0], t])
        d0, d1 = (r.predict(probe) == 1 for r in refs)
        told = (x1_back | both) & (d0 != d1)
        return float((told & (x1_back == d1)).sum() - (told & (x1_back == d0)).sum())

    def run(which: int, seed: int) -> float:
        Xw, yw = data[which]
        if broken:  # the answers follow a model fitted without DP (a lender's own, served with --sparse)
            model = make_model("logistic").fit(Xw, yw)
        else:
            model = DPLogisticModel(epsilon=epsilon / 2, data_norm=math.sqrt(2.0), random_state=seed).fit(Xw, yw)
        method = PrivRecourse(n_clusters=8, epsilon=epsilon / 2, sparse=True, random_state=seed).fit(Xw, yw, model)
        return statistic(method.generate(model, A).counterfactuals)

    return _experiment(
        "trained-privrecourse-sparse" + ("-broken" if broken else ""),
        epsilon,
        run,
        statistic="revealed decisions of the sparse answers of 101 applicants (0.02, t), t in [0, 1], that agree with "
        "an LR fitted on D' and not with one fitted on D, minus the reverse",
        neighbours=f"D: {n_rows} rows uniform in [0, 1]^2, label x0 + x1 > 1; D' = D + canary (1, 1) labelled 0; "
        "DP logistic regression (epsilon / 2) and DP k-means (8 clusters, epsilon / 2), public bounds [0, 1]^2, "
        "sparse answers" + ("; BROKEN: the model fitted without DP" if broken else ""),
    )


# ----------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ReleaseSpec:
    """A registered release audit: its builder, what it audits, the side of the statistic D' is expected on
    (fixed before any run) and, where it has one, a many-canaries-per-run design for the one-run bounds."""

    builder: Callable[..., DistinguishingExperiment]
    description: str
    side: str
    one_run: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None


#: name -> its :class:`ReleaseSpec`
RELEASE_AUDITS: dict[str, ReleaseSpec] = {}


def _register(name: str, builder: Callable, description: str, side: str, one_run: Callable | None = None) -> None:
    RELEASE_AUDITS[name] = ReleaseSpec(builder, description, side, one_run)
    register_mechanism(name, description=description, params=_PARAMS)(builder)


def _variant(fn, **fixed):
    def build(epsilon: float, **params):
        return fn(epsilon, **fixed, **params)

    build.__qualname__ = f"{fn.__name__}[{', '.join(f'{k}={v}' for k, v in fixed.items())}]"
    return build


def _dpsgd_one_run(broken: bool):
    def design(epsilon: float, *, random_state: int, **params):
        from recourse_privacy.dp_audit.dpsgd_canaries import dpsgd_one_run

        return dpsgd_one_run(epsilon, broken=broken, random_state=random_state, **params)

    return design


_BROKEN = "BROKEN on purpose (the audit must flag it): "
for _name, _fn, _side, _what, _broke, _one_run in (
    (
        "trained-dpsgd",
        dpsgd_experiment,
        ">=",
        "DP-SGD MLP (Opacus), trained with and without input-space dirac canaries (many per run for the one-run "
        "bounds); statistic the white-box move of the canary's first-layer column along its initial descent direction",
        "the noise multiplier divided by 10",
        _dpsgd_one_run,
    ),
    (
        "trained-privrecourse",
        kmeans_experiment,
        "<=",
        "PrivRecourse's DP k-means centres (diffprivlib), trained with "
        "and without a corner canary; statistic the canary's distance to its nearest centre",
        "bounds read from the private data",
        None,
    ),
    (
        "trained-privrecourse-empty",
        kmeans_empty_experiment,
        "<=",
        "PrivRecourse's DP k-means centres (DPLloyd, every cluster noised), trained with and without a canary "
        "alone in an empty region; statistic the largest centre (1-D, k = 2)",
        "diffprivlib's KMeans as it is: an empty cluster keeps its centre with no noise drawn",
        None,
    ),
    (
        "trained-dpc",
        _variant(dpc_experiment, mode="hardened"),
        "<=",
        "DPC hardened (FM autoencoder + Laplace prototypes), with and without a corner canary of class 1; statistic "
        "the canary's distance to the class-1 prototype decoded into the feature space",
        "bounds read from the private data",
        None,
    ),
    (
        "trained-mst",
        mst_experiment,
        ">=",
        "MST synthetic data (mbi), with and without a corner canary; statistic the synthetic rows in the canary's "
        "top bins",
        "bounds read from the private data",
        None,
    ),
    (
        "trained-privrecourse-sparse",
        sparse_answers_experiment,
        ">=",
        "PrivRecourse's sparse answers (a publish bundle's default): DP LR and DP k-means on D and D', answers to a "
        "grid of applicants; statistic the model decisions they reveal, read against LRs fitted on D and D'",
        "the model fitted without DP",
        None,
    ),
    (
        "trained-mst-rows",
        mst_rows_experiment,
        ">=",
        "MST synthetic data with its default number of rows (privrecourse-mst's nodes), with and without a canary; "
        "statistic the number of synthetic rows",
        "as many rows as the data",
        None,
    ),
    (
        "trained-dpm-flip",
        dpm_label_flip_release,
        "<=",
        "the DP logistic regression as --defense dpm runs it (regularised for its budget), trained with the canary "
        "e_1 labelled 1 and with it labelled 0 (a replaced row), 12 rows; statistic the canary's logit",
        _DPM_BROKEN,
        None,
    ),
    (
        "trained-dpm-flip-as-given",
        _variant(dpm_label_flip_release, regularize_for_budget=False),
        "<=",
        "the DP logistic regression with C as given (regularize_for_budget=False), trained with the canary e_1 "
        "labelled 1 and with it labelled 0 (a replaced row), 12 rows; statistic the canary's logit",
        _DPM_BROKEN,
        None,
    ),
    (
        "trained-privrecourse-laplace",
        laplace_data_experiment,
        ">=",
        "PrivRecourse's Laplace baseline (every record plus Laplace(d / epsilon)), neighbours that replace a record by "
        "a corner canary; statistic the Laplace likelihood ratio of the replaced record's released point",
        "Laplace(1 / epsilon): one feature's sensitivity, not the L1 over d",
        None,
    ),
    (
        "trained-laplace-answer",
        laplace_answer_experiment,
        "<=",
        "Laplace Recourse's answer (noisy probability of the "
        "canary) over an LR trained with and without the canary; statistic the noisy probability",
        "sensitivity 0.1 instead of 1",
        None,
    ),
):
    _register(_name, _variant(_fn), _what, _side, _one_run(False) if _one_run else None)
    _register(
        f"{_name}-broken", _variant(_fn, broken=True), _BROKEN + _broke, _side, _one_run(True) if _one_run else None
    )
_register(
    "trained-dpc-faithful",
    _variant(dpc_experiment, mode="faithful"),
    "DPC faithful (the paper: prototypes are raw class means, only the autoencoder noised; NOT covered by its "
    "claim, see dpc.md sec. 11); statistic the canary's distance to the decoded class-1 prototype",
    "<=",
)

#: the methods whose bounds decide the verdict: no assumption on the trade-off curve
VERDICT_METHODS = ("clopper_pearson", "one_run")


@dataclass(frozen=True)
class ReleaseAudit:
    """A release audited at one claim: the many-run Clopper-Pearson audit and the score-based bounds.

    ``scores`` holds the four bounds of :func:`~recourse_privacy.dp_audit.canary_scores.audit_scores`
    on ``design`` ("coin-flip subset of the many runs" or the release's many-canaries-per-run
    design). The verdict reads the two bounds without an assumption on the trade-off curve (the
    many-run Clopper-Pearson and the one-run bound of Steinke et al. 2023), each at alpha / 2, so it
    holds at confidence 1 - alpha; the f-DP and GDP bounds assume a Gaussian trade-off curve and are
    reported beside it.
    """

    many_run: EpsilonAudit
    scores: object  # canary_scores.ScoresAudit
    design: str
    alpha: float

    @property
    def violates_claim(self) -> bool:
        """Whether the Clopper-Pearson or the one-run bound exceeds the claimed epsilon."""
        one = self.scores["one_run"].epsilon_lower_bound
        return self.many_run.violates_claim or (one is not None and one > self.many_run.claimed_epsilon)

    @property
    def verdict(self) -> str:
        return "VIOLATES the claim" if self.violates_claim else "consistent with the claim"

    def row(self) -> dict:
        """The table row (plain values, JSON-ready)."""
        s = self.scores
        fdp = s["one_run_fdp"]
        return {
            "release": self.many_run.mechanism,
            "claim": self.many_run.claimed_epsilon,
            "delta": self.many_run.delta,
            "alpha": self.alpha,
            "clopper_pearson": self.many_run.epsilon_lower_bound,
            "many_runs": self.many_run.n_trials,
            "one_run": s["one_run"].epsilon_lower_bound,
            "one_run_fdp": fdp.epsilon_lower_bound,
            "one_run_fdp_mu": fdp.mu_lower_bound,
            "gdp_mu": s["gdp"].mu_lower_bound,
            "canaries": s.n_canaries,
            "design": self.design,
            "verdict": self.verdict,
            "violates_claim": self.violates_claim,
            "seconds": self.many_run.seconds,
        }


def release_experiment(name: str, epsilon: float, **params) -> DistinguishingExperiment:
    """The registered release experiment ``name`` at claim ``epsilon`` (validated)."""
    return make_experiment(name, epsilon, **params)


def audit_release(
    name: str,
    epsilon: float,
    *,
    n_trials: int = 100,
    alpha: float = 0.05,
    random_state: RandomState = 0,
    n_canaries: int = 1000,
    n_runs: int = 5,
    require_power: bool = True,
    **params,
) -> ReleaseAudit:
    """Audit ``name`` at ``epsilon``: the many-run audit, then the four score bounds.

    The many-run audit (``n_trials`` runs per neighbour, one canary each) gives the Clopper-Pearson
    bound. The score bounds (:func:`~recourse_privacy.dp_audit.canary_scores.audit_scores`) read
    the release's many-canaries-per-run design where it has one (``n_runs`` runs of ``n_canaries``
    canaries, each included with probability 1/2), and otherwise a subset of the same many runs as
    independent canaries: for each of ``n_trials`` canaries a fair coin says D or D', and the next
    unused run of that neighbour gives its score (runs are independent and identically distributed
    within a neighbour, so this is exactly one independent run per canary with coin-flip
    inclusion, the one-run theorems' assumption, and stronger). Each part runs at ``alpha / 2``.
    ``require_power=False`` runs the many runs even where too few to refute the claim (``bounds.audit_mechanism``).
    """
    from recourse_privacy.dp_audit.bounds import audit_mechanism
    from recourse_privacy.dp_audit.canary_scores import audit_scores
    from recourse_privacy.metrics.intervals import check_alpha

    alpha = check_alpha(alpha)
    exp = release_experiment(name, epsilon, **params)
    spec = RELEASE_AUDITS[name]
    seed = random_state if isinstance(random_state, int) else 0
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
        alpha=alpha / 2,
        random_state=random_state,
        mechanism=exp.name,
        statistic=exp.statistic,
        neighbours=exp.neighbours,
        require_power=require_power,
    )
    if spec.one_run is not None:
        scores, member = spec.one_run(epsilon, random_state=seed, n_canaries=n_canaries, n_runs=n_runs, **params)
        design = f"{n_runs} runs x {n_canaries} canaries, each included with probability 1/2"
    else:
        s0, s1 = kept
        rng = np.random.default_rng(derive_seed(seed, 2))
        member = (rng.random(n_trials) < 0.5).astype(int)
        scores = np.empty(n_trials)
        scores[member == 1] = s1[: int(member.sum())]
        scores[member == 0] = s0[: int((member == 0).sum())]
        if spec.side == "<=":  # higher score = "in", on the side fixed before any run
            scores = -scores
        design = f"coin-flip subset of the {n_trials} runs per neighbour: one canary per run"
    sa = audit_scores(scores, member, delta=exp.delta, alpha=alpha / 2, random_state=0)
    return ReleaseAudit(many, sa, design, alpha)
