"""The content-addressed artifact cache: exact keys, entries checked on every read (a damaged one is
recomputed, never trusted), no pickle, one computation under parallel writers, and the same audit
numbers with and without it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from recourse_privacy.audit import AuditConfig, run_audit
from recourse_privacy.cache import (
    ArtifactCache,
    Uncacheable,
    artifact_key,
    canonical,
    merge_stats,
    open_cache,
    resolve_cache_dir,
)
from recourse_privacy.models.cached import fit_cached, model_fingerprint
from recourse_privacy.models.logistic import LogisticModel
from recourse_privacy.recourse.cached import RecourseCosts, cached_fit_for, cached_generate
from recourse_privacy.recourse.linear import LinearRecourse
from recourse_privacy.recourse.scfe import SCFE

SMALL = {
    "dataset": "synthetic",
    "n_features": 12,
    "n_members": 200,
    "shadow_models": 4,
    "n_calibration": 100,
    "attacks": ("cfd", "cfd-lrt", "loss-lrt"),
}
MLP = {**SMALL, "model": "mlp", "recourse": "scfe", "model_params": {"epochs": 3, "hidden_layers": [16]}}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One torch thread, as the engine's cells run: two threads fighting over a loaded 2-core machine
    make the small MLP's recourse ten times slower."""
    from recourse_privacy.models.torch_utils import torch_threads

    with torch_threads(1):
        yield


def _numbers(result) -> str:
    """metrics.json without the wall times (the only thing a cache may change)."""
    d = result.to_dict()
    d.pop("timing_seconds")
    d["recourse"] = {k: v for k, v in d["recourse"].items() if k != "seconds"}
    return json.dumps(d, sort_keys=True, default=str)


def _assert_same_numbers(got, want, path: str = "") -> None:
    """Equal structure and values, floats within 1e-9 relative (a handful of float64 roundings)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            _assert_same_numbers(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same_numbers(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12, nan_ok=True), path
    else:
        assert got == want, path


# --------------------------------------------------------------------------- keys
def test_canonical_keys_tell_apart_what_changes_a_result():
    a = np.arange(2000.0)
    b = a.copy()
    b[1000] += 1e-9  # differs where repr would print "..."
    assert artifact_key("x", a) != artifact_key("x", b)
    assert artifact_key("x", {"C": 1}) != artifact_key("x", {"C": 1.0})
    assert artifact_key("x", {"C": 1.0}) == artifact_key("x", {"C": 1.0})
    assert canonical(float("nan")) == canonical(float("nan"))
    with pytest.raises(Uncacheable):
        canonical(object())  # its repr is an address: no canonical description
    with pytest.raises(Uncacheable):
        canonical(np.array([object()]))


def test_keys_change_with_the_sources_not_only_the_version(tmp_path, monkeypatch):
    """A store keyed by the version alone served a checkout the numbers of the code before it (stop 46): every
    key now reads a digest of the package's .py files, which an edit of any of them changes."""
    import shutil
    from pathlib import Path

    import recourse_privacy
    from recourse_privacy import provenance

    root = Path(recourse_privacy.__file__).resolve().parent
    copy = tmp_path / "pkg"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert provenance.source_digest(str(copy)) == provenance.source_digest()
    (copy / "py.typed").write_text("not a source\n")
    assert provenance.source_digest.__wrapped__(str(copy)) == provenance.source_digest()
    module = copy / "privrecourse" / "clustering.py"
    module.write_text(module.read_text() + "\n# an edit\n")
    assert provenance.source_digest.__wrapped__(str(copy)) != provenance.source_digest()
    before = (artifact_key("model", {"C": 1.0}), provenance.content_key("cell"))
    monkeypatch.setattr(provenance, "source_digest", lambda root=None: "0" * 16)
    after = (artifact_key("model", {"C": 1.0}), provenance.content_key("cell"))
    assert before[0] != after[0] and before[1] != after[1]
    assert provenance.code_version().startswith(provenance.package_version() + "+src.")


def test_cache_location_option_env_default_and_off(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOURSE_PRIVACY_CACHE", str(tmp_path / "env"))
    assert resolve_cache_dir() == tmp_path / "env"
    assert resolve_cache_dir(tmp_path / "opt") == tmp_path / "opt"
    assert resolve_cache_dir("off") is None and open_cache(False) is None
    monkeypatch.setenv("RECOURSE_PRIVACY_CACHE", "off")
    assert resolve_cache_dir() is None
    monkeypatch.delenv("RECOURSE_PRIVACY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_cache_dir() == tmp_path / "xdg" / "recourse-privacy" / "artifacts"


# --------------------------------------------------------------------------- entries
def test_entries_round_trip_and_damaged_ones_are_recomputed(tmp_path):
    cache = ArtifactCache(tmp_path)
    key = artifact_key("test", 1)
    value = {"a": np.arange(5.0), "b": np.array([True, False])}
    calls = []

    def compute():
        calls.append(1)
        return value

    first = cache.get_or_compute("model", key, compute, "r")
    again = cache.get_or_compute("model", key, compute, "r")
    assert len(calls) == 1 and all(np.array_equal(first[k], again[k]) for k in value)
    path = cache.path("model", key)

    raw = bytearray(path.read_bytes())  # one number altered inside the stored array
    at = raw.find(np.arange(5.0).tobytes())
    raw[at + 8] ^= 0x01
    path.write_bytes(bytes(raw))
    assert cache.get("model", key, "r") is None and not path.exists()
    assert cache.stats["r"].corrupt == 1

    cache.get_or_compute("model", key, compute, "r")
    path.write_bytes(path.read_bytes()[:100])  # truncated (a kill mid-copy, a full disk)
    assert cache.get_or_compute("model", key, compute, "r")["a"].tolist() == value["a"].tolist()
    assert len(calls) == 3 and cache.stats["r"].corrupt == 2

    other = artifact_key("test", 2)  # an entry copied under another key is foreign
    cache.get_or_compute("model", other, lambda: {"a": np.zeros(1)}, "r")
    cache.path("model", other).write_bytes(path.read_bytes())
    assert cache.get("model", other) is None


def test_entries_are_never_unpickled(tmp_path):
    cache = ArtifactCache(tmp_path)
    key = artifact_key("test", "pickle")
    path = cache.path("model", key)
    path.parent.mkdir(parents=True)
    np.savez(path, x=np.array([{"evil": 1}], dtype=object), _key=np.array(key), _digest=np.array("x"))
    assert cache.get("model", key, "r") is None and cache.stats["r"].corrupt == 1


def test_two_processes_needing_one_entry_compute_it_once(tmp_path):
    script = textwrap.dedent(
        f"""
        import time, numpy as np
        from recourse_privacy.cache import ArtifactCache
        def compute():
            with open({str(tmp_path / "computed")!r}, "a") as f:
                f.write("x")
            time.sleep(2.0)
            return {{"v": np.arange(3)}}
        out = ArtifactCache({str(tmp_path / "c")!r}).get_or_compute("model", "ab" * 32, compute, "r")
        print(out["v"].tolist())
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == ["[0, 1, 2]\n"] * 2
    assert (tmp_path / "computed").read_text() == "x"


def test_info_and_clear(tmp_path):
    cache = ArtifactCache(tmp_path)
    cache.get_or_compute("model", "aa" * 32, lambda: {"v": np.zeros(10)}, "owner model")
    cache.write_last_run("test", cache.stats_dict())
    info = cache.info()
    assert info.entries == {"model": 1} and info.bytes > 80
    assert info.last_run["stats"]["owner model"]["misses"] == 1
    assert merge_stats(cache.stats_dict(), cache.stats_dict())["owner model"]["misses"] == 2
    n, _ = cache.clear()
    assert n >= 2 and cache.info().entries == {} and cache.info().last_run is None


def test_oversized_results_are_computed_not_stored(tmp_path):
    cache = ArtifactCache(tmp_path, max_entry_bytes=100)
    out = cache.get_or_compute("recourse", "cd" * 32, lambda: {"v": np.zeros(100)}, "r")
    assert out["v"].shape == (100,) and cache.stats["r"].too_large == 1 and cache.info().entries == {}


# --------------------------------------------------------------------------- models and recourse
def test_a_cached_model_and_its_recourse_equal_the_computed_ones(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    cache = ArtifactCache(tmp_path)
    trained = fit_cached(LogisticModel(C=0.5), X, y, cache, role="m")
    read = fit_cached(LogisticModel(C=0.5), X, y, cache, role="m")
    assert cache.stats["m"].hits == 1 and model_fingerprint(read) == model_fingerprint(trained)
    fit_cached(LogisticModel(C=0.25), X, y, cache, role="m")  # other parameters: another model
    assert cache.stats["m"].misses == 2

    rejected = X[trained.predict(X) == 0]
    direct = SCFE(max_iter=50).generate(trained, rejected)
    for _ in range(2):
        res = cached_generate(SCFE(max_iter=50), read, X, y, rejected, cache, role="r")
        np.testing.assert_array_equal(res.counterfactuals, direct.counterfactuals)
        np.testing.assert_array_equal(res.valid, direct.valid)
        costs = cached_fit_for(SCFE(max_iter=50), X, y, read, cache, role="c").generate(read, rejected)
        assert isinstance(costs, RecourseCosts)
        for norm in ("l0", "l1", "l2", "linf"):  # the same operations as RecourseResult.distance
            np.testing.assert_array_equal(costs.distance(norm), direct.distance(norm))
        only_l2 = cached_fit_for(SCFE(max_iter=50), X, y, read, cache, role="c2", norms=("l2",)).generate(
            read, rejected
        )
        assert set(only_l2.costs) == {"l2"}  # a key of its own: not the all-norms entry
    # exact linear recourse is a closed form: computed again rather than keyed by its query points
    assert isinstance(cached_fit_for(LinearRecourse(), X, y, read, cache, role="lin"), LinearRecourse)
    assert cache.stats["r"].hits == 1 and cache.stats["c"].hits == 1 and cache.stats["c2"].hits == 1


def test_audit_numbers_are_the_same_with_and_without_the_cache(tmp_path):
    cfg = AuditConfig(**{**SMALL, "recourse": "scfe"})
    off = _numbers(run_audit(cfg, cache="off"))
    cold, warm = ArtifactCache(tmp_path), ArtifactCache(tmp_path)
    assert _numbers(run_audit(cfg, cache=cold)) == off
    assert _numbers(run_audit(cfg, cache=warm)) == off
    assert all(s["misses"] == 0 and s["hits"] > 0 for s in warm.stats_dict().values())
    assert set(warm.stats_dict()) == {"owner model", "owner recourse", "shadow models", "shadow recourse"}


def test_recourse_cells_of_a_dataset_share_the_owner_and_shadow_models(tmp_path):
    """Table 2's layout: the MLP owner and its shadow models are trained once for every recourse method."""
    first, second = ArtifactCache(tmp_path), ArtifactCache(tmp_path)
    scfe = run_audit(AuditConfig(**MLP), cache=first)
    cadex = run_audit(AuditConfig(**{**MLP, "recourse": "cadex"}), cache=second)
    stats = second.stats_dict()
    assert stats["owner model"]["hits"] == 1 and stats["shadow models"]["hits"] == MLP["shadow_models"]
    assert stats["owner recourse"]["misses"] == 1 and stats["shadow recourse"]["hits"] == 0
    assert _numbers(cadex) == _numbers(run_audit(AuditConfig(**{**MLP, "recourse": "cadex"}), cache="off"))
    assert scfe.model == cadex.model


def test_a_corrupted_shadow_model_is_retrained_with_the_same_numbers(tmp_path):
    cfg = AuditConfig(**MLP)
    cache = ArtifactCache(tmp_path)
    expected = _numbers(run_audit(cfg, cache=cache))
    victims = sorted((tmp_path / "model").glob("*/*.npz"))[:2]
    for path in victims:
        path.write_bytes(path.read_bytes()[:-40])
    again = ArtifactCache(tmp_path)
    # a retrained model is one of a batch of fewer: float sums in another order, so scores may move in the
    # last bits (1e-11 measured); every decision, AUC and rank must not
    _assert_same_numbers(json.loads(_numbers(run_audit(cfg, cache=again))), json.loads(expected))
    owner, shadows = again.stats["owner model"], again.stats["shadow models"]
    assert owner.corrupt + shadows.corrupt == 2 and owner.misses + shadows.misses == 2


# --------------------------------------------------------------------------- the engine and the CLI
def test_a_grid_reports_stages_and_hit_rates_and_cache_info_reads_them(tmp_path):
    from typer.testing import CliRunner

    from recourse_privacy.cli import app
    from recourse_privacy.experiments.engine import run_spec
    from recourse_privacy.experiments.spec import spec_from_dict

    fixed = {k: list(v) if isinstance(v, tuple) else v for k, v in SMALL.items()}
    spec = spec_from_dict({"name": "share", "fixed": fixed, "grid": {"recourse": ["linear", "scfe"]}, "seeds": [0]})
    summary = run_spec(spec, tmp_path / "out", n_jobs=1, progress=False, cache_dir=tmp_path / "cache")
    report = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert report == json.loads(json.dumps(summary.report))
    assert [c["status"] for c in report["cells"]] == ["computed", "computed"]
    for cell in report["cells"]:
        assert {"data", "owner model", "recourse", "shadow models", "attacks"} <= set(cell["stages"])
    stats = report["cache"]["stats"]
    assert stats["shadow models"] == {**stats["shadow models"], "hits": 4, "misses": 4}
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "| cell | status | seconds | data | owner model |" in md and "shadow models" in md

    out = CliRunner().invoke(app, ["cache", "info", "--cache-dir", str(tmp_path / "cache")])
    assert out.exit_code == 0, out.output
    assert "shadow models: 4 hits, 4 misses (50%)" in out.output
    out = CliRunner().invoke(app, ["cache", "clear", "--cache-dir", str(tmp_path / "cache")])
    assert out.exit_code == 0 and "removed" in out.output
    assert ArtifactCache(tmp_path / "cache").info().entries == {}


def test_lookups_from_threads_lose_no_count(tmp_path, monkeypatch):
    """The reference worlds' queries may look entries up from two threads at once: every hit and miss is counted.
    Each count is a read, an addition and a write; here the write waits 1 ms after the read, so that two threads
    counting at once would lose one of their updates unless the counting is serialised (the lock)."""
    import threading
    import time
    from dataclasses import fields

    from recourse_privacy.cache import RoleStats

    def slow_add(self, other):
        values = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        time.sleep(0.001)
        for name, v in values.items():
            setattr(self, name, v)

    cache = ArtifactCache(tmp_path)
    keys = [artifact_key("test", i) for i in range(4)]
    for k in keys:
        cache.get_or_compute("model", k, lambda: {"a": np.zeros(1)}, "warm")
    monkeypatch.setattr(RoleStats, "add", slow_add)
    n_threads, n_lookups = 4, 40

    def work():
        for i in range(n_lookups):
            cache.get_or_compute("model", keys[i % len(keys)], lambda: {"a": np.zeros(1)}, "r")

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.stats["r"].hits == n_threads * n_lookups and cache.stats["r"].misses == 0
    assert cache.stats_dict()["r"]["hits"] == n_threads * n_lookups
