"""Publish a private recourse bundle and answer applicants from it.

A bundle is a directory, never pickle:

- ``manifest.json``: method, epsilon, delta, the epsilon each answer spends, what the guarantee
  covers and what it does not, the model's SHA-256, the package version, every file's SHA-256
  and the public schema (``"features"``, original units; :mod:`recourse_privacy.service.schema`);
- ``model.npz``: the linear model in the schema's model space (``coef``, ``intercept``), or ``model.skops``: a
  user's own classifier served as it is (``privrecourse`` only; :mod:`~recourse_privacy.service.served_model`);
- ``graph.npz`` + ``graph.json`` (``privrecourse``): the published graph
  (:class:`~recourse_privacy.privrecourse.PublishedGraph`);
- ``dpc.npz`` + ``dpc.json`` (``dpc``): the FM autoencoder's weights, the two noisy latent
  prototypes and the search's parameters.

Methods (``publish(method=...)``), each with its default model:

- ``privrecourse`` (Pentyala et al. 2023): a DP logistic regression (half of epsilon) and the
  graph on DP k-means centres (the other half); every answer is post-processing: 0 per answer;
- ``dpm`` (Huang et al. 2023, DP model): a DP logistic regression (epsilon), recourse by the
  closed-form move along its weights: post-processing, 0 per answer;
- ``dpc`` (Yang et al. 2022, hardened): a DP logistic regression (a third of epsilon), the FM
  autoencoder (a third) and Laplace-noised class prototypes (a third); an answer is DPC's latent
  search from the favourable prototype against the DP model: post-processing, 0 per answer;
- ``laplace`` (Huang et al. 2023, Laplace Recourse): a (non-private) logistic regression; each
  answer draws a noisy score (:func:`~recourse_privacy.defenses.laplace.noisy_probability`) and
  spends epsilon from the caller's budget; the move's direction reads the non-private weights.

:class:`Bundle` answers a batch of applicants at once (:meth:`Bundle.answer`); the server
spends from the ledger before calling it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recourse_privacy.errors import IncompatibleError, InvalidInputError, MissingFileError
from recourse_privacy.models.decision_threshold import DecisionThreshold, check_decisions, resolve_threshold
from recourse_privacy.service.latent_search import CHUNK, PRECISIONS, search_threads
from recourse_privacy.service.page import sentence, sentences
from recourse_privacy.service.schema import Applicants, Schema, schema_from_dataset
from recourse_privacy.service.served_model import LinearModel, ServedEstimator, data_frame, log_odds
from recourse_privacy.service.sparsify import sparsify

__all__ = ["BUNDLE_FORMAT", "METHODS", "AnswerTexts", "Bundle", "load_bundle", "load_dpc_explainer", "publish"]

BUNDLE_FORMAT = "recourse-privacy/bundle"
BUNDLE_VERSION = 1
METHODS = ("privrecourse", "dpm", "laplace", "dpc")
#: share of epsilon spent on the DP logistic model; the rest goes to the method's own release
_MODEL_SHARE = {"privrecourse": 1 / 2, "dpm": 1.0, "dpc": 1 / 3}
#: target logit of the moves (probability 0.62), a public constant of every linear method
TARGET_LOGIT = 0.5
_MARGINS = (TARGET_LOGIT, 1.0, 2.0, 4.0)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _guarantee(method: str, epsilon: float, delta: float, model_eps: float | None, *, user_model=False) -> dict:
    out = _method_guarantee(method, epsilon, delta, model_eps)
    if user_model:
        out["covers"] = [c for c in out["covers"] if not c.startswith("the model:")]
        out["covers"][-1] = out["covers"][-1].replace(
            "post-processing of these", "post-processing of these releases and"
        )
        out["does_not_cover"].insert(
            0, "the model: the user's own (--model-file), not private; the decisions and every answer read it"
        )
    return out


def _dp_model_line(epsilon: float) -> str:
    """The manifest's line for the default DP logistic regression (every private method's model)."""
    return (
        "the model: DP logistic regression (objective perturbation, Chaudhuri et al. 2011, on unit rows; for "
        f"neighbours that add, remove or replace a row), epsilon {epsilon:g}"
    )


def _method_guarantee(method: str, epsilon: float, delta: float, model_eps: float | None) -> dict:
    common_not = [
        "bounds and categories that the manifest's schema notes list as read from the data",
        "model extraction: DP does not stop an adversary from copying the decision rule with many queries; the API "
        "keys' query caps limit it (Dissanayake and Dutta 2024)",
    ]
    if method == "privrecourse":
        return {
            "covers": [
                _dp_model_line(model_eps),
                f"the graph's nodes: DP k-means centres (DPLloyd, Su et al. 2016, through diffprivlib, every cluster "
                f"noised every round), epsilon {epsilon - model_eps:g}, delta {delta:g}, for neighbours that add or remove "
                "one row (twice that for one replaced: two clusters change), snapped onto the schema's values "
                "(post-processing)",
                "every answer (decision and counterfactual) is post-processing of these two releases: any number of "
                "answers spends 0 (Pentyala et al. 2023, sec. 4.2)",
            ],
            "does_not_cover": common_not,
            "composition": "sequential: model + nodes",
            "per_answer": "0 (post-processing)",
        }
    if method == "dpm":
        return {
            "covers": [
                _dp_model_line(epsilon),
                "every answer (decision and the closed-form counterfactual) is post-processing: 0 per answer",
            ],
            "does_not_cover": common_not,
            "composition": "one release",
            "per_answer": "0 (post-processing)",
        }
    if method == "dpc":
        part = (epsilon - model_eps) / 2
        return {
            "covers": [
                _dp_model_line(model_eps),
                f"the autoencoder: trained with the functional mechanism (Zhang et al. 2012), epsilon {part:g}",
                f"the two class prototypes: Laplace noise on the latent class sums and counts, epsilon {part:g}",
                "every answer (DPC's latent search from the favourable prototype, Yang et al. 2022 sec. 4.2, against "
                "the DP model) is post-processing of these three releases: any number of answers spends 0",
            ],
            "does_not_cover": [
                "the autoencoder's epsilon rests on Yang et al.'s functional-mechanism argument: the bases depend on "
                "the record through the encoder, which Zhang et al.'s theorem does not cover",
                *common_not,
            ],
            "composition": "sequential: model + autoencoder + prototypes",
            "per_answer": "0 (post-processing)",
        }
    return {
        "covers": [
            f"the noisy score of each answer (Laplace mechanism on the probability, sensitivity 1): epsilon {epsilon:g} "
            "per answer, k answers cost k * epsilon (basic composition) from the caller's budget",
        ],
        "does_not_cover": [
            "the decision: read from the non-private model",
            "the counterfactual's direction: the non-private model's weights w (Huang et al. 2023 sec. 4.2.2; an "
            "adversary rebuilds exact distances, attack lr-reconstruction); the release is not epsilon-DP as a whole",
            *common_not,
        ],
        "composition": "basic (sequential) over answers, per API key",
        "per_answer": f"{epsilon:g}",
    }


def publish(
    dataset,
    *,
    method: str,
    epsilon: float,
    out: str | Path,
    delta: float = 0.0,
    bounds: dict | None = None,
    may_be_missing: Sequence[str] = (),
    n_clusters: int = 100,
    seed: int = 0,
    model=None,
    positive_label=None,
    model_source: str | None = None,
    decision_threshold: float | None = None,
    sparse: bool | None = None,
) -> dict:
    """Train or derive ``method``'s private artefact on ``dataset`` and write the bundle to ``out``; return the manifest.

    ``model``: the user's fitted scikit-learn classifier (a ``Pipeline`` reading the dataset's
    columns, as ``audit --model-file`` takes it; ``positive_label`` its favourable class) instead
    of the method's default model, for ``laplace``, ``privrecourse`` and ``dpc`` (``dpm``'s release
    IS its DP model). It must be affine in the schema's model space (a logistic regression on
    one-hot and scaled columns): it is exported exactly as its weights, checked on seeded probe
    points of the schema; another model is refused. The user's model is not private: the manifest
    says so. ``decision_threshold``: the probability of the favourable class from which the lender
    approves, where the model does not state it itself (the model's own cutoff is read, see
    :mod:`~recourse_privacy.models.decision_threshold`); the bundle serves recourse to that cutoff.
    ``may_be_missing``: features a request may leave null although the data have no gap there (public, as
    ``bounds``; a column with gaps may be missing anyway). ``sparse``: answers keep only the changes the model's
    acceptance needs (:mod:`~recourse_privacy.service.sparsify`; None: for ``privrecourse`` with its own DP model,
    whose answers are cluster centres, not with a user's model; refused for ``laplace``, whose decisions are the
    non-private model's).
    """
    from recourse_privacy.validation import derive_seed

    user_model = model is not None
    epsilon, delta, sparse = _checked_options(method, epsilon, delta, sparse, decision_threshold, user_model)
    schema = schema_from_dataset(dataset, bounds, may_be_missing)
    Z = schema.encode_frame(dataset.X)
    y = np.asarray(dataset.y)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if user_model:
        model, model_eps, privacy = _users_model(
            model, schema, dataset, positive_label, derive_seed(seed, 3), method, decision_threshold, model_source
        )
    else:
        model, model_eps, privacy = _method_model(method, epsilon, schema, Z, y, derive_seed(seed, 0))
    files, model_entry = _write_model(model, out)  # the DP model stays itself for the graph's ledger below
    if method == "privrecourse":
        pr = _publish_privrecourse(schema, Z, y, model, epsilon - model_eps, delta, n_clusters, derive_seed(seed, 1))
        nodes_dp = bool(pr.privacy.get("nodes", {}).get("is_dp"))
        if not (nodes_dp if user_model else pr.privacy.get("is_dp")):  # a user's model is declared not covered
            raise InvalidInputError(f"the PrivRecourse release is not DP as run: {pr.privacy}")
        for f in pr.save(out / "graph"):
            files[f.name] = _sha256(f)
        privacy["nodes"] = pr.privacy.get("nodes")
    if method == "dpc":
        files.update(_publish_dpc(Z, y, epsilon - model_eps, out, derive_seed(seed, 2)))
        privacy["autoencoder"] = {"epsilon": (epsilon - model_eps) / 2, "kind": "FM autoencoder (Yang et al. 2022)"}
        privacy["prototypes"] = {"epsilon": (epsilon - model_eps) / 2, "kind": "Laplace class sums and counts"}
    # laplace: each answer's noisy score is DP, the release as a whole is not (see the guarantee)
    privacy["is_dp"] = method != "laplace" and privacy["model"]["dp"]
    manifest = _manifest(
        dataset, schema, method, epsilon, delta, model_eps, privacy, files, model_entry, user_model=user_model
    )
    if isinstance(model, ServedEstimator):  # the file itself: what a fitted classifier may hold of its data
        manifest["guarantee"]["does_not_cover"].insert(1, _SERVED_FILE)
    manifest["answers"] = {"sparse": sparse, "note": _SPARSE_NOTE if sparse else "the method's answer as it is"}
    if sparse and user_model:
        manifest["guarantee"]["does_not_cover"].insert(1, _SPARSE_USER_MODEL)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, allow_nan=False))
    return manifest


def _checked_options(method: str, epsilon, delta, sparse, decision_threshold, user_model: bool):
    """publish's options checked before any work: (epsilon, delta, sparse) as used, or the error naming the option."""
    from recourse_privacy.validation import check_choice, check_delta, check_epsilon

    check_choice(method, "--method", METHODS)
    epsilon = check_epsilon(epsilon, "--epsilon")
    delta = check_delta(delta, "--delta")
    # default: sparse where the model deciding it is the method's own DP model (post-processing); not with a user's
    # model, whose boundary the sparse answers follow (not private; audited: docs/deployment.md)
    sparse = method == "privrecourse" and not user_model if sparse is None else bool(sparse)
    if sparse and method == "laplace":
        raise InvalidInputError(
            "--sparse with --method laplace: setting changes back reads the non-private model's decisions around each "
            "applicant, which Laplace Recourse's guarantee does not cover (use privrecourse, dpm or dpc)"
        )
    if decision_threshold is not None and not user_model:
        raise InvalidInputError(
            "--decision-threshold is the cutoff of your own model: pass --model-file too (the method's own model "
            "decides at one half)"
        )
    if user_model and method == "dpm":
        raise IncompatibleError(
            "--model-file with --method dpm: dpm's release is its DP logistic regression; a model file would replace "
            "it with a non-private one (use --method laplace, privrecourse or dpc with a model file)"
        )
    return epsilon, delta, sparse


#: what a sparse bundle's answers are (the manifest's ``answers``)
_SPARSE_NOTE = (
    "each change of the method's counterfactual is set back to the applicant's value where the model still accepts "
    "the result, smallest change first: post-processing with the bundle's model"
)
#: the guarantee's word on sparse answers read from a user's (non-private) model (``does_not_cover``)
_SPARSE_USER_MODEL = (
    "sparse answers with the user's model: each answer's changes follow that model's decision boundary near the "
    "applicant, which is not private: no guarantee covers what they carry of it (audited on a lender's boosted "
    "trees: cfd-lrt AUC 0.535 [0.490, 0.574], 0.471 for the graph's nodes as they are; docs/deployment.md)"
)
#: the guarantee's word on a served classifier's file (``does_not_cover``)
_SERVED_FILE = (
    "model.skops: the user's classifier as fitted, which may hold values of the training data (a tree's split "
    "thresholds, a k-NN's rows); the server reads it and never sends it: keep the bundle's directory private"
)


def _users_model(est, schema, dataset, positive_label, seed: int, method: str, threshold, source: str | None):
    """The user's model as served (:func:`_user_model`), its epsilon (0: it is not private) and the privacy dict's
    "model" entry (not DP, its source, its cutoff, how it is served)."""
    served, cutoff = _user_model(est, schema, dataset, positive_label, seed, method, threshold)
    kind = f"the user's {type(est).__name__} (not private)"
    entry = {"epsilon": None, "dp": False, "kind": kind, "source": source}
    entry |= {"decision_threshold": cutoff.value, "threshold_source": cutoff.source}
    entry["served"] = "its weights" if isinstance(served, LinearModel) else "as it is (model.skops)"
    return served, 0.0, {"model": entry}


def _method_model(method: str, epsilon: float, schema: Schema, Z: np.ndarray, y: np.ndarray, seed: int):
    """The method's default model: (model, its epsilon, the privacy dict's "model" entry)."""
    if method in ("privrecourse", "dpm", "dpc"):
        from recourse_privacy.models.dp import DPLogisticModel

        eps = epsilon * _MODEL_SHARE[method]
        # a row of the schema's model space has norm at most sqrt(features): each numeric value is in [0, 1] (0 in a
        # gap, whose indicator is then the one 1), each categorical feature one indicator on
        model = DPLogisticModel(
            epsilon=eps, data_norm=math.sqrt(len(schema.features)), regularize_for_budget=True, random_state=seed
        ).fit(Z, y)
        entry = {
            "epsilon": eps,
            "delta": 0.0,
            "dp": True,
            "kind": "objective perturbation (Chaudhuri et al. 2011) on unit rows, by diffprivlib",
        }
        return model, eps, {"model": entry}
    from sklearn.linear_model import LogisticRegression

    est = LogisticRegression(max_iter=1000).fit(Z, y)
    entry = {"epsilon": None, "dp": False, "kind": "scikit-learn LogisticRegression (not private)"}
    return LinearModel(est.coef_.ravel(), float(est.intercept_[0])), None, {"model": entry}


def _publish_privrecourse(schema, Z, y, model, epsilon: float, delta: float, n_clusters: int, seed: int):
    """PrivRecourse's graph on the DP k-means (DPLloyd through diffprivlib, DP as run), its nodes snapped onto the schema's values, under the
    schema's action set."""
    from recourse_privacy.privrecourse import PrivRecourse
    from recourse_privacy.recourse.constraints import ActionSet

    d = Z.shape[1]
    inc, imm = schema.model_mask("increase"), schema.model_mask("immutable")
    pr = PrivRecourse(
        n_clusters=min(n_clusters, len(Z)),
        epsilon=epsilon,
        delta=delta,
        clustering="diffprivlib",  # DP as run (the convergent k-means' em_point release publishes records)
        action_set=ActionSet(imm, inc & ~imm, np.zeros(d), np.ones(d)),
        random_state=seed,
    )
    # the DP k-means centres hold fractional categories; an answer is decoded to one category per feature and the
    # model judges it there, so the candidates are judged on the snapped nodes too (post-processing, no privacy)
    return pr.publish(
        Z,
        y,
        model,
        feature_names=tuple(schema.model_feature_names()),
        snap_nodes=lambda N: schema.encode(schema.decode(N)),
    )


def _manifest(
    dataset, schema, method, epsilon, delta, model_eps, privacy, files, model_entry: dict, *, user_model: bool
) -> dict:
    """manifest.json: the method, the guarantee, the privacy ledger, the model's entry, the files and the schema."""
    from recourse_privacy import __version__

    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "method": method,
        "epsilon": epsilon,
        "delta": delta,
        "epsilon_per_answer": epsilon if method == "laplace" else 0.0,
        "guarantee": _guarantee(method, epsilon, delta, model_eps, user_model=user_model),
        "privacy": privacy,
        "model": model_entry,
        "files": files,
        "recourse_privacy_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "dataset": dataset.name,
        "target_logit": TARGET_LOGIT,
        "cost": "L1 over the features, each numeric change in units of its public range (upper - lower); a changed "
        "category costs 1",
        "features": schema.to_list(),
        "schema_notes": schema.notes,
    }


#: an affine logit is accepted when the least-squares fit's largest residual is below this, relative to
#: max(1, the largest |logit|)
_LINEAR_RTOL = 1e-6


def _user_model(
    est, schema: Schema, dataset, positive_label, seed: int, method: str, threshold: float | None = None
) -> tuple[LinearModel | ServedEstimator, DecisionThreshold]:
    """A user's fitted classifier as the bundle serves it, with its cutoff: its exact weights (:class:`LinearModel`)
    where its favourable-class logit is affine in the schema's model space, read on seeded random points of the
    schema (no data row); else, for ``privrecourse`` (whose graph needs only the model's decisions), the
    classifier itself (:class:`ServedEstimator`); else refused, saying why. The decision logit is the log-odds
    less that of the cutoff the model states (:mod:`~recourse_privacy.models.decision_threshold`) or given
    (``threshold``), checked against its ``predict`` on the same points where the model applies it."""
    from recourse_privacy.models.estimator import check_estimator, estimator_labels

    check_estimator(est, "--model-file")
    favourable, _ = estimator_labels(est, positive_label, "--model-file")
    pos = [c.item() if hasattr(c, "item") else c for c in est.classes_].index(favourable)
    c = schema._cols
    n = schema.n_model + 200
    rng = np.random.default_rng(seed)
    num = c.lower + rng.random((n, len(c.lower))) * c.span
    num[(rng.random(num.shape) < 0.3) & c.num_missing] = np.nan  # gaps where the feature may be missing
    probe = Applicants(  # a categorical gap is its last index (None in cat_names)
        num,
        np.column_stack([rng.integers(0, len(names), n) for names in c.cat_names] or [np.empty((n, 0), np.int64)]),
    )
    columns, dtypes = list(dataset.X.columns), {k: str(v) for k, v in dataset.X.dtypes.items()}
    frame = data_frame(schema, probe, columns, dtypes)
    try:
        p = np.asarray(est.predict_proba(frame), np.float64)[:, pos]
    except Exception as err:  # noqa: BLE001 - a user's pipeline raises anything on columns it was not fitted on
        raise InvalidInputError(
            f"--model-file: {type(est).__name__}.predict_proba fails on the data's columns {list(frame.columns)}: "
            f"{type(err).__name__}: {err}"
        ) from None
    cutoff = resolve_threshold(est, favourable, threshold)  # a FixedThresholdClassifier's, or the lender's rule
    check_decisions(est, frame, p, favourable, cutoff, f"--model-file {type(est).__name__}")
    logit = log_odds(p) - cutoff.offset
    Z = np.column_stack([schema.encode(probe), np.ones(n)])
    sol, *_ = np.linalg.lstsq(Z, logit, rcond=None)
    resid = np.max(np.abs(Z @ sol - logit))
    if resid <= _LINEAR_RTOL * max(1.0, float(np.max(np.abs(logit)))):
        return LinearModel(sol[:-1], float(sol[-1])), cutoff
    if method == "privrecourse":
        return ServedEstimator(est, schema, columns, dtypes, favourable, cutoff.value, cutoff.ties_favourable), cutoff
    raise IncompatibleError(
        f"--model-file: {type(est).__name__}'s logit is not affine in the bundle's schema space (largest residual "
        f"{resid:.3g} on {n} probe points): --method {method} serves linear models (a logistic regression on one-hot "
        "and scaled columns); --method privrecourse serves any classifier, and `recourse-privacy audit --model-file` "
        "audits this one"
    )


def _write_model(model, out: Path) -> tuple[dict[str, str], dict]:
    """Write the bundle's model: ``model.npz`` (the weights of a linear one: ``coef_``, ``intercept_``) or
    ``model.skops`` (a :class:`ServedEstimator`'s classifier, with the types it needs trusted, which the publisher
    trusted to load it); its files' SHA-256 and the manifest's model entry."""
    if not isinstance(model, ServedEstimator):
        coef, intercept = np.asarray(model.coef_, np.float64).ravel(), np.asarray(model.intercept_, np.float64)
        np.savez(out / "model.npz", coef=coef, intercept=intercept.ravel()[:1])
        digest = _sha256(out / "model.npz")
        entry = {"file": "model.npz", "sha256": digest, "kind": "logistic", "space": "schema model space"}
        return {"model.npz": digest}, entry
    import skops.io as sio

    sio.dump(model.estimator_, out / "model.skops")
    digest = _sha256(out / "model.skops")
    entry = {
        "file": "model.skops", "sha256": digest, "kind": "estimator", "space": "data columns",
        "estimator": type(model.estimator_).__name__, "trusted": sio.get_untrusted_types(file=out / "model.skops"),
        "columns": list(model.columns), "dtypes": model.dtypes, "favourable": model.favourable,
        "decision_threshold": model.threshold, "ties_favourable": model.ties_favourable,
    }  # fmt: skip
    return {"model.skops": digest}, entry


def _publish_dpc(Z: np.ndarray, y: np.ndarray, epsilon: float, out: Path, seed: int) -> dict[str, str]:
    """DPC's release in hardened mode (half of ``epsilon`` each): the FM autoencoder's weights and the two noisy
    prototypes, written as ``dpc.npz`` (arrays) and ``dpc.json``; returns their SHA-256 by file name."""
    from recourse_privacy.dpc import DPCExplainer

    ex = DPCExplainer(mode="hardened", epsilon=epsilon / 2, epsilon_prototypes=epsilon / 2, bounds=None,
                      random_state=seed).fit(Z, y, n_classes=2)  # fmt: skip
    ae = ex.autoencoder
    arrays = {f"encoder.{k}": v.numpy() for k, v in ae.encoder_.state_dict().items()}
    arrays |= {f"decoder.{k}": v.numpy() for k, v in ae.decoder_.state_dict().items()}
    arrays |= {"prototypes": ex.prototypes_.centers, "prototype_counts": ex.prototypes_.counts}
    np.savez(out / "dpc.npz", **arrays)
    meta = {
        "encoder_layers": list(ae.encoder_layers),
        "n_features": int(Z.shape[1]),
        "epsilon_autoencoder": ae.epsilon,
        "epsilon_prototypes": ex.epsilon_prototypes,
        "sensitivity": ae.sensitivity_,
        "search": {
            "alpha": ex.alpha,
            "beta": ex.beta,
            "gamma": ex.gamma,
            "norm": ex.norm,
            "lr": ex.lr,
            "max_iter": ex.max_iter,
        },  # fmt: skip
        "mode": ex.mode,
        "ledger": ex.ledger.to_dict(),
    }
    (out / "dpc.json").write_text(json.dumps(meta, indent=2, allow_nan=False))
    return {name: _sha256(out / name) for name in ("dpc.npz", "dpc.json")}


def load_dpc_explainer(path: str | Path):
    """A DPC bundle's release as a fitted :class:`~recourse_privacy.dpc.DPCExplainer` (torch; to audit or compare with
    the server's compiled search, :mod:`recourse_privacy.service.latent_search`)."""
    path = Path(path)
    import torch

    from recourse_privacy.dpc import DPCExplainer, Prototypes, PublicBounds

    meta = json.loads((path / "dpc.json").read_text())
    n = int(meta["n_features"])
    ex = DPCExplainer(mode="hardened", epsilon=meta["epsilon_autoencoder"],
                      epsilon_prototypes=meta["epsilon_prototypes"], encoder_layers=meta["encoder_layers"],
                      **meta["search"])  # fmt: skip
    ae = ex.autoencoder
    ae.encoder_, ae.decoder_ = ae._build(n, 0)
    with np.load(path / "dpc.npz", allow_pickle=False) as z:
        for name, module in (("encoder", ae.encoder_), ("decoder", ae.decoder_)):
            state = {k.split(".", 1)[1]: torch.as_tensor(z[k]) for k in z.files if k.startswith(name + ".")}
            module.load_state_dict(state)
            module.eval()
            module.requires_grad_(False)
        centers, counts = z["prototypes"], z["prototype_counts"]
    ae.n_features_in_, ae.sensitivity_ = n, float(meta["sensitivity"])
    ex.bounds_ = PublicBounds.make(None, n)  # the schema's model space is [0, 1] by construction
    ex.prototypes_ = Prototypes(centers, counts, meta["epsilon_prototypes"])
    ex.n_classes_, ex.n_features_in_ = 2, n
    return ex


@dataclass
class Bundle:
    """A loaded bundle: the manifest, the schema, the model and the method's artefact."""

    path: Path
    manifest: dict
    schema: Schema
    model: LinearModel | ServedEstimator
    graph: object = None
    random_state: object = None

    @property
    def method(self) -> str:
        return self.manifest["method"]

    @property
    def sparse(self) -> bool:
        """Whether answers keep only the changes the model's acceptance needs (:mod:`~recourse_privacy.service.sparsify`;
        a bundle published before the option: no)."""
        return bool(self.manifest.get("answers", {}).get("sparse", False))

    @property
    def epsilon_per_answer(self) -> float:
        return float(self.manifest["epsilon_per_answer"])

    def __post_init__(self) -> None:
        import secrets

        # Laplace noise must be unpredictable in a deployment: a fresh OS seed unless one is given (tests)
        seed = secrets.randbits(64) if self.random_state is None else self.random_state
        self._rng = np.random.default_rng(seed)
        if self.graph is not None and hasattr(self.graph, "prepare"):
            self.graph.prepare()
        self._numeric = {f.name for f in self.schema.features if f.type == "numeric"}
        self._json = _JsonParts.of(self.schema)
        self._wm = np.where(self._move_mask(), self.model.coef_, 0.0) if self.model.kind == "logistic" else None

    def decide(self, a: Applicants) -> np.ndarray:
        """Whether the bundle's model accepts each applicant (original units)."""
        return self.model.decide(a, self.schema.encode(a))

    def warm(self) -> None:
        """Make the first answers as fast as the next ones: compile the DPC search for every batch size it pads to
        (:meth:`~recourse_privacy.service.latent_search.LatentSearch.warm`); nothing for the other methods."""
        if hasattr(self.graph, "warm"):
            self.graph.warm()

    def _move_mask(self) -> np.ndarray:
        """Features a linear move may change: numeric, mutable, and not an increase-only one the move would lower."""
        s = self.schema
        numeric = np.zeros(s.n_model, bool)
        numeric[s._cols.num_cols] = True
        w = self.model.coef_
        return numeric & ~s.model_mask("immutable") & ~(s.model_mask("increase") & (w < 0))

    def _linear_moves(self, Z: np.ndarray, score: np.ndarray, target: float) -> np.ndarray:
        """The least-L2 move of each row ``Z`` along the movable weights to the logit ``target``; a row's gaps
        (a value it misses) are not moved."""
        held = self.schema.held_values(Z)
        if held is None:
            wm = self._wm
            sq = float(wm @ wm)
            if sq == 0:
                return Z.copy()
            return Z + np.outer((target - score) / sq, wm)
        W = np.where(held, 0.0, self._wm)
        sq = np.einsum("ij,ij->i", W, W)
        step = np.divide(target - score, sq, out=np.zeros(len(Z)), where=sq > 0)
        return Z + step[:, None] * W

    def _counterfactuals(self, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Model-space counterfactuals of the rejected rows ``Z`` and whether the method found one."""
        return _SEARCH[self.method](self, Z)

    def answer(self, rows) -> list[dict]:
        """The answer for every applicant (:class:`Applicants`, or rows of values in schema order), already validated.

        One pass of array operations over the whole batch (encode, decide, search, decode, check,
        describe); only the answers' JSON objects are built per applicant.
        """
        return self._answer(rows, text=False)

    def answer_json(self, rows) -> AnswerTexts:
        """:meth:`answer` as JSON text: each answer exactly ``json.dumps(answer, separators=(",", ":"))`` of the
        same answer's object, written from the batch's columns without building the objects (what the server sends;
        the encoder's walk over the objects cost as much as building them)."""
        texts = self._answer(rows, text=True)
        return AnswerTexts(texts, [_ACCEPTED if t is _ACCEPTED_TEXT else "rejected" for t in texts])

    def _answer(self, rows, *, text: bool) -> list:
        s = self.schema
        a = rows if isinstance(rows, Applicants) else s.from_rows(rows)
        Z = s.encode(a)
        accepted = self.model.decide(a, Z)
        out: list[dict] = [None] * len(a)  # type: ignore[list-item]
        rej = np.flatnonzero(~accepted)
        piece = _PIECE_ROWS.get(self.method)
        if piece is not None and len(rej) > piece:
            # pieces of the batch on the search's threads: one piece's Python (decode, describe) runs while another's
            # compiled search runs without the GIL, so a large batch keeps every core busy
            parts = [rej[k : k + piece] for k in range(0, len(rej), piece)]
            answered = search_threads().map(lambda idx: self._answer_rejected(a.take(idx), Z[idx], text), parts)
            for idx, docs in zip(parts, answered):
                for i, d in zip(idx.tolist(), docs):
                    out[i] = d
        elif len(rej):
            for i, d in zip(rej.tolist(), self._answer_rejected(a.take(rej), Z[rej], text)):
                out[i] = d
        for i in np.flatnonzero(accepted).tolist():
            out[i] = _ACCEPTED_TEXT if text else _accepted_doc()
        return out

    def _answer_rejected(self, fact: Applicants, Zr: np.ndarray, text: bool) -> list:
        """The answers of rejected applicants ``fact`` (model space ``Zr``): search, decode, check, describe."""
        s = self.schema
        Zcf, found = self._counterfactuals(Zr)
        cf = s.decode(Zcf, fact)
        Zb = s.encode(cf)
        valid = self.model.decide(cf, Zb)
        if self.method == "dpm":  # the smallest margin whose decoded counterfactual the model accepts
            for margin in _MARGINS[1:]:
                bad = np.flatnonzero(~valid)
                if not len(bad):
                    break
                retry = s.decode(self._linear_moves(Zr[bad], self.model.logit(Zr[bad]), margin), fact.take(bad))
                Zt = s.encode(retry)
                ok = self.model.predict(Zt) == 1
                cf.put(bad[ok], retry.take(ok))
                Zb[bad[ok]] = Zt[ok]
                valid[bad[ok]] = True
        if self.sparse:  # the changes the model's acceptance needs, no others (post-processing)
            cf = sparsify(s, self.model, fact, cf, valid & found, Zr, Zb)
            Zb = s.encode(cf)
        return self._describe(fact, Zr, cf, Zb, found, valid, text)

    def _describe(self, fact, Za, cf, Zb, found, valid, text: bool = False) -> list:
        """The rejected applicants' answers: changes (most decisive first), cost; as objects, or (``text``) as their
        JSON text."""
        s = self.schema
        changed = s.changed(fact, cf)
        # most decisive first: weight times change for a linear model; a served classifier, the largest change
        # (in units of the feature's public range) first
        moved = Zb - Za
        decisive = s.feature_sums(self.model.coef_ * moved if self.model.kind == "logistic" else np.abs(moved))
        order = np.argsort(np.where(changed, -decisive, np.inf), axis=1, kind="stable").tolist()
        n_changed = changed.sum(1).tolist()
        costs = np.round(s.costs(fact, cf), 6).tolist()
        before, after = s.values(fact), s.values(cf)
        rows = zip(found.tolist(), (valid & found).tolist(), order, n_changed, costs)
        if text:
            return self._texts(rows, before, after)
        names = s.names
        cf_docs = [dict(zip(names, vals)) for vals in zip(*after)]
        out = []
        for i, (ok, good, order_i, n_i, cost) in enumerate(rows):
            if not ok:
                out.append(_not_found_doc())
                continue
            changes = [{"feature": names[j], "from": before[j][i], "to": after[j][i]} for j in order_i[:n_i]]
            out.append({
                "decision": "rejected",
                "counterfactual": cf_docs[i],
                "changes": changes,
                "cost": cost,
                "reasons": [c["feature"] for c in changes],
                "sentences": sentences(changes, self._numeric),
                "valid": good,
            })  # fmt: skip
        return out

    def _texts(self, rows, before: list[list], after: list[list]) -> list[str]:
        """The JSON text of :meth:`_describe`'s objects, column by column: each value's text made once per column
        (``repr`` of an int or float is what ``json`` writes; a category's or a name's text is made once per bundle)."""
        js = self._json
        before_t, after_t = js.column_texts(before), js.column_texts(after)
        keyed = [[key + v for v in col] for key, col in zip(js.keys, after_t)]
        cf_texts = ["{" + ",".join(vals) + "}" for vals in zip(*keyed)]
        names, numeric, name_t = self.schema.names, js.numeric, js.names
        change_t = ['{"feature":' + n + ',"from":' for n in name_t]
        quote = js.quote
        out = []
        for i, (ok, good, order_i, n_i, cost) in enumerate(rows):
            if not ok:
                out.append(_NOT_FOUND_TEXT)
                continue
            js_i = order_i[:n_i]
            changes = ",".join([change_t[j] + before_t[j][i] + ',"to":' + after_t[j][i] + "}" for j in js_i])
            said = ",".join([quote(sentence(names[j], before[j][i], after[j][i], numeric[j])) for j in js_i])
            out.append(
                '{"decision":"rejected","counterfactual":' + cf_texts[i] + ',"changes":[' + changes + '],"cost":'
                + repr(cost) + ',"reasons":[' + ",".join([name_t[j] for j in js_i]) + '],"sentences":[' + said
                + '],"valid":' + ("true" if good else "false") + "}"
            )  # fmt: skip
        return out


_ACCEPTED = "accepted"


def _accepted_doc() -> dict:
    return {"decision": _ACCEPTED, "counterfactual": None, "changes": [], "cost": 0.0, "reasons": [], "sentences": [],
            "valid": True}  # fmt: skip


def _not_found_doc() -> dict:
    return {"decision": "rejected", "counterfactual": None, "changes": [], "cost": None, "reasons": [], "sentences": [],
            "valid": False, "note": "no counterfactual reachable on the published graph"}  # fmt: skip


_ACCEPTED_TEXT = json.dumps(_accepted_doc(), separators=(",", ":"))
_NOT_FOUND_TEXT = json.dumps(_not_found_doc(), separators=(",", ":"))


@dataclass(frozen=True)
class AnswerTexts:
    """:meth:`Bundle.answer_json`'s result: each applicant's answer as compact JSON text, and its decision."""

    texts: list[str]
    decisions: list[str]


@dataclass(frozen=True)
class _JsonParts:
    """A schema's JSON pieces, made once per bundle: each feature's name and ``"name":`` key as JSON, each category's
    JSON text, which features are numeric, and how to quote a sentence."""

    names: tuple[str, ...]
    keys: tuple[str, ...]
    numeric: tuple[bool, ...]
    categories: tuple[dict | None, ...]
    plain: bool  # every name and category is printable ASCII without '"' or '\\': a sentence needs no escaping
    nullable: tuple[bool, ...]  # per feature: may be missing (a numeric gap is written null)

    @classmethod
    def of(cls, schema: Schema) -> _JsonParts:
        dumps = json.dumps
        names = tuple(dumps(f.name) for f in schema.features)
        cats = tuple({c: dumps(c) for c in f.categories} | {None: "null"} if f.type == "categorical" else None
                     for f in schema.features)  # fmt: skip
        words = [f.name for f in schema.features] + [c for f in schema.features for c in (f.categories or ())]
        plain = all(w.isascii() and w.isprintable() and '"' not in w and "\\" not in w for w in words)
        return cls(names, tuple(n + ":" for n in names), tuple(f.type == "numeric" for f in schema.features), cats,
                   plain, tuple(f.missing for f in schema.features))  # fmt: skip

    def column_texts(self, cols: list[list]) -> list[list[str]]:
        """Per feature, the JSON text of each value (:meth:`Schema.values`' columns)."""
        return [list(map(_number_text if gap else repr, col)) if cats is None else list(map(cats.__getitem__, col))
                for col, cats, gap in zip(cols, self.categories, self.nullable)]  # fmt: skip

    def quote(self, text: str) -> str:
        """``json.dumps(text)``; without the encoder's call when the schema's words need no escaping (a sentence is
        those words, numbers and ASCII letters)."""
        return '"' + text + '"' if self.plain else json.dumps(text)


def _number_text(v) -> str:
    """A number's JSON text (``repr`` of an int or float is what ``json`` writes); a gap's ``null``."""
    return "null" if v is None else repr(v)


def _search_privrecourse(b: Bundle, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2 of Pentyala et al. (2023) on the published graph: the path's end node."""
    ans = b.graph.query(Z, model=b.model)  # the model decides candidates where nodes take the immutables
    return np.where(ans.found[:, None], b.graph.node_points(ans.end, Z), Z), ans.found


def _search_laplace(b: Bundle, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Laplace Recourse (Huang et al. 2023, sec. 4.2.2): the move to the target logit from a noisy score."""
    from recourse_privacy.defenses.laplace import noisy_logit, noisy_probability

    p = b.model.predict_proba(Z)[:, 1]
    f_noisy = noisy_logit(noisy_probability(p, b.epsilon_per_answer, random_state=b._rng))
    return b._linear_moves(Z, f_noisy, TARGET_LOGIT), np.ones(len(Z), bool)


def _search_dpm(b: Bundle, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact closed-form move of the DP linear model to the target logit: post-processing."""
    return b._linear_moves(Z, b.model.logit(Z), TARGET_LOGIT), np.ones(len(Z), bool)


def _search_dpc(b: Bundle, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DPC's latent search (Yang et al. 2022, sec. 4.2) from the published prototype of the favourable class."""
    cf, _ = b.graph.search(Z, b.model.coef_, b.model.intercept_, target=1)
    return cf, np.ones(len(Z), bool)  # an invalid last iterate is answered, flagged by the validity check


#: each method's counterfactual search over the rejected rows (model space)
_SEARCH = {"privrecourse": _search_privrecourse, "laplace": _search_laplace, "dpm": _search_dpm, "dpc": _search_dpc}

#: methods whose batches are answered in pieces of this many rejected rows on several threads: DPC's search is
#: compiled (it runs without the GIL) and draws no noise; the others' answers are numpy and Python under the GIL
#: (threads would only take turns), and Laplace's noise generator is not for several threads
_PIECE_ROWS = {"dpc": CHUNK}


def _load_model(path: Path, manifest: dict, schema: Schema) -> LinearModel | ServedEstimator:
    """The bundle's model: ``model.npz``'s weights, or (a ``privrecourse`` bundle of a user's classifier)
    ``model.skops`` loaded with the types its publisher trusted (the manifest's checksum has already matched)."""
    entry = manifest.get("model") or {}
    if entry.get("kind", "logistic") == "logistic":
        with np.load(path / "model.npz", allow_pickle=False) as z:
            model = LinearModel(z["coef"], float(z["intercept"][0]))
        if model.coef_.shape != (schema.n_model,):
            raise ValueError(f"the model has {model.coef_.shape} weights for {schema.n_model} inputs")
        return model
    if entry.get("kind") != "estimator" or manifest.get("method") != "privrecourse":
        raise ValueError(f"a {entry.get('kind')!r} model in a {manifest.get('method')!r} bundle")
    from recourse_privacy.models.files import load_model_file

    est = load_model_file(path / "model.skops", tuple(entry["trusted"]))
    return ServedEstimator(
        est, schema, entry["columns"], entry["dtypes"], entry["favourable"], entry["decision_threshold"],
        bool(entry.get("ties_favourable", False)),  # a bundle written before the key decided ties unfavourable
    )  # fmt: skip


def load_bundle(path: str | Path, *, random_state=None, search_precision: str = "float64") -> Bundle:
    """Read a bundle written by :func:`publish`; refuse another format, a missing file or a checksum mismatch.

    ``search_precision``: the floating-point type of DPC's compiled search (``float64``, the default and the
    reference's, or ``float32``: faster, with other answers; see :mod:`~recourse_privacy.service.latent_search`);
    refused for the other methods, which compile nothing."""
    path = Path(path)
    mf = path / "manifest.json"
    if not mf.is_file():
        raise MissingFileError(f"{path} is not a bundle: no manifest.json (make one with recourse-privacy publish)")
    try:
        manifest = json.loads(mf.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InvalidInputError(f"{mf} is not valid JSON ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise InvalidInputError(f"{mf} is not a recourse-privacy bundle manifest")
    if manifest.get("version") != BUNDLE_VERSION:
        raise IncompatibleError(f"bundle version {manifest.get('version')!r}; this release reads {BUNDLE_VERSION}")
    for name, digest in manifest.get("files", {}).items():
        f = path / name
        if not f.is_file():
            raise MissingFileError(f"bundle file {f} is missing")
        if _sha256(f) != digest:
            raise InvalidInputError(f"bundle file {f} is corrupted: its SHA-256 differs from the manifest's")
    try:
        schema = Schema.from_list(manifest["features"], manifest.get("schema_notes"))
        model = _load_model(path, manifest, schema)
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidInputError(f"bundle {path} is incomplete or corrupted: {err}") from None
    if search_precision not in PRECISIONS:
        raise InvalidInputError(
            f"search_precision (--search-precision) {search_precision!r}: expected one of {', '.join(PRECISIONS)}"
        )
    if search_precision != "float64" and manifest.get("method") != "dpc":
        raise InvalidInputError(
            f"search_precision (--search-precision) {search_precision}: only a DPC bundle runs a compiled search; "
            f"{path} is a {manifest.get('method')!r} bundle"
        )
    graph = None
    try:
        if manifest["method"] == "privrecourse":
            from recourse_privacy.privrecourse import load_artefact

            graph = load_artefact(path / "graph")
        elif manifest["method"] == "dpc":
            from recourse_privacy.service.latent_search import load_latent_search

            graph = load_latent_search(path, json.loads((path / "dpc.json").read_text()), search_precision)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise InvalidInputError(f"bundle {path}: the {manifest['method']} artefact is corrupted: {err}") from None
    return Bundle(path, manifest, schema, model, graph, random_state)
