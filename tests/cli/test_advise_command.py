"""``holotrace advise`` on the two-step job of test_critical_path_command: the fixes ranked across steps, with savings
worked by hand.

Step 1 (three 100 us kernels, GPU-bound; path 305 us): the top kernels 2x faster save 150 us; launch overhead
only the 4 us launch delay in front of the first kernel. Step 2 (ten 2 us kernels behind 10 us launch calls;
path 131 us): removing launch overhead saves 100 us (nine launch calls and the last launch delay).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_critical_path_command import build_steps

from holotrace.cli import main


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("advise")
    build_steps(folder)
    return folder


def _run(capsys, *args):
    code = main([*args, "--no-cache"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ranked_fixes_json(job_dir, capsys):
    code, out, _ = _run(capsys, "advise", str(job_dir), "--format", "json")
    assert code == 0
    fixes = json.loads(out)["fixes"]
    top = [(f["step"], f["fix"], round(f["saving"], 3)) for f in fixes[:2]]
    assert top == [(1, "top_kernels", 150.0), (2, "launch_overhead", 100.0)]
    by = {(f["step"], f["fix"]): f for f in fixes}
    assert by[(1, "launch_overhead")]["saving"] == pytest.approx(4.0)
    assert by[(1, "top_kernels")]["path_length"] == pytest.approx(305.0)
    assert by[(2, "launch_overhead")]["pct"] == pytest.approx(100.0 / 131.0 * 100)
    # nine launch calls on the path (90 us), then the last operator's launch delay into its kernel (10 us)
    assert by[(2, "launch_overhead")]["edges"] == 10
    assert by[(2, "launch_overhead")]["evidence"].startswith("cudaLaunchKernel (90 us), sm90_xmma_gemm")
    assert all(0 <= f["saving"] <= f["path_length"] for f in fixes)
    savings = [f["saving"] for f in fixes]
    assert savings == sorted(savings, reverse=True)


def test_one_screen_and_markdown(job_dir, capsys):
    code, out, _ = _run(capsys, "advise", str(job_dir))
    assert code == 0
    assert "making the top kernels faster saves 49% of step 1 on rank 0: 150 us of 305 us" in out
    assert "removing launch overhead saves 76% of step 2 on rank 0: 100 us of 131 us" in out
    code, out, _ = _run(capsys, "advise", str(job_dir), "--step", "2", "--format", "markdown")
    assert code == 0 and out.startswith("## ") and "launch_overhead" in out and "top_kernels" in out
    assert "step 1" not in out


def test_speedup_option(job_dir, capsys):
    code, out, _ = _run(capsys, "advise", str(job_dir), "--step", "1", "--speedup", "4", "--format", "json")
    fix = {f["fix"]: f for f in json.loads(out)["fixes"]}
    assert fix["top_kernels"]["saving"] == pytest.approx(225.0)
