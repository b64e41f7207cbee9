"""Shared test fixtures: point the data loaders at ../shared/data when it exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

if SHARED_DATA.is_dir() and "RECOURSE_PRIVACY_DATA" not in os.environ:
    os.environ["RECOURSE_PRIVACY_DATA"] = str(SHARED_DATA)

os.environ.setdefault("MPLBACKEND", "Agg")
# the suite runs without the shared artifact cache (recourse_privacy.cache) unless a test gives one: a
# test that counts training calls or breaks a model on purpose must not be answered from a cache
os.environ.setdefault("RECOURSE_PRIVACY_CACHE", "off")


@pytest.fixture
def shared_data() -> Path:
    """The directory of the real datasets; skips the test where it is absent."""
    path = Path(os.environ.get("RECOURSE_PRIVACY_DATA", SHARED_DATA))
    if not path.is_dir():
        pytest.skip(f"real datasets not found in {path}")
    return path
