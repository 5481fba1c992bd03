"""Augmented counters: launch-queue length per stream and memory-copy bandwidth per copy kind.

Both are step functions: a frame lists only the points where the value changes, and the value holds
until the next point of the same series.

* **Queue length** (per rank and GPU stream): the number of GPU operations whose CPU launch call has
  started but which have not started running yet: ``+1`` at each launch call that has its GPU operation
  in the trace, ``-1`` at the start of that operation. At equal times ``+1`` comes before ``-1`` (then
  launches before GPU rows, then trace order), so the order of equal timestamps never makes a transient
  negative value. A value that is still negative (a GPU operation that starts before its launch call,
  i.e. clocks that disagree) is kept and reported by :func:`queue_length_findings`, never clamped.
* **Memory bandwidth** (per rank and copy kind ``Memcpy HtoD`` / ``DtoH`` / ``DtoD`` / ``PtoP`` /
  ``Memset`` / ``Memcpy Unknown``): the sum of the recorded bandwidth of all copies of that kind running
  at once (every stream and device of the rank). An operation of zero duration lasts 1 µs. When every
  copy of a kind has ended, the value is exactly 0 (no floating-point residue; HTA's residue under
  ``rules.hta_quirks``).

Rules (:class:`~holotrace.model.classify.RuleSet`): under HTA's tables the launch calls are HTA's list
(``classify.HTA_LAUNCH_APIS``), GPU operations are the rows with a stream, bandwidth is the trace's
``memory bandwidth (GB/s)`` arg only; natively every launch API of the rule table counts, GPU operations
are kernels/memcpy/memset, and a copy without a recorded bandwidth gets ``bytes / dur``.
Times are in the view's unit (ns natively, µs under HTA's rules).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.findings import Finding, FindingCode
from holotrace.model import classify
from holotrace.model.classify import KernelType, RuleSet
from holotrace.model.view import JobView, resolve, wide
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("holotrace.analysis")

__all__ = [
    "CUDA_MAX_LAUNCH_QUEUE_PER_STREAM",
    "STATS",
    "queue_length",
    "queue_length_tables",
    "queue_length_summary",
    "queue_length_findings",
    "time_blocked_on_full_queue",
    "blocked_on_full_queue",
    "trace_durations",
    "memory_bandwidth",
    "memory_bandwidth_tables",
    "memory_bandwidth_summary",
    "memory_kind",
]

CUDA_MAX_LAUNCH_QUEUE_PER_STREAM = 1024
STATS = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")


def _view(source, rules: Optional[RuleSet]) -> JobView:
    return resolve(source, rules)


# ----------------------------------------------------------------------------------------------- queue length
def queue_length(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None
) -> dict[int, pd.DataFrame]:
    """Queue length series per rank: ``{rank: frame}``, ranks without any launch ↔ GPU pair omitted.

    Frame columns: ``ts`` (time of the change), ``pid``, ``tid`` (of the GPU operation), ``stream``,
    ``queue_length`` (int64, the value from ``ts`` on); index ``index`` = the event id of the launch call
    (``+1`` rows) or GPU operation (``-1`` rows). Rows: stream ascending, then time.
    """
    return {r: _frame(t, "index") for r, t in queue_length_tables(source, rules=rules, ranks=ranks).items()}


def queue_length_tables(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    columns: Optional[Sequence[str]] = None,
) -> dict[int, Table]:
    """:func:`queue_length` as tables (:class:`~holotrace.table.Table`, no pandas): the frame's columns, then its
    index as the column ``index``; ``columns``: only these (in this order), the others not made."""
    view = _view(source, rules)
    out = {}
    for r in view.select(ranks):
        t = _queue_rank(view, r, QUEUE_COLUMNS if columns is None else tuple(columns))
        if t is not None:
            out[r] = t
    return out


#: the columns of :func:`queue_length_tables`
QUEUE_COLUMNS = ("ts", "pid", "tid", "stream", "queue_length", "index")


def _frame(t: Table, index: str) -> pd.DataFrame:
    """The frame of a series table: its last column ``index`` made the index (named ``index`` or unnamed)."""
    import pandas as pd

    cols = [c for c in t.columns if c != "index"]
    return pd.DataFrame({c: t[c] for c in cols}, index=pd.Index(t["index"], name=index))


def _launch_ids(view: JobView) -> np.ndarray:
    apis = classify.HTA_LAUNCH_APIS if view.rules.hta_table else classify.LAUNCH_APIS
    return view.name_ids(set(apis))


def _queue_rank(view: JobView, r: int, columns: tuple = QUEUE_COLUMNS) -> Optional[Table]:
    rv = view[r]
    corr = rv["correlation"]
    launch = np.flatnonzero(np.isin(rv["name"], _launch_ids(view)))
    launch = launch[rv.at("index_correlation", launch) > 0]  # (read at the launches only)
    if not len(launch):
        return None
    gpu_rows = (rv["stream"] != -1) if view.rules.hta_table else rv["gpu"]
    gpu = np.flatnonzero(gpu_rows & (corr >= 0) & np.isin(corr, corr[launch]))
    if not len(gpu):
        return None
    # each launch pairs with every GPU row of its correlation (a join, as HTA's)
    g_sorted = gpu[np.argsort(corr[gpu], kind="stable")]
    gc = corr[g_sorted]
    lo = np.searchsorted(gc, corr[launch], "left")
    hi = np.searchsorted(gc, corr[launch], "right")
    reps = hi - lo
    l_rows = np.repeat(launch, reps)
    first = np.repeat(lo - np.cumsum(np.r_[0, reps[:-1]]), reps)
    matched = g_sorted[first + np.arange(len(l_rows))] if len(l_rows) else np.zeros(0, dtype=np.int64)
    n_up = len(l_rows)
    rows_ts = np.concatenate([rv["ts"][l_rows], rv["ts"][gpu]])
    delta = np.concatenate([np.ones(n_up, dtype=np.int64), -np.ones(len(gpu), dtype=np.int64)])
    src = np.concatenate([matched, gpu])  # the GPU row giving stream/pid/tid
    stream = wide(rv["stream"][src])
    order = _order(rows_ts, stream, -delta, view.rules)
    stream, delta = stream[order], delta[order]
    make = {
        "ts": lambda: rows_ts[order],
        "pid": lambda: rv.at("pid", src)[order],  # (read at these rows: no int64 copy of the whole columns)
        "tid": lambda: rv.at("tid", src)[order],
        "stream": lambda: stream,
        "queue_length": lambda: _grouped_cumsum(delta, stream),
        "index": lambda: np.concatenate([rv["index"][l_rows], rv["index"][gpu]])[order],
    }
    return Table({c: make[c]() for c in columns})


def _order(ts: np.ndarray, group: np.ndarray, tie: np.ndarray, rules: RuleSet) -> np.ndarray:
    """Point order: by group, then time, then ``tie`` (then position). Under ``rules.hta_quirks``, HTA's
    order instead: pandas' default (unstable quicksort) sort by time of the points as HTA concatenates
    them, then a stable split by group, which leaves equal times in an arbitrary but reproducible order."""
    if rules.hta_quirks:
        by_time = np.argsort(ts, kind="quicksort")
        return by_time[np.argsort(group[by_time], kind="stable")]
    return np.lexsort((np.arange(len(ts)), tie, ts, group))


def _starts(keys: np.ndarray) -> np.ndarray:
    """Positions where a run of equal ``keys`` begins."""
    return np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)


def _grouped_cumsum(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at each run of equal ``keys`` (integer values: exact)."""
    cs = np.cumsum(values)
    starts = _starts(keys)
    base = cs[starts] - values[starts]
    return cs - np.repeat(base, np.diff(np.r_[starts, len(keys)]))


def queue_length_findings(series: Mapping[int, pd.DataFrame], *, view: Optional[JobView] = None) -> list[Finding]:
    """A warning per (rank, stream) whose queue length goes below zero, with the count and the first event."""
    out = []
    for r, df in series.items():
        neg = df[df["queue_length"].to_numpy() < 0]
        if neg.empty:
            continue
        for s, g in neg.groupby("stream", sort=True):
            unit = "ns" if view is None or view.unit_ns == 1 else "µs"
            out.append(
                Finding.of(
                    FindingCode.NEGATIVE_QUEUE_LENGTH,
                    f"stream {s}: the launch queue goes below zero at {len(g)} point(s) (minimum {int(g['queue_length'].min())}): "
                    f"GPU operations start before their launch call, so the CPU and GPU clocks of this rank disagree",
                    rank=int(r),
                    count=len(g),
                    example=f"event index {int(g.index[0])} at ts {g['ts'].iloc[0]} {unit}",
                )
            )
    return out


def _describe(frame: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """pandas' ``describe()`` of ``value`` grouped by ``keys`` (MultiIndex columns ``(value, stat)``)."""
    import pandas as pd

    if frame.empty:
        cols = pd.MultiIndex.from_product([[value], list(STATS)])
        idx = pd.MultiIndex.from_arrays([[] for _ in keys], names=keys)
        return pd.DataFrame(np.zeros((0, len(STATS))), index=idx, columns=cols)
    return frame[keys + [value]].groupby(keys).describe()


def queue_length_summary(series: Mapping[int, pd.DataFrame], *, time_weighted: bool = False) -> Optional[pd.DataFrame]:
    """Statistics of the change points of each (rank, stream): ``describe()`` of ``queue_length`` (HTA's
    columns ``("queue_length", stat)``); None when ``series`` is empty. The caller's frames are not modified.

    ``time_weighted=True`` adds ``("queue_length", "time_mean")``: the mean weighted by how long each value
    holds, from the first to the last change point of the stream.
    """
    import pandas as pd

    if not series:
        return None
    parts = [df[["stream", "queue_length", "ts"]].assign(rank=int(r)) for r, df in series.items()]
    frame = pd.concat(parts, ignore_index=True)
    out = _describe(frame, ["rank", "stream"], "queue_length")
    if time_weighted:
        out[("queue_length", "time_mean")] = _time_mean(frame, ["rank", "stream"], "queue_length")
    return out


def _time_mean(frame: pd.DataFrame, keys: list[str], value: str) -> np.ndarray:
    """Per group (sorted keys), the mean of ``value`` weighted by the time to the group's next point."""
    f = frame.sort_values(keys, kind="stable")
    k = f[keys].to_numpy()
    same_next = np.r_[(k[1:] == k[:-1]).all(axis=1), False] if len(k) else np.zeros(0, dtype=bool)
    ts = f["ts"].to_numpy(dtype=np.float64)
    dur = np.where(same_next, np.r_[ts[1:], 0.0] - ts, 0.0)
    w = f[value].to_numpy(dtype=np.float64) * dur
    g = f[keys].assign(_w=w, _d=dur).groupby(keys)[["_w", "_d"]].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (g["_w"] / g["_d"]).to_numpy()


def trace_durations(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None
) -> dict[int, float]:
    """Per rank: last event start − first event start (every event of the view), in the view's unit."""
    view = _view(source, rules)
    out = {}
    for r in view.select(ranks):
        ts = view[r]["ts"]
        out[r] = float(ts.max() - ts.min()) if len(ts) else 0.0
    return out


def blocked_on_full_queue(
    series: Mapping[int, pd.DataFrame],
    durations: Mapping[int, float],
    *,
    max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
    rules: Optional[RuleSet] = None,
) -> pd.DataFrame:
    """Time each (rank, stream) spends with ``queue_length >= max_queue_length``.

    From each change point at or above the limit to the next change point of the stream (a stream still
    full at its last point: that tail is not counted). Columns ``rank``, ``stream``,
    ``duration_at_max_queue_length`` (the series' time unit), ``relative_duration_at_max_queue_length``
    (over ``durations[rank]``). Under ``rules.hta_quirks`` only the last qualifying stream of each rank is
    kept (HTA's overwrite).
    """
    import pandas as pd

    rows = []
    for r, df in series.items():
        if df.empty:
            continue
        s = df["stream"].to_numpy()
        ts = df["ts"].to_numpy(dtype=np.float64)
        q = df["queue_length"].to_numpy()
        same_next = np.r_[s[1:] == s[:-1], False]
        dur = np.where(same_next, np.r_[ts[1:], 0.0] - ts, 0.0)
        full = q >= max_queue_length
        if not full.any():
            continue
        streams, inv = np.unique(s[full], return_inverse=True)
        sums = np.bincount(inv, weights=dur[full], minlength=len(streams))
        total = float(durations.get(r, 0.0))
        picked = range(len(streams))
        if rules is not None and rules.hta_quirks:
            picked = [len(streams) - 1]
        for i in picked:
            rel = sums[i] / total if total else float("nan")
            rows.append((int(r), int(streams[i]), float(sums[i]), rel))
    out = pd.DataFrame(
        rows, columns=["rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"]
    )
    return out.astype(
        {
            "rank": np.int64,
            "stream": np.int64,
            "duration_at_max_queue_length": np.float64,
            "relative_duration_at_max_queue_length": np.float64,
        }
    )


def time_blocked_on_full_queue(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    max_queue_length: int = CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
) -> pd.DataFrame:
    """:func:`blocked_on_full_queue` of the job's own queue-length series."""
    view = _view(source, rules)
    chosen = view.select(ranks)
    return blocked_on_full_queue(
        queue_length(view, ranks=chosen),
        trace_durations(view, ranks=chosen),
        max_queue_length=max_queue_length,
        rules=view.rules,
    )


# ----------------------------------------------------------------------------------------------- memory bandwidth
def memory_kind(name: str) -> str:
    """Copy kind of a memory operation's name: ``Memset``, ``Memcpy Unknown`` (not a ``Memcpy*``, e.g.
    MTIA ``dma…``), else the first 11 characters (``Memcpy DtoH``, ``Memcpy HtoD``, ``Memcpy PtoP`` …)."""
    if name.startswith("Memset"):
        return "Memset"
    if not name.startswith("Memcpy"):
        return "Memcpy Unknown"
    return name[:11]


def memory_bandwidth(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None
) -> dict[int, pd.DataFrame]:
    """Memory bandwidth series per rank: ``{rank: frame}``, ranks without memory operations omitted.

    Frame columns: ``ts`` (float64 under HTA's rules, int64 ns natively), ``pid`` (device), ``name`` (copy
    kind), ``memory_bw_gbps`` (float64 GB/s, value from ``ts`` on). Rows: kind ascending, then time (ends
    before starts at equal times). The index is the point's position (starts, then ends).
    """
    return {r: _frame(t, None) for r, t in memory_bandwidth_tables(source, rules=rules, ranks=ranks).items()}


def memory_bandwidth_tables(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None
) -> dict[int, Table]:
    """:func:`memory_bandwidth` as tables (:class:`~holotrace.table.Table`, no pandas): the frame's columns, then its
    index as the column ``index``."""
    view = _view(source, rules)
    out = {}
    for r in view.select(ranks):
        t = _membw_rank(view, r)
        if t is not None:
            out[r] = t
    return out


def _membw_rank(view: JobView, r: int) -> Optional[Table]:
    rv = view[r]
    sel = np.flatnonzero(rv["gpu"] & (rv["kernel_type"] == int(KernelType.MEMORY)))
    if not len(sel):
        return None
    uniq, inv = np.unique(rv["name"][sel], return_inverse=True)
    labels = np.array([memory_kind(s) for s in view.names(uniq).tolist()], dtype=object)
    kinds, kinv = np.unique(labels, return_inverse=True)
    kind = kinv[inv.reshape(-1)]
    ts = rv["ts"][sel]
    dur = rv["dur"][sel].copy()
    one = 1000 // view.unit_ns  # 1 µs in the view's unit
    dur[dur == 0] = one
    bw = rv.arg("memory_bw_gbps")[sel].astype(np.float64)
    if not view.rules.hta_table:
        nbytes = rv.arg("bytes")[sel]
        derive = (bw <= 0) & (nbytes > 0) & (dur > 0)
        bw[derive] = nbytes[derive] / (dur[derive] * view.unit_ns)  # bytes per ns = GB/s
    n = len(sel)
    pts = np.concatenate([ts, ts + dur])
    delta = np.concatenate([bw, -bw])
    active = np.concatenate([np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)])
    k = np.concatenate([kind, kind])
    pid = np.concatenate([rv.at("pid", sel)] * 2)
    order = _order(pts, k, active, view.rules)
    k, delta, active = k[order], delta[order], active[order]
    value = np.empty(2 * n, dtype=np.float64)
    starts = _starts(k)
    for a, b in zip(starts.tolist(), np.r_[starts[1:], len(k)].tolist()):  # one pass per copy kind
        value[a:b] = np.cumsum(delta[a:b])
    if not view.rules.hta_quirks:
        value[_grouped_cumsum(active, k) == 0] = 0.0
    ts_out = pts[order]
    if view.rules.hta_table:
        ts_out = ts_out.astype(np.float64)
    return Table({"ts": ts_out, "pid": pid[order], "name": kinds[k], "memory_bw_gbps": value, "index": order})


def memory_bandwidth_summary(
    series: Mapping[int, pd.DataFrame], *, time_weighted: bool = False
) -> Optional[pd.DataFrame]:
    """Statistics of the points with positive bandwidth per (rank, kind): ``describe()`` of
    ``memory_bw_gbps`` (HTA's columns ``("memory_bw_gbps", stat)``); None when ``series`` is empty, an empty
    frame when no point is positive. ``time_weighted=True`` adds ``("memory_bw_gbps", "time_mean")``: the
    mean bandwidth while at least one copy of the kind runs."""
    import pandas as pd

    if not series:
        return None
    frame = pd.concat(
        [df[["name", "memory_bw_gbps", "ts"]].assign(rank=int(r)) for r, df in series.items()], ignore_index=True
    )
    pos = frame[frame["memory_bw_gbps"] > 0]
    out = _describe(pos, ["rank", "name"], "memory_bw_gbps")
    if time_weighted:
        # weights from every point (zero stretches excluded by the positive selection below)
        keys = ["rank", "name"]
        f = frame.sort_values(keys, kind="stable")
        kk = f[keys].to_numpy()
        same_next = np.r_[(kk[1:] == kk[:-1]).all(axis=1), False] if len(kk) else np.zeros(0, dtype=bool)
        ts = f["ts"].to_numpy(dtype=np.float64)
        dur = np.where(same_next & (f["memory_bw_gbps"].to_numpy() > 0), np.r_[ts[1:], 0.0] - ts, 0.0)
        g = f[keys].assign(_w=f["memory_bw_gbps"].to_numpy() * dur, _d=dur).groupby(keys)[["_w", "_d"]].sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            tm = g["_w"] / g["_d"]
        out[("memory_bw_gbps", "time_mean")] = tm.reindex(out.index).to_numpy()
    return out
