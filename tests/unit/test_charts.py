"""One set of plot builders (render/plots.py) drawn by two renderers: the report's SVG and plotly.

Builders are checked on small hand-built frames (values worked out by hand); the SVG and plotly renderings of
one description are checked to show the same labels and values; the facade's ``visualize=True`` figures and
the report's plots are checked to be those builders' descriptions.
"""

from __future__ import annotations

import re
import sys
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _core_traces import mixed_trace

import holotrace
from holotrace import TraceAnalysis
from holotrace.errors import PlottingUnavailableError
from holotrace.render import charts as ch
from holotrace.render import plots
from holotrace.render import report_svg as svg

REAL_JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"


def titles(html: str) -> list[str]:
    """The hover texts of the marks of an SVG, in order."""
    return [unescape(t) for t in re.findall(r'class="mark"[^>]*><title>(.*?)</title>', html, flags=re.S)]


def _plotly():
    pytest.importorskip("plotly", reason="plotly (the plot extra) is not installed: the plotly renderer cannot run")
    from holotrace.render import plotly_figures

    return plotly_figures


# ---------------------------------------------------------------------------------------------- builders


def test_temporal_breakdown_stacks_the_three_percentages():
    df = pd.DataFrame(
        {
            "rank": [0, 1],
            "idle_time_pctg": [50.0, 25.0],
            "compute_time_pctg": [30.0, 60.0],
            "non_compute_time_pctg": [20.0, 15.0],
        }
    )
    c = plots.temporal_breakdown(df)
    assert isinstance(c, ch.StackedBars) and c.labels == ("0", "1") and c.title == "Temporal breakdown across ranks"
    assert [s.name for s in c.series] == ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
    assert c.series[1].values.tolist() == [30.0, 60.0] and c.label_title == "Rank"


def test_idle_per_stream_one_chart_per_rank_categories_on_every_stream():
    idle = pd.DataFrame(
        {
            "rank": [0, 0, 0, 1],
            "stream": [7, 20, 7, 7],
            "idle_category": ["host_wait", "host_wait", "other", "other"],
            "idle_time": [10.0, 4.0, 6.0, 3.0],
            "idle_time_ratio": [0.5, 1.0, 0.3, np.nan],
        }
    )
    r0, r1 = plots.idle_per_stream(idle)
    assert r0.title == "Idle time breakdown on rank 0 per stream" and r0.labels == ("7", "20")
    assert [(s.name, s.values.tolist()) for s in r0.series] == [("host_wait", [0.5, 1.0]), ("other", [0.3, 0.0])]
    assert np.isnan(r1.series[0].values[0])  # HTA's NaN ratio stays NaN: no bar
    (a, _), (b, _) = [(c.series[0].values.tolist(), c) for c in plots.idle_per_stream(idle, pctg=False)]
    assert a == [10.0, 4.0] and b == [3.0]


def test_kernel_per_rank_errors_are_the_distance_to_min_and_max():
    k = pd.DataFrame(
        {
            "name": ["gemm", "gemm", "others"],
            "kernel_type": ["COMPUTATION"] * 3,
            "rank": [0, 1, 0],
            "mean (us)": [10.0, 20.0, 1.0],
            "min (us)": [4.0, 15.0, 1.0],
            "max (us)": [12.0, 30.0, 1.0],
        }
    )
    (c,) = plots.kernel_per_rank(k)  # "others" is not a kernel
    assert c.title == 'Kernel type "COMPUTATION" - gemm' and c.labels == ("0", "1")
    s = c.series[0]
    assert (
        s.values.tolist() == [10.0, 20.0]
        and s.error_plus.tolist() == [2.0, 10.0]
        and s.error_minus.tolist() == [6.0, 5.0]
    )


def test_gpu_time_shows_other_only_when_there_is_some():
    split = pd.DataFrame(
        {
            "rank": [0, 1],
            "compute_ms": [5.0, 6.0],
            "communication_ms": [1.0, 0.0],
            "memory_ms": [0.5, 0.5],
            "other_ms": [0.0, 0.0],
            "idle_ms": [3.5, 3.5],
            "span_ms": [10.0, 10.0],
        }
    )
    c = plots.gpu_time(split)
    assert [s.name for s in c.series] == ["compute", "communication", "memory", "idle"]
    assert c.labels == ("rank 0", "rank 1")
    split.loc[1, "other_ms"] = 0.25
    assert [s.name for s in plots.gpu_time(split).series][3] == "other"


def test_idle_causes_sums_streams_in_ms():
    idle = pd.DataFrame(
        {
            "rank": [0, 0, 0, 1],
            "stream": [7, 20, 7, 7],
            "idle_category": ["host_wait", "host_wait", "other", "other"],
            "idle_us": [1000.0, 500.0, 250.0, 2000.0],
        }
    )
    c, shown = plots.idle_causes(idle)
    assert shown.columns == ["rank", "host_wait", "other"]
    assert shown["host_wait"].tolist() == [1.5, 0.0] and shown["other"].tolist() == [0.25, 2.0]
    assert [s.name for s in c.series] == ["host wait", "other"] and c.series[0].values.tolist() == [1.5, 0.0]


def test_critical_path_groups_by_what_bounds_it():
    cp = pd.DataFrame({"bound_by": ["kernel", "cpu", "kernel", ""], "duration": [2_000_000, 1_000_000, 1_000_000, 7]})
    c, frame = plots.critical_path(cp)
    assert c.labels == ("kernel", "cpu") and c.series[0].values.tolist() == [3.0, 1.0]
    assert frame["pct"].tolist() == [75.0, 25.0]


def test_gpu_timeline_lanes_sorted_times_from_the_first_operation():
    tl = pd.DataFrame(
        {
            "rank": [1, 0, 0],
            "stream": [7, 20, 7],
            "start": [1500, 1000, 1200],
            "end": [1600, 1100, 1250],
            "name": ["gemm", "ncclKernel_AllReduce", "gemm"],
            "kernel_type": ["COMPUTATION", "COMMUNICATION", "COMPUTATION"],
        }
    )
    g = plots.gpu_timeline(tl, step=5)
    assert g.lanes == ("rank 0 stream 7", "rank 0 stream 20", "rank 1 stream 7")
    assert g.lane.tolist() == [0, 1, 2] and g.start.tolist() == [200, 0, 500] and g.dur.tolist() == [50, 100, 100]
    assert [g.kinds[k] for k in g.kind] == ["COMPUTATION", "COMMUNICATION", "COMPUTATION"]
    assert [g.names[i] for i in g.label] == ["gemm", "ncclKernel_AllReduce", "gemm"] and g.label[0] == g.label[2]
    assert g.t0_ns == 1000 and g.span == 600 and g.caption == "step 5"
    js = svg.gantt_json(g)
    assert js["s"] == [200, -200, 500] and js["span"] == 600  # starts delta-encoded in lane order


def test_counter_lines_share_the_first_sample_as_origin():
    q = {
        0: pd.DataFrame({"ts": [2_000_000, 4_000_000], "queue_length": [1, 3]}),
        1: pd.DataFrame({"ts": [1_000_000], "queue_length": [2]}),
    }
    c = plots.counter_lines(q, "queue_length", name="queue-length", title="Queue", unit="kernels", by_name=False)
    assert [(s.name, s.x.tolist(), s.y.tolist()) for s in c.series] == [
        ("rank 0", [1.0, 3.0], [1.0, 3.0]),
        ("rank 1", [0.0], [2.0]),
    ]


def test_launch_histograms_take_the_flagged_rows():
    df = pd.DataFrame(
        {
            "cpu_duration": [5.0, 60.0, 7.0],
            "launch_delay": [1.0, 2.0, 300.0],
            "short_kernel": [True, False, True],
            "runtime_outlier": [False, True, False],
            "launch_delay_outlier": [False, False, True],
        }
    )
    a, b, c = plots.launch_histograms({3: df}, 50, 100)
    assert a.values.tolist() == [5.0, 7.0] and b.values.tolist() == [60.0] and c.values.tolist() == [300.0]
    assert b.bins == 300 and c.title == "Launch Delay Outliers (duration > 100 us) on rank 3"


def test_descriptions_refuse_a_series_of_the_wrong_length():
    with pytest.raises(ValueError, match="2 values for 3 labels"):
        ch.Bars(name="x", labels=["a", "b", "c"], series=[ch.Series("s", [1, 2])])


def test_peaks_keep_the_largest_value_of_each_bucket():
    x, y = ch.peaks(ch.Line("l", [0, 1, 2, 3, 9, 10], [1, 5, 2, 0, 4, 3]), 0.0, 10.0, 2)
    assert x.tolist() == [2.5, 7.5] and y.tolist() == [5.0, 4.0]


# ---------------------------------------------------------------------------------------------- two renderers, same values


BARS = ch.Bars(
    name="b",
    title="Two series",
    labels=["rank 0", "rank 1"],
    unit="ms",
    digits=2,
    series=[ch.Series("a", [1.5, 2.25]), ch.Series("b", [0.5, np.nan])],
)


def test_svg_bars_show_every_value_and_skip_nan():
    html = svg.render(BARS)
    assert titles(html) == ["rank 0 · a: 1.50 ms", "rank 0 · b: 0.50 ms", "rank 1 · a: 2.25 ms"]
    assert 'aria-label="Two series"' in html and 'data-plot="b"' in html


def test_plotly_and_svg_show_the_same_bars():
    pf = _plotly()
    fig = pf.figure(BARS)
    assert fig.layout.title.text == "Two series" and fig.layout.barmode == "group"
    assert [(t.name, list(t.x), list(t.y)) for t in fig.data][0] == ("a", ["rank 0", "rank 1"], [1.5, 2.25])
    shown = {(t.name, x, y) for t in fig.data for x, y in zip(t.x, t.y) if y == y}
    from_svg = {
        (m.group(2), m.group(1), float(m.group(3)))
        for m in (re.match(r"(.*) · (.*): ([\d.]+) ms", s) for s in titles(svg.render(BARS)))
    }
    assert shown == from_svg


def test_stacked_bars_same_segments_in_both():
    pf = _plotly()
    c = plots.gpu_time(
        pd.DataFrame(
            {
                "rank": [0],
                "compute_ms": [6.0],
                "communication_ms": [2.0],
                "memory_ms": [0.0],
                "other_ms": [0.0],
                "idle_ms": [2.0],
                "span_ms": [10.0],
            }
        )
    )
    assert titles(svg.render(c)) == [
        "rank 0 · compute: 6.00 ms (60.0%)",
        "rank 0 · communication: 2.00 ms (20.0%)",
        "rank 0 · idle: 2.00 ms (20.0%)",
    ]  # no segment for 0 ms of memory
    fig = pf.figure(c)
    assert fig.layout.barmode == "relative" and [t.orientation for t in fig.data] == ["h"] * 4
    assert [(t.name, list(t.x)) for t in fig.data] == [
        ("compute", [6.0]),
        ("communication", [2.0]),
        ("memory", [0.0]),
        ("idle", [2.0]),
    ]


def test_log_histogram_same_bins_and_counts_in_both():
    pf = _plotly()
    c = plots.launch_delay(np.array([1.0, 10.0, 10.0, 100.0, 0.0, np.nan]), 50.0)
    counts_svg = [int(t.rsplit(": ", 1)[1]) for t in titles(svg.render(c))]
    fig = pf.figure(c)
    bars = fig.data[0]
    assert sum(counts_svg) == 4  # 0 and NaN cannot be drawn on a log scale
    assert [int(v) for v in bars.y if v] == counts_svg
    edges = ch.histogram_edges(c)
    assert len(edges) == ch.HISTOGRAM_BINS + 1 and edges[0] == 1.0 and np.isclose(edges[-1], 100.0)
    assert np.allclose(bars.x, edges[:-1]) and fig.layout.xaxis.type == "log"


def test_pie_strip_lines_table_gantt_in_both():
    pf = _plotly()
    pie = ch.Pie(name="p", title="Rank 0", labels=["fwd", "bwd", "none"], values=[1.0, 3.0, 0.0], unit="us")
    assert titles(svg.render(pie)) == ["fwd: 1.0 us (25.0%)", "bwd: 3.0 us (75.0%)"]
    f = pf.figure(pie)
    assert list(f.data[0].labels) == ["fwd", "bwd", "none"] and list(f.data[0].values) == [1.0, 3.0, 0.0]

    strip = ch.Strip(name="s", groups=[ch.StripGroup("rank 0", [2.0, 4.0], ["step 1", "step 2"])], unit="ms")
    assert titles(svg.render(strip)) == ["rank 0 · step 1: 2.0 ms", "rank 0 · step 2: 4.0 ms"]
    f = pf.figure(strip)
    assert (
        list(f.data[0].x) == [2.0, 4.0] and list(f.data[0].text) == ["step 1", "step 2"] and list(f.data[1].x) == [3.0]
    )

    lines = ch.Lines(name="l", series=[ch.Line("rank 0", np.arange(1000.0), np.arange(1000.0) % 7)], points=50)
    f = pf.figure(lines)
    pts = re.search(r'<polyline class="mark" points="([^"]*)"', svg.render(lines)).group(1).split()
    assert len(f.data[0].x) == 50 and len(pts) == 2 * 50 - 1  # the same 50 peaks; the SVG draws them as steps
    assert set(f.data[0].y) == {6.0}

    table = ch.Table(name="t", title="T", columns=["op", "mean"], cells=[["aten::mm", "aten::add"], [1.5, 2.0]])
    html = svg.render(table)
    assert '<td class="t">aten::mm</td><td>1.50</td>' in html and '<th class="t">mean</th>' in html
    f = pf.figure(table)
    assert list(f.data[0].header.values) == ["op", "mean"] and list(f.data[0].cells.values[1]) == [1.5, 2.0]

    tl = pd.DataFrame(
        {
            "rank": [0, 0],
            "stream": [7, 7],
            "start": [1000, 3000],
            "end": [2000, 3500],
            "name": ["gemm", "nccl"],
            "kernel_type": ["COMPUTATION", "COMMUNICATION"],
        }
    )
    g = plots.gpu_timeline(tl, 1)
    assert 'data-events="2"' in svg.render(g)
    f = pf.figure(g)
    assert {t.name: (list(t.base), list(t.x)) for t in f.data} == {
        "COMMUNICATION": ([2.0], [0.5]),
        "COMPUTATION": ([0.0], [1.0]),
    }


STACKED = ch.Lines(
    name="m",
    title="Memory",
    series=[ch.Line("a", [0, 1, 2], [1, 2, 1], colour="#123456"), ch.Line("b", [0, 1, 2], [3, 0, 1])],
    points=None,
    step=False,
    stacked=True,
    y_unit="GiB",
)


def test_stacked_lines_same_tops_in_both():
    pf = _plotly()
    assert [y.tolist() for _, y in ch.line_points(STACKED)] == [[1.0, 2.0, 1.0], [4.0, 2.0, 2.0]]
    html = svg.render(STACKED)
    assert html.count("<polygon") == 2 and 'fill="#123456"' in html  # a filled band per series, the colour hint kept
    assert titles(html) == ["a: max 2 GiB", "b: max 3 GiB"]  # each series' own values on hover
    # straight lines: 3 points per top; the second band's top is the sum, 4 at x=0 (the highest point: y = 10)
    tops = re.findall(r'<polyline class="mark" points="([^"]*)"', html)
    assert [len(t.split()) for t in tops] == [3, 3] and tops[1].split()[0].endswith(",10.0")
    fig = pf.figure(STACKED)
    assert [(list(t.y), t.fill, t.line.shape) for t in fig.data] == [
        ([1.0, 2.0, 1.0], "tonexty", "linear"),
        ([4.0, 2.0, 2.0], "tonexty", "linear"),
    ]
    assert fig.data[0].fillcolor == fig.data[0].line.color == "#123456"
    with pytest.raises(ValueError, match="share their x"):
        ch.Lines(name="x", series=[ch.Line("a", [0, 1], [1, 1]), ch.Line("b", [0, 2], [1, 1])], stacked=True)


def test_svg_draws_the_timeline_descriptions():
    """The HTA-compatible timelines' and the memory timeline's descriptions are drawn by the report's renderer
    too: the canvas timeline with their lanes, kinds and operations, and stacked areas."""
    from holotrace.compat import timeline as ct
    from holotrace.render import plots_timeline as pt

    frame = pd.DataFrame(
        {
            "name": ["aten::mm", "gemm", "<big>"],
            "ts": [100, 120, 2000],
            "dur": [50, 10, 3000],
            "stream": [-1, 7, 7],
            "depth": [0, -1, -1],
            "index": [0, 1, 2],
            "iteration": [1, 1, 1],
            "rank": [0, 0, 0],
            "cat": ["cpu_op", "kernel", "kernel"],
        }
    )
    for setting in (ct.TimelinePlotSetting(), ct.TimelinePlotSetting(use_global_time=True)):
        g = pt.events_timeline(ct.prepare_timeline_events(frame, setting), "t", hover=ct.DefaultHoverColumns)
        html = svg.render(g)
        js = svg.gantt_json(g)
        assert 'data-events="3"' in html and 'data-plot="events-timeline"' in html
        assert js["lanes"] == ["cpu level 000", "gpu stream 007"] and js["types"] == ["aten::mm", "gemm", "<big>"]
        assert js["letters"] == ["", "", ""] and js["span"] == 4_900_000  # <big>: 1900 µs + 3000 µs
        assert "&lt;big&gt;</span>" in html and "= &lt;big" not in html  # the key names each kind, no letters
    gk = pt.gpu_kernels_timeline(ct.prepare_timeline_gpu_events(frame.assign(iteration=1), None), "g")
    assert 'data-events="2"' in svg.render(gk) and svg.gantt_json(gk)["lanes"] == ["rank 0 stream 7"]
    mem = pt.memory_export(
        [10, 20],
        [[1024**3, 0, 0, 0, 0, 0, 0, 0], [1024**3, 0, 0, 0, 2 * 1024**3, 0, 0, 0]],
        ["Parameter", "Optimizer state", "Input", "Temporary", "Activation", "Gradient", "Autograd", "Unknown"],
    )
    html = svg.render(mem)
    assert html.count("<polygon") == 8 and 'aria-label="Memory timeline"' in html
    assert titles(html)[0] == "Parameter: max 1 Memory (GiB)" and titles(html)[4] == "Activation: max 2 Memory (GiB)"
    many = ch.Gantt(
        name="g",
        lanes=["l"],
        lane=np.zeros(50),
        start=np.arange(50),
        dur=np.ones(50),
        kind=np.arange(50),
        label=np.zeros(50),
        names=["n"],
        kinds=[f"k{i}" for i in range(50)],
        colours=["#000"] * 50,
    )
    assert "and 10 more" in svg.render(many)  # a long colour key is cut
    with pytest.raises(ValueError, match="hover fields"):
        ch.Gantt(
            name="g",
            lanes=["l"],
            lane=[0],
            start=[0],
            dur=[1],
            kind=[0],
            label=[0],
            names=["n"],
            kinds=["k"],
            colours=["#000"],
            hover_fields=["a"],
            hover_values=[[1, 2]],
        )


def test_plotly_missing_is_a_typed_error_builders_and_svg_still_work(monkeypatch):
    for mod in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "plotly", None)
    from holotrace.render import plotly_figures

    assert svg.render(BARS).startswith("<svg")
    with pytest.raises(PlottingUnavailableError, match=r"needs plotly.*holotrace\[plot\]"):
        plotly_figures.figure(BARS)


# ---------------------------------------------------------------------------------------------- one set of builders


def test_facade_figures_are_the_builders_drawn_by_plotly(tmp_path):
    pf = _plotly()
    job = holotrace.load(mixed_trace().write(tmp_path / "t.json"), cache=False)
    ta = TraceAnalysis(job=job)
    out = ta.get_temporal_breakdown(visualize=True)
    assert [f.to_json() for f in ta.figures] == [pf.figure(plots.temporal_breakdown(out)).to_json()]
    assert list(ta.figures[0].data[0].y) == out["idle_time_pctg"].tolist()
    idle, _ = ta.get_idle_time_breakdown(visualize=True)
    assert [f.to_json() for f in ta.figures] == [f.to_json() for f in pf.figures(plots.idle_per_stream(idle))]
    ov = ta.get_comm_comp_overlap(visualize=True)
    (fig,) = ta.figures
    assert fig.layout.title.text == "Computation-communication overlap"
    assert list(fig.data[0].y) == ov["comp_comm_overlap_pctg"].tolist() and list(fig.data[0].x) == ["rank 0"]
    types, kernels = ta.get_gpu_kernel_breakdown(visualize=True)
    assert len(ta.figures) == 1 + len(kernels[kernels["name"] != "others"].groupby(["kernel_type", "name"]))
    assert ta.figures[0].data[0].type == "pie"


def test_report_plots_are_the_builders_drawn_as_svg():
    from holotrace.commands.report import report_data
    from holotrace.render.report import render_report

    job = holotrace.load(str(REAL_JOB))
    d = report_data(job, critical_path=False)
    html = render_report(d)
    for chart in (
        plots.gpu_time(d["gpu_split"]),
        plots.top_kernels(d["top_kernels"]),
        plots.kernel_types(d["types"]),
        plots.step_times(d["steps"]),
        plots.gpu_timeline(d["timeline"], d["timeline_step"]),
    ):
        assert svg.render(chart) in html, chart.name
