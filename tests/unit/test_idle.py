"""Idle-time breakdown on hand-built traces: every category, worked out by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _core_traces import GEMM, load

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import idle
from holotrace.model.classify import HTA, HTA_FIXED
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
STATS_COLUMNS = ["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]


def idle_trace() -> TraceBuilder:
    """Stream 20 holds one kernel (written first); stream 7 has one gap of each category.

    stream 7:  K1 gpu [10,20)   launch [0,5)
               K2 gpu [25,30)   launch [6,8)     gap 5,  launched before K1 ended  → kernel_wait 5
               K3 gpu [100,110) launch [9,10)    gap 70, launched early, ≥ 30 µs  → other 70
               K4 gpu [160,170) launch [150,155) launch starts after K3 ended    → host_wait 50
    """
    tb = TraceBuilder(rank=0)
    tb.launch_kernel(GEMM, 1, 1, 40, 10, stream=20)
    tb.launch_kernel(GEMM, 0, 5, 10, 10, stream=7)
    tb.launch_kernel(GEMM, 6, 2, 25, 5, stream=7)
    tb.launch_kernel(GEMM, 9, 1, 100, 10, stream=7)
    tb.launch_kernel(GEMM, 150, 5, 160, 10, stream=7)
    return tb


def test_hta_facade_by_hand(tmp_path):
    _, ta = load(idle_trace(), tmp_path)
    df, stats = ta.get_idle_time_breakdown(show_idle_interval_stats=True)
    assert list(df.columns) == IDLE_COLUMNS
    # streams in order of first appearance; the single-kernel stream gets one 'other' row of 0 and NaN ratio
    assert df[["rank", "stream", "idle_category", "idle_time"]].values.tolist() == [
        [0, 20, "other", 0.0],
        [0, 7, "host_wait", 50.0],
        [0, 7, "kernel_wait", 5.0],
        [0, 7, "other", 70.0],
    ]
    assert np.isnan(df["idle_time_ratio"].iloc[0])
    assert df["idle_time_ratio"].iloc[1:].tolist() == [0.4, 0.04, 0.56]
    assert list(df.index) == [0, 1, 2, 3]
    assert stats.index.name == "idle_category" and list(stats.columns) == STATS_COLUMNS
    assert list(stats.index) == ["other", "host_wait", "kernel_wait", "other"]
    assert stats["count"].tolist() == [0.0, 1.0, 1.0, 1.0]  # the first kernel's missing gap is not counted
    assert stats.iloc[3][["mean", "min", "50%", "max"]].tolist() == [70.0, 70.0, 70.0, 70.0]


def test_native_by_hand(tmp_path):
    job, _ = load(idle_trace(), tmp_path)
    df = idle.idle_breakdown(job)
    assert df[["stream", "idle_category", "idle_us", "gaps"]].values.tolist() == [
        [7, "host_wait", 50.0, 1],
        [7, "kernel_wait", 5.0, 1],
        [7, "other", 70.0, 1],
        [20, "host_wait", 0.0, 0],
        [20, "kernel_wait", 0.0, 0],
        [20, "other", 0.0, 0],
    ]
    assert df["idle_ratio"].tolist() == [0.4, 0.04, 0.56, 0.0, 0.0, 0.0]
    st = idle.idle_interval_stats(job)
    assert st[["stream", "idle_category", "count"]].values.tolist() == [
        [7, "host_wait", 1],
        [7, "kernel_wait", 1],
        [7, "other", 1],
        [20, "other", 0],
    ]
    assert st["mean_us"].tolist()[:3] == [50.0, 5.0, 70.0] and np.isnan(st["mean_us"].iloc[3])
    assert df["operations"].tolist() == [1, 1, 2, 0, 0, 1]  # a stream's first operation counts under other


def test_facade_is_the_analysis_under_hta_rules(tmp_path):
    """The facade's frame is idle_breakdown on HTA's view, with the categories that occur, rounded."""
    job, ta = load(idle_trace(), tmp_path)
    b = idle.idle_breakdown(job_view(job, HTA), rules=HTA_FIXED)
    assert b["stream"].tolist() == [20] * 3 + [7] * 3  # HTA's order: first appearance
    assert b["idle_us"].tolist() == [0.0, 0.0, 0.0, 50.0, 5.0, 70.0]
    assert np.isnan(b["idle_ratio"].iloc[:3]).all()  # HTA: a stream that never idles has no ratio
    df, _ = ta.get_idle_time_breakdown()
    assert len(df) == int((b["operations"] > 0).sum()) == 4


def test_consecutive_kernel_delay_zero_moves_kernel_wait_to_other(tmp_path):
    job, ta = load(idle_trace(), tmp_path)
    df, _ = ta.get_idle_time_breakdown(streams=[7], consecutive_kernel_delay=0)
    assert df[["idle_category", "idle_time"]].values.tolist() == [["host_wait", 50.0], ["other", 75.0]]
    n = idle.idle_breakdown(job, streams=[7], consecutive_kernel_delay_us=0)
    assert n["idle_us"].tolist() == [50.0, 0.0, 75.0]


def test_streams_argument_and_unknown_streams(tmp_path):
    _, ta = load(idle_trace(), tmp_path)
    df, _ = ta.get_idle_time_breakdown(streams=[7, 999])
    assert df["stream"].tolist() == [7, 7, 7]
    empty, stats = ta.get_idle_time_breakdown(streams=[999], show_idle_interval_stats=True)
    assert empty.empty and list(empty.columns) == IDLE_COLUMNS and stats.empty


def test_overlapping_kernels_on_one_stream(tmp_path):
    """HTA sums negative gaps (FIX + COMPAT); holotrace measures from the latest end and never goes negative."""
    tb = TraceBuilder(rank=0)
    for ts, dur in ((0, 50), (40, 20), (45, 3), (70, 10)):
        tb.gpu(GEMM, ts, dur, stream=7)
    job, ta = load(tb, tmp_path)
    df, _ = ta.get_idle_time_breakdown()
    # HTA: gaps 40−50 = −10, 45−60 = −15, 70−48 = 22 → all kernel_wait, −3
    assert df[["idle_category", "idle_time"]].values.tolist() == [["kernel_wait", -3.0], ["other", 0.0]]
    n = idle.idle_breakdown(job)
    # holotrace: gaps 0, 0, 70−60 = 10 → kernel wait 10 = span 80 − union 70
    assert n["idle_us"].tolist() == [0.0, 10.0, 0.0]


def test_rank_without_kernels_and_unknown_rank(tmp_path):
    from holotrace.errors import RankNotFoundError

    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    job, ta = load(tb, tmp_path)
    df, stats = ta.get_idle_time_breakdown(show_idle_interval_stats=True)  # HTA: ValueError
    assert df.empty and stats.empty and list(df.columns) == IDLE_COLUMNS
    assert idle.idle_breakdown(job).empty and idle.idle_interval_stats(job).empty
    with pytest.raises(RankNotFoundError, match="rank 4"):
        ta.get_idle_time_breakdown(ranks=[4])


def test_index_zero_quirk_is_opt_in(tmp_path):
    """HTA looks up index_correlation 0 as the event with index 0 (spec 21 §5, FIX); hta_compat=True reproduces it.

    Index 0 is an annotation at 500 µs; two kernels on stream 7 carry correlations without launches.
    """
    tb = TraceBuilder(rank=0)
    tb.annotation("step", 500, 10)
    tb.gpu(GEMM, 0, 10, stream=7, correlation=5)
    tb.gpu(GEMM, 100, 10, stream=7, correlation=6)
    doc = tb.document()
    doc["traceEvents"] = tb.events  # no metadata first: the annotation is event 0
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    job = holotrace.load(path, cache=False)
    fixed, _ = TraceAnalysis(job=job).get_idle_time_breakdown()
    assert fixed[["idle_category", "idle_time"]].values.tolist() == [["other", 90.0]]
    quirk, _ = TraceAnalysis(job=job, hta_compat=True).get_idle_time_breakdown()
    assert quirk[["idle_category", "idle_time"]].values.tolist() == [["host_wait", 90.0], ["other", 0.0]]
    assert idle.idle_breakdown(job)["idle_us"].tolist() == [0.0, 0.0, 90.0]  # holotrace's rules: no quirk


def test_idle_by_rank_sums_streams_by_hand():
    import pandas as pd

    b = pd.DataFrame(
        {
            "rank": [0, 0, 0, 0, 0, 0, 1, 1, 1],
            "stream": [7, 7, 7, 20, 20, 20, 7, 7, 7],
            "idle_category": ["host_wait", "kernel_wait", "other"] * 3,
            "idle_us": [10.0, 0.0, 30.0, 0.0, 40.0, 20.0, 0.0, 0.0, 0.0],
        }
    )
    out = idle.idle_by_rank(b)
    assert out["rank"].tolist() == [0, 1]
    assert out["idle_us"].tolist() == [100.0, 0.0]
    assert out.loc[0, ["host_wait_pctg", "kernel_wait_pctg", "other_pctg"]].tolist() == [10.0, 40.0, 50.0]
    assert out.loc[1, ["host_wait_pctg", "kernel_wait_pctg", "other_pctg"]].tolist() == [0.0, 0.0, 0.0]
