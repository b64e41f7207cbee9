"""The code is clean for ruff: ``ruff check`` and ``ruff format --check`` on every Python tree of the repository.

The rules are in pyproject.toml (``[tool.ruff]``). Fix findings with ``ruff check --fix`` and
``ruff format`` (``ruff check --statistics`` summarises what is left).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PATHS = [p for p in ("src", "tests", "benchmarks", "examples") if (REPO / p).is_dir()]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None,
    reason="ruff is not installed in this environment (pip install ruff, or the package's [test] extra)",
)


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_ruff_check_finds_nothing():
    proc = _ruff("check", "--output-format", "concise", "--no-cache")
    assert proc.returncode == 0, f"ruff check found problems (ruff check --fix fixes most):\n{proc.stdout[-6000:]}"


def test_ruff_format_leaves_every_file_unchanged():
    proc = _ruff("format", "--check", "--no-cache")
    assert proc.returncode == 0, f"files ruff format would change (run ruff format):\n{proc.stdout[-6000:]}"
