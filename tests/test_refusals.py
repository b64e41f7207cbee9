"""Results that refuse what they cannot support (issue 21, item 3).

A verdict needs enough targets per side; detectable-effect figures never exceed 1; every recourse
method honours the action set or is refused by name; every JSON file written is strict JSON;
flags that do not apply, and empty lists, are errors naming the flag; ``results`` says what it skipped.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from recourse_privacy import strict_json
from recourse_privacy.audit import AuditConfig
from recourse_privacy.cli import app
from recourse_privacy.errors import IncompatibleError, InvalidInputError
from recourse_privacy.metrics import minimum_detectable_auc, minimum_targets_per_side
from recourse_privacy.models import make_model
from recourse_privacy.recourse import ActionSet
from recourse_privacy.recourse.registry import RECOURSE_METHODS, check_action_set_support, honours_action_set
from recourse_privacy.report.verdict import detectable_effects

TINY = ["--n-features", "5", "--n-members", "100", "--shadow-models", "2"]


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    """Outputs left at their defaults and the artifact cache go to this test's own directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RECOURSE_PRIVACY_CACHE", str(tmp_path / "artifact-cache"))


def _cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """A 300-row CSV with two informative numeric columns."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + X[:, 1] + 0.5 * rng.normal(size=300) > 0).astype(int)
    path = tmp_path_factory.mktemp("data") / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y}).to_csv(path, index=False)
    return path


# --------------------------------------------------------------------------- the fewest targets, detectable effects


def test_minimum_targets_per_side_is_the_first_n_with_a_detectable_auc_below_one():
    n = minimum_targets_per_side()
    assert n == 10
    assert math.isnan(minimum_detectable_auc(n - 1, n - 1)) and minimum_detectable_auc(n, n) < 1
    # the closed form of the docstring: n > (z^2 + sqrt(z^4 + 3 z^2)) / 3
    z = 1.959963984540054 + 1.6448536269514722
    assert n == math.floor((z * z + math.sqrt(z**4 + 3 * z * z)) / 3) + 1
    assert minimum_targets_per_side(power=0.8) < n


@pytest.mark.parametrize("n1,n0", [(1, 1), (2, 3), (1, 2), (5, 5), (9, 9)])
def test_detectable_auc_is_never_above_one(n1, n0):
    d = detectable_effects(n1, n0)
    assert math.isnan(d.auc) and "none is detectable" in d.text
    assert "2.302" not in d.text and "AUC of 1." not in d.text


def test_audit_with_too_few_targets_stops_before_the_work_naming_the_flag(table, tmp_path):
    r = _cli(
        "audit", "--data", table, "--target", "y", "--n-members", "3", "--shadow-models", "2", "--out", tmp_path / "o"
    )
    assert r.exit_code == 2 and "--n-members" in r.output and "at least 10" in r.output
    assert not (tmp_path / "o" / "metrics.json").exists()
    with pytest.raises(InvalidInputError, match="--n-nonmembers"):
        AuditConfig(n_nonmembers=4).validate()


def test_too_few_rejected_targets_stops_before_the_shadow_models(table):
    r = _cli("audit", "--data", table, "--target", "y", "--n-members", "12", "--shadow-models", "2")
    assert r.exit_code == 2, r.output
    assert "targets" in r.output and "--n-members" in r.output and "shadow models" not in r.output


# --------------------------------------------------------------------------- the action set


def _linear_problem():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = (X @ np.array([1.0, -1.0, 0.5, 0.2]) + 0.3 * rng.normal(size=300) > 0).astype(int)
    model = make_model("logistic", random_state=0).fit(X, y)
    return model, X[model.predict(X) == 0][:20]


def _box() -> ActionSet:
    """Feature 0 at most 0.3, feature 1 at least -0.4, feature 2 increase-only, feature 3 immutable."""
    return ActionSet(
        np.array([False, False, False, True]),
        np.array([False, False, True, False]),
        np.array([-np.inf, -0.4, -np.inf, -np.inf]),
        np.array([0.3, np.inf, np.inf, np.inf]),
    )


def _box_ok(a: ActionSet, X: np.ndarray, X_cf: np.ndarray) -> bool:
    """Within the range widened to hold the factual, increase-only respected, immutable unchanged."""
    lo, hi = np.minimum(a.lower, X), np.maximum(a.upper, X)
    return bool(
        (X_cf >= lo - 1e-9).all()
        and (X_cf <= hi + 1e-9).all()
        and (X_cf[:, a.increasing] >= X[:, a.increasing] - 1e-9).all()
        and np.allclose(X_cf[:, a.immutable], X[:, a.immutable])
    )


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_linear_recourse_is_the_box_constrained_optimum(norm):
    from scipy.optimize import linprog, minimize

    model, X = _linear_problem()
    a = _box()
    res = RECOURSE_METHODS.get("linear").obj(norm=norm, action_set=a).generate(model, X)
    assert _box_ok(a, X, res.counterfactuals)
    w, b = np.asarray(model.coef_, float).ravel(), float(np.asarray(model.intercept_).ravel()[0])
    for i in range(8):
        x, gap = X[i], 1e-6 - (w @ X[i] + b)
        lo = np.where(a.immutable, 0, np.where(a.increasing, 0, np.minimum(a.lower, x) - x))
        hi = np.where(a.immutable, 0, np.maximum(a.upper, x) - x)
        bounds = [(None if np.isinf(lo_) else lo_, None if np.isinf(hi_) else hi_) for lo_, hi_ in zip(lo, hi)]
        if norm == "l2":
            opt = minimize(
                lambda d: d @ d,
                np.zeros(4),
                constraints=[{"type": "ineq", "fun": lambda d, g=gap: w @ d - g}],
                bounds=bounds,
                method="SLSQP",
            )
            best = math.sqrt(opt.fun)
        else:  # delta = p - q, p, q >= 0
            opt = linprog(
                np.ones(8),
                A_ub=np.concatenate([-w, w])[None],
                b_ub=[-gap],
                bounds=[(0, h) for _, h in bounds] + [(0, None if lo_ is None else -lo_) for lo_, _ in bounds],
            )
            best = opt.fun
        assert res.distance(norm)[i] == pytest.approx(best, abs=1e-6)
    assert res.valid.all()


def test_linear_recourse_that_the_box_cannot_reach_is_invalid_not_moved_outside():
    model, X = _linear_problem()
    w = np.asarray(model.coef_, float).ravel()
    # every feature may only move against the model: helping directions closed by the ranges
    lower = np.where(w < 0, X.max(axis=0) + 1.0, -np.inf)  # widened to the factual: no decrease below it
    upper = np.where(w > 0, X.min(axis=0) - 1.0, np.inf)  # widened to the factual: no increase above it
    a = ActionSet(np.zeros(4, bool), np.zeros(4, bool), lower, upper)
    for norm in ("l1", "l2"):
        res = RECOURSE_METHODS.get("linear").obj(norm=norm, action_set=a).generate(model, X)
        assert not res.valid.any() and np.allclose(res.counterfactuals, X)


def _method_for(name: str, action_set: ActionSet):
    cls = RECOURSE_METHODS.get(name).obj
    params = {"action_set": action_set}
    if "random_state" in inspect.signature(cls).parameters:
        params["random_state"] = 0
    return cls(**params)


@pytest.mark.parametrize("name", [n for n in RECOURSE_METHODS if n in ("linear", "scfe", "gs", "cadex", "face")])
def test_recourse_methods_honour_the_action_set(name):
    """Every registered method: honours the box on a small problem (the cheap ones here) or is refused by name."""
    from recourse_privacy.recourse import fit_for

    model, X = _linear_problem()
    a = _box()
    rng = np.random.default_rng(2)
    X_fit = rng.normal(size=(200, 4))
    method = fit_for(_method_for(name, a), X_fit, model.predict(X_fit), model)
    res = method.generate(model, X[:6])
    assert _box_ok(a, X[:6], res.counterfactuals), name
    assert (res.valid == (model.predict(res.counterfactuals) == 1)).all()  # validity judged after the constraints


def test_every_registered_method_takes_the_action_set_or_is_refused_by_name():
    for name in RECOURSE_METHODS:
        if honours_action_set(name):
            check_action_set_support(name, ["--bounds"])  # no error
        else:
            with pytest.raises(IncompatibleError, match=f"'{name}' cannot honour --bounds"):
                check_action_set_support(name, ["--bounds"])


def test_private_methods_take_the_bounds_instead_of_being_refused(table):
    # DPC and Laplace Recourse take the action set (issue 23): neither is refused for --bounds. On a user's table
    # without public bounds for every feature DPC asks for them, in the CLI's syntax, before any work
    r = _cli("audit", "--data", table, "--target", "y", "--recourse", "dpc", "--bounds", "a=-5:-0.5", *TINY[2:])
    assert r.exit_code == 2 and "cannot honour" not in r.output and "--bounds-from-data" in r.output
    r = _cli(
        "audit", "--data", table, "--target", "y", "--defense", "laplace", "--epsilon", "1", "--bounds", "a=-5:-0.5",
        *TINY[2:],
    )  # fmt: skip
    assert r.exit_code == 0, r.output


def test_audit_linear_recourse_honours_user_bounds(table, tmp_path):
    out = tmp_path / "o"
    r = _cli("audit", "--data", table, "--target", "y", "--bounds", "a=-5:-0.5", "--out", out, *TINY[2:])
    assert r.exit_code == 0, r.output
    cf = pd.read_csv(out / "counterfactuals.csv")
    assert (cf["a_cf"] <= np.maximum(-0.5, cf["a"]) + 1e-6).all()  # the range, widened to hold the factual
    assert ((cf["a"] <= -0.5) & (cf["a_cf"] > -0.5 + 1e-6)).sum() == 0


# --------------------------------------------------------------------------- strict JSON


def _strict_files(root: Path) -> list[Path]:
    files = sorted(p for p in root.rglob("*.json") if ".cache" not in p.parts)
    for p in files:
        strict_json.loads(p.read_text())  # raises on NaN / Infinity
    return files


def test_strict_json_round_trip():
    d = {"a": float("nan"), "b": [1.0, float("inf")], "c": np.float32("nan"), "d": {"e": np.array([np.nan, 2.0])}}
    text = strict_json.dumps(d)
    assert ": NaN" not in text and ": Infinity" not in text and "null]" in text
    back = strict_json.loads(text)
    assert back["a"] is None and "NaN" in back["a_reason"] and back["b"][1] is None and "b_reason" in back
    r = strict_json.restore(back)
    assert math.isnan(r["a"]) and math.isnan(r["d"]["e"][0]) and "a_reason" not in r
    with pytest.raises(ValueError):
        strict_json.loads('{"a": NaN}')
    assert strict_json.restore({"x": "y", "x_reason": "kept"}) == {"x": "y", "x_reason": "kept"}


def test_every_json_file_written_is_strict(tmp_path, table):
    """The tiny commands: audit (2 shadow models: NaN shadow AUCs before), recourse, and a results store."""
    r = _cli("audit", *TINY, "--out", tmp_path / "audit")
    assert r.exit_code == 0, r.output
    assert "records no paired comparison" not in r.output or "schema 1" not in r.output
    r = _cli(
        "recourse", "--data", table, "--target", "y", "--methods", "linear", "--n-train", "150", "--n-points", "20",
        "--out", tmp_path / "rec",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    files = _strict_files(tmp_path)
    assert {"metrics.json", "quality.json", "quality_run.json"} <= {p.name for p in files}
    metrics = strict_json.loads((tmp_path / "audit" / "metrics.json").read_text())
    from recourse_privacy.audit import AuditResult

    AuditResult.from_dict(metrics)  # the strict file reads back


def test_laplace_audit_does_not_claim_schema_1(tmp_path):
    r = _cli("audit", *TINY, "--defense", "laplace", "--epsilon", "1")
    assert r.exit_code == 0, r.output
    assert "schema 1" not in r.output


# --------------------------------------------------------------------------- flags that do not apply, empty lists


@pytest.mark.parametrize(
    "args,flag",
    [
        (["audit", "--dataset", "adult", "--data", "{t}", "--target", "y"], "--dataset"),
        (["audit", "--n-features", "5", "--data", "{t}", "--target", "y"], "--n-features"),
        (["audit", "--dataset", "breast_cancer", "--n-features", "5"], "--n-features"),
        (["recourse", "--dataset", "adult", "--data", "{t}", "--target", "y"], "--dataset"),
        (["tradeoff", "--epsilons", "", *TINY], "--epsilons"),
        (["reproduce", "pawelczyk2023-fig1", "--seeds", ""], "--seeds"),
        (["reproduce", "pawelczyk2023-fig1", "--seeds", " , "], "--seeds"),
        (["audit", "--attacks", ",", *TINY], "--attacks"),
        (["recourse", "--methods", ""], "--methods"),
        (["audit", "--data", "{t}", "--target", "y", "--immutable", ""], "--immutable"),
    ],
)
def test_flags_that_do_not_apply_and_empty_lists_are_usage_errors(args, flag, table, tmp_path):
    r = _cli(*[a.replace("{t}", str(table)) for a in args], "--out", tmp_path / "x")
    assert r.exit_code == 2, r.output
    assert flag in r.output.split("Error")[-1]
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_recourse_with_data_records_the_users_file(table, tmp_path):
    r = _cli(
        "recourse", "--data", table, "--target", "y", "--methods", "linear", "--n-train", "150", "--n-points", "20",
        "--out", tmp_path,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    run = json.loads((tmp_path / "quality_run.json").read_text())
    assert run["dataset"] == str(table) and "adult" not in r.output


# --------------------------------------------------------------------------- results says what it skipped


def test_results_names_skipped_records_and_short_seed_counts(tmp_path):
    from recourse_privacy.experiments.results import result_tables
    from recourse_privacy.experiments.store import ResultStore

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: tiny\nfixed: {dataset: synthetic, n_features: 5, n_members: 100, shadow_models: 2, "
        "attacks: [cfd, loss]}\nseeds: [0, 1]\nmetrics: [auc]\n"
    )
    out = tmp_path / "store"
    r = _cli("run", spec, "--out", out, "--n-jobs", "1")
    assert r.exit_code == 0, r.output
    files = _strict_files(out)
    assert len(list((out / "cells").glob("*.json"))) == 2 and files
    victim = sorted((out / "cells").glob("*.json"))[0]
    victim.write_text(victim.read_text()[:200])  # truncated
    assert ResultStore(out).skipped() == [(victim.name, "does not parse (truncated or not JSON)")]
    tables = result_tables(out)
    assert any(victim.name in w and "truncated" in w for w in tables.warnings)
    assert any("means over 1 of the spec's 2 seeds" in w for w in tables.warnings)
    r = _cli("results", out)
    assert r.exit_code == 0 and victim.name in r.output and "1 of the spec's 2 seeds" in r.output
