"""The audit end to end: outputs, reproducibility, disjoint pools, resume, and bad input caught early."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recourse_privacy import AuditConfig, run_audit
from recourse_privacy.audit import SCHEMA_VERSION, AuditResult, stages

SMALL = dict(dataset="synthetic", n_features=40, n_members=300, shadow_models=4, n_calibration=200)


def test_audit_writes_every_output_with_the_documented_keys(tmp_path):
    r = run_audit(AuditConfig(**SMALL), tmp_path)
    for name in ("metrics.json", "roc.png", "cfd_histogram.png", "report.html"):
        assert (tmp_path / name).stat().st_size > 0
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert set(m) >= {"config", "model", "recourse", "n_members", "n_nonmembers", "attacks"}
    assert set(m["model"]) >= {"train_accuracy", "test_accuracy"}
    assert set(m["recourse"]) >= {"validity", "mean_l1", "mean_l2"}
    assert set(m["attacks"]) == {"cfd", "cfd-lrt", "loss", "loss-lrt", "random"}
    for a in m["attacks"].values():
        assert set(a["tpr_at_fpr"]) == {"0.1", "0.01", "0.001"}
        assert 0 <= a["auc"] <= 1 and 0.5 <= a["balanced_accuracy"] <= 1
    assert m["n_members"] + m["n_nonmembers"] == len(r.is_member)
    assert m == r.to_dict() and m["schema_version"] == SCHEMA_VERSION
    assert AuditResult.from_dict(m).to_dict() == m  # the typed result reads its own file back
    assert set(m["timing_seconds"]) >= {"data", "owner model", "recourse", "shadow models", "attacks", "total"}
    assert "cfd-lrt" in (tmp_path / "report.html").read_text()


def test_same_seed_same_numbers_and_pools_disjoint():
    a = run_audit(AuditConfig(**SMALL, seed=7))
    b = run_audit(AuditConfig(**SMALL, seed=7))
    c = run_audit(AuditConfig(**SMALL, seed=8))
    assert a.attacks == b.attacks
    assert a.attacks != c.attacks
    p = a.pools
    assert not (
        set(p.members) & set(p.nonmembers) or set(p.members) & set(p.adversary) or set(p.nonmembers) & set(p.adversary)
    )
    assert (len(p.members), len(p.nonmembers), len(p.adversary)) == (300, 300, 600)  # adversary: 2 x members


def test_targets_are_exactly_the_rejected_points():
    r = run_audit(AuditConfig(**SMALL, attacks=("cfd", "random")))
    assert r.recourse_result.valid.mean() == r.recourse.validity
    assert r.n_members == int(r.is_member.sum())
    assert np.all(r.cfd > 0)  # every target needed a move


def test_killed_run_resumes_from_finished_shadow_models(tmp_path, monkeypatch):
    first = run_audit(AuditConfig(**SMALL), tmp_path)
    cached = list((tmp_path / ".cache").rglob("shadow_*.npz"))
    assert len(cached) == 4
    from recourse_privacy.attacks import shadow

    def boom(*args, **kwargs):
        raise AssertionError("a finished shadow model was recomputed")

    monkeypatch.setattr(shadow, "_one_shadow", boom)
    again = run_audit(AuditConfig(**SMALL), tmp_path)
    assert again.attacks == first.attacks


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(model="mlp", recourse="linear"), "not linear"),
        (dict(shadow_models=0), "at least 2 shadow models"),
        (dict(dataset="mnist"), "unknown dataset 'mnist'"),
        (dict(attacks=("cfd", "nope")), "'nope'"),
        (dict(distance="l3"), "distance"),
        (dict(n_members=0), "n_members"),
    ],
)
def test_bad_config_fails_before_any_work(overrides, match, monkeypatch):
    def no_load(config):
        raise AssertionError("data was loaded before the configuration was checked")

    monkeypatch.setattr(stages, "load_data", no_load)
    with pytest.raises(ValueError, match=match):
        run_audit(AuditConfig(**{**SMALL, **overrides}))


def test_pools_larger_than_the_data(shared_data):
    with pytest.raises(ValueError, match="9871"):
        run_audit(AuditConfig(dataset="heloc", model="logistic", n_members=5000))


def test_user_csv_errors_name_the_problem(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    df["label"] = (df["a"] > 0).astype(int)
    good = tmp_path / "good.csv"
    df.to_csv(good, index=False)
    r = run_audit(AuditConfig(data=str(good), target="label", n_members=60, shadow_models=3, n_calibration=50))
    assert r.data.n_rows == 200
    df.loc[5, "label"] = np.nan  # a numeric feature may be missing (tests/test_missing_values.py); the label not
    df.to_csv(tmp_path / "nan.csv", index=False)
    with pytest.raises(ValueError, match="'label' \\(1\\)"):
        run_audit(AuditConfig(data=str(tmp_path / "nan.csv"), target="label", n_members=60))
    with pytest.raises(ValueError, match="'income'"):
        run_audit(AuditConfig(data=str(good), target="income", n_members=60))
    df = df.dropna()
    df["label"] = np.arange(len(df)) % 3
    df.to_csv(tmp_path / "three.csv", index=False)
    with pytest.raises(ValueError, match="binary"):
        run_audit(AuditConfig(data=str(tmp_path / "three.csv"), target="label", n_members=60))
    with pytest.raises(ValueError, match="--target"):
        run_audit(AuditConfig(data=str(good), n_members=60))


def test_randomized_recourse_is_seeded_by_the_audit():
    cfg = AuditConfig(
        **{
            **SMALL,
            "model": "mlp",
            "recourse": "gs",
            "attacks": ("cfd", "random"),
            "model_params": {"epochs": 3, "hidden_layers": [16], "lr": 0.01},
            "n_members": 150,
        }
    )
    a, b = run_audit(cfg), run_audit(cfg)
    np.testing.assert_array_equal(a.cfd, b.cfd)
    assert a.attacks == b.attacks


def test_default_adversary_pool_is_twice_the_members_or_all_that_is_left():
    from recourse_privacy.audit.stages import resolve_pool_sizes

    cfg = AuditConfig(dataset="heloc", n_members=3000)
    assert cfg.pool_sizes == (3000, 3000, 6000)
    sizes, note = resolve_pool_sizes(cfg, 9871)  # HELOC's rows: 3,871 left for the adversary
    assert sizes == (3000, 3000, 3871) and "3871" in note and "2 x 3000" in note
    assert resolve_pool_sizes(cfg, 20000) == ((3000, 3000, 6000), None)
    explicit = AuditConfig(dataset="heloc", n_members=3000, n_adversary=5000)
    assert resolve_pool_sizes(explicit, 9871) == ((3000, 3000, 5000), None)  # given explicitly: never changed


def test_shadow_warning_formula_matches_the_keep_matrix():

    r = run_audit(
        AuditConfig(
            n_features=10, n_members=200, n_adversary=250, shadow_models=3, n_calibration=100, attacks=("cfd-lrt",)
        )
    )
    assert r.shadow.train_rows_each == (125, 125, 125)  # floor(0.5 x 250), exact for an odd shadow count
    assert any("at least 400 rows" in w for w in r.warnings)  # ceil(200 / 0.5): the pool that makes them match
    ok = run_audit(AuditConfig(n_features=10, n_members=200, shadow_models=3, n_calibration=100, attacks=("cfd-lrt",)))
    assert ok.shadow.train_rows_each == (200, 200, 200) and not any("shadow model trains" in w for w in ok.warnings)


def test_the_audit_result_is_the_record_the_report_reads_bound_to_audit_config():
    """One record type below the report (AuditRecord), one subclass the audit builds; the old name warns."""
    import recourse_privacy.results as results
    import recourse_privacy.results.audit as results_audit
    from recourse_privacy.audit.config import AuditConfig as Config
    from recourse_privacy.errors import InvalidInputError
    from recourse_privacy.results import AuditRecord

    r = run_audit(AuditConfig(dataset="synthetic", n_features=10, n_members=200, shadow_models=2, attacks=("cfd",)))
    assert isinstance(r, AuditResult) and isinstance(r, AuditRecord) and type(r) is AuditResult
    m = r.to_dict()
    back = AuditResult.from_dict(m)
    assert type(back) is AuditResult and isinstance(back.config, Config) and back.to_dict() == m
    assert type(back.with_files({"metrics.json": "x"})) is AuditResult
    with pytest.raises(InvalidInputError, match=r"recourse_privacy\.audit\.AuditResult"):
        AuditRecord.from_dict(m)  # the record alone cannot type its config block
    for module in (results, results_audit):
        with pytest.warns(DeprecationWarning, match="renamed AuditRecord"):
            assert module.AuditResult is AuditRecord
        with pytest.raises(AttributeError, match="NoSuchName"):
            module.NoSuchName  # noqa: B018
