"""The timeline plots' builders: operations on lanes over time (:class:`~holotrace.render.charts.Gantt`) and the
memory timeline (:class:`~holotrace.render.charts.Lines`), as chart descriptions like every plot of
:mod:`holotrace.render.plots`.

The first two read the frames of HTA's timeline functions (:mod:`holotrace.compat.timeline`: times in µs, or
datetimes on a date axis) and keep HTA's layout: one colour per value of the colour column in order of first
appearance (plotly's D3 palette, cycled), lanes sorted by name, HTA's heights and widths, the hover columns.
:func:`gpu_operations` reads :func:`holotrace.analysis.timeline.gpu_timeline`'s frame, :func:`memory_export`
the series of a PyTorch memory-timeline export. Frames are never modified; no drawing library is needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.render.charts import Gantt, Line, Lines
from holotrace.render.plots import KERNEL_TYPE_COLOURS, KERNEL_TYPES

__all__ = [
    "events_timeline",
    "gpu_kernels_timeline",
    "gpu_operations",
    "memory_export",
    "D3_COLOURS",
    "MEMORY_COLOURS",
    "GPU_KERNELS_HOVER",
]

#: plotly's "D3" qualitative palette (HTA's Gantt colours), cycled over the colour column's values
D3_COLOURS = (
    "#1F77B4",
    "#FF7F0E",
    "#2CA02C",
    "#D62728",
    "#9467BD",
    "#8C564B",
    "#E377C2",
    "#7F7F7F",
    "#BCBD22",
    "#17BECF",
)
#: plotly's "Pastel" qualitative palette, one colour per memory category (HTA's choice)
MEMORY_COLOURS = (
    "rgb(102, 197, 204)",
    "rgb(246, 207, 113)",
    "rgb(248, 156, 116)",
    "rgb(220, 176, 242)",
    "rgb(135, 197, 95)",
    "rgb(158, 185, 243)",
    "rgb(254, 136, 177)",
    "rgb(201, 219, 116)",
)
#: the columns HTA's older timeline shows on hover (those present, sorted by name)
GPU_KERNELS_HOVER = ("rank", "stream", "iteration", "s_cat", "cat", "s_name", "name", "dur")
_GIB = 1024.0**3


def _is_time(col: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(col)


def _ns(col: pd.Series) -> np.ndarray:
    """A time column as int64 ns: datetimes since the epoch, numbers read as µs."""
    if _is_time(col):
        return col.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    if pd.api.types.is_integer_dtype(col):
        return col.to_numpy(dtype=np.int64) * 1000
    return np.rint(col.to_numpy(dtype=np.float64) * 1000.0).astype(np.int64)


def _hover_value(col: pd.Series) -> np.ndarray:
    return col.astype(str).to_numpy(dtype=object) if _is_time(col) else col.to_numpy(dtype=object)


def _gantt(
    *,
    name: str,
    title: str,
    lane_of: np.ndarray,
    lanes: Sequence[str],
    start: np.ndarray,
    dur: np.ndarray,
    axis_end: Optional[np.ndarray],
    key: np.ndarray,
    label: np.ndarray,
    colours: Optional[Mapping] = None,
    hover: Optional[Mapping[str, np.ndarray]] = None,
    **hints,
) -> Gantt:
    """A Gantt from per-operation arrays (ns; ``lane_of``: each operation's lane name, ``key``: its colour key,
    ``label``: its name): one kind per key in order of first appearance, coloured from ``colours`` or the D3
    palette; times from the first start; operations sorted by lane, then start."""
    lanes = [str(x) for x in lanes]
    lane = pd.Index(lanes).get_indexer(lane_of) if len(lane_of) else np.zeros(0, np.int64)
    uniq, first, inv = np.unique(key.astype(str), return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[by_first] = np.arange(len(uniq))
    kinds = uniq[by_first].tolist()
    palette = [(colours or {}).get(k, D3_COLOURS[n % len(D3_COLOURS)]) for n, k in enumerate(kinds)]
    codes, names = pd.factorize(pd.Series(label, dtype=object).astype(str), use_na_sentinel=False)
    t0 = int(start.min()) if len(start) else 0
    end = int(axis_end.max()) - t0 if axis_end is not None and len(axis_end) else None
    order = np.lexsort((start, lane))
    hover = hover or {}
    return Gantt(
        name=name,
        title=title,
        lanes=lanes,
        lane=lane[order],
        start=(start - t0)[order],
        dur=dur[order],
        kind=rank[inv.reshape(-1)][order],
        label=codes[order],
        names=list(names),
        kinds=kinds,
        colours=palette,
        t0_ns=t0,
        axis_end=end,
        hover_fields=list(hover),
        hover_values=[np.asarray(v, dtype=object)[order] for v in hover.values()],
        **hints,
    )


def _hta_gantt(
    rows: pd.DataFrame,
    title: str,
    *,
    name: str,
    x_start: str,
    x_end: str,
    task: str,
    color: str,
    hover: Sequence[str],
    lengths: Optional[str],
    label: str,
    **hints,
) -> Gantt:
    """HTA's Gantt of a timeline frame: bars from ``x_start``, ``lengths`` long (µs; default: to ``x_end``, which
    always ends the axis), on sorted ``task`` lanes, one kind per ``color`` value; a date axis when ``x_start``
    holds datetimes, else the columns' own values (µs)."""
    start, end = _ns(rows[x_start]), _ns(rows[x_end])
    dur = _ns(rows[lengths]) if lengths is not None else end - start
    tasks = rows[task].astype(str).to_numpy(dtype=object)
    return _gantt(
        name=name,
        title=title,
        lane_of=tasks,
        lanes=sorted(pd.unique(tasks).tolist()),
        start=start,
        dur=dur,
        axis_end=end,
        key=rows[color].astype(str).to_numpy(dtype=object),
        label=rows[label if label in rows.columns else color].to_numpy(dtype=object),
        hover={c: _hover_value(rows[c]) for c in hover if c in rows.columns},
        legend=False,
        dates=len(rows) > 0 and _is_time(rows[x_start]),
        axis_origin_ns=0,
        **hints,
    )


def events_timeline(
    events: pd.DataFrame,
    title: str,
    *,
    x_start: str = "calibrated_start_global",
    x_end: str = "calibrated_end_global",
    task: str = "task",
    color: str = "name",
    task_height: int = 30,
    hover: Sequence[str] = (),
) -> Gantt:
    """HTA's ``plot_events_timeline`` / ``Timeline.plot`` (a ``prepare_timeline_events`` frame): bars at their
    true ``dur`` (the widened ``x_end`` only stretches the axis), a range slider, ``50 + 80 × lanes`` high
    (``task_height`` per lane from 20 lanes on), no legend."""
    lanes = events[task].nunique()
    return _hta_gantt(
        events,
        title,
        name="events-timeline",
        x_start=x_start,
        x_end=x_end,
        task=task,
        color=color,
        hover=hover,
        lengths="dur" if "dur" in events.columns else None,
        label="name",
        height=50 + (80 if lanes < 20 else task_height) * lanes,
        range_slider=True,
    )


def gpu_kernels_timeline(events: pd.DataFrame, title: str, ranks: Optional[Sequence[int]] = None) -> Gantt:
    """HTA's older ``plot_timeline`` (a ``prepare_timeline_gpu_events`` frame): date axis, bars from
    ``calibrated_start_global`` to ``calibrated_end_global`` coloured by ``label``, 1600 wide,
    ``200 + 120 × ranks`` high (the frame's ranks by default)."""
    if ranks is None:
        ranks = pd.unique(events["rank"]).tolist() if "rank" in events.columns else []
    return _hta_gantt(
        events,
        title,
        name="gpu-kernels-timeline",
        x_start="calibrated_start_global",
        x_end="calibrated_end_global",
        task="task",
        color="label",
        lengths=None,
        label="s_name",
        hover=sorted(set(events.columns) & set(GPU_KERNELS_HOVER)),
        width=1600,
        height=200 + 120 * len(ranks),
    )


def gpu_operations(
    frame: pd.DataFrame, title: str = "GPU timeline", *, color: str = "kernel_type", min_width_us: float = 0.0
) -> Gantt:
    """A :func:`holotrace.analysis.timeline.gpu_timeline` frame: one lane per rank and stream (in the frame's
    order), µs from the view's origin, one kind per ``color`` value (kernel types in the report's colours),
    full names, ``240 + 30 × lanes`` high (title, axis title and range slider included). On hover, besides
    name, lane, start and drawn length: ``cat``, ``kernel_type``, ``iteration``, ``index`` and ``dur_us``, the
    true length of bars shorter than ``min_width_us``, which are widened to it so that they stay visible."""
    unit_ns = int(frame.attrs.get("unit_ns", 1))
    start = frame["start"].to_numpy(dtype=np.int64) * unit_ns
    end = frame["end"].to_numpy(dtype=np.int64) * unit_ns
    dur = np.maximum(end - start, int(round(min_width_us * 1000)))
    tasks = frame["task"].astype(str).to_numpy(dtype=object)
    hover = {c: frame[c].to_numpy(dtype=object) for c in ("cat", "kernel_type", "iteration", "index")}
    hover["dur_us"] = frame["dur"].to_numpy(dtype=np.float64) * unit_ns / 1e3
    colours = dict(zip(KERNEL_TYPES, KERNEL_TYPE_COLOURS)) if color == "kernel_type" else None
    return _gantt(
        name="gpu-operations",
        title=title,
        lane_of=tasks,
        lanes=pd.unique(tasks).tolist(),
        start=start,
        dur=dur,
        axis_end=None,
        key=frame[color].to_numpy(dtype=object),
        label=frame["name"].to_numpy(dtype=object),
        colours=colours,
        hover=hover,
        axis_origin_ns=0,
        x_title="Time (µs from the trace start)",
        height=240 + 30 * max(len(pd.unique(tasks)), 1),
        range_slider=True,
    )


def memory_export(times, sizes, categories: Sequence[str]) -> Lines:
    """HTA's ``MemoryAnalysis.plot_memory_timeline``: live GiB per category (``sizes``: bytes, a row per
    instant of ``times`` in ns) stacked over ms from the first instant, every sample drawn and joined by
    straight lines (as HTA draws them), 1200 × 800."""
    times = np.asarray(times, dtype=np.float64).reshape(-1)
    x = (times - times.min()) / 1e6 if times.size else times
    sizes = np.asarray(sizes, dtype=np.float64)
    sizes = (sizes.reshape(len(times), -1) if sizes.size else np.zeros((len(times), len(categories)))) / _GIB
    series = [
        Line(str(c), x, sizes[:, i], colour=colour)
        for i, (c, colour) in enumerate(zip(categories, MEMORY_COLOURS))
        if i < sizes.shape[1]
    ]
    return Lines(
        name="memory-timeline",
        title="Memory timeline",
        series=series,
        x_unit="Time (ms)",
        y_unit="Memory (GiB)",
        points=None,
        step=False,
        stacked=True,
        width=1200,
        height=800,
    )
