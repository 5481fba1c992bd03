"""Communication/computation overlap: none, partial, full, no communication, no computation."""

from __future__ import annotations

import numpy as np
import pytest
from _core_traces import GEMM, MEMCPY, NCCL, load, mixed_trace

from holotrace.analysis import overlap
from tracebuilder import TraceBuilder


def _trace(comp, comm, mem=()):
    tb = TraceBuilder(rank=0)
    t = 0
    for ts, dur in comp:
        tb.launch_kernel(GEMM, t, 1, ts, dur, stream=7)
        t += 2
    for ts, dur in comm:
        tb.launch_kernel(NCCL, t, 1, ts, dur, stream=20)
        t += 2
    for ts, dur in mem:
        tb.launch_kernel(MEMCPY, t, 1, ts, dur, stream=21, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
        t += 2
    return tb


@pytest.mark.parametrize(
    "comp,comm,mem,pctg,times",
    [
        ([(100, 50)], [(200, 50)], [], 0.0, (50, 50, 0)),  # disjoint
        ([(100, 50)], [(120, 80)], [], 37.5, (80, 50, 30)),  # partial: 30 of 80
        ([(100, 100)], [(120, 40), (150, 20)], [], 100.0, (50, 100, 50)),  # comm inside compute
        ([(100, 50), (160, 50)], [(140, 30)], [(100, 200)], 66.67, (30, 100, 20)),  # memory plays no part
    ],
)
def test_overlap_by_hand(tmp_path, comp, comm, mem, pctg, times):
    job, ta = load(_trace(comp, comm, mem), tmp_path)
    df = ta.get_comm_comp_overlap()
    assert list(df.columns) == ["rank", "comp_comm_overlap_pctg"]
    assert df.values.tolist() == [[0, pctg]]
    n = overlap.comm_comp_overlap(job).iloc[0]
    assert (n["comm_us"], n["comp_us"], n["overlap_us"]) == times
    assert n["overlap_pctg"] == pytest.approx(100 * times[2] / times[0])
    assert n["has_communication"]


def test_partial_overlap_of_mixed_trace(tmp_path):
    _, ta = load(mixed_trace(), tmp_path)
    assert ta.get_comm_comp_overlap()["comp_comm_overlap_pctg"].tolist() == [37.5]


def test_no_communication(tmp_path):
    """HTA gives NaN (kept in the facade); holotrace's own frame has no NaN."""
    job, ta = load(_trace([(0, 10)], []), tmp_path)
    assert np.isnan(ta.get_comm_comp_overlap()["comp_comm_overlap_pctg"].iloc[0])
    n = overlap.comm_comp_overlap(job)
    assert n.iloc[0][["comm_us", "overlap_us", "overlap_pctg"]].tolist() == [0.0, 0.0, 0.0]
    assert not n["has_communication"].iloc[0]
    assert not n.isna().any().any()


def test_communication_without_computation(tmp_path):
    job, ta = load(_trace([], [(0, 10)]), tmp_path)
    assert ta.get_comm_comp_overlap().values.tolist() == [[0, 0.0]]
    assert overlap.comm_comp_overlap(job)["overlap_pctg"].tolist() == [0.0]


def test_cpu_only_rank(tmp_path):
    tb = TraceBuilder(rank=2, world_size=4)
    tb.cpu_op("aten::add", 0, 10)
    job, ta = load(tb, tmp_path)
    df = ta.get_comm_comp_overlap()
    assert df["rank"].tolist() == [2] and df["comp_comm_overlap_pctg"].isna().all()
    assert overlap.comm_comp_overlap(job)["has_communication"].tolist() == [False]
