"""Timeline data and plots: the native GPU timeline on hand-built traces, HTA's timeline functions on hand-built
frames (values checked against HTA 0.6.1 by hand), the figures when plotly is present, and the typed error
without plotly. MemoryAnalysis's plot path is here too."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy as np
import pandas as pd
import pytest

import holotrace
from holotrace.analysis.timeline import TimelineWindowError, gpu_timeline, stream_spans
from holotrace.compat import timeline as ct
from holotrace.compat.trace import TraceSymbolTable
from holotrace.errors import AnalysisError, PlottingUnavailableError
from holotrace.model.classify import HTA
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

HAS_PLOTLY = importlib.util.find_spec("plotly") is not None
needs_plotly = pytest.mark.skipif(not HAS_PLOTLY, reason="plotly (the plot extra) is not installed")
GEMM, RELU, NCCL, MEMCPY = (
    "gemm_kernel",
    "relu_kernel",
    "ncclKernel_AllReduce_RING_LL_Sum_float",
    "Memcpy HtoD (Pageable -> Device)",
)


def two_rank_job(tmp_path):
    """GPU work (µs), both ranks on one clock, the earliest event (rank 0's step 1) at 0:

    rank 0  step 1 [0,100), step 2 [100,200)
            s7:  gemm [10,40) it 1 · relu [50,55) it 1 · relu [150,160) it 2      s20: nccl [30,80) it 1
    rank 1  step 1 [5,100), step 2 [100,200)
            s7:  gemm [20,70) it 1 · memcpy [120,130) it 2
    """
    r0 = TraceBuilder(rank=0, world_size=2)
    r0.annotation("ProfilerStep#1", 0, 100)
    r0.annotation("ProfilerStep#2", 100, 100)
    r0.launch_kernel(GEMM, 2, 2, 10, 30, stream=7)
    r0.launch_kernel(NCCL, 5, 2, 30, 50, stream=20)
    r0.launch_kernel(RELU, 8, 2, 50, 5, stream=7)
    r0.launch_kernel(RELU, 110, 2, 150, 10, stream=7)
    r1 = TraceBuilder(rank=1, world_size=2)
    r1.annotation("ProfilerStep#1", 5, 95)
    r1.annotation("ProfilerStep#2", 100, 100)
    r1.launch_kernel(GEMM, 6, 2, 20, 50, stream=7)
    r1.launch_kernel(MEMCPY, 101, 2, 120, 10, stream=7, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    r0.write(tmp_path / "job")
    r1.write(tmp_path / "job")
    return holotrace.load(tmp_path / "job", cache=False)


@pytest.fixture
def job(tmp_path):
    return two_rank_job(tmp_path)


def _rows(df):
    return df[["rank", "stream", "start", "end", "name", "iteration"]].values.tolist()


# ---------------------------------------------------------------------------------------------- native data
def test_gpu_timeline_rows_by_hand(job):
    df = gpu_timeline(job)
    assert list(df.columns) == [
        "rank",
        "stream",
        "task",
        "start",
        "end",
        "ts",
        "dur",
        "name",
        "cat",
        "kernel_type",
        "iteration",
        "index",
    ]
    assert _rows(df) == [
        [0, 7, 10_000, 40_000, GEMM, 1],
        [0, 7, 50_000, 55_000, RELU, 1],
        [0, 7, 150_000, 160_000, RELU, 2],
        [0, 20, 30_000, 80_000, NCCL, 1],
        [1, 7, 20_000, 70_000, GEMM, 1],
        [1, 7, 120_000, 130_000, MEMCPY, 2],
    ]
    assert df["task"].tolist() == ["rank 0 stream 7"] * 3 + ["rank 0 stream 20"] + ["rank 1 stream 7"] * 2
    assert df["kernel_type"].tolist() == ["COMPUTATION"] * 3 + ["COMMUNICATION", "COMPUTATION", "MEMORY"]
    assert (df["ts"] == df["start"]).all() and (df["ts"] + df["dur"] == df["end"]).all()
    assert df.attrs["unit_ns"] == 1 and df.attrs["origin"] == job.origin_ns


def test_gpu_timeline_window_cut(job):
    df = gpu_timeline(job, window=(35_000, 125_000))
    # the gemms are cut at 35 µs, the memcpy at 125 µs; the second relu (150 µs) is outside
    assert _rows(df) == [
        [0, 7, 35_000, 40_000, GEMM, 1],
        [0, 7, 50_000, 55_000, RELU, 1],
        [0, 20, 35_000, 80_000, NCCL, 1],
        [1, 7, 35_000, 70_000, GEMM, 1],
        [1, 7, 120_000, 125_000, MEMCPY, 2],
    ]
    assert df["ts"].tolist()[:1] == [10_000] and df["dur"].tolist()[:1] == [30_000]  # own times kept
    # a window touching an end only (end is exclusive): nothing of the first gemm
    assert GEMM not in gpu_timeline(job, ranks=[0], streams=[7], window=(40_000, 45_000))["name"].tolist()
    with pytest.raises(TimelineWindowError, match="ends before it starts"):
        gpu_timeline(job, window=(5, 1))
    with pytest.raises(TimelineWindowError, match="not a pair"):
        gpu_timeline(job, window="soon")


def test_gpu_timeline_selections(job):
    assert _rows(gpu_timeline(job, ranks=[1])) == [[1, 7, 20_000, 70_000, GEMM, 1], [1, 7, 120_000, 130_000, MEMCPY, 2]]
    assert gpu_timeline(job, streams=[20])["name"].tolist() == [NCCL]
    assert gpu_timeline(job, iterations=[2])["name"].tolist() == [RELU, MEMCPY]
    empty = gpu_timeline(job, streams=[99])
    assert len(empty) == 0 and list(empty.columns) == list(gpu_timeline(job).columns)
    with pytest.raises(holotrace.errors.RankNotFoundError):
        gpu_timeline(job, ranks=[5])


def test_gpu_timeline_hta_rules(job):
    # HTA's view: µs, and the last ProfilerStep (step 2) and what it launched left out
    df = gpu_timeline(job_view(job, HTA))
    assert df.attrs["unit_ns"] == 1000
    assert _rows(df) == [
        [0, 7, 10.0, 40.0, GEMM, 1],
        [0, 7, 50.0, 55.0, RELU, 1],
        [0, 20, 30.0, 80.0, NCCL, 1],
        [1, 7, 20.0, 70.0, GEMM, 1],
    ]


def test_stream_spans(job):
    spans = stream_spans(gpu_timeline(job))
    assert spans[["rank", "stream", "operations", "first_start", "last_end", "busy"]].values.tolist() == [
        [0, 7, 3, 10_000, 160_000, 45_000],
        [0, 20, 1, 30_000, 80_000, 50_000],
        [1, 7, 2, 20_000, 130_000, 60_000],
    ]
    assert spans["busy_pctg"].tolist() == pytest.approx([30.0, 100.0, 100 * 60 / 110])
    assert len(stream_spans(gpu_timeline(job, streams=[99]))) == 0


# ---------------------------------------------------------------------------------------------- HTA's functions
SYM = [
    "void at::native::(anonymous namespace)::foo<int>(int, float)",
    "kernel",
    "aten::mm",
    "cpu_op",
    "## forward ##",
    "Memcpy DtoD (Device -> Device)",
    "gpu_memcpy",
    "ProfilerStep#3",
    "user_annotation",
]


def sym_table():
    t = TraceSymbolTable()
    t.add_symbols(SYM)
    return t


def hta_frame():
    """aten::mm [100,150) cpu · foo kernel [120,130) s7 · memcpy [2000,5000) s20 · ## forward ## [90,3090) cpu"""
    return pd.DataFrame(
        {
            "index": [0, 1, 2, 3],
            "name": [2, 0, 5, 4],
            "cat": [3, 1, 6, 8],
            "ts": [100, 120, 2000, 90],
            "dur": [50, 10, 3000, 3000],
            "stream": [-1, 7, 20, -1],
            "iteration": [3, 3, 3, -1],
            "depth": [1, -1, -1, 0],
        }
    )


def test_prepare_timeline_events_by_hand():
    before = ct.DefaultTimelinePlotSetting.event_type
    ev = ct.prepare_timeline_events(hta_frame(), symbol_table=sym_table())
    # sorted by stream then ts; times from the first event (90); short events widened to 1000
    assert ev["index"].tolist() == [3, 0, 1, 2]
    assert ev["task"].tolist() == ["cpu level 000", "cpu level 001", "gpu stream 007", "gpu stream 020"]
    assert ev["name"].tolist() == [
        "## forward ##",
        "aten::mm",
        "at::native::anon::foo<int>",
        "Memcpy DtoD (Device -> Device)",
    ]
    assert ev["calibrated_start_global"].tolist() == [0, 10, 30, 1910]
    assert ev["calibrated_end_global"].tolist() == [3000, 1010, 1030, 4910]
    assert ct.DefaultTimelinePlotSetting.event_type == before  # the default setting is not mutated
    no_depth = ct.prepare_timeline_events(hta_frame().drop(columns="depth"), symbol_table=sym_table())
    assert no_depth["task"].tolist() == ["cpu events", "cpu events", "gpu stream 007", "gpu stream 020"]
    ranks = ct.prepare_timeline_events(hta_frame().assign(rank=[0, 0, 1, 1]), symbol_table=sym_table())
    assert ranks["task"].tolist() == [
        "rank 000 cpu level 001",
        "rank 000 gpu stream 007",
        "rank 001 cpu level 000",
        "rank 001 gpu stream 020",
    ]
    exact = ct.prepare_timeline_events(
        hta_frame(), ct.TimelinePlotSetting(amplify_short_events=False, use_global_time=True), sym_table()
    )
    assert exact["calibrated_end_global"].tolist() == list(pd.to_datetime([3090, 150, 130, 5000], unit="us"))
    assert ct.prepare_timeline_events(hta_frame().iloc[:0], symbol_table=sym_table()).empty
    with pytest.raises(AnalysisError, match="dur"):
        ct.prepare_timeline_events(hta_frame().drop(columns="dur"))


def test_simplify_name():
    assert ct.simplify_name("autograd::engine::evaluate_function: AddmmBackward0") == "autograd::AddmmBackward0"
    assert ct.simplify_name("x" * 50) == "x" * 42 + "..."
    assert ct.simplify_name("<built-in method>") == "<built-in method>"


def test_align_module_with_kernels():
    df = hta_frame().assign(
        num_kernels=[1, 0, 0, 2], first_kernel_start=[120, -1, -1, 120], kernel_span=[10, 0, 0, 3880]
    )
    out = ct.align_module_with_kernels(df, ["## forward"], sym_table=sym_table())
    # device rows, then the annotation of "## forward ##" spanning its kernels on stream 0
    assert out[["index", "stream", "ts", "dur"]].values.tolist() == [
        [1, 7, 120, 10],
        [2, 20, 2000, 3000],
        [3, 0, 120, 3880],
    ]
    both = ct.align_module_with_kernels(
        df, ["aten::", "## forward"], sym_table=sym_table(), include_original_cpu_events=True
    )
    assert both["index"].tolist() == [0, 1, 2, 3, 0, 3] and both["stream"].tolist()[-2:] == [0, 0]
    decoded = df.assign(name=[SYM[i] for i in df["name"]])
    assert ct.align_module_with_kernels(decoded, ["## forward"])["index"].tolist() == [1, 2, 3]
    with pytest.raises(AnalysisError, match="kernel_span"):
        ct.align_module_with_kernels(hta_frame(), ["x"], sym_table=sym_table())


def test_prepare_timeline_gpu_events():
    df = hta_frame().assign(rank=[0, 0, 1, 1], iteration=[3, 3, 3, 3])
    ev = ct.prepare_timeline_gpu_events(df, sym_table())
    # stream −1 rows are left out by default; names as HTA's older module writes them, argument list cut
    assert ev["index"].tolist() == [1, 2]
    assert ev["s_name"].tolist() == ["at::native::anon::foo", "MemcpyDtoD"]
    assert ct.prepare_timeline_gpu_events(df, sym_table(), hta_compat=True)["s_name"].tolist() == [
        "at::native::",
        "MemcpyDtoD",
    ]
    assert ev["task"].tolist() == ["rank 0 stream 7", "rank 1 stream 20"]
    assert ev["calibrated_start_global"].tolist() == list(pd.to_datetime([120, 2000], unit="us"))
    assert ev["calibrated_end_global"].tolist() == list(pd.to_datetime([1120, 5000], unit="us"))
    assert ct.prepare_timeline_gpu_events(df, sym_table(), ranks=[1])["index"].tolist() == [2]
    with pytest.raises(AnalysisError, match="rank"):
        ct.prepare_timeline_gpu_events(hta_frame(), sym_table())


def test_fig_names():
    assert ct.get_fig_title_from_fig_name("gpu_kernel-timeline  plot") == "Gpu Kernel Timeline Plot"
    assert ct.get_fig_title_from_fig_name("") == "Untitled Figure"
    assert ct.get_fig_name_from_fig_title("A simple  Timeline") == "a_simple_timeline"
    assert ct.get_fig_name_from_fig_title(None) == "untitled_figure"


def test_names_importable_from_package():
    from holotrace import PlotFormat, Timeline, align_module_with_kernels, plot_timeline_gpu_kernels  # noqa: F401

    assert holotrace.TimelinePlotSetting is ct.TimelinePlotSetting


# ---------------------------------------------------------------------------------------------- builders
def test_events_timeline_builder_by_hand():
    from holotrace.render import plots_timeline as pt

    ev = ct.prepare_timeline_events(hta_frame(), symbol_table=sym_table())
    g = pt.events_timeline(ev, "t", hover=ct.DefaultHoverColumns)
    assert g.title == "t" and g.lanes == ("cpu level 000", "cpu level 001", "gpu stream 007", "gpu stream 020")
    # one kind per name (the colour column) in order of first appearance, D3 colours in that order
    assert g.kinds == ("## forward ##", "aten::mm", "at::native::anon::foo<int>", "Memcpy DtoD (Device -> Device)")
    assert g.colours == pt.D3_COLOURS[:4] and g.kind.tolist() == [0, 1, 2, 3] and g.lane.tolist() == [0, 1, 2, 3]
    # ns from the first start (0 µs), bars at their true dur, the axis to the widened end (4910 µs), on the
    # columns' own values (axis origin 0)
    assert g.t0_ns == 0 and g.axis_origin_ns == 0 and not g.dates
    assert g.start.tolist() == [0, 10_000, 30_000, 1_910_000]
    assert g.dur.tolist() == [3_000_000, 50_000, 10_000, 3_000_000]
    assert g.axis == (0, 4_910_000) and g.span == 4_910_000
    assert g.hover_fields == ("iteration", "stream", "cat", "index")  # HTA's hover columns present, in its order
    assert [v.tolist() for v in g.hover_values] == [
        [-1, 3, 3, 3],
        [-1, -1, 7, 20],
        ["user_annotation", "cpu_op", "kernel", "gpu_memcpy"],
        [3, 0, 1, 2],
    ]
    assert g.height == 50 + 80 * 4 and g.range_slider and not g.legend
    on_dates = pt.events_timeline(
        ct.prepare_timeline_events(hta_frame(), ct.TimelinePlotSetting(use_global_time=True), sym_table()), "t"
    )
    assert on_dates.dates and on_dates.t0_ns == 90_000 and on_dates.start.tolist() == g.start.tolist()
    assert on_dates.hover_fields == ()


def test_gpu_kernels_timeline_builder_by_hand():
    from holotrace.render import plots_timeline as pt

    ev = ct.prepare_timeline_gpu_events(hta_frame().assign(rank=[0, 0, 1, 1], iteration=3), sym_table())
    g = pt.gpu_kernels_timeline(ev, "g")
    assert g.lanes == ("rank 0 stream 7", "rank 1 stream 20") and g.kinds == ("at::native::anon::foo", "MemcpyDtoD")
    # a date axis from 120 µs after the epoch; bars to the widened end (the kernel: 10 µs drawn as 1000 µs)
    assert g.dates and g.t0_ns == 120_000 and g.start.tolist() == [0, 1_880_000]
    assert g.dur.tolist() == [1_000_000, 3_000_000] and g.axis == (0, 4_880_000)
    assert g.width == 1600 and g.height == 200 + 120 * 2 and not g.legend and not g.range_slider
    assert g.hover_fields == ("cat", "dur", "iteration", "name", "rank", "s_cat", "s_name", "stream")
    assert pt.gpu_kernels_timeline(ev, "g", ranks=[0, 1, 2]).height == 200 + 120 * 3


def test_gpu_operations_builder(job):
    from holotrace.render import plots_timeline as pt
    from holotrace.render.plots import KERNEL_TYPE_COLOURS, KERNEL_TYPES

    g = pt.gpu_operations(gpu_timeline(job), min_width_us=20)
    assert g.lanes == ("rank 0 stream 7", "rank 0 stream 20", "rank 1 stream 7")
    assert g.kinds == ("COMPUTATION", "COMMUNICATION", "MEMORY")
    assert g.colours == tuple(KERNEL_TYPE_COLOURS[KERNEL_TYPES.index(k)] for k in g.kinds)  # the report's colours
    assert g.t0_ns == 10_000 and g.axis_origin_ns == 0  # µs from the view's origin, not from the first operation
    assert (g.start + g.t0_ns).tolist() == [10_000, 50_000, 150_000, 30_000, 20_000, 120_000]
    assert g.dur.tolist() == [30_000, 20_000, 20_000, 50_000, 50_000, 20_000]  # 5 and 10 µs widened to 20
    assert dict(zip(g.hover_fields, g.hover_values))["dur_us"].tolist() == [30.0, 5.0, 10.0, 50.0, 50.0, 10.0]
    hta = pt.gpu_operations(gpu_timeline(job_view(job, HTA)))  # µs frames give the same ns
    assert hta.t0_ns == 10_000 and hta.dur.tolist()[:2] == [30_000, 5_000]


def test_memory_export_builder(tmp_path):
    from holotrace.analysis.memory import MEMORY_CATEGORIES
    from holotrace.render import charts as ch
    from holotrace.render import plots_timeline as pt

    p = tmp_path / "m.json"
    p.write_text(json.dumps([[-1, 1, 100, 0], [10, 2, 50, 4], [10, 3, 25, 4], [20, 4, -50, 4]]))
    c = pt.memory_export(*holotrace.MemoryAnalysis(str(p))._process_raw_events(), MEMORY_CATEGORIES)
    assert c.title == "Memory timeline" and [s.name for s in c.series] == list(MEMORY_CATEGORIES)
    assert c.stacked and not c.step and c.points is None and (c.width, c.height) == (1200, 800)
    assert [s.colour for s in c.series] == list(pt.MEMORY_COLOURS)
    gib = 1024**3
    assert c.series[0].x.tolist() == [0.0, 0.0, 1e-5] and np.allclose(c.series[4].y, [0, 75 / gib, 25 / gib])
    tops = ch.line_points(c)  # what is drawn: each band on top of the ones before it
    assert np.allclose(tops[4][1], [100 / gib, 175 / gib, 125 / gib]) and np.allclose(tops[7][1], tops[4][1])
    assert pt.memory_export([], [], MEMORY_CATEGORIES).series == ()


# ---------------------------------------------------------------------------------------------- figures
@needs_plotly
def test_gpu_timeline_figure(job):
    from holotrace.render import plotly_figures as pf
    from holotrace.render import plots_timeline as pt
    from holotrace.render.timeline import gpu_timeline_figure

    fig = gpu_timeline_figure(gpu_timeline(job))
    assert fig.to_json() == pf.figure(pt.gpu_operations(gpu_timeline(job))).to_json()  # the builder, drawn by plotly
    assert fig.layout.title.text == "GPU timeline" and fig.layout.showlegend and fig.layout.xaxis.rangeslider.visible
    assert [t.name for t in fig.data] == ["COMPUTATION", "COMMUNICATION", "MEMORY"]  # one trace per kernel type
    comp = fig.data[0]
    assert list(comp.base) == [10.0, 50.0, 150.0, 20.0] and list(comp.x) == [30.0, 5.0, 10.0, 50.0]
    assert list(comp.y) == ["rank 0 stream 7"] * 3 + ["rank 1 stream 7"]
    assert list(fig.layout.xaxis.range) == [10.0, 160.0]
    assert fig.layout.xaxis.title.text == "Time (µs from the trace start)"
    assert list(fig.layout.yaxis.categoryarray) == ["rank 0 stream 7", "rank 0 stream 20", "rank 1 stream 7"]
    for f in ("cat", "kernel_type", "iteration", "index", "dur_us"):
        assert f"{f}=%{{customdata" in comp.hovertemplate
    wide = gpu_timeline_figure(gpu_timeline(job), min_width_us=20)
    assert list(wide.data[0].x) == [30.0, 20.0, 20.0, 50.0] and list(wide.layout.xaxis.range) == [10.0, 170.0]


@needs_plotly
def test_hta_timeline_figures():
    from holotrace.render import plotly_figures as pf
    from holotrace.render import plots_timeline as pt

    ev = ct.prepare_timeline_events(hta_frame(), symbol_table=sym_table())
    fig = ct.Timeline(ev, sym_table()).figure("t")
    assert fig.to_json() == pf.figure(pt.events_timeline(ev, "t", hover=ct.DefaultHoverColumns)).to_json()
    assert fig.layout.title.text == "t" and len(fig.data) == 4  # one trace per name (the colour column)
    assert [(t.name, t.marker.color) for t in fig.data] == list(
        zip(
            ["## forward ##", "aten::mm", "at::native::anon::foo<int>", "Memcpy DtoD (Device -> Device)"], pt.D3_COLOURS
        )
    )
    # bars at their true length, the widened ends only stretch the axis
    assert sorted(float(t.x[0]) for t in fig.data) == [10.0, 50.0, 3000.0, 3000.0]
    assert [(t.y[0], float(t.base[0])) for t in fig.data] == [
        ("cpu level 000", 0.0),
        ("cpu level 001", 10.0),
        ("gpu stream 007", 30.0),
        ("gpu stream 020", 1910.0),
    ]
    assert list(fig.layout.xaxis.range) == [0.0, 4910.0] and fig.layout.height == 50 + 80 * 4
    assert list(fig.layout.yaxis.categoryarray) == list(pt.events_timeline(ev, "t").lanes)
    assert fig.layout.xaxis.rangeslider.visible and not fig.layout.showlegend
    hover = fig.data[1]
    assert all(f"{c}=%{{customdata" in hover.hovertemplate for c in ("iteration", "stream", "cat", "index"))
    assert list(hover.customdata[0][2:]) == [3, -1, "cpu_op", 0]  # aten::mm's iteration, stream, cat, index
    html = ct.plot_events_timeline("t", ev, ct.TimelinePlotSetting(plot_format=ct.PlotFormat.HTML))
    assert html.startswith("<!doctype html>") and "cdn.plot.ly" in html
    filtered = ct.Timeline(hta_frame(), sym_table(), filter_func=lambda df, st: df[df["stream"] > 0])
    assert filtered.timeline_events["task"].tolist() == ["gpu stream 007", "gpu stream 020"]
    on_dates = ct.Timeline(
        ct.prepare_timeline_events(hta_frame(), ct.TimelinePlotSetting(use_global_time=True), sym_table()), sym_table()
    ).figure("d")
    assert on_dates.layout.xaxis.type == "date" and on_dates.data[3].base[0] == "1970-01-01 00:00:00.002000"
    assert list(on_dates.layout.xaxis.range) == ["1970-01-01 00:00:00.000090", "1970-01-01 00:00:00.005000"]
    assert float(on_dates.data[3].x[0]) == 3.0  # ms on the date axis
    evg = ct.prepare_timeline_gpu_events(hta_frame().assign(rank=[0, 0, 1, 1], iteration=3), sym_table())
    old = ct.timeline_gpu_figure("g", evg)
    assert old.to_json() == pf.figure(pt.gpu_kernels_timeline(evg, "g")).to_json()
    assert old.layout.title.text == "g" and [t.name for t in old.data] == ["at::native::anon::foo", "MemcpyDtoD"]
    assert [t.marker.color for t in old.data] == list(pt.D3_COLOURS[:2]) and not old.layout.showlegend
    assert old.layout.width == 1600 and old.layout.height == 200 + 120 * 2 and old.layout.xaxis.type == "date"
    assert list(old.data[0].x) == [1.0] and list(old.data[1].x) == [3.0]  # ms on the date axis, the kernel widened
    assert list(old.data[1].y) == ["rank 1 stream 20"] and "s_name=%{customdata" in old.data[1].hovertemplate


@needs_plotly
def test_hta_timeline_from_trace_and_file(job, tmp_path):
    from holotrace.compat.trace import Trace

    trace = Trace.from_job(job)
    ct.plot_timeline_gpu_kernels_from_trace("k", trace, ranks=[1])  # outside a notebook: shows nothing
    out = tmp_path / "t.html"
    ct.Timeline(trace.get_trace(0), trace.symbol_table).plot("t", save_path=str(out))
    text = out.read_text()
    assert GEMM in text and "gpu stream 020" in text and "cpu events" in text  # rank 0's names and lanes


def test_no_plotly_is_a_typed_error(job, monkeypatch, tmp_path):
    for mod in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "plotly", None)
    from holotrace.render import plots_timeline as pt
    from holotrace.render.timeline import gpu_timeline_figure

    frame = gpu_timeline(job)  # the data and the description need no plotly
    assert len(pt.gpu_operations(frame).lane) == 6
    with pytest.raises(PlottingUnavailableError, match="needs plotly.*holotrace\\[plot\\]"):
        gpu_timeline_figure(frame)
    ev = ct.prepare_timeline_events(hta_frame(), symbol_table=sym_table())
    with pytest.raises(PlottingUnavailableError):
        ct.Timeline(ev, sym_table()).plot("t")
    p = tmp_path / "m.json"
    p.write_text(json.dumps([[-1, 1, 100, 0], [10, 2, 50, 4]]))
    with pytest.raises(PlottingUnavailableError, match="memory timeline"):
        holotrace.MemoryAnalysis(str(p)).plot_memory_timeline()


# ---------------------------------------------------------------------------------------------- MemoryAnalysis
@needs_plotly
def test_memory_analysis_plot(tmp_path, monkeypatch):
    from holotrace.analysis.memory import MEMORY_CATEGORIES
    from holotrace.render import plotly_figures as pf
    from holotrace.render import plots_timeline as pt

    p = tmp_path / "m.json"
    p.write_text(json.dumps([[-1, 1, 100, 0], [10, 2, 50, 4], [10, 3, 25, 4], [20, 4, -50, 4]]))
    ma = holotrace.MemoryAnalysis(str(p))
    fig = ma.memory_timeline_figure()
    assert fig.to_json() == pf.figure(pt.memory_export(*ma._process_raw_events(), MEMORY_CATEGORIES)).to_json()
    assert [t.name for t in fig.data] == list(MEMORY_CATEGORIES)
    # HTA's rows: the pre-existing instant (time −1 → the first real time, 10 ns), 10 ns, 20 ns
    assert list(fig.data[0].x) == [0.0, 0.0, 1e-5]
    gib = 1024**3
    assert np.allclose(fig.data[0].y, [100 / gib] * 3)
    assert np.allclose(fig.data[4].y, [100 / gib, 175 / gib, 125 / gib])  # stacked: parameters + activations
    assert np.allclose(fig.data[7].y, fig.data[4].y)
    # HTA's stacked areas: each filled down to the one before it in its Pastel colour, straight lines
    assert [(t.fill, t.fillcolor, t.line.color, t.line.shape) for t in fig.data] == [
        ("tonexty", c, c, "linear") for c in pt.MEMORY_COLOURS
    ]
    assert fig.layout.xaxis.title.text == "Time (ms)" and fig.layout.yaxis.title.text == "Memory (GiB)"
    assert fig.layout.width == 1200 and fig.layout.height == 800 and fig.layout.title.text == "Memory timeline"
    assert ma.plot_memory_timeline() is None  # outside a notebook nothing is shown
    monkeypatch.chdir(tmp_path)
    if importlib.util.find_spec("kaleido") is None:
        with pytest.raises(PlottingUnavailableError, match="kaleido"):
            ma.plot_memory_timeline(save_graph=True)
    else:  # pragma: no cover - depends on the environment
        ma.plot_memory_timeline(save_graph=True)
        assert (tmp_path / "images" / "memory_plot.png").stat().st_size > 0
