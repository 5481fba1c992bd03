"""The plotly renderer of chart descriptions (:mod:`holotrace.render.charts`): the facade's ``visualize=True``.

:func:`figure` turns any description built by :mod:`holotrace.render.plots` into a ``plotly.graph_objects``
figure; the HTML report draws the same descriptions as SVG (:mod:`holotrace.render.report_svg`). plotly (the
``plot`` extra) is imported only when a figure is made: a missing plotly is a
:class:`~holotrace.errors.PlottingUnavailableError`. :func:`show` shows figures inside a notebook only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Union

import numpy as np

from holotrace.errors import PlottingUnavailableError
from holotrace.render import charts as ch

__all__ = ["figure", "figures", "show", "require_plotly"]


def require_plotly(what: str = "a figure", fix: str = "pip install 'holotrace[plot]'"):
    """``plotly.graph_objects``, or a one-line error naming ``what`` needed it."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise PlottingUnavailableError(f"{what} needs plotly, which is not installed", fix=fix) from None
    return go


def figures(charts: Union[ch.Chart, Iterable[ch.Chart]]) -> list:
    """One figure per chart (a single chart gives a list of one)."""
    return [figure(c) for c in ([charts] if isinstance(charts, ch.Chart) else charts)]


def figure(chart: ch.Chart):
    """``chart`` as a plotly figure (its title, axis titles and size hints in the layout)."""
    go = require_plotly()
    for kind, draw in _RENDERERS:
        if isinstance(chart, kind):
            fig = draw(go, chart)
            break
    else:
        raise TypeError(f"no plotly renderer for {type(chart).__name__}")
    fig.update_layout(title=chart.title or None)
    if chart.width:
        fig.update_layout(width=chart.width)
    if chart.height:
        fig.update_layout(height=chart.height)
    return fig


def show(figs: list, renderer: str = "") -> None:
    """Show figures inside a notebook; elsewhere do nothing (never opens a browser)."""
    try:
        from IPython import get_ipython  # type: ignore
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or "Kernel" not in type(shell).__name__ and "ZMQ" not in type(shell).__name__:
        return
    for fig in figs:
        fig.show(renderer=renderer or None)


def _br(texts):
    return None if texts is None else [t.replace("\n", "<br>") for t in texts]


def _bars(go, c: ch.Bars):
    horizontal = c.horizontal
    fig = go.Figure()
    for s in c.series:
        kw = {}
        if s.error_plus is not None:
            kw["error_x" if horizontal else "error_y"] = dict(
                type="data", array=s.error_plus, arrayminus=s.error_minus, visible=True
            )
        colour = None
        if c.diverging:
            colour = np.where(s.values > 0, "#b03a2e", "#6aa84f").tolist()  # more: red, less: green
        line = None
        if c.highlight >= 0:
            line = dict(color="#000", width=[2 if i == c.highlight else 0 for i in range(len(c.labels))])
        xy = dict(x=s.values, y=list(c.labels), orientation="h") if horizontal else dict(x=list(c.labels), y=s.values)
        fig.add_trace(go.Bar(name=s.name, hovertext=_br(s.hover), marker=dict(color=colour, line=line), **xy, **kw))
    stacked = isinstance(c, ch.StackedBars)
    fig.update_layout(
        barmode="relative" if stacked else "group",
        showlegend=len(c.series) > 1 or None,
        legend_title_text=c.legend_title or None,
    )
    label_axis, value_axis = (
        (fig.update_yaxes, fig.update_xaxes) if horizontal else (fig.update_xaxes, fig.update_yaxes)
    )
    label_axis(title=c.label_title or None, type="category")
    value_axis(title=c.value_title or c.unit or None)
    if horizontal:
        fig.update_yaxes(autorange="reversed")  # the first label on top, as the SVG draws it
    return fig


def _pie(go, c: ch.Pie):
    return go.Figure(
        [
            go.Pie(
                labels=list(c.labels),
                values=c.values,
                hovertemplate=f"%{{label}}: %{{value}} {c.unit} (%{{percent}})<extra></extra>",
            )
        ]
    )


def _histogram(go, c: ch.Histogram):
    if not c.log:  # plotly bins the values itself (``bins`` at most)
        fig = go.Figure([go.Histogram(x=c.values, nbinsx=c.bins)])
        fig.update_xaxes(title=c.unit or None)
        fig.update_yaxes(title="count")
        if c.cutoff is not None:
            fig.add_vline(x=c.cutoff, line_dash="dash", line_color="#b03a2e", annotation_text=f"cutoff {c.cutoff:g}")
        return fig
    # log-spaced bins: the SVG's edges and counts, drawn as bars on a log axis
    edges = ch.histogram_edges(c)
    fig = go.Figure()
    if edges is not None:
        counts, _ = np.histogram(ch.histogram_values(c), edges)
        fig.add_trace(
            go.Bar(
                x=edges[:-1],
                y=counts,
                width=np.diff(edges),
                offset=0,
                name="count",
                customdata=np.column_stack([edges[:-1], edges[1:]]),
                hovertemplate="%{customdata[0]:.4g}–%{customdata[1]:.4g}: %{y}<extra></extra>",
            )
        )
    fig.update_xaxes(title=f"{c.unit} (log scale)", type="log")
    fig.update_yaxes(title="count", type="log")
    fig.update_layout(bargap=0)
    if c.cutoff is not None:
        fig.add_vline(
            x=np.log10(c.cutoff) if c.cutoff > 0 else 0,
            line_dash="dash",
            line_color="#b03a2e",
            annotation_text=f"cutoff {c.cutoff:g}",
        )
    return fig


def _strip(go, c: ch.Strip):
    fig = go.Figure()
    for g in c.groups:
        fig.add_trace(
            go.Scatter(
                x=g.values,
                y=[g.name] * len(g.values),
                mode="markers",
                name=g.name,
                text=list(g.points),
                marker=dict(color="#1f5fa8", opacity=0.6, size=9),
                hovertemplate=f"{g.name} · %{{text}}: %{{x}} {c.unit}<extra></extra>",
            )
        )
    shown = [g for g in c.groups if len(g.values)]
    fig.add_trace(
        go.Scatter(
            x=[float(np.median(g.values)) for g in shown],
            y=[g.name for g in shown],
            mode="markers",
            name="median",
            marker=dict(symbol="line-ns-open", size=18, color="#000", line_width=2),
            hovertemplate=f"median %{{x}} {c.unit}<extra></extra>",
        )
    )
    fig.update_layout(showlegend=False)
    fig.update_xaxes(title=c.unit or None, rangemode="tozero")
    fig.update_yaxes(
        type="category", categoryorder="array", categoryarray=[g.name for g in c.groups], autorange="reversed"
    )
    return fig


def _lines(go, c: ch.Lines):
    fig = go.Figure()
    for s, (x, y) in zip(c.series, ch.line_points(c)):
        kw = dict(line_color=s.colour) if s.colour else {}
        if c.stacked:  # each band filled down to the one below it (the first down to zero)
            kw.update(fill="tonexty", fillcolor=s.colour)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv" if c.step else "linear", name=s.name, **kw))
    fig.update_xaxes(title=c.x_unit or None)
    fig.update_yaxes(title=c.y_unit or None)
    return fig


def _table(go, c: ch.Table):
    return go.Figure(data=[go.Table(header={"values": list(c.columns)}, cells={"values": list(c.cells)})])


def _gantt(go, c: ch.Gantt):
    """One ``go.Bar`` per kind (``base`` = start, ``x`` = length: µs, or ms on a date axis); the hover shows the
    kind, the operation's name (when it differs), its lane, start, length in µs and the hover fields."""
    fig = go.Figure()
    lanes = np.asarray(c.lanes, dtype=object)
    names = np.asarray(c.names, dtype=object)
    if c.dates:

        def at(ns):
            stamps = (c.t0_ns + np.asarray(ns, dtype=np.int64)).astype("datetime64[ns]")
            return np.char.replace(np.datetime_as_string(stamps, unit="us"), "T", " ")

        per_unit, base_unit = 1e6, ""  # a bar's length on a date axis is in ms
    else:
        off = 0 if c.axis_origin_ns is None else c.t0_ns - c.axis_origin_ns
        at = lambda ns: (off + np.asarray(ns, dtype=np.float64)) / 1e3
        per_unit, base_unit = 1e3, " us"
    fields = "".join(f"<br>{f}=%{{customdata[{i + 2}]}}" for i, f in enumerate(c.hover_fields))
    for k in np.unique(c.kind).tolist():
        m = c.kind == k
        labels = names[c.label[m]]
        named = "" if np.all(labels == c.kinds[k]) else "<br>%{customdata[0]}"
        fig.add_trace(
            go.Bar(
                base=at(c.start[m]),
                x=c.dur[m] / per_unit,
                y=lanes[c.lane[m]],
                orientation="h",
                name=c.kinds[k],
                legendgroup=c.kinds[k],
                marker_color=c.colours[k],
                customdata=np.column_stack([labels, c.dur[m] / 1e3, *(v[m] for v in c.hover_values)]),
                hovertemplate=f"<b>{c.kinds[k]}</b>{named}<br>%{{y}}<br>start %{{base}}{base_unit}, "
                f"%{{customdata[1]}} us long{fields}<extra></extra>",
            )
        )
    fig.update_layout(barmode="overlay", showlegend=c.legend, height=80 + 24 * max(len(c.lanes), 1))
    fig.update_xaxes(title=c.x_title or None, type="date" if c.dates else "linear")
    if len(c.start):
        fig.update_xaxes(range=[v.item() for v in at(np.array(c.axis))])
    if c.range_slider:
        fig.update_xaxes(rangeslider_visible=True)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=list(c.lanes), autorange="reversed")
    return fig


# a StackedBars is a Bars (_bars stacks it)
_RENDERERS = (
    (ch.Bars, _bars),
    (ch.Pie, _pie),
    (ch.Histogram, _histogram),
    (ch.Strip, _strip),
    (ch.Lines, _lines),
    (ch.Table, _table),
    (ch.Gantt, _gantt),
)
