"""HTA's Trace surface (``TraceAnalysis.t``), call graphs (spec 12 §1.4's verified example, and agreement with the
call-stack builder on the corpus), execution-trace correlation and HTA's helpers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from corpus import SHARED
from holotrace import (
    CallGraph,
    LegacyCallGraph,
    TraceAnalysis,
    add_et_column,
    correlate_execution_trace,
    get_kernel_type,
    load_execution_trace,
)
from holotrace.analysis.callstack import call_graph
from holotrace.model.classify import HTA

# spec 12 §1.4: tests/data/call_stack/backward_thread.json of HTA (same events, same order)
BACKWARD = [
    ("user_annotation", "ProfilerStep#552", 3914, 3914, 1666149715033200, 413451, {}),
    ("user_annotation", "## backward ##", 3914, 3914, 1666149715287655, 107988, {}),
    ("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 3914, 24922, 1666149715364322, 145, {}),
    ("cpu_op", "AddmmBackward0", 3914, 24922, 1666149715364324, 102, {}),
    ("cpu_op", "aten::mm", 3914, 24922, 1666149715364330, 58, {}),
    (
        "kernel",
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        0,
        7,
        1666149715428509,
        45,
        {"stream": 7, "correlation": 2131433, "device": 0},
    ),
    ("cuda_runtime", "cudaLaunchKernel", 3914, 24922, 1666149715364374, 10, {"correlation": 2131433, "cbid": 211}),
]


@pytest.fixture
def backward(tmp_path):
    events = [
        {"ph": "X", "cat": c, "name": n, "pid": p, "tid": t, "ts": ts, "dur": d, "args": a}
        for c, n, p, t, ts, d, a in BACKWARD
    ]
    (tmp_path / "backward_thread.json").write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}))
    return TraceAnalysis(trace_dir=str(tmp_path), cache=False)


def test_verified_call_stack_example(backward):
    cg = CallGraph(backward.t)
    m = cg.mapping
    assert m.values.tolist() == [[0, 3914, 3914, "main", 0, -3914, 1], [0, 3914, 24922, "bwd", 1, -3914, 2]]
    df = backward.t.get_trace(0)
    assert df["depth"].tolist() == [0, 1, 2, 3, 4, 6, 5]
    assert df["parent"].tolist() == [-3914, 0, 1, 2, 3, 6, 4]
    assert df["height"].tolist() == [6, 5, 4, 3, 2, 0, 1]
    assert df["num_kernels"].tolist() == [1] * 7
    assert df["kernel_span"].tolist() == [45.0] * 7  # on the aligned clock (HTA: ≈ min_ts)
    assert cg.get_stack_of_node(3, skip_ancestors=True)["index"].tolist() == [3, 4, 6, 5]
    assert cg.get_stack_of_node(3)["index"].tolist() == [0, 1, 2, 3, 4, 6, 5]
    # a kernel's stack is its launch's CPU call stack; HTA 0.6.1 on this trace:
    # CallGraph(TraceAnalysis(trace_dir=...).t).get_stack_of_node(5)["index"].tolist() == [0, 1, 2, 3, 4, 6, 5]
    assert cg.get_stack_of_node(5)["index"].tolist() == [0, 1, 2, 3, 4, 6, 5]
    assert cg.get_stack_of_node(5, skip_ancestors=True)["index"].tolist() == [5]
    csg = cg.get_csg_of_node(5)
    assert csg.identity.tid == 24922 and csg.get_path_to_root(6) == [6, 4, 3, 2, 1, 0, -3914]
    assert csg.get_parent(99) == -2
    with pytest.raises(ValueError, match="invalid node index - 99"):
        cg.get_node_attributes(99)
    assert len(cg.get_gpu_kernels()) == 1
    with pytest.raises(ValueError, match="No rank"):
        CallGraph(backward.t, ranks=[5])


def test_legacy_columns(backward):
    LegacyCallGraph(backward.t)
    df = backward.t.get_trace(0)
    assert df["parent"].tolist() == [-1, 0, 1, 2, 3, 6, 4]
    assert df["depth"].tolist() == [0, 1, 2, 3, 4, -1, 5]


def test_trace_surface_and_copies(backward):
    t = backward.t
    assert t.get_ranks() == [0] and list(t.get_all_traces()) == [0] and 0 in t.trace_files
    assert t.min_ts == 1666149715033200
    df = t.get_trace(0)
    assert df is t.traces[0]  # one table per rank, kept
    assert t.symbol_table.sym_table[df["name"].iloc[2]] == "autograd::engine::evaluate_function: AddmmBackward0"
    t.symbol_table.add_symbols_to_trace_df(df, "name")
    assert df["name"].iloc[4] == "aten::mm"
    # the analyses' table is untouched
    assert backward._table(0)["name"].dtype.kind == "i"
    assert t.get_iterations(0) == [552]
    t.parse_traces(), t.align_and_filter_trace()  # no-ops once loaded
    with pytest.raises(ValueError):
        t.get_trace(3)


def test_annotation_breakdown_matches_trace_table():
    """HTA's tests/test_trace_analysis.py user-annotation check, through ``analyzer.t``."""
    folder = SHARED / "traces" / "hta_ns_resolution"
    if not folder.is_dir():
        pytest.skip("shared corpus not present")
    for use_gpu, rows in ((True, 3), (False, 12)):
        analyzer = TraceAnalysis(trace_dir=str(folder), cache=False)
        out = analyzer.get_gpu_user_annotation_breakdown(visualize=False, num_kernels=1000, use_gpu_annotation=use_gpu)
        assert len(out) == rows
        idx = analyzer.t.symbol_table.sym_index["gpu_user_annotation" if use_gpu else "user_annotation"]
        df = analyzer.t.get_trace(0)
        analyzer.t.symbol_table.add_symbols_to_trace_df(df, "name")
        ref = df[df.cat == idx][["name", "dur"]].groupby("name")["dur"].sum().reset_index()
        pd.testing.assert_frame_equal(
            out[["name", "sum (us)"]], ref.rename(columns={"dur": "sum (us)"}), check_dtype=False
        )


CG_JOBS = sorted(p.name for p in (SHARED / "traces").iterdir() if p.is_dir()) if (SHARED / "traces").is_dir() else []
CG_SKIP = {
    "hta_memory_analysis",
    "kineto_resnet50_listformat_2021",
    "tracelens_mi300_torch_compile_triton",
    "hta_execution_trace",
}


@pytest.mark.parametrize("name", [j for j in CG_JOBS if j not in CG_SKIP])
def test_call_graph_columns_agree_with_builder(name):
    analyzer = TraceAnalysis(trace_dir=str(SHARED / "traces" / name), cache=False)
    for rank in analyzer.view.ranks[:2]:
        g = call_graph(analyzer.view, rank, rules=HTA)
        cg = CallGraph(analyzer.t, ranks=[rank])
        df = analyzer.t.get_trace(rank)
        assert (df["depth"].to_numpy() == g.depth).all()
        assert (df["num_kernels"].to_numpy() == g.num_kernels).all()
        index = df["index"].to_numpy()
        has_parent = g.parent >= 0
        assert (df["parent"].to_numpy()[has_parent] == index[g.parent[has_parent]]).all()
        top = g.in_graph & ~has_parent
        assert (df["parent"].to_numpy()[top] < 0).all() and (df["height"].to_numpy()[top] >= 1).all()
        k = df["num_kernels"].to_numpy() > 0
        span = df["kernel_span"].to_numpy()
        assert (span[k] >= 0).all() and (span[~k] == 0).all()
        assert np.allclose(df["kernel_dur_sum"].to_numpy()[k], g.kernel_dur_sum[k])
        assert len(cg.mapping) >= 1


def test_execution_trace_correlation():
    folder = SHARED / "traces" / "hta_execution_trace"
    if not folder.is_dir():
        pytest.skip("shared corpus not present")
    analyzer = TraceAnalysis(
        trace_files={0: str(folder / "benchmark_simple_add_trace.json.gz")}, trace_dir="", cache=False
    )
    et = load_execution_trace(str(folder / "benchmark_simple_add_et.json.gz"))
    report = correlate_execution_trace(analyzer.t, 0, et)
    assert report["matched"] == 36 and report["rows"] == 36 and report["contained"]
    df = analyzer.t.get_trace(0)
    assert len(df) == 55 and df["et_node"].notna().sum() == 36
    add_et_column(df, et, "et_node_name")
    by_ext = df.set_index("external_id")
    assert by_ext.loc[1, "et_node"] == 3 and by_ext.loc[1, "et_node_name"] == "[param|cuda]"
    assert by_ext.loc[2, "et_node"] == 4 and by_ext.loc[2, "et_node_name"] == "aten::rand"
    with pytest.raises(ValueError, match="Unknown column"):
        add_et_column(df, et, "bogus")


def test_helpers_from_rule_table():
    assert get_kernel_type("ncclKernel_AllReduce") == "COMMUNICATION"
    assert get_kernel_type("Memcpy DtoH (Device -> Pageable)") == "MEMORY"
    assert get_kernel_type("rcclAllReduce") == "COMPUTATION"  # HTA's rule (holotrace's own rules say COMMUNICATION)
    assert get_kernel_type("cudaLaunchKernel") == "OTHER"
    from holotrace.compat.types import ComputeKernelGroupingPattern, get_memory_kernel_type

    assert not ComputeKernelGroupingPattern.match("nccl_x") and ComputeKernelGroupingPattern.match("gemm")
    assert get_memory_kernel_type("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD"
    assert get_memory_kernel_type("Memset (Device)") == "Memset"


def test_parse_keeps_every_step_and_align_and_filter_drops_the_last():
    from holotrace.compat.trace import Trace

    t = Trace(trace_dir=str(Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"))
    t.parse_traces()
    assert sorted(set(t.get_trace(0)["iteration"].dropna().astype(int)) - {-1}) == [551, 552]
    t.align_and_filter_trace()
    assert sorted(set(t.get_trace(0)["iteration"].dropna().astype(int)) - {-1}) == [551]


def test_merge_kernel_intervals_by_hand():
    from holotrace.compat.types import merge_kernel_intervals

    df = pd.DataFrame({"ts": [10, 0, 5, 30], "dur": [5, 5, 2, 1]})  # [0,5] touches [5,7]; [10,15]; [30,31]
    out = merge_kernel_intervals(df)
    assert out.values.tolist() == [[0, 7], [10, 15], [30, 31]]
    assert df["ts"].tolist() == [0, 5, 10, 30] and df["end"].tolist() == [5, 7, 15, 31]  # HTA sorts in place
