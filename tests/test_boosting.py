"""Gradient-boosted trees (XGBoost, LightGBM): registered models, exact margins, seeded, usable in audits and recourse."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from recourse_privacy import run_audit
from recourse_privacy.cli import app
from recourse_privacy.errors import RecoursePrivacyError
from recourse_privacy.models import make_model
from recourse_privacy.models.files import load_model_file
from recourse_privacy.models.registry import MODELS
from recourse_privacy.recourse import fit_for, make_recourse

BOOSTED = ("xgboost", "lightgbm")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = ((X[:, 0] + X[:, 1] ** 2 - X[:, 2]) > 0.8).astype(int)
    return X, y


@pytest.mark.parametrize("name", BOOSTED)
def test_registered_seeded_and_the_logit_is_the_raw_margin(data, name):
    X, y = data
    assert name in MODELS
    small = dict(n_estimators=30)
    a = make_model(name, random_state=1, **small).fit(X, y)
    b = make_model(name, random_state=1, **small).fit(X, y)
    z = a.decision_function(X)
    np.testing.assert_array_equal(z, b.decision_function(X))  # same seed, same model, same float ops
    # the logit is the booster's margin: its sigmoid is the library's own probability (float32 margins)
    p = a.estimator_.predict_proba(X)[:, 1]
    np.testing.assert_allclose(1 / (1 + np.exp(-z)), p, atol=1e-6)
    assert (a.predict(X) == (p >= 0.5)).mean() > 0.99 and (a.predict(X) == y).mean() > 0.8
    assert not a.is_differentiable and not a.is_linear
    assert a.decision_function(X[:0]).shape == (0,)


@pytest.mark.parametrize("name", BOOSTED)
def test_bad_parameters_are_refused_naming_them(name):
    with pytest.raises(RecoursePrivacyError, match="learning_rate"):
        make_model(name, learning_rate=0)
    with pytest.raises(RecoursePrivacyError, match="n_estimators"):
        make_model(name, n_estimators=0)


@pytest.mark.parametrize("name", BOOSTED)
def test_black_box_recourse_finds_valid_counterfactuals_and_gradient_methods_refuse(data, name):
    X, y = data
    model = make_model(name, random_state=0, n_estimators=30).fit(X, y)
    rejected = X[model.predict(X) == 0][:20]
    res = fit_for(make_recourse("gs", random_state=0), X, y, model).generate(model, rejected)
    assert res.valid.mean() > 0.9
    assert (model.predict(res.counterfactuals[res.valid]) == 1).all()
    with pytest.raises(RecoursePrivacyError, match="gradient"):
        run_audit(model=name, recourse="scfe", n_features=5, n_members=60, shadow_models=2)


def test_audit_cli_runs_a_boosted_model(tmp_path):
    out = tmp_path / "out"
    args = ["audit", "--model", "lightgbm", "--model-param", "n_estimators=30", "--recourse", "gs"]
    args += ["--n-features", "5", "--n-members", "100", "--shadow-models", "2", "--out", str(out), "--cache-dir", "off"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (out / "metrics.json").is_file()


def test_a_users_xgboost_pipeline_in_a_skops_file(tmp_path):
    import skops.io as sio
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder
    from xgboost import XGBClassifier

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"income": rng.normal(50, 15, 500), "housing": rng.choice(["rent", "own"], 500)})
    y = ((df.income > 50) ^ (rng.random(500) < 0.1)).astype(int)
    ct = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])], remainder="passthrough")
    pipe = Pipeline([("prep", ct), ("clf", XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1))]).fit(df, y)
    sio.dump(pipe, tmp_path / "m.skops")
    untrusted = sio.get_untrusted_types(file=tmp_path / "m.skops")
    with pytest.raises(RecoursePrivacyError, match="--trust"):
        load_model_file(tmp_path / "m.skops")
    loaded = load_model_file(tmp_path / "m.skops", trusted=untrusted)
    np.testing.assert_array_equal(loaded.predict_proba(df), pipe.predict_proba(df))
