"""The command sets numpy's OpenBLAS to one thread and numpy's huge pages off before numpy is imported (holotrace
makes no BLAS calls: its threads would only spin; huge pages of arrays made and freed all along wait on the
kernel), unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.parametrize("given,expected", [(None, "1"), ("3", "3")])
def test_openblas_threads_set_before_numpy(given, expected):
    script = textwrap.dedent("""
        import os, sys
        from holotrace.cli import main
        try:
            main(["--version"])
        except SystemExit:
            pass
        print(os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].split() == [expected, "False"]


@pytest.mark.parametrize("given,expected", [(None, "0"), ("1", "1")])
def test_numpy_huge_pages_off_before_numpy_unless_chosen(given, expected):
    script = textwrap.dedent("""
        import os, sys
        from holotrace.cli import main
        try:
            main(["--version"])
        except SystemExit:
            pass
        print(os.environ.get("NUMPY_MADVISE_HUGEPAGE"), "numpy" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if given is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = given
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].split() == [expected, "False"]
