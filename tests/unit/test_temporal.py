"""Temporal breakdown on hand-built traces (values worked out by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from _core_traces import GEMM, NCCL, OTHER, load, mixed_trace

from holotrace.analysis import temporal
from tracebuilder import TraceBuilder

# mixed_trace: span 100→320 = 220; union [100,200)+[250,260)+[300,320) = 130 → idle 90;
# compute = gemm 50 + relu 20 = 70; non-compute = 130 − 70 = 60.


def test_native_breakdown_by_hand(tmp_path):
    job, _ = load(mixed_trace(), tmp_path)
    row = temporal.breakdown(job).iloc[0]
    assert row["rank"] == 0 and row["gpu_events"] == 4
    assert (row["span_us"], row["busy_us"], row["idle_us"], row["compute_us"], row["non_compute_us"]) == (
        220,
        130,
        90,
        70,
        60,
    )
    assert row["idle_pctg"] == pytest.approx(100 * 90 / 220)
    assert row["compute_pctg"] == pytest.approx(100 * 70 / 220)
    assert row["non_compute_pctg"] == pytest.approx(100 * 60 / 220)


def test_hta_facade_by_hand(tmp_path):
    _, ta = load(mixed_trace(), tmp_path)
    df = ta.get_temporal_breakdown()
    assert list(df.columns) == [
        "rank",
        "idle_time(us)",
        "compute_time(us)",
        "non_compute_time(us)",
        "kernel_time(us)",
        "idle_time_pctg",
        "compute_time_pctg",
        "non_compute_time_pctg",
    ]
    assert df.iloc[0].tolist() == [0, 90.0, 70.0, 60.0, 220.0, 40.91, 31.82, 27.27]
    assert df["kernel_time(us)"].dtype == np.float64 and df["rank"].dtype == np.int64


def test_sync_events_are_gpu_time_only_in_compat_mode(tmp_path):
    """HTA counts stream-carrying sync events as GPU time (S-stream); holotrace does not (FIX + COMPAT)."""
    job, ta = load(mixed_trace(sync=True), tmp_path)
    # compat: span 100→410 = 310, union 130 + 10 = 140, idle 170, non-compute 70 (sync is OTHER)
    assert ta.get_temporal_breakdown().iloc[0, 1:5].tolist() == [170.0, 70.0, 70.0, 310.0]
    native = temporal.breakdown(job).iloc[0]
    assert (native["span_us"], native["idle_us"]) == (220, 90)


def test_other_kernel_is_busy_but_not_compute(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel(GEMM, 0, 5, 10, 10)
    tb.launch_kernel(OTHER, 6, 5, 30, 10)
    job, ta = load(tb, tmp_path)
    row = temporal.breakdown(job).iloc[0]
    assert (row["span_us"], row["busy_us"], row["compute_us"], row["non_compute_us"], row["idle_us"]) == (
        30,
        20,
        10,
        10,
        10,
    )
    assert ta.get_temporal_breakdown().iloc[0, 1:5].tolist() == [10.0, 10.0, 10.0, 30.0]


def test_rank_without_kernels(tmp_path):
    """HTA raises IndexError; holotrace reports zeros and NaN percentages."""
    tb = TraceBuilder(rank=3, world_size=4)
    tb.cpu_op("aten::add", 0, 10)
    job, ta = load(tb, tmp_path)
    df = ta.get_temporal_breakdown()
    assert df.iloc[0, :5].tolist() == [3, 0.0, 0.0, 0.0, 0.0]
    assert df.iloc[0, 5:].isna().all()
    n = temporal.breakdown(job).iloc[0]
    assert n["gpu_events"] == 0 and n["span_us"] == 0 and np.isnan(n["idle_pctg"])


def test_per_step_rows(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.annotation("ProfilerStep#2", 100, 100)
    tb.launch_kernel(GEMM, 10, 5, 20, 30)  # step 1: [20,50)
    tb.launch_kernel(NCCL, 20, 5, 40, 30, stream=20)  # step 1: [40,70)
    tb.launch_kernel(GEMM, 110, 5, 150, 10)  # step 2: [150,160)
    job, _ = load(tb, tmp_path)
    df = temporal.breakdown(job, per_step=True)
    assert df[["rank", "step", "gpu_events"]].values.tolist() == [[0, 1, 2], [0, 2, 1]]
    s1 = df.iloc[0]
    assert (s1["span_us"], s1["busy_us"], s1["idle_us"], s1["compute_us"], s1["non_compute_us"]) == (50, 50, 0, 30, 20)
    assert df.iloc[1][["span_us", "compute_us"]].tolist() == [10, 10]


def _rounded(tmp_path, memset_dur: float):
    """A fractional-µs trace: gemm [0,10) and a memset at 14.5 µs, which HTA rounds to start 15, end ⌊14.5+dur⌋."""
    tb = TraceBuilder(rank=0)
    tb.gpu(GEMM, 0.0, 10.0, stream=7)
    tb.gpu("Memset (Device)", 14.5, memset_dur, stream=7, cat="gpu_memset")
    return load(tb, tmp_path, name=f"r{memset_dur}")


def test_negative_durations_from_hta_rounding_do_not_fail(tmp_path):
    """HTA's rounding leaves dur = −1 on sub-µs events and then fails an assertion; holotrace counts them as 0."""
    # HTA: groups [0,10) and [15,14) → span 14, busy 9, idle 5, compute 10, non-compute −1 → AssertionError.
    # holotrace: the memset is [15,15) → span 15, busy 10, idle 5, compute 10, non-compute 0
    _, ta = _rounded(tmp_path, 0.3)
    assert ta.view[0]["dur"].tolist() == [10.0, -1.0]
    assert ta.get_temporal_breakdown().iloc[0, 1:5].tolist() == [5.0, 10.0, 0.0, 15.0]
    # with well-formed durations (memset [15,16)) the computation is HTA's unchanged
    _, ok = _rounded(tmp_path, 1.5)
    assert ok.get_temporal_breakdown().iloc[0, 1:5].tolist() == [5.0, 10.0, 1.0, 16.0]


def test_unknown_rank_is_a_typed_error(tmp_path):
    from holotrace.errors import RankNotFoundError

    job, _ = load(mixed_trace(), tmp_path)
    with pytest.raises(RankNotFoundError, match="rank 5"):
        temporal.breakdown(job, ranks=[5])
