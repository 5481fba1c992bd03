"""ATen operator → kernels and delays on hand-built traces (values worked out by hand)."""

from __future__ import annotations

import numpy as np

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis.aten_ops import aten_op_kernels, enclosing_interval
from holotrace.model.classify import HTA, NATIVE, is_aten_launch
from tracebuilder import TraceBuilder

COLUMNS = ["aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"]


def _load(tmp_path, *tbs):
    folder = tmp_path / "job"
    for tb in tbs:
        tb.write(folder)
    job = holotrace.load(folder, cache=False)
    return TraceAnalysis(job=job)


def _rank_trace(rank: int = 0, shift: float = 0) -> TraceBuilder:
    """aten::mm twice (gemm then relu; launches 10/30 µs after the op start, kernels 10 µs after the call),
    aten::add once (launch 10 µs in, kernel 90 µs after the call), and aten::linear ⊃ aten::addmm."""
    tb = TraceBuilder(rank=rank, world_size=2)
    for t0 in (0 + shift, 200 + shift):
        tb.cpu_op("aten::mm", t0, 100)
        tb.launch_kernel("gemm", t0 + 10, 5, t0 + 20, 5)
        tb.launch_kernel("relu", t0 + 30, 5, t0 + 40, 5)
    tb.cpu_op("aten::add", 400 + shift, 50)
    tb.launch_kernel("add_k", 410 + shift, 5, 500 + shift, 5)
    tb.cpu_op("aten::linear", 600 + shift, 100)
    tb.cpu_op("aten::addmm", 601 + shift, 90)
    tb.launch_kernel("gemm", 605 + shift, 5, 620 + shift, 5)
    return tb


def test_sequences_and_delays(tmp_path):
    ta = _load(tmp_path, _rank_trace())
    df = ta.get_aten_op_kernels_and_delay()[0]
    assert list(df.columns) == COLUMNS
    rows = df.values.tolist()
    assert rows[0] == ["aten::mm", "gemm -> relu", 2, 10.0, 10.0]
    assert sorted(rows[1:]) == [["aten::add", "add_k", 1, 10.0, 90.0], ["aten::addmm", "gemm", 1, 4.0, 15.0]]
    assert df["occurrence_count"].dtype == np.int64
    # index = position in (name, sequence) order, as HTA
    assert df.index.tolist() == [2, 0, 1]


def test_sort_by_other_column(tmp_path):
    ta = _load(tmp_path, _rank_trace())
    df = ta.get_aten_op_kernels_and_delay(sort_by=["avg_runtime_delay"])[0]
    assert df["avg_runtime_delay"].tolist() == [90.0, 15.0, 10.0]


def test_thread_check_and_compat(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::copy_", 0, 100, tid=2)  # another thread, overlapping the launch in time
    tb.launch_kernel("copy_k", 10, 5, 30, 5, tid=1)
    ta = _load(tmp_path, tb)
    assert ta.get_aten_op_kernels_and_delay()[0].empty
    compat = ta.get_aten_op_kernels_and_delay(hta_compat=True)[0]
    assert compat.values.tolist() == [["aten::copy_", "copy_k", 1, 10.0, 20.0]]


def test_ranks_are_not_carried_over(tmp_path):
    ta = _load(tmp_path, _rank_trace(0), _rank_trace(1, shift=1000))
    fixed = ta.get_aten_op_kernels_and_delay(ranks=[0, 1])
    assert fixed[1]["occurrence_count"].sum() == 4
    assert fixed[0].values.tolist() == fixed[1].values.tolist()
    compat = ta.get_aten_op_kernels_and_delay(ranks=[0, 1], hta_compat=True)
    # HTA's bug: rank 1's frame also holds rank 0's instances
    assert compat[0]["occurrence_count"].sum() == 4 and compat[1]["occurrence_count"].sum() == 8


def test_launch_without_kernel_is_skipped(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::mm", 0, 100)
    tb.runtime("cudaLaunchKernel", 10, 5, correlation=77)  # its kernel was not recorded: HTA raises here
    tb.launch_kernel("gemm", 30, 5, 40, 5)
    df = _load(tmp_path, tb).get_aten_op_kernels_and_delay()[0]
    assert df.values.tolist() == [["aten::mm", "gemm", 1, 30.0, 10.0]]


def test_cpu_only_gives_empty_frame(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    df = _load(tmp_path, tb).get_aten_op_kernels_and_delay()[0]
    assert df.empty and list(df.columns) == COLUMNS


def test_hip_launches_count_by_default(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::mm", 0, 100)
    tb.launch_kernel("Cijk_gemm", 10, 5, 40, 5, launch_name="hipLaunchKernel", stream=0)
    ta = _load(tmp_path, tb)
    assert ta.get_aten_op_kernels_and_delay()[0].values.tolist() == [["aten::mm", "Cijk_gemm", 1, 10.0, 30.0]]
    assert ta.get_aten_op_kernels_and_delay(hta_compat=True)[0].empty


def test_enclosing_interval_picks_latest_start_first_row_on_ties():
    op_ts = np.array([0, 5, 5, 20.0])
    op_end = np.array([100, 50, 60, 30.0])
    q_ts = np.array([10, 25, 55, 200, 5.0])
    q_end = np.array([12, 26, 58, 201, 6.0])
    z = np.zeros(4, dtype=np.int64)
    got = enclosing_interval(z, op_ts, op_end, np.zeros(5, dtype=np.int64), q_ts, q_end)
    # q0 -> op1 (ts 5, first of the tie); q1 -> op3 (ts 20); q2 -> op2 (only ts-5 op reaching 58); q3 none; q4 -> op1
    assert got.tolist() == [1, 3, 2, -1, 1]
    # threads: op0 on thread 1 only
    th = np.array([1, 0, 0, 0])
    got = enclosing_interval(th, op_ts, op_end, np.array([1, 1, 0, 0, 0]), q_ts, q_end)
    assert got.tolist() == [0, 0, 2, -1, 1]


FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>>()"


def _zero_fill_trace(fill_first: bool) -> TraceBuilder:
    """Three steps, each: aten::zero_ [b+10.2, +6.6) ⊃ aten::fill_ [b+10.45, +6.2) ⊃ cudaLaunchKernel
    [b+11.3, +3.1) → FillFunctor [b+40.5, +2.25). HTA rounds starts up: both operators start at b+11 µs."""
    tb = TraceBuilder(rank=0)
    for step in range(3):
        b = 1000.0 + 100 * step
        tb.annotation(f"ProfilerStep#{step + 1}", b + 0.1, 90)
        ops = [("aten::zero_", b + 10.2, 6.6), ("aten::fill_", b + 10.45, 6.2)]
        for name, ts, dur in ops[::-1] if fill_first else ops:
            tb.cpu_op(name, ts, dur)
        tb.launch_kernel(FILL, b + 11.3, 3.1, b + 40.5, 2.25)
    return tb


def test_rounded_start_tie_goes_to_the_first_operator_in_table_order(tmp_path):
    # spec 23 §2.1: the covering aten:: op with the largest ts; on equal ts HTA takes the first row.
    # Checked against HTA 0.6.1 on these two traces: zero_ written first → aten::zero_, fill_ first → aten::fill_.
    for fill_first, op in ((False, "aten::zero_"), (True, "aten::fill_")):
        ta = _load(tmp_path / str(fill_first), _zero_fill_trace(fill_first))
        got = ta.get_aten_op_kernels_and_delay(hta_compat=True)[0]
        # the last step is dropped: 2 instances; delays on HTA's rounded µs (launch 1012 - op 1011; kernel 1041 - 1012)
        assert got.values.tolist() == [[op, FILL, 2, 1.0, 29.0]]
        # holotrace's rules read exact ns: fill_ starts 0.25 µs after zero_, so it is the innermost
        native = aten_op_kernels(ta.job)[0]
        assert native.values.tolist() == [["aten::fill_", FILL, 3, 0.85, 29.2]]


def test_operators_of_any_category_count(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::mm", 0, 100, cat="user_annotation")
    tb.launch_kernel("gemm", 10, 5, 40, 5)
    ta = _load(tmp_path, tb)
    assert ta.get_aten_op_kernels_and_delay(hta_compat=True)[0].values.tolist() == [["aten::mm", "gemm", 1, 10.0, 30.0]]
    assert aten_op_kernels(ta.job)[0].values.tolist() == [["aten::mm", "gemm", 1, 10.0, 30.0]]


def test_launch_names_are_matched_at_the_start():
    assert is_aten_launch("cudaLaunchKernelExC", HTA) and is_aten_launch("cuLaunchKernelEx", HTA)
    assert not is_aten_launch("hipLaunchKernel", HTA) and is_aten_launch("hipLaunchKernel", NATIVE)
    assert not is_aten_launch("xcudaLaunchKernel", HTA) and not is_aten_launch("cudaMemcpyAsync", NATIVE)
