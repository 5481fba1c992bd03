"""The HTML report's renderer of chart descriptions (:mod:`holotrace.render.charts`): inline SVG, no dependency.

:func:`render` draws any description as one ``<svg>`` element (a :class:`~holotrace.render.charts.Table` as an
HTML table, a :class:`~holotrace.render.charts.Gantt` as the report's zoomable canvas timeline, drawn by the
script of :mod:`holotrace.render.report_assets` from inlined JSON). Every data mark carries the class ``mark``
and a ``<title>`` child (the browser shows it on hover, with no script); every series has a text label as well
as a colour and, for stacked bars, a fill pattern, so the charts read printed in grey. The chart's title is the
SVG's accessible name (the report shows it as the heading above).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from holotrace.order_stats import median
from holotrace.render import charts as ch
from holotrace.text import fit_names
from holotrace.text import html_escape as escape

__all__ = ["render", "gantt_json", "fmt", "PALETTE"]

#: series colours (distinct in lightness, so they stay apart in grey)
PALETTE = ("#1f5fa8", "#e08a1e", "#6aa84f", "#c9c9c9", "#8e44ad", "#b03a2e", "#16a085", "#7f8c8d")
_PATTERNS = ("", "url(#ht-hatch)", "url(#ht-dots)", "", "url(#ht-cross)", "", "", "")
_DEFS = (
    '<defs><pattern id="ht-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e08a1e"/>'
    '<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/></pattern>'
    '<pattern id="ht-dots" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" '
    'fill="#6aa84f"/><circle cx="2.5" cy="2.5" r="1.2" fill="#fff"/></pattern>'
    '<pattern id="ht-cross" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
    'fill="#8e44ad"/><path d="M0 0L6 6M6 0L0 6" stroke="#fff"/></pattern></defs>'
)
_WIDTH = 760
_KEY_KINDS = 40  # kinds named in a timeline's colour key


def fmt(x: float, digits: int = 1) -> str:
    """A number with thousands separators and ``digits`` decimals (a dash for NaN)."""
    return "–" if x != x else f"{x:,.{digits}f}"


def render(chart: ch.Chart) -> str:
    """``chart`` as HTML: an ``<svg class="plot" data-plot=NAME>`` (a table or the canvas timeline for those)."""
    for kind, draw in _RENDERERS:
        if isinstance(chart, kind):
            return draw(chart)
    raise TypeError(f"no SVG renderer for {type(chart).__name__}")


def _fill(i: int) -> str:
    pat = _PATTERNS[i % len(_PATTERNS)]
    return pat or PALETTE[i % len(PALETTE)]


def _svg(chart: ch.Chart, w: float, h: float, body: list[str], label: str) -> str:
    label = chart.title or label
    return (
        f'<svg class="plot" data-plot="{escape(chart.name)}" viewBox="0 0 {w:.0f} {h:.0f}" width="{w:.0f}" '
        f'height="{h:.0f}" role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
        + _DEFS
        + "".join(body)
        + "</svg>"
    )


def _empty(chart: ch.Chart, what: str) -> str:
    return _svg(chart, chart.width or _WIDTH, 40, ['<text x="10" y="24" class="ax">no values</text>'], f"empty {what}")


def _legend(names: Sequence[str], x: float, y: float) -> list[str]:
    out, cx = [], x
    for i, n in enumerate(names):
        out.append(
            f'<rect x="{cx:.0f}" y="{y - 9:.0f}" width="12" height="12" fill="{_fill(i)}" stroke="#333" '
            f'stroke-width="0.5"/><text x="{cx + 16:.0f}" y="{y + 1:.0f}" class="lg">{escape(n)}</text>'
        )
        cx += 24 + 7 * len(n)
    return out


def _ticks(lo: float, hi: float, n: int = 5) -> np.ndarray:
    if hi <= lo:
        return np.array([lo])
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = mag * min((1, 2, 2.5, 5, 10), key=lambda m: abs(m * mag - raw))
    return np.arange(np.ceil(lo / step) * step, hi + step * 1e-9, step)


def _hover(s: ch.Series, i: int, label: str) -> str:
    return s.hover[i] if s.hover is not None else label


def _stacked(c: ch.StackedBars) -> str:
    """Horizontal stacked bars, one per label; each segment titled with its value and share of the bar."""
    n, width, unit, digits = len(c.labels), c.width or _WIDTH, escape(c.unit), c.digits
    vals = np.array([s.values for s in c.series]).reshape(len(c.series), n)
    tot = np.nansum(vals, axis=0)
    left, right, bh = 90, 80, 20
    h = 40 + n * (bh + 6) + 20
    scale = (width - left - right) / (tot.max() if n and tot.max() > 0 else 1.0)
    body = _legend([s.name for s in c.series], left, 16)
    for i, lab in enumerate(c.labels):
        y = 30 + i * (bh + 6)
        body.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" class="ax">{escape(lab)}</text>')
        x = float(left)
        for j, s in enumerate(c.series):
            v = vals[j, i]
            if not v > 0:
                continue
            w = v * scale
            share = 100.0 * v / tot[i] if tot[i] else 0.0
            body.append(
                f'<rect class="mark" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh}" '
                f'fill="{_fill(j)}" stroke="#fff" stroke-width="0.5"><title>{escape(lab)} · {escape(s.name)}: '
                f"{fmt(v, digits)} {unit} ({share:.1f}%)</title></rect>"
            )
            if w > 46:
                body.append(f'<text x="{x + 3:.1f}" y="{y + 14}" class="in">{escape(s.name[:4])} {share:.0f}%</text>')
            x += w
        body.append(f'<text x="{x + 4:.1f}" y="{y + 14}" class="ax">{fmt(tot[i], digits)}</text>')
    body.append(f'<text x="{left}" y="{h - 4}" class="ax">{unit}</text>')
    return _svg(c, width, h, body, f"stacked bars of {', '.join(s.name for s in c.series)} per {n} rows")


def _label_width(labels: Sequence[str]) -> int:
    return min(12 + 7 * max((len(s) for s in labels), default=4), 360)


def _bars(c: ch.Bars) -> str:
    """Horizontal bars with their value written at the end (several series: side by side, with a legend);
    error bars as whiskers; ``highlight`` outlines one label's bars."""
    if c.diverging:
        return _diverging(c)
    k, n, width, unit = max(len(c.series), 1), len(c.labels), c.width or _WIDTH, escape(c.unit)
    show_label_title = c.label_title and not all(lab.lower().startswith(c.label_title.lower()) for lab in c.labels)
    left = _label_width([*c.labels, c.label_title] if show_label_title else c.labels)
    bh = 16 if k == 1 else 12
    rh = k * bh + 5
    top = 8 if k == 1 else 24
    h = top + 6 + n * rh + 18
    allv = np.concatenate([s.values + (s.error_plus if s.error_plus is not None else 0) for s in c.series] or [[0.0]])
    vmax = float(np.nanmax(allv)) if n and np.isfinite(allv).any() and np.nanmax(allv) > 0 else 1.0
    scale = (width - left - 90) / vmax
    body = _legend([s.name for s in c.series], left, 14) if k > 1 else []
    for i, lab in enumerate(c.labels):
        y0 = top + i * rh
        ly = y0 + 12 if k == 1 else y0 + rh / 2 + 2
        body.append(f'<text x="{left - 6}" y="{ly:.0f}" text-anchor="end" class="ax">{escape(lab[:50])}</text>')
        for j, s in enumerate(c.series):
            v, y = s.values[i], y0 + j * bh
            if v != v:
                body.append(f'<text x="{left + 4}" y="{y + bh - 4}" class="ax">–</text>')
                continue
            stroke = ' stroke="#000" stroke-width="2"' if i == c.highlight else ""
            col = PALETTE[0] if k == 1 else _fill(j)
            w = max(v, 0.0) * scale
            body.append(
                f'<rect class="mark" x="{left}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh - 1 if k > 1 else bh}" '
                f'fill="{col}"{stroke}><title>{escape(_hover(s, i, lab))}{" · " + escape(s.name) if k > 1 else ""}: '
                f"{fmt(v, c.digits)} {unit}</title></rect>"
            )
            end = w
            if s.error_plus is not None and s.error_minus is not None:
                a, b = (v - s.error_minus[i]) * scale, (v + s.error_plus[i]) * scale
                ym = y + bh / 2
                body.append(
                    f'<path d="M{left + a:.1f} {ym:.1f}H{left + b:.1f}M{left + a:.1f} {ym - 4:.1f}V{ym + 4:.1f}'
                    f'M{left + b:.1f} {ym - 4:.1f}V{ym + 4:.1f}" stroke="#000" fill="none"><title>min '
                    f"{fmt(v - s.error_minus[i], c.digits)}, max {fmt(v + s.error_plus[i], c.digits)} {unit}"
                    "</title></path>"
                )
                end = max(end, b)
            body.append(f'<text x="{left + end + 4:.1f}" y="{y + bh - 4}" class="ax">{fmt(v, c.digits)}</text>')
    body.append(f'<text x="{left}" y="{h - 3}" class="ax">{escape(c.value_title or c.unit)}</text>')
    if show_label_title:
        body.append(f'<text x="{left - 6}" y="{h - 3}" text-anchor="end" class="ax">{escape(c.label_title)}</text>')
    return _svg(c, width, h, body, f"bars of {n} values in {c.unit}")


def _diverging(c: ch.Bars) -> str:
    """Horizontal bars left (negative: less, faster) or right (positive: more, slower) of a zero line, each
    with its signed value written beside it and a word in its title (the first series)."""
    s, n, width, unit, digits = c.series[0], len(c.labels), c.width or _WIDTH, escape(c.unit), c.digits
    vals = s.values
    left = _label_width(c.labels)
    bh = 16
    h = 14 + n * (bh + 5) + 18
    half = (width - left - 70) / 2
    zero = left + half
    vmax = float(np.nanmax(np.abs(vals))) if n and np.nanmax(np.abs(vals)) > 0 else 1.0
    body = [f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="4" y2="{h - 16}" stroke="#333"/>']
    for i, (lab, v) in enumerate(zip(c.labels, vals)):
        y = 8 + i * (bh + 5)
        w = abs(v) / vmax * half
        x = zero if v >= 0 else zero - w
        col, word = (PALETTE[5], "more") if v > 0 else (PALETTE[2], "less")
        tx = zero + w + 4 if v >= 0 else zero - w - 4
        anchor = "start" if v >= 0 else "end"
        body.append(
            f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="ax">{escape(lab[:50])}</text>'
            f'<rect class="mark" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh}" fill="{col}">'
            f"<title>{escape(_hover(s, i, lab))}: {v:+,.{digits}f} {unit} ({word})</title></rect>"
            f'<text x="{tx:.1f}" y="{y + 12}" text-anchor="{anchor}" class="ax">{v:+,.{digits}f}</text>'
        )
    body.append(
        f'<text x="{zero:.0f}" y="{h - 3}" text-anchor="middle" class="ax">{unit} (left: less, right: more)</text>'
    )
    return _svg(c, width, h, body, f"change of {n} values in {c.unit}")


def _pie(c: ch.Pie) -> str:
    """Slices from the top, clockwise, each titled with its value and share; a legend with the shares."""
    ok = np.isfinite(c.values) & (c.values > 0)
    vals, labels = c.values[ok], [lab for lab, k in zip(c.labels, ok) if k]
    if not len(vals):
        return _empty(c, "pie")
    width, r = c.width or _WIDTH, 90
    h = max(2 * r + 20, 16 * min(len(vals), 30) + 20)
    cx, cy, tot = r + 10, r + 10, float(vals.sum())
    body, a0 = [], 0.0
    for i, (lab, v) in enumerate(zip(labels, vals)):
        share = v / tot
        title = f"<title>{escape(lab)}: {fmt(v, c.digits)} {escape(c.unit)} ({100 * share:.1f}%)</title>"
        if share >= 1.0:
            body.append(f'<circle class="mark" cx="{cx}" cy="{cy}" r="{r}" fill="{_fill(i)}">{title}</circle>')
        else:
            a1 = a0 + 2 * np.pi * share
            x0, y0 = cx + r * np.sin(a0), cy - r * np.cos(a0)
            x1, y1 = cx + r * np.sin(a1), cy - r * np.cos(a1)
            body.append(
                f'<path class="mark" d="M{cx} {cy}L{x0:.2f} {y0:.2f}A{r} {r} 0 {int(share > 0.5)} 1 {x1:.2f} '
                f'{y1:.2f}Z" fill="{_fill(i)}" stroke="#fff" stroke-width="0.7">{title}</path>'
            )
            a0 = a1
        if i < 30:
            ly = 14 + 16 * i
            body.append(
                f'<rect x="{2 * r + 30}" y="{ly - 9}" width="12" height="12" fill="{_fill(i)}" stroke="#333" '
                f'stroke-width="0.5"/><text x="{2 * r + 46}" y="{ly + 1}" class="lg">{escape(lab[:60])} '
                f"{100 * share:.1f}%</text>"
            )
    return _svg(c, width, h, body, f"pie of {len(vals)} shares")


def bin_counts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(x, edges)[0]`` without sorting ``x``: per bin the values in ``[e[i], e[i + 1])``, the last bin
    closed, values outside the edges left out (edges ascending)."""
    last = len(edges) - 2
    i = np.searchsorted(edges, x, side="right") - 1
    i[x == edges[-1]] = last
    return np.bincount(i[(i >= 0) & (i <= last)], minlength=last + 1)


def _points(x: np.ndarray, y: np.ndarray) -> str:
    """SVG points ``x,y`` with one decimal each, space-separated."""
    return " ".join(map("{:.1f},{:.1f}".format, x.tolist(), y.tolist()))


def _histogram(c: ch.Histogram) -> str:
    """Counts in bins (:func:`charts.histogram_edges`) on a log count scale, an optional cutoff line."""
    edges = ch.histogram_edges(c)
    width, height = c.width or _WIDTH, c.height or 220
    if edges is None:
        return _empty(c, "histogram")
    x, log = ch.histogram_values(c), c.log
    lo, hi = float(edges[0]), float(edges[-1])
    counts = bin_counts(x, edges)
    bins = len(counts)
    left, bottom, top = 60, 34, 10
    pw, ph = width - left - 50, height - bottom - top
    cmax = counts.max() or 1
    body = []
    bw = pw / bins
    for i in np.flatnonzero(counts):
        c_i = counts[i]
        bhh = ph * np.log10(1 + c_i) / np.log10(1 + cmax)  # counts on a log scale: outliers stay visible
        body.append(
            f'<rect class="mark" x="{left + i * bw:.1f}" y="{top + ph - bhh:.1f}" width="{max(bw - 1, 0.5):.1f}" '
            f'height="{bhh:.1f}" fill="{PALETTE[0]}"><title>{fmt(edges[i], 1)}–{fmt(edges[i + 1], 1)} '
            f"{escape(c.unit)}: {int(c_i):,}</title></rect>"
        )
    pos = lambda v: left + pw * ((np.log(v) - np.log(lo)) / (np.log(hi) - np.log(lo)) if log else (v - lo) / (hi - lo))
    for t in np.geomspace(lo, hi, 6) if log else np.linspace(lo, hi, 6):
        body.append(f'<text x="{pos(t):.1f}" y="{height - 18}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    if c.cutoff is not None and lo < c.cutoff < hi:
        cx = pos(c.cutoff)
        body.append(
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{top + ph}" stroke="#b03a2e" stroke-dasharray="4 3"/>'
            f'<text x="{cx + 3:.1f}" y="{top + 10}" class="ax">cutoff {c.cutoff:g}</text>'
        )
    body.append(
        f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#333"/>'
        f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" class="ax">{escape(c.unit)}'
        f'{" (log scale)" if log else ""}</text><text x="4" y="{top + 10}" class="ax">count</text>'
        f'<text x="4" y="{top + 24}" class="ax">max {int(cmax):,}</text>'
    )
    return _svg(c, width, height, body, f"histogram of {len(x)} values in {c.unit}")


def _strip(c: ch.Strip) -> str:
    """One row per group: a dot per value (titled with its point label), the median as a tick, the group's
    largest value labelled with its point label when ``mark_max`` (a straggler reads at a glance)."""
    groups, width, unit, digits = c.groups, c.width or _WIDTH, escape(c.unit), c.digits
    allv = np.concatenate([g.values for g in groups]) if groups else np.zeros(0)
    if not len(allv):
        return _empty(c, "strip plot")
    left = min(12 + 7 * max(len(g.name) for g in groups), 330)
    lo, hi = 0.0, float(allv.max()) or 1.0
    pw, rh = width - left - 70, 24
    h = 12 + len(groups) * rh + 30
    sx = lambda v: left + pw * (v - lo) / (hi - lo)
    body = []
    for i, g in enumerate(groups):
        v, y = g.values, 12 + i * rh + rh / 2
        body.append(
            f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end" class="ax">{escape(g.name[:46])}</text>'
            f'<line x1="{left}" x2="{left + pw}" y1="{y:.0f}" y2="{y:.0f}" stroke="#eee"/>'
        )
        for val, p in zip(v, g.points):
            body.append(
                f'<circle class="mark" cx="{sx(val):.1f}" cy="{y:.0f}" r="4" fill="{PALETTE[0]}" '
                f'fill-opacity="0.6"><title>{escape(g.name)} · {escape(p)}: {fmt(val, digits)} {unit}'
                f"</title></circle>"
            )
        if len(v):
            med = median(v)
            body.append(
                f'<line x1="{sx(med):.1f}" x2="{sx(med):.1f}" y1="{y - 8:.0f}" y2="{y + 8:.0f}" stroke="#000" '
                f'stroke-width="2"><title>median {fmt(med, digits)} {unit}</title></line>'
            )
            if c.mark_max and len(v) > 1:
                k = int(np.argmax(v))
                body.append(f'<text x="{sx(v[k]) + 6:.1f}" y="{y - 5:.0f}" class="ax">{escape(g.points[k])}</text>')
    for t in _ticks(lo, hi):
        body.append(f'<text x="{sx(t):.1f}" y="{h - 16}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    body.append(
        f'<text x="{left + pw / 2:.0f}" y="{h - 2}" text-anchor="middle" class="ax">{unit} '
        f"(dot: one value, bar: median)</text>"
    )
    return _svg(c, width, h, body, f"strip plot of {len(groups)} groups in {c.unit}")


_LEGEND_ROWS = 16


def s_name(name: str) -> str:
    """A series name for a legend row (22 characters)."""
    return fit_names([name], 22)[0]


def _lines(c: ch.Lines) -> str:
    """A line per series over a shared x axis (:func:`charts.line_points`: reduced by peaks, stacked bands as
    their tops, each band filled down to the one below), in steps unless ``step`` is off; a legend at the
    right."""
    if not c.series:
        return _empty(c, "line chart")
    width, height = c.width or _WIDTH, c.height or 200
    xlo, xhi = ch.x_range(c.series)
    drawn = ch.line_points(c)
    yhi = max(float(y.max()) for _, y in drawn) or 1.0
    left, right, top, bottom = 60, 170, 10, 34
    height = max(height, top + bottom + 12 * min(len(c.series), 16) + 8)
    pw, ph = width - left - right, height - top - bottom
    colours = [s.colour or PALETTE[i % len(PALETTE)] for i, s in enumerate(c.series)]
    body, below = [], None
    for i, (s, (xs, ys)) in enumerate(zip(c.series, drawn)):
        px = left + pw * (xs - xlo) / (xhi - xlo)
        py = top + ph - ph * ys / yhi
        sx, sy = (np.repeat(px, 2)[1:], np.repeat(py, 2)[:-1]) if c.step else (px, py)  # step: a value holds
        if c.stacked:
            bx, by = below if below is not None else (sx[[-1, 0]], np.full(2, top + ph))
            ring = _points(np.concatenate([sx, bx[::-1]]), np.concatenate([sy, by[::-1]]))
            body.append(f'<polygon points="{ring}" fill="{escape(colours[i])}" fill-opacity="0.8" stroke="none"/>')
            below = (sx, sy)
        pts = _points(sx, sy)
        body.append(
            f'<polyline class="mark" points="{pts}" fill="none" stroke="{escape(colours[i])}" '
            f'stroke-width="1.3"><title>{escape(s.name)}: max {float(s.y.max()):,.4g} {escape(c.y_unit)}'
            "</title></polyline>"
        )
    # the legend: every series, or when there are more than fit, the ones with the highest peaks and a line
    # that says so (each line names its series on hover)
    keyed = list(range(len(c.series)))
    if len(keyed) > _LEGEND_ROWS:
        keyed = sorted(keyed, key=lambda i: -float(c.series[i].y.max()) if len(c.series[i].y) else 0.0)
        keyed = sorted(keyed[: _LEGEND_ROWS - 1])
    for row, i in enumerate(keyed):
        yy = top + 6 + 12 * row
        body.append(
            f'<line x1="{left + pw + 6}" x2="{left + pw + 18}" y1="{yy}" y2="{yy}" '
            f'stroke="{escape(colours[i])}" stroke-width="2"/><text x="{left + pw + 21}" y="{yy + 4}" '
            f'class="ax">{escape(s_name(c.series[i].name))}</text>'
        )
    if len(keyed) < len(c.series):
        yy = top + 6 + 12 * len(keyed)
        body.append(
            f'<text x="{left + pw + 6}" y="{yy + 4}" class="ax">top {len(keyed)} of {len(c.series)} by '
            f"peak; hover a line</text>"
        )
    for t in _ticks(0.0, yhi, 4):
        yy = top + ph - ph * t / yhi
        body.append(
            f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end" class="ax">{t:,.4g}</text>'
            f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>'
        )
    for t in _ticks(xlo, xhi):
        xx = left + pw * (t - xlo) / (xhi - xlo)
        body.append(f'<text x="{xx:.1f}" y="{height - 18}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    body.append(
        f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" class="ax">{escape(c.x_unit)}</text>'
        f'<text x="4" y="{top + 8}" class="ax">{escape(c.y_unit)}</text>'
    )
    return _svg(c, width, height, body, f"{'stacked areas' if c.stacked else 'line chart'} of {len(c.series)} series")


def _table(c: ch.Table) -> str:
    """An HTML table (numbers with 2 decimals)."""

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return f"<td>{fmt(float(v), 2)}</td>"
        return f'<td class="t">{escape(str(v))}</td>'

    head = "".join(f'<th class="t">{escape(h)}</th>' for h in c.columns)
    rows = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in zip(*c.cells))
    return f'<table class="plot-table" data-plot="{escape(c.name)}" aria-label="{escape(c.title)}"><tr>{head}</tr>{rows}</table>'


def gantt_json(g: ch.Gantt) -> dict:
    """The timeline script's input: lanes, per operation its lane, start (ns, delta-encoded in lane order),
    duration (ns), kind and name (ids), and the kinds' names, colours and letters."""
    return {
        "caption": g.caption,
        "span": g.span,
        "t0_ns": g.t0_ns,
        "lanes": list(g.lanes),
        "lane": g.lane.tolist(),
        "s": np.diff(g.start, prepend=0).tolist(),
        "d": g.dur.tolist(),
        "k": g.kind.tolist(),
        "n": g.label.tolist(),
        "names": list(g.names),
        "types": list(g.kinds),
        "colours": list(g.colours),
        "letters": list(g.letters) + [""] * (len(g.kinds) - len(g.letters)),
    }


def _gantt(g: ch.Gantt) -> str:
    """The zoomable canvas timeline: a key, zoom buttons, the canvas and its JSON."""
    letters = list(g.letters) + [""] * (len(g.kinds) - len(g.letters))
    key = "".join(
        f'<span><i style="background:{escape(c)}"></i>'
        f"{escape(mark) + ' = ' + escape(t.lower()) if mark else escape(t)}</span>"
        for t, c, mark in list(zip(g.kinds, g.colours, letters))[:_KEY_KINDS]
    )
    if len(g.kinds) > _KEY_KINDS:
        key += f"<span>and {len(g.kinds) - _KEY_KINDS:,} more</span>"
    payload = json.dumps(gantt_json(g), separators=(",", ":")).replace("</", "<\\/")
    return (
        f'<div class="key">{key}</div>'
        '<div class="tl-bar"><button id="tl-in" type="button">+ zoom in</button><button id="tl-out" type="button">'
        '− zoom out</button><button id="tl-reset" type="button">whole step</button> <span id="tl-window"></span></div>'
        f'<div id="tl-wrap"><canvas id="tl-canvas" class="plot" data-plot="{escape(g.name)}" data-events="{len(g.lane)}" '
        f'aria-label="{escape(g.title)}"></canvas><div id="tl-tip"></div></div>'
        f'<script type="application/json" id="tl-data">{payload}</script>'
    )


# most specific first: a StackedBars is a Bars
_RENDERERS = (
    (ch.StackedBars, _stacked),
    (ch.Bars, _bars),
    (ch.Pie, _pie),
    (ch.Histogram, _histogram),
    (ch.Strip, _strip),
    (ch.Lines, _lines),
    (ch.Table, _table),
    (ch.Gantt, _gantt),
)
