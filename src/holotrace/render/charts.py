"""What a plot shows, with no drawing library: chart descriptions made of words and plain arrays.

:mod:`holotrace.render.plots` builds every plot of holotrace as one of these descriptions (one function per
plot, from result frames); two renderers draw them: :mod:`holotrace.render.report_svg` (inline SVG and the
canvas timeline of the HTML report, no dependency) and :mod:`holotrace.render.plotly_figures` (plotly figures,
the facade's ``visualize=True``; the ``plot`` extra). A description says what is drawn (titles, category
labels, units, values, hover texts); colours, fonts and pixel sizes are the renderer's, except the few
hints named below (a Gantt's colour per kind, a line's colour). The helpers at the end are shared by both
renderers, so both draw the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = [
    "Chart",
    "Series",
    "Bars",
    "StackedBars",
    "Pie",
    "Histogram",
    "StripGroup",
    "Strip",
    "Line",
    "Lines",
    "Table",
    "Gantt",
    "histogram_edges",
    "histogram_values",
    "peaks",
    "x_range",
    "line_points",
    "HISTOGRAM_BINS",
]

#: bins of a histogram that names none
HISTOGRAM_BINS = 40


def _floats(v) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).reshape(-1)


def _texts(v) -> tuple:
    return tuple(str(x) for x in v)


@dataclass(frozen=True, kw_only=True)
class Chart:
    """What every chart has. ``name``: a short id (``data-plot`` of the SVG, e.g. ``gpu-time``); ``title``: the
    plot's title (a figure's title; the report's SVG keeps it as its accessible name under a section heading);
    ``width`` / ``height``: size hints in pixels (None: the renderer's default)."""

    name: str
    title: str = ""
    width: Optional[int] = None
    height: Optional[int] = None


@dataclass(frozen=True)
class Series:
    """One named series of values, one per category; optional error bars (distance above and below each value)
    and one hover text per value."""

    name: str
    values: np.ndarray
    error_plus: Optional[np.ndarray] = None
    error_minus: Optional[np.ndarray] = None
    hover: Optional[tuple] = None

    def __post_init__(self):
        object.__setattr__(self, "values", _floats(self.values))
        for k in ("error_plus", "error_minus"):
            if getattr(self, k) is not None:
                object.__setattr__(self, k, _floats(getattr(self, k)))
        if self.hover is not None:
            object.__setattr__(self, "hover", _texts(self.hover))


@dataclass(frozen=True, kw_only=True)
class Bars(Chart):
    """Bars per category label: one series, or several side by side. ``unit``: of the values (written after
    each); ``value_title``: the value axis (default: ``unit``); ``label_title``: the category axis; ``highlight``: the index of a bar to outline (−1: none); ``diverging``: values are
    changes, drawn left (negative) or right (positive) of zero; ``horizontal``: a hint for renderers that can
    draw either way (the SVG renderer always draws horizontal bars)."""

    labels: tuple
    series: tuple
    unit: str = ""
    value_title: str = ""
    label_title: str = ""
    legend_title: str = ""
    digits: int = 1
    highlight: int = -1
    diverging: bool = False
    horizontal: bool = False

    def __post_init__(self):
        object.__setattr__(self, "labels", _texts(self.labels))
        object.__setattr__(self, "series", tuple(self.series))
        for s in self.series:
            if len(s.values) != len(self.labels):
                raise ValueError(f"series {s.name!r} has {len(s.values)} values for {len(self.labels)} labels")


@dataclass(frozen=True, kw_only=True)
class StackedBars(Bars):
    """Bars per category label with the series stacked on each other (each segment a share of its bar)."""


@dataclass(frozen=True, kw_only=True)
class Pie(Chart):
    """Shares of a whole: one slice per label."""

    labels: tuple
    values: np.ndarray
    unit: str = ""
    digits: int = 1

    def __post_init__(self):
        object.__setattr__(self, "labels", _texts(self.labels))
        object.__setattr__(self, "values", _floats(self.values))


@dataclass(frozen=True, kw_only=True)
class Histogram(Chart):
    """Counts of ``values`` in ``bins`` bins (None: :data:`HISTOGRAM_BINS` for SVG, plotly's own choice for
    plotly), log-spaced when ``log``; ``cutoff``: a threshold marked on the axis; ``unit``: the value axis."""

    values: np.ndarray
    unit: str = ""
    bins: Optional[int] = None
    log: bool = False
    cutoff: Optional[float] = None

    def __post_init__(self):
        object.__setattr__(self, "values", _floats(self.values))


@dataclass(frozen=True)
class StripGroup:
    """One row of a strip plot: its values and a label per value (``points``)."""

    name: str
    values: np.ndarray
    points: tuple

    def __post_init__(self):
        object.__setattr__(self, "values", _floats(self.values))
        object.__setattr__(self, "points", _texts(self.points))


@dataclass(frozen=True, kw_only=True)
class Strip(Chart):
    """One row per group, a dot per value, the median marked; ``mark_max`` names each group's largest value."""

    groups: tuple
    unit: str = ""
    digits: int = 1
    mark_max: bool = True

    def __post_init__(self):
        object.__setattr__(self, "groups", tuple(self.groups))


@dataclass(frozen=True)
class Line:
    """One line: ``y`` over ``x``; ``colour``: a hint (None: the renderer's palette)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    colour: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "x", _floats(self.x))
        object.__setattr__(self, "y", _floats(self.y))
        if len(self.x) != len(self.y):
            raise ValueError(f"line {self.name!r} has {len(self.x)} x values and {len(self.y)} y values")


@dataclass(frozen=True, kw_only=True)
class Lines(Chart):
    """Lines over a shared x axis; each drawn with at most ``points`` points (:func:`peaks`; None: every
    sample). ``step``: a value holds until the next sample (False: straight lines between samples).
    ``stacked``: the series are stacked areas, each drawn on top of the ones before it and filled down to them
    (the series then share their ``x``); :func:`line_points` gives what both renderers draw."""

    series: tuple
    x_unit: str = ""
    y_unit: str = ""
    points: Optional[int] = 600
    step: bool = True
    stacked: bool = False

    def __post_init__(self):
        object.__setattr__(self, "series", tuple(s for s in self.series if len(s.x)))
        if self.stacked and any(not np.array_equal(s.x, self.series[0].x) for s in self.series):
            raise ValueError("stacked lines must share their x values")


@dataclass(frozen=True, kw_only=True)
class Table(Chart):
    """A table: ``columns`` (header texts) and ``cells`` (one sequence of values per column)."""

    columns: tuple
    cells: tuple

    def __post_init__(self):
        object.__setattr__(self, "columns", _texts(self.columns))
        object.__setattr__(self, "cells", tuple(list(c) for c in self.cells))


@dataclass(frozen=True, kw_only=True)
class Gantt(Chart):
    """Operations on lanes over time: per operation its ``lane`` (index into ``lanes``), ``start`` and ``dur``
    (ns from ``t0_ns``), ``kind`` (index into ``kinds``, drawn in ``colours[kind]``, abbreviated
    ``letters[kind]``, none when ``letters`` is empty) and ``label`` (index into ``names``). Operations are
    sorted by lane, then start.

    The time axis: µs from ``t0_ns``, or from ``axis_origin_ns`` when given (the bars' positions are then
    ``t0_ns - axis_origin_ns + start``); dates when ``dates`` (``t0_ns`` is then ns since the Unix epoch). It
    ends at ``axis_end`` (ns from ``t0_ns``; None: the end of the last operation), titled ``x_title``.
    ``hover_fields`` names further values shown on hover, ``hover_values`` one sequence per field (a value per
    operation, in the operations' order). ``legend`` and ``range_slider`` are hints for renderers that have them.
    """

    lanes: tuple
    lane: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    kind: np.ndarray
    label: np.ndarray
    names: tuple
    kinds: tuple
    colours: tuple
    letters: tuple = ()
    t0_ns: int = 0
    caption: str = ""
    axis_origin_ns: Optional[int] = None
    dates: bool = False
    axis_end: Optional[int] = None
    x_title: str = ""
    hover_fields: tuple = ()
    hover_values: tuple = ()
    legend: bool = True
    range_slider: bool = False

    def __post_init__(self):
        for k in ("lane", "start", "dur", "kind", "label"):
            object.__setattr__(self, k, np.asarray(getattr(self, k), dtype=np.int64).reshape(-1))
        for k in ("lanes", "names", "kinds", "colours", "letters", "hover_fields"):
            object.__setattr__(self, k, _texts(getattr(self, k)))
        values = tuple(np.asarray(v, dtype=object).reshape(-1) for v in self.hover_values)
        if len(values) != len(self.hover_fields) or any(len(v) != len(self.lane) for v in values):
            raise ValueError(f"{len(self.hover_fields)} hover fields need as many sequences of {len(self.lane)} values")
        object.__setattr__(self, "hover_values", values)

    @property
    def span(self) -> int:
        """ns from ``t0_ns`` to the end of the last operation."""
        return int((self.start + self.dur).max()) if len(self.start) else 0

    @property
    def axis(self) -> tuple[int, int]:
        """The time axis's range, ns from ``t0_ns``: from 0 (or an earlier start) to ``axis_end`` (or the span)."""
        lo = min(int(self.start.min()), 0) if len(self.start) else 0
        return lo, self.span if self.axis_end is None else int(self.axis_end)


# ---------------------------------------------------------------------------------------------- shared helpers


def histogram_edges(chart: Histogram) -> Optional[np.ndarray]:
    """The bin edges both renderers use for ``chart`` (None when it has no drawable value): ``bins`` (default
    :data:`HISTOGRAM_BINS`) equal bins between the smallest and largest value, log-spaced when ``log`` (which
    leaves out values ≤ 0)."""
    x = chart.values[np.isfinite(chart.values)]
    if chart.log:
        x = x[x > 0]
    if not len(x):
        return None
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        hi = lo + 1.0
    n = chart.bins or HISTOGRAM_BINS
    return np.geomspace(lo, hi, n + 1) if chart.log else np.linspace(lo, hi, n + 1)


def histogram_values(chart: Histogram) -> np.ndarray:
    """The values a histogram counts: finite ones, and only positive ones on a log scale."""
    x = chart.values[np.isfinite(chart.values)]
    return x[x > 0] if chart.log else x


def peaks(line: Line, lo: float, hi: float, points: int) -> tuple[np.ndarray, np.ndarray]:
    """``line`` reduced to at most ``points`` samples over ``[lo, hi]``: the largest value of each of ``points``
    equal buckets (so peaks survive), at the bucket's centre; buckets without a sample are left out."""
    hi = hi if hi > lo else lo + 1.0
    b = np.minimum(((line.x - lo) / (hi - lo) * points).astype(np.int64), points - 1)
    top = np.full(points, -np.inf)
    np.maximum.at(top, b, line.y)
    used = np.flatnonzero(np.isfinite(top))
    return lo + (hi - lo) * (used + 0.5) / points, top[used]


def line_points(chart: Lines) -> list[tuple[np.ndarray, np.ndarray]]:
    """What both renderers draw of each series of ``chart``: ``(x, y)``, stacked areas as the top of each band
    (the sum of the series up to it), reduced by :func:`peaks` to ``chart.points`` samples when it is set (a
    reduced stacked band keeps the largest top of each bucket, so the bands stay in order)."""
    if not chart.series:
        return []
    ys = np.cumsum([s.y for s in chart.series], axis=0) if chart.stacked else [s.y for s in chart.series]
    if chart.points is None:
        return [(s.x, y) for s, y in zip(chart.series, ys)]
    lo, hi = x_range(chart.series)
    return [peaks(Line(s.name, s.x, y), lo, hi, chart.points) for s, y in zip(chart.series, ys)]


def x_range(series: Sequence[Line]) -> tuple[float, float]:
    """The shared x range of ``series`` (non-empty)."""
    lo = min(float(s.x.min()) for s in series)
    hi = max(float(s.x.max()) for s in series)
    return lo, (hi if hi > lo else lo + 1.0)
