"""GPU work per stream over time: the rows behind a timeline plot (spec 14 §2-3).

:func:`gpu_timeline` gives one row per GPU operation (kernel, memcpy, memset under holotrace's rules; every
row with a stream under HTA's) of the chosen ranks, streams and iterations, inside an optional time window:

============== ======== ================================================================================
column         dtype    meaning
============== ======== ================================================================================
``rank``       int64    rank
``stream``     int64    GPU stream
``task``       str      the plot line of the row: ``"rank <r> stream <s>"``
``start``      *        start inside the window (the event's start when no window cuts it)
``end``        *        end inside the window
``ts``         *        the event's own start; ``dur`` its own duration (never cut)
``name``       str      event name; ``cat`` its category; ``kernel_type`` ``COMPUTATION`` ... (``""``: none)
``iteration``  *        ``ProfilerStep`` number, −1 none
``index``      int64    position of the event in its file (stable event id)
============== ======== ================================================================================

Times are in the view's unit (ns under holotrace's rules, µs under HTA's) on the job's common clock,
measured from the view's origin: the earliest start of any event of any rank of the view (so every
chosen rank shares one time axis). ``frame.attrs`` holds ``origin`` (on the common clock) and ``unit_ns``.
A ``window=(t0, t1)`` (same unit, from the origin) keeps the operations that overlap ``[t0, t1)`` (an
instantaneous one when ``t0 <= ts < t1``) and cuts ``start``/``end`` to it. Rows are ordered by rank,
stream, start, then event index.

:func:`stream_spans` summarises a timeline frame per stream: operations, first start, last end, busy time
(the union of the rows' ``[start, end)``) and its share of the span.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.analysis import intervals
from holotrace.analysis.grouped import unique_ids
from holotrace.errors import HolotraceError
from holotrace.model.classify import KernelType, RuleSet
from holotrace.model.view import JobView, resolve, wide
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "TIMELINE_COLUMNS",
    "gpu_timeline",
    "gpu_timeline_table",
    "stream_spans",
    "view_origin",
    "TimelineWindowError",
]

TIMELINE_COLUMNS = (
    "rank",
    "stream",
    "task",
    "start",
    "end",
    "ts",
    "dur",
    "name",
    "cat",
    "kernel_type",
    "iteration",
    "index",
)
_TEXT = ("task", "name", "cat", "kernel_type")
_TYPE_NAMES = np.array([KernelType(i).name for i in range(len(KernelType))] + [""], dtype=object)  # −1 → ""


class TimelineWindowError(HolotraceError, ValueError):
    """A time window that cannot be used (end before start, not a pair of numbers)."""


def view_origin(view: JobView) -> int:
    """Earliest event start over every rank of ``view`` on the common clock (0 for an empty view)."""
    starts = [int(v["ts"].min()) + v.clock_offset for v in view.views.values() if v.n]
    return min(starts) if starts else 0


def _check_window(window) -> Optional[tuple[float, float]]:
    if window is None:
        return None
    try:
        t0, t1 = (float(x) for x in window)
    except (TypeError, ValueError):
        raise TimelineWindowError(
            f"window {window!r} is not a pair of numbers",
            fix="pass window=(start, end) in the view's unit from the trace start",
        ) from None
    if not (np.isfinite(t0) and np.isfinite(t1)) or t1 < t0:
        raise TimelineWindowError(
            f"window {window!r} ends before it starts or is not finite",
            fix="pass window=(start, end) with start <= end",
        )
    return t0, t1


def _empty(view: JobView) -> pd.DataFrame:
    import pandas as pd

    out = pd.DataFrame({c: pd.Series([], dtype=object if c in _TEXT else np.int64) for c in TIMELINE_COLUMNS})
    out.attrs.update(origin=view_origin(view), unit_ns=view.unit_ns)
    return out


def gpu_timeline(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    iterations: Optional[Sequence[int]] = None,
    window: Optional[tuple[float, float]] = None,
) -> pd.DataFrame:
    """GPU operations per rank and stream over time (see the module docstring for the columns).

    Args:
        source: a job or a :class:`~holotrace.model.view.JobView`.
        rules: rule set when ``source`` is a job (holotrace's by default).
        ranks, streams, iterations: keep only these (every one when None).
        window: ``(start, end)`` from the view's origin, in the view's unit; rows are cut to it.
    """
    view = resolve(source, rules)
    table, origin = _timeline(view, ranks, streams, iterations, window)
    if table is None:
        return _empty(view)
    df = table.to_pandas(copy=False)
    df.attrs.update(origin=origin, unit_ns=view.unit_ns)
    return df


def gpu_timeline_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    iterations: Optional[Sequence[int]] = None,
    window: Optional[tuple[float, float]] = None,
) -> Table:
    """:func:`gpu_timeline` as a :class:`~holotrace.table.Table` (the same columns and rows; no pandas)."""
    view = resolve(source, rules)
    table, _ = _timeline(view, ranks, streams, iterations, window)
    if table is None:
        return Table({c: np.zeros(0, dtype=object if c in _TEXT else np.int64) for c in TIMELINE_COLUMNS})
    return table


def _timeline(view: JobView, ranks, streams, iterations, window) -> tuple[Optional[Table], int]:
    """The timeline's table (None when no operation is kept) and the view's origin."""
    win = _check_window(window)
    origin = view_origin(view)
    parts = []
    for r in view.select(ranks):
        v = view[r]
        stream = v["stream"]
        keep = v["gpu"] & (stream >= 0)
        if streams is not None:
            keep &= np.isin(stream, np.asarray(list(streams), dtype=np.int64))
        if iterations is not None:
            keep &= np.isin(v["iteration"], np.asarray(list(iterations), dtype=np.float64))
        rows = np.flatnonzero(keep)
        shift = v.clock_offset - origin
        ts, end = v.bounds(rows)
        ts, end = ts + shift, end + shift
        if win is not None:
            t0, t1 = win
            inside = (ts < t1) & ((end > t0) | ((end == ts) & (ts >= t0)))
            rows, ts, end = rows[inside], ts[inside], end[inside]
        start, stop = ts, end
        if win is not None:
            start, stop = np.maximum(ts, win[0]).astype(ts.dtype), np.minimum(end, win[1]).astype(end.dtype)
        parts.append(
            {
                "rank": np.full(len(rows), r, dtype=np.int64),
                "stream": wide(stream[rows]),
                "start": start,
                "end": stop,
                "ts": ts,
                "dur": v["dur"][rows],
                "name": v["name"][rows],
                "cat": v["cat"][rows],
                "kernel_type": v["kernel_type"][rows].astype(np.int64),
                "iteration": wide(v["iteration"][rows]),
                "index": v["index"][rows],
            }
        )
    if not parts or not sum(len(p["rank"]) for p in parts):
        return None, origin
    col = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.lexsort((col["index"], col["start"], col["stream"], col["rank"]))  # stable: rank, stream, start, index
    col = {k: a[order] for k, a in col.items()}
    for c in ("name", "cat"):  # decoded once per distinct id
        uniq, inv = unique_ids(col[c])
        col[c] = view.names(uniq)[inv]
    kt = col["kernel_type"]
    col["kernel_type"] = _TYPE_NAMES[np.where(kt >= 0, kt, len(_TYPE_NAMES) - 1)]
    lo = int(col["stream"].min())
    width = int(col["stream"].max()) - lo + 1
    pairs, inv = unique_ids(col["rank"] * width + (col["stream"] - lo))  # (rank, stream) pairs, in their order
    labels = np.array([f"rank {k // width} stream {k % width + lo}" for k in pairs.tolist()], dtype=object)
    col["task"] = labels[inv]
    return Table({c: col[c] for c in TIMELINE_COLUMNS}), origin


def stream_spans(frame: pd.DataFrame) -> pd.DataFrame:
    """Per ``rank, stream`` of a :func:`gpu_timeline` frame: ``operations``, ``first_start``, ``last_end``,
    ``busy`` (union of the rows' ``[start, end)``) and ``busy_pctg`` (percent of ``last_end - first_start``)."""
    import pandas as pd

    cols = ["rank", "stream", "operations", "first_start", "last_end", "busy", "busy_pctg"]
    if not len(frame):
        return pd.DataFrame({c: pd.Series([], dtype=np.float64 if c == "busy_pctg" else np.int64) for c in cols})
    out = []
    key = frame["rank"].to_numpy() * (1 << 32) + frame["stream"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True])  # the frame is ordered by rank, stream
    start, end = frame["start"].to_numpy(), frame["end"].to_numpy()
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        busy = intervals.total_length(intervals.merge(start[a:b], end[a:b]))
        first, last = start[a:b].min(), end[a:b].max()
        span = last - first
        out.append(
            (
                int(frame["rank"].iat[a]),
                int(frame["stream"].iat[a]),
                b - a,
                first,
                last,
                busy,
                100.0 * float(busy) / float(span) if span > 0 else 0.0,
            )
        )
    return pd.DataFrame(out, columns=cols)
