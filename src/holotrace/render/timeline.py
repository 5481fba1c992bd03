"""Plotly figures of timelines: GPU work per stream over time (Gantt bars) and the memory timeline.

Requires plotly (the ``plot`` extra); fed with the frames of :mod:`holotrace.analysis.timeline` and
:mod:`holotrace.analysis.memory`, which are never modified.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

__all__ = ["timeline_figure", "memory_export_figure", "write_figure", "MEMORY_COLORS"]

# Plotly's "Pastel" qualitative palette, one colour per memory category (HTA's choice)
MEMORY_COLORS = ("rgb(102, 197, 204)", "rgb(246, 207, 113)", "rgb(248, 156, 116)", "rgb(220, 176, 242)",
                 "rgb(135, 197, 95)", "rgb(158, 185, 243)", "rgb(254, 136, 177)", "rgb(201, 219, 116)")


def timeline_figure(rows: pd.DataFrame, title: str, *, x_start: str = "start", x_end: str = "end", task: str = "task",
                    color: str = "label", hover: Sequence[str] = (), height: Optional[int] = None,
                    task_height: int = 30, true_lengths: Optional[str] = None, range_slider: bool = False):
    """A Gantt chart: one bar per row from ``x_start`` to ``x_end`` on the row's ``task`` line.

    ``true_lengths``: a column of durations (in the x unit) drawn as the bars' lengths, while ``x_end`` only
    widens the axis (HTA draws short kernels at their true length this way). Datetime x columns give a date axis.
    """
    import plotly.express as px

    tasks = sorted(rows[task].unique().tolist()) if len(rows) else []
    fig = px.timeline(rows, x_start=x_start, x_end=x_end, y=task, color=color,
                      hover_data=[c for c in hover if c in rows.columns], title=title,
                      category_orders={task: tasks}, color_discrete_sequence=px.colors.qualitative.D3)
    fig.update_layout(height=height or 50 + task_height * max(len(tasks), 1), showlegend=False)
    if true_lengths is not None and len(rows) and not np.issubdtype(rows[x_start].dtype, np.datetime64):
        fig.update_xaxes(type="linear")
        for trace in fig.data:
            sel = rows[color].astype(str) == str(trace.name) if trace.name is not None else slice(None)
            trace.x = rows.loc[sel, true_lengths].to_numpy()
    if range_slider:
        fig.update_xaxes(rangeslider_visible=True)
    return fig


def memory_export_figure(times: np.ndarray, sizes: np.ndarray, categories: Sequence[str]):
    """Stacked areas of live bytes per category (GiB) over time (ms from the first instant)."""
    import plotly.graph_objects as go

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
    else:
        fig.write_image(path)
