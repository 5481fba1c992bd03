"""HTA's parser and call-stack steps on frames (``holotrace.compat.hta_steps``), the filters' HTA mode and the
raw-trace writer, against HTA 0.6.1's observed behaviour.

The expected values were measured by calling HTA 0.6.1's own functions (``hta.common.trace``,
``hta.common.trace_call_stack``, ``hta.common.trace_filter``) on the same hand-built frames, in a separate
environment with pandas 3.1.1; the HTA call is named beside each value. The endpoint cases are those of HTA's
``tests/test_trace_call_stack.py`` and ``tests/test_correlation.py``.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd

from tracebuilder import TraceBuilder

SYMS = [
    "ProfilerStep#3",
    "ProfilerStep#4",
    "aten::mm",
    "cudaLaunchKernel",
    "gemm",
    "cpu_op",
    "cuda_runtime",
    "kernel",
    "Event Sync",
    "cuda_sync",
    "triton_op",
    "user_annotation",
]


def _table():
    from holotrace import TraceSymbolTable

    st = TraceSymbolTable()
    st.add_symbols(SYMS)
    i = st.sym_index
    rows = [  # index, ts, dur, name, cat, stream, correlation
        (0, 0, 100, i["ProfilerStep#3"], i["user_annotation"], -1, -1),
        (1, 10, 20, i["aten::mm"], i["cpu_op"], -1, -1),
        (2, 12, 5, i["cudaLaunchKernel"], i["cuda_runtime"], -1, 501),
        (3, 40, 30, i["gemm"], i["kernel"], 7, 501),
        (4, 100, 100, i["ProfilerStep#4"], i["user_annotation"], -1, -1),
        (5, 120, 5, i["cudaLaunchKernel"], i["cuda_runtime"], -1, 502),
        (6, 210, 30, i["gemm"], i["kernel"], 7, 502),  # launched in step 4, runs after it: step 4
        (7, 150, 3, i["Event Sync"], i["cuda_sync"], -1, 503),  # a GPU row on stream -1
        (8, 149, 2, i["cudaLaunchKernel"], i["cuda_runtime"], -1, 503),
        (9, 160, 4, i["triton_op"], i["cpu_op"], 0, -1),  # stream 0 CPU op: iteration by time
        (10, 250, 5, i["cudaLaunchKernel"], i["cuda_runtime"], -1, 504),  # kernel not in the trace
        (11, 300, 1, i["gemm"], i["kernel"], 7, 999),  # launch not in the trace
    ]
    return pd.DataFrame(rows, columns=["index", "ts", "dur", "name", "cat", "stream", "correlation"]), st


def test_transform_correlation_to_index_and_add_iteration():
    from holotrace import add_iteration, transform_correlation_to_index

    df, st = _table()
    assert transform_correlation_to_index(df, st) is df
    # HTA: transform_correlation_to_index(df, st)["index_correlation"]
    assert df["index_correlation"].tolist() == [-1, -1, 3, 2, -1, 6, 5, 8, 7, -1, 0, 0]
    assert str(df["index_correlation"].dtype) == "int8"  # HTA downcasts
    steps = add_iteration(df, st)
    assert df["iteration"].tolist() == [3, 3, 3, 3, 4, 4, 4, 4, 4, 4, -1, -1]  # HTA: add_iteration(df, st)
    assert str(df["iteration"].dtype) == "int8"
    assert list(steps.columns) == ["ts", "dur", "name", "s_name", "iter"]
    assert steps.astype(str).values.tolist() == [
        ["0", "100", "0", "3", "ProfilerStep#3"],
        ["100", "100", "1", "4", "ProfilerStep#4"],
    ]


def test_transform_correlation_to_index_hta_case():
    """HTA's tests/test_correlation.py: index labels differ from positions; sync rows found by symbol id."""
    from holotrace import TraceSymbolTable, transform_correlation_to_index

    data = [[1, 22, 15, -1], [2, 12, 16, -1], [3, 10, 22, -1], [4, 10, -1, -1]]
    data += [[5, 45, 15, -1], [6, 42, 16, -1], [7, 71, 30, 7], [8, 12, -1, 7]]
    df = pd.DataFrame(data, columns=["index", "name", "correlation", "stream"], index=range(1, 9))
    st = TraceSymbolTable()
    st.sym_index = {"Event Sync": 45, "Context Sync": 42}
    assert transform_correlation_to_index(df, st)["index_correlation"].tolist() == [5, 6, 0, -1, 1, 2, 0, -1]


def test_add_fwd_bwd_links():
    from holotrace import add_fwd_bwd_links

    raw = pd.DataFrame(
        {
            "index": [0, 1, 2, 3, 4, 5, 6, 7],
            "cat": ["cpu_op", "cpu_op", "fwdbwd", "cpu_op", "fwdbwd", "cpu_op", "fwdbwd", "fwdbwd"],
            "ph": ["X", "X", "s", "X", "f", "X", "s", "f"],
            "bp": [None, None, None, None, "e", None, None, "e"],
            "id": [np.nan, np.nan, 11, np.nan, 11, np.nan, 12, 12],
            "ts": [10, 10, 10, 50, 50, 70, 70, 90],
            "tid": [1, 1, 1, 2, 2, 1, 1, 2],
            "pid": [5] * 8,
            "dur": [5, 3, 0, 9, 0, 4, 0, 0],
        }
    )
    add_fwd_bwd_links(raw)
    # HTA: add_fwd_bwd_links(raw): flow 11 joins op 1 (the higher index of two ops at its start) and op 3;
    # flow 12 has no op at its end
    assert raw["fwdbwd_index"].tolist() == [-1, 3, -1, 1, -1, -1, -1, -1]
    assert raw["fwdbwd"].tolist() == [-1, 0, -1, 1, -1, -1, -1, -1]
    plain = pd.DataFrame({"index": [0], "cat": [3], "ts": [0], "tid": [1], "pid": [1]})
    add_fwd_bwd_links(plain)  # encoded cat, as in HTA's parser: nothing added
    assert list(plain.columns) == ["index", "cat", "ts", "tid", "pid"]


def test_sort_events_and_is_events_sorted():
    from holotrace import is_events_sorted, sort_events
    from holotrace.compat.hta_steps import CLOSE_END, OPEN_END

    t = 1666149715059476
    a = np.array(
        [
            [24721, 15, 1, t],
            [24723, 1, -1, t + 9],
            [24723, 1, 1, t + 10],
            [24724, 0, 1, t + 10],
            [24724, 0, -1, t + 10],
            [24725, 0, -1, t + 10],
            [24725, 0, 1, t + 10],
            [24726, 225181, -1, t + 14],
        ]
    )
    assert not is_events_sorted(a)
    sort_events(a)
    # HTA's tests/test_trace_call_stack.py::test_sort_events
    assert a[:, 0].tolist() == [24721, 24723, 24724, 24725, 24725, 24724, 24723, 24726]
    assert a[:, 2].tolist() == [1, -1, -1, -1, 1, 1, 1, -1]
    assert is_events_sorted(a)
    pair = np.array([[1, 10, OPEN_END, 0], [1, 10, CLOSE_END, 10]])
    assert is_events_sorted(pair) and not is_events_sorted(pair[::-1].copy())


def test_filters_hta_mode_empty_results():
    """HTA returns ``pd.DataFrame()`` (no columns) where nothing is selected; holotrace keeps the columns."""
    from holotrace import IterationIndexFilter, MemCopyEventFilter, UnderOperatorFilter

    cols = ["iteration", "index", "name", "duration"]
    df = pd.DataFrame([[-1, 80210, 307, 12570], [550, 0, 169, 295776], [551, 7446, 230, 278517]], columns=cols)
    # HTA: IterationIndexFilter(5)(df) is pd.DataFrame() (HTA's tests/test_trace_filter.py, case #2)
    assert IterationIndexFilter(5, hta_compat=True)(df).equals(pd.DataFrame())
    assert list(IterationIndexFilter(5)(df).columns) == cols and IterationIndexFilter(5)(df).empty
    assert IterationIndexFilter(1, hta_compat=True)(df)["iteration"].tolist() == [551]
    frame = pd.DataFrame({"name": ["Memcpy HtoD"], "cat": ["gpu_memcpy"], "ts": [0], "dur": [1], "stream": [7]})
    assert MemCopyEventFilter("Memcpy DtoH", hta_compat=True)(frame).equals(pd.DataFrame())
    assert list(MemCopyEventFilter("Memcpy DtoH")(frame).columns) == list(frame.columns)
    assert len(MemCopyEventFilter("Memcpy HtoD", hta_compat=True)(frame)) == 1
    assert UnderOperatorFilter("nope", 0, hta_compat=True)(frame).equals(pd.DataFrame())
    assert list(UnderOperatorFilter("nope", 0)(frame).columns) == list(frame.columns)


def test_merge_kernel_intervals_on_a_slice_warns_nothing():
    from holotrace import merge_kernel_intervals

    big = pd.DataFrame({"ts": [5, 0, 12, 3], "dur": [5, 4, 1, 1], "stream": [7, 7, 7, 8]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # HTA: a FutureWarning/SettingWithCopy warning on a slice
        out = merge_kernel_intervals(big[big["stream"] == 7])
    assert out.values.tolist() == [[0, 4], [5, 10], [12, 13]]


def test_counters_go_through_write_raw_trace(tmp_path, monkeypatch):
    """HTA's test_generate_trace_with_counters replaces ``Trace.write_raw_trace`` and reads the dict it gets."""
    from holotrace import PHASE_COUNTER, Trace, TraceAnalysis

    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=30)
    tb.launch_kernel("gemm", cpu_ts_us=20, cpu_dur_us=5, gpu_ts_us=50, gpu_dur_us=30)
    tb.annotation("ProfilerStep#2", 100, 100)
    path = tb.write(tmp_path / "in")
    calls = []
    monkeypatch.setattr(Trace, "write_raw_trace", lambda self, name, contents: calls.append((name, contents)))
    a = TraceAnalysis(trace_dir=str(path.parent), cache=False)
    a.generate_trace_with_counters()
    assert len(calls) == 1 and calls[0][0].endswith("_with_counters.json")
    events = calls[0][1]["traceEvents"]
    original = json.loads(path.read_text())["traceEvents"]
    assert events[: len(original)] == original  # the input's events, then the counters
    counters = [e for e in events if e["ph"] == PHASE_COUNTER]
    assert {e["name"] for e in counters} == {"Queue Length"} and len(events) == len(original) + len(counters)
    assert list(tmp_path.glob("in/*_with_counters*")) == []  # the replaced writer wrote nothing
    monkeypatch.undo()
    a.generate_trace_with_counters()  # the real writer: the input's bytes kept, counters appended
    out = next(tmp_path.glob("in/*_with_counters.json"))
    src = path.read_bytes()
    assert out.read_bytes().startswith(src[: src.index(b'"ProfilerStep#2"')])  # input bytes up to the last event
    assert json.loads(out.read_text())["traceEvents"] == events


def test_parser_config_arg_sets():
    """HTA's tests/test_parser_config.py, on holotrace's ParserConfig; names measured with HTA 0.6.1."""
    import pandas as pd

    from holotrace import ParserConfig
    from holotrace.compat.arg_specs import AttributeSpec, ValueType, YamlVersion
    from holotrace.compat.configs import AVAILABLE_ARGS

    # HTA: sorted(a.name for a in ParserConfig().get_args())
    assert sorted(a.name for a in ParserConfig().get_args()) == sorted(
        "bytes collective_name correlation external_id group_size in_msg_nelems in_split_size input_dims "
        "input_strides input_type memory_bw_gbps msg_dtype out_msg_nelems out_split_size process_rank python_id "
        "python_parent_id stream wait_on_cuda_event_record_corr_id wait_on_stream".split()
    )
    assert [a.name for a in ParserConfig(ParserConfig.get_minimum_args()).get_args()] == ["stream", "correlation"]
    cfg = ParserConfig(ParserConfig.get_minimum_args())
    cfg.add_args(ParserConfig.ARGS_INPUT_SHAPE)
    assert {a.name for a in cfg.get_args()} == {"stream", "correlation", "input_dims", "input_type", "input_strides"}
    hta_keys = (  # HTA: sorted(AVAILABLE_ARGS)
        "correlation::cbid correlation::cpu_gpu cpu_op::concrete_inputs cpu_op::fwd_thread cpu_op::input_dims "
        "cpu_op::input_strides cpu_op::input_type cpu_op::kernel_backend cpu_op::kernel_hash cpu_op::sequence_number "
        "cuda::context cuda::device cuda::stream cuda_sync::event cuda_sync::stream data::bandwidth data::bytes "
        "index::ev_idx index::external_id index::python_id index::python_parent_id inference::batch_id "
        "inference::batch_size info::finished info::labels info::name info::op_count info::sort_index kernel::queued "
        "kernel::shared_memory nccl::collective_name nccl::dtype nccl::group_size nccl::in_msg_nelems "
        "nccl::in_msg_size nccl::in_split_size nccl::input_tensors_start nccl::out_msg_nelems nccl::out_msg_size "
        "nccl::out_split_size nccl::output_tensors_start nccl::process_group_desc nccl::process_group_name "
        "nccl::process_group_ranks nccl::rank nccl::seq sm::blocks sm::occupancy sm::warps threads::block "
        "threads::grid threads::registers"
    ).split()
    from holotrace.schema import ARG_SPECS

    own = set(AVAILABLE_ARGS) - set(hta_keys)  # holotrace's own args, under its own prefix
    assert {"holotrace::cuda_sync_kind", "holotrace::stream_id"} <= own
    assert {k.split("::")[1] for k in own if k.startswith("holotrace::")} == {k.split("::")[1] for k in own}
    assert {AVAILABLE_ARGS[k].name for k in own} <= {s.column for s in ARG_SPECS}
    assert set(hta_keys) <= set(AVAILABLE_ARGS)
    assert AVAILABLE_ARGS["kernel::queued"] == AttributeSpec("queued", "queued", ValueType.Int, -1)
    assert AVAILABLE_ARGS["cuda::stream"].raw_name == "stream" and AVAILABLE_ARGS["nccl::rank"].name == "process_rank"
    saved = ParserConfig.get_default_cfg()
    try:
        custom = ParserConfig()
        custom.add_args([AVAILABLE_ARGS["kernel::queued"]])
        ParserConfig.set_default_cfg(custom)
        assert {a.name for a in ParserConfig.get_default_cfg().get_args()} == {a.name for a in custom.get_args()}
        ParserConfig.set_global_parser_config_version(YamlVersion(1, 0, 0))
        assert ParserConfig.get_default_cfg().version.get_version_str() == "1.0.0"
    finally:
        ParserConfig.set_default_cfg(saved)
    for raw, want in (("Kernel Queued", "kernel_queued"), ("Cuda-Kernel/Queued", "cuda_kernel_queued")):
        assert ParserConfig.transform_arg_name(raw) == want
    assert ParserConfig.transform_arg_name("Kernel.a(.Queued)__b_%") == "kernel_a_b"
    specs = ParserConfig.infer_attribute_specs(
        pd.Series([{"a b": 1, "name": "x"}, None, {"c(d)": [1]}]), {"q": AVAILABLE_ARGS["kernel::queued"]}
    )
    # HTA: ParserConfig.infer_attribute_specs(<same series>, {"q": AVAILABLE_ARGS["kernel::queued"]})
    assert specs == {
        "a b": AttributeSpec("a_b", "a b", ValueType.Int, 0),
        "name": AttributeSpec("arg_name", "name", ValueType.String, ""),
        "c(d)": AttributeSpec("c", "c(d)", ValueType.Object, None),
    }


def test_call_stack_graph_on_hta_test_frames():
    """Frames of HTA's tests/test_trace_call_stack.py (no ``name`` column; a correlation naming a CPU row of the
    thread; the thread's rows given apart from ``full_df``); HTA 0.6.1 passes every assertion below."""
    from holotrace import CallStackGraph, TraceSymbolTable
    from holotrace.compat.call_graph import CallStackIdentity, CallStackNode

    full = pd.DataFrame(
        {
            "index": list(range(13)),
            "cat": [1, 1, 1, 1, 1, 1, 1, 2, 3, 0, 1, 2, 2],
            "ts": [0, 1, 3, 3, 7, 8, 10, 12, 16, 0, 10, 15, 20],
            "dur": [10, 5, 2, 1, 3, 1, 11, 6, 3, 25, 10, 5, 5],
            "pid": [1] * 13,
            "tid": [2] * 9 + [3] * 4,
            "stream": [-1] * 13,
            "index_correlation": [-1] * 13,
        }
    )
    st = TraceSymbolTable()
    st.add_symbols(["annotation", "cpu_op", "cuda_runtime", "kernel"])
    corr = pd.DataFrame({"cpu_index": [7], "gpu_index": [8]})
    thread = full[full["tid"] == 2]
    csg = CallStackGraph(thread, CallStackIdentity(0, 1, 2), corr, full, st)
    nodes = csg.get_nodes()
    assert nodes[-2] == CallStackNode(parent=-1, depth=-1, height=5, children=[0, 6])
    assert nodes[6] == CallStackNode(parent=-2, depth=0, height=3, children=[7])
    assert nodes[8] == CallStackNode(parent=7, depth=2, height=1, children=[])  # CPU row named by the correlation
    assert csg.get_leaf_nodes(0) == [3, 5] and csg.get_paths_to_leaves(0) == [[0, 1, 2, 3], [0, 4, 5]]
    depth = csg.get_depth()
    assert str(depth.dtype) == "Int16" and depth.tolist() == [0, 1, 2, 3, 1, 2, 0, 1, 2]
    own = pd.DataFrame({"index": [1, 2, 3, 4], "ts": [0, 0, 5, 5], "dur": [10, 5, 1, 5], "stream": [-1] * 4})
    own["index_correlation"] = -1
    fresh = full.drop(columns=["parent", "depth", "height", "end"])  # the first graph wrote its stack columns
    csg = CallStackGraph(own, CallStackIdentity(0, 1, 2), corr, fresh, st)  # rows from ``own``, not ``fresh``
    assert {i: (n.parent, n.depth, n.height) for i, n in csg.get_nodes().items()} == {
        -2: (-1, -1, 4),
        1: (-2, 0, 3),
        2: (1, 1, 1),
        4: (1, 1, 2),
        3: (4, 2, 1),
    }


def test_annotation_breakdown_name_is_text_dtype(tmp_path):
    """HTA 0.6.1's ``get_gpu_user_annotation_breakdown`` frame has ``name`` in pandas' text dtype (``str``)."""
    from holotrace import TraceAnalysis

    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.annotation("forward", 5, 40)
    tb.launch_kernel("gemm", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=30)
    tb.annotation("ProfilerStep#2", 100, 100)
    path = tb.write(tmp_path / "job")
    out = TraceAnalysis(trace_dir=str(path.parent), cache=False).get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False
    )
    assert str(out["name"].dtype) == "str" and "forward" in out["name"].tolist()
