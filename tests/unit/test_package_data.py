"""Every file the package reads at run time ships in the wheel.

An editable install reads ``src/`` directly, so a data file missing from ``package-data`` passes every
other test here and fails only on a user's ``pip install .``: this test compares the tree with the
declaration.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "holotrace"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 interpreter has no tomllib
    tomllib = None


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python 3.11")
@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="run from a checkout")
def test_every_data_file_is_declared():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    missing = []
    for path in PACKAGE.rglob("*"):
        if not path.is_file() or path.suffix in {".py", ".pyc", ".so", ".pyd"} or "__pycache__" in path.parts:
            continue
        package = ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        if not any(fnmatch.fnmatch(path.name, pat) for pat in declared.get(package, [])):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"files the package holds but the wheel would not: {missing}"


def test_default_rules_readable_from_installed_package():
    from holotrace.model import rule_table

    assert rule_table.DEFAULT_RULES_FILE.is_file(), rule_table.DEFAULT_RULES_FILE
