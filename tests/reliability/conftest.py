"""Fixtures of the reliability tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "parametric"))  # _profiles: the hypothesis budget
sys.path.insert(0, str(HERE))

from _reliability import Env  # noqa: E402


@pytest.fixture
def env(tmp_path) -> Env:
    return Env(tmp_path)
