"""Idle-time breakdown per stream (spec 21).

Idle time is measured per stream, between the stream's first and last GPU
operation: every gap before an operation is put in one category:

* ``host_wait``  — the CPU had not yet started the launch call of the
  operation when the stream became free (launch start > previous end);
* ``kernel_wait`` — otherwise, a gap below ``consecutive_kernel_delay`` µs
  (launch overhead between back-to-back kernels);
* ``other``       — every other gap.

:func:`idle_breakdown` / :func:`idle_interval_stats` are holotrace's API:
gaps are measured from the latest end seen so far on the stream and are never
negative, so the categories of a stream sum to its idle time (its span minus
the union of its operations). :func:`hta_idle_time_breakdown` reproduces
HTA's ``get_idle_time_breakdown`` (gaps from the immediately preceding
operation, negative gaps summed as idle time).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis._select import gpu_activity, job_ranks
from holotrace.model.link import position_lookup

__all__ = [
    "CATEGORIES",
    "HOST_WAIT",
    "KERNEL_WAIT",
    "OTHER",
    "classify_gaps",
    "idle_breakdown",
    "idle_interval_stats",
    "hta_idle_time_breakdown",
    "HTA_COLUMNS",
    "HTA_STATS_COLUMNS",
    "HTA_KERNEL_CATEGORIES",
]

HOST_WAIT, KERNEL_WAIT, OTHER = 0, 1, 2
CATEGORIES = ("host_wait", "kernel_wait", "other")

HTA_COLUMNS = ["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]
HTA_STATS_COLUMNS = ["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]
#: categories of HTA's "S-kernelcat" selection (spec 20-analyses-common C3)
HTA_KERNEL_CATEGORIES = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events")


def classify_gaps(
    stream: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    launch_ts: np.ndarray,
    tie: np.ndarray,
    consecutive_kernel_delay: float,
    *,
    hta: bool = False,
) -> pd.DataFrame:
    """The gap before every GPU operation on its stream, and its category.

    Args:
        stream, ts, end: the operations (any order).
        launch_ts: start of each operation's CPU launch call, NaN when unknown.
        tie: tie-break key among operations with equal ``ts`` on one stream
            (event index).
        consecutive_kernel_delay: gaps strictly below this are ``kernel_wait``.
        hta: measure from the immediately preceding operation's end and keep
            negative gaps (HTA); otherwise measure from the latest end so far
            and clamp at 0.

    Returns:
        One row per operation sorted by (stream, ts, tie): ``stream``, ``gap``
        (NaN for the first operation of a stream), ``category`` (0 host_wait,
        1 kernel_wait, 2 other; the first operation is ``other``).
    """
    s, gap, cat = _gap_arrays(stream, ts, end, launch_ts, tie, consecutive_kernel_delay, hta)
    return pd.DataFrame({"stream": s, "gap": gap, "category": cat})


def _gap_arrays(stream, ts, end, launch_ts, tie, consecutive_kernel_delay: float, hta: bool):
    """:func:`classify_gaps` as plain arrays ``(stream, gap, category)``."""
    order = np.lexsort((tie, ts, stream))
    s = np.asarray(stream)[order]
    t = np.asarray(ts, dtype=np.float64)[order]
    e = np.asarray(end, dtype=np.float64)[order]
    lt = np.asarray(launch_ts, dtype=np.float64)[order]
    first = np.r_[True, s[1:] != s[:-1]] if s.size else np.empty(0, bool)
    if hta:
        prev_end = np.r_[np.nan, e[:-1]] if s.size else e
    else:
        running = pd.Series(e).groupby(np.cumsum(first)).cummax().to_numpy()
        prev_end = np.r_[np.nan, running[:-1]] if s.size else e
    prev_end = np.where(first, np.nan, prev_end)
    gap = t - prev_end
    if not hta:
        gap = np.maximum(gap, 0.0)  # NaN stays NaN
    with np.errstate(invalid="ignore"):
        host = lt > prev_end
        kernel = ~host & (gap < consecutive_kernel_delay)
    cat = np.where(host, HOST_WAIT, np.where(kernel, KERNEL_WAIT, OTHER)).astype(np.int8)
    return s, gap, cat


# --------------------------------------------------------------------------- native


def _rank_gaps(job, rank: int, consecutive_kernel_delay_us: float, streams: Optional[Sequence[int]]) -> pd.DataFrame:
    ev = job.rank(rank).events
    sel = gpu_activity(ev) & (ev["stream"].to_numpy() != -1)
    g = ev[sel]
    partner = g["partner"].to_numpy()
    launch_ts = np.full(len(g), np.nan)
    ok = partner >= 0
    launch_ts[ok] = ev["ts_ns"].to_numpy()[partner[ok]]
    gaps = classify_gaps(
        g["stream"].to_numpy(),
        g["ts_ns"].to_numpy(),
        g["end_ns"].to_numpy(),
        launch_ts,
        g["index"].to_numpy(),
        consecutive_kernel_delay_us * 1000.0,
    )
    if streams:
        gaps = gaps[np.isin(gaps["stream"].to_numpy(), list(streams))]
    gaps["gap"] = gaps["gap"] / 1000.0
    gaps.insert(0, "rank", np.int64(rank))
    return gaps


def idle_breakdown(
    job,
    *,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
) -> pd.DataFrame:
    """Idle time per rank, stream and category (holotrace schema).

    Args:
        ranks: ranks to analyse (default all).
        streams: only these streams (default every stream with GPU work).
        consecutive_kernel_delay_us: gaps strictly below this many µs that are
            not host waits are ``kernel_wait``.

    Returns:
        Columns ``rank, stream, idle_category, idle_us, idle_ratio, gaps``:
        three rows per (rank, stream), categories in the order host_wait,
        kernel_wait, other; ``idle_ratio`` is the category's share of the
        stream's idle time (0.0 when the stream never idles); ``gaps`` counts
        the gaps. The three ``idle_us`` of a stream add up to its span minus
        the union of its operations. Rows by rank, stream ascending.
    """
    parts = [_rank_gaps(job, r, consecutive_kernel_delay_us, streams) for r in job_ranks(job, ranks)]
    cols = ["rank", "stream", "idle_category", "idle_us", "idle_ratio", "gaps"]
    gaps = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["rank", "stream", "gap", "category"])
    if gaps.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(cols, [np.int64, np.int64, object, np.float64, np.float64, np.int64])})
    keys = gaps[["rank", "stream"]].drop_duplicates().sort_values(["rank", "stream"])
    full = keys.merge(pd.DataFrame({"category": np.arange(3, dtype=np.int8)}), how="cross")
    agg = gaps.groupby(["rank", "stream", "category"])["gap"].agg(idle_us="sum", gaps="count").reset_index()
    out = full.merge(agg, on=["rank", "stream", "category"], how="left")
    out["idle_us"] = out["idle_us"].fillna(0.0).astype(np.float64)
    out["gaps"] = out["gaps"].fillna(0).astype(np.int64)
    total = out.groupby(["rank", "stream"])["idle_us"].transform("sum").to_numpy()
    out["idle_ratio"] = np.where(total > 0, out["idle_us"].to_numpy() / np.where(total > 0, total, 1.0), 0.0)
    out["idle_category"] = np.asarray(CATEGORIES, dtype=object)[out["category"].to_numpy()]
    out["rank"] = out["rank"].astype(np.int64)
    out["stream"] = out["stream"].astype(np.int64)
    return out.sort_values(["rank", "stream", "category"], ignore_index=True)[cols]


def idle_interval_stats(
    job,
    *,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
) -> pd.DataFrame:
    """Statistics of the individual idle gaps per rank, stream and category.

    Returns:
        Columns ``rank, stream, idle_category, count, mean_us, std_us, min_us,
        p25_us, p50_us, p75_us, p90_us, max_us`` (sample std; linear
        percentiles), one row per category that has at least one gap.
    """
    parts = [_rank_gaps(job, r, consecutive_kernel_delay_us, streams) for r in job_ranks(job, ranks)]
    cols = ["rank", "stream", "idle_category", "count", "mean_us", "std_us", "min_us", "p25_us", "p50_us", "p75_us", "p90_us", "max_us"]
    gaps = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    gaps = gaps.dropna(subset=["gap"]) if not gaps.empty else gaps
    if gaps.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "idle_category" else (np.int64 if c in ("rank", "stream", "count") else np.float64)) for c in cols})
    grp = gaps.groupby(["rank", "stream", "category"])["gap"]
    out = grp.agg(count="count", mean_us="mean", std_us="std", min_us="min", max_us="max").reset_index()
    q = grp.quantile([0.25, 0.5, 0.75, 0.9]).unstack()
    out["p25_us"], out["p50_us"], out["p75_us"], out["p90_us"] = (q[c].to_numpy() for c in (0.25, 0.5, 0.75, 0.9))
    out["idle_category"] = np.asarray(CATEGORIES, dtype=object)[out["category"].to_numpy()]
    out["count"] = out["count"].astype(np.int64)
    out["rank"] = out["rank"].astype(np.int64)
    out["stream"] = out["stream"].astype(np.int64)
    return out[cols]


# --------------------------------------------------------------------------- HTA compat


def _hta_rank(
    df: pd.DataFrame,
    rank: int,
    streams: Optional[Sequence[int]],
    delay: float,
    with_stats: bool,
    index_zero_quirk: bool,
) -> tuple[pd.DataFrame, Optional[pd.DataFrame]]:
    stream_all = df["stream"].to_numpy()
    rows = np.flatnonzero((stream_all != -1) & df["s_cat"].isin(HTA_KERNEL_CATEGORIES).to_numpy())
    # launch start: ts of the row whose `index` is the kernel's index_correlation
    # (spec 21 quirk: index_correlation 0 is "no partner in the table" -> FIX: no launch)
    ic = df["index_correlation"].to_numpy()[rows]
    ts_all = df["ts"].to_numpy(dtype=np.float64)
    first_valid = 0 if index_zero_quirk else 1
    launch_ts = _ts_of_index(df["index"].to_numpy(), ts_all, ic, first_valid)
    stream = stream_all[rows]
    if streams is None or len(streams) == 0:
        streams = list(pd.unique(stream))
    ts = ts_all[rows]
    s_sorted, gap, cat = _gap_arrays(
        stream, ts, ts + df["dur"].to_numpy(dtype=np.float64)[rows], launch_ts,
        df["index"].to_numpy()[rows], delay, hta=True,
    )
    stream_pos = {int(s): i for i, s in enumerate(streams)}
    wanted = np.array(list(stream_pos), dtype=np.int64)
    sel = np.isin(s_sorted, wanted)
    s_sorted, gap, cat = s_sorted[sel], gap[sel], cat[sel]
    if not len(s_sorted):
        return pd.DataFrame(columns=HTA_COLUMNS), (pd.DataFrame(columns=HTA_STATS_COLUMNS) if with_stats else None)
    # one group per (stream in the asked order, category), as HTA's groupby sum: NaN gaps add 0
    by_value = np.argsort(wanted, kind="stable")
    order_of = np.array(list(stream_pos.values()), dtype=np.int64)  # a stream's place in ``streams``
    pos = order_of[by_value[np.searchsorted(wanted[by_value], s_sorted)]]
    keys, inv = np.unique(pos.astype(np.int64) * 3 + cat, return_inverse=True)
    idle_time = np.bincount(inv, weights=np.nan_to_num(gap, nan=0.0), minlength=len(keys))
    key_pos = keys // 3
    per_stream = np.bincount(key_pos, weights=idle_time)[key_pos]
    stream_at = np.empty(len(streams), dtype=np.int64)
    stream_at[order_of] = wanted
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = idle_time / per_stream
    out = pd.DataFrame({
        "rank": np.full(len(keys), rank, dtype=np.int64),
        "stream": stream_at[key_pos],
        "idle_category": np.asarray(CATEGORIES, dtype=object)[keys % 3],
        "idle_time": np.round(idle_time, 2),
        "idle_time_ratio": np.round(ratio, 2),
    })
    stats = None
    if with_stats:
        gaps = pd.DataFrame({"stream": s_sorted, "gap": gap, "category": cat})
        st = gaps.groupby(["stream", "category"])["gap"].describe().reset_index()
        st["pos"] = st["stream"].map(stream_pos)
        st = st.sort_values(["pos", "category"], kind="stable", ignore_index=True)
        idx = pd.Index(np.asarray(CATEGORIES, dtype=object)[st["category"].to_numpy()], name="idle_category")
        st["rank"] = np.int64(rank)
        st["stream"] = st["stream"].astype(np.int64)
        stats = st[HTA_STATS_COLUMNS].round(2).set_index(idx)
    return out, stats


def _ts_of_index(index: np.ndarray, ts: np.ndarray, wanted: np.ndarray, first_valid: int) -> np.ndarray:
    """``ts`` of the row whose ``index`` is each of ``wanted`` (the first such row); NaN below ``first_valid`` or absent."""
    out = np.full(len(wanted), np.nan)
    ok = wanted >= first_valid
    if not len(index):
        return out
    lo, hi = int(index.min()), int(index.max())
    if lo >= 0 and hi < 4 * len(index) + 1024 and np.bincount(index).max() <= 1:
        pos = position_lookup(index)  # dense and unique (holotrace's tables): a lookup array
        inside = np.flatnonzero(ok & (wanted >= 0) & (wanted <= hi))
        p = pos[wanted[inside]]
        out[inside] = np.where(p >= 0, ts[np.maximum(p, 0)], np.nan)
        return out
    launch = pd.Series(ts, index=index)
    launch = launch[~launch.index.duplicated(keep="first")]
    return np.where(ok, launch.reindex(wanted).to_numpy(), np.nan)


def hta_idle_time_breakdown(
    frames: Mapping[int, pd.DataFrame],
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    show_idle_interval_stats: bool = False,
    consecutive_kernel_delay: float = 30,
    *,
    index_zero_quirk: bool = False,
) -> tuple[pd.DataFrame, Optional[pd.DataFrame]]:
    """HTA's ``get_idle_time_breakdown`` on HTA-shaped per-rank tables.

    Args:
        frames: rank → HTA table (needs ``index, ts, dur, stream,
            index_correlation, s_cat``).
        ranks: ``None``/``[]`` → ``[0]``; processed in the given order. An
            unknown rank raises :class:`holotrace.errors.RankNotFoundError`.

    Returns:
        ``(idle_df, stats_df or None)`` with HTA's columns and row order.
        Fixes over HTA (spec 21 §5): a rank without GPU kernels gives no rows
        instead of ``ValueError``; the index is renumbered ``0..n-1`` over all
        ranks; ``index_correlation == 0`` means "no launch" (HTA looks up the
        event with index 0); ``stream`` is int64 whatever ``visualize`` is.
    """
    from holotrace.errors import RankNotFoundError

    if not ranks:
        ranks = [0]
    outs, stats = [], []
    for rank in ranks:
        if rank not in frames:
            raise RankNotFoundError(f"rank {rank} is not in this job (ranks: {sorted(frames)})")
        o, s = _hta_rank(frames[rank], rank, streams, consecutive_kernel_delay, show_idle_interval_stats, index_zero_quirk)
        outs.append(o)
        if s is not None:
            stats.append(s)
    outs = [o for o in outs if not o.empty]
    idle = pd.concat(outs, ignore_index=True) if outs else pd.DataFrame(columns=HTA_COLUMNS)
    idle = idle.astype({"rank": np.int64, "stream": np.int64, "idle_category": object,
                        "idle_time": np.float64, "idle_time_ratio": np.float64})
    if not show_idle_interval_stats:
        return idle, None
    st = pd.concat([x for x in stats if not x.empty]) if any(not x.empty for x in stats) else pd.DataFrame(
        columns=HTA_STATS_COLUMNS, index=pd.Index([], name="idle_category", dtype=object))
    st = st.astype({"rank": np.int64, "stream": np.int64, **{c: np.float64 for c in HTA_STATS_COLUMNS[2:]}})
    return idle, st
