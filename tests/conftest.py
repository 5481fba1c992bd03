"""Shared fixtures: where the real traces and HTA's reference outputs are."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # tests import the trace builder as `tracebuilder`, the corpus paths as `corpus`

from corpus import DATA, REPO, SHARED, golden_jobs, shared_or_skip  # noqa: E402,F401  (re-exported for fixtures)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never touch the user's cache from tests."""
    monkeypatch.setenv("HOLOTRACE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
