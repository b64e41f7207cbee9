"""Tests of recourse_privacy.data: loaders, downloads, synthetic data, preprocessing, pools."""

from __future__ import annotations

import io
import shutil
import urllib.error
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recourse_privacy.data import (
    DATASET_DESCRIPTIONS,
    DATASET_SOURCES,
    DATASETS,
    REAL_DATASETS,
    ChecksumError,
    Dataset,
    Pools,
    Preprocessor,
    load_dataset,
    load_tabular,
    make_synthetic,
    register_dataset,
    split_pools,
    synthetic_centers,
)
from recourse_privacy.data import files as ds_module
from recourse_privacy.data.registry import DATASETS as REGISTRY
from recourse_privacy.errors import InvalidInputError, UnknownNameError

# ----------------------------------------------------------------------------- real data

EXPECTED = {  # rows, positives, raw features (data README)
    "adult": (48_832, 11_687, 13),
    "heloc": (9_871, 4_735, 21),
    "compas": (6_172, 5_028, 7),
    "diabetes": (101_766, 11_357, 39),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_real_loader_counts(shared_data: Path, name: str) -> None:
    ds = load_dataset(name, shared_data, download=False)
    rows, positives, n_features = EXPECTED[name]
    assert ds.name == name
    assert ds.n_rows == rows and ds.X.shape == (rows, n_features)
    assert ds.y.dtype == np.int64 and set(np.unique(ds.y)) == {0, 1}
    assert int(ds.y.sum()) == positives
    assert not ds.X.isna().any().any()
    assert ds.target not in ds.X.columns
    for col in ds.X.columns:
        if col in ds.categorical:
            assert ds.X[col].dtype == object
            assert all(isinstance(v, str) for v in ds.X[col].iloc[:50])
        else:
            assert ds.X[col].dtype == np.float64
    assert set(ds.immutable) <= set(ds.feature_names)
    assert set(ds.increasing) <= set(ds.feature_names)


def test_real_loader_constraints(shared_data: Path) -> None:
    adult = load_dataset("adult", shared_data)
    assert adult.immutable == ("sex", "race")
    assert adult.increasing == ("age", "education-num")
    assert set(adult.categorical) == {
        "workclass",
        "marital-status",
        "occupation",
        "relationship",
        "race",
        "sex",
        "native-country",
    }
    heloc = load_dataset("heloc", shared_data)
    assert heloc.categorical == heloc.immutable == heloc.increasing == ()
    compas = load_dataset("compas", shared_data)
    assert set(compas.categorical) == {"c_charge_degree", "race", "sex"}
    assert compas.immutable == ("sex", "race") and compas.increasing == ("age",)


def test_diabetes_encoding_has_127_features(shared_data: Path) -> None:
    ds = load_dataset("diabetes", shared_data)
    assert ds.immutable == ("gender", "race", "age")
    # 'None' is a level of the lab results, '?' one of race; discharge ids are strings
    assert "None" in set(ds.X["max_glu_serum"]) and "?" in set(ds.X["race"])
    assert ds.X["discharge_disposition_id"].map(type).eq(str).all()
    assert len(ds.categorical) == 31 and ds.X.shape[1] - len(ds.categorical) == 8
    pre = Preprocessor(corr_threshold=None).fit(ds.X, ds)
    # 8 numeric + gender 3 + race 6 + age 10 + discharge 26 + glu 4 + A1C 4 + medications
    # 64 (13 four-level, tolazamide 3, 7 two-level -> 1, examide/citoglipton one level each,
    # constant columns kept because the correlation filter is off) + change 1 + diabetesMed 1
    assert pre.n_features_out_ == 127
    assert pre.transform(ds.X.iloc[:1000]).shape == (1000, 127)
    assert pre.immutable_mask_.sum() == 3 + 6 + 10


# ----------------------------------------------------------------------------- download


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """An empty data dir and an empty user cache; the env var unset."""
    cache_home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.delenv("RECOURSE_PRIVACY_DATA", raising=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    return {"empty": empty, "cache": cache_home / "recourse-privacy"}


def test_missing_file_without_download(isolated: dict[str, Path]) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("compas", isolated["empty"], download=False)
    msg = str(info.value)
    assert "compas.csv" in msg and str(isolated["empty"]) in msg
    assert "RECOURSE_PRIVACY_DATA" in msg
    assert ds_module.source_url("compas.csv") in msg
    assert "raw.githubusercontent.com/carla-recourse/cf-data/2d5667709" in msg


def test_failed_download_is_file_not_found(isolated: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(url: str, timeout: float | None = None) -> None:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(ds_module, "_urlopen", offline)
    with pytest.raises(FileNotFoundError, match="RECOURSE_PRIVACY_DATA") as info:
        load_dataset("heloc", isolated["empty"])
    assert ds_module.source_url("heloc.csv") in str(info.value)
    assert not isolated["cache"].exists() or not any(isolated["cache"].iterdir())


def test_download_with_fake_opener_caches_good_file(
    shared_data: Path, isolated: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def fake_urlopen(url: str, timeout: float | None = None) -> io.BufferedReader:
        calls.append(url)
        return open(shared_data / "compas.csv", "rb")

    monkeypatch.setattr(ds_module, "_urlopen", fake_urlopen)
    ds = load_dataset("compas", isolated["empty"])
    assert calls == [ds_module.source_url("compas.csv")]
    assert ds.n_rows == 6_172
    assert sorted(p.name for p in isolated["cache"].iterdir()) == ["compas.csv"]
    # second load comes from the cache: no new request
    assert load_dataset("compas", isolated["empty"]).n_rows == 6_172
    assert len(calls) == 1


@pytest.fixture
def serve_from() -> Iterator[Callable[[str, str], None]]:
    """``serve_from(name, url)``: dataset ``name`` declared with another ``url`` (SHA-256 and zip member kept), restored after."""
    saved: list = []

    def redeclare(name: str, url: str) -> None:
        entry = REGISTRY.get(name)
        saved.append(entry)
        REGISTRY.add(name, entry.obj, description=entry.description, replace=True, **{**entry.meta, "url": url})

    yield redeclare
    for entry in saved:
        REGISTRY.add(entry.name, entry.obj, description=entry.description, replace=True, **entry.meta)


def test_download_of_zip_member_by_file_url(
    shared_data: Path, isolated: dict[str, Path], serve_from: Callable[[str, str], None], tmp_path: Path
) -> None:
    archive = tmp_path / "uci.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.write(shared_data / "diabetic_data.csv", "dataset_diabetes/diabetic_data.csv")
        zf.writestr("dataset_diabetes/IDs_mapping.csv", "x\n")
    serve_from("diabetes", archive.as_uri())
    ds = load_dataset("diabetes", isolated["empty"])
    assert ds.n_rows == 101_766
    assert sorted(p.name for p in isolated["cache"].iterdir()) == ["diabetic_data.csv"]


def test_corrupted_download_raises_and_leaves_nothing(
    shared_data: Path, isolated: dict[str, Path], serve_from: Callable[[str, str], None], tmp_path: Path
) -> None:
    bad = tmp_path / "served" / "compas.csv"
    bad.parent.mkdir()
    data = bytearray((shared_data / "compas.csv").read_bytes())
    data[-2] = ord("0") if data[-2] != ord("0") else ord("1")  # flip one label
    bad.write_bytes(bytes(data))
    serve_from("compas", bad.as_uri())
    with pytest.raises(ChecksumError, match="checksum mismatch for compas.csv"):
        load_dataset("compas", isolated["empty"])
    assert list(isolated["cache"].iterdir()) == []
    assert list(isolated["empty"].iterdir()) == []


def test_data_dir_resolution(
    shared_data: Path, isolated: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_network(url: str, timeout: float | None = None) -> None:
        raise AssertionError("must not download")

    monkeypatch.setattr(ds_module, "_urlopen", no_network)
    monkeypatch.setenv("RECOURSE_PRIVACY_DATA", str(shared_data))
    assert load_dataset("compas").n_rows == 6_172  # from the env var
    # an explicit data_dir wins over the env var
    with pytest.raises(FileNotFoundError):
        load_dataset("compas", isolated["empty"], download=False)
    # without data_dir and env var: the cache
    monkeypatch.delenv("RECOURSE_PRIVACY_DATA")
    isolated["cache"].mkdir(parents=True)
    shutil.copy(shared_data / "heloc.csv", isolated["cache"] / "heloc.csv")
    assert load_dataset("heloc").n_rows == 9_871
    # a data_dir without the file falls back to the cache
    assert load_dataset("heloc", isolated["empty"], download=False).n_rows == 9_871


# ----------------------------------------------------------------------------- registry


def test_unknown_dataset_name_lists_choices() -> None:
    with pytest.raises(ValueError, match="unknown dataset 'mnist'") as info:
        load_dataset("mnist")
    for name in DATASETS:
        assert name in str(info.value)


def test_sklearn_datasets_and_options() -> None:
    bc = load_dataset("breast_cancer")
    assert bc.X.shape == (569, 30) and int(bc.y.sum()) == 357  # 1 = benign
    digits = load_dataset("digits")
    assert digits.X.shape == (1797, 64) and int(digits.y.sum()) == 182  # digit 1 vs rest
    three = load_dataset("digits", positive=3)
    assert int(three.y.sum()) == 183
    pair = load_dataset("digits", digits=(3, 8))
    assert pair.n_rows == 183 + 174 and int(pair.y.sum()) == 183
    with pytest.raises(InvalidInputError, match="colour"):
        load_dataset("digits", colour=1)
    with pytest.raises(ValueError, match="n_features"):
        load_dataset("breast_cancer", n_features=3)


def test_n_samples_subsample_is_seeded() -> None:
    a = load_dataset("breast_cancer", n_samples=100, random_state=3)
    b = load_dataset("breast_cancer", n_samples=100, random_state=3)
    c = load_dataset("breast_cancer", n_samples=100, random_state=4)
    assert a.n_rows == 100
    pd.testing.assert_frame_equal(a.X, b.X)
    assert not a.X.equals(c.X)
    with pytest.raises(ValueError, match="exceeds"):
        load_dataset("breast_cancer", n_samples=10_000)


BUILTINS = {  # name: (source, file)
    "adult": ("file", "adult.csv"),
    "heloc": ("file", "heloc.csv"),
    "compas": ("file", "compas.csv"),
    "diabetes": ("file", "diabetic_data.csv"),
    "synthetic": ("generated", None),
    "breast_cancer": ("scikit-learn", None),
    "digits": ("scikit-learn", None),
}


def test_registry_lists_builtins_in_order() -> None:
    assert DATASETS is REGISTRY
    assert tuple(DATASETS)[:7] == tuple(BUILTINS)
    assert len(DATASETS) >= 7 and all(name in DATASETS for name in BUILTINS)
    assert ", ".join(DATASETS).startswith("adult, heloc, compas, diabetes, synthetic, breast_cancer, digits")
    for entry in DATASETS.entries()[:7]:
        assert entry.description and DATASET_DESCRIPTIONS[entry.name] == entry.description
        assert (entry.meta["source"], entry.meta["file"]) == BUILTINS[entry.name]
        assert entry.meta["source"] in DATASET_SOURCES and callable(entry.obj)
    assert DATASETS.get("digits").meta["options"] == ("positive", "digits")
    # purchase100 / texas100 (data/purchase_texas.py) are local-file datasets registered after the built-ins
    assert tuple(REAL_DATASETS) == ("adult", "heloc", "compas", "diabetes", "purchase100", "texas100")
    assert REAL_DATASETS == ("adult", "heloc", "compas", "diabetes", "purchase100", "texas100")
    assert list(DATASET_DESCRIPTIONS)[:7] == list(BUILTINS)


def test_unknown_dataset_is_unknown_name_error() -> None:
    with pytest.raises(UnknownNameError, match="unknown dataset 'Iris'") as info:
        load_dataset("Iris")
    assert "choose one of adult, heloc, compas, diabetes, synthetic, breast_cancer, digits" in str(info.value)
    with pytest.raises(InvalidInputError, match="must be a string"):
        load_dataset(3)  # type: ignore[arg-type]
    # upper case and '-' still reach the registered name
    assert load_dataset("Breast-Cancer", n_samples=5, random_state=0).name == "breast_cancer"


def test_unaccepted_option_names_it_and_the_accepted_ones() -> None:
    with pytest.raises(InvalidInputError) as info:
        load_dataset("synthetic", n_samples=10, n_features=2, seed=3)
    msg = str(info.value)
    assert "['seed']" in msg and "'synthetic'" in msg and "accepts class_sep, flip_y" in msg
    with pytest.raises(InvalidInputError, match=r"\['colour'\].*'digits'; it accepts positive, digits"):
        load_dataset("digits", colour=1)
    with pytest.raises(InvalidInputError, match=r"\['positive'\].*'breast_cancer'; it accepts none"):
        load_dataset("breast_cancer", positive=1)
    with pytest.raises(InvalidInputError, match="n_features applies only to .*synthetic.*'digits'"):
        load_dataset("digits", n_features=4)
    with pytest.raises(InvalidInputError, match="n_samples"):
        load_dataset("digits", n_samples=0)


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names a test registers; removed from the registry afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if name in REGISTRY:
            REGISTRY.remove(name)


def test_third_party_dataset_registers_and_loads(registered: list[str]) -> None:
    calls: list[dict] = []

    @register_dataset("mydata", description="a plugin's toy data", source="generated", options=("scale",))
    def load_mydata(scale: float = 1.0) -> Dataset:
        calls.append({"scale": scale})
        X = pd.DataFrame({"a": np.arange(10.0) * scale, "b": np.ones(10)})
        return Dataset("mydata", X, np.arange(10) % 2, "label", immutable=("b",))

    registered.append("mydata")
    assert "mydata" in DATASETS and list(DATASETS)[-1] == "mydata"
    assert DATASET_DESCRIPTIONS["mydata"] == "a plugin's toy data"
    assert DATASETS.get("mydata").meta["source"] == "generated" and "mydata" not in REAL_DATASETS
    ds = load_dataset("mydata")
    assert ds.n_rows == 10 and calls == [{"scale": 1.0}]
    assert load_dataset("mydata", scale=2.0).X["a"].iloc[1] == 2.0
    # generic subsampling applies to a loader that does not size its data itself
    a = load_dataset("mydata", n_samples=4, random_state=0)
    assert a.n_rows == 4 and np.array_equal(a.X, load_dataset("mydata", n_samples=4, random_state=0).X)
    with pytest.raises(InvalidInputError, match=r"\['colour'\].*it accepts scale"):
        load_dataset("mydata", colour=1)
    with pytest.raises(InvalidInputError, match="n_features"):
        load_dataset("mydata", n_features=3)


def test_third_party_file_dataset(registered: list[str], tmp_path: Path) -> None:
    @register_dataset("my-table", description="a local CSV", source="file", file="my_table.csv")
    def load_table(path: Path) -> Dataset:
        df = pd.read_csv(path)
        return Dataset("my-table", df.drop(columns="y"), df["y"].to_numpy(), "y")

    registered.append("my-table")
    assert "my-table" in REAL_DATASETS
    with pytest.raises(FileNotFoundError, match="my_table.csv not found"):
        load_dataset("my-table", tmp_path)
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0, 1, 1]}).to_csv(tmp_path / "my_table.csv", index=False)
    assert load_dataset("my-table", tmp_path).n_rows == 3


def test_register_dataset_checks_its_declaration(registered: list[str]) -> None:
    def loader() -> Dataset:  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(InvalidInputError, match="source must be one of file, generated, scikit-learn"):
        register_dataset("bad", description="x", source="web")(loader)
    with pytest.raises(InvalidInputError, match="needs file="):
        register_dataset("bad", description="x", source="file")(loader)
    with pytest.raises(InvalidInputError, match="applies only to source='file'"):
        register_dataset("bad", description="x", source="generated", file="a.csv")(loader)
    with pytest.raises(InvalidInputError, match="not the string"):
        register_dataset("bad", description="x", source="generated", options="scale")(loader)
    with pytest.raises(InvalidInputError, match="already registered"):
        register_dataset("adult", description="x", source="generated")(loader)
    assert "bad" not in DATASETS

    @register_dataset("broken", description="returns no Dataset", source="generated")
    def broken() -> Dataset:
        return pd.DataFrame()  # type: ignore[return-value]

    registered.append("broken")
    with pytest.raises(InvalidInputError, match="returned DataFrame, not a Dataset"):
        load_dataset("broken")


def test_a_dataset_declares_its_source_and_checksum_in_its_decorator(registered: list[str]) -> None:
    def loader(path: Path) -> Dataset:  # pragma: no cover - never called
        raise AssertionError

    sha = "ab" * 32
    with pytest.raises(InvalidInputError, match="url= needs sha256="):
        register_dataset("bad", description="x", source="file", file="a.csv", url="https://x/a.csv")(loader)
    with pytest.raises(InvalidInputError, match="member= names a file inside the archive"):
        register_dataset("bad", description="x", source="file", file="a.csv", member="a.csv", sha256=sha)(loader)
    with pytest.raises(InvalidInputError, match="sha256 must be 64 lower-case hex digits"):
        register_dataset("bad", description="x", source="file", file="a.csv", url="https://x/a", sha256="AB")(loader)
    with pytest.raises(InvalidInputError, match="sha256=.*applies only to source='file'"):
        register_dataset("bad", description="x", source="generated", sha256=sha)(loader)
    assert "bad" not in DATASETS
    register_dataset("labelled", description="toy", label="good", source="file", file="t.csv", sha256=sha)(loader)
    registered.append("labelled")
    entry = DATASETS.get("labelled")
    assert entry.description == "toy; 1 = good" and entry.meta["label"] == "good"
    assert entry.meta["sha256"] == sha and entry.meta["url"] is None


def test_builtin_files_are_declared_once_with_url_checksum_and_domain(shared_data: Path) -> None:
    """Every public file is declared by its dataset (url + SHA-256), and the shipped copy matches it."""
    from recourse_privacy.data.domain import DOMAINS

    public = [e for e in DATASETS.entries() if e.meta.get("url")]
    assert [e.name for e in public] == ["adult", "heloc", "compas", "diabetes"]
    for entry in public:
        assert ds_module.source_url(entry.meta["file"]) == entry.meta["url"]
        assert ds_module.verify_file(shared_data / entry.meta["file"]) == shared_data / entry.meta["file"]
        assert entry.meta["public_domain"] is DOMAINS[entry.name]
        assert entry.meta["domain"] == DOMAINS[entry.name].summary()
        assert load_dataset(entry.name, shared_data, n_samples=3, random_state=0).domain is DOMAINS[entry.name]
    assert DATASETS.get("diabetes").meta["member"] == "diabetic_data.csv"
    with pytest.raises(InvalidInputError, match="no public source known for 'dataset_purchase'"):
        ds_module.source_url("dataset_purchase")


def test_a_new_dataset_is_one_declaration_shown_by_list_and_played_by_an_audit(registered: list[str]) -> None:
    """The contract of 'a new dataset is one file': one decorated loader, then `list`, `datasets` and a tiny audit see it."""
    from typer.testing import CliRunner

    from recourse_privacy.audit import AuditConfig, run_audit
    from recourse_privacy.cli import app

    @register_dataset(
        "throwaway", description="two Gaussian blobs for a contract test", label="right blob", source="generated"
    )
    def load_throwaway() -> Dataset:
        rng = np.random.default_rng(0)
        y = np.arange(400) % 2
        X = pd.DataFrame(rng.normal(0.0, 1.0, (400, 3)) + 1.5 * y[:, None], columns=["a", "b", "c"])
        return Dataset("throwaway", X, y, "blob")

    registered.append("throwaway")
    runner = CliRunner(env={"COLUMNS": "400"})
    listed = runner.invoke(app, ["list", "dataset"], terminal_width=400)
    assert listed.exit_code == 0 and "throwaway" in listed.output
    shown = runner.invoke(app, ["datasets"], terminal_width=400)
    assert shown.exit_code == 0 and "two Gaussian blobs for a contract test; 1 = right blob" in shown.output
    cfg = AuditConfig(dataset="throwaway", n_members=60, attacks=("cfd",), seed=0)
    result = run_audit(cfg, None)
    assert result.data.dataset == "throwaway" and result.data.n_rows == 400
    assert result.attacks["cfd"].n_members > 0 and 0.0 <= result.attacks["cfd"].auc <= 1.0


def test_dataset_validates_itself() -> None:
    X = pd.DataFrame({"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="0/1"):
        Dataset("t", X, np.array([0, 2]), "y")
    with pytest.raises(ValueError, match="'b'"):
        Dataset("t", X, np.array([0, 1]), "y", immutable=("b",))
    ds = Dataset("t", X, [0, 1], "y")
    assert ds.y.dtype == np.int64 and ds.feature_names == ("a",)


# ----------------------------------------------------------------------------- synthetic


def test_synthetic_shape_balance_and_moments() -> None:
    n, d, seed = 4001, 20, 11
    ds = make_synthetic(n, d, class_sep=1.5, random_state=seed)
    assert ds.X.shape == (n, d) and list(ds.X.columns) == [f"x{j}" for j in range(d)]
    assert (ds.X.dtypes == np.float64).all()
    assert np.bincount(ds.y).tolist() == [n // 2, n - n // 2]
    assert 0 < ds.y[: n // 2].sum() < n // 2  # shuffled, not sorted by class
    centers = synthetic_centers(d, class_sep=1.5, random_state=seed)
    assert set(np.unique(np.abs(centers))) == {1.5}
    assert (centers[0] != centers[1]).any()
    X = ds.X.to_numpy()
    for k in (0, 1):
        rows = X[ds.y == k]
        m = len(rows)
        # std error of a mean of m unit-variance samples is 1/sqrt(m)
        assert np.abs(rows.mean(axis=0) - centers[k]).max() < 6 / np.sqrt(m)
        # std error of a sample variance of m normal samples is sqrt(2/m)
        assert np.abs(rows.var(axis=0, ddof=1) - 1).max() < 6 * np.sqrt(2 / m)


def test_synthetic_seeding() -> None:
    a = make_synthetic(200, 5, random_state=1)
    b = make_synthetic(200, 5, random_state=1)
    c = make_synthetic(200, 5, random_state=2)
    pd.testing.assert_frame_equal(a.X, b.X)
    assert np.array_equal(a.y, b.y)
    assert not np.allclose(a.X.to_numpy(), c.X.to_numpy())
    g1 = make_synthetic(200, 5, random_state=np.random.default_rng(9))
    g2 = make_synthetic(200, 5, random_state=np.random.default_rng(9))
    pd.testing.assert_frame_equal(g1.X, g2.X)
    one = make_synthetic(10, 1, random_state=0)  # d = 1: the two vertices still differ
    assert one.X.shape == (10, 1)


def test_synthetic_flip_y_and_load_dataset_defaults() -> None:
    clean = make_synthetic(4000, 3, random_state=5)
    noisy = make_synthetic(4000, 3, flip_y=0.2, random_state=5)
    pd.testing.assert_frame_equal(clean.X, noisy.X)
    # a fraction 0.2 gets a random label: about 0.1 change (binomial std 0.005)
    assert abs(np.mean(clean.y != noisy.y) - 0.1) < 0.03
    ds = load_dataset("synthetic", random_state=0)
    assert ds.X.shape == (15_000, 100)
    small = load_dataset("synthetic", n_samples=50, n_features=7, random_state=0, class_sep=2.0)
    assert small.X.shape == (50, 7)
    with pytest.raises(ValueError, match="n_features"):
        make_synthetic(10, 0)


# ----------------------------------------------------------------------------- preprocessing


def _frame(rng: np.random.Generator, n: int, shift: float = 0.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "a": rng.normal(3.0 + shift, 2.0, n),
            "b": rng.exponential(1.0, n) + shift,
            "colour": rng.choice(["red", "green", "blue"], n).astype(object),
            "sex": rng.choice(["F", "M"], n).astype(object),
        }
    )


def test_preprocessor_uses_fit_statistics_only() -> None:
    rng = np.random.default_rng(0)
    train, other = _frame(rng, 500), _frame(rng, 300, shift=5.0)
    pre = Preprocessor(corr_threshold=None).fit(train)
    Z_train, Z_other = pre.transform(train), pre.transform(other)
    assert Z_train.dtype == np.float64 and Z_train.shape == (500, pre.n_features_out_)
    assert np.allclose(Z_train.mean(axis=0), 0) and np.allclose(Z_train.std(axis=0), 1)
    i = pre.feature_names_out_.index("a")
    expected = (other["a"] - train["a"].mean()) / train["a"].std(ddof=0)
    assert np.allclose(Z_other[:, i], expected)
    assert Z_other[:, i].mean() > 2  # not re-centred on the other frame
    assert pre.feature_names_out_ == ["a", "b", "colour=blue", "colour=green", "colour=red", "sex=M"]


def test_preprocessor_drops_correlated_and_constant() -> None:
    rng = np.random.default_rng(1)
    X = _frame(rng, 400)
    X["a_copy"] = 2 * X["a"] + 1 + rng.normal(0, 1e-3, len(X))
    X["const"] = 7.0
    pre = Preprocessor().fit(X)
    assert "a_copy" in pre.dropped_correlated_ and "a" in pre.feature_names_out_
    assert pre.dropped_constant_ == ["const"] and "const" in pre.dropped_correlated_
    assert "a_copy" not in pre.feature_names_out_ and pre.transform(X).shape[1] == pre.n_features_out_
    keep_all = Preprocessor(corr_threshold=None).fit(X)
    assert {"a_copy", "const"} <= set(keep_all.feature_names_out_)
    assert keep_all.dropped_correlated_ == []


def test_preprocessor_normalize_rows_and_bounds() -> None:
    rng = np.random.default_rng(2)
    X = _frame(rng, 300)
    Z = Preprocessor(normalize_rows=True).fit_transform(X)
    assert np.allclose(np.linalg.norm(Z, axis=1), 1)
    mm = Preprocessor(scaling="minmax").fit(X)
    assert np.allclose(mm.lower_, 0) and np.allclose(mm.upper_, 1)
    st = Preprocessor().fit(X)
    Zs = st.transform(X)
    j = st.feature_names_out_.index("colour=red")
    p = (X["colour"] == "red").mean()
    s = np.sqrt(p * (1 - p))
    assert np.isclose(st.lower_[j], -p / s) and np.isclose(st.upper_[j], (1 - p) / s)
    assert np.allclose(st.lower_[:2], Zs[:, :2].min(axis=0))
    assert np.allclose(st.upper_[:2], Zs[:, :2].max(axis=0))


def test_preprocessor_masks_on_adult(shared_data: Path) -> None:
    adult = load_dataset("adult", shared_data, n_samples=3000, random_state=0)
    pre = Preprocessor().fit(adult.X, adult)
    marked = [n for n, m in zip(pre.feature_names_out_, pre.immutable_mask_) if m]
    assert marked == ["race=White", "sex=Male"]
    inc = [n for n, m in zip(pre.feature_names_out_, pre.increasing_mask_) if m]
    assert inc == ["age", "education-num"]
    both = Preprocessor(drop_first_binary=False, corr_threshold=None).fit(adult.X, adult)
    marked = [n for n, m in zip(both.feature_names_out_, both.immutable_mask_) if m]
    assert marked == ["race=Non-White", "race=White", "sex=Female", "sex=Male"]


def test_preprocessor_input_errors_and_unknown_category() -> None:
    rng = np.random.default_rng(3)
    X = _frame(rng, 100)
    pre = Preprocessor().fit(X)
    new = X.head(3).copy()
    new["colour"] = ["purple", "red", "purple"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 'purple' is unseen: encoded as all zeros, without a warning per call
        Z = pre.transform(new)
    red = pre.feature_names_out_.index("colour=red")
    assert Z.shape == (3, pre.n_features_out_) and np.isfinite(Z).all()
    assert Z[0, red] == pytest.approx(pre.lower_[red])  # unknown -> all indicators 0
    with pytest.raises(ValueError, match="'b'"):
        pre.transform(X.drop(columns="b"))
    bad = X.copy()
    bad.loc[3, "a"] = np.nan
    with pytest.raises(ValueError, match="'a'.*at fit time they had none"):
        pre.transform(bad)  # a gap where the fit data had none: no indicator to carry it
    assert [f.column for f in Preprocessor().fit(bad).missing_flags_] == ["a"]  # a numeric column may be missing
    gap = X.copy()
    gap.loc[3, "colour"] = None  # a categorical gap: its own level, decoded back to a gap
    assert "colour=nan" in Preprocessor().fit(gap).feature_names_out_


# ----------------------------------------------------------------------------- pools


def test_split_pools() -> None:
    pools = split_pools(100, 20, 30, 10, random_state=0)
    assert isinstance(pools, Pools)
    assert (len(pools.members), len(pools.nonmembers), len(pools.adversary)) == (20, 30, 10)
    allidx = np.concatenate([pools.members, pools.nonmembers, pools.adversary])
    assert len(np.unique(allidx)) == 60 and allidx.min() >= 0 and allidx.max() < 100
    default = split_pools(100, 33, random_state=0)
    assert default.sizes == {"members": 33, "nonmembers": 33, "adversary": 33}
    again = split_pools(100, 20, 30, 10, random_state=0)
    assert all(np.array_equal(getattr(pools, f), getattr(again, f)) for f in ("members", "nonmembers", "adversary"))
    other = split_pools(100, 20, 30, 10, random_state=1)
    assert not np.array_equal(pools.members, other.members)


def test_split_pools_errors() -> None:
    with pytest.raises(ValueError) as info:
        split_pools(9871, 5000)
    msg = str(info.value)
    assert "pools need 15000 rows (members 5000 + non-members 5000 + adversary 5000)" in msg
    assert "9871" in msg and "at most 3290" in msg
    assert split_pools(9871, 3290).sizes["members"] == 3290
    with pytest.raises(ValueError, match="n_adversary"):
        split_pools(100, 10, 10, 0)
    with pytest.raises(ValueError, match="n_members"):
        split_pools(100, 0)


# ----------------------------------------------------------------------------- load_tabular


def _write(tmp_path: Path, df: pd.DataFrame, name: str = "t.csv") -> Path:
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


def _good_frame(n: int = 30) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "income": rng.normal(50, 10, n),
            "city": rng.choice(["A", "B", "C"], n),
            "code": rng.choice([1, 2], n),
            "outcome": rng.choice(["good", "bad"], n),
        }
    )


def test_load_tabular_good_file(tmp_path: Path) -> None:
    df = _good_frame()
    df.loc[0, "city"] = "None"  # a literal level, not missing
    path = _write(tmp_path, df)
    ds = load_tabular(
        path,
        "outcome",
        categorical=["code"],
        immutable=["city"],
        increasing=["age"],
        positive_label="good",
    )
    assert ds.name == "t" and ds.target == "outcome"
    assert ds.categorical == ("city", "code")
    assert ds.X["city"].dtype == object and ds.X["age"].dtype == np.float64
    assert np.array_equal(ds.y, (df["outcome"] == "good").to_numpy().astype(int))
    df01 = _good_frame().assign(outcome=lambda d: (d["outcome"] == "good").astype(int))
    assert load_tabular(_write(tmp_path, df01, "b.csv"), "outcome").y.sum() == df01["outcome"].sum()
    # a label stored as 0.0 / 1.0 is named as the command line gives it: "0" makes 0.0 the favourable one
    path = _write(tmp_path, df01.astype({"outcome": float}), "f.csv")
    for label in ("0", 0, "0.0"):
        assert load_tabular(path, "outcome", positive_label=label).y.sum() == (df01["outcome"] == 0).sum()
    with pytest.raises(ValueError, match="positive_label='2'"):
        load_tabular(path, "outcome", positive_label="2")


def test_load_tabular_target_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, _good_frame())
    with pytest.raises(ValueError, match="'label' not found.*'outcome'"):
        load_tabular(path, "label")
    with pytest.raises(ValueError, match="'bad' and 'good'.*positive_label"):
        load_tabular(path, "outcome")
    with pytest.raises(ValueError, match="positive_label='ok'"):
        load_tabular(path, "outcome", positive_label="ok")
    three = _good_frame().assign(outcome=np.arange(30) % 3)
    with pytest.raises(ValueError, match="'outcome' must be binary but has 3 distinct values"):
        load_tabular(_write(tmp_path, three, "c.csv"), "outcome")


def test_load_tabular_missing_values(tmp_path: Path) -> None:
    df = _good_frame()
    df["income"] = df["income"].astype(object)
    df.loc[[2, 5], "income"] = np.nan
    df.loc[7, "city"] = ""
    df.loc[9, "outcome"] = None
    path = _write(tmp_path, df)
    # the target cannot be missing; a feature can (the empty city cell is read as a gap)
    with pytest.raises(ValueError, match=r"'outcome' \(1\), in 1 rows.*the target cannot be missing"):
        load_tabular(path, "outcome", positive_label="good")
    ds = load_tabular(_write(tmp_path, df.drop(index=[9]), "gaps.csv"), "outcome", positive_label="good")
    assert ds.X["income"].isna().sum() == 2 and ds.X["income"].dtype == np.float64
    assert ds.X["city"].isna().sum() == 1  # a gap, not the text "nan"
    blank = df.drop(index=[9]).assign(city=lambda d: d.city.replace("", "  "))
    with pytest.raises(ValueError, match=r"'city' \(1\).*a blank text is no gap"):
        load_tabular(_write(tmp_path, blank, "blank.csv"), "outcome", positive_label="good")


def test_load_tabular_free_text_column(tmp_path: Path) -> None:
    df = _good_frame().assign(comment=[f"note number {i}" for i in range(30)])
    path = _write(tmp_path, df)
    with pytest.raises(ValueError, match="'comment' is neither numeric.*drop it"):
        load_tabular(path, "outcome", positive_label="good")
    # listing it as categorical forces it through
    ds = load_tabular(path, "outcome", positive_label="good", categorical=["comment"])
    assert "comment" in ds.categorical


@pytest.mark.parametrize("param", ["categorical", "immutable", "increasing"])
def test_load_tabular_unknown_names(tmp_path: Path, param: str) -> None:
    path = _write(tmp_path, _good_frame())
    with pytest.raises(ValueError, match=f"{param} names unknown columns \\['ghost'\\]"):
        load_tabular(path, "outcome", positive_label="good", **{param: ["ghost"]})


def test_load_tabular_formats(tmp_path: Path) -> None:
    path = tmp_path / "t.xlsx"
    path.write_text("x")
    with pytest.raises(ValueError, match="format"):
        load_tabular(path, "outcome")
    with pytest.raises(FileNotFoundError):
        load_tabular(tmp_path / "nope.csv", "outcome")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        pq = tmp_path / "t.parquet"
        pq.write_bytes(b"PAR1")
        with pytest.raises(ImportError, match=r"recourse-privacy\[parquet\]"):
            load_tabular(pq, "outcome")
    else:  # pragma: no cover - pyarrow present
        pq = tmp_path / "t.parquet"
        _good_frame().to_parquet(pq)
        assert load_tabular(pq, "outcome", positive_label="good").n_rows == 30
