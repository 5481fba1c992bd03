"""Memory timeline from [memory] events (hand-built traces, hand-worked values) and on every corpus job that has them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import holotrace
from corpus import SHARED
from holotrace.analysis import memory
from holotrace.errors import AnalysisError
from tracebuilder import TraceBuilder


def _mem(tb, ts, nbytes, total, reserved, addr, dev_type=1, dev_id=0, tid=1):
    tb.raw(
        {
            "ph": "i",
            "s": "t",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": tb.pid,
            "tid": tid,
            "ts": ts,
            "args": {
                "Total Reserved": reserved,
                "Total Allocated": total,
                "Bytes": nbytes,
                "Addr": addr,
                "Device Id": dev_id,
                "Device Type": dev_type,
            },
        }
    )


@pytest.fixture
def job(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::empty", 10, 10)  # [10, 20]
    tb.cpu_op("aten::mm", 30, 40)  # [30, 70] holds aten::empty below
    tb.cpu_op("aten::empty", 35, 5)  # [35, 40]
    # cuda:0 starts with 1000 B live from before the trace: a free without an alloc first
    _mem(tb, 5, -200, 800, 2048, 1)  # free of a pre-existing block, outside any op
    _mem(tb, 12, 300, 1100, 2048, 2)  # in aten::empty @10
    _mem(tb, 36, 500, 1600, 4096, 3)  # in aten::empty @35 (innermost)
    _mem(tb, 50, -300, 1300, 4096, 2)  # in aten::mm
    _mem(tb, 70, -500, 800, 4096, 3)  # at aten::mm's end: still inside it
    # cuda:1, one pair
    _mem(tb, 31, 64, 64, 512, 9, dev_id=1)
    _mem(tb, 60, -64, 0, 512, 9, dev_id=1)
    # CPU allocation
    _mem(tb, 15, 8, 8, 0, 7, dev_type=0, dev_id=-1)
    return holotrace.load(tb.write(tmp_path).parent, cache=False)


def test_timeline_per_device(job):
    tl = memory.memory_timeline(job)
    c0 = tl[tl["device"] == "cuda:0"]
    assert c0["allocated"].tolist() == [800, 1100, 1600, 1300, 800]
    assert c0["allocated_by_events"].tolist() == [800, 1100, 1600, 1300, 800]  # from 1000 - 200
    assert c0["reserved"].tolist() == [2048, 2048, 4096, 4096, 4096]
    assert tl[tl["device"] == "cuda:1"]["allocated"].tolist() == [64, 0]
    assert sorted(tl["device"].unique()) == ["cpu", "cuda:0", "cuda:1"]


def test_peaks_and_live_operators(job):
    p = memory.memory_peaks(job).set_index("device")
    assert p.loc["cuda:0", "peak_allocated"] == 1600
    assert p.loc["cuda:0", "peak_ts"] == 36_000
    assert p.loc["cuda:0", "peak_reserved"] == 4096
    assert p.loc["cuda:0", "live_operators"] == "aten::mm > aten::empty"
    assert (p.loc["cuda:0", "alloc_bytes"], p.loc["cuda:0", "freed_bytes"]) == (800, 1000)
    assert p.loc["cuda:1", "peak_allocated"] == 64
    assert p.loc["cuda:1", "live_operators"] == "aten::mm"
    assert p.loc["cpu", "live_operators"] == "aten::empty"


def test_allocations_by_operator(job):
    a = memory.allocations_by_operator(job)
    c0 = a[a["device"] == "cuda:0"].set_index("operator")
    assert c0.loc["aten::empty", "allocations"] == 2 and c0.loc["aten::empty", "alloc_bytes"] == 800
    assert c0.loc["aten::mm", "frees"] == 2 and c0.loc["aten::mm", "freed_bytes"] == 800
    assert c0.loc["", "freed_bytes"] == 200  # the free outside any operator
    assert a["net_bytes"].sum() == 800 + 64 + 8 - (200 + 800 + 64)


def test_no_memory_events_and_views(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 5)
    job = holotrace.load(tb.write(tmp_path).parent, cache=False)
    assert memory.memory_peaks(job).empty
    assert memory.allocations_by_operator(job).empty
    from holotrace.model.view import job_view

    with pytest.raises(AnalysisError, match="Job"):
        memory.memory_timeline(job_view(job))


MEMORY_JOBS = [
    "hta_df_index_resolver",
    "kineto_resnet50_v100_2021",
    "tracelens_h100_bert_small",
    "tracelens_h100_owlv2",
    "tracelens_h100_qwen15_05b",
    "tracelens_mi300_bert_small",
    "tracelens_mi300_ddp_resnet18",
    "tracelens_mi300_qwen15_05b",
]


@pytest.mark.parametrize("name", MEMORY_JOBS)
def test_corpus_memory(name):
    folder = SHARED / "traces" / name
    if not folder.is_dir():
        pytest.skip("shared corpus not present")
    job = holotrace.load(folder, cache=False)
    ev = memory.memory_events(job)
    assert len(ev) > 0
    tl = memory.memory_timeline(job)
    # the events' own totals agree with the running sum of their bytes (or stand in for it when absent)
    assert (tl["allocated"] == tl["allocated_by_events"]).all()
    peaks = memory.memory_peaks(job)
    assert (peaks["peak_allocated"] >= 0).all()
    top = tl.groupby(["rank", "device"])["allocated"].max()
    assert peaks.set_index(["rank", "device"])["peak_allocated"].equals(top.rename("peak_allocated"))
    by_op = memory.allocations_by_operator(job)
    assert by_op["allocations"].sum() == int((ev["bytes"] > 0).sum())
    assert by_op["alloc_bytes"].sum() == int(ev["bytes"].clip(lower=0).sum())
