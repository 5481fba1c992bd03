"""The job graph and its replay on a three-rank job worked by hand.

Each rank r: ``ProfilerStep#1`` on the host from 0 to 50 us; a GEMM launched at 10 us (call 5 us) runs from 20 us
for d_r (100, 100, 300 us); an all-reduce launched at 30 us (call 5 us) on stream 20 starts when the GEMM ends
(its stream waits for the compute stream) and ends on every rank 50 us after the last rank arrives. Rank 2 arrives
last, at 320 us; everyone ends at 370 us, so the job step is 370 us and ranks 0 and 1 wait 200 us each.

By hand: rank 2 at the median (its GEMM 100 us) arrives at 120 us, the all-reduce ends at 170 us: 200 us saved.
Communication hidden: the all-reduce ends when the last rank arrives, 320 us: 50 us saved.
"""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from holotrace.analysis.critical_path.advice import job_advice
from holotrace.analysis.critical_path.job_graph import (
    EdgeKind,
    NodeType,
    build_job_graph,
)
from holotrace.analysis.critical_path.job_what_if import waits_caused
from holotrace.analysis.critical_path.replay import gpu_idle, replay
from tracebuilder import TraceBuilder

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _job(folder, durs=(100, 100, 300)):
    for r, d in enumerate(durs):
        tb = TraceBuilder(rank=r, world_size=len(durs), pid=100 + r, device=r)
        tb.annotation("ProfilerStep#1", 0, 50)
        tb.launch_kernel("gemm_kernel", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=d)
        tb.launch_kernel(
            ALLREDUCE,
            cpu_ts_us=30,
            cpu_dur_us=5,
            gpu_ts_us=20 + d,
            gpu_dur_us=370 - (20 + d),
            stream=20,
            launch_name="cudaLaunchKernelExC",
            collective_name="allreduce",
            process_group_name="0",
        )
        tb.write(folder)
    return holotrace.load(str(folder), cache=False)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return _job(tmp_path_factory.mktemp("three"))


def test_graph_edges(job):
    g = build_job_graph(job)
    assert g.offsets_ns == {0: 0, 1: 0, 2: 0} and g.skew_ns == 0.0 and g.issues == []
    kinds = {EdgeKind(k): int(n) for k, n in zip(*np.unique(g.kind, return_counts=True))}
    # two launches and one inferred stream wait per rank; three arrivals at, and three transfers from, one point
    assert kinds == {EdgeKind.LAUNCH: 6, EdgeKind.STREAM: 3, EdgeKind.ARRIVE: 3, EdgeKind.XFER: 3}
    arrival = np.flatnonzero(g.node_type == NodeType.ARRIVAL)
    assert len(arrival) == 1 and g.point_time[2 * arrival[0]] == 320_000.0
    xf = g.kind == EdgeKind.XFER
    assert sorted(g.lag[xf].tolist()) == [50_000.0] * 3
    assert waits_caused(g).to_dict() == {2: 400_000.0}


def test_unmodified_replay_gives_the_measured_step(job):
    r = replay(build_job_graph(job))
    assert r.steps["measured_ms"].tolist() == [pytest.approx(0.370)]
    assert r.steps["replayed_ms"].tolist() == [pytest.approx(0.370)]
    assert r.steps["slowest_rank"].tolist() == [0]  # all end together; ties go to the lowest rank
    idle = gpu_idle(build_job_graph(job)).set_index("rank")["idle_ms"]
    # 20 us before the GEMM; ranks 0 and 1 also wait 200 us in the all-reduce for rank 2 (a wait is idle)
    assert idle.to_dict() == pytest.approx({0: 0.220, 1: 0.220, 2: 0.020})


def test_fixes_by_hand(job):
    a = job_advice(job)
    by = {f: row for f, row in zip(a.fixes["fix"], a.fixes.itertuples())}
    assert by["straggler"].rank == 2
    assert by["straggler"].saving_ms == pytest.approx(0.200)
    assert by["straggler"].saving_pct == pytest.approx(200 / 370 * 100)
    assert by["straggler"].predicted_step_ms == pytest.approx(0.170)
    assert by["communication"].saving_ms == pytest.approx(0.050)
    assert a.fixes["fix"].iloc[0] == "straggler"
    assert a.costliest.rank == 2 and "arrives last" in a.costliest.why and ALLREDUCE in a.costliest.why
    assert "gemm_kernel" in by["straggler"].evidence


def test_combined_fixes(job):
    a = job_advice(job, combine=[["straggler", "communication"]], only=("straggler", "communication"))
    both = a.fixes[a.fixes["fix"] == "straggler+communication"]
    # rank 2 at the median arrives at 120 us, the transfer is gone: the step ends at 120 us
    assert both["saving_ms"].iloc[0] == pytest.approx(0.250)


def test_unmatched_collectives_are_reported(tmp_path):
    for r in range(2):
        tb = TraceBuilder(rank=r, world_size=2, pid=100 + r, device=r)
        tb.annotation("ProfilerStep#1", 0, 50)
        for k in range(1 + r):  # rank 1 holds one all-reduce more
            tb.launch_kernel(
                ALLREDUCE,
                cpu_ts_us=10 + 20 * k,
                cpu_dur_us=5,
                gpu_ts_us=20 + 100 * k,
                gpu_dur_us=50,
                stream=20,
                launch_name="cudaLaunchKernelExC",
            )
        tb.write(tmp_path)
    g = build_job_graph(holotrace.load(str(tmp_path), cache=False))
    assert (g.node_coll[g.node_type == NodeType.GPU] == -1).all()
    assert len(g.issues) == 1 and "1 to 2" in g.issues[0] and "not matched" in g.issues[0]


def test_job_critical_path(job):
    """The step ends with rank 0's all-reduce (ties: lowest rank), 50 us after the arrival of rank 2, which
    launched its GEMM 10 us after the step began and ran it for 300 us."""
    from holotrace.analysis.critical_path.job_path import (
        job_critical_path,
        path_summary,
    )

    p = job_critical_path(replay(build_job_graph(job)))
    got = [(r.rank, r.kind, r.name, round(r.start_ms * 1e3, 3), round(r.dur_ms * 1e3, 3)) for r in p.itertuples()]
    assert got == [
        (2, "cpu_gap", "cudaLaunchKernel", 0.0, 10.0),
        (2, "launch", "gemm_kernel", 10.0, 10.0),
        (2, "duration", "gemm_kernel", 20.0, 300.0),
        (0, "xfer", ALLREDUCE, 320.0, 50.0),
    ]
    assert path_summary(p)["ms"].sum() == pytest.approx(0.370)


def test_job_path_hops_and_flows(job, tmp_path):
    """The path's hops: rank 2's launch and stream wait, then from rank 2's all-reduce start (the last arrival) to
    rank 0's all-reduce end; in the merged timeline they are flow arrows from rank to rank."""
    import json

    from holotrace.analysis.critical_path.job_path import job_path_hops
    from holotrace.render.merged_trace import write_merged_trace

    hops = job_path_hops(replay(build_job_graph(job)))
    names = {r: job.strings.decode(job.rank(r).columns["name"]) for r in job.ranks}
    got = [
        (
            h.kind,
            h.from_rank,
            names[h.from_rank][h.from_row],
            h.from_end,
            h.to_rank,
            names[h.to_rank][h.to_row],
            h.to_end,
        )
        for h in hops.itertuples()
    ]
    assert got == [
        ("launch", 2, "cudaLaunchKernel", False, 2, "gemm_kernel", False),
        ("stream", 2, "gemm_kernel", True, 2, ALLREDUCE, False),
        ("xfer", 2, ALLREDUCE, False, 0, ALLREDUCE, True),
    ]
    out = tmp_path / "t.json"
    write_merged_trace(job, out, job_path=hops)
    ev = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "job_critical_path"]
    last = [e for e in ev if e["args"]["kind"] == "xfer"]
    assert [(e["ph"], e["pid"], e["ts"]) for e in last] == [("s", 2, 320.0), ("f", 0, 369.999)]
