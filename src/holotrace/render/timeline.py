"""Plotly figures of timelines: GPU work per stream over time (Gantt bars) and the memory timeline.

Requires plotly (the ``plot`` extra): every figure function raises
:class:`~holotrace.errors.PlottingUnavailableError` when it is missing (the data functions never need it).
Fed with the frames of :mod:`holotrace.analysis.timeline`, :mod:`holotrace.analysis.memory` and the
HTA-compatible timeline frames of :mod:`holotrace.compat.timeline`, which are never modified.
"""

from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.errors import PlottingUnavailableError

__all__ = ["gantt_figure", "timeline_figure", "gpu_timeline_figure", "memory_export_figure", "write_figure",
           "show_figure", "require_plotly", "MEMORY_COLORS", "D3_COLORS", "KERNEL_TYPE_COLORS"]

# Plotly's "Pastel" qualitative palette, one colour per memory category (HTA's choice)
MEMORY_COLORS = ("rgb(102, 197, 204)", "rgb(246, 207, 113)", "rgb(248, 156, 116)", "rgb(220, 176, 242)",
                 "rgb(135, 197, 95)", "rgb(158, 185, 243)", "rgb(254, 136, 177)", "rgb(201, 219, 116)")
# Plotly's "D3" qualitative palette (HTA's Gantt colours), cycled over colour groups
D3_COLORS = ("#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B", "#E377C2", "#7F7F7F", "#BCBD22",
             "#17BECF")
KERNEL_TYPE_COLORS = {"COMPUTATION": "#1F77B4", "COMMUNICATION": "#D62728", "MEMORY": "#2CA02C", "OTHER": "#7F7F7F"}


def require_plotly(what: str):
    """``plotly.graph_objects``, or a one-line error naming ``what`` needed it."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise PlottingUnavailableError(f"{what} needs plotly, which is not installed",
                                       fix="pip install 'holotrace[plot]', or use the data functions "
                                           "(holotrace.analysis.timeline.gpu_timeline)") from None
    return go


def _is_time(col: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(col)


def _hover(part: pd.DataFrame, hover: Sequence[str]):
    """``(customdata, hovertemplate lines)`` of the hover columns present in ``part``."""
    cols = [c for c in hover if c in part.columns]
    if not cols:
        return None, ""
    data = np.column_stack([part[c].astype(str).to_numpy() if _is_time(part[c]) else part[c].to_numpy(dtype=object)
                            for c in cols])
    return data, "".join(f"<br>{c}=%{{customdata[{i}]}}" for i, c in enumerate(cols))


def gantt_figure(rows: pd.DataFrame, title: str, *, x_start: str = "start", x_end: str = "end", task: str = "task",
                 color: str = "label", hover: Sequence[str] = (), lengths: Optional[str] = None,
                 tasks: Optional[Sequence[str]] = None, colors: Optional[dict] = None, height: Optional[int] = None,
                 width: Optional[int] = None, task_height: int = 30, range_slider: bool = False,
                 x_range: Optional[Sequence] = None, x_title: Optional[str] = None, legend: bool = False):
    """A Gantt chart: one horizontal bar per row on its ``task`` line, one plotly trace per ``color`` value
    (in order of first appearance), bars from ``x_start`` to ``x_end``.

    ``lengths``: a column drawn as the bars' lengths instead (``x_end`` then only widens the axis; HTA draws
    short kernels at their true length this way); on a date axis (datetime ``x_start``) it is in µs.
    ``tasks``: the lines from top to bottom (sorted task names by default). ``x_range`` defaults to
    ``[min x_start, max x_end]``.
    """
    go = require_plotly("a timeline plot")
    date_axis = len(rows) > 0 and _is_time(rows[x_start])
    order = list(tasks) if tasks is not None else sorted(pd.unique(rows[task]).tolist()) if len(rows) else []
    fig = go.Figure()
    if len(rows):
        keys = rows[color].astype(str).to_numpy()
        uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        for n, k in enumerate(np.argsort(first, kind="stable").tolist()):
            part = rows.iloc[np.flatnonzero(inv == k)]
            if date_axis:
                base = part[x_start].dt.strftime("%Y-%m-%d %H:%M:%S.%f").to_numpy()
                x = (part[lengths].to_numpy(dtype=np.float64) / 1e3 if lengths is not None else
                     (part[x_end] - part[x_start]).dt.total_seconds().to_numpy() * 1e3)
            else:
                base = part[x_start].to_numpy()
                x = part[lengths].to_numpy() if lengths is not None else part[x_end].to_numpy() - base
            customdata, lines = _hover(part, hover)
            colour = (colors or {}).get(uniq[k], D3_COLORS[n % len(D3_COLORS)])
            fig.add_trace(go.Bar(base=base, x=x, y=part[task].to_numpy(), orientation="h", name=str(uniq[k]),
                                 marker_color=colour, customdata=customdata, legendgroup=str(uniq[k]),
                                 hovertemplate=f"<b>{uniq[k]}</b><br>{task}=%{{y}}{lines}<extra></extra>"))
    fig.update_layout(title=title, barmode="overlay", showlegend=legend, paper_bgcolor="rgba(0,0,0,0)",
                      height=height or 50 + task_height * max(len(order), 1), bargap=0.2)
    if width:
        fig.update_layout(width=width)
    fig.update_yaxes(categoryorder="array", categoryarray=order, autorange="reversed")
    if len(rows):
        lo, hi = (x_range if x_range is not None else (rows[x_start].min(), rows[x_end].max()))
        if date_axis:
            lo, hi = pd.Timestamp(lo).isoformat(), pd.Timestamp(hi).isoformat()
        else:
            lo, hi = float(lo), float(hi)
        fig.update_xaxes(type="date" if date_axis else "linear", range=[lo, hi], showgrid=True)
    if x_title:
        fig.update_xaxes(title=x_title)
    if range_slider:
        fig.update_xaxes(rangeslider_visible=True)
    return fig


def timeline_figure(rows: pd.DataFrame, title: str, *, x_start: str = "start", x_end: str = "end", task: str = "task",
                    color: str = "label", hover: Sequence[str] = (), height: Optional[int] = None,
                    task_height: int = 30, true_lengths: Optional[str] = None, range_slider: bool = False):
    """:func:`gantt_figure` under its earlier argument names (``true_lengths`` = ``lengths``)."""
    return gantt_figure(rows, title, x_start=x_start, x_end=x_end, task=task, color=color, hover=hover,
                        height=height, task_height=task_height, lengths=true_lengths, range_slider=range_slider)


def gpu_timeline_figure(frame: pd.DataFrame, title: str = "GPU timeline", *, color: str = "kernel_type",
                        min_width_us: float = 0.0, range_slider: bool = True):
    """The figure of a :func:`holotrace.analysis.timeline.gpu_timeline` frame: one line per rank and stream
    (in the frame's order), bars in µs from the view's origin, coloured by ``color`` (kernel type by default:
    one trace per type). ``min_width_us`` widens bars shorter than it so that they stay visible."""
    require_plotly("gpu_timeline_figure")
    unit_ns = frame.attrs.get("unit_ns", 1)
    to_us = 1000.0 / unit_ns
    start = frame["start"].to_numpy(dtype=np.float64) / to_us
    end = frame["end"].to_numpy(dtype=np.float64) / to_us
    shown = np.maximum(end, start + min_width_us)
    rows = frame.assign(start_us=start, end_us=shown, dur_us=frame["dur"].to_numpy(dtype=np.float64) / to_us)
    tasks = pd.unique(frame["task"]).tolist()
    fig = gantt_figure(rows, title, x_start="start_us", x_end="end_us", task="task", color=color, tasks=tasks,
                       hover=("name", "cat", "kernel_type", "iteration", "index", "start_us", "dur_us"),
                       colors=KERNEL_TYPE_COLORS if color == "kernel_type" else None, legend=True,
                       range_slider=range_slider, x_title="Time (µs from the trace start)")
    return fig


def memory_export_figure(times: np.ndarray, sizes: np.ndarray, categories: Sequence[str]):
    """Stacked areas of live bytes per category (GiB) over time (ms from the first instant)."""
    go = require_plotly("the memory timeline plot")
    times = np.asarray(times, dtype=np.float64)
    x = (times - times.min()) / 1e6 if times.size else times
    stacked = np.cumsum(np.asarray(sizes, dtype=np.float64), axis=1) / 1024 ** 3
    fig = go.Figure()
    for i, (cat, colour) in enumerate(zip(categories, MEMORY_COLORS)):
        fig.add_trace(go.Scatter(x=x, y=stacked[:, i] if stacked.size else [], mode="lines", fill="tonexty",
                                 fillcolor=colour, name=cat, marker=dict(color=colour), showlegend=True))
    fig.update_xaxes(title="Time (ms)")
    fig.update_yaxes(title="Memory (GiB)")
    fig.update_layout(title_text="Memory timeline", title_x=0.5, width=1200, height=800)
    return fig


def write_figure(fig, path: str) -> None:
    """``.html`` → an HTML page; any other suffix → a static image (needs kaleido)."""
    if str(path).endswith(".html"):
        fig.write_html(path)
        return
    if importlib.util.find_spec("kaleido") is None:
        raise PlottingUnavailableError(f"writing the static image {path} needs kaleido, which is not installed",
                                       path=None, fix="pip install kaleido, or save as .html")
    fig.write_image(path)


def show_figure(fig) -> None:
    """Show a figure inside a notebook; elsewhere do nothing (never opens a browser)."""
    from holotrace.render.plotly_figures import show

    show([fig])
