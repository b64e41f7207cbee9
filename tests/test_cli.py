"""The command line: the audit's table and files, clear errors with exit code 2, a fast --help."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from recourse_privacy import run_audit
from recourse_privacy.cli import app

runner = CliRunner()
ARGS = ["audit", "--n-features", "30", "--n-members", "250", "--shadow-models", "3", "--seed", "3"]


def test_audit_prints_the_table_and_matches_the_python_api(tmp_path):
    res = runner.invoke(app, [*ARGS, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for name in ("cfd-lrt", "loss-lrt", "random", "AUC", "TPR@0.01"):
        assert name in res.output
    m = json.loads((tmp_path / "metrics.json").read_text())
    api = run_audit(n_features=30, n_members=250, shadow_models=3, seed=3)
    for name, a in api.to_dict()["attacks"].items():
        assert m["attacks"][name]["auc"] == a["auc"]
        assert m["attacks"][name]["tpr_at_fpr"] == a["tpr_at_fpr"]


def test_bad_input_exit_code_and_message(tmp_path):
    res = runner.invoke(app, ["audit", "--model", "mlp", "--recourse", "linear", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "not linear" in res.output
    res = runner.invoke(app, ["audit", "--dataset", "nope", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown dataset 'nope'" in res.output
    res = runner.invoke(app, ["audit", "--model-param", "epochs", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
    # RMIA's parameters reach the configuration, and a bad one is refused by name before any work
    res = runner.invoke(app, ["audit", "--attacks", "rmia-cfd", "--rmia-a", "1.5", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "rmia_a" in res.output
    res = runner.invoke(app, ["audit", "--rmia-population", "0", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "rmia_population" in res.output
    assert not (tmp_path / "metrics.json").exists()


def test_datasets_command_lists_names():
    res = runner.invoke(app, ["datasets"])
    assert res.exit_code == 0 and "heloc" in res.output and "synthetic" in res.output


def test_help_does_not_import_torch_or_sklearn():
    code = (
        "import sys; from recourse_privacy.cli import app; import recourse_privacy; "
        "print('torch' in sys.modules, 'sklearn' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]
