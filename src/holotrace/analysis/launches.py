"""Kernel launch statistics: CPU launch time, GPU time and launch delay per launch (spec 23 §1).

:func:`launch_stats` pairs launch calls with the GPU work they queued, per rank of a job view. The
rule set chooses the launch calls (``rules.launch_apis`` and, with memory events,
``rules.memory_launch_apis``) and the pairing:

* ``rules.hta_quirks`` (HTA 0.6.1): ``C`` = the correlations of the launch calls; the CPU side is
  every stream −1 row with a correlation in ``C``, the GPU side every stream-bearing row with one;
  the two are inner-joined on correlation (CPU rows in order, each followed by its GPU matches).
* otherwise (strict): the CPU side is the launch calls themselves, each paired with its one linked
  GPU partner (``partner``) when that is a kernel, memcpy or memset.

Definitions (µs): ``cpu_duration`` = launch call duration, ``gpu_duration`` = GPU work duration,
``launch_delay`` = ``max(0, gpu.ts - (cpu.ts + cpu.dur))``. Flags: *short kernel*
``cpu_duration <= runtime_cutoff and gpu_duration < cpu_duration``; *runtime outlier*
``cpu_duration > runtime_cutoff``; *launch-delay outlier* ``launch_delay > launch_delay_cutoff``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

from holotrace.exec.pool import thread_map
from holotrace.model import classify
from holotrace.model.classify import RuleSet
from holotrace.model.link import isin_ids
from holotrace.model.view import JobView, resolve, wide
from holotrace.order_stats import median, percentile
from holotrace.table import Table

__all__ = [
    "STATS_COLUMNS",
    "FLAG_COLUMNS",
    "DETAIL_COLUMNS",
    "RankLaunches",
    "launch_stats",
    "launch_stats_table",
    "rank_launches",
    "rank_launches_table",
    "launch_summary",
    "launch_summary_table",
    "all_launches",
    "all_launches_table",
    "worst_launches",
    "worst_launches_table",
    "delay_overview",
]

STATS_COLUMNS = ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
FLAG_COLUMNS = ["short_kernel", "runtime_outlier", "launch_delay_outlier"]
DETAIL_COLUMNS = ["launch", "kernel", "stream", "iteration", "ts"]
SUMMARY_COLUMNS = [
    "rank",
    "launches",
    "cpu_mean_us",
    "cpu_max_us",
    "gpu_mean_us",
    "delay_median_us",
    "delay_p95_us",
    "delay_max_us",
    "short_kernels",
    "runtime_outliers",
    "launch_delay_outliers",
]


def launch_stats(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
    details: bool = False,
) -> dict:
    """:func:`launch_stats_table` as pandas frames: ``{rank: frame}``."""
    stats = launch_stats_table(
        source,
        rules=rules,
        ranks=ranks,
        runtime_cutoff=runtime_cutoff,
        launch_delay_cutoff=launch_delay_cutoff,
        include_memory_events=include_memory_events,
        details=details,
    )
    return {r: t.to_pandas(copy=False) for r, t in stats.items()}


def launch_stats_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
    details: bool = False,
) -> dict[int, Table]:
    """Launch statistics, one table per rank.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job).
        ranks: ranks to analyse (default: all, ascending).
        runtime_cutoff, launch_delay_cutoff: µs thresholds of the flags.
        include_memory_events: also pair memcpy/memset launch calls.
        details: also give ``launch`` (call name), ``kernel`` (GPU work name), ``stream``,
            ``iteration`` (of the launch call) and ``ts`` (µs of the call from the job's first event).

    Returns:
        ``{rank: table}`` (in ``ranks`` order) with columns ``correlation, cpu_duration,
        gpu_duration, launch_delay`` (float64 µs), the three flags, then the detail columns; one row
        per (launch, GPU work) pair.
    """
    view = resolve(source, rules)
    rules = view.rules
    chosen = view.select(ranks)
    is_api = _api_flags(view, include_memory_events)
    origin = _origin(view) if details else 0

    def one(rank: int) -> Table:
        v = view[rank]
        cpu, gpu = _pairs(view, v, is_api)
        return _table(view, v, cpu, gpu, runtime_cutoff, launch_delay_cutoff, origin if details else None)

    return thread_map(one, chosen)


class RankLaunches(NamedTuple):
    """One rank's launches (:func:`rank_launches_table`): ``rows`` without the detail columns, ``worst`` (with
    them, None when the rank has no launch) and ``worst_rows``, the positions of ``worst`` in ``rows``."""

    rows: Table
    worst: Optional[Table]
    worst_rows: np.ndarray


def rank_launches(
    view: JobView,
    rank: int,
    *,
    top: int,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
):
    """:func:`rank_launches_table` as pandas frames ``(rows, worst)``: ``worst`` indexed by its positions in
    ``rows`` (as :func:`worst_launches` leaves them), None for a rank without launches."""
    got = rank_launches_table(
        view,
        rank,
        top=top,
        runtime_cutoff=runtime_cutoff,
        launch_delay_cutoff=launch_delay_cutoff,
        include_memory_events=include_memory_events,
    )
    rows = got.rows.to_pandas(copy=False)
    if got.worst is None:
        return rows, None
    worst = got.worst.to_pandas(copy=False)
    if not len(got.worst_rows):  # the empty frame of a rank with launches: its names' column type, as a slice
        return rows, worst.astype({"launch": "str", "kernel": "str"})
    return rows, worst.set_axis(got.worst_rows, axis=0)


def rank_launches_table(
    view: JobView,
    rank: int,
    *,
    top: int,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
) -> RankLaunches:
    """One rank's launches without the detail columns, and its ``top`` worst delayed launches with them: the table
    of :func:`launch_stats_table` and the rows :func:`worst_launches_table` picks from its ``details=True`` table
    (by ``launch_delay``, flagged ``launch_delay_outlier``), without decoding the names of every launch. A rank
    without launches gives the empty ``details=True`` table as ``rows`` and None as ``worst``."""
    v = view[rank]
    cpu, gpu = _pairs(view, v, _api_flags(view, include_memory_events))
    origin = _origin(view)
    none = np.empty(0, dtype=np.int64)
    if not len(cpu):
        return RankLaunches(_table(view, v, cpu, gpu, runtime_cutoff, launch_delay_cutoff, origin), None, none)
    rows = _table(view, v, cpu, gpu, runtime_cutoff, launch_delay_cutoff, None)
    ts = view.us(v["ts"].take(cpu) + v.clock_offset - origin)  # the detail column worst_launches breaks ties by
    pos = np.flatnonzero(rows["launch_delay_outlier"])
    value = rows["launch_delay"][pos]
    pick = _worst(pos, value, ts[pos], max(int(top), 0)).astype(np.int64)
    worst = _table(view, v, cpu[pick], gpu[pick], runtime_cutoff, launch_delay_cutoff, origin)
    return RankLaunches(rows, worst, pick)


def _worst(pos: np.ndarray, value: np.ndarray, ts: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` of ``pos`` by ``value`` descending (NaN last), then ``ts``: only the candidates that can be
    among them (every value at least the k-th largest, ties included) are sorted."""
    if k < len(pos):
        w = np.nan_to_num(value)
        real = ~np.isnan(value)
        n_real = np.count_nonzero(real)
        if n_real >= k:
            keep = np.flatnonzero(real & (w >= _kth_largest(w if n_real == len(w) else w[real], k))) if k else []
            pos, value, ts = pos[keep], value[keep], ts[keep]
    return pos[np.lexsort((ts, -np.nan_to_num(value), np.isnan(value)))[:k]]


def _kth_largest(x: np.ndarray, k: int):
    """The ``k``-th largest of ``x`` (``1 <= k <= len(x)``, no NaN), with its multiplicity: for a small ``k`` of many
    values, partitioned among the values at least the ``k``-th largest of their blocks' maxima (at least ``k`` values,
    every one of the ``k`` largest among them)."""
    block = 256
    m = len(x) // block
    if k <= 64 and m >= max(16, k):
        tops = x[: m * block].reshape(m, block).max(axis=1)
        x = x[x >= np.partition(tops, m - k)[m - k]]
    return np.partition(x, len(x) - k)[len(x) - k]


def _api_flags(view: JobView, include_memory_events: bool) -> np.ndarray:
    """One flag per string of the job (and False for id -1): a launch call under the view's rules."""
    rules = view.rules
    apis = set(rules.launch_apis) | (set(rules.memory_launch_apis) if include_memory_events else set())
    is_api = np.zeros(len(view.strings) + 1, dtype=bool)
    is_api[view.name_ids(apis)] = True
    return is_api


def _pairs(view: JobView, v, is_api: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the rank's (launch call, GPU work) pairs under the view's rules."""
    return (_hta_pairs if view.rules.hta_quirks else _linked_pairs)(v, is_api[v["name"]])


def _table(view, v, cpu, gpu, runtime_cutoff, launch_delay_cutoff, origin) -> Table:
    """The table of the pairs ``(cpu, gpu)`` of one rank (see :func:`launch_stats`); the detail columns unless
    ``origin`` is None."""
    ts, dur = v["ts"], v["dur"]
    c_dur = dur.take(cpu)
    cpu_dur, gpu_dur = view.us(c_dur), view.us(dur.take(gpu))
    delay = view.us(np.clip((ts.take(gpu) - ts.take(cpu)) - c_dur, 0, None))
    cols = {
        "correlation": wide(v["correlation"].take(cpu)),
        "cpu_duration": cpu_dur,
        "gpu_duration": gpu_dur,
        "launch_delay": delay,
        "short_kernel": (cpu_dur <= runtime_cutoff) & (gpu_dur < cpu_dur),
        "runtime_outlier": cpu_dur > runtime_cutoff,
        "launch_delay_outlier": delay > launch_delay_cutoff,
    }
    if origin is not None:
        cols.update(
            {
                "launch": view.names(v["name"].take(cpu)),
                "kernel": view.names(v["name"].take(gpu)),
                "stream": wide(v["stream"].take(gpu)),
                "iteration": wide(v["iteration"].take(cpu)),
                "ts": view.us(ts.take(cpu) + v.clock_offset - origin),
            }
        )
    return Table(cols)


_GPU_WORK = np.zeros(256, dtype=bool)  # by Kind code (int8: negative codes index from the end, all False)
_GPU_WORK[[int(k) for k in classify.GPU_ACTIVITY]] = True


def _origin(view: JobView) -> int:
    """The job's first event on the common clock (the view's unit)."""
    return view.first_ts()


def _linked_pairs(v, is_launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Strict pairing: each launch call with its linked kernel/memcpy/memset."""
    cpu = np.flatnonzero(is_launch)
    partner = v["partner"].take(cpu)
    cpu = cpu[(partner >= 0) & (v["correlation"].take(cpu) >= 0)]
    gpu = v["partner"].take(cpu)
    keep = _GPU_WORK[v["kind"].take(gpu)]
    return cpu[keep], gpu[keep]


def _hta_pairs(v, is_launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HTA's pairing: every stream −1 row × every stream row sharing a launch call's correlation."""
    corr, stream = v["correlation"], v["stream"]
    cset = corr[is_launch]
    on_cpu = stream == -1
    wanted = isin_ids(corr, cset)
    cpu = np.flatnonzero(on_cpu & wanted)
    gpu = np.flatnonzero(~on_cpu & wanted)
    return _join_on(corr.take(cpu), corr.take(gpu), cpu, gpu)


def _join_on(c_key: np.ndarray, g_key: np.ndarray, cpu: np.ndarray, gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inner join of CPU and GPU rows on their keys, as ``DataFrame.merge(how="inner")``: CPU rows in
    order, each followed by its GPU matches in their order."""
    right = _unique_lookup(g_key, c_key)
    if right is not None:  # one GPU row per correlation (the usual case)
        left = np.flatnonzero(right >= 0)
        return cpu.take(left), gpu.take(right.take(left))
    order = np.argsort(g_key, kind="stable")
    g_sorted = g_key[order]
    lo = np.searchsorted(g_sorted, c_key, side="left")
    n = np.searchsorted(g_sorted, c_key, side="right") - lo
    left = np.repeat(np.arange(len(n)), n)
    # positions lo .. lo+n-1 of every CPU row, in order
    first = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) if len(n) else np.empty(0, dtype=np.int64)
    right = order[first + np.arange(len(left))] if len(left) else np.empty(0, dtype=np.int64)
    return cpu.take(left), gpu.take(right)


def _unique_lookup(keys: np.ndarray, queries: np.ndarray) -> Optional[np.ndarray]:
    """Position of each query in ``keys`` (−1 if absent), or None when a key repeats."""
    if not len(keys) or not len(queries):
        return np.full(len(queries), -1, dtype=np.int64)
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo > 8 * len(keys) + 1024:  # sparse keys: a sorted lookup
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        if (sk[1:] == sk[:-1]).any():
            return None
        at = np.minimum(np.searchsorted(sk, queries), len(sk) - 1)
        return np.where(sk[at] == queries, order[at], -1).astype(np.int64)
    pos = np.full(hi - lo + 1, -1, dtype=np.int64)
    pos[keys - lo] = np.arange(len(keys))
    if np.count_nonzero(pos >= 0) != len(keys):
        return None
    inside = (queries >= lo) & (queries <= hi)
    out = np.full(len(queries), -1, dtype=np.int64)
    out[inside] = pos[queries[inside] - lo]
    return out


def launch_summary(stats: dict):
    """:func:`launch_summary_table` as a pandas frame."""
    return launch_summary_table(stats).to_pandas()


def launch_summary_table(stats: dict) -> Table:
    """One row per rank: launch count, duration statistics and flag counts.

    Args:
        stats: output of :func:`launch_stats_table` (or the frames of :func:`launch_stats`).

    Returns:
        Columns ``rank, launches, cpu_mean_us, cpu_max_us, gpu_mean_us, delay_median_us,
        delay_p95_us, delay_max_us, short_kernels, runtime_outliers, launch_delay_outliers``
        (NaN statistics and zero counts for a rank without launches).
    """
    rows = []
    for r, df in stats.items():
        n = len(df)
        cpu, gpu, dl = (np.asarray(df[c], dtype=np.float64) for c in ("cpu_duration", "gpu_duration", "launch_delay"))
        stat = lambda f, x, n=n: float(f(x)) if n else np.nan  # noqa: E731
        rows.append(
            {
                "rank": int(r),
                "launches": n,
                "cpu_mean_us": stat(np.mean, cpu),
                "cpu_max_us": stat(np.max, cpu),
                "gpu_mean_us": stat(np.mean, gpu),
                "delay_median_us": stat(median, dl),
                "delay_p95_us": stat(lambda x: percentile(x, 95), dl),
                "delay_max_us": stat(np.max, dl),
                "short_kernels": int(np.count_nonzero(np.asarray(df["short_kernel"]))),
                "runtime_outliers": int(np.count_nonzero(np.asarray(df["runtime_outlier"]))),
                "launch_delay_outliers": int(np.count_nonzero(np.asarray(df["launch_delay_outlier"]))),
            }
        )
    return Table.from_records(rows, SUMMARY_COLUMNS)


def all_launches(stats: dict):
    """The per-rank frames of :func:`launch_stats` stacked, with a leading ``rank`` column (ranks in key order): the
    frame form of :func:`all_launches_table` (pandas' concat of the frames, which keeps their text columns as they
    are)."""
    import pandas as pd

    parts = [d.assign(rank=np.int64(r)) for r, d in stats.items()]
    if not parts:
        return all_launches_table({}).to_pandas(object_text=True)
    df = pd.concat(parts, ignore_index=True)
    return df[["rank"] + [c for c in df.columns if c != "rank"]]


def all_launches_table(stats: dict) -> Table:
    """The per-rank tables of :func:`launch_stats_table` stacked, with a leading ``rank`` column (ranks in key
    order); no rank: the columns ``rank``, the statistics and the flags, empty, of dtype object."""
    if not stats:
        return Table({c: np.empty(0, dtype=object) for c in ["rank", *STATS_COLUMNS, *FLAG_COLUMNS]})
    parts = [(int(r), Table.of(d)) for r, d in stats.items()]
    out = {"rank": np.concatenate([np.full(len(t), r, dtype=np.int64) for r, t in parts])}
    for c in parts[0][1].columns:
        out[c] = np.concatenate([t[c] for _, t in parts])
    return Table(out)


def _worst_rows(launches, by: str, flag: str, top: int) -> np.ndarray:
    """Positions of the ``top`` launches flagged ``flag``, largest ``by`` first (ties: rank, then start time)."""
    pos = np.flatnonzero(np.asarray(launches[flag], dtype=bool))
    keys = [np.asarray(launches[c])[pos] for c in ("ts", "rank") if c in launches.columns]
    value = np.asarray(launches[by], dtype=np.float64)[pos]
    # a stable sort on (value descending, NaN last; rank; start), positions picked before any row is copied
    order = np.lexsort((*keys, -np.nan_to_num(value), np.isnan(value)))
    return pos[order[: max(int(top), 0)]]


def worst_launches(launches, by: str, flag: str, top: int):
    """The ``top`` launches of a frame flagged ``flag``, largest ``by`` first (ties: rank, then start time; a frame
    of one rank's launches may leave out ``rank``), with their index (:func:`worst_launches_table` of a frame)."""
    return launches.iloc[_worst_rows(launches, by, flag, top)]


def worst_launches_table(launches: Table, by: str, flag: str, top: int) -> Table:
    """The ``top`` launches of a table flagged ``flag``, largest ``by`` first (ties: rank, then start time)."""
    return launches.take(_worst_rows(launches, by, flag, top))


def delay_overview(launches) -> dict:
    """Launch delay over every launch of :func:`all_launches_table` (or its frame): count, median, p95 (µs) and
    outliers."""
    d = np.asarray(launches["launch_delay"], dtype=np.float64)
    if not len(d):
        return {"launches": 0, "median_us": float("nan"), "p95_us": float("nan"), "outliers": 0}
    return {
        "launches": int(len(d)),
        "median_us": median(d),
        "p95_us": float(percentile(d, 95)),
        "outliers": int(np.count_nonzero(np.asarray(launches["launch_delay_outlier"]))),
    }
