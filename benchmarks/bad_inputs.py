"""The closing-note table of issue 10: bad inputs and faults, the message each gives, and whether before any work.

Runs every case in this process (the CLI through typer's CliRunner, faults through the Python
API) on tiny data, and prints a Markdown table plus the counts of tracebacks and of silent wrong
results (an input that should be refused but ran, or a rerun whose numbers differ from a fresh
computation). "Before work" for an audit means: no model was trained (the progress never
reached the owner's model) and nothing was written to ``--out`` but the directory itself.

    PYTHONPATH=src RECOURSE_PRIVACY_DATA=/work/shared/data python benchmarks/bad_inputs.py [--out table.md]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("MPLBACKEND", "Agg")

from typer.testing import CliRunner  # noqa: E402

from recourse_privacy.cli import app  # noqa: E402
from recourse_privacy.errors import RecoursePrivacyError  # noqa: E402

BASE = ["--n-members", "100", "--n-features", "5", "--shadow-models", "2", "--attacks", "cfd,loss,cfd-lrt"]


@dataclass
class Case:
    name: str
    run: Callable[[Path], tuple[int, str, bool, bool]]  # -> (exit code, message, traceback?, before work?)
    expect: str = "error"  # "error" or "ok"
    wrong: Callable[[Path], bool] | None = None  # for "ok" cases: True when the numbers are wrong


def _cli(args: list[str], out_opt: bool = True):
    def run(tmp: Path):
        out = tmp / "out"
        argv = [*args, "--out", str(out)] if out_opt else list(args)
        res = CliRunner().invoke(app, argv)
        text = " ".join(res.output.split())
        tb = "Traceback" in res.output or (res.exception is not None and not isinstance(res.exception, SystemExit))
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            text += f" [{type(res.exception).__name__}: {res.exception}]"
        written = out.is_dir() and any(p.name != ".write-test" for p in out.iterdir())
        before = "owner model" not in res.output and not written
        return res.exit_code, text, tb, before

    return run


def _py(fn: Callable[[Path], object], before: bool = True):
    def run(tmp: Path):
        try:
            fn(tmp)
        except RecoursePrivacyError as err:
            return 2, f"Error: {err}", False, before
        except Exception as err:  # noqa: BLE001 - a traceback
            return 1, f"{type(err).__name__}: {err}", True, before
        return 0, "ok", False, before

    return run


def _table(path: Path, n: int = 600, seed: int = 0, **extra) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)]).assign(y=y)
    for k, v in extra.items():
        df[k] = v(df) if callable(v) else v
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path


def _data(tmp: Path, name: str = "t.csv", **extra) -> list[str]:
    return ["--data", str(_table(tmp / name, **extra)), "--target", "y"]


def _with_data(builder: Callable[[Path], list[str]], args: list[str]):
    def run(tmp: Path):
        return _cli([*args, *builder(tmp)])(tmp)

    return run


def _raw(text: str, name: str = "t.csv"):
    def build(tmp: Path) -> list[str]:
        p = tmp / name
        p.write_text(text) if isinstance(text, str) else p.write_bytes(text)
        return ["--data", str(p), "--target", "y"]

    return build


# ------------------------------------------------------------------------------------ faults
def _audit_aucs(tmp: Path, data: Path, out: Path) -> dict:
    from recourse_privacy.audit import AuditConfig, run_audit

    cfg = AuditConfig(data=str(data), target="y", n_members=150, shadow_models=4, attacks=("loss-lrt", "cfd-lrt"))
    return {k: a.auc for k, a in run_audit(cfg, out).attacks.items()}


def _stale_cache(tmp: Path) -> bool:
    data = _table(tmp / "s.csv", seed=0)
    first = _audit_aucs(tmp, data, tmp / "o")
    _table(data, seed=1)
    rerun = _audit_aucs(tmp, data, tmp / "o")
    fresh = _audit_aucs(tmp, data, tmp / "fresh")
    NOTES["stale cache"] = f"first {first}, after editing the CSV: rerun {rerun}, fresh {fresh}"
    return rerun != fresh


def _target_count_change(tmp: Path) -> bool:
    data = _table(tmp / "s.csv", seed=0)
    _audit_aucs(tmp, data, tmp / "o")
    _table(data, n=900, seed=3)
    return _audit_aucs(tmp, data, tmp / "o") != _audit_aucs(tmp, data, tmp / "fresh")


def _tampered_cache(tmp: Path) -> bool:
    data = _table(tmp / "s.csv", seed=0)
    first = _audit_aucs(tmp, data, tmp / "o")
    for p in sorted((tmp / "o" / ".cache").rglob("shadow_*.npz")):
        with np.load(p) as f:
            fields = {k: f[k] for k in f.files}
        fields["conf_targets"] = fields["conf_targets"] + 5.0
        np.savez(p, **fields)
    again = _audit_aucs(tmp, data, tmp / "o")
    NOTES["tampered cache"] = f"original {first}, after editing every cached shadow: {again}"
    return again != first


def _tampered_record(tmp: Path) -> bool:
    from recourse_privacy.audit import AuditConfig
    from recourse_privacy.experiments.engine import run_cell

    data = _table(tmp / "s.csv")
    cfg = AuditConfig(data=str(data), target="y", n_members=150, shadow_models=2, attacks=("cfd",))
    rec = run_cell(cfg.to_dict(), {}, "s", str(tmp / "store"))
    path = tmp / "store" / "cells" / f"{cfg.digest()}.json"
    d = json.loads(path.read_text())
    d["metrics"]["attacks"]["cfd"]["auc"] = 0.999
    path.write_text(json.dumps(d))
    again = run_cell(cfg.to_dict(), {}, "s", str(tmp / "store"))
    NOTES["tampered record"] = (
        f"AUC {rec['metrics']['attacks']['cfd']['auc']:.4f}; edited to 0.999; rerun gives "
        f"{again['metrics']['attacks']['cfd']['auc']:.4f}"
    )
    return again["metrics"]["attacks"]["cfd"]["auc"] != rec["metrics"]["attacks"]["cfd"]["auc"]


def _corrupted_heloc(tmp: Path):
    src = Path(os.environ.get("RECOURSE_PRIVACY_DATA", "/work/shared/data")) / "heloc.csv"
    (tmp / "d").mkdir()
    raw = bytearray(src.read_bytes())
    i = raw.index(b"\n", 5000) + 1
    raw[i : i + 1] = b"9" if raw[i : i + 1] != b"9" else b"8"
    (tmp / "d" / "heloc.csv").write_bytes(bytes(raw))
    return _cli(
        [
            "audit",
            "--dataset",
            "heloc",
            "--data-dir",
            str(tmp / "d"),
            "--n-members",
            "500",
            "--shadow-models",
            "2",
            "--attacks",
            "cfd",
        ]
    )(tmp)


def _session_threads(tmp: Path) -> bool:
    from recourse_privacy.defenses import LaplaceRecourse, RecourseSession
    from recourse_privacy.errors import BudgetExceededError
    from recourse_privacy.models.registry import make_model

    X = np.random.default_rng(0).normal(size=(100, 4))
    model = make_model("logistic").fit(X, (X[:, 0] > 0).astype(int))
    session = RecourseSession(LaplaceRecourse(epsilon=0.1, random_state=0), model, budget=2.0)
    answered = []

    def ask():
        for _ in range(10):
            try:
                answered.append(len(session.answer(X[:1]).valid))
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=ask) for _ in range(20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    NOTES["session threads"] = (
        f"20 threads x 10 queries at 0.1 of budget 2.0: {sum(answered)} answered, spent {session.spent:.6f}"
    )
    return session.spent > 2.0 + 1e-12 or sum(answered) != 20


def _spec(text: str):
    def run(tmp: Path):
        p = tmp / "s.yaml"
        p.write_text(text)
        return _cli(["run", str(p)])(tmp)

    return run


def _interrupt(tmp: Path):
    return _py(lambda t: (_ for _ in ()).throw(KeyboardInterrupt))(tmp)


NOTES: dict[str, str] = {}
MLP = ["audit", *BASE, "--model", "mlp", "--recourse", "scfe"]
A = ["audit", *BASE]


def cases() -> list[Case]:
    c = [
        Case("--model-param epochs=-5", _cli([*MLP, "--model-param", "epochs=-5"])),
        Case("--model-param epochs=0", _cli([*MLP, "--model-param", "epochs=0"])),
        Case("--model-param epochs=abc", _cli([*MLP, "--model-param", "epochs=abc"])),
        Case("--model-param epochs=1e308", _cli([*MLP, "--model-param", "epochs=1e308"])),
        Case("--model-param batch_size=0", _cli([*MLP, "--model-param", "batch_size=0"])),
        Case("--model-param lr=0 (mlp)", _cli([*MLP, "--model-param", "lr=0"])),
        Case("--model-param hidden_layers=[]", _cli([*MLP, "--model-param", "hidden_layers=[]"])),
        Case("--model-param hidden_layers=[0]", _cli([*MLP, "--model-param", "hidden_layers=[0]"])),
        Case("--model-param epoch=5 (typo)", _cli([*MLP, "--model-param", "epoch=5"])),
        Case("--model-param C=0 (logistic)", _cli([*A, "--model-param", "C=0"])),
        Case("--model-param C=-1 (logistic)", _cli([*A, "--model-param", "C=-1"])),
        Case("--model-param epochs=3 on logistic", _cli([*A, "--model-param", "epochs=3"])),
        Case("--model-param foo (no =)", _cli([*A, "--model-param", "foo"])),
        Case("--model-param =5", _cli([*A, "--model-param", "=5"])),
        Case("--recourse-param lam=-1 (scfe)", _cli([*MLP, "--recourse-param", "lam=-1"])),
        Case("--recourse-param lamm=1 (typo)", _cli([*MLP, "--recourse-param", "lamm=1"])),
        Case("--recourse-param max_iter=0", _cli([*MLP, "--recourse-param", "max_iter=0"])),
        Case("--recourse-param norm=l7", _cli([*MLP, "--recourse-param", "norm=l7"])),
        Case("--data-param bogus=1", _cli([*A, "--data-param", "bogus=1"])),
        Case("--data-param class_sep=abc", _cli([*A, "--data-param", "class_sep=abc"])),
        Case("--data-param class_sep=1e308", _cli([*A, "--data-param", "class_sep=1e308"])),
        Case("--data-param flip_y=2", _cli([*A, "--data-param", "flip_y=2"])),
        Case(
            "recourse --methods nope",
            _cli(
                [
                    "recourse",
                    "--dataset",
                    "synthetic",
                    "--model",
                    "logistic",
                    "--methods",
                    "nope",
                    "--n-train",
                    "200",
                    "--n-points",
                    "20",
                ]
            ),
        ),
        Case(
            "recourse --method-param face.n_neighbors=0",
            _cli(
                [
                    "recourse",
                    "--dataset",
                    "synthetic",
                    "--model",
                    "logistic",
                    "--methods",
                    "face",
                    "--method-param",
                    "face.n_neighbors=0",
                    "--n-train",
                    "200",
                    "--n-points",
                    "20",
                ]
            ),
        ),
        Case(
            "recourse --method-param noseparator=1",
            _cli(
                [
                    "recourse",
                    "--dataset",
                    "synthetic",
                    "--model",
                    "logistic",
                    "--methods",
                    "face",
                    "--method-param",
                    "noseparator=1",
                    "--n-train",
                    "200",
                    "--n-points",
                    "20",
                ]
            ),
        ),
        Case("--seed -1", _cli([*A, "--seed", "-1"])),
        Case("--seed abc", _cli([*A, "--seed", "abc"])),
        Case("--seed 2**64", _cli([*A, "--seed", str(2**64)])),
        Case("--defense dpm --epsilon 1e308", _cli([*A, "--defense", "dpm", "--epsilon", "1e308", "--normalize-rows"])),
        Case("--defense laplace --epsilon 1e200", _cli([*A, "--defense", "laplace", "--epsilon", "1e200"])),
        Case("--defense laplace --epsilon 0", _cli([*A, "--defense", "laplace", "--epsilon", "0"])),
        Case("--defense laplace --epsilon -1", _cli([*A, "--defense", "laplace", "--epsilon", "-1"])),
        Case("--defense laplace --epsilon nan", _cli([*A, "--defense", "laplace", "--epsilon", "nan"])),
        Case("--defense dpm without --epsilon", _cli([*A, "--defense", "dpm", "--normalize-rows"])),
        Case("--defense nope", _cli([*A, "--defense", "nope"])),
        Case("--n-members 0", _cli(["audit", "--n-members", "0"])),
        Case("--n-members -5", _cli(["audit", "--n-members", "-5"])),
        Case("--n-members 10**9 (synthetic)", _cli(["audit", "--n-members", str(10**9)])),
        Case("--n-features 0", _cli(["audit", "--n-features", "0"])),
        Case("--n-features 10**7", _cli(["audit", "--n-features", str(10**7)])),
        Case("--shadow-models 1 with LRT", _cli(["audit", "--shadow-models", "1", "--n-members", "100"])),
        Case("--shadow-models -1", _cli(["audit", "--shadow-models", "-1"])),
        Case("--shadow-fraction 1.5", _cli([*A, "--shadow-fraction", "1.5"])),
        Case("--shadow-fraction 0", _cli([*A, "--shadow-fraction", "0"])),
        Case("--n-jobs 0", _cli([*A, "--n-jobs", "0"])),
        Case("--attacks nope", _cli(["audit", "--attacks", "cfd,nope"])),
        Case("--attacks '' (none)", _cli(["audit", "--attacks", ""])),
        Case("--distance l3", _cli([*A, "--distance", "l3"])),
        Case("--variance foo", _cli([*A, "--variance", "foo"])),
        Case("--model nope", _cli([*A, "--model", "nope"])),
        Case("--recourse nope", _cli([*A, "--recourse", "nope"])),
        Case("--model mlp --recourse linear", _cli([*A, "--model", "mlp", "--recourse", "linear"])),
        Case("--dataset nope", _cli(["audit", "--dataset", "nope"])),
        Case("--data missing.csv", _cli([*A, "--data", "/nonexistent/t.csv", "--target", "y"])),
        Case("--data without --target", _with_data(lambda t: _data(t)[:2], A)),
        Case("--target not a column", _with_data(lambda t: [*_data(t)[:2], "--target", "nope"], A)),
        Case(
            "duplicated target column (y, y)",
            _with_data(_raw("f0,y,y\n" + "\n".join(f"{i * 0.37 % 5:.3f},{i % 2},{i % 2}" for i in range(300))), A),
        ),
        Case("near-duplicate target (1 - y)", _with_data(lambda t: _data(t, leak=lambda d: 1 - d["y"]), A)),
        Case("all features constant", _with_data(_raw("a,b,y\n" + "\n".join(f"1,2,{i % 2}" for i in range(300))), A)),
        Case("a value of 1e308 in the CSV", _with_data(lambda t: _data(t, big=1e308), A)),
        Case(
            "inf in the CSV",
            _with_data(_raw("a,b,y\n" + "\n".join(f"{'inf' if i == 3 else i},{i % 5},{i % 2}" for i in range(300))), A),
        ),
        Case(
            "missing values",
            _with_data(_raw("a,b,y\n" + "\n".join(f"{'' if i == 3 else i},{i % 5},{i % 2}" for i in range(300))), A),
        ),
        Case(
            "non-binary target", _with_data(_raw("a,b,y\n" + "\n".join(f"{i},{i % 5},{i % 3}" for i in range(300))), A)
        ),
        Case("one-class target", _with_data(_raw("a,b,y\n" + "\n".join(f"{i},{i % 5},1" for i in range(300))), A)),
        Case("empty CSV file", _with_data(_raw(""), A)),
        Case("header-only CSV", _with_data(_raw("a,b,y\n"), A)),
        Case("binary garbage named .csv", _with_data(_raw(bytes(range(256)) * 8), A)),
        Case("ragged CSV rows", _with_data(_raw("a,b,y\n1,2,0\n3,4,1,9,9\n5,6\n"), A)),
        Case("--data t.xlsx", _with_data(_raw("a,b,y\n1,2,0\n", name="t.xlsx"), A)),
        Case(
            "free-text column", _with_data(lambda t: _data(t, note=lambda d: [f"note {i}" for i in range(len(d))]), A)
        ),
        Case("too few rows for the pools", _with_data(lambda t: _data(t), ["audit", "--n-members", "1000"])),
        Case(
            "--out is a file",
            lambda t: (t.joinpath("f").write_text("x"), _cli([*A, "--out", str(t / "f")], out_opt=False)(t))[1],
        ),
        Case("--out /dev/null", _cli([*A, "--out", "/dev/null"], out_opt=False)),
        Case("--out under /proc (unwritable)", _cli([*A, "--out", "/proc/1/nope"], out_opt=False)),
        Case("corrupted heloc.csv in the data dir", _corrupted_heloc),
        Case(
            "spec: typo in model_params",
            _spec("name: t\nfixed: {model: mlp, recourse: scfe, model_params: {epoch: 5}}\n"),
        ),
        Case("spec: axis name with ../ and $", _spec("name: t\ngrid:\n  ../x$: [1, 2]\n")),
        Case("spec: unknown field n_member", _spec("name: t\nfixed: {n_member: 5}\n")),
        Case("spec: !!python/object", _spec("name: !!python/object:os.system 'echo hi'\n")),
        Case("spec: label with $", _spec("name: t\ngrid:\n  setup:\n    - {label: cost$5, n_members: 100}\n")),
        Case("spec: seeds a,b", _spec("name: t\nseeds: [a, b]\n")),
        Case("spec: not YAML", _spec("name: [unclosed\n")),
        Case(
            "run --out is a file",
            lambda t: (
                t.joinpath("f").write_text("x"),
                t.joinpath("s.yaml").write_text("name: t\nfixed: {n_members: 100, n_features: 5, shadow_models: 2}\n"),
                _cli(["run", str(t / "s.yaml"), "--out", str(t / "f")], out_opt=False)(t),
            )[2],
        ),
        Case("reproduce --seeds a,b", _cli(["reproduce", "pawelczyk2023-table2", "--seeds", "a,b"])),
        Case("reproduce unknown name", _cli(["reproduce", "nope"])),
        Case("tradeoff --epsilons 1,abc", _cli(["tradeoff", "--epsilons", "1,abc"])),
        Case(
            "audit-dp --out a directory",
            lambda t: (
                t.joinpath("d").mkdir(),
                _cli(["audit-dp", "--trials", "200", "--out", str(t / "d")], out_opt=False)(t),
            )[1],
        ),
        Case("audit-dp --epsilon 1e308", _cli(["audit-dp", "--epsilon", "1e308", "--trials", "200"], out_opt=False)),
        Case("audit-dp --trials 0", _cli(["audit-dp", "--trials", "0"], out_opt=False)),
        Case("results on a non-store dir", _cli(["results", "/tmp"], out_opt=False)),
        Case(
            "RecourseSession budget=-1",
            _py(
                lambda t: __import__("recourse_privacy.defenses", fromlist=["x"]).RecourseSession(
                    __import__("recourse_privacy.defenses", fromlist=["x"]).LaplaceRecourse(epsilon=1.0),
                    None,
                    budget=-1,
                )
            ),
        ),
        Case(
            "ledger reopened with another budget",
            _py(
                lambda t: (
                    __import__("recourse_privacy.accounting", fromlist=["x"]).QueryLedger(t / "b.db", 1.0),
                    __import__("recourse_privacy.accounting", fromlist=["x"]).QueryLedger(t / "b.db", 2.0),
                )
            ),
        ),
        Case("Ctrl-C / SIGTERM during a command", lambda t: _interrupt_cli(t)),
        # faults whose right answer is a recomputation: "wrong" says whether the numbers differ from a fresh run
        Case("CSV edited, same --out (stale shadow cache)", _py(lambda t: None), "ok", _stale_cache),
        Case("CSV row count changed, same --out", _py(lambda t: None), "ok", _target_count_change),
        Case("cached shadow statistics edited", _py(lambda t: None), "ok", _tampered_cache),
        Case("store record edited by hand", _py(lambda t: None), "ok", _tampered_record),
        Case("20 threads on one session budget", _py(lambda t: None), "ok", _session_threads),
        Case(
            "data file named cost_$5_to_$10.csv",
            _with_data(lambda t: _data(t, name="cost_$5_to_$10.csv"), A),
            "ok",
            lambda t: not ((t / "out" / "roc.png").is_file() and (t / "out" / "metrics.json").is_file()),
        ),
    ]
    return c


def _interrupt_cli(tmp: Path):
    """A command interrupted mid-run: the one error path prints one line, exit 130."""
    import recourse_privacy.audit.pipeline as pipeline

    real = pipeline.run_audit

    def boom(*a, **k):
        raise KeyboardInterrupt

    from recourse_privacy import audit as audit_pkg

    audit_pkg.run_audit = boom
    try:
        code, text, tb, _ = _cli([*A])(tmp)
    finally:
        audit_pkg.run_audit = real
    return code, text, tb, True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table (Markdown) here")
    args = parser.parse_args()
    rows, n_tb, n_wrong = [], 0, 0
    t_all = time.perf_counter()
    for i, case in enumerate(cases(), 1):
        tmp = Path(tempfile.mkdtemp(prefix="bad-input-"))
        t0 = time.perf_counter()
        try:
            code, text, tb, before = case.run(tmp)
            wrong = False
            if case.expect == "error":
                wrong = code == 0  # refused input that ran anyway
            elif case.wrong is not None:
                wrong = bool(case.wrong(tmp))
                text = (
                    "WRONG: numbers differ from a fresh computation, or outputs missing"
                    if wrong
                    else "ran; numbers equal a fresh computation (recomputed), never over budget, outputs written "
                    "(notes below)"
                )
            elif code != 0:
                text = "(expected a result) " + text
        except Exception as err:  # noqa: BLE001 - the harness itself must report, not stop
            code, text, tb, before, wrong = 1, f"{type(err).__name__}: {err}", True, False, False
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        n_tb += tb
        n_wrong += wrong
        msg = text.replace("|", "\\|")
        msg = msg[:230] + ("..." if len(msg) > 230 else "")
        when = "n/a (runs)" if case.expect == "ok" else ("yes" if before else "no")
        rows.append(
            f"| {i} | {case.name.replace('|', '/')} | {code} | {when} | {'TRACEBACK ' if tb else ''}"
            f"{'SILENT-WRONG ' if wrong else ''}{msg} | {time.perf_counter() - t0:.1f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    head = ["| # | input or fault | exit | before work | message (or outcome) | s |", "|---|---|---|---|---|---|"]
    lines = [
        *head,
        *rows,
        "",
        f"cases: {len(rows)}; tracebacks: {n_tb}; silent wrong results: {n_wrong}; "
        f"total {time.perf_counter() - t_all:.0f} s",
        "",
        *(f"- {k}: {v}" for k, v in NOTES.items()),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
