"""Public domain metadata (data/domain.py): checked against the shipped files, schemas, encoded bounds, and
the private methods' defaults and error messages (each remedy in the CLI's own syntax)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from recourse_privacy.cli import app
from recourse_privacy.data import Preprocessor, load_dataset
from recourse_privacy.data.domain import DOMAINS, encoded_bounds, load_schema, schema_inputs
from recourse_privacy.errors import InvalidInputError

runner = CliRunner()


@pytest.mark.parametrize("name", ["adult", "heloc", "compas", "diabetes"])
def test_every_row_lies_in_the_documented_domain(name, shared_data):
    # a check of the metadata (typed in from the documentation), not a source of it
    ds = load_dataset(name, shared_data)
    domain = ds.domain
    assert domain is DOMAINS[name] and domain.source
    assert set(domain.names) == set(ds.feature_names)
    assert domain.violations(ds.X) == []
    assert set(domain.categorical) == set(ds.categorical)
    assert set(domain.immutable) == set(ds.immutable) and set(domain.increasing) == set(ds.increasing)
    assert domain.bounds and all(lo < hi for lo, hi in domain.bounds.values())


def test_synthetic_data_lie_in_the_generators_bounds():
    ds = load_dataset("synthetic", n_samples=3000, n_features=20, random_state=0)
    assert ds.domain.violations(ds.X) == [] and len(ds.domain.bounds) == 20
    assert ds.subset([0, 1]).domain is ds.domain


def test_violations_name_the_feature():
    X = pd.DataFrame({"age": [16.0, 40.0], "sex": ["Male", "X"]})
    from recourse_privacy.data.domain import Domain, FeatureDomain

    d = Domain((FeatureDomain("age", "integer", 17, 90), FeatureDomain("sex", "categorical", categories=("Male",))))
    out = d.violations(X)
    assert any(line.startswith("age:") for line in out) and any(line.startswith("sex:") for line in out)


def test_schema_round_trip_and_merge(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(
        "source: our manual\nfeatures:\n  a: {type: integer, bounds: [0, 10], direction: increase}\n"
        "  b: {lower: -1, upper: 1}\n  c: {type: categorical, categories: [u, v], immutable: true}\n"
    )
    d = load_schema(f)
    assert d.bounds == {"a": (0.0, 10.0), "b": (-1.0, 1.0)} and d.source == "our manual"
    assert d.immutable == ("c",) and d.increasing == ("a",) and d.categorical == ("c",)
    merged = schema_inputs(d, {"immutable": ("b",), "bounds": {"b": (-2.0, 2.0)}})
    assert merged["immutable"] == ("b", "c") and merged["bounds"]["b"] == (-2.0, 2.0)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("features: {a: {bounds: [3, 1]}}", "lower < upper"),
        ("features: {a: {type: text}}", "type must be one of"),
        ("features: {a: {direction: decrease}}", "direction must be one of"),
        ("features: {a: {colour: red}}", "unknown keys ['colour']"),
        ("feature: {}", "features:"),
        ("features: {a: {type: categorical, bounds: [0, 1]}}", "categories, not bounds"),
    ],
)
def test_schema_errors_name_file_and_feature(tmp_path, text, needle):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InvalidInputError, match="bad.yaml") as err:
        load_schema(f)
    assert needle in str(err.value)


def test_encoded_bounds_follow_the_preprocessing(shared_data):
    ds = load_dataset("adult", shared_data, n_samples=2000, random_state=0)
    pre = Preprocessor().fit(ds.X, ds)
    lo, hi, missing = encoded_bounds(pre, ds.domain.bounds)
    assert missing == [] and np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()
    X = pre.transform(ds.X)
    assert (X >= lo - 1e-9).all() and (X <= hi + 1e-9).all()
    j = pre.feature_names_out_.index("age")
    assert np.allclose(np.array([lo[j], hi[j]]) * pre.unit_scale_[j] + pre.unit_offset_[j], [17, 90])
    _, _, missing = encoded_bounds(pre, {})
    assert "age" in missing


# ------------------------------------------------------------------ defaults of the private methods
def test_private_method_defaults():
    from recourse_privacy.defenses.laplace import LaplaceRecourse
    from recourse_privacy.dpc.autoencoder import FMAutoencoder, default_encoder_layers

    assert LaplaceRecourse().epsilon == 1.0
    assert default_encoder_layers(13) == (12, 6) and default_encoder_layers(127) == (64, 32)
    assert default_encoder_layers(1) == (2, 1)
    ae = FMAutoencoder()
    ae.check_fits(13)
    assert ae.latent_dim == 6


def test_privrecourse_bounds_from_data_are_marked_not_dp():
    from recourse_privacy.privrecourse.core import PrivRecourse

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3)) * 5
    y = (X[:, 0] > 0).astype(int)
    art = PrivRecourse(n_clusters=10, bounds="data", random_state=0).publish(X, y)
    assert art.privacy["is_dp"] is False
    assert "NOT covered" in json.dumps(art.privacy["nodes"])


# ------------------------------------------------------------------ every remedy in the CLI's syntax
def _messages() -> dict[str, str]:
    from recourse_privacy.dpc.autoencoder import FMAutoencoder, PublicBounds
    from recourse_privacy.evaluation.quality import _make_method
    from recourse_privacy.privrecourse.scaling import check_unit_box

    out = {}
    for key, call in {
        "privrecourse out of bounds": lambda: check_unit_box(np.array([[2.0]]), method="privrecourse-mst"),
        "dpc out of bounds": lambda: PublicBounds.make(None, 1).to_unit(np.array([[2.0]])),
        "dpc latent too wide": lambda: FMAutoencoder(encoder_layers=(64, 32)).check_fits(13),
        "no public bounds": lambda: _make_method("dpc", {}, None, 0, ["income"]),
    }.items():
        with pytest.raises(InvalidInputError) as err:
            call()
        out[key] = str(err.value)
    return out


def test_error_remedies_are_written_as_cli_options():
    msgs = _messages()
    assert "--method-param privrecourse-mst.out_of_bounds=clip" in msgs["privrecourse out of bounds"]
    assert "--method-param 'dpc.encoder_layers=[12,6]'" in msgs["dpc latent too wide"]
    for key in ("privrecourse out of bounds", "dpc out of bounds", "no public bounds"):
        assert "--schema FILE" in msgs[key] and "--bounds COL=LO:HI" in msgs[key], key
        assert "--bounds-from-data" in msgs[key], key
    for key, msg in msgs.items():  # a Python keyword only ever follows its CLI form
        if "Python:" in msg:
            assert msg.index("--") < msg.index("Python:"), key


# ------------------------------------------------------------------ user data with a schema
@pytest.fixture
def user_table(tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame(
        {
            "income": rng.uniform(0, 100, n).round(1),
            "age": rng.integers(18, 80, n),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    df["ok"] = (df["income"] + rng.normal(0, 10, n) > 50).astype(int)
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    schema = tmp_path / "t.yaml"
    schema.write_text(
        "features:\n  income: {bounds: [0, 100]}\n  age: {type: integer, bounds: [18, 120], direction: increase}\n"
        "  sex: {type: categorical, categories: [F, M], immutable: true}\n"
    )
    return path, schema


def _recourse(tmp_path, path, *extra):
    return runner.invoke(
        app,
        [
            "recourse",
            "--data",
            str(path),
            "--target",
            "ok",
            "--model",
            "logistic",
            "--methods",
            "privrecourse,dpc,laplace",
        ]
        + ["--n-points", "10", "--n-train", "250", "--method-param", "privrecourse.n_clusters=20", "--out"]
        + [str(tmp_path / "out"), *extra],
    )


def test_user_data_with_a_schema_runs_every_private_method(tmp_path, user_table):
    path, schema = user_table
    res = _recourse(tmp_path, path, "--schema", str(schema))
    assert res.exit_code == 0, res.output
    table = json.loads((tmp_path / "out" / "quality.json").read_text())
    for name in ("privrecourse", "dpc", "laplace"):
        assert table[name]["violations"] == 0, name


def test_user_data_without_bounds_is_refused_with_the_remedy(tmp_path, user_table):
    path, _ = user_table
    res = _recourse(tmp_path, path)
    assert res.exit_code == 2 and "--schema FILE" in res.output and "internal error" not in res.output
    res = _recourse(tmp_path, path, "--bounds-from-data")
    assert res.exit_code == 0, res.output
    run = json.loads((tmp_path / "out" / "quality_run.json").read_text())
    assert "NOT covered" in run["public_bounds"]


def test_datasets_and_list_show_the_public_domain():
    res = runner.invoke(app, ["datasets", "adult"])
    assert res.exit_code == 0 and "integer [17, 90]; increase only" in res.output and "adult.names" in res.output
    res = runner.invoke(app, ["datasets"])
    assert res.exit_code == 0 and "public domain" in res.output
    res = runner.invoke(app, ["list", "dataset"])
    assert res.exit_code == 0 and "public" in res.output
    from recourse_privacy import catalog

    rows = {r.name: r.description for r in catalog.describe("dataset")}
    assert "[public domain: 6 bounded numeric, 7 categorical; immutable: race, sex" in rows["adult"]


@pytest.mark.parametrize("method", ["privrecourse", "dpc"])
def test_the_audit_runs_private_methods_with_their_defaults_on_public_bounds(shared_data, method):
    """The audit gives the private methods the dataset's documented bounds (encoded), never the rows' ranges."""
    from recourse_privacy import run_audit

    r = run_audit(
        dataset="adult", data_dir=str(shared_data), recourse=method, n_members=600, shadow_models=2,
        attacks=("cfd", "loss"), cache="off",
    )  # fmt: skip
    assert r.recourse.validity > 0.5 and r.n_members >= 10


def test_the_audit_refuses_privrecourse_without_public_bounds_before_any_model_trains(tmp_path):
    """A user's table whose numeric columns have no public bound: ``--recourse privrecourse`` (which scales with
    public bounds and refuses rows outside them) is refused in the data stage, naming the columns and the audit's
    own options; too many cluster nodes for the members likewise; with --bounds on every column it runs."""
    rng = np.random.default_rng(0)
    n = 900
    frame = pd.DataFrame({"income": rng.uniform(10, 200, n).round(2), "debt": rng.uniform(0, 50, n).round(2)})
    frame["approved"] = (frame.income - 2 * frame.debt + rng.normal(0, 20, n) > 60).astype(int)
    csv = tmp_path / "loans.csv"
    frame.to_csv(csv, index=False)
    base = ["audit", "--data", str(csv), "--target", "approved", "--recourse", "privrecourse", "--n-members", "300",
            "--attacks", "cfd", "--shadow-models", "4", "--cache-dir", "off"]  # fmt: skip
    res = CliRunner().invoke(app, [*base, "--recourse-param", "n_clusters=20", "--out", str(tmp_path / "a")])
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "2 numeric column(s) have none: income, debt" in text, text
    assert "--bounds COL=LO:HI" in text and "--recourse-param out_of_bounds=clip" in text
    assert not (tmp_path / "a" / "metrics.json").exists()
    res = CliRunner().invoke(
        app, [*base, "--bounds", "income=0:250", "--bounds", "debt=0:100", "--out", str(tmp_path / "b")]
    )
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "n_clusters=500 nodes, more than the 300 rows it learns from" in text, text
    ok = CliRunner().invoke(app, [*base, "--bounds", "income=0:250", "--bounds", "debt=0:100", "--recourse-param",
                                  "n_clusters=20", "--out", str(tmp_path / "c")])  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "c" / "metrics.json").read_text())["recourse"]["validity"] > 0.5
