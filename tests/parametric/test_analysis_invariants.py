"""Invariants of the core analyses on random traces (hypothesis; the interval primitives are in test_intervals.py).

* idle + busy = span, compute + non-compute = busy, percentages sum to 100;
* the idle categories of a stream sum to its idle time (span − union of its operations);
* kernel-type times sum to the union of analysed kernels; overlap ≤ communication time;
* results do not depend on the order of events in the file.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from _profiles import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import idle, intervals, kernels, overlap, temporal
from tracebuilder import TraceBuilder

GEMM = "void gemm_kernel<float>(float*, float const*)"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"
OTHER = "void my_Memcpy_kernel(int)"  # contains "Memcpy" but does not start with it: OTHER
NAMES = [GEMM, NCCL, MEMCPY, OTHER, "relu_kernel"]

# ------------------------------------------------------------------ analyses on random traces

kernel_spec = st.tuples(
    st.sampled_from([7, 20]),  # stream
    st.integers(0, 2000),  # gpu start (µs)
    st.integers(1, 150),  # duration
    st.sampled_from(range(len(NAMES))),  # name
    st.integers(1, 300),  # launch lead time
)
traces = st.lists(kernel_spec, min_size=1, max_size=25, unique_by=lambda k: (k[0], k[1]))


def _build(specs, order_seed=None) -> TraceBuilder:
    tb = TraceBuilder(rank=0)
    for stream, ts, dur, name_i, lead in specs:
        name = NAMES[name_i]
        cat = "gpu_memcpy" if name == MEMCPY else "kernel"
        tb.launch_kernel(name, max(0, ts - lead), 1, ts, dur, stream=stream, cat=cat)
    if order_seed is not None:
        random.Random(order_seed).shuffle(tb.events)
    return tb


def _load(tb: TraceBuilder, folder: Path, name: str):
    job = holotrace.load(tb.write(folder / f"{name}.json"), cache=False)
    return job, TraceAnalysis(job=job)


@settings(max_examples=examples(30))
@given(traces, st.integers(0, 10**6))
def test_invariants_and_event_order_independence(specs, seed):
    with tempfile.TemporaryDirectory() as d:
        job, ta = _load(_build(specs), Path(d), "a")
        job2, ta2 = _load(_build(specs, order_seed=seed), Path(d), "b")

    # temporal: idle + busy = span, compute + non-compute = busy, percentages sum to 100
    t = temporal.breakdown(job).iloc[0]
    assert t["idle_us"] + t["busy_us"] == t["span_us"]
    assert t["compute_us"] + t["non_compute_us"] == t["busy_us"]
    assert abs(t["idle_pctg"] + t["compute_pctg"] + t["non_compute_pctg"] - 100) < 1e-9
    h = ta.get_temporal_breakdown().iloc[0]
    assert h["idle_time(us)"] + h["compute_time(us)"] + h["non_compute_time(us)"] == h["kernel_time(us)"]
    assert abs(h["idle_time_pctg"] + h["compute_time_pctg"] + h["non_compute_time_pctg"] - 100) <= 0.015 + 1e-9

    # idle: per stream, the categories sum to the stream's span minus the union of its operations
    ib = idle.idle_breakdown(job)
    per_stream = ib.groupby("stream")["idle_us"].sum()
    for stream, total in per_stream.items():
        sel = [(ts, ts + dur) for s, ts, dur, _, _ in specs if s == stream]
        u = intervals.merge(np.array([a for a, _ in sel]), np.array([b for _, b in sel]))
        assert total == intervals.span(u) - intervals.total_length(u)
    ratios = ib.groupby("stream")["idle_ratio"].sum()
    assert all(abs(r - 1) < 1e-9 or r == 0 for r in ratios)

    # kernel types: the labelled times add up to the union of analysed kernels
    types = kernels.type_breakdown(job)
    analysed = [(ts, ts + dur) for _, ts, dur, n, _ in specs if NAMES[n] != OTHER]
    if analysed:
        u = intervals.merge(np.array([a for a, _ in analysed]), np.array([b for _, b in analysed]))
        assert types["time_us"].sum() == intervals.total_length(u)
        assert abs(types["pctg"].sum() - 100) < 1e-9

    # overlap: never more than the communication time
    o = overlap.comm_comp_overlap(job).iloc[0]
    assert 0 <= o["overlap_us"] <= o["comm_us"] and 0 <= o["overlap_pctg"] <= 100

    # order in the file does not matter
    pd.testing.assert_frame_equal(temporal.breakdown(job), temporal.breakdown(job2))
    pd.testing.assert_frame_equal(ib, idle.idle_breakdown(job2))
    pd.testing.assert_frame_equal(types, kernels.type_breakdown(job2))
    pd.testing.assert_frame_equal(kernels.kernel_stats(job), kernels.kernel_stats(job2))
    pd.testing.assert_frame_equal(overlap.comm_comp_overlap(job), overlap.comm_comp_overlap(job2))
    pd.testing.assert_frame_equal(ta.get_temporal_breakdown(), ta2.get_temporal_breakdown())
    pd.testing.assert_frame_equal(ta.get_gpu_kernel_breakdown()[0], ta2.get_gpu_kernel_breakdown()[0])
    pd.testing.assert_frame_equal(ta.get_gpu_kernel_breakdown()[1], ta2.get_gpu_kernel_breakdown()[1])
    pd.testing.assert_frame_equal(ta.get_comm_comp_overlap(), ta2.get_comm_comp_overlap())
    a, _ = ta.get_idle_time_breakdown()
    b, _ = ta2.get_idle_time_breakdown()
    key = ["rank", "stream", "idle_category"]  # HTA lists streams by first appearance in the file
    pd.testing.assert_frame_equal(a.sort_values(key, ignore_index=True), b.sort_values(key, ignore_index=True))
