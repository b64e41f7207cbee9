"""Nothing wrong silently: provenance-keyed caches, a budget that holds under concurrency, bad input refused first.

Small audits (a few hundred rows, 8 features, logistic regression, 4 shadow models) keep this
file fast; every assertion compares against a fresh computation, never a hard-coded figure.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from recourse_privacy.accounting import QueryLedger
from recourse_privacy.audit import AuditConfig, AuditResult, run_audit
from recourse_privacy.cli import app
from recourse_privacy.data import ChecksumError, load_dataset, load_tabular
from recourse_privacy.defenses import LaplaceRecourse, RecourseSession
from recourse_privacy.errors import BudgetExceededError, InvalidInputError
from recourse_privacy.models.registry import make_model
from recourse_privacy.provenance import package_version, processor_string, sha256_file, source_digest

runner = CliRunner()


def _table(path: Path, n: int = 600, seed: int = 0, shift: float = 0.0) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > shift).astype(int)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(8)]).assign(y=y)
    df.to_csv(path, index=False)
    return path


def _config(path: Path, **kw) -> AuditConfig:
    return AuditConfig(
        data=str(path),
        target="y",
        n_members=kw.pop("n_members", 150),
        shadow_models=4,
        attacks=("loss-lrt", "cfd-lrt", "cfd"),
        **kw,
    )


def _aucs(result: AuditResult) -> dict[str, float]:
    return {name: a.auc for name, a in result.attacks.items()}


# ----------------------------------------------------------------------------- provenance
def test_metrics_json_records_data_hash_version_platform(tmp_path):
    data = _table(tmp_path / "t.csv")
    run_audit(_config(data), tmp_path / "out")
    d = json.loads((tmp_path / "out" / "metrics.json").read_text())
    prov = d["provenance"]
    assert prov["data_sha256"] == sha256_file(data) and prov["data_source"] == str(data.resolve())
    assert prov["package_version"] == package_version() and prov["platform"]
    assert prov["source_digest"] == source_digest() and len(prov["source_digest"]) >= 16  # which sources of it
    assert AuditResult.from_dict(d).provenance.data_sha256 == sha256_file(data)
    before = {**d, "provenance": {k: v for k, v in prov.items() if k != "source_digest"}}  # written before stop 47
    assert AuditResult.from_dict(before).provenance.source_digest == ""
    # the host, whose kernels matter (torch's part is there only where the audit had loaded it)
    assert prov["processor"].split(";")[0] == processor_string().split(";")[0] and "CPUs" in prov["processor"]
    before = {**d, "provenance": {k: v for k, v in prov.items() if k != "processor"}}  # written before stop 48
    assert AuditResult.from_dict(before).provenance.processor == ""
    old = {k: v for k, v in d.items() if k != "provenance"}  # a file written before provenance existed
    assert AuditResult.from_dict(old).provenance is None


def test_processor_string_names_the_cpu_and_torchs_kernels_once_torch_is_loaded(monkeypatch):
    import sys

    import torch

    text = processor_string()
    assert f"torch {torch.__version__}, CPU kernels {torch.backends.cpu.get_cpu_capability()}" in text
    monkeypatch.delitem(sys.modules, "torch")  # a process that never loaded torch: no import just to name it
    assert "torch" not in processor_string() and processor_string() == text.split(";")[0]


def test_edited_data_recomputes_the_shadow_cache(tmp_path):
    data = _table(tmp_path / "t.csv", seed=0)
    first = run_audit(_config(data), tmp_path / "out")
    _table(data, seed=1)  # same path, new contents
    rerun = run_audit(_config(data), tmp_path / "out")
    fresh = run_audit(_config(data), tmp_path / "fresh")
    assert _aucs(rerun) == _aucs(fresh)
    assert _aucs(rerun) != _aucs(first)
    _table(data, n=900, seed=2)  # another number of rows, hence of targets: no broadcasting error
    assert _aucs(run_audit(_config(data), tmp_path / "out")) == _aucs(run_audit(_config(data), tmp_path / "f2"))


def test_tampered_shadow_cache_is_recomputed(tmp_path):
    data = _table(tmp_path / "t.csv")
    first = run_audit(_config(data), tmp_path / "out")
    entries = sorted((tmp_path / "out" / ".cache").rglob("shadow_*.npz"))
    assert len(entries) == 4
    with np.load(entries[0]) as f:
        fields = {k: f[k] for k in f.files}
    fields["cfd_targets"] = fields["cfd_targets"] * 3 + 1  # an edited number, digest left as it was
    np.savez(entries[0], **fields)
    entries[1].write_bytes(entries[1].read_bytes()[:100])  # a truncated file
    assert _aucs(run_audit(_config(data), tmp_path / "out")) == _aucs(first)


def test_corrupted_dataset_file_is_refused(tmp_path):
    src = Path(os.environ.get("RECOURSE_PRIVACY_DATA", "/work/shared/data")) / "heloc.csv"
    if not src.is_file():
        pytest.skip("heloc.csv not available")
    shutil.copy(src, tmp_path / "heloc.csv")
    assert load_dataset("heloc", tmp_path, download=False).n_rows > 0
    raw = bytearray((tmp_path / "heloc.csv").read_bytes())
    i = raw.index(b"\n", 5000) + 1
    raw[i : i + 1] = b"9" if raw[i : i + 1] != b"9" else b"8"
    (tmp_path / "heloc.csv").write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="SHA-256.*corrupted or was edited"):
        load_dataset("heloc", tmp_path, download=False)


def test_store_record_edited_or_stale_is_recomputed(tmp_path):
    from recourse_privacy.experiments.engine import run_cell

    data = _table(tmp_path / "t.csv")
    cfg = _config(data, n_members=200)
    rec = run_cell(cfg.to_dict(), {}, "s", str(tmp_path / "store"))
    assert rec["status"] == "complete" and rec["content_key"]
    path = tmp_path / "store" / "cells" / f"{cfg.digest()}.json"
    edited = json.loads(path.read_text())
    auc = edited["metrics"]["attacks"]["cfd"]["auc"]
    edited["metrics"]["attacks"]["cfd"]["auc"] = 0.99
    path.write_text(json.dumps(edited))
    again = run_cell(cfg.to_dict(), {}, "s", str(tmp_path / "store"))
    assert again["metrics"]["attacks"]["cfd"]["auc"] == auc and again["finished_at"]
    _table(data, seed=5)  # the data changed: the record's key no longer matches
    fresh = run_cell(cfg.to_dict(), {}, "s", str(tmp_path / "store"))
    assert fresh["content_key"] != rec["content_key"]
    assert fresh["metrics"]["provenance"]["data_sha256"] == sha256_file(data)


def test_cell_lock_makes_a_second_runner_wait(tmp_path):
    from recourse_privacy.experiments.engine import run_cell
    from recourse_privacy.experiments.store import ResultStore

    data = _table(tmp_path / "t.csv")
    cfg = _config(data, n_members=200)
    store = ResultStore(tmp_path / "store")
    store.root.mkdir()
    with store.cell_lock(cfg.digest()) as mine:
        assert mine
        assert run_cell(cfg.to_dict(), {}, "s", str(store.root))["status"] == "busy"
    assert run_cell(cfg.to_dict(), {}, "s", str(store.root))["status"] == "complete"


# ----------------------------------------------------------------------------- the accountant
def _hammer_ledger(path: str, budget: float, eps: float, n: int, out, barrier=None) -> None:
    """Ask ``n`` times (in step with the other threads at ``barrier``); report (answered, refused, error or None)."""
    answered = refused = 0
    try:
        ledger = QueryLedger(path, budget)
        for _ in range(n):
            if barrier is not None:
                barrier.wait(timeout=60)
            try:
                ledger.spend(eps)
                answered += 1
            except BudgetExceededError:
                refused += 1
    except BaseException as err:  # reported, not lost: a caller that crashed must fail the test
        if barrier is not None:
            barrier.abort()  # release the others at once
        out.put((answered, refused, f"{type(err).__name__}: {err}"))
        raise
    out.put((answered, refused, None))


def test_ledger_never_overspent_by_processes_and_threads(tmp_path):
    """4 processes and 8 threads ask 40 times each for 0.01 of a budget of 2.0: exactly 200 answered.

    Every caller must finish: each reports (answered, refused, error), and each must have asked all
    40 times without an error (a `database is locked` from a deferred BEGIN would otherwise leave the
    total at 200 through the callers that survived); every process must exit with 0.
    """
    budget, eps, n = 2.0, 0.01, 40
    path = str(tmp_path / "budget.sqlite")
    QueryLedger(path, budget)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hammer_ledger, args=(path, budget, eps, n, q)) for _ in range(4)]
    for p in procs:
        p.start()
    results: list[tuple] = []
    barrier = threading.Barrier(8)  # the threads ask together: every spend races 7 others
    threads = [
        threading.Thread(target=_hammer_ledger, args=(path, budget, eps, n, _ListQueue(results), barrier))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    reports = list(results)
    for _ in procs:
        try:
            reports.append(q.get(timeout=120))
        except Exception:  # queue.Empty: a process died without reporting
            break
    for p in procs:
        p.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    assert len(reports) == len(threads) + len(procs) == 12  # every caller reported
    assert [r[2] for r in reports] == [None] * 12  # ... without an error
    assert all(a + r == n for a, r, _ in reports)  # ... after asking every time
    ledger = QueryLedger(path, budget)
    answered = sum(r[0] for r in reports)
    assert answered == 200 == ledger.n_spends and sum(r[1] for r in reports) == 12 * n - 200
    assert ledger.spent == 2.0 == budget  # integer units of 1e-9: exact


class _ListQueue:
    def __init__(self, out: list):
        self.out, self.lock = out, threading.Lock()

    def put(self, x) -> None:
        with self.lock:
            self.out.append(x)


_SPEND_FOREVER = """
import sys
from recourse_privacy.accounting import QueryLedger
ledger = QueryLedger(sys.argv[1], 1e4)
while True:
    ledger.spend(0.001)
"""


def test_ledger_survives_kill(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "budget.sqlite")
    QueryLedger(path, 1e4)
    p = subprocess.Popen(
        [sys.executable, "-c", _SPEND_FOREVER, path], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
    deadline = time.time() + 60
    while QueryLedger(path, 1e4).n_spends < 20 and time.time() < deadline:
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)  # mid-stream, maybe mid-transaction
    p.wait()
    ledger = QueryLedger(path, 1e4)
    n = ledger.n_spends
    assert n >= 20 and ledger.spent == pytest.approx(n * 0.001, abs=1e-9)
    ledger.spend(0.5)
    assert ledger.spent == pytest.approx(n * 0.001 + 0.5, abs=1e-9)
    with pytest.raises(InvalidInputError, match="budget"):
        QueryLedger(path, 2.0)


def test_session_with_threads_never_over_budget(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    model = make_model("logistic").fit(X, (X[:, 0] > 0).astype(int))
    session = RecourseSession(
        LaplaceRecourse(epsilon=0.1, random_state=0), model, budget=2.0, ledger=tmp_path / "b.sqlite"
    )
    answered, refused = [], []

    def ask() -> None:
        for _ in range(5):
            try:
                answered.append(len(session.answer(X[:1]).valid))
            except BudgetExceededError:
                refused.append(1)

    threads = [threading.Thread(target=ask) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(answered) == 20 and len(refused) == 80
    assert session.spent == pytest.approx(2.0) and session.spent <= 2.0
    assert float(session.accountant.total()[0]) <= 2.0 + 1e-12


# ----------------------------------------------------------------------------- validation at the boundary
@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(model="mlp", recourse="scfe", model_params={"epochs": -5}), ["epochs=-5", "[1, 100_000]"]),
        (dict(model="mlp", recourse="scfe", model_params={"epochs": 0}), ["epochs=0", "integer"]),
        (dict(model="mlp", recourse="scfe", model_params={"epochs": "abc"}), ["epochs='abc'", "integer"]),
        (dict(model="mlp", recourse="scfe", model_params={"batch_size": 0}), ["batch_size=0"]),
        (dict(model="mlp", recourse="scfe", recourse_params={"lam": -1}), ["lam=-1", "[0, 1e+06]"]),
        (dict(model_params={"epochs": 3}), ["no parameter 'epochs'", "C, max_iter"]),
        (dict(seed=-1), ["seed", "-1"]),
        (dict(defense="dpm", epsilon=1e308, normalize_rows=True), ["epsilon", "1e+308"]),
    ],
)
def test_config_refuses_meaningless_parameters(kw, words):
    with pytest.raises(InvalidInputError) as info:
        AuditConfig(**kw).validate()
    for w in words:
        assert w in str(info.value)


def test_misspelt_run_audit_setting_is_named_with_the_closest_field():
    with pytest.raises(InvalidInputError) as info:
        run_audit(n_shadow_models=4, recourse_pramas={}, zzz=1)
    message = str(info.value)
    assert "n_shadow_models (did you mean shadow_models?)" in message
    assert "recourse_pramas (did you mean recourse_params?)" in message
    assert message.endswith("zzz")  # nothing close: named alone


def test_spec_typo_in_model_params_caught_at_load():
    from recourse_privacy.experiments.spec import spec_from_dict

    with pytest.raises(InvalidInputError, match="no parameter 'epoch'"):
        spec_from_dict({"name": "t", "fixed": {"model": "mlp", "recourse": "scfe", "model_params": {"epoch": 5}}})
    with pytest.raises(InvalidInputError, match="axis name"):
        spec_from_dict({"name": "t", "grid": {"../x$": [1, 2]}})


def test_bad_tables_are_refused_by_name(tmp_path):
    base = pd.DataFrame({"a": np.arange(40.0), "b": np.arange(40.0) % 7, "y": np.arange(40) % 2})
    (tmp_path / "dup.csv").write_text("a,y,y\n" + "\n".join(f"{i},{i % 2},{i % 2}" for i in range(40)))
    with pytest.raises(InvalidInputError, match=r"duplicate column names \['y'\]"):
        load_tabular(tmp_path / "dup.csv", "y")
    base.assign(leak=1 - base["y"]).to_csv(tmp_path / "near.csv", index=False)
    with pytest.raises(InvalidInputError, match=r"\['leak'\] duplicate the target"):
        load_tabular(tmp_path / "near.csv", "y")
    base.assign(a=1.0, b=2.0).to_csv(tmp_path / "const.csv", index=False)
    with pytest.raises(InvalidInputError, match="every feature column is constant"):
        load_tabular(tmp_path / "const.csv", "y")
    base.assign(a=1e308).to_csv(tmp_path / "big.csv", index=False)
    with pytest.raises(InvalidInputError, match="'a' holds values as large as 1e\\+308"):
        load_tabular(tmp_path / "big.csv", "y")


@pytest.mark.parametrize("out", ["file", "/dev/null", "readonly"])
def test_unwritable_out_refused_before_work(tmp_path, out, monkeypatch):
    if out == "file":
        target = tmp_path / "f"
        target.write_text("x")
    elif out == "readonly":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    else:
        target = Path(out)
    import recourse_privacy.audit as audit_pkg

    def no_work(*args, **kwargs):
        raise AssertionError("the audit started before --out was refused")

    monkeypatch.setattr(audit_pkg, "play_audit", no_work)  # the game: data, models, recourse, attacks
    res = runner.invoke(app, ["audit", "--n-members", "200", "--n-features", "5", "--out", str(target)])
    assert res.exit_code == 2 and "--out" in res.output and "Traceback" not in res.output
    assert "before --out was refused" not in res.output


def test_dollar_in_data_name_plots(tmp_path):
    data = _table(tmp_path / "cost_$5_to_$10.csv")
    result = run_audit(_config(data), tmp_path / "out")
    assert Path(result.files["roc"]).stat().st_size > 0 and Path(result.files["metrics"]).is_file()


def test_debug_flag_and_one_error_path(tmp_path):
    res = runner.invoke(
        app, ["audit", "--model", "mlp", "--recourse", "scfe", "--model-param", "epochs=-5", "--out", str(tmp_path)]
    )
    assert res.exit_code == 2 and "epochs=-5" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["--debug", "audit", "--seed", "-1", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "Traceback" in res.output and "seed" in res.output
    res = runner.invoke(app, ["reproduce", "pawelczyk2023-table2", "--seeds", "a,b", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--seeds" in res.output and "'a'" in res.output


# ----------------------------------------------------------------------------- processes
_WORKERS_SCRIPT = """
import os, sys, time
from joblib import Parallel, delayed
from recourse_privacy.processes import workers_die_with_parent
with workers_die_with_parent():
    pids = Parallel(n_jobs=2)(delayed(os.getpid)() for _ in range(8))
    print(" ".join(map(str, sorted(set(pids)))), flush=True)
    Parallel(n_jobs=2)(delayed(time.sleep)(60) for _ in range(2))
"""


def test_workers_die_when_the_parent_is_killed():
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", _WORKERS_SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert pids and all(_alive(p) for p in pids)
    time.sleep(0.5)
    proc.kill()
    proc.wait()
    deadline = time.time() + 10
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_two_runners_share_the_cells(tmp_path):
    import subprocess
    import sys

    data = _table(tmp_path / "t.csv")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"name: share\nfixed: {{data: {data}, target: y, n_members: 150, shadow_models: 2, "
        "attacks: [cfd, cfd-lrt]}\ngrid:\n  distance: [l1, l2]\nseeds: [0, 1]\n"
    )
    code = (
        "import sys, json; from recourse_privacy.experiments.engine import run_spec; "
        "s = run_spec(sys.argv[1], sys.argv[2], n_jobs=1, progress=False); "
        "print(json.dumps([s.n_computed, len(s.shared), s.n_skipped, s.n_failed]))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(spec), str(tmp_path / "store")], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    computed = sum(o[0] for o in outs)
    assert computed == 4, outs  # every cell computed exactly once between the two
    assert all(o[0] + o[1] + o[2] == 4 and o[3] == 0 for o in outs), outs
    from recourse_privacy.experiments.store import ResultStore

    rows = ResultStore(tmp_path / "store").summary_frame()
    assert rows["spec"].eq("share").all() and rows["spec_digest"].nunique() == 1
