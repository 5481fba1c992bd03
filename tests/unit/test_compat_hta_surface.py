"""HTA entry points checked against HTA 0.6.1's observed behaviour on corpus traces.

Each expected value was measured by running HTA 0.6.1 (pandas 3.1.1) on the same trace; the HTA call that
produced it is written beside it. ``hta.common.trace.Trace`` is written ``HTrace``, HTA's ``CallGraph``
``HCallGraph``, and so on.
"""

from __future__ import annotations

import json
from enum import Flag, auto

import numpy as np
import pandas as pd
import pytest

from corpus import shared_or_skip


def _traces(name: str) -> str:
    return str(shared_or_skip() / "traces" / name)


@pytest.fixture(scope="module")
def filter_dir():
    return _traces("hta_trace_filter_2rank")


# ---------------------------------------------------------------------------- Trace: parse, then align
def test_parse_traces_keeps_absolute_times_in_file_order(filter_dir):
    from holotrace import NameFilter, TimeRangeFilter, Trace

    t = Trace(trace_dir=filter_dir)
    t.parse_traces()
    assert t.min_ts == 0 and t.is_parsed and t.get_ranks() == [0, 1]  # HTrace(...).parse_traces(): min_ts 0
    t.decode_symbol_ids()
    df = t.get_trace(0)
    # HTA: len(t.get_trace(0)) == 4810; first rows index 0, 1, 2 at ts 1682725898236567, ...569, ...575
    assert len(df) == 4810 and len(t.get_trace(1)) == 4675
    assert df.index[:3].tolist() == df["index"].iloc[:3].tolist() == [0, 1, 2]
    assert df["ts"].iloc[:3].tolist() == [1682725898236567, 1682725898236569, 1682725898236575]
    assert np.allclose(df["end"], df["ts"] + df["dur"])
    # trace_filter_demo notebook: NameFilter("aten::.*mm")(df, symbol_table) -> 378 rows (13, 14, 74, 77, 78, ...)
    sel = NameFilter("aten::.*mm")(df, t.symbol_table)
    assert len(sel) == 378 and sel["index"].head().tolist() == [13, 14, 74, 77, 78]
    assert len(NameFilter(name_pattern="aten::.*mm")(df, t.symbol_table)) == 378
    # TimeRangeFilter((1682725898237042, 1682725898240570))(df) -> 93 rows (13, 14, 15, 16, 17, ...)
    sel = TimeRangeFilter((1682725898237042, 1682725898240570))(df)
    assert len(sel) == 93 and sel["index"].head().tolist() == [13, 14, 15, 16, 17]
    # t.align_and_filter_trace(): 2403 rows, GPU rows first (index 2402, 2404, 2406 at ts 2936, 2995, 3043),
    # a positional index, min_ts 1682725898079292
    t.align_and_filter_trace()
    df = t.get_trace(0)
    assert len(df) == 2403 and df.index[:3].tolist() == [0, 1, 2]
    assert df["index"].iloc[:3].tolist() == [2402, 2404, 2406] and df["ts"].iloc[:3].tolist() == [2936, 2995, 3043]
    assert t.min_ts == 1682725898079292


def test_parse_single_and_multiple_ranks(filter_dir):
    from holotrace import Trace

    t = Trace(trace_dir=filter_dir)
    t.parse_single_rank(1)  # HTA: traces {1: 4675 rows}, first ts 1682725898079484, is_parsed False
    assert list(t.traces) == [1] and len(t.traces[1]) == 4675 and not t.is_parsed
    assert t.traces[1]["ts"].iloc[0] == 1682725898079484
    t.parse_single_rank(7)  # no file for rank 7: nothing happens (HTA)
    t.parse_multiple_ranks([0])  # HTA: ranks 0 and 1 now
    assert sorted(t.traces) == [0, 1] and len(t.traces[0]) == 4810
    with pytest.raises(KeyError):  # HTA: KeyError 5
        t.parse_multiple_ranks([5])


def test_load_traces_indexes_rows_by_index(filter_dir):
    from holotrace import Trace

    t = Trace(trace_dir=filter_dir)
    t.load_traces()
    df = t.get_trace(0)
    assert (df.index.to_numpy() == df["index"].to_numpy()).all() and len(df) == 2403


# ---------------------------------------------------------------------------- symbol table
def test_symbol_table_masks_and_csv(filter_dir, tmp_path):
    from holotrace import Trace, TraceSymbolTable, flatten_column_names

    t = Trace(trace_dir=filter_dir)
    t.load_traces()
    df, st = t.get_trace(0), t.symbol_table
    # HTA: st.get_operator_or_cuda_runtime_mask(df).sum() == 1765; get_runtime_launch_events_mask: 602;
    # get_events_mask(df, ["nccl", "aten::mm"]): 125; get_events_mask(df, None): 0
    assert int(st.get_operator_or_cuda_runtime_mask(df).sum()) == 1765
    assert int(st.get_runtime_launch_events_mask(df).sum()) == 602
    assert int(st.get_events_mask(df, ["nccl", "aten::mm"]).sum()) == 125
    assert int(st.get_events_mask(df, None).sum()) == 0
    s = TraceSymbolTable()
    s.add_symbols_mp([["a", "b"], ["b", "c"]])  # HTA: the symbols a, b, c (in no set order)
    assert sorted(s.get_sym_table()) == ["a", "b", "c"]
    st._to_csv_file(str(tmp_path / "symbols.csv"))
    back = TraceSymbolTable.from_csv_file(str(tmp_path / "symbols.csv"))
    assert back.get_sym_table() == st.get_sym_table()
    with pytest.raises(FileNotFoundError):
        TraceSymbolTable.from_csv_file(str(tmp_path / "missing.csv"))
    (tmp_path / "bad.csv").write_text("x\n1\n")
    with pytest.raises(ValueError, match="symbol"):
        TraceSymbolTable.from_csv_file(str(tmp_path / "bad.csv"))
    f = pd.DataFrame({"a": [1, 2], "b": [3, 4]}).groupby("a").agg({"b": ["sum", "max"]}).reset_index()
    flatten_column_names(f)  # hta.utils.utils.flatten_column_names: ['a', 'b_sum', 'b_max']
    assert list(f.columns) == ["a", "b_sum", "b_max"]


# ---------------------------------------------------------------------------- call graphs
def test_stack_of_a_gpu_kernel_is_its_launch_stack(filter_dir):
    from holotrace import CallGraph, TraceAnalysis

    a = TraceAnalysis(trace_dir=filter_dir)
    cg = CallGraph(a.t, ranks=[0])
    # HCallGraph(TraceAnalysis(trace_dir).t, ranks=[0]).get_stack_of_node(k, 0)["index"].tolist()
    assert cg.get_stack_of_node(2402, 0)["index"].tolist() == [1249, 1250, 1251, 1252, 2403, 2402]
    assert cg.get_stack_of_node(2406, 0)["index"].tolist() == [1249, 1250, 1251, 1252, 1253, 1254, 2407, 2406]
    assert cg.get_stack_of_node(2402, 0, skip_ancestors=True)["index"].tolist() == [2402]


def _raw_loaded(filter_dir):
    from holotrace import Trace

    t = Trace(trace_dir=filter_dir)
    t.load_traces()
    df = t.get_trace(0)
    return t, df[[c for c in df.columns if c not in ("s_name", "s_cat")]].copy()


def test_call_graph_from_dataframe(filter_dir):
    from holotrace import CallGraph

    t, raw = _raw_loaded(filter_dir)
    cg = CallGraph.from_dataframe(raw, t.symbol_table, rank=0)
    # HCallGraph.from_dataframe(df, t.symbol_table, rank=0).mapping: (4037, 4037, main, -4037) then
    # (4037, 23695, bwd, -4037)
    assert cg.mapping[["pid", "tid", "label", "stack_root"]].values.tolist() == [
        [4037, 4037, "main", -4037],
        [4037, 23695, "bwd", -4037],
    ]
    d = cg.trace_data.get_trace(0)
    # HTA: depth value counts and the kernels counted under the nodes
    assert d["depth"].value_counts().sort_index().to_dict() == {
        0: 1,
        1: 8,
        2: 222,
        3: 310,
        4: 539,
        5: 539,
        6: 441,
        7: 233,
        8: 90,
        9: 11,
        10: 7,
        11: 2,
    }
    assert int(d["num_kernels"].sum()) == 4358
    assert cg.get_stack_of_node(2402, 0)["index"].tolist() == [1249, 1250, 1251, 1252, 2403, 2402]
    assert "depth" not in raw.columns  # the caller's frame is copied, not modified


def test_call_stack_graph_constructor_and_relinking(filter_dir):
    from holotrace import CallStackGraph
    from holotrace.compat.call_graph import CallStackIdentity

    t, full = _raw_loaded(filter_dir)
    for c in ("parent", "depth", "height"):  # HTA's constructor writes into these columns
        full[c] = -1
    k = full[(full["stream"] > 0) & (full["index_correlation"] > 0)]
    corr = pd.DataFrame({"gpu_index": k["index"].to_numpy(), "cpu_index": k["index_correlation"].to_numpy()})
    main = full[(full["tid"] == 4037) & (full["stream"] == -1)]
    bwd = full[(full["tid"] == 23695) & (full["stream"] == -1)]
    nodes: dict = {}
    m = CallStackGraph(
        main,
        CallStackIdentity(0, 4037, 4037),
        corr,
        full,
        t.symbol_table,
        nodes=nodes,
        use_existing_stack_columns=False,
    )
    b = CallStackGraph(
        bwd,
        CallStackIdentity(0, 4037, 23695),
        corr,
        full,
        t.symbol_table,
        nodes=nodes,
        use_existing_stack_columns=False,
    )
    # HTA, per thread (CallStackGraph(thread_df, CallStackIdentity(0, pid, tid), get_cpu_gpu_correlation(full),
    # full, symbol_table, use_existing_stack_columns=False)): root -|tid|, depth value counts written to full
    assert m.root_index == -4037 and m.get_children(-4037) == [1249]
    assert full.loc[main.index, "depth"].value_counts().sort_index().to_dict() == {
        0: 1,
        1: 8,
        2: 65,
        3: 141,
        4: 260,
        5: 214,
        6: 166,
        7: 50,
        8: 9,
        9: 6,
        10: 2,
    }
    assert b.root_index == -23695 and b.get_children(-23695)[:6] == [0, 4, 8, 11, 15, 18]
    assert full.loc[bwd.index, "depth"].value_counts().sort_index().to_dict() == {
        0: 157,
        1: 169,
        2: 233,
        3: 216,
        4: 62,
        5: 40,
        6: 1,
        7: 1,
    }
    # b.update_parent_of_first_layer_nodes(1708) ("## backward ##"): 158 children, root -4037; then
    # b.save_call_stack_to_dataframe(apply_whole_graph=True): the backward thread sits two levels deeper
    b.update_parent_of_first_layer_nodes(1708)
    assert b.root_index == -4037 and len(nodes[1708].children) == 158 and -23695 not in nodes
    b.save_call_stack_to_dataframe(apply_whole_graph=True)
    assert full.loc[bwd.index, "depth"].value_counts().sort_index().to_dict() == {
        2: 157,
        3: 169,
        4: 233,
        5: 216,
        6: 62,
        7: 40,
        8: 1,
        9: 1,
    }
    with pytest.raises(ValueError, match="not in the node map"):
        b.update_parent_of_first_layer_nodes(10**9)


# ---------------------------------------------------------------------------- configuration objects
def test_parser_config_and_hta_config(filter_dir, tmp_path):
    from holotrace import HtaConfig, ParserBackend, ParserConfig, Trace

    cfg = ParserConfig(parse_all_args=True)
    cfg.set_parser_backend(ParserBackend.IJSON_BATCH_AND_COMPRESS)
    cfg.set_parser_backend("json")
    assert cfg.parser_backend is ParserBackend.JSON and cfg.clone().parse_all_args
    with pytest.raises(ValueError):
        cfg.set_parser_backend("yaml")
    t = Trace(trace_dir=filter_dir, parser_config=cfg)
    t.load_traces()
    assert t.job.rank(0).raw_args is not None and len(t.get_trace(0)) == 2403  # every arg kept; same rows
    (tmp_path / "cfg.json").write_text(json.dumps({"a": {"b": {"c": 3}}}))
    hc = HtaConfig(config_file_path=str(tmp_path / "cfg.json"), load_default_paths=False)
    assert hc.get_config("a.b.c") == 3 and hc.get_config("a.x", 7) == 7 and hc.get_config() == {"a": {"b": {"c": 3}}}
    assert hc.get_config_file_paths() == [str(tmp_path / "cfg.json")]


def test_merge_kernel_intervals_keyword():
    from holotrace import merge_kernel_intervals

    out = merge_kernel_intervals(kernel_df=pd.DataFrame({"ts": [5, 0, 12], "dur": [5, 4, 1]}))
    assert out[["ts", "end"]].values.tolist() == [[0, 4], [5, 10], [12, 13]]


# ---------------------------------------------------------------------------- counters
class HtaTimeSeriesTypes(Flag):  # the members of hta.trace_analysis.TimeSeriesTypes
    QUEUE_LENGTH = auto()
    MEMCPY_BANDWIDTH = auto()


def test_generate_trace_with_counters_accepts_hta_enum(tmp_path):
    from holotrace import TraceAnalysis
    from holotrace.compat.methods_counters import TimeSeriesTypes, series_types

    both = TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH
    assert series_types(HtaTimeSeriesTypes.QUEUE_LENGTH) is TimeSeriesTypes.QUEUE_LENGTH
    assert series_types(HtaTimeSeriesTypes.QUEUE_LENGTH | HtaTimeSeriesTypes.MEMCPY_BANDWIDTH) == both
    assert series_types("memcpy_bandwidth") is TimeSeriesTypes.MEMCPY_BANDWIDTH and series_types(3) == both
    assert series_types(None) == both
    for bad in ("queue", 8):
        with pytest.raises(ValueError):
            series_types(bad)
    with pytest.raises(TypeError):
        series_types(1.5)
    a = TraceAnalysis(trace_dir=_traces("hta_trace_compare_base"), include_last_profiler_step=True)
    a.generate_trace_with_counters(time_series=HtaTimeSeriesTypes.QUEUE_LENGTH, ranks=[1], output_dir=str(tmp_path))
    written = list(tmp_path.iterdir())
    assert [p.name for p in written] == ["base_with_counters.json.gz"]
    import gzip

    events = json.loads(gzip.open(written[0], "rt").read())["traceEvents"]
    names = {e["name"] for e in events if e.get("ph") == "C"}
    assert names == {"Queue Length"}  # only the series asked for


def test_blocked_on_full_queue_mtia_single_rank():
    from holotrace import TraceAnalysis

    a = TraceAnalysis(trace_dir=_traces("hta_mtia_single_rank"))
    ql = a.get_queue_length_time_series()
    # HTA: get_time_spent_blocked_on_full_queue(ql, max_queue_length=1) -> one row, stream 102, 1060.0,
    # 7.947643325063035e-05 (stream 1's row is overwritten by the last stream)
    compat = a.get_time_spent_blocked_on_full_queue(ql, max_queue_length=1, hta_compat=True)
    assert compat[["rank", "stream"]].values.tolist() == [[0, 102]]
    assert compat["duration_at_max_queue_length"].tolist() == [1060.0]
    assert compat["relative_duration_at_max_queue_length"].iloc[0] == pytest.approx(7.947643325063035e-05)
    # default: one row per stream; HTA on stream 1's series alone ({0: ql[0][ql[0].stream == 1]}) gives
    # 1011610.0 and 0.07584825909497186
    fixed = a.get_time_spent_blocked_on_full_queue(ql, max_queue_length=1)
    assert fixed[["rank", "stream"]].values.tolist() == [[0, 1], [0, 102]]
    assert fixed["duration_at_max_queue_length"].tolist() == [1011610.0, 1060.0]
    assert fixed["relative_duration_at_max_queue_length"].tolist() == pytest.approx(
        [0.07584825909497186, 7.947643325063035e-05]
    )


def test_launch_stats_compat_columns(filter_dir):
    from holotrace import TraceAnalysis

    a = TraceAnalysis(trace_dir=filter_dir)
    hta_cols = ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]  # HTA's frame columns
    assert list(a.get_cuda_kernel_launch_stats(hta_compat=True)[0].columns) == hta_cols
    assert list(a.get_cuda_kernel_launch_stats()[0].columns) == hta_cols + [
        "short_kernel",
        "runtime_outlier",
        "launch_delay_outlier",
    ]


def test_cupti_frame_end_and_columns():
    from holotrace import TraceAnalysis

    a = TraceAnalysis(trace_dir=_traces("hta_cupti_profiler"))
    compat = a.get_cupti_counter_data_with_operators(hta_compat=True)[0]
    fixed = a.get_cupti_counter_data_with_operators()[0]
    # HTA: get_cupti_counter_data_with_operators()[0]: 77 rows, 51 columns; ts 2498229, 2619660, 2741091 (aligned)
    # and end 1679055454166485.0, 1679055454287916.0, 1679055454409347.0 (absolute)
    assert compat.shape == fixed.shape == (77, 51)
    assert compat["ts"].iloc[:3].tolist() == [2498229, 2619660, 2741091]
    assert compat["end"].iloc[:3].tolist() == [1679055454166485.0, 1679055454287916.0, 1679055454409347.0]
    assert np.allclose(fixed["end"], fixed["ts"] + fixed["dur"])  # default: one clock
    cols = list(compat.columns)  # HTA: the counters right after the arg columns, then index_correlation ...
    counters = [c for c in cols if c.startswith("smsp__")]
    assert len(counters) == 9
    assert cols.index("out_split_size") + 1 == cols.index(counters[0])
    assert cols[cols.index(counters[-1]) + 1 :] == [
        "index_correlation",
        "iteration",
        "end",
        "depth",
        "height",
        "parent",
        "num_kernels",
        "kernel_dur_sum",
        "kernel_span",
        "first_kernel_start",
        "last_kernel_end",
        "index_runtime",
        "op_stack",
        "top_level_op",
        "bottom_level_op",
    ]


# ---------------------------------------------------------------------------- trace diff (HTA's test_trace_diff.py)
@pytest.fixture(scope="module")
def compare_pair():
    from holotrace import LabeledTrace

    base = LabeledTrace(label="Base Trace", trace_dir=_traces("hta_trace_compare_base"))
    test = LabeledTrace(label="Test Trace", trace_dir=_traces("hta_trace_compare_test"))
    return base, test


def test_labeled_trace_generated_label(compare_pair):
    from holotrace import LabeledTrace

    base, _ = compare_pair
    assert base.ranks() == [1] and base.iterations() == [1009, 1010]
    assert LabeledTrace(trace_dir=_traces("hta_trace_compare_base")).label.startswith("t")  # HTA: t<0-10>


def test_extract_ops_and_summary(compare_pair):
    from holotrace import DeviceType

    base, _ = compare_pair
    cpu = base.extract_ops(1, 1010, DeviceType.CPU)
    # HTA: base_t.extract_ops(1, 1010, DeviceType.CPU): 6 rows (index 3, 4, 8, 9, 24, 31), 30 columns,
    # absolute ts (1661938466365430 first) and end = ts + dur
    assert cpu["index"].tolist() == [3, 4, 8, 9, 24, 31] and cpu.shape[1] == 30
    assert cpu["ts"].iloc[0] == 1661938466365430 and np.allclose(cpu["end"], cpu["ts"] + cpu["dur"])
    assert len(base.extract_ops(1, 1010, DeviceType.GPU)) == 1
    s = base.get_ops_summary(cpu).sort_values(by="name")[["name", "counts", "total_duration"]].set_index("name")
    assert s.to_dict() == {  # HTA's test_get_ops_summary
        "counts": {
            "ProfilerStep#1010": 1,
            "aten::as_strided": 1,
            "aten::empty": 1,
            "cudaEventQuery": 1,
            "cudaLaunchKernel": 1,
            "nccl:all_reduce": 1,
        },
        "total_duration": {
            "ProfilerStep#1010": 122149,
            "aten::as_strided": 0,
            "aten::empty": 0,
            "cudaEventQuery": 4,
            "cudaLaunchKernel": 4,
            "nccl:all_reduce": 67,
        },
    }


def test_compare_traces_and_ops_diff(compare_pair):
    from holotrace import DeviceType, TraceDiff

    base, test = compare_pair
    cpu = TraceDiff.compare_traces(base, test, 1, 1, 1010, 1010, device_type=DeviceType.CPU, use_short_name=True)
    gpu = TraceDiff.compare_traces(base, test, 1, 1, 1010, 1010, device_type=DeviceType.GPU, use_short_name=True)
    # HTA's test_compare_trace
    assert cpu["counts_change_categories"].value_counts().to_dict() == {"=": 5, "+": 3, "-": 1}
    assert gpu["counts_change_categories"].value_counts().to_dict() == {"-": 1}
    # HTA's test_ops_diff: all five keys, empty lists included
    assert TraceDiff.ops_diff(base, test, 1, 1, 1010, 1010, device_type=DeviceType.CPU) == {
        "added": ["AddmmBackward0", "All2All_Pooled_Req", "CatBackward0"],
        "deleted": ["nccl:all_reduce"],
        "increased": [],
        "decreased": [],
        "unchanged": ["ProfilerStep#1010", "aten::as_strided", "aten::empty", "cudaEventQuery", "cudaLaunchKernel"],
    }
    d = TraceDiff.ops_diff(base, test, 1, 1, 1010, 1010, device_type=DeviceType.GPU)
    assert list(d) == ["added", "deleted", "increased", "decreased", "unchanged"] and len(d["deleted"]) == 1


# ---------------------------------------------------------------------------- critical-path graph files
BUNDLED = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


def _event_sync():
    from holotrace import TraceAnalysis

    return TraceAnalysis(trace_dir=str(BUNDLED / "traces" / "hta_critical_path_cuda_event_sync"), cache=False)


def _summary(g):
    b = g.get_critical_path_breakdown()
    return (
        len(g.critical_path_nodes),
        len(g.critical_path_edges_set),
        b.shape[0],
        float(b["duration"].sum()),
        sorted(b["bound_by"].value_counts().to_dict().items()),
    )


# HTA on this trace: critical_path_analysis(rank=0, annotation="", instance_id=None) -> 56 nodes, 57 edges,
# a path of 40 nodes / 39 edges, breakdown durations summing to 2411.0,
# bound_by '' 8, cpu_bound 29, gpu_compute_bound 1, gpu_kernel_launch_overhead 1
HTA_EVENT_SYNC = (
    40,
    39,
    39,
    2411.0,
    [("", 8), ("cpu_bound", 29), ("gpu_compute_bound", 1), ("gpu_kernel_launch_overhead", 1)],
)


def test_restore_cpgraph_reads_hta_save():
    from holotrace import restore_cpgraph

    a = _event_sync()
    mine, ok = a.critical_path_analysis(rank=0, annotation="", instance_id=None)
    hta = restore_cpgraph(str(BUNDLED / "hta_outputs" / "hta_cp_graph_event_sync.zip"), a, 0)
    assert ok and _summary(hta) == _summary(mine) == HTA_EVENT_SYNC
    assert len(hta.node_list) == 56 and hta.number_of_edges() == 57
    assert hta.critical_path_nodes == mine.critical_path_nodes
    assert hta.critical_path_events_set == mine.critical_path_events_set
    assert hta.summary().round(6).to_dict() == {
        "": 0.0,
        "cpu_bound": 98.092078,
        "gpu_compute_bound": 1.493156,
        "gpu_kernel_launch_overhead": 0.414766,
    }  # HTA's cp.summary()


def test_save_writes_hta_layout(tmp_path):
    import pickletools
    import zipfile

    from holotrace import restore_cpgraph

    a = _event_sync()
    g, _ = a.critical_path_analysis(rank=0, annotation="", instance_id=None)
    out = str(tmp_path / "saved")
    path = g.save(out)
    assert path == out + ".zip"
    names = zipfile.ZipFile(path).namelist()
    base = out.lstrip("/")
    assert names[:3] == [f"{base}/trace_data.csv", f"{base}/cp_graph.pkl", f"{base}/cp_data.pkl"]  # HTA's order
    pkl = (tmp_path / "saved" / "cp_data.pkl").read_bytes()
    strings = {arg for op, arg, _ in pickletools.genops(pkl) if isinstance(arg, str)}
    assert {"hta.analyzers.critical_path_analysis", "_CPGraphData", "CPNode", "CPEdge", "CPEdgeType"} <= strings
    trace = pd.read_csv(tmp_path / "saved" / "trace_data.csv", index_col="_index_")
    assert trace["name"].dtype.kind != "i" and trace.loc[0, "name"] == "ProfilerStep#100"  # text, used as is by HTA
    # HTA 0.6.1's restore_cpgraph(path, TraceAnalysis(trace_dir=...).t, 0) on this file, checked once by hand:
    # the same path, breakdown (1211 rows on hta_critical_path_simple_add) and summary as HTA's own graph
    back = restore_cpgraph(path, a, 0)
    assert _summary(back) == HTA_EVENT_SYNC and back.critical_path_nodes == g.critical_path_nodes
    with pytest.raises(ValueError, match="rank"):
        restore_cpgraph(path, a, 1)


def test_cpgraph_hta_constructor():
    from holotrace import CPGraph

    a = _event_sync()
    # HTA: g = CPGraph(t, t, 0); g.critical_path() -> the same numbers here (the whole trace, unclipped)
    g = CPGraph(a.t, a.t, 0)
    assert len(g.node_list) == 56 and _summary(g) == HTA_EVENT_SYNC
    with pytest.raises(ValueError, match="restore_cpgraph"):
        CPGraph(None, a.t, 0)


def test_critical_path_analysis_class():
    from holotrace import CriticalPathAnalysis

    a = _event_sync()
    # HTA: CriticalPathAnalysis.critical_path_analysis(t, 0, "", None) as in TraceAnalysis.critical_path_analysis
    g, ok = CriticalPathAnalysis.critical_path_analysis(a.t, 0, "", None)
    assert ok and _summary(g) == HTA_EVENT_SYNC
    assert CriticalPathAnalysis.critical_path_analysis(a.t, 0, "no such annotation", None) is None


# ---------------------------------------------------------------------------- HTA's free helpers
def test_parse_trace_file_and_helpers(filter_dir):
    from holotrace import (
        NameIdColumnFilter,
        NameStringColumnFilter,
        decode_symbol_id_to_symbol_name,
        get_cpu_gpu_correlation,
        get_value_from_dict,
        parse_trace_file,
        trace_event_timestamp_to_unixtime_ns,
    )

    meta, df, st = parse_trace_file(filter_dir + "/sampled_rank-0.json.gz")
    # HTA parse_trace_file(...): rank 0, 4810 x 30, ts 1682725898236567, ...569 (absolute), index 0, 1,
    # last iteration 552, 2408 rows with index_correlation > 0
    assert meta["distributedInfo"]["rank"] == 0 and df.shape == (4810, 30)
    assert df["ts"].iloc[:2].tolist() == [1682725898236567, 1682725898236569]
    assert df["index"].iloc[:2].tolist() == [0, 1]
    assert int(df["iteration"].max()) == 552 and int((df["index_correlation"] > 0).sum()) == 2408
    c = get_cpu_gpu_correlation(df)  # HTA: 1204 pairs, first (2402, 2403), (2404, 2405)
    assert len(c) == 1204 and c.iloc[:2].values.tolist() == [[2402, 2403], [2404, 2405]]
    # HTA: NameIdColumnFilter("aten::.*mm")(df, st) -> 378 rows; without a symbol table the input (4810)
    assert len(NameIdColumnFilter("aten::.*mm")(df, st)) == 378 and len(NameIdColumnFilter("aten::.*mm")(df)) == 4810
    decode_symbol_id_to_symbol_name(df, st, use_shorten_name=False)
    assert df["s_name"].iloc[0] == "autograd::engine::evaluate_function: MeanBackward0"  # HTA's decoded name
    assert len(NameStringColumnFilter("aten::.*mm")(df)) == 378
    with pytest.raises(ValueError, match="gz"):
        parse_trace_file(filter_dir + "/trace.txt")
    assert trace_event_timestamp_to_unixtime_ns(2.5, {"baseTimeNanoseconds": 10}) == 2510
    with pytest.raises(KeyError):
        trace_event_timestamp_to_unixtime_ns(2.5, {})
    assert get_value_from_dict({"a": {"b": 1}}, "a.b") == 1 and get_value_from_dict({}, "a.b", 5) == 5


def test_loaded_table_end_both_modes(filter_dir):
    from holotrace import TraceAnalysis

    # HTA: TraceAnalysis(trace_dir).t.get_trace(0)[["index", "ts", "dur", "end"]].head(3): ts aligned, end absolute
    hta = [[2402, 2936, 10, 1682725898082238], [2404, 2995, 10, 1682725898082297], [2406, 3043, 3, 1682725898082338]]
    compat = TraceAnalysis(trace_dir=filter_dir, hta_compat=True).t.get_trace(0)
    assert compat[["index", "ts", "dur", "end"]].head(3).values.tolist() == hta
    fixed = TraceAnalysis(trace_dir=filter_dir).t.get_trace(0)  # default: end = ts + dur on one clock
    assert fixed[["index", "ts", "dur", "end"]].head(3).values.tolist() == [[i, t, d, t + d] for i, t, d, _ in hta]


# ---------------------------------------------------------------------------- HTA's test_trace_call_graph.py
def _backward_file(tmp_path) -> str:
    from test_compat_trace_callgraph import BACKWARD  # HTA's tests/data/call_stack/backward_thread.json

    events = [
        {"ph": "X", "cat": c, "name": n, "pid": p, "tid": t, "ts": ts, "dur": d, "args": a}
        for c, n, p, t, ts, d, a in BACKWARD
    ]
    path = tmp_path / "backward_thread.json"
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}))
    return str(path)


def test_call_graph_on_parsed_trace(tmp_path):
    from holotrace import CallGraph, Trace
    from holotrace.compat.call_graph import CallStackIdentity

    f = _backward_file(tmp_path)
    t = Trace(trace_files={0: f}, trace_dir="")
    t.parse_traces()
    t.decode_symbol_ids(use_shorten_name=False)
    cg = CallGraph(t, ranks=[0])
    df = cg.trace_data.get_trace(0)
    # HTA 0.6.1, the same calls (its test_trace_call_graph.py on this trace):
    assert df.shape[0] == 7 and list(cg.rank_to_stacks) == [0]
    assert (df.loc[5, "height"], df.loc[5, "depth"]) == (0, 6)
    stack = cg.get_stack_of_node(5)
    assert stack["depth"].tolist() == [0, 1, 2, 3, 4, 5, 6] and stack["height"].tolist() == [6, 5, 4, 3, 2, 1, 0]
    assert stack["num_kernels"].tolist() == [1] * 7 and stack["s_name"].iloc[0] == "ProfilerStep#552"
    assert sorted(cg.mapping["label"]) == ["bwd", "main"] and cg.mapping["stack_root"].tolist() == [-3914, -3914]
    assert [c.identity for c in cg.get_call_stacks(stack_index=1)] == [CallStackIdentity(0, 3914, 24922)]
    assert cg.get_stack_of_node(5, skip_ancestors=True)["parent"].tolist() == [6]
    assert cg.get_stack_of_node(5)["parent"].tolist() == [-3914, 0, 1, 2, 3, 4, 6]
    assert cg.get_stack_of_node(2, skip_ancestors=True)["parent"].tolist() == [1, 2, 3, 4, 6]
    cs = CallGraph.from_dataframe(df, t.symbol_table).get_csg_of_node(1)
    assert [(i, cs.nodes[i].parent) for i in sorted(cs.nodes)] == [
        (-3914, -1),
        (0, -3914),
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 3),
        (5, 6),
        (6, 4),
    ]
    # without the "## backward ##" annotation the backward thread hangs under ProfilerStep#552 (index 0)
    for r, d in list(t.get_all_traces().items()):
        t.traces[r] = d.drop(d.index[d["s_name"].eq("## backward ##")])
    csg = CallGraph(t).get_csg_of_node(2, 0)
    assert csg.get_parent(2) == 0 and 2 in csg.get_children(0)
    four = Trace(trace_files={i: f for i in range(4)}, trace_dir="")
    four.parse_traces()
    for r, d in four.get_all_traces().items():
        d["pid"] = r + 1
    assert CallGraph(four).mapping.groupby("rank").size().unique().tolist() == [2]  # HTA: two stacks per rank


def test_kernels_with_user_annotations_columns():
    from holotrace import TraceAnalysis

    a = TraceAnalysis(trace_dir=_traces("hta_ns_resolution"), hta_compat=True)
    k = a.get_gpu_kernels_with_user_annotations(rank=0)
    # HTA: get_gpu_kernels_with_user_annotations(rank=0): 4876 x 34, `end` right after `dur`, first rows
    # (index, ts, dur, end) = (25790, 3488, 5, 3493), (25804, 3678, 2, 3680), (25820, 4067, 0, 4067)
    assert k.shape == (4876, 34) and list(k.columns[5:9]) == ["ts", "dur", "end", "stream"]
    assert list(k.columns[-4:]) == ["user_annotation", "s_name", "s_cat", "s_user_annotation"]
    assert k[["index", "ts", "dur", "end"]].head(3).values.tolist() == [
        [25790, 3488, 5, 3493],
        [25804, 3678, 2, 3680],
        [25820, 4067, 0, 4067],
    ]
