"""``holotrace timeline --critical-path``: each step's critical path drawn as flow arrows in the merged file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tracebuilder import TraceBuilder


def _rank(rank: int, kernel_us: float) -> TraceBuilder:
    """One step: ``aten::mm`` launches ``gemm`` (launch call 12-16 µs, kernel from 20 µs), then the CPU waits in
    ``cudaDeviceSynchronize``. The path: mm start -> launch start (2 µs, same thread) -> gemm start (8 µs launch
    delay, across tracks) -> gemm end."""
    tb = TraceBuilder(rank=rank, world_size=2)
    tb.annotation("ProfilerStep#1", 0, 400)
    tb.cpu_op("aten::mm", 10, 20)
    tb.launch_kernel("gemm", 12, 4, 20, kernel_us)
    tb.runtime("cudaDeviceSynchronize", 40, kernel_us - 15, correlation=9001)
    tb.raw(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Context Sync",
            "pid": 0,
            "tid": 7,
            "ts": 20 + kernel_us,
            "dur": 1,
            "args": {"cuda_sync_kind": "Context Sync", "stream": -1, "correlation": 9001, "device": 0},
        }
    )
    return tb


def _merged(tmp_path, *extra):
    folder = tmp_path / "job"
    for r, k in ((0, 100.0), (1, 300.0)):
        _rank(r, k).write(folder)
    out = tmp_path / "merged.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "holotrace.cli",
            "timeline",
            str(folder),
            "--no-cache",
            "--quiet",
            "-o",
            str(out),
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout, json.loads(out.read_text())


def test_flows_on_the_path_events(tmp_path):
    stdout, doc = _merged(tmp_path, "--critical-path")
    assert "the critical path of 2 step(s) as flows" in stdout
    ev = doc["traceEvents"]
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    # one arrow per rank: the launch delay (the other path edges stay inside one event or one thread's stack)
    assert len(flows) == 4
    by_id = {}
    for e in flows:
        by_id.setdefault(e["id"], []).append(e)
    # ids above the files' own flow ids (the ac2g ids 1000 of each rank)
    assert sorted(by_id) == [1001, 1002]
    durations = [e for e in ev if e["ph"] == "X"]

    def holder(f):
        """The duration events on the flow's track that contain its instant."""
        return [
            e
            for e in durations
            if e["pid"] == f["pid"] and e["tid"] == f["tid"] and e["ts"] <= f["ts"] <= e["ts"] + e["dur"]
        ]

    for _fid, (s, f) in by_id.items():
        assert (s["ph"], f["ph"], f["bp"]) == ("s", "f", "e")
        assert s["pid"] == f["pid"] and s["args"]["type"] == "critical_path_kernel_launch_delay"
        assert s["args"]["weight_ns"] == 8000 and s["args"]["step"] == 1
        # Perfetto binds a flow to the innermost slice holding its instant
        inner = max(holder(s), key=lambda e: e["ts"])
        assert inner["name"] == "cudaLaunchKernel" and inner["args"]["critical_path"] == 1
        assert [e["name"] for e in holder(f)] == ["gemm"] and holder(f)[0]["args"]["critical_path"] == 1
        assert (s["ts"], f["ts"]) == (12.0, 20.0)
    # the path's events are flagged with their step, and only they
    flagged = sorted((e["pid"], e["name"]) for e in durations if "critical_path" in e["args"])
    assert flagged == [(r, n) for r in (0, 1) for n in sorted(["aten::mm", "cudaLaunchKernel", "gemm"])]


def test_without_the_option_no_flows(tmp_path):
    _, doc = _merged(tmp_path)
    assert not [e for e in doc["traceEvents"] if e["ph"] in ("s", "f") or "critical_path" in e.get("args", {})]


def test_no_steps_is_a_usage_error(tmp_path):
    tb = TraceBuilder()
    tb.launch_kernel("gemm", 12, 4, 20, 10)
    tb.write(tmp_path / "nostep")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "holotrace.cli",
            "timeline",
            str(tmp_path / "nostep"),
            "--no-cache",
            "--quiet",
            "--critical-path",
            "-o",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "no ProfilerStep" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
