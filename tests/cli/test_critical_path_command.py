"""``holotrace critical-path`` on a built trace: the breakdown per step, step ranges, and the overlay in --output.

Rank 0, two steps, one CPU thread issuing operators back to back (1 us of self time, the launch call, 1 us).
Step 1 (GPU-bound): three 100 us kernels, launch calls of 4 us; the first kernel starts when its launch call
returns, the others queue behind it. The path: 1 us of the first operator, the 4 us launch delay, the three
kernels back to back (300 us). Step 2 (launch-bound): ten 2 us kernels behind
10 us launch calls, 2 us of self time before each launch and 1 us after.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from holotrace.cli import main
from tracebuilder import TraceBuilder

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"


def build_steps(folder: Path, *, rank: int = 0, world_size: int = 1) -> Path:
    tb = TraceBuilder(rank=rank, world_size=world_size)

    def step(n, t0, ops, pre, launch, post, kernel_us):
        t, free = t0, 0.0
        for _ in range(ops):
            ls, le = t + pre, t + pre + launch
            ks = max(le, free)
            tb.cpu_op("aten::mm", t, pre + launch + post)
            tb.launch_kernel(GEMM, ls, launch, ks, kernel_us)
            free, t = ks + kernel_us, le + post
        end = max(t, free) + 1.0
        tb.runtime("cudaDeviceSynchronize", t, end - t, correlation=90000 + n)
        tb.raw(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Context Sync",
                "pid": tb.device,
                "tid": -1,
                "ts": end - 1.0,
                "dur": 1.0,
                "args": {"cuda_sync_kind": "Context Sync", "stream": -1, "correlation": 90000 + n, "device": tb.device},
            }
        )
        tb.annotation(f"ProfilerStep#{n}", t0, end - t0)

    step(1, 1000.0, 3, 1.0, 4.0, 1.0, 100.0)
    step(2, 2000.0, 10, 2.0, 10.0, 1.0, 2.0)
    return tb.write(folder)


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cpjob")
    build_steps(folder)
    return folder


def _run(capsys, *args):
    code = main([*args, "--no-cache"])
    out = capsys.readouterr()
    return code, out.out, out.err


def _by_bound(doc, step):
    return {r["bound_by"]: r["duration us"] for r in doc["steps"] if r["step"] == step}


def test_breakdown_per_step(job_dir, capsys):
    code, out, _ = _run(capsys, "critical-path", str(job_dir), "--format", "json")
    assert code == 0
    doc = json.loads(out)
    one = _by_bound(doc, 1)
    assert one["gpu_compute_bound"] == pytest.approx(300.0)
    assert one["gpu_kernel_launch_overhead"] == pytest.approx(4.0)
    assert one["cpu_bound"] == pytest.approx(1.0)
    assert [r["path us"] for r in doc["steps"] if r["step"] == 1] == [pytest.approx(305.0)] * len(one)
    two = _by_bound(doc, 2)
    # nine operators of 13 us on the CPU, then the last one's 2 us + 10 us launch delay + its 2 us kernel
    assert sum(two.values()) == pytest.approx(9 * 13 + 2 + 10 + 2)
    assert two["gpu_kernel_launch_overhead"] == pytest.approx(10.0)
    assert two["gpu_compute_bound"] == pytest.approx(2.0)


def test_step_selection_and_markdown(job_dir, capsys):
    code, out, _ = _run(capsys, "critical-path", str(job_dir), "--step", "2", "--format", "markdown")
    assert code == 0 and out.startswith("## ") and "| 2 " in out and "| 1 " not in out
    code, out, _ = _run(capsys, "critical-path", str(job_dir), "--step", "1-2", "--format", "json")
    assert sorted({r["step"] for r in json.loads(out)["steps"]}) == [1, 2]


def test_single_rank_not_zero(job_dir, tmp_path, capsys):
    """A job holding only rank 5 of 8: the default rank is the job's own, and both the rank's and the job's
    critical path equal those of the same events recorded as rank 0."""
    build_steps(tmp_path, rank=5, world_size=8)
    for extra in ([], ["--job"]):
        code, out, err = _run(capsys, "critical-path", str(tmp_path), "--format", "json", *extra)
        assert code == 0, err
        _, ref, _ = _run(capsys, "critical-path", str(job_dir), "--format", "json", *extra)
        doc, ref = json.loads(out), json.loads(ref)
        if extra:
            assert {r["rank"] for r in doc["job_path"]} == {5}
            for r in doc["job_path"] + ref["job_path"]:
                r.pop("rank")
            assert doc["job_path"] == ref["job_path"]
        else:
            assert doc["steps"] == ref["steps"]
    code, out, err = _run(capsys, "critical-path", str(tmp_path), "--rank", "0")
    assert code == 2 and "no rank 0" in err and "[5]" in err


def test_missing_step_is_a_usage_error(job_dir, capsys):
    code, _, err = _run(capsys, "critical-path", str(job_dir), "--step", "7")
    assert code == 2 and "step(s) [7] not on rank 0" in err and "--step" in err


def test_overlay_written_into_output_only(job_dir, capsys, tmp_path):
    before = sorted(p.name for p in job_dir.iterdir())
    out_dir = tmp_path / "o"
    code, out, _ = _run(
        capsys, "critical-path", str(job_dir), "--step", "1", "--output", str(out_dir), "--format", "json"
    )
    assert code == 0
    assert sorted(p.name for p in job_dir.iterdir()) == before  # nothing beside the trace
    overlay = out_dir / "overlaid_critical_path_rank-0.pt.trace.json"
    assert json.loads(out)["meta"]["overlays"] == {"1": str(overlay)}
    assert sorted(p.name for p in out_dir.iterdir()) == [overlay.name, "steps.csv"]
    doc = json.loads(overlay.read_text())
    ev = doc["traceEvents"]
    critical = [e for e in ev if e.get("ph") == "X" and e.get("args", {}).get("critical") == 1]
    # the first operator, its launch call, the three kernels (the path ends at the last kernel: the
    # synchronisation's end ties with it and comes later)
    assert sorted(e["name"] for e in critical) == sorted(["aten::mm", "cudaLaunchKernel", GEMM, GEMM, GEMM])
    flows = [e for e in ev if e.get("cat") == "critical_path"]
    types = sorted(e["args"]["type"] for e in flows if e["ph"] == "s")
    assert types == ["critical_path_kernel_launch_delay"]
    assert min(e["id"] for e in flows) > max(e["id"] for e in ev if e.get("cat") == "ac2g")
    # only critical complete events are kept (plus annotations and non-X events)
    assert all(e.get("ph") != "X" or e.get("cat") == "user_annotation" or e in critical for e in ev)


def test_overlay_per_step_for_a_range(job_dir, capsys, tmp_path):
    code, _, _ = _run(capsys, "critical-path", str(job_dir), "--output", str(tmp_path / "o"))
    assert code == 0
    for s in (1, 2):
        assert (tmp_path / "o" / f"step-{s}" / "overlaid_critical_path_rank-0.pt.trace.json").exists()


def test_gzip_trace_overlay_stays_gzip(tmp_path, capsys):
    p = build_steps(tmp_path / "j")
    gz = p.with_name(p.name + ".gz")
    gz.write_bytes(gzip.compress(p.read_bytes()))
    p.unlink()
    code, _, _ = _run(capsys, "critical-path", str(gz), "--step", "1", "--output", str(tmp_path / "o"))
    assert code == 0
    data = (tmp_path / "o" / ("overlaid_critical_path_" + gz.name)).read_bytes()
    assert json.loads(gzip.decompress(data))["traceEvents"]


def test_job_path(job_dir, capsys):
    """--job: the job's path per step adds up to the job step (306 us and 132 us, see test_advise_command)."""
    code, out, _ = _run(capsys, "critical-path", str(job_dir), "--job", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    per = {}
    for r in doc["job_path_summary"]:
        per[r["step"]] = per.get(r["step"], 0.0) + r["ms"]
    assert per == {1: pytest.approx(0.306), 2: pytest.approx(0.132)}
    kinds = {r["kind"] for r in doc["job_path"] if r["step"] == 1}
    assert "duration" in kinds and {r["name"] for r in doc["job_path"] if r["kind"] == "duration"} >= {GEMM}
    code = main(["critical-path", str(job_dir), "--job", "--step", "9", "--no-cache"])
    assert code != 0 and "not in the job" in capsys.readouterr().err


def test_job_path_timeline(job_dir, tmp_path, capsys):
    out = tmp_path / "o"
    code, text, _ = _run(capsys, "critical-path", str(job_dir), "--job", "--output", str(out))
    assert code == 0 and "as flow arrows" in text
    doc = json.loads((out / "job_critical_path.pt.trace.json").read_text())
    flows = [e for e in doc["traceEvents"] if e.get("cat") == "job_critical_path"]
    # each step: the launch of its first kernel on the path (step 1: the first GEMM, then the GPU is the path;
    # step 2: the last kernel, the host's launches being the path), then that GPU's end to the synchronize
    hops = [(e["args"]["step"], e["args"]["kind"]) for e in flows if e["ph"] == "s"]
    assert hops == [(1, "launch"), (1, "sync"), (2, "launch"), (2, "sync")]
