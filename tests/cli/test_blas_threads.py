"""The command sets numpy's OpenBLAS to one thread and numpy's huge pages off before numpy is imported (holotrace
makes no BLAS calls: its threads would only spin; huge pages of arrays made and freed all along wait on the
kernel), unless the user chose."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.parametrize(
    "var,given,expected",
    [
        ("OPENBLAS_NUM_THREADS", None, "1"),
        ("OPENBLAS_NUM_THREADS", "3", "3"),
        ("NUMPY_MADVISE_HUGEPAGE", None, "0"),
        ("NUMPY_MADVISE_HUGEPAGE", "1", "1"),
    ],
)
def test_set_before_numpy_unless_chosen(var, given, expected):
    script = textwrap.dedent(f"""
        import os, sys
        from holotrace.cli import main
        try:
            main(["--version"])
        except SystemExit:
            pass
        print(os.environ.get({var!r}), "numpy" in sys.modules)
    """)
    env = {k: v for k, v in os.environ.items() if k != var}
    if given is not None:
        env[var] = given
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].split() == [expected, "False"]


def test_the_collector_is_back_and_nothing_frozen_after_main():
    """The command imports its modules with the collector off and freezes what they made; an in-process caller
    gets the collector back, enabled, with nothing left frozen, however the command ends."""
    import gc

    from holotrace.cli import main

    assert gc.isenabled()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert main(["summary", "/no/such/folder"]) == 2
    assert gc.isenabled() and gc.get_freeze_count() == 0
