"""A deployed model's decision cutoff: read from the model or given, checked against its predict, and applied
to the targets, the recourse and the losses."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import FixedThresholdClassifier, TunedThresholdClassifierCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC

from recourse_privacy import run_audit
from recourse_privacy.audit import AuditResult
from recourse_privacy.data import Preprocessor
from recourse_privacy.errors import InvalidInputError
from recourse_privacy.models.base import logit_confidence, per_example_loss
from recourse_privacy.models.decision_threshold import declared_threshold, resolve_threshold
from recourse_privacy.models.estimator import EstimatorModel
from recourse_privacy.models.estimator_state import estimator_fingerprint, export_estimator, restore_estimator


def applicants(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "g": rng.choice(["x", "y", "z"], n)})
    df["label"] = ((df.a + 0.5 * df.b + 0.4 * (df.g == "x") + rng.normal(scale=0.7, size=n)) > -0.3).astype(int)
    return df


def pipeline(clf=None) -> Pipeline:
    prep = ColumnTransformer(
        [("oh", OneHotEncoder(handle_unknown="ignore"), ["g"]), ("sc", StandardScaler(), ["a", "b"])]
    )
    return Pipeline([("prep", prep), ("clf", clf if clf is not None else LogisticRegression())])


class CutAt07(LogisticRegression):
    """A classifier whose own predict applies a cutoff of 0.7 that it states nowhere."""

    def predict(self, X):
        return (self.predict_proba(X)[:, 1] >= 0.7).astype(int)


class Coin(LogisticRegression):
    """A predict that is no cutoff on predict_proba (every third row flipped)."""

    def predict(self, X):
        y = super().predict(X)
        y[::3] = 1 - y[::3]
        return y


@pytest.fixture(scope="module")
def data():
    df = applicants()
    return df, df.drop(columns="label"), df.label.to_numpy()


def wrap(est, X, **kw) -> tuple[EstimatorModel, np.ndarray]:
    pre = Preprocessor(corr_threshold=None).fit(X)
    model = EstimatorModel(est, pre, labels=(1, 0), feature_names=tuple(X.columns), estimator_=est, **kw)
    Z = pre.transform(X)
    model.probe_linearity(Z)
    return model, Z


# ---------------------------------------------------------------- reading the cutoff


def test_the_cutoff_scikit_learn_states_is_read_on_the_favourable_label(data):
    _, X, y = data
    fixed = FixedThresholdClassifier(pipeline(), threshold=0.7).fit(X, y)
    assert declared_threshold(fixed, 1).value == 0.7
    # stated on the unfavourable label ("predict 0 where P(0) >= 0.2"): favourable where P(1) > 0.8
    on_zero = FixedThresholdClassifier(pipeline(), threshold=0.2, pos_label=0).fit(X, y)
    found = declared_threshold(on_zero, 1)
    assert math.isclose(found.value, 0.8) and "on 0" in found.source
    assert declared_threshold(FixedThresholdClassifier(pipeline()).fit(X, y), 1).value == 0.5  # "auto"
    # on decision_function's scale, where it is the log-odds (a logistic regression): P(1) >= sigmoid(t)
    on_score = FixedThresholdClassifier(pipeline(), threshold=1.0, response_method="decision_function").fit(X, y)
    assert declared_threshold(on_score, 1).value == pytest.approx(1 / (1 + math.exp(-1.0)))
    assert "log-odds 1" in declared_threshold(on_score, 1).source
    model, Z = wrap(on_score, X)  # the check against its own predict passes: the reading is its decisions
    np.testing.assert_array_equal(model.predict(Z), on_score.predict(X))
    on_zero_score = FixedThresholdClassifier(
        pipeline(), threshold=-0.5, response_method="decision_function", pos_label=0
    )
    assert declared_threshold(on_zero_score.fit(X, y), 1).value == pytest.approx(1 / (1 + math.exp(-0.5)))
    np.testing.assert_array_equal(wrap(on_zero_score, X)[0].predict(Z), on_zero_score.predict(X))
    svm = FixedThresholdClassifier(pipeline(LinearSVC()), threshold=0.3, response_method="decision_function")
    assert declared_threshold(svm.fit(X, y), 1) is None  # a margin, not a log-odds: not read
    tuned = TunedThresholdClassifierCV(pipeline(), scoring="balanced_accuracy", cv=3, random_state=0).fit(X, y)
    assert declared_threshold(tuned, 1).value == pytest.approx(tuned.best_threshold_)
    assert declared_threshold(pipeline().fit(X, y), 1) is None


def test_a_given_cutoff_is_checked(data):
    _, X, y = data
    plain, fixed = pipeline().fit(X, y), FixedThresholdClassifier(pipeline(), threshold=0.7).fit(X, y)
    assert resolve_threshold(plain, 1).value == 0.5
    given = resolve_threshold(plain, 1, 0.8)
    assert given.value == 0.8 and not given.in_predict  # the lender's rule outside the model
    assert resolve_threshold(fixed, 1, 0.7).in_predict
    with pytest.raises(InvalidInputError, match=r"decision_threshold=0.6 .*decides at P\(1\) >= 0.7"):
        resolve_threshold(fixed, 1, 0.6)
    for bad in (0.0, 1.0, float("nan"), -0.2, "high", True):
        with pytest.raises(InvalidInputError, match="decision_threshold"):
            resolve_threshold(plain, 1, bad)


# ---------------------------------------------------------------- the model at its cutoff


@pytest.mark.parametrize("clf", [LogisticRegression(), RandomForestClassifier(n_estimators=20, random_state=0)])
def test_the_model_decides_as_the_deployed_wrapper_and_scores_its_own_probabilities(data, clf):
    _, X, y = data
    fixed = FixedThresholdClassifier(pipeline(clf), threshold=0.7).fit(X, y)
    model, Z = wrap(fixed, X)
    assert model.is_linear == isinstance(clf, LogisticRegression)  # the linear fast path keeps the cutoff
    p = fixed.predict_proba(X)[:, 1]
    near = np.abs(p - 0.7) < 1e-9
    np.testing.assert_array_equal(model.predict(Z)[~near], fixed.predict(X)[~near])
    assert ((p >= 0.5) & (p < 0.7)).sum() > 20  # rows a cutoff of one half would have called favourable
    offset = math.log(0.7 / 0.3)
    pc = np.clip(p, 1e-12, 1 - 1e-12)
    own = np.log(pc) - np.log1p(-pc)
    np.testing.assert_allclose(model.log_odds(Z), own, atol=1e-6)
    np.testing.assert_allclose(model.decision_function(Z), own - offset, atol=1e-6)
    # the losses and confidences read the model's own probabilities, not the moved decision logit
    np.testing.assert_allclose(per_example_loss(model, Z, y), -np.log(np.where(y == 1, pc, 1 - pc)), atol=1e-6)
    np.testing.assert_allclose(logit_confidence(model, Z, y), np.where(y == 1, own, -own), atol=1e-6)


def test_faces_confidence_threshold_reads_the_models_own_probability(data):
    from recourse_privacy.recourse.face import FACE

    _, X, y = data
    fixed = FixedThresholdClassifier(pipeline(), threshold=0.7).fit(X, y)
    model, Z = wrap(fixed, X)
    p = fixed.predict_proba(X)[:, 1]
    for t in (0.6, 0.8):
        face = FACE(n_neighbors=10, min_confidence=t).fit(Z)
        own = fixed.predict_proba(model.decode(face.nodes_))[:, 1]
        # accepted (P >= 0.7) and P >= t by the classifier's own probability (a decision probability of t would be
        # an own P of sigmoid(logit(t) + logit(0.7)), 0.78 for t = 0.6)
        np.testing.assert_array_equal(face._candidates(model), (own >= 0.7 - 1e-9) & (own >= t))
    assert ((p >= 0.7) & (p < 0.78)).sum() > 10  # rows that tell the two readings apart


def test_the_cached_state_keeps_the_estimators_own_intercept(data):
    _, X, y = data
    fixed = FixedThresholdClassifier(pipeline(), threshold=0.7).fit(X, y)
    model, Z = wrap(fixed, X)
    state = export_estimator(model)
    plain, _ = wrap(fixed.estimator_, X)
    assert float(state["intercept"]) == pytest.approx(plain.intercept_, abs=1e-8)  # one training, any cutoff
    again = EstimatorModel(fixed, model.preprocessor, labels=(1, 0), feature_names=model.feature_names)
    restore_estimator(again, state)
    np.testing.assert_allclose(again.decision_function(Z), model.decision_function(Z), atol=1e-10)
    assert estimator_fingerprint(model) != estimator_fingerprint(plain)  # the decisions differ


def test_a_cutoff_the_audit_is_not_told_of_is_found_and_named(data):
    _, X, y = data
    cut = pipeline(CutAt07()).fit(X, y)
    model, Z = wrap(cut, X)
    with pytest.raises(
        InvalidInputError, match=r"between the two: pass decision_threshold=T \(--decision-threshold T\)"
    ) as err:
        model.check_decisions(Z)
    lo, hi = (float(v) for v in re.search(r"= ([\d.]+) up and not up to ([\d.]+)", str(err.value)).groups())
    assert hi < 0.7 <= lo
    told, _ = wrap(cut, X, threshold=0.7)
    told.check_decisions(Z)  # the cutoff given: the model's own predict applies it
    np.testing.assert_array_equal(told.predict(Z), cut.predict(X))
    coin, Zc = wrap(pipeline(Coin()).fit(X, y), X)
    with pytest.raises(InvalidInputError, match="not a cutoff on its predict_proba"):
        coin.check_decisions(Zc)


# ---------------------------------------------------------------- the audit at the cutoff

SMALL = dict(target="label", shadow_models=2, n_members=150, cache="off", attacks=("cfd", "cfd-lrt", "loss"))


@pytest.mark.parametrize("recourse", ["linear", "gs"])
def test_the_deployed_audit_targets_and_repairs_at_the_models_cutoff(data, recourse):
    df, X, y = data
    mask = np.random.default_rng(3).random(len(df)) < 0.5
    fixed = FixedThresholdClassifier(pipeline(), threshold=0.75).fit(X[mask], y[mask])
    r = run_audit(model=fixed, data=df, members=mask, recourse=recourse, **SMALL)
    assert r.model.decision_threshold == 0.75 and "FixedThresholdClassifier" in r.model.threshold_source
    assert r.model.name == "FixedThresholdClassifier(Pipeline(ColumnTransformer, LogisticRegression))"
    ex = r.arrays.exposure
    rows = X.iloc[ex["row"].to_numpy()]
    assert (fixed.predict(rows) == 0).all()  # the targets are the rows the deployed cutoff rejects
    assert (ex["p_favourable"] >= 0.5).sum() > 10  # rows a cutoff of one half would not have targeted
    assert (ex["decision"] == 0).all()
    cf = r.arrays.counterfactuals
    valid = cf["valid"].to_numpy(bool)
    assert valid.mean() > 0.95
    after = cf.loc[valid, [f"{c}_cf" for c in ("a", "b", "g")]]
    after.columns = ["a", "b", "g"]
    p_after = fixed.predict_proba(after)[:, 1]
    assert (fixed.predict(after) == 1).mean() > 0.99 and p_after.min() > 0.75 - 1e-6


def test_an_audit_with_the_lenders_own_cutoff_and_the_refusals(data, tmp_path):
    df, X, y = data
    mask = np.random.default_rng(4).random(len(df)) < 0.5
    plain = pipeline().fit(X[mask], y[mask])
    r = run_audit(
        model=plain, data=df, members=mask, recourse="linear", decision_threshold=0.75, out_dir=tmp_path, **SMALL
    )
    assert r.model.decision_threshold == 0.75 and r.model.threshold_source == "decision_threshold"
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["model"]["decision_threshold"] == 0.75 and m["config"]["decision_threshold"] == 0.75
    assert AuditResult.from_dict(m).model == r.model  # read back whole
    html = (tmp_path / "report.html").read_text()
    assert html.count("favourable from P = 0.75") == 2  # the subtitle and the model section
    p = r.arrays.exposure["p_favourable"].to_numpy()
    assert p.max() < 0.75 and (p >= 0.5).any()
    with pytest.raises(InvalidInputError, match="between the two"):  # before any reference model trains
        run_audit(model=pipeline(CutAt07()).fit(X[mask], y[mask]), data=df, members=mask, recourse="gs", **SMALL)
    with pytest.raises(InvalidInputError, match="your own scikit-learn model"):
        run_audit(dataset="synthetic", model="logistic", decision_threshold=0.7, n_members=100, shadow_models=2)
    with pytest.raises(InvalidInputError, match=r"decision_threshold must be in \(0, 1\)"):
        run_audit(model=plain, data=df, members=mask, decision_threshold=1.0, **SMALL)


def test_the_recipe_question_refits_the_wrapper_with_its_cutoff(data):
    df, X, y = data
    recipe = FixedThresholdClassifier(pipeline(), threshold=0.7)  # unfitted: the audit trains it
    r = run_audit(
        model=recipe,
        data=df,
        recourse="linear",
        n_members=300,
        shadow_models=2,
        cache="off",
        target="label",
        attacks=("cfd", "cfd-lrt"),
    )
    assert r.model.decision_threshold == 0.7
    assert r.recourse.validity > 0.95


def test_the_recourse_command_answers_to_the_lenders_cutoff(data, tmp_path, monkeypatch):
    """`recourse --model-file ... --decision-threshold 0.75`: the queries are the rows the cutoff rejects, the
    counterfactuals reach it (for the model the command trains, a clone of the file's)."""
    import skops.io as sio
    from typer.testing import CliRunner

    from recourse_privacy.cli import app
    from recourse_privacy.evaluation.quality import run_quality

    trained = []
    fit = EstimatorModel.fit
    monkeypatch.setattr(EstimatorModel, "fit", lambda self, X, y: trained.append(self) or fit(self, X, y))
    df, X, y = data
    plain = pipeline().fit(X, y)
    q = run_quality(model=plain, data=df, target="label", methods=("gs",), n_points=80, n_train=600,
                    decision_threshold=0.75)  # fmt: skip
    (model,) = trained
    assert model.threshold_.value == 0.75
    cf = q.counterfactuals
    p = model.estimator_.predict_proba(X.iloc[cf["row"].to_numpy()])[:, 1]
    assert p.max() < 0.75 and (p >= 0.5).any()  # rejected at the cutoff, some favourable at one half
    after = cf.loc[cf["valid"], ["a_cf", "b_cf", "g_cf"]].set_axis(["a", "b", "g"], axis=1)
    assert cf["valid"].mean() > 0.95 and model.estimator_.predict_proba(after)[:, 1].min() > 0.75 - 1e-6
    sio.dump(plain, tmp_path / "m.skops")
    df.to_csv(tmp_path / "d.csv", index=False)
    common = [
        "recourse",
        "--data",
        str(tmp_path / "d.csv"),
        "--target",
        "label",
        "--model-file",
        str(tmp_path / "m.skops"),
    ]
    common += ["--methods", "gs", "--n-points", "40", "--n-train", "600", "--out", str(tmp_path / "o")]
    ok = CliRunner().invoke(app, [*common, "--decision-threshold", "0.75"])
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(app, [*common, "--decision-threshold", "1.5", "--overwrite"])
    assert bad.exit_code != 0 and "decision_threshold must be in (0, 1)" in " ".join(bad.output.split())


def test_the_wrapped_pipelines_encoders_are_checked_against_the_data(data):
    """A category the wrapped pipeline's one-hot encoder never saw is refused by name, as for a bare pipeline."""
    df, X, y = data
    seen = (X.g != "z").to_numpy()
    fixed = FixedThresholdClassifier(pipeline(), threshold=0.7).fit(X[seen], y[seen])
    with pytest.raises(InvalidInputError, match=r"column 'g' holds values \['z'\]"):
        run_audit(model=fixed, data=df, recourse="gs", **SMALL)


def test_a_label_given_as_text_names_the_class_stored_as_a_number():
    """``--positive-label 1`` names the class 1.0 of a model fitted on a float column (HELOC's RiskPerformance as
    pandas reads it), in the data, the model's labels and a stated cutoff alike; other texts do not."""
    from recourse_privacy.models.estimator import estimator_labels
    from recourse_privacy.validation import same_label

    assert same_label(1.0, "1") and same_label(1, "1.0") and same_label("yes", "yes") and same_label(np.float64(0), 0)
    assert not same_label(1.0, "1.5") and not same_label(1.0, "one") and not same_label(True, "1.0")
    X = np.random.default_rng(0).normal(size=(40, 2))
    est = LogisticRegression().fit(X, (X[:, 0] > 0).astype(np.float64))
    assert estimator_labels(est, "1", "--model-file") == (1.0, 0.0)
    assert estimator_labels(est, "0.0", "--model-file") == (0.0, 1.0)
    with pytest.raises(InvalidInputError, match="positive_label='2' is not one of"):
        estimator_labels(est, "2", "--model-file")


# ---------------------------------------------------------------- ties at the cutoff


@pytest.mark.parametrize("favourable", [1, 0])
def test_a_tie_at_one_half_is_decided_as_the_models_own_predict(data, favourable):
    """A tree whose leaves hold as many of each class (predict_proba 0.5 and 0.5): scikit-learn's ``predict`` takes
    the first class, so a tie is unfavourable where the favourable label is the second class and favourable where it
    is the first; the audit's model decides every row as ``predict`` does, ties included."""
    from sklearn.tree import DecisionTreeClassifier

    _, X, y = data
    tree = pipeline(DecisionTreeClassifier(max_depth=10, random_state=0, min_samples_leaf=2)).fit(X, y)
    p = tree.predict_proba(X)[:, 1]
    tie = p == 0.5
    assert tie.sum() >= 5  # leaves of one row of each class
    pre = Preprocessor(corr_threshold=None).fit(X)
    model = EstimatorModel(
        tree, pre, labels=(favourable, 1 - favourable), feature_names=tuple(X.columns), estimator_=tree
    )
    Z = pre.transform(X)
    model.check_decisions(Z)
    ours = model.predict(Z) == 1  # 1: favourable
    np.testing.assert_array_equal(ours, tree.predict(X) == favourable)
    assert (ours[tie] == (favourable == 0)).all()
    assert resolve_threshold(tree, favourable).ties_favourable == (favourable == 0)
    # a stated cutoff applies ">=": a tie at it is favourable, on either label
    fixed = FixedThresholdClassifier(pipeline(DecisionTreeClassifier(max_depth=10, random_state=0, min_samples_leaf=2)),
                                     threshold=0.5).fit(X, y)  # fmt: skip
    assert resolve_threshold(fixed, 1).ties_favourable and not resolve_threshold(fixed, 0).ties_favourable
    fm, _ = wrap(fixed, X)
    np.testing.assert_array_equal(fm.predict(Z), fixed.predict(X))
