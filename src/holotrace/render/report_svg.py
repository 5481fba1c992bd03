"""Inline SVG charts for the HTML report: stacked bars, bars, histograms, strip plots and line charts.

Each function returns one ``<svg>`` element as text, drawn from plain arrays. Every data mark carries the
class ``mark`` and a ``<title>`` child (the browser shows it on hover, with no script); every series has a
text label as well as a colour and, for stacked bars, a fill pattern, so the charts read printed in grey.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

import numpy as np

__all__ = ["stacked_bars", "bars", "diverging_bars", "histogram", "strip", "lines", "fmt", "PALETTE"]

#: series colours (distinct in lightness, so they stay apart in grey)
PALETTE = ("#1f5fa8", "#e08a1e", "#6aa84f", "#c9c9c9", "#8e44ad", "#b03a2e", "#16a085", "#7f8c8d")
_PATTERNS = ("", "url(#ht-hatch)", "url(#ht-dots)", "", "url(#ht-cross)", "", "", "")
_DEFS = ('<defs><pattern id="ht-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
         'patternTransform="rotate(45)"><rect width="6" height="6" fill="#e08a1e"/>'
         '<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/></pattern>'
         '<pattern id="ht-dots" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" '
         'fill="#6aa84f"/><circle cx="2.5" cy="2.5" r="1.2" fill="#fff"/></pattern>'
         '<pattern id="ht-cross" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" '
         'fill="#8e44ad"/><path d="M0 0L6 6M6 0L0 6" stroke="#fff"/></pattern></defs>')


def fmt(x: float, digits: int = 1) -> str:
    """A number with thousands separators and ``digits`` decimals."""
    return f"{x:,.{digits}f}"


def _fill(i: int) -> str:
    pat = _PATTERNS[i % len(_PATTERNS)]
    return pat or PALETTE[i % len(PALETTE)]


def _svg(name: str, w: float, h: float, body: list[str], label: str) -> str:
    return (f'<svg class="plot" data-plot="{escape(name)}" viewBox="0 0 {w:.0f} {h:.0f}" width="{w:.0f}" '
            f'height="{h:.0f}" role="img" aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
            + _DEFS + "".join(body) + "</svg>")


def _legend(names: Sequence[str], x: float, y: float) -> list[str]:
    out, cx = [], x
    for i, n in enumerate(names):
        out.append(f'<rect x="{cx:.0f}" y="{y - 9:.0f}" width="12" height="12" fill="{_fill(i)}" stroke="#333" '
                   f'stroke-width="0.5"/><text x="{cx + 16:.0f}" y="{y + 1:.0f}" class="lg">{escape(n)}</text>')
        cx += 24 + 7 * len(n)
    return out


def _ticks(lo: float, hi: float, n: int = 5) -> np.ndarray:
    if hi <= lo:
        return np.array([lo])
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = mag * min((1, 2, 2.5, 5, 10), key=lambda m: abs(m * mag - raw))
    return np.arange(np.ceil(lo / step) * step, hi + step * 1e-9, step)


def stacked_bars(name: str, labels: Sequence[str], series: Sequence[tuple[str, np.ndarray]], *, unit: str,
                 digits: int = 1, width: int = 760) -> str:
    """Horizontal stacked bars, one per label; each segment titled with its value and share of the bar."""
    n = len(labels)
    vals = np.array([np.asarray(v, dtype=np.float64) for _, v in series]).reshape(len(series), n)
    tot = vals.sum(axis=0)
    left, right, bh = 90, 80, 20
    h = 40 + n * (bh + 6) + 20
    scale = (width - left - right) / (tot.max() if n and tot.max() > 0 else 1.0)
    body = _legend([s for s, _ in series], left, 16)
    for i, lab in enumerate(labels):
        y = 30 + i * (bh + 6)
        body.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end" class="ax">{escape(lab)}</text>')
        x = float(left)
        for j, (sname, _) in enumerate(series):
            v = vals[j, i]
            if v <= 0:
                continue
            w = v * scale
            share = 100.0 * v / tot[i] if tot[i] else 0.0
            body.append(f'<rect class="mark" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh}" '
                        f'fill="{_fill(j)}" stroke="#fff" stroke-width="0.5"><title>{escape(lab)} · {escape(sname)}: '
                        f'{fmt(v, digits)} {unit} ({share:.1f}%)</title></rect>')
            if w > 46:
                body.append(f'<text x="{x + 3:.1f}" y="{y + 14}" class="in">{escape(sname[:4])} {share:.0f}%</text>')
            x += w
        body.append(f'<text x="{x + 4:.1f}" y="{y + 14}" class="ax">{fmt(tot[i], digits)}</text>')
    body.append(f'<text x="{left}" y="{h - 4}" class="ax">{escape(unit)}</text>')
    return _svg(name, width, h, body, f"stacked bars of {', '.join(s for s, _ in series)} per {n} rows")


def bars(name: str, labels: Sequence[str], values: Sequence[float], *, unit: str, digits: int = 1,
         width: int = 760, highlight: int = -1) -> str:
    """Horizontal bars with their value written at the end; ``highlight`` outlines one bar."""
    vals = np.asarray(values, dtype=np.float64)
    left = min(12 + 7 * max((len(s) for s in labels), default=4), 360)
    bh, n = 16, len(labels)
    h = 14 + n * (bh + 5) + 18
    vmax = np.nanmax(vals) if n and np.nanmax(vals) > 0 else 1.0
    scale = (width - left - 90) / vmax
    body = []
    for i, (lab, v) in enumerate(zip(labels, vals)):
        y = 8 + i * (bh + 5)
        stroke = ' stroke="#000" stroke-width="2"' if i == highlight else ""
        body.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="ax">{escape(lab[:50])}</text>'
                    f'<rect class="mark" x="{left}" y="{y}" width="{max(v * scale, 0.5):.1f}" height="{bh}" '
                    f'fill="{PALETTE[0]}"{stroke}><title>{escape(lab)}: {fmt(v, digits)} {escape(unit)}</title></rect>'
                    f'<text x="{left + v * scale + 4:.1f}" y="{y + 12}" class="ax">{fmt(v, digits)}</text>')
    body.append(f'<text x="{left}" y="{h - 3}" class="ax">{escape(unit)}</text>')
    return _svg(name, width, h, body, f"bars of {n} values in {unit}")


def histogram(name: str, values: np.ndarray, *, unit: str, bins: int = 40, log: bool = True,
              cutoff: float | None = None, width: int = 760, height: int = 220) -> str:
    """Counts of ``values`` in ``bins`` bins (log-spaced when ``log``), an optional cutoff line."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if log:
        x = x[x > 0]
    if not len(x):
        return _svg(name, width, 40, ['<text x="10" y="24" class="ax">no values</text>'], "empty histogram")
    lo, hi = float(x.min()), float(x.max())
    if hi <= lo:
        hi = lo + 1.0
    edges = np.geomspace(lo, hi, bins + 1) if log else np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(x, edges)
    left, bottom, top = 60, 34, 10
    pw, ph = width - left - 50, height - bottom - top
    cmax = counts.max() or 1
    ymap = (lambda c: ph * np.log10(1 + c) / np.log10(1 + cmax))  # counts on a log scale: outliers stay visible
    body = []
    bw = pw / bins
    for i, c in enumerate(counts):
        if not c:
            continue
        bhh = ymap(c)
        body.append(f'<rect class="mark" x="{left + i * bw:.1f}" y="{top + ph - bhh:.1f}" width="{max(bw - 1, 0.5):.1f}" '
                    f'height="{bhh:.1f}" fill="{PALETTE[0]}"><title>{fmt(edges[i], 1)}–{fmt(edges[i + 1], 1)} '
                    f'{escape(unit)}: {int(c):,}</title></rect>')
    pos = (lambda v: left + pw * ((np.log(v) - np.log(lo)) / (np.log(hi) - np.log(lo)) if log else (v - lo) / (hi - lo)))
    for t in (np.geomspace(lo, hi, 6) if log else np.linspace(lo, hi, 6)):
        body.append(f'<text x="{pos(t):.1f}" y="{height - 18}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    if cutoff is not None and lo < cutoff < hi:
        cx = pos(cutoff)
        body.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{top + ph}" stroke="#b03a2e" stroke-dasharray="4 3"/>'
                    f'<text x="{cx + 3:.1f}" y="{top + 10}" class="ax">cutoff {cutoff:g}</text>')
    body.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#333"/>'
                f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" class="ax">{escape(unit)}'
                f'{" (log scale)" if log else ""}</text><text x="4" y="{top + 10}" class="ax">count</text>'
                f'<text x="4" y="{top + 24}" class="ax">max {int(cmax):,}</text>')
    return _svg(name, width, height, body, f"histogram of {len(x)} values in {unit}")


def strip(name: str, groups: Sequence[tuple[str, np.ndarray, Sequence[str]]], *, unit: str, digits: int = 1,
          width: int = 760, mark_max: bool = True) -> str:
    """One row per group: a dot per value (titled with its point label), the median as a tick, the group's
    largest value labelled with its point label when ``mark_max`` (a straggler reads at a glance)."""
    allv = np.concatenate([np.asarray(v, dtype=np.float64) for _, v, _ in groups]) if groups else np.zeros(0)
    if not len(allv):
        return _svg(name, width, 40, ['<text x="10" y="24" class="ax">no values</text>'], "empty strip plot")
    left = min(12 + 7 * max(len(g) for g, _, _ in groups), 330)
    lo, hi = 0.0, float(allv.max()) or 1.0
    pw, rh = width - left - 70, 24
    h = 12 + len(groups) * rh + 30
    sx = (lambda v: left + pw * (v - lo) / (hi - lo))
    body = []
    for i, (g, v, pts) in enumerate(groups):
        v = np.asarray(v, dtype=np.float64)
        y = 12 + i * rh + rh / 2
        body.append(f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end" class="ax">{escape(g[:46])}</text>'
                    f'<line x1="{left}" x2="{left + pw}" y1="{y:.0f}" y2="{y:.0f}" stroke="#eee"/>')
        for val, p in zip(v, pts):
            body.append(f'<circle class="mark" cx="{sx(val):.1f}" cy="{y:.0f}" r="4" fill="{PALETTE[0]}" '
                        f'fill-opacity="0.6"><title>{escape(g)} · {escape(p)}: {fmt(val, digits)} {escape(unit)}'
                        f'</title></circle>')
        if len(v):
            med = float(np.median(v))
            body.append(f'<line x1="{sx(med):.1f}" x2="{sx(med):.1f}" y1="{y - 8:.0f}" y2="{y + 8:.0f}" stroke="#000" '
                        f'stroke-width="2"><title>median {fmt(med, digits)} {escape(unit)}</title></line>')
            if mark_max and len(v) > 1:
                k = int(np.argmax(v))
                body.append(f'<text x="{sx(v[k]) + 6:.1f}" y="{y - 5:.0f}" class="ax">{escape(pts[k])}</text>')
    for t in _ticks(lo, hi):
        body.append(f'<text x="{sx(t):.1f}" y="{h - 16}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    body.append(f'<text x="{left + pw / 2:.0f}" y="{h - 2}" text-anchor="middle" class="ax">{escape(unit)} '
                f'(dot: one value, bar: median)</text>')
    return _svg(name, width, h, body, f"strip plot of {len(groups)} groups in {unit}")


def lines(name: str, series: Sequence[tuple[str, np.ndarray, np.ndarray]], *, xunit: str, yunit: str,
          width: int = 760, height: int = 200, points: int = 600) -> str:
    """Line per series over a shared x axis, each reduced to at most ``points`` points (the max per bucket,
    so peaks survive); labelled at its end."""
    series = [(s, np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)) for s, x, y in series if len(x)]
    if not series:
        return _svg(name, width, 40, ['<text x="10" y="24" class="ax">no values</text>'], "empty line chart")
    xlo = min(float(x.min()) for _, x, _ in series)
    xhi = max(float(x.max()) for _, x, _ in series)
    yhi = max(float(y.max()) for _, _, y in series) or 1.0
    xhi = xhi if xhi > xlo else xlo + 1.0
    left, right, top, bottom = 60, 170, 10, 34
    height = max(height, top + bottom + 12 * min(len(series), 16) + 8)
    pw, ph = width - left - right, height - top - bottom
    body = []
    for i, (s, x, y) in enumerate(series):
        b = np.minimum(((x - xlo) / (xhi - xlo) * points).astype(np.int64), points - 1)
        peak = np.full(points, -np.inf)
        np.maximum.at(peak, b, y)
        used = np.flatnonzero(np.isfinite(peak))
        px = left + pw * (used + 0.5) / points
        py = top + ph - ph * peak[used] / yhi
        sx, sy = np.repeat(px, 2)[1:], np.repeat(py, 2)[:-1]  # a step line: a value holds until the next sample
        pts = " ".join(f"{a:.1f},{c:.1f}" for a, c in zip(sx, sy))
        col = PALETTE[i % len(PALETTE)]
        body.append(f'<polyline class="mark" points="{pts}" fill="none" stroke="{col}" stroke-width="1.3">'
                    f'<title>{escape(s)}: max {float(y.max()):,.4g} {escape(yunit)}</title></polyline>')
    for i, (s, _, _) in enumerate(series[:16]):
        col = PALETTE[i % len(PALETTE)]
        body.append(f'<line x1="{left + pw + 6}" x2="{left + pw + 18}" y1="{top + 6 + 12 * i}" y2="{top + 6 + 12 * i}" '
                    f'stroke="{col}" stroke-width="2"/><text x="{left + pw + 21}" y="{top + 10 + 12 * i}" class="ax">'
                    f'{escape(s[:22])}</text>')
    for t in _ticks(0.0, yhi, 4):
        yy = top + ph - ph * t / yhi
        body.append(f'<text x="{left - 4}" y="{yy + 4:.1f}" text-anchor="end" class="ax">{t:,.4g}</text>'
                    f'<line x1="{left}" x2="{left + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eee"/>')
    for t in _ticks(xlo, xhi):
        xx = left + pw * (t - xlo) / (xhi - xlo)
        body.append(f'<text x="{xx:.1f}" y="{height - 18}" text-anchor="middle" class="ax">{t:,.4g}</text>')
    body.append(f'<text x="{left + pw / 2:.0f}" y="{height - 3}" text-anchor="middle" class="ax">{escape(xunit)}</text>'
                f'<text x="4" y="{top + 8}" class="ax">{escape(yunit)}</text>')
    return _svg(name, width, height, body, f"line chart of {len(series)} series")


def diverging_bars(name: str, labels: Sequence[str], values: Sequence[float], *, unit: str, digits: int = 1,
                   width: int = 760) -> str:
    """Horizontal bars left (negative: less, faster) or right (positive: more, slower) of a zero line, each
    with its signed value written beside it and a word in its title."""
    vals = np.asarray(values, dtype=np.float64)
    left = min(12 + 7 * max((len(s) for s in labels), default=4), 360)
    bh, n = 16, len(labels)
    h = 14 + n * (bh + 5) + 18
    half = (width - left - 70) / 2
    zero = left + half
    vmax = float(np.nanmax(np.abs(vals))) if n and np.nanmax(np.abs(vals)) > 0 else 1.0
    body = [f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="4" y2="{h - 16}" stroke="#333"/>']
    for i, (lab, v) in enumerate(zip(labels, vals)):
        y = 8 + i * (bh + 5)
        w = abs(v) / vmax * half
        x = zero if v >= 0 else zero - w
        col, word = (PALETTE[5], "more") if v > 0 else (PALETTE[2], "less")
        tx = zero + w + 4 if v >= 0 else zero - w - 4
        anchor = "start" if v >= 0 else "end"
        body.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="ax">{escape(lab[:50])}</text>'
                    f'<rect class="mark" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh}" fill="{col}">'
                    f'<title>{escape(lab)}: {v:+,.{digits}f} {escape(unit)} ({word})</title></rect>'
                    f'<text x="{tx:.1f}" y="{y + 12}" text-anchor="{anchor}" class="ax">{v:+,.{digits}f}</text>')
    body.append(f'<text x="{zero:.0f}" y="{h - 3}" text-anchor="middle" class="ax">{escape(unit)} (left: less, '
                f'right: more)</text>')
    return _svg(name, width, h, body, f"change of {n} values in {unit}")
