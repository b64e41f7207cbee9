"""The experiment engine: specs validated on load, cells = axes x seeds, an atomic store that
survives kill -9, resumable runs, and the same numbers on the local and the Ray backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from recourse_privacy.audit import AuditConfig
from recourse_privacy.errors import UnknownNameError
from recourse_privacy.experiments.engine import run_spec
from recourse_privacy.experiments.results import plot_results, result_tables
from recourse_privacy.experiments.spec import SpecError, load_spec, spec_from_dict
from recourse_privacy.experiments.store import ResultStore, atomic_write_json
from recourse_privacy.reproductions.grid_reproductions import list_grid_reproductions, load_shipped_spec

TINY = {"dataset": "synthetic", "n_members": 200, "shadow_models": 2, "n_calibration": 100}
SPEC_YAML = """\
name: tiny
description: four tiny synthetic cells
fixed: {dataset: synthetic, n_members: 200, shadow_models: 2, n_calibration: 100}
grid:
  n_features: [10, 20]
seeds: [0, 1]
metrics: [auc, tpr_at_fpr.0.01, model.test_accuracy]
paper:
  source: a made-up paper
  notes: nothing differs
  figures:
    - {cell: {n_features: 20}, attack: cfd, values: {auc: 0.61}}
    - {cell: {n_features: 20}, values: {model.test_accuracy: 0.9}}
"""


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- specs
@pytest.mark.parametrize(
    "text, words",
    [
        ("name: x\nseedz: [0]\n", ["seedz", "Extra inputs"]),
        ("name: x\nfixed: {n_member: 10}\n", ["n_member", "fixed", "did you mean 'n_members'"]),
        ("name: x\ngrid:\n  setup:\n    - {label: a, n_featurez: 3}\n", ["n_featurez", "setup"]),
        ("name: x\ngrid:\n  n_features: []\n", ["n_features", "no values"]),
        ("name: x\nfixed: {seed: 3}\n", ["seed", "seeds"]),
        ("name: x\nmetrics: [tpr_at_fpr.0.05]\n", ["tpr_at_fpr.0.05", "metrics"]),
        ("name: x\nmetrics: [accuracy]\n", ["accuracy", "unknown metric"]),
        ("name: x\nfixed: {recourse: nope}\n", ["nope", "unknown recourse method", "seed=0"]),
        ("name: x\nfixed: {shadow_models: 1}\n", ["shadow", "at least 2"]),
        (
            "name: x\ngrid: {n_features: [10]}\npaper: {source: s, figures: [{cell: {n_features: 10}, valuez: {}}]}\n",
            ["paper.figures.0.valuez", "Extra inputs"],
        ),
        (
            "name: x\ngrid: {n_features: [10]}\npaper: {source: s, figures: [{cell: {n_features: 99}, values: {auc: 1}}]}\n",
            ["n_features=99", "not a value"],
        ),
        ("name: x\ngrid: {data: [{dataset: heloc}]}\n", ["data", "not a field"]),
        ("name: x\nfixed: {n_features: 5}\ngrid: {n_features: [10]}\n", ["n_features", "both"]),
    ],
)
def test_spec_errors_name_the_file_and_the_key(tmp_path, text, words):
    path = _write(tmp_path, text, "bad-spec.yaml")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert "bad-spec.yaml" in msg
    for w in words:
        assert w in msg, msg


def test_unknown_name_lists_the_shipped_reproductions():
    with pytest.raises(UnknownNameError, match="pawelczyk2023-fig2"):
        load_shipped_spec("no-such-reproduction")
    with pytest.raises(SpecError, match="no-such-file.yaml not found"):
        load_spec("no-such-file.yaml")


def test_cells_are_the_product_of_the_axes_times_the_seeds(tmp_path):
    spec = load_spec(
        _write(
            tmp_path,
            """\
name: grid
fixed: {dataset: synthetic, n_members: 200, model_params: {C: 0.5}}
grid:
  n_features: [10, 20]
  setup:
    - {label: a, distance: l1, model_params: {max_iter: 50}}
    - {label: b, distance: l2}
    - {label: c, distance: l2, variance: global}
seeds: [3, 4]
metrics: [auc]
""",
        )
    )
    cells = spec.cells
    assert len(cells) == 2 * 3 * 2 and len({c.hash for c in cells}) == 12
    assert [c.seed for c in cells[:4]] == [3, 4, 3, 4]  # seeds innermost
    first = cells[0]
    assert first.label == "n_features=10 setup=a seed=3"
    assert first.config.model_params == {"C": 0.5, "max_iter": 50}  # a linked dict merges into fixed
    assert cells[2].config.model_params == {"C": 0.5} and cells[2].config.distance == "l2"
    assert {(c.config.n_features, c.config.variance) for c in cells} >= {(20, "global"), (10, "per-example")}
    # YAML's 1e-3 is a float here (plain YAML 1.1 reads a string)
    s = load_spec(
        _write(tmp_path, "name: y\nfixed: {model: mlp, recourse: scfe, model_params: {lr: 1e-3}}\n", "lr.yaml")
    )
    assert s.cells[0].config.model_params["lr"] == pytest.approx(0.001)


def test_with_overrides_and_skip_of_unavailable_cells():
    spec = spec_from_dict(
        {"name": "o", "fixed": TINY, "grid": {"recourse": ["linear", "not-installed"]}, "on_invalid": "skip"}
    )
    assert len(spec.cells) == 1 and "not-installed" in spec.skipped[0][0]
    more = spec.with_overrides(fixed={"shadow_models": 4}, seeds=[0, 1, 2])
    assert {c.config.shadow_models for c in more.cells} == {4} and len(more.cells) == 3
    with pytest.raises(SpecError, match="grid axis"):
        spec.with_overrides(fixed={"recourse": "linear"})


def test_cells_start_costliest_first(tmp_path, monkeypatch):
    """Longest-processing-time order: black-box searches and large pools before gradient recourse."""
    from recourse_privacy.experiments import engine

    spec = spec_from_dict(
        {
            "name": "order",
            "fixed": {"dataset": "synthetic", "model": "mlp", "shadow_models": 2},
            "grid": {"n_members": [100, 400], "recourse": ["scfe", "gs", "cchvae"]},
        }
    )
    costs = {c.label: engine.estimated_cost(c.config) for c in spec.cells}
    started: list[str] = []

    def fake_run_cell(config, labels, name, root, **kw):  # records the order, runs nothing
        started.append(f"{config['recourse']}{config['n_members']}")
        return {"hash": AuditConfig.from_dict(config).digest(), "status": "failed", "error": "not run"}

    monkeypatch.setattr(engine, "run_cell", fake_run_cell)
    run_spec(spec, tmp_path / "out", n_jobs=1, cache_dir="off", progress=False)
    assert started == ["cchvae400", "gs400", "cchvae100", "gs100", "scfe400", "scfe100"]
    assert costs["n_members=400 recourse=cchvae seed=0"] == 4 * costs["n_members=100 recourse=cchvae seed=0"]


def test_shipped_reproductions_load_and_validate():
    names = list_grid_reproductions()
    assert set(names) >= {"pawelczyk2023-table2", "pawelczyk2023-fig2", "pawelczyk2023-fig3", "huang2023"}
    for name in names:
        spec = load_shipped_spec(name)
        assert spec.paper is not None and spec.paper.notes
        assert len(spec.cells) + len(spec.skipped) == np.prod([len(v) for v in spec.grid.values()]) * len(spec.seeds)
    fig2 = load_shipped_spec("pawelczyk2023-fig2")
    assert [c.config.n_features for c in fig2.cells] == [100, 1000, 5000, 7000]
    assert {c.config.n_members for c in fig2.cells} == {5000}
    fig3 = load_shipped_spec("pawelczyk2023-fig3")
    assert len(fig3.cells) == 8 and {c.config.recourse for c in fig3.cells} == {"scfe"}
    huang = load_shipped_spec("huang2023")
    assert {(c.config.defense, c.config.epsilon) for c in huang.cells} == {
        ("none", None),
        ("dpm", 0.5),
        ("dpm", 1.0),
        ("laplace", 0.5),
        ("laplace", 1.0),
    }


# --------------------------------------------------------------------------- the store
def test_store_trusts_only_complete_records_and_cleans_temp_files(tmp_path):
    store = ResultStore(tmp_path)
    rec = {"hash": "abc", "config": {"seed": 0}, "metrics": {"attacks": {"cfd": {"auc": 0.5}}}}
    store.write(rec)
    assert store.read("abc")["complete"] is True and store.done() == {"abc"}
    # half-written (truncated) JSON, a record without the completion marker, a hash mismatch: not trusted
    full = store.record_path("abc").read_text()
    store.record_path("half").write_text(full[: len(full) // 2])
    atomic_write_json(store.record_path("nomark"), {**rec, "hash": "nomark", "complete": False})
    atomic_write_json(store.record_path("other"), {**rec, "complete": True})
    assert store.done() == {"abc"}
    # a temp file of a dead writer is ignored and removed; one of a live writer is kept
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    from recourse_privacy.experiments.store import _host

    stale = store.cells_dir / f".zzz.json.{_host()}.{int(dead.stdout)}.1234abcd.tmp"
    live = store.cells_dir / f".yyy.json.{_host()}.{os.getpid()}.1234abcd.tmp"
    stale.write_text("{")
    live.write_text("{")
    assert store.done() == {"abc"}
    assert store.clean_temp() == 1 and not stale.exists() and live.exists()


# --------------------------------------------------------------------------- kill -9 and resume
@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    """``recourse-privacy run`` killed with SIGKILL after two finished cells, then rerun to the end."""
    root = tmp_path_factory.mktemp("engine")
    spec_path = _write(root, SPEC_YAML)
    spec = load_spec(spec_path)
    out = root / "store"
    cells_dir = out / "cells"
    with open(root / "run.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "recourse_privacy.cli", "run", str(spec_path), "--out", str(out), "--n-jobs", "1"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if cells_dir.is_dir() and len(list(cells_dir.glob("*.json"))) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, (root / "run.log").read_text()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    files = sorted(p for p in cells_dir.glob("*.json"))
    before = {p.stem: p.read_bytes() for p in files}
    store = ResultStore(out)
    trusted = {p.stem for p in files if store.read(p.stem) is not None}
    events: list[tuple] = []
    summary = run_spec(spec, out, n_jobs=2, progress=lambda *e: events.append(e))  # joblib processes
    again = run_spec(spec, out, n_jobs=2, progress=False)
    return {
        "spec": spec,
        "out": out,
        "before": before,
        "trusted": trusted,
        "summary": summary,
        "again": again,
        "events": events,
    }


def test_kill_9_loses_no_finished_cell_and_rerun_recomputes_none_of_them(killed_run):
    spec, out, before, summary = killed_run["spec"], killed_run["out"], killed_run["before"], killed_run["summary"]
    assert len(before) >= 2 and killed_run["trusted"] == set(before)  # every record on disk is whole
    assert summary.n_skipped == len(before) and summary.n_failed == 0
    assert not set(summary.computed) & set(before)  # 0 finished cells recomputed
    assert summary.n_computed == len(spec.cells) - len(before)
    store = ResultStore(out)
    assert store.done() == {c.hash for c in spec.cells}
    for h, data in before.items():  # finished records untouched
        assert store.record_path(h).read_bytes() == data
    assert killed_run["again"].n_computed == 0 and killed_run["again"].n_skipped == len(spec.cells)
    events = killed_run["events"]
    assert events[0] == ("start", None, {"total": len(spec.cells), "done": len(before)})
    assert sorted(e[1] for e in events if e[0] == "finished") == sorted(
        c.label for c in spec.cells if c.hash in summary.computed
    )
    assert not list(store.cells_dir.glob(".*.tmp"))
    for c in spec.cells:  # each cell ran in its own directory, with the audit's shadow cache
        assert (store.run_dir(c.hash) / "metrics.json").exists()
        assert len(list((store.run_dir(c.hash) / ".cache").rglob("shadow_*.npz"))) == 2


def test_summary_parquet_and_tables_mean_and_sd_over_seeds(killed_run, tmp_path):
    import pandas as pd

    spec, out = killed_run["spec"], killed_run["out"]
    frame = pd.read_parquet(out / "summary.parquet")
    attacks = spec.cells[0].config.attacks
    assert len(frame) == len(spec.cells) * len(attacks)
    assert {"config.n_features", "config.seed", "attack", "auc", "tpr_at_fpr.0.01", "model.test_accuracy"} <= set(frame)
    tables = result_tables(out)
    t = tables.attacks
    assert len(t) == 2 * len(attacks) and set(t["n_seeds"]) == {2}
    recs = [r for r in ResultStore(out).records() if r["config"]["n_features"] == 20]
    aucs = [r["metrics"]["attacks"]["cfd-lrt"]["auc"] for r in recs]
    row = t[(t["cell"] == "n_features=20") & (t["attack"] == "cfd-lrt")].iloc[0]
    assert row["auc"] == pytest.approx(np.mean(aucs)) and row["auc_sd"] == pytest.approx(np.std(aucs, ddof=1))
    cfd = t[(t["cell"] == "n_features=20") & (t["attack"] == "cfd")].iloc[0]
    assert cfd["paper:auc"] == 0.61  # the paper's figure beside ours
    assert t[(t["cell"] == "n_features=10")]["paper:auc"].isna().all()
    cells = tables.cells
    assert cells.loc[cells["cell"] == "n_features=20", "paper:model.test_accuracy"].iloc[0] == 0.9
    paths = plot_results(tables, tmp_path)
    assert [p.name for p in paths] == ["auc_vs_n_features.png", "tpr_at_fpr.0.01_vs_n_features.png"]


def _numbers(obj):
    """metrics.json without wall-clock times."""
    if isinstance(obj, dict):
        return {k: _numbers(v) for k, v in obj.items() if k not in ("timing_seconds", "seconds")}
    return obj


def test_local_and_ray_backends_give_identical_metrics(killed_run, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'recourse-privacy[ray]')")
    spec = killed_run["spec"]
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        summary = run_spec(spec, tmp_path / "ray", backend="ray", progress=False)
    finally:
        ray.shutdown()
    assert summary.n_computed == len(spec.cells) and summary.n_failed == 0
    local, remote = ResultStore(killed_run["out"]), ResultStore(tmp_path / "ray")
    for c in spec.cells:
        a, b = local.read(c.hash), remote.read(c.hash)
        assert _numbers(a["metrics"]) == _numbers(b["metrics"]), c.label
