"""HTA's timeline plots: ``hta.common.timeline`` (``Timeline``, ``TimelinePlotSetting``,
``prepare_timeline_events``, ``plot_events_timeline``, ``align_module_with_kernels``) and the older
``hta.analyzers.timeline`` (``plot_timeline_gpu_kernels``, ``plot_timeline_gpu_kernels_from_trace``,
``prepare_timeline_gpu_events``, ``plot_timeline``), on HTA's per-rank tables (``analyzer.t.get_trace(r)``)
or any frame with HTA's columns.

The ``prepare_*`` functions return the frame behind the plot and need no plotly; the ``plot_*`` functions
and :meth:`Timeline.plot` draw it: the builders of :mod:`holotrace.render.plots_timeline` describe the figure,
:mod:`holotrace.render.plotly_figures` draws it (``plot`` extra). The native data function is
:func:`holotrace.analysis.timeline.gpu_timeline`. Differences from HTA (docs/compatibility.md):
settings are copied per call (HTA's module-level default is mutated by each call); names are simplified once
per distinct symbol; missing columns raise :class:`~holotrace.errors.AnalysisError` (a ``ValueError``);
short bars keep their true length per colour group whatever the colour column; the older module's name
simplifier cuts at the argument list instead of deleting from the first ``(`` to the last ``)``
(``hta_compat=True`` keeps HTA's); figures are shown in notebooks only.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.compat.timeline_names import _decode, _label, _old_simplify, simplify_name
from holotrace.errors import AnalysisError

__all__ = [
    "AnnotationStreamID",
    "CPUStreamID",
    "DefaultTTL",
    "DefaultMustHaveColumns",
    "DefaultHoverColumns",
    "DefaultTaskLabelColumns",
    "DefaultCallStackHoverColumns",
    "REQUIRED_COLUMNS_FOR_CPU_GPU_ALIGNMENT",
    "EventType",
    "PlotFormat",
    "TimelinePlotSetting",
    "DefaultTimelinePlotSetting",
    "auto_detect_setting",
    "prepare_timeline_events",
    "align_module_with_kernels",
    "plot_events_timeline",
    "events_timeline_figure",
    "get_fig_title_from_fig_name",
    "get_fig_name_from_fig_title",
    "Timeline",
    "simplify_name",
    "plot_timeline",
    "timeline_gpu_figure",
    "prepare_timeline_gpu_events",
    "plot_timeline_gpu_kernels",
    "plot_timeline_gpu_kernels_from_trace",
]

log = logging.getLogger("holotrace.compat")

AnnotationStreamID: int = 0
CPUStreamID: int = -1
DefaultTTL: int = 3600 * 24 * 30
DefaultMustHaveColumns: list[str] = ["name", "ts", "dur"]
DefaultHoverColumns: list[str] = ["trace", "rank", "iteration", "stream", "cat", "index"]
DefaultTaskLabelColumns: list[str] = ["stream", "rank", "trace", "depth"]
DefaultCallStackHoverColumns: list[str] = [
    "name",
    "cat",
    "index",
    "ts",
    "dur",
    "rank",
    "stream",
    "height",
    "depth",
    "tid",
    "index_correlation",
]
REQUIRED_COLUMNS_FOR_CPU_GPU_ALIGNMENT = {
    "index",
    "stream",
    "ts",
    "dur",
    "name",
    "first_kernel_start",
    "kernel_span",
    "num_kernels",
}


class EventType(Enum):
    GPUEvents = 0
    CPUEvents = 1
    AllEvents = 2


class PlotFormat(Enum):
    HTML = "html"  # return the figure as an HTML string
    Inline = "inline"  # show the figure
    File = "file"  # save only


@dataclass
class TimelinePlotSetting:
    auto_detect: bool = True
    event_type: EventType = EventType.GPUEvents
    multi_ranks: bool = False
    multi_traces: bool = False
    multi_streams: bool = True
    x_start_column: str = "calibrated_start_global"
    x_end_column: str = "calibrated_end_global"
    task_column: str = "task"
    color_column: str = "name"
    task_height: int = 30
    amplify_short_events: bool = True
    short_events_display_duration: int = 1000
    use_global_time: bool = False
    plot_format: PlotFormat = PlotFormat.Inline
    compress_threads: bool = True


DefaultTimelinePlotSetting: TimelinePlotSetting = TimelinePlotSetting()


def _missing(df: pd.DataFrame, columns, what: str) -> None:
    lacking = sorted(set(columns) - set(df.columns))
    if lacking:
        raise AnalysisError(
            f"{what}: the frame lacks the column(s) {lacking}",
            fix="pass a trace table such as Trace.get_trace(rank), with those columns",
        )


def auto_detect_setting(events: pd.DataFrame, setting: TimelinePlotSetting) -> None:
    """Set ``multi_ranks``/``multi_traces``/``multi_streams`` and ``event_type`` from ``events`` (in place)."""
    if not setting.auto_detect:
        return
    for attr, col in (("multi_ranks", "rank"), ("multi_traces", "trace"), ("multi_streams", "stream")):
        setattr(setting, attr, bool(col in events.columns and events[col].nunique() > 1))
    streams = events["stream"].unique().tolist() if "stream" in events.columns else [-1]
    if len(streams) > 1 and -1 in streams:
        setting.event_type = EventType.AllEvents
    elif -1 not in streams:
        setting.event_type = EventType.GPUEvents
    else:
        setting.event_type = EventType.CPUEvents


def _task_names(events: pd.DataFrame, s: TimelinePlotSetting) -> pd.Series:
    parts: list[pd.Series] = []
    if s.multi_traces:
        parts.append(_label("trace", events["trace"]))
    if s.multi_ranks:
        parts.append(_label("rank", events["rank"]))
    if s.event_type == EventType.GPUEvents and s.multi_streams:
        parts.append(_label("gpu stream", events["stream"]))
    elif s.event_type == EventType.CPUEvents:
        if "tid" in events.columns and not s.compress_threads:
            parts.append(_label("tid", events["tid"]))
        if "depth" in events.columns:
            parts.append(_label("cpu level", events["depth"]))
        if not parts:
            parts.append(pd.Series("cpu events", index=events.index, dtype=object))
    elif len(events):
        stream = events["stream"].to_numpy() if "stream" in events.columns else np.full(len(events), -1)
        cpu = (
            ("cpu level " + events["depth"].astype(str).str.zfill(3)).to_numpy(dtype=object)
            if "depth" in events.columns
            else np.full(len(events), "cpu events", dtype=object)
        )
        gpu = ("gpu stream " + pd.Series(stream).astype(str).str.zfill(3)).to_numpy(dtype=object)
        parts.append(
            pd.Series(
                np.where(stream == CPUStreamID, cpu, np.where(stream == AnnotationStreamID, "gpu annotate", gpu)),
                index=events.index,
                dtype=object,
            )
        )
    if not parts:
        raise NotImplementedError(
            "The events must have at least one of label columns (`trace`, `rank`, `stream`, `tid`, `depth`)"
        )
    out = parts[0].astype(str)
    for p in parts[1:]:
        out = out + " " + p.astype(str)
    return out


def _sort_columns(events: pd.DataFrame, s: TimelinePlotSetting) -> list[str]:
    cols = (["trace"] if s.multi_traces else []) + (["rank"] if s.multi_ranks else [])
    if s.event_type == EventType.GPUEvents and s.multi_streams:
        cols.append("stream")
    elif s.event_type == EventType.CPUEvents:
        cols += [c for c in ("tid", "depth") if c in events.columns]
    elif "stream" in events.columns:
        cols.append("stream")
    return [c for c in cols + ["ts"] if c in events.columns]


def align_module_with_kernels(
    events_df: pd.DataFrame, module_list: list[str], sym_table=None, include_original_cpu_events: bool = False
) -> pd.DataFrame:
    """Annotation rows (``stream`` 0) spanning the kernels of the CPU operators whose names start with a
    match of a pattern of ``module_list``, after the device rows (``stream > 0``; every row but
    ``stream`` 0 with ``include_original_cpu_events``). Needs the call-graph columns (build a ``CallGraph``)."""
    _missing(events_df, REQUIRED_COLUMNS_FOR_CPU_GPU_ALIGNMENT, "align_module_with_kernels")
    cpu = events_df["stream"].eq(CPUStreamID) & events_df["num_kernels"].ge(1)
    names = events_df["name"]
    if sym_table is not None and not pd.api.types.is_string_dtype(names):
        ids = sym_table.get_sym_id_map()
        matched = {i for pat in module_list for s, i in ids.items() if re.match(pat, s)}
        hit = names.isin(list(matched))
    else:
        col = next(
            (c for c in ("name", "s_name") if c in events_df.columns and pd.api.types.is_string_dtype(events_df[c])),
            None,
        )
        if col is None:
            raise AnalysisError(
                "align_module_with_kernels: the frame has no string `name` or `s_name` column "
                "and no symbol table was given",
                fix="pass sym_table=trace.symbol_table",
            )
        text = events_df[col].astype(str)
        hit = pd.Series(False, index=events_df.index)
        for pat in module_list:
            hit |= text.str.match(pat)
    annotations = events_df.loc[(cpu & hit).to_numpy()].copy()
    annotations["ts"] = annotations["first_kernel_start"].astype(np.int64)
    annotations["dur"] = annotations["kernel_span"].astype(np.int64)
    annotations["stream"] = AnnotationStreamID
    stream = events_df["stream"]
    original = events_df.loc[(stream != AnnotationStreamID if include_original_cpu_events else stream > 0).to_numpy()]
    return pd.concat([original, annotations], ignore_index=True)


def prepare_timeline_events(
    df: pd.DataFrame,
    setting: Optional[TimelinePlotSetting] = None,
    symbol_table=None,
    hover_columns: Optional[list[str]] = None,
) -> pd.DataFrame:
    """The frame behind :func:`plot_events_timeline`: times from the first event (µs), ``x_start``/``x_end``
    columns of the setting (short events widened to ``short_events_display_duration``), ``task`` lines,
    names simplified; sorted by the task columns, then ``ts``. An empty frame for an empty input."""
    setting = copy.copy(setting or DefaultTimelinePlotSetting)
    if df.empty:
        log.error("prepare_timeline_events: the frame is empty")
        return pd.DataFrame()
    _missing(df, DefaultMustHaveColumns, "prepare_timeline_events")
    wanted = set(hover_columns or DefaultHoverColumns) | set(DefaultMustHaveColumns) | set(DefaultTaskLabelColumns)
    events = df[[c for c in df.columns if c in wanted]].copy()
    auto_detect_setting(df, setting)
    if symbol_table is not None or pd.api.types.is_string_dtype(events["name"]):
        events["name"] = _decode(events["name"], symbol_table, lambda s: simplify_name(simplify_name(s)))
        if "cat" in events.columns:
            events["cat"] = _decode(events["cat"], symbol_table, simplify_name)
    start_t = events["ts"].min()
    events["ts"] = events["ts"] - start_t
    x0, x1 = setting.x_start_column, setting.x_end_column
    events[x0] = events["ts"]
    dur = events["dur"]
    if setting.amplify_short_events:
        dur = dur.where(dur >= setting.short_events_display_duration, setting.short_events_display_duration)
    events[x1] = events["ts"] + dur
    if setting.use_global_time:
        events[x0] = pd.to_datetime(events[x0] + start_t, unit="us")
        events[x1] = pd.to_datetime(events[x1] + start_t, unit="us")
    events[setting.task_column] = _task_names(events, setting).to_numpy()
    return events.sort_values(by=_sort_columns(events, setting), kind="stable")


def events_timeline_figure(
    title: str,
    events: pd.DataFrame,
    setting: Optional[TimelinePlotSetting] = None,
    hover_columns: Optional[list[str]] = None,
):
    """The figure :func:`plot_events_timeline` draws (bars at their true ``dur``; ``x_end`` widens the axis):
    :func:`holotrace.render.plots_timeline.events_timeline` drawn by plotly."""
    from holotrace.render import plotly_figures, plots_timeline

    s = setting or DefaultTimelinePlotSetting
    _missing(events, {s.x_start_column, s.x_end_column, s.task_column, s.color_column}, "plot_events_timeline")
    return plotly_figures.figure(
        plots_timeline.events_timeline(
            events,
            title,
            x_start=s.x_start_column,
            x_end=s.x_end_column,
            task=s.task_column,
            color=s.color_column,
            task_height=s.task_height,
            hover=list(hover_columns or DefaultHoverColumns),
        )
    )


def plot_events_timeline(
    title: str,
    events: pd.DataFrame,
    setting: Optional[TimelinePlotSetting] = None,
    hover_columns: Optional[list[str]] = None,
    output_image_path: Optional[str] = None,
) -> Optional[str]:
    """Plot a :func:`prepare_timeline_events` frame: shown (``PlotFormat.Inline``, in notebooks), returned as
    HTML (``PlotFormat.HTML``), and written to ``output_image_path`` (``.html``, else an image) if given."""
    from holotrace.render.timeline import show_figure, write_figure

    s = setting or DefaultTimelinePlotSetting
    if events.empty:
        log.error("plot_events_timeline: the frame holds no event")
        return None
    fig = events_timeline_figure(title, events, s, hover_columns)
    if output_image_path:
        write_figure(fig, output_image_path)
        log.info("Saved plot as %s.", output_image_path)
    if s.plot_format == PlotFormat.Inline:
        show_figure(fig)
    if s.plot_format == PlotFormat.HTML:
        return fig.to_html(include_plotlyjs="cdn")
    return None


def get_fig_title_from_fig_name(fig_name: str, sep: str = r"\s+|_+|-+") -> str:
    return " ".join(p.capitalize() for p in re.split(sep, fig_name or "untitled_figure") if p)


def get_fig_name_from_fig_title(title: str) -> str:
    return "_".join(p.lower() for p in re.split(r"\s+", title or "Untitled Figure") if p)


class Timeline:
    """A timeline plot of a trace frame: filtered by ``filter_func(df, symbol_table)``, then prepared with
    :func:`prepare_timeline_events` (unless the frame is prepared already)."""

    def __init__(
        self,
        timeline_events: pd.DataFrame,
        symbol_table,
        filter_func=None,
        setting: Optional[TimelinePlotSetting] = None,
        hover_columns: Optional[list[str]] = None,
    ) -> None:
        self.timeline_events = timeline_events
        self.symbol_table = symbol_table
        self.setting = copy.copy(setting or DefaultTimelinePlotSetting)
        self.hover_columns = hover_columns or list(DefaultHoverColumns)
        self.prepare(filter_func)

    @staticmethod
    def is_timeline_events(df: pd.DataFrame, setting: TimelinePlotSetting) -> bool:
        return {setting.task_column, setting.x_start_column, setting.x_end_column} <= set(df.columns)

    def prepare(self, filter_func=None) -> None:
        if self.is_timeline_events(self.timeline_events, self.setting):
            return
        if filter_func:
            self.timeline_events = filter_func(self.timeline_events, self.symbol_table).copy()
        self.timeline_events = prepare_timeline_events(self.timeline_events, self.setting, self.symbol_table)

    def figure(self, title: str):
        """The plotly figure :meth:`plot` shows."""
        return events_timeline_figure(title, self.timeline_events, self.setting, self.hover_columns)

    def plot(self, title: str, save_path: Optional[str] = None) -> None:
        plot_events_timeline(title, self.timeline_events, self.setting, self.hover_columns, save_path)


# ---------------------------------------------------------------------------------------------------------------
# the older module, hta.analyzers.timeline


def timeline_gpu_figure(title: str, events: pd.DataFrame, ranks: Optional[list[int]] = None):
    """The figure :func:`plot_timeline` draws: date axis, 1600 wide, ``200 + 120 × ranks`` high
    (:func:`holotrace.render.plots_timeline.gpu_kernels_timeline` drawn by plotly)."""
    from holotrace.render import plotly_figures, plots_timeline

    _missing(events, ["calibrated_start_global", "calibrated_end_global", "task", "label"], "plot_timeline")
    return plotly_figures.figure(plots_timeline.gpu_kernels_timeline(events, title, ranks))


def plot_timeline(title: str, events: pd.DataFrame, ranks: Optional[list[int]] = None) -> None:
    """Show a :func:`prepare_timeline_gpu_events` frame (in notebooks)."""
    from holotrace.render.timeline import show_figure

    show_figure(timeline_gpu_figure(title, events, ranks))


def _get_unique_values(df: pd.DataFrame, col: str, exclude_values: Sequence = (-1,)) -> list:
    if col not in df:
        raise AnalysisError(
            f"{col} is not a column of the frame (columns: {list(df.columns)})",
            fix="pass a rank-concatenated trace frame",
        )
    values = pd.unique(df[col].dropna())
    return sorted(v for v in values.tolist() if v not in exclude_values)


def prepare_timeline_gpu_events(
    df: pd.DataFrame,
    symbol_table,
    ranks: Optional[list[int]] = None,
    iterations: Optional[list[int]] = None,
    streams: Optional[list[int]] = None,
    duration_threshold: int = 1000,
    *,
    hta_compat: bool = False,
) -> pd.DataFrame:
    """The GPU rows of a rank-concatenated frame (``rank`` column) for :func:`plot_timeline`: the chosen
    ranks, iterations and streams (by default every value but −1, so CPU rows and rows outside any
    iteration are left out), with ``s_name``, ``s_cat``, ``label``, ``task`` = ``"rank R stream S"`` and
    datetime ``calibrated_start_global``/``calibrated_end_global`` (µs; bars at least
    ``duration_threshold`` long); sorted by rank, stream, ts."""
    _missing(df, ["iteration", "name", "cat", "rank", "stream", "ts"], "prepare_timeline_gpu_events")
    ranks = _get_unique_values(df, "rank") if ranks is None else ranks
    iterations = _get_unique_values(df, "iteration") if iterations is None else iterations
    streams = _get_unique_values(df, "stream") if streams is None else streams
    keep = df["rank"].isin(ranks) & df["iteration"].isin(iterations) & df["stream"].isin(streams)
    events = df.loc[keep.to_numpy()].copy()
    events["s_name"] = _decode(events["name"], symbol_table, lambda s: _old_simplify(s, hta_compat))
    events["s_cat"] = _decode(events["cat"], symbol_table, None)
    events["calibrated_start_global"] = pd.to_datetime(events["ts"], unit="us")
    dur = events["dur"].where(events["dur"] >= duration_threshold, duration_threshold)
    events["calibrated_end_global"] = pd.to_datetime(events["ts"] + dur, unit="us")
    events["label"] = events["s_name"]
    events["task"] = "rank " + events["rank"].astype(str) + " stream " + events["stream"].astype(str)
    return events.sort_values(by=["rank", "stream", "ts"], kind="stable")


def plot_timeline_gpu_kernels(
    title: str,
    df: pd.DataFrame,
    symbol_table,
    ranks: Optional[list[int]] = None,
    iterations: Optional[list[int]] = None,
    streams: Optional[list[int]] = None,
    duration_threshold: int = 1000,
) -> None:
    """Plot the GPU kernels of a rank-concatenated frame (see :func:`prepare_timeline_gpu_events`)."""
    plot_timeline(title, prepare_timeline_gpu_events(df, symbol_table, ranks, iterations, streams, duration_threshold))


def _concat_ranks(trace_data, ranks: Optional[list[int]]) -> pd.DataFrame:
    have = trace_data.get_all_traces()
    chosen = sorted(set(have) & set(ranks)) if ranks is not None else list(have)
    return pd.concat(
        [trace_data.get_trace(r) for r in chosen], axis=0, keys=chosen, names=["rank", "idx"]
    ).reset_index()


def plot_timeline_gpu_kernels_from_trace(
    title: str,
    trace_data,
    ranks: Optional[list[int]] = None,
    iterations: Optional[list[int]] = None,
    streams: Optional[list[int]] = None,
    duration_threshold: int = 1000,
) -> None:
    """Plot the GPU kernels of a ``Trace``'s chosen ranks."""
    plot_timeline_gpu_kernels(
        title, _concat_ranks(trace_data, ranks), trace_data.symbol_table, ranks, iterations, streams, duration_threshold
    )
