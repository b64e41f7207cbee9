"""The user's own model and data (issue 13): scikit-learn pipelines, DataFrames, model files, PyTorch, bad input."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC

import recourse_privacy.audit.stages as stages
from recourse_privacy import AuditConfig, run_audit
from recourse_privacy.errors import InvalidInputError, MissingFileError, RecoursePrivacyError
from recourse_privacy.models import TorchModel
from recourse_privacy.models.files import load_model_file

CATS = {"housing": ["rent", "own", "mortgage"], "purpose": ["car", "home"]}


def loans(n: int = 900, seed: int = 0) -> pd.DataFrame:
    """Two numeric columns, two categoricals, string labels."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50_000, 15_000, n).round(-2),
            "age": rng.integers(20, 70, n),
            "housing": rng.choice(CATS["housing"], n),
            "purpose": rng.choice(CATS["purpose"], n),
        }
    )
    z = (df.income - 50_000) / 15_000 + 0.8 * (df.housing == "own") - 0.5 * (df.purpose == "car")
    df["decision"] = np.where(z + rng.normal(0, 1, n) > 0, "approved", "denied")
    return df


def gb_pipeline(df: pd.DataFrame, n_estimators: int = 20, handle_unknown: str = "ignore") -> Pipeline:
    ct = ColumnTransformer(
        [
            ("cat", OneHotEncoder(handle_unknown=handle_unknown), ["housing", "purpose"]),
            ("num", StandardScaler(), ["income", "age"]),
        ]
    )
    pipe = Pipeline([("prep", ct), ("clf", GradientBoostingClassifier(n_estimators=n_estimators, random_state=0))])
    return pipe.fit(df.drop(columns="decision"), df["decision"])


FAST = dict(n_members=200, attacks=("cfd", "loss"), target="decision", positive_label="approved")


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if the owner's model is trained: the checks must come first."""

    def trained(*a, **k):
        raise AssertionError("the owner's model was trained before the bad input was refused")

    monkeypatch.setattr(stages, "train_owner", trained)


# ------------------------------------------------------------------ the journeys
def test_pipeline_and_dataframe_audit_decodes_counterfactuals():
    df = loans()
    pipe = gb_pipeline(df)
    before = pipe.predict_proba(df.drop(columns="decision"))
    r = run_audit(model=pipe, data=df, recourse="gs", **FAST)
    # the game retrains a clone: the user's fitted instance is untouched
    np.testing.assert_array_equal(pipe.predict_proba(df.drop(columns="decision")), before)
    assert r.model.name == "Pipeline(ColumnTransformer, GradientBoostingClassifier)"
    cf = r.arrays.counterfactuals
    assert len(cf) == r.n_members + r.n_nonmembers
    assert {"row", "member", "valid", "cost_l1", "changed", "income", "income_cf", "housing_cf"} <= set(cf.columns)
    for col, levels in CATS.items():  # decoding gives one category per column, always a known one
        assert cf[f"{col}_cf"].isin(levels).all()
    # the factual columns are the data's own rows
    orig = df.drop(columns="decision").iloc[cf["row"].to_numpy()].reset_index(drop=True)
    np.testing.assert_array_equal(cf["income"].to_numpy(), orig["income"].to_numpy())
    assert (cf["housing"] == orig["housing"]).all()
    json.dumps(r.to_dict())  # metrics.json stays JSON


def test_an_unfitted_pipeline_selecting_columns_by_name_is_a_recipe():
    """Unfitted, its ColumnTransformer selects columns by name: the clones are trained on frames of the data's columns
    (the refit once failed with "Specifying the columns using strings is only supported for dataframes")."""
    df = loans(600)
    ct = ColumnTransformer(
        [("cat", OneHotEncoder(handle_unknown="ignore"), ["housing", "purpose"]), ("num", StandardScaler(), ["income"])]
    )
    recipe = Pipeline([("prep", ct), ("clf", GradientBoostingClassifier(n_estimators=20, random_state=0))])
    r = run_audit(model=recipe, data=df, recourse="gs", **FAST)
    assert r.question == "this recipe, re-trained" and r.recourse.validity > 0.9
    assert not hasattr(recipe, "classes_")  # the user's object stays unfitted: clones were trained


def test_linear_pipeline_gets_exact_recourse_with_the_builtin_distances():
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(900, 4)) * [1, 10, 100, 0.1], columns=list("abcd"))
    y = (X.a + X.b / 10 - X.c / 100 + rng.normal(0, 1, 900) > 0).astype(int)
    df = X.assign(label=y)
    pipe = Pipeline([("s", StandardScaler()), ("lr", LogisticRegression(C=1.0, max_iter=1000))]).fit(X, y)
    common = dict(data=df, target="label", n_members=300, attacks=("cfd",), recourse="linear", corr_threshold=None)
    mine = run_audit(model=pipe, **common)
    builtin = run_audit(model="logistic", **common)
    np.testing.assert_array_equal(mine.is_member, builtin.is_member)
    # both fit lbfgs logistic regression on the same standardised rows; they differ only by the decode /
    # re-standardise round trip (~1e-15) amplified by the optimiser's stopping rule
    np.testing.assert_allclose(mine.cfd, builtin.cfd, rtol=1e-5)
    assert mine.recourse.validity == 1.0


def test_linear_probe_accepts_onehot_logistic_and_rejects_trees():
    from recourse_privacy.audit.stages import load_data, prepare_game
    from recourse_privacy.audit.user_model import resolve_model

    df = loans(600)
    X = df.drop(columns="decision")
    ct = ColumnTransformer(
        [("cat", OneHotEncoder(), ["housing", "purpose"]), ("num", StandardScaler(), ["income", "age"])]
    )
    lin = Pipeline([("prep", ct), ("lr", LogisticRegression())]).fit(X, df.decision)
    for model, linear in ((lin, True), (gb_pipeline(df), False)):
        cfg = AuditConfig(model=model, data=df, recourse="gs", **FAST).validate()
        game = prepare_game(cfg, load_data(cfg))
        assert ("linear" in resolve_model(cfg, game).capabilities) is linear


def test_torch_module_through_run_audit():
    import torch

    df = loans(700)
    torch.manual_seed(0)

    def factory():
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))

    def train(module, X, y):
        opt = torch.optim.Adam(module.parameters(), lr=0.01)
        Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
        for _ in range(100):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(module(Xt), yt).backward()
            opt.step()

    tm = TorchModel(module_factory=factory, train_fn=train)
    r = run_audit(model=tm, data=df, recourse="scfe", **FAST)
    assert r.model.train_accuracy > 0.7
    assert r.arrays.counterfactuals["housing_cf"].isin(CATS["housing"]).all()


# ------------------------------------------------------------------ model files
def test_model_files(tmp_path):
    import joblib
    import skops.io as sio

    pipe = gb_pipeline(loans(300))
    sio.dump(pipe, tmp_path / "m.skops")
    with pytest.raises(InvalidInputError, match=r"--trust sklearn\.tree\._tree\.Tree"):
        load_model_file(tmp_path / "m.skops")
    loaded = load_model_file(tmp_path / "m.skops", trusted=["sklearn.tree._tree.Tree"])
    X = loans(300).drop(columns="decision")
    np.testing.assert_array_equal(loaded.predict_proba(X), pipe.predict_proba(X))
    joblib.dump(pipe, tmp_path / "m.joblib")
    with pytest.raises(InvalidInputError, match="--trust-pickle"):
        load_model_file(tmp_path / "m.joblib")
    assert type(load_model_file(tmp_path / "m.joblib", trust_pickle=True)) is Pipeline
    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(InvalidInputError, match="cannot tell the format of model file m.onnx"):
        load_model_file(tmp_path / "m.onnx")
    with pytest.raises(MissingFileError):
        load_model_file(tmp_path / "absent.skops")


# ------------------------------------------------------------------ bad input, each before any training
class _Unclonable(LogisticRegression):
    def __init__(self, C=1.0):
        self.C = C * 2  # modifies its parameter: sklearn.base.clone refuses it


class _FailsToFit(LogisticRegression):
    def fit(self, X, y):
        raise RuntimeError("boom")


def _bad_cases():
    df = loans()
    X = df.drop(columns="decision")
    three = np.where(df.income > 60_000, "gold", df.decision)
    no_mortgage = df[df.housing != "mortgage"]
    unclonable = _Unclonable()
    unclonable.classes_ = np.array(["approved", "denied"])
    return {
        "no predict_proba": (dict(model=LinearSVC().fit(X[["income", "age"]], df.decision)), "lacks predict_proba"),
        "three classes": (
            dict(model=Pipeline([("s", gb_pipeline(df).steps[0][1]), ("c", LogisticRegression())]).fit(X, three)),
            "exactly two classes",
        ),
        "positive label absent": (
            dict(model=gb_pipeline(df), positive_label="maybe"),
            "positive_label='maybe' is not one of",
        ),
        "unclonable": (dict(model=unclonable), "cannot be cloned"),
        "unknown column in data": (
            dict(model=gb_pipeline(df), data=df.assign(extra=np.arange(len(df)) % 7)),
            r"feature columns \['extra'\] that model",
        ),
        "column the data lacks": (
            dict(model=gb_pipeline(df), data=df.drop(columns="age")),
            r"reads the columns \['age'\]",
        ),
        "unseen category": (
            dict(model=gb_pipeline(no_mortgage)),
            r"column 'housing' holds values \['mortgage'\]",
        ),
        "unseen category, encoder raising": (
            dict(model=gb_pipeline(no_mortgage, handle_unknown="error")),
            r"column 'housing' holds values \['mortgage'\]",
        ),
        "unknown immutable column": (dict(model=gb_pipeline(df), immutable=("ghost",)), "immutable names unknown"),
        "unknown bounds column": (dict(model=gb_pipeline(df), bounds={"ghost": (0, 1)}), "bounds names unknown"),
        "bounds on a categorical": (dict(model=gb_pipeline(df), bounds={"housing": (0, 1)}), "is categorical"),
        "bare torch module": (dict(model=__import__("torch").nn.Linear(6, 1)), "wrap it as TorchModel"),
        "torch output shape": (
            dict(
                model=TorchModel(
                    module_factory=lambda: __import__("torch").nn.Linear(6, 3), train_fn=lambda m, X, y: None
                )
            ),
            r"returns shape \(2, 3\)",
        ),
        "torch without factory": (
            dict(model=TorchModel(__import__("torch").nn.Linear(6, 1))),
            "needs module_factory and train_fn",
        ),
        "positive label as a data param": (
            dict(model=gb_pipeline(df), positive_label=None, data_params={"positive_label": "approved"}),
            r"positive_label='approved' \(--positive-label\)",
        ),
        "correlation filter asked": (dict(model=gb_pipeline(df), corr_threshold=0.5), "corr_threshold=0.5 drops"),
    }


BAD = _bad_cases()


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_before_training(case, no_training):
    overrides, message = BAD[case]
    args = {"data": loans(), "recourse": "gs", **FAST, **overrides}
    with pytest.raises(RecoursePrivacyError, match=message):
        run_audit(**args)


def test_a_model_that_cannot_be_refit_says_so():
    df = loans()
    est = _FailsToFit()
    LogisticRegression.fit(est, df[["income", "age"]], df.decision)  # the user's instance is fitted; clones fail
    with pytest.raises(InvalidInputError, match="could not be refit.*RuntimeError: boom"):
        run_audit(model=est, data=df[["income", "age", "decision"]], recourse="gs", **FAST)


def test_missing_positive_label_names_the_values():
    with pytest.raises(InvalidInputError, match="'approved' or 'denied'"):
        run_audit(model=gb_pipeline(loans()), data=loans(), target="decision", recourse="gs")


def test_recourse_method_needing_a_linear_model_is_refused_before_training(no_training):
    with pytest.raises(RecoursePrivacyError, match="needs a linear model"):
        run_audit(model=gb_pipeline(loans()), data=loans(), recourse="linear", **{**FAST})


# ------------------------------------------------------------------ configuration
def test_config_with_objects_is_json_safe_and_hashed_by_content():
    df = loans(300)
    pipe = gb_pipeline(df)
    a = AuditConfig(model=pipe, data=df, **FAST)
    d = a.to_dict()
    assert d["model"] == "Pipeline(ColumnTransformer, GradientBoostingClassifier)"
    assert d["data"] == "DataFrame(300x5)"
    json.dumps(d)
    assert AuditConfig(model=gb_pipeline(df), data=df.copy(), **FAST).digest() == a.digest()
    changed = df.copy()
    changed.loc[0, "income"] += 1
    assert AuditConfig(model=pipe, data=changed, **FAST).digest() != a.digest()
    assert AuditConfig(model=gb_pipeline(df, n_estimators=21), data=df, **FAST).digest() != a.digest()
    assert AuditConfig().digest() == "44136fa355b3678a"  # the defaults' cache keys are unchanged


def test_counterfactuals_outside_the_datas_range_are_flagged_with_the_bounds_that_keep_them_in():
    """A column that is never negative in the data (debt), moved below zero by linear recourse: each such
    counterfactual says which column, the audit warns with the --bounds of the data's range; given, none is."""
    rng = np.random.default_rng(5)
    n = 900
    df = pd.DataFrame({"debt": rng.gamma(1.0, 1.0, n), "income": rng.normal(0.0, 1.0, n)})
    df["label"] = (df.income - 2.0 * df.debt + rng.normal(0, 0.5, n) > -1.0).astype(int)
    pipe = Pipeline([("s", StandardScaler()), ("lr", LogisticRegression())]).fit(df[["debt", "income"]], df.label)
    common = dict(data=df, target="label", n_members=300, attacks=("cfd",), recourse="linear")
    r = run_audit(model=pipe, **common)
    cf = r.arrays.counterfactuals
    below = cf["debt_cf"].to_numpy() < df.debt.min()
    assert below.sum() > 10
    np.testing.assert_array_equal(cf["outside_range"].str.contains("debt").to_numpy(), below)
    hi = f"{df.debt.max():g}"
    (warning,) = [w for w in r.warnings if "outside its range" in w]
    assert f"debt ({int(below.sum())})" in warning and f"--bounds debt={df.debt.min():g}:{hi}" in warning
    ranges = {c: (float(df[c].min()), float(df[c].max())) for c in ("debt", "income")}  # income is next to leave
    inside = run_audit(model=pipe, bounds=ranges, **common)
    assert (inside.arrays.counterfactuals["outside_range"] == "").all()
    assert not any("outside its range" in w for w in inside.warnings)
    assert inside.recourse.validity > 0.95
    assert "--actionable" in warning  # the one flag: every column in the members' range
    members_range = run_audit(model=pipe, actionable=True, **common)
    assert (members_range.arrays.counterfactuals["outside_range"] == "").all()


def test_bounds_and_immutable_feed_the_action_set():
    from recourse_privacy.audit.stages import load_data, prepare_game
    from recourse_privacy.audit.user_model import action_set_for

    df = loans()
    cfg = AuditConfig(
        model=gb_pipeline(df), data=df, recourse="gs", immutable=("age",), bounds={"income": (10_000, 90_000)}, **FAST
    ).validate()
    game = prepare_game(cfg, load_data(cfg))
    acts = action_set_for(cfg, game)
    names = list(game.preprocessor.feature_names_out_)
    assert acts.immutable[names.index("age")] and not acts.immutable[names.index("income")]
    lo, hi = acts.lower[names.index("income")], acts.upper[names.index("income")]
    j = names.index("income")
    z = np.zeros((2, len(names)))
    z[:, j] = [lo, hi]
    np.testing.assert_allclose(game.preprocessor.inverse_transform(z)["income"], [10_000, 90_000])


# ------------------------------------------------------------------ the command line
def _cli(*args: str):
    from typer.testing import CliRunner

    from recourse_privacy.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture
def analyst_files(tmp_path):
    import skops.io as sio

    df = loans()
    df.to_csv(tmp_path / "loans.csv", index=False)
    sio.dump(gb_pipeline(df), tmp_path / "model.skops")
    return tmp_path


def test_cli_analyst_journey_writes_counterfactuals(analyst_files):
    d = analyst_files
    common = ["--data", str(d / "loans.csv"), "--target", "decision", "--positive-label", "approved"]
    model = ["--model-file", str(d / "model.skops"), "--trust", "sklearn.tree._tree.Tree"]
    res = _cli(
        "audit",
        *common,
        *model,
        "--recourse",
        "gs",
        "--n-members",
        "200",
        "--attacks",
        "cfd,loss",
        "--immutable",
        "age",
        "--bounds",
        "income=0:200000",
        "--out",
        str(d / "out"),
    )
    assert res.exit_code == 0, res.output
    assert "Pipeline(ColumnTransformer, GradientBoostingClassifier)" in " ".join(res.output.split())
    cf = pd.read_csv(d / "out" / "counterfactuals.csv")
    assert cf["housing_cf"].isin(CATS["housing"]).all() and cf["purpose_cf"].isin(CATS["purpose"]).all()
    assert (cf["age_cf"] == cf["age"]).all()  # immutable
    assert "change " in (d / "out" / "report.html").read_text()
    res = _cli(
        "recourse", *common, *model, "--methods", "gs", "--n-train", "500", "--n-points", "30", "--out", str(d / "rq")
    )
    assert res.exit_code == 0, res.output
    assert pd.read_csv(d / "rq" / "counterfactuals.csv")["method"].eq("gs").all()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--data-param", "positive_label=approved"], "your own data takes positive_label='approved'"),
        (["--bounds", "income=5"], "--bounds expects COL=LO:HI"),
        (["--model-file", "model.onnx"], "no such model file"),
        (["--model-file", "MODEL", "--model", "mlp"], "either --model mlp or --model-file"),
        (["--model-file", "MODEL"], r"--trust sklearn\.tree\._tree\.Tree"),
        (
            [
                "--model-file",
                "MODEL",
                "--trust",
                "sklearn.tree._tree.Tree",
                "--positive-label",
                "approved",
                "--categorical",
                "ghost",
            ],
            "categorical names unknown columns",
        ),
    ],
)
def test_cli_bad_input_one_line(analyst_files, extra, message):
    d = analyst_files
    extra = [str(d / "model.skops") if e == "MODEL" else e for e in extra]
    for command in ("audit", "tradeoff"):
        res = _cli(command, "--data", str(d / "loans.csv"), "--target", "decision", *extra, "--out", str(d / "o"))
        assert res.exit_code == 2, res.output
        if command == "tradeoff" and "--trust" in extra:  # the model loads; DP retraining needs a registered one
            message = "tradeoff retrains the model under DP"
        assert re.search(message, " ".join(res.output.split())), res.output


def test_the_three_commands_share_the_data_and_model_options():
    for command in ("audit", "recourse", "tradeoff"):
        out = " ".join(_cli(command, "--help").output.split())
        for option in ("--data", "--positive-label", "--model-file", "--trust", "--categorical", "--bounds"):
            assert option in out, (command, option)
