"""The worked example examples/audit_your_model.ipynb runs from top to bottom (nbclient; about 15 s of CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "audit_your_model.ipynb"


def test_audit_your_model_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert (tmp_path / "audit-your-model" / "counterfactuals.csv").is_file()
    assert (tmp_path / "audit-your-model" / "report.html").is_file()
    shares = next(o for o in nb.cells[8].outputs if "data" in o)["data"]["text/plain"]
    assert shares == "{'home_ownership': 1.0, 'purpose': 1.0}"  # every decoded category is a real one
