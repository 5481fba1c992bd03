"""``holotrace launches | sequences | annotations | stragglers`` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from holotrace.cli import main
from tracebuilder import TraceBuilder

DEV = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    """Two ranks, two steps. Each step: ``blk`` launches gemm, relu, gemm under GPU annotation ``fwd``;
    an all-reduce closes the step. Rank 1 computes 300 µs longer (the straggler); one late launch (delay 500 µs)."""
    folder = tmp_path_factory.mktemp("job")
    for r in range(2):
        tb = TraceBuilder(rank=r, world_size=2, pid=100 + r, device=r)
        for i in range(2):
            t0 = 2000.0 * i
            tb.annotation(f"ProfilerStep#{i + 1}", t0, 2000)
            tb.annotation("fwd", t0 + 20, 900 + (300 if r == 1 else 0), tid=7, cat="gpu_user_annotation")
            tb.cpu_op("blk", t0 + 1, 30)
            tb.launch_kernel("void gemm<float>(float*)", t0 + 2, 5, t0 + 20, 200)
            tb.launch_kernel("relu", t0 + 10, 5, t0 + 230, 100)
            tb.launch_kernel(
                "void gemm<float>(float*)",
                t0 + 20,
                5,
                t0 + 340 + (500 if i == 1 and r == 0 else 0),
                580 + (300 if r == 1 else 0) - (500 if i == 1 and r == 0 else 0),
            )
            enter = t0 + 920 + (300 if r == 1 else 0)
            tb.launch_kernel(DEV, t0 + 40, 5, enter, t0 + 1900 - enter, stream=20)
        tb.write(folder)
    return folder


def _run(capsys, *args):
    code = main([*args, "--no-cache"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_launches_table_and_json(job_dir, capsys):
    code, out, _ = _run(capsys, "launches", str(job_dir))
    assert code == 0
    assert "Kernel launches per rank" in out and "Worst launch delays (> 100 us)" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, _ = _run(capsys, "launches", str(job_dir), "--format", "json")
    doc = json.loads(out)
    summ = {row["rank"]: row for row in doc["launch_summary"]}
    assert summ[0]["launches"] == 8 and summ[1]["launches"] == 8
    # late (> 100 us): per step the relu (215), the 2nd gemm (315; 815 in rank 0's delayed step 2), the all-reduce
    assert summ[0]["launch_delay_outliers"] == 6 and summ[1]["launch_delay_outliers"] == 6
    worst = doc["worst_launch_delays"][0]  # rank 1's all-reduce: launched at 45 us, entered at 1220 us
    assert (worst["rank"], worst["step"], worst["delay us"]) == (1, 1, 1175.0)
    # JSON carries the full name (the table shortens it)
    delayed = [
        w
        for w in doc["worst_launch_delays"]
        if w["kernel"] == "void gemm<float>(float*)" and w["rank"] == 0 and w["step"] == 2
    ]
    assert delayed[0]["delay us"] == 815.0


def test_launches_output_dir(job_dir, capsys, tmp_path):
    code, _out, _ = _run(
        capsys, "launches", str(job_dir), "--output", str(tmp_path / "o"), "--launch-delay-cutoff", "1000"
    )
    assert code == 0
    files = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert files == ["launch_summary.csv", "launches.csv", "slowest_launch_calls.csv", "worst_launch_delays.csv"]


def test_sequences(job_dir, capsys, tmp_path):
    code, out, _ = _run(capsys, "sequences", str(job_dir), "--op", "blk", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [(r["pattern"], r["count"]) for r in doc["sequences"]] == [
        ("blk|void gemm<float>(float*)|relu|void gemm<float>(float*)", 2)
    ]
    code, out, _ = _run(capsys, "sequences", str(job_dir), "--op", "blk", "--rank", "1", "--overlay", str(tmp_path))
    assert code == 0 and "blk > gemm<float> > relu > gemm<float>" in out  # without void and arguments
    assert (tmp_path / "overlaid_rank-1.pt.trace.json").exists()
    code, out, _ = _run(capsys, "sequences", str(job_dir), "--op", "nothing")
    assert code == 0 and "no instance of 'nothing'" in out


def test_sequences_requires_op(job_dir, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sequences", str(job_dir)])
    assert e.value.code == 2


def test_annotations(job_dir, capsys):
    code, out, _ = _run(capsys, "annotations", str(job_dir), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["meta"]["source"] == "gpu"
    fwd = {r["rank"]: r for r in doc["annotation_time"] if r["name"] == "fwd"}
    assert fwd[0]["sum_us"] == 1800.0 and fwd[1]["sum_us"] == 2400.0
    code, out, _ = _run(capsys, "annotations", str(job_dir), "--cpu")
    assert code == 0 and "ProfilerStep#1" in out and "user_annotation (CPU timeline)" in out


def test_stragglers(job_dir, capsys):
    code, out, _ = _run(capsys, "stragglers", str(job_dir))
    assert code == 0
    assert "Who the others wait for" in out and "HTA late-start candidates: [1" in out
    code, out, _ = _run(capsys, "stragglers", str(job_dir), "--format", "json")
    doc = json.loads(out)
    assert doc["straggler_summary"][0]["rank"] == 1
    assert doc["straggler_summary"][0]["waited_for_us"] == pytest.approx(600.0)
    assert [r["rank"] for r in doc["straggler_report"] if r["straggler"]] == [1, 1]


def test_subprocess_smoke(job_dir):
    r = subprocess.run(
        [sys.executable, "-m", "holotrace.cli", "stragglers", str(job_dir), "--format", "markdown", "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("## holotrace stragglers")
