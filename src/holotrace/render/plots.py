"""Plotly figures of the core analyses (the optional ``plot`` extra).

Importing this module requires plotly; callers go through
``holotrace.compat.trace_analysis`` which turns a missing plotly into a
:class:`~holotrace.errors.PlottingUnavailableError`. Figures are built
from result frames only; the frames are never modified.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px

__all__ = ["temporal_figures", "kernel_figures", "idle_figures", "overlap_figures", "launch_figures", "aten_figures",
           "sequence_figures", "annotation_figures", "straggler_figures", "show", "diff_bars"]


def temporal_figures(df: pd.DataFrame) -> list:
    """Stacked bars of idle / compute / non-compute percent per rank."""
    cols = ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
    fig = px.bar(df, x="rank", y=cols, title="Temporal breakdown across ranks", labels={"rank": "Rank"})
    fig.update_layout(yaxis_title="Percent of kernel span", legend_title="Time")
    return [fig]


def kernel_figures(types: pd.DataFrame, kernels: pd.DataFrame) -> list:
    """Pie of time by kernel type, and per-kernel mean duration by rank (min/max as error bars)."""
    figs = [px.pie(types[types["percentage"] > 0], values="percentage", names="kernel_type",
                   title="Kernel type percentage across all ranks")]
    for (ktype, name), part in kernels[kernels["name"] != "others"].groupby(["kernel_type", "name"], sort=False):
        fig = px.bar(part, x="rank", y="mean (us)", title=f'Kernel type "{ktype}" - {name}',
                     error_y=part["max (us)"] - part["mean (us)"], error_y_minus=part["mean (us)"] - part["min (us)"])
        figs.append(fig)
    return figs


def idle_figures(idle: pd.DataFrame, pctg: bool = True) -> list:
    """Bars of idle time (ratio or µs) per stream, stacked by category, one figure per rank."""
    y = "idle_time_ratio" if pctg else "idle_time"
    figs = []
    for rank, part in idle.groupby("rank", sort=False):
        part = part.assign(stream=part["stream"].astype(str))  # a copy: the result keeps its int streams
        figs.append(px.bar(part, x="stream", y=y, color="idle_category", title=f"Idle time breakdown on rank {rank} per stream"))
    return figs


def overlap_figures(df: pd.DataFrame) -> list:
    """Bar of the communication/computation overlap percent per rank."""
    return [px.bar(df, x="rank", y="comp_comm_overlap_pctg", title="Computation-communication overlap",
                   labels={"rank": "Rank", "comp_comm_overlap_pctg": "Overlap (% of communication time)"})]


def show(figures: list, renderer: str = "") -> None:
    """Show figures inside a notebook; elsewhere do nothing (never opens a browser)."""
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or "Kernel" not in type(shell).__name__ and "ZMQ" not in type(shell).__name__:
        return
    for fig in figures:
        fig.show(renderer=renderer or None)


def launch_figures(stats: dict[int, pd.DataFrame], runtime_cutoff, launch_delay_cutoff) -> list:
    import plotly.express as px

    figs = []
    for r, df in stats.items():
        figs.append(px.histogram(df[df["short_kernel"]], x="cpu_duration",
                                 title=f"Short GPU kernels (gpu op duration < cpu op duration) on rank {r}"))
        figs.append(px.histogram(df[df["runtime_outlier"]], x="cpu_duration", nbins=300,
                                 title=f"Runtime Event Duration Outliers (duration > {runtime_cutoff} us) on rank {r}"))
        figs.append(px.histogram(df[df["launch_delay_outlier"]], x="launch_delay", nbins=300,
                                 title=f"Launch Delay Outliers (duration > {launch_delay_cutoff} us) on rank {r}"))
    return figs


def aten_figures(out: dict[int, pd.DataFrame]) -> list:
    import plotly.graph_objects as go

    figs = []
    for r, df in out.items():
        figs.append(go.Figure(data=[go.Table(header={"values": list(df.columns)},
                                             cells={"values": [df[c] for c in df.columns]})],
                              layout={"title": f"ATen Operations, Associated Kernels, ATen and Runtime Delays for Rank {r}"}))
    return figs


def sequence_figures(top: pd.DataFrame, rank: int) -> list:
    import plotly.express as px

    vis = top.assign(pattern=top["pattern"].str.replace("|", "<br>", regex=False))
    return [px.bar(vis, x=vis.index, y="count", hover_data=["pattern", "count"],
                   title=f"Top {len(top)} frequent patterns for rank {rank}")]


def annotation_figures(out: pd.DataFrame) -> list:
    import plotly.express as px

    return [px.pie(part, values="sum (us)", names="name", title=f"Rank {r}") for r, part in out.groupby("rank")]


def straggler_figures(ranks: list[int]) -> list:
    import plotly.express as px

    return [px.bar(x=[str(r) for r in ranks], y=list(range(len(ranks), 0, -1)), title="Potential stragglers")]


def diff_bars(df: pd.DataFrame, columns: list, names: list, title: str, y_title: str):
    """Grouped bars of ``columns`` (series named ``names``) per row of ``df`` (a trace comparison)."""
    import plotly.graph_objects as go

    fig = go.Figure([go.Bar(name=n, x=df.index, y=df[c]) for c, n in zip(columns, names)])
    fig.update_layout(barmode="group", title=title, yaxis_title=y_title, width=1000, height=1000)
    return fig
