"""Every plot of holotrace, built once: result frames in, chart descriptions (:mod:`holotrace.render.charts`) out.

One function per plot; none draws. The HTML report renders the descriptions as inline SVG
(:mod:`holotrace.render.report_svg`), the facade's ``visualize=True`` as plotly figures
(:mod:`holotrace.render.plotly_figures`); either renderer draws any description. The first group reads the
HTA-shaped frames the facade returns, the second the frames of the analyses under holotrace's rules that the
report shows (times in µs, shown in ms), which read tables (:class:`holotrace.table.Table`) or frames and import
no pandas; the comparison report's plots are in :mod:`holotrace.render.diff_plots`. Frames are never modified. Needs
neither plotly nor a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.analysis import grouped
from holotrace.render.charts import (
    Bars,
    Gantt,
    Histogram,
    Line,
    Lines,
    Pie,
    Series,
    StackedBars,
    Strip,
    StripGroup,
    Table,
)
from holotrace.render.groups import first_seen, pivot_sum, rows_by, texts
from holotrace.table import Table as Columns
from holotrace.text import fit_names

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    # the facade's figures (HTA's frames)
    "temporal_breakdown",
    "kernel_type_pie",
    "kernel_per_rank",
    "idle_per_stream",
    "comm_overlap",
    "launch_histograms",
    "aten_tables",
    "kernel_sequences",
    "annotation_pies",
    "stragglers_ranked",
    "trace_diff_bars",
    # the report's plots (holotrace's frames)
    "gpu_time",
    "idle_causes",
    "step_times",
    "collective_waits",
    "top_kernels",
    "kernel_rank_spread",
    "kernel_types",
    "launch_delay",
    "counter_lines",
    "critical_path",
    "what_if",
    "gpu_timeline",
    "KERNEL_TYPES",
    "KERNEL_TYPE_COLOURS",
    "KERNEL_TYPE_LETTERS",
]

KERNEL_TYPES = ("COMMUNICATION", "MEMORY", "COMPUTATION", "OTHER")
KERNEL_TYPE_COLOURS = ("#e08a1e", "#6aa84f", "#1f5fa8", "#8c8c8c")
KERNEL_TYPE_LETTERS = ("N", "M", "C", "O")

# kernel and operator names on a figure: shortened by structure to this many characters, never alike
LABEL_WIDTH = 48


def _rank_labels(ranks) -> list[str]:
    return [f"rank {r}" for r in ranks]


# ============================================================================ the facade's figures (HTA's frames)


def temporal_breakdown(df: pd.DataFrame) -> StackedBars:
    """Idle / compute / non-compute percent of each rank's kernel span, stacked (``get_temporal_breakdown``)."""
    cols = ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
    return StackedBars(
        name="temporal-breakdown",
        title="Temporal breakdown across ranks",
        labels=df["rank"].tolist(),
        series=[Series(c, df[c]) for c in cols],
        unit="Percent of kernel span",
        label_title="Rank",
        legend_title="Time",
        digits=2,
    )


def kernel_type_pie(types: pd.DataFrame) -> Pie:
    """Share of GPU time by kernel type over all ranks (types with a positive share)."""
    shown = types[types["percentage"] > 0]
    return Pie(
        name="kernel-type-share",
        title="Kernel type percentage across all ranks",
        labels=shown["kernel_type"].tolist(),
        values=shown["percentage"],
        unit="%",
    )


def kernel_per_rank(kernels: pd.DataFrame) -> list[Bars]:
    """Per kernel (the ``others`` rows left out): its mean duration on each rank, min and max as error bars."""
    out = []
    for (ktype, name), part in kernels[kernels["name"] != "others"].groupby(["kernel_type", "name"], sort=False):
        mean = part["mean (us)"].to_numpy(dtype=np.float64)
        out.append(
            Bars(
                name="kernel-per-rank",
                title=f'Kernel type "{ktype}" - {name}',
                labels=part["rank"].tolist(),
                series=[
                    Series(
                        "mean (us)",
                        mean,
                        error_plus=part["max (us)"].to_numpy() - mean,
                        error_minus=mean - part["min (us)"].to_numpy(),
                    )
                ],
                unit="mean (us)",
                label_title="rank",
            )
        )
    return out


def idle_per_stream(idle: pd.DataFrame, pctg: bool = True) -> list[StackedBars]:
    """One chart per rank: idle time (ratio, or µs) per stream, stacked by idle category."""
    import pandas as pd

    y = "idle_time_ratio" if pctg else "idle_time"
    out = []
    for rank, part in idle.groupby("rank", sort=False):
        streams = pd.unique(part["stream"])
        cats = pd.unique(part["idle_category"])
        pos = {s: i for i, s in enumerate(streams.tolist())}
        series = []
        for c in cats:
            rows = part[part["idle_category"].to_numpy() == c]
            v = np.zeros(len(streams))
            v[[pos[s] for s in rows["stream"].tolist()]] = rows[y].to_numpy(dtype=np.float64)
            series.append(Series(str(c), v))
        out.append(
            StackedBars(
                name="idle-per-stream",
                title=f"Idle time breakdown on rank {rank} per stream",
                labels=[str(s) for s in streams],
                series=series,
                unit=y,
                label_title="stream",
                legend_title="idle_category",
                digits=2,
            )
        )
    return out


def comm_overlap(ranks: Sequence[int], pctg) -> Bars:
    """Percent of each rank's communication time that computation overlaps (NaN: no communication, no bar);
    the facade's ``get_comm_comp_overlap`` figure and the report's overlap plot."""
    return Bars(
        name="overlap",
        title="Computation-communication overlap",
        labels=_rank_labels(ranks),
        series=[Series("overlap", pctg)],
        unit="%",
        value_title="Overlap (% of communication time)",
        label_title="Rank",
    )


def launch_histograms(stats: Mapping[int, pd.DataFrame], runtime_cutoff, launch_delay_cutoff) -> list[Histogram]:
    """Per rank: CPU durations of the short kernels' launches, of the runtime outliers, and the outlying launch
    delays (``get_cuda_kernel_launch_stats``)."""
    out = []
    for r, df in stats.items():
        out += [
            Histogram(
                name="short-kernels",
                values=df.loc[df["short_kernel"], "cpu_duration"],
                unit="cpu_duration",
                title=f"Short GPU kernels (gpu op duration < cpu op duration) on rank {r}",
            ),
            Histogram(
                name="runtime-outliers",
                values=df.loc[df["runtime_outlier"], "cpu_duration"],
                bins=300,
                unit="cpu_duration",
                title=f"Runtime Event Duration Outliers (duration > {runtime_cutoff} us) on rank {r}",
            ),
            Histogram(
                name="launch-delay-outliers",
                values=df.loc[df["launch_delay_outlier"], "launch_delay"],
                bins=300,
                unit="launch_delay",
                title=f"Launch Delay Outliers (duration > {launch_delay_cutoff} us) on rank {r}",
            ),
        ]
    return out


def aten_tables(out: Mapping[int, pd.DataFrame]) -> list[Table]:
    """Per rank, the ``get_aten_op_kernels_and_delay`` frame as a table."""
    return [
        Table(
            name="aten-ops",
            columns=list(df.columns),
            cells=[df[c].tolist() for c in df.columns],
            title=f"ATen Operations, Associated Kernels, ATen and Runtime Delays for Rank {r}",
        )
        for r, df in out.items()
    ]


def kernel_sequences(top: pd.DataFrame, rank: int) -> Bars:
    """Occurrences of the most frequent kernel sequences, each bar's hover text its pattern (one name a line)."""
    hover = [f"{p.replace('|', chr(10))}\ncount={c}" for p, c in zip(top["pattern"], top["count"])]
    return Bars(
        name="kernel-sequences",
        title=f"Top {len(top)} frequent patterns for rank {rank}",
        labels=[str(i) for i in top.index],
        series=[Series("count", top["count"], hover=hover)],
        unit="count",
        label_title="index",
        digits=0,
    )


def annotation_pies(out: pd.DataFrame) -> list[Pie]:
    """One pie per rank: time per user annotation (``get_gpu_user_annotation_breakdown``)."""
    return [
        Pie(
            name="annotations",
            title=f"Rank {r}",
            labels=part["name"].astype(str).tolist(),
            values=part["sum (us)"],
            unit="us",
        )
        for r, part in out.groupby("rank")
    ]


def stragglers_ranked(ranks: Sequence[int]) -> Bars:
    """The potential stragglers, most likely first (the bar's height is its place from the end)."""
    return Bars(
        name="stragglers",
        title="Potential stragglers",
        labels=[str(r) for r in ranks],
        series=[Series("likelihood order", np.arange(len(ranks), 0, -1))],
        unit="order (higher: more likely)",
        label_title="Rank",
        digits=0,
    )


def trace_diff_bars(df: pd.DataFrame, columns: Sequence[str], names: Sequence[str], title: str, y_title: str) -> Bars:
    """Grouped bars of ``columns`` (series named ``names``) per row of a ``TraceDiff.compare_traces`` frame."""
    return Bars(
        name="trace-diff",
        title=title,
        labels=df.index.tolist(),
        series=[Series(n, df[c]) for c, n in zip(columns, names)],
        unit=y_title,
        width=1000,
        height=1000,
    )


# ============================================================================ the report's plots (holotrace's frames)


def gpu_time(split) -> StackedBars:
    """Per rank: compute, communication, memory, (other,) idle ms over the GPU span, stacked
    (the report's ``gpu_time_split`` table)."""
    split = Columns.of(split)
    cols = ["compute", "communication", "memory", "idle"]
    if np.sum(split["other_ms"]) > 0:
        cols.insert(3, "other")
    return StackedBars(
        name="gpu-time",
        title="GPU time per rank",
        labels=_rank_labels(split["rank"].tolist()),
        series=[Series(c, split[f"{c}_ms"]) for c in cols],
        unit="ms",
        digits=2,
        horizontal=True,
    )


def idle_causes(idle) -> tuple[StackedBars, Columns]:
    """Idle ms per rank by cause, summed over streams (``idle.idle_breakdown``), and the table it shows
    (``rank`` and one ms column per cause; the sums as pandas' pivot table makes them)."""
    idle = Columns.of(idle)
    ranks, cats_u, sums = pivot_sum(idle["rank"], idle["idle_category"], idle["idle_us"])
    have = texts(cats_u)
    cats = [c for c in ("host_wait", "kernel_wait", "other") if c in have]
    shown = Columns({"rank": ranks, **{c: sums[:, have.index(c)] / 1e3 for c in cats}})
    chart = StackedBars(
        name="idle-causes",
        title="Idle time by cause",
        labels=_rank_labels(shown["rank"].tolist()),
        series=[Series(c.replace("_", " "), shown[c]) for c in cats],
        unit="ms",
        digits=2,
        horizontal=True,
    )
    return chart, shown


def step_times(st) -> Strip:
    """Each rank's step times (``steps.step_times``), one dot per step."""
    st = Columns.of(st)
    dur, step = np.asarray(st["dur_us"]), st["step"]
    groups = [
        StripGroup(f"rank {r}", dur[rows] / 1e3, [f"step {s}" for s in step[rows].tolist()])
        for r, rows in rows_by(st["rank"], sort=True)
    ]
    return Strip(name="step-times", title="Step time per rank", groups=groups, unit="ms", digits=2)


def collective_waits(ss, slowest: int) -> Bars:
    """Time each rank waited in collectives (``stragglers.straggler_summary``, by rank), the slowest outlined."""
    ss = Columns.of(ss)
    ss = ss.take(np.argsort(ss["rank"], kind="stable"))
    hit = np.flatnonzero(ss["rank"] == slowest)
    return Bars(
        name="collective-waits",
        title="Time waited in collectives per rank",
        labels=_rank_labels(ss["rank"].tolist()),
        series=[Series("waited", np.asarray(ss["wait_us"]) / 1e3)],
        unit="ms waited in collectives",
        digits=2,
        highlight=int(hit[0]) if len(hit) else -1,
        horizontal=True,
    )


def top_kernels(top) -> Bars:
    """Total time of the top kernels over all ranks (``kernels.top_kernels``), names shortened."""
    top = Columns.of(top)
    names = texts(top["name"])
    return Bars(
        name="top-kernels",
        title="Top kernels by total time",
        labels=fit_names(names, LABEL_WIDTH),
        series=[Series("total", np.asarray(top["sum_us"]) / 1e3, hover=names)],
        unit="ms (all ranks)",
        digits=2,
        horizontal=True,
    )


def kernel_rank_spread(top, dist) -> Strip:
    """Per top kernel, its time on each rank (``kernels.rank_distribution``)."""
    top, dist = Columns.of(top), Columns.of(dist)
    by_name: dict = {}
    for i, k in enumerate(dist["name"].tolist()):
        by_name.setdefault(k, []).append(i)
    total, rank = np.asarray(dist["sum_us"]), dist["rank"]
    groups = []
    for name, short in zip(top["name"].tolist(), fit_names(texts(top["name"]), LABEL_WIDTH)):
        rows = np.array(by_name.get(name, []), dtype=np.int64)
        groups.append(StripGroup(str(short), total[rows] / 1e3, [f"rank {r}" for r in rank[rows].tolist()]))
    return Strip(
        name="kernel-ranks", title="Per-rank time of each top kernel", groups=groups, unit="ms per rank", digits=2
    )


def kernel_types(types) -> Bars:
    """GPU time by kernel type over all ranks (``kernels.type_breakdown``)."""
    types = Columns.of(types)
    return Bars(
        name="kernel-types",
        title="GPU time by kernel type",
        labels=texts(types["kernel_type"]),
        series=[Series("time", np.asarray(types["time_us"]) / 1e3)],
        unit="ms (all ranks)",
        digits=2,
        horizontal=True,
    )


def launch_delay(delays, cutoff: Optional[float]) -> Histogram:
    """Launch delays (µs) of every launch, on a log scale, the outlier cutoff marked."""
    return Histogram(
        name="launch-delay",
        title="Launch delay",
        values=delays,
        log=True,
        cutoff=cutoff,
        unit="us from the end of the launch call to the GPU start",
    )


def counter_lines(
    series: Mapping[int, object], column: str, *, name: str, title: str, unit: str, by_name: bool
) -> Lines:
    """A counter per rank over time (``counters.queue_length`` / ``memory_bandwidth``: ``ts`` in ns), one line
    per rank (and per counter ``name`` when ``by_name``), x in ms from the first sample of all ranks."""
    series = {r: Columns.of(s) for r, s in series.items()}
    t0 = min(int(s["ts"].min()) for s in series.values() if len(s))
    lines = []
    for r, s in sorted(series.items()):
        groups = rows_by(s["name"], sort=True) if by_name else [("", slice(None))]
        ts, y = np.asarray(s["ts"]), np.asarray(s[column])
        for g, rows in groups:
            lines.append(Line(f"rank {r}" + (f" {g}" if g else ""), (ts[rows] - t0) / 1e6, y[rows]))
    return Lines(name=name, title=title, series=lines, x_unit="ms from the first sample", y_unit=unit)


def critical_path(cp) -> tuple[Bars, Columns]:
    """Time on one step's critical path by what bounds it (``critical_path.breakdown`` or ``bound_table``:
    ``duration`` in ns), and the table it shows (``bound_by``, ``ms``, ``pct``): the classes in order of their
    first edge, summed as pandas' groupby sums, largest first."""
    cp = Columns.of(cp)
    codes, uniq = grouped.factorize(np.asarray(cp["bound_by"], dtype=object))
    sums = grouped.group_sum(codes, np.asarray(cp["duration"], dtype=np.float64), len(uniq))
    labels = np.array([str(x) for x in uniq.tolist()], dtype=object)
    keep = np.flatnonzero(labels != "")
    keep = keep[np.argsort(-sums[keep], kind="stable")]
    ms, tot = sums[keep], sums[keep].sum()
    frame = Columns({"bound_by": labels[keep], "ms": ms / 1e6, "pct": 100 * ms / tot if tot else np.zeros(len(keep))})
    chart = Bars(
        name="critical-path",
        title="Critical path by what bounds it",
        labels=frame["bound_by"].tolist(),
        series=[Series("on the path", frame["ms"])],
        unit="ms on the critical path",
        digits=2,
        horizontal=True,
    )
    return chart, frame


def what_if(top) -> Bars:
    """Job step time each fix would save (``label``, ``saving_ms``: per step, mean over the steps)."""
    top = Columns.of(top)
    return Bars(
        name="what-if",
        title="What to fix first",
        labels=texts(top["label"]),
        series=[Series("saving", np.asarray(top["saving_ms"], dtype=float))],
        unit="ms saved per job step",
        digits=3,
        horizontal=True,
    )


def gpu_timeline(tl, step=None) -> Gantt:
    """GPU operations (a ``timeline.gpu_timeline`` frame, times in ns) on one lane per rank and stream, coloured
    by kernel type, names shortened; times from the first operation's start."""
    caption = f"step {step}" if step is not None else "the whole trace"
    common = dict(
        name="timeline",
        title=f"GPU timeline of {caption}",
        kinds=KERNEL_TYPES,
        colours=KERNEL_TYPE_COLOURS,
        letters=KERNEL_TYPE_LETTERS,
        caption=caption,
        x_title=f"µs from the first operation of {caption}",
    )
    tl = Columns.of(tl)
    if tl.empty:
        e = np.zeros(0, np.int64)
        return Gantt(lanes=(), lane=e, start=e, dur=e, kind=e, label=e, names=(), **common)
    rank, stream = np.asarray(tl["rank"], dtype=np.int64), np.asarray(tl["stream"], dtype=np.int64)
    smin = int(stream.min())
    width = int(stream.max()) - smin + 1
    keys, lane = np.unique(rank * width + (stream - smin), return_inverse=True)  # lanes by rank, then stream
    start = np.asarray(tl["start"], dtype=np.int64)
    end = np.asarray(tl["end"], dtype=np.int64)
    t0 = int(start.min())
    order = np.lexsort((start, lane))
    codes, uniq = first_seen(tl["name"])  # names and types: one decode per distinct value
    tcodes, tuniq = first_seen(tl["kernel_type"])
    kind = np.array([KERNEL_TYPES.index(t) if t in KERNEL_TYPES else 3 for t in map(str, tuniq)] or [3])[tcodes]
    return Gantt(
        lanes=[f"rank {k // width} stream {k % width + smin}" for k in keys.tolist()],
        lane=lane[order],
        start=start[order] - t0,
        dur=(end - start)[order],
        kind=kind[order],
        label=codes[order],
        names=fit_names([str(x) for x in uniq], LABEL_WIDTH),
        t0_ns=t0,
        **common,
    )
