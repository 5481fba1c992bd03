"""Frequent kernel sequences and the call graph behind them, on hand-built traces."""

from __future__ import annotations

import gzip
import hashlib
import json

import numpy as np
import pytest

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import sequences
from holotrace.analysis.callstack import build_call_graph, call_graph
from holotrace.model.classify import HTA_FIXED, NATIVE
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

COLUMNS = ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]


def _blocks(n: int = 4) -> TraceBuilder:
    """``blk`` repeated n times, each launching k1, k2, k3 (5, 6, 7 µs); one more ``blk`` launching k3, k1."""
    tb = TraceBuilder(rank=0)
    for i in range(n):
        t0 = 100.0 * i
        tb.cpu_op("blk", t0, 50)
        tb.cpu_op("aten::inner", t0 + 1, 20)
        tb.launch_kernel("k1", t0 + 2, 2, t0 + 60, 5)
        tb.launch_kernel("k2", t0 + 5, 2, t0 + 66, 6)
        tb.launch_kernel("k3", t0 + 25, 2, t0 + 73, 7)
    t0 = 100.0 * n
    tb.cpu_op("blk", t0, 30)
    tb.launch_kernel("k3", t0 + 2, 2, t0 + 40, 7)
    tb.launch_kernel("k1", t0 + 5, 2, t0 + 50, 5)
    return tb


def _load(tb, tmp_path, name="rank-0.pt.trace.json"):
    path = tb.write(tmp_path / name)
    return path, TraceAnalysis(job=holotrace.load(path, cache=False))


def test_sequence_repeated_n_times(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _, ta = _load(_blocks(4), tmp_path)
    df = ta.get_frequent_cuda_kernel_sequences("blk", str(out), min_pattern_len=2)
    assert list(df.columns) == COLUMNS
    assert df.values.tolist() == [["blk|k1|k2|k3", 4, 72.0, 200.0], ["blk|k3|k1", 1, 12.0, 30.0]]
    assert df["count"].dtype == np.int64
    # min_pattern_len counts kernels
    assert ta.get_frequent_cuda_kernel_sequences("blk", str(out), min_pattern_len=3)["count"].tolist() == [4]
    assert ta.get_frequent_cuda_kernel_sequences("blk", str(out), top_k=1, min_pattern_len=4).empty


def test_overlay_file_marks_top_patterns_and_leaves_input_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    path, ta = _load(_blocks(4), tmp_path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    ta.get_frequent_cuda_kernel_sequences("blk", str(out), min_pattern_len=2, top_k=1)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    written = out / ("overlaid_" + path.name)
    assert [p.name for p in out.iterdir()] == [written.name]
    doc = json.loads(written.read_text())
    evs = doc["traceEvents"]
    marked = [e for e in evs if "Patterns" in e.get("args", {})]
    # 4 instances × (blk, aten::inner, 3 launches, 3 kernels)
    assert len(marked) == 32
    assert all(e["args"]["Patterns"] == {"blk|k1|k2|k3": 4} for e in marked)
    assert {e["name"] for e in marked} == {"blk", "aten::inner", "cudaLaunchKernel", "k1", "k2", "k3"}
    # other complete events are compressed to string ids; metadata events stay
    others = [e for e in evs if e.get("ph") == "X" and "Patterns" not in e.get("args", {})]
    assert others and all(e["name"].isdigit() and e["args"] == {} for e in others)
    assert any(e.get("ph") == "M" and e["name"] == "process_name" for e in evs)
    # gzip in, gzip out
    gz = _blocks(2).write(tmp_path / "gz", gz=True)
    ta2 = TraceAnalysis(job=holotrace.load(gz, cache=False))
    ta2.get_frequent_cuda_kernel_sequences("blk", str(out), compress_other_kernels=False)
    doc2 = json.loads(gzip.decompress((out / ("overlaid_" + gz.name)).read_bytes()))
    assert any(e.get("name") == "k2" and "Patterns" not in e.get("args", {}) for e in doc2["traceEvents"]) is False


def test_invalid_arguments_return_empty(tmp_path):
    _, ta = _load(_blocks(1), tmp_path)
    assert ta.get_frequent_cuda_kernel_sequences("", str(tmp_path)).empty
    assert ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path / "missing")).empty
    res = ta.get_frequent_cuda_kernel_sequences("no_such_op", str(tmp_path))
    assert res.empty and list(res.columns) == COLUMNS
    assert ta.get_frequent_cuda_kernel_sequences("no_such_op", str(tmp_path), hta_compat=True).columns.empty
    with pytest.raises(ValueError):
        ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path), rank=5)


def test_outermost_roots_vs_htas_min_depth(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("blk", 0, 50)  # depth 0
    tb.launch_kernel("k1", 1, 2, 60, 5)
    tb.cpu_op("wrapper", 100, 60)  # a deeper blk (depth 1) with a different kernel
    tb.cpu_op("blk", 101, 50)
    tb.launch_kernel("k2", 102, 2, 170, 5)
    tb.cpu_op("blk", 200, 50)  # blk nested in blk: only the outer one is a root
    tb.cpu_op("blk", 201, 40)
    tb.launch_kernel("k1", 202, 2, 260, 5)
    _, ta = _load(tb, tmp_path)
    fixed = ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path), min_pattern_len=1)
    assert fixed[["pattern", "count"]].values.tolist() == [["blk|k1", 2], ["blk|k2", 1]]
    compat = ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path), min_pattern_len=1, hta_compat=True)
    assert compat[["pattern", "count"]].values.tolist() == [["blk|k1", 2]]


def test_user_annotation_as_root(tmp_path):
    tb = _blocks(2)
    tb.annotation("## forward ##", -1, 300)
    _, ta = _load(tb, tmp_path)
    df = ta.get_frequent_cuda_kernel_sequences("## forward ##", str(tmp_path), min_pattern_len=1)
    assert df.values.tolist() == [["## forward ##|k1|k2|k3|k1|k2|k3|k3|k1", 1, 48.0, 300.0]]


def test_works_where_htas_call_stack_builder_raises(tmp_path):
    """A zero-length op where a ns-rounded op ends at −1 µs: HTA raises 'ValueError: Unexpected case'."""
    tb = _blocks(3)
    tb.cpu_op("aten::zero_", 21.0, 0.0)
    tb.cpu_op("aten::tiny", 21.3, 0.5)  # HTA rounds this to ts 22, dur -1
    _, ta = _load(tb, tmp_path)
    frame = ta._table(0)
    assert (frame["dur"] < 0).any()  # the HTA table really has the −1 duration
    df = ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path))
    assert df.values.tolist() == [["blk|k1|k2|k3", 3, 54.0, 150.0]]


def test_native_sequences_all_steps_and_exact_match(tmp_path):
    path = _blocks(3).write(tmp_path / "t.json")
    job = holotrace.load(path, cache=False)
    res = sequences.frequent_kernel_sequences(job, "blk", match="exact", min_pattern_len=2)
    assert res.patterns.values.tolist() == [["blk|k1|k2|k3", 3, 54.0, 150.0], ["blk|k3|k1", 1, 12.0, 30.0]]
    assert sequences.frequent_kernel_sequences(job, "bl", match="exact").patterns.empty
    assert len(sequences.frequent_kernel_sequences(job, "^b.k$", match="regex", min_pattern_len=2).patterns) == 2


def test_call_graph_nesting_rules():
    """Touching siblings, zero-length events at a boundary, partial overlap (HTA's pop-the-top sweep)."""
    # rows: 0 A[0,10) 1 B[10,20) 2 Z@10 (zero; B opens at 10: goes under B) 3 Y@20 (zero, closes B's end: under B)
    #       4 C[30,40) 5 D[35,45) partial overlap: D under C  6 E[41,42): C's close popped D, so E under C
    ts = np.array([0, 10, 10, 20, 30, 35, 41], dtype=float)
    dur = np.array([10, 10, 0, 0, 10, 10, 1], dtype=float)
    n = len(ts)
    g = build_call_graph(np.zeros(n, dtype=np.int64), ts, dur, np.arange(n), np.ones(n, dtype=bool), np.full(n, -1))
    assert g.parent.tolist() == [-1, -1, 1, 1, -1, 4, 4]
    assert g.depth.tolist() == [0, 0, 1, 1, 0, 1, 1]


def test_call_graph_kernel_counts():
    # op [0,100) ⊃ launch [10,20) → kernel row 2 (dur 7); launch row 3 [30,40) → kernel row 4 (dur 3)
    ts = np.array([0, 10, 50, 30, 60], dtype=float)
    dur = np.array([100, 10, 7, 10, 3], dtype=float)
    node = np.array([True, True, False, True, False])
    launcher = np.array([-1, -1, 1, -1, 3])
    g = build_call_graph(np.zeros(5, dtype=np.int64), ts, dur, np.arange(5), node, launcher)
    assert g.num_kernels.tolist() == [2, 1, 1, 1, 1]
    assert g.kernel_dur_sum.tolist() == [10.0, 7.0, 7.0, 3.0, 3.0]
    assert g.depth.tolist() == [0, 1, 2, 1, 2]
    assert g.subtree_labels(np.array([1])).tolist() == [-1, 1, 1, -1, -1]


def test_backward_thread_is_attached_under_the_backward_annotation(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 1000)
    tb.cpu_op("aten::linear", 10, 100)
    tb.launch_kernel("fwd_k", 20, 5, 200, 10)
    tb.annotation("## backward ##", 300, 500)
    # the autograd engine runs on another thread
    tb.cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 320, 100, tid=2)
    tb.launch_kernel("bwd_k1", 330, 5, 450, 10, tid=2)
    tb.launch_kernel("bwd_k2", 340, 5, 470, 10, tid=2)
    _, ta = _load(tb, tmp_path)
    df = ta.get_frequent_cuda_kernel_sequences("ProfilerStep", str(tmp_path), min_pattern_len=1)
    assert df.values.tolist() == [["ProfilerStep#1|fwd_k|bwd_k1|bwd_k2", 1, 30.0, 1000.0]]
    g = call_graph(ta.view, 0, rules=HTA_FIXED)
    depth = dict(zip(ta.view.names(ta.view[0]["name"]), g.depth))
    # ProfilerStep 0 > ## backward ## 1 > evaluate_function 2 > launch 3 > kernel 4
    assert depth["autograd::engine::evaluate_function: AddmmBackward0"] == 2 and depth["bwd_k1"] == 4


def test_amd_stream_zero_kernels_are_linked_by_default(tmp_path):
    tb = TraceBuilder(rank=0)
    for t0 in (0, 100):
        tb.cpu_op("blk", t0, 50)
        tb.launch_kernel("Cijk_a", t0 + 1, 2, t0 + 60, 5, stream=0, launch_name="hipLaunchKernel")
    _, ta = _load(tb, tmp_path)
    assert ta.get_frequent_cuda_kernel_sequences("blk", str(tmp_path), 1).values.tolist() == [
        ["blk|Cijk_a", 2, 10.0, 100.0]
    ]
    assert ta.get_frequent_cuda_kernel_sequences(
        "blk", str(tmp_path), 1, hta_compat=True
    ).empty  # HTA links stream > 0 only


def test_htas_backward_link_corner_detaches_a_step_only_in_compat():
    """HTA: once the backward thread's root has no children left, the next backward parent (a top-level
    ProfilerStep) is moved under itself and drops out of the graph (its kernels are no longer counted)."""
    # main thread 0: P1 [0,100) ⊃ launch [10,20) → kernel; P2 [100,200) ⊃ launch [110,120) → kernel
    # backward thread 1: op [30,60) ⊃ launch [31,35) → kernel (inside P1 only)
    ts = np.array([0, 10, 50, 100, 110, 150, 30, 31, 70], dtype=float)
    dur = np.array([100, 10, 5, 100, 10, 5, 30, 4, 5], dtype=float)
    thread = np.array([0, 0, 9, 0, 0, 9, 1, 1, 9])
    node = np.array([True, True, False, True, True, False, True, True, False])
    launcher = np.array([-1, -1, 1, -1, -1, 4, -1, -1, 7])
    link = (1, np.array([0, 3]))
    fixed = build_call_graph(thread, ts, dur, np.arange(9), node, launcher, backward_link=link)
    assert fixed.num_kernels[[0, 3, 6]].tolist() == [2, 1, 1]
    assert fixed.depth[[6, 7, 8]].tolist() == [1, 2, 3]  # backward op under P1
    compat = build_call_graph(thread, ts, dur, np.arange(9), node, launcher, backward_link=link, hta_quirks=True)
    assert compat.num_kernels[[0, 3, 4, 5]].tolist() == [2, 0, 0, 0]
    assert compat.depth[[3, 4, 5]].tolist() == [0, 1, 2]


def test_native_call_graph_on_a_loaded_trace(tmp_path):
    """Hand-worked stacks of a loaded trace under holotrace's rules (rows = the rank's events)."""
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#3", 0, 200)
    tb.cpu_op("aten::mm", 20, 60)
    tb.cpu_op("aten::addmm", 25, 40)
    tb.launch_kernel("gemm", 30, 5, 150, 12)  # runs after its launcher returned
    tb.cpu_op("aten::copy_", 100, 30, tid=9)  # another thread: its own stack
    tb.launch_kernel("copy_k", 110, 5, 170, 4, tid=9)
    tb.gpu("Memcpy HtoD (Pinned -> Device)", 180, 2, cat="gpu_memcpy", correlation=4242)  # its launch is missing
    job = holotrace.load(tb.write(tmp_path / "t.json"), cache=False)
    view = job_view(job, NATIVE)
    g = call_graph(view, 0)
    names = view.names(view[0]["name"])
    row = {n: i for i, n in enumerate(names)}
    launch = np.flatnonzero(names == "cudaLaunchKernel")
    assert [g.depth[row[n]] for n in ("ProfilerStep#3", "aten::mm", "aten::addmm", "aten::copy_")] == [0, 1, 2, 0]
    assert g.parent[row["aten::mm"]] == row["ProfilerStep#3"] and g.parent[row["aten::addmm"]] == row["aten::mm"]
    assert g.parent[launch].tolist() == [row["aten::addmm"], row["aten::copy_"]] and g.depth[launch].tolist() == [3, 1]
    assert g.parent[row["gemm"]] == launch[0] and g.depth[row["gemm"]] == 4  # under its launch, not where it ran
    assert g.parent[row["copy_k"]] == launch[1] and g.depth[row["copy_k"]] == 2
    assert g.depth[row["Memcpy HtoD (Pinned -> Device)"]] == -1  # no launch: outside the graph
    assert g.num_kernels[[row["ProfilerStep#3"], row["aten::copy_"]]].tolist() == [1, 1]
    assert g.kernel_dur_sum[row["ProfilerStep#3"]] == 12_000  # ns under holotrace's rules
    # nothing is kept on the job: a second build is a new, equal object
    again = call_graph(view, 0)
    assert again is not g and again.parent.tolist() == g.parent.tolist()
