"""The command tunes glibc's allocator for its own process (arrays kept for reuse), never where the user tuned it
or where the C library is not glibc."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

SCRIPT = "from holotrace.cli import tune_allocator; print(tune_allocator())"
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _tuned(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, env={**clean, **env})
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="the allocator is tuned on glibc only")
def test_tuned_on_glibc():
    assert _tuned() == "True"


@pytest.mark.parametrize("env", [{"MALLOC_ARENA_MAX": "2"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}])
def test_left_alone_where_the_user_tuned_it(env):
    assert _tuned(**env) == "False"
