"""Idle-time breakdown per stream (spec 21).

Idle time is measured per stream, between the stream's first and last GPU operation: every gap
before an operation is put in one category:

* ``host_wait``  — the CPU had not yet started the launch call of the operation when the stream
  became free (launch start > previous end);
* ``kernel_wait`` — otherwise, a gap below ``consecutive_kernel_delay_us`` (launch overhead between
  back-to-back kernels);
* ``other``       — every other gap (and the stream's first operation, which has no gap).

One implementation, following the rule set:

* holotrace's rules: the operations are kernels, memcpy and memset on a stream; a gap is measured
  from the latest end seen so far on the stream and is never negative, so the categories of a
  stream sum to its idle time (its span minus the union of its operations);
* HTA's rules (``rules.hta_table``): the operations are the stream rows of HTA's kernel categories
  (:data:`~holotrace.model.classify.HTA_KERNEL_CATEGORIES`); a gap is measured from the immediately
  preceding operation's end and negative gaps count; streams are listed in order of first
  appearance (or as asked);
* ``rules.hta_quirks``: HTA's lookup of ``index_correlation == 0`` as the event with index 0 (which
  makes that event's start the "launch"); otherwise such an operation has no known launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from holotrace.analysis.grouped import group_sum
from holotrace.model.classify import HTA_KERNEL_CATEGORIES, RuleSet
from holotrace.model.view import JobView, RankView, resolve
from holotrace.order_stats import percentile
from holotrace.table import Table

__all__ = [
    "CATEGORIES",
    "HOST_WAIT",
    "KERNEL_WAIT",
    "OTHER",
    "idle_breakdown",
    "idle_breakdown_table",
    "idle_interval_stats",
    "idle_interval_stats_table",
    "idle_by_rank",
    "idle_by_rank_table",
]

HOST_WAIT, KERNEL_WAIT, OTHER = 0, 1, 2
CATEGORIES = ("host_wait", "kernel_wait", "other")
_CATEGORY_NAMES = np.asarray(CATEGORIES, dtype=object)
_QUANTILES = (25.0, 50.0, 75.0, 90.0)


def _operation_rows(view: JobView, v: RankView, rules: RuleSet) -> np.ndarray:
    """Rows of the operations whose gaps are measured (see the module docstring)."""
    rows = v.rows_where("gpu", True)
    if rules.hta_table:
        lut = np.zeros(len(view.strings) + 1, dtype=bool)  # per category id; id −1 reads the last entry
        lut[view.name_ids(HTA_KERNEL_CATEGORIES)] = True
        return rows[lut[v["cat"][rows]]]
    return rows[v["stream"][rows] != -1]


def _stream_rows(
    rows: np.ndarray, stream: np.ndarray, streams: Optional[Sequence[int]], rules: RuleSet
) -> list[tuple[int, np.ndarray]]:
    """``(stream, its rows)`` of the streams reported, in order: as asked (HTA) or ascending (holotrace); by
    default every stream with operations (HTA: in order of first appearance)."""
    found: list[tuple[int, np.ndarray]] = []
    while len(rows) and len(found) < 16:  # a rank has a few streams: peel them off in order of appearance
        first = stream == stream[0]
        found.append((int(stream[0]), rows[first]))
        rows, stream = rows[~first], stream[~first]
    if len(rows):
        _, at, inv = np.unique(stream, return_index=True, return_inverse=True)
        found += [(int(stream[at[k]]), rows[inv.reshape(-1) == k]) for k in np.argsort(at).tolist()]
    if streams:
        have = dict(found)
        asked = list(dict.fromkeys(int(x) for x in streams))
        return [(x, have[x]) for x in (asked if rules.hta_table else sorted(asked)) if x in have]
    return found if rules.hta_table else sorted(found, key=lambda x: x[0])


def _stream_gaps(
    view: JobView, v: RankView, rules: RuleSet, streams: Optional[Sequence[int]], delay_us: float
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(stream, gap, category)`` of each reported stream: the gap before each operation but the first
    (which has none and counts as ``other``), operations by start, then event index; gaps in the view's unit.
    Computed once per rank view for the breakdown and the interval statistics."""
    key = ("stream_gaps", rules.hta_table, rules.hta_quirks, None if streams is None else tuple(streams), delay_us)
    return v.derived(key, lambda: _gaps_of_streams(view, v, rules, streams, delay_us))


def _gaps_of_streams(
    view: JobView, v: RankView, rules: RuleSet, streams: Optional[Sequence[int]], delay_us: float
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    rows = _operation_rows(view, v, rules)
    if not len(rows):
        return []
    ts, end, index, partner = v["ts"], v["end"], v["index"], v["partner"]
    stream = v["stream"][rows]
    zero = -1
    if rules.hta_quirks:  # HTA reads index_correlation 0 as the event with index 0
        at_zero = np.flatnonzero(index == 0)
        zero = int(at_zero[0]) if len(at_zero) else -1
    delay = delay_us * 1000.0 / view.unit_ns
    out = []
    for s, idx in _stream_rows(rows, stream, streams, rules):
        t = ts[idx]
        if not (t[1:] > t[:-1]).all():  # not strictly by start: by start, then event index
            ix = index[idx]
            if not ((t[1:] >= t[:-1]).all() and (ix[1:] > ix[:-1]).all()):
                idx = idx[np.lexsort((ix, t))]
                t = ts[idx]
        e = end[idx]
        prev = e[:-1] if rules.hta_table else np.maximum.accumulate(e)[:-1]
        gap = (t[1:] - prev).astype(np.float64, copy=False)
        if not rules.hta_table:
            np.maximum(gap, 0, out=gap)
        p = partner[idx[1:]]
        if zero >= 0:
            p = np.where(v["index_correlation"][idx[1:]] == 0, zero, p)
        host = (p >= 0) & (ts[p] > prev)  # no known launch: no host wait
        cat = np.full(len(gap), OTHER, dtype=np.int8)
        cat[gap < delay] = KERNEL_WAIT
        cat[host] = HOST_WAIT
        gap.flags.writeable = cat.flags.writeable = False  # kept on the rank view
        out.append((s, gap, cat))
    return out


def idle_breakdown(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
):
    """:func:`idle_breakdown_table` as a pandas frame."""
    return idle_breakdown_table(
        source, rules=rules, ranks=ranks, streams=streams, consecutive_kernel_delay_us=consecutive_kernel_delay_us
    ).to_pandas(object_text=True)


def idle_breakdown_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
) -> Table:
    """Idle time per rank, stream and category.

    Args:
        source: a loaded :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job); see the module docstring.
        ranks: ranks to analyse, in this order (default all, ascending).
        streams: only these streams (default every stream with operations).
        consecutive_kernel_delay_us: gaps strictly below this many µs that are not host waits are
            ``kernel_wait``.

    Returns:
        Columns ``rank, stream, idle_category, idle_us, idle_ratio, gaps, operations``: three rows per
        (rank, stream), categories in the order host_wait, kernel_wait, other; ``idle_ratio`` is the
        category's share of the stream's idle time (when the stream's idle time is 0: 0.0, NaN under
        HTA's rules); ``gaps`` counts the gaps, ``operations`` the operations whose preceding gap is
        in the category (the first one, which has none, counts under ``other``). Under holotrace's
        rules the three ``idle_us`` of a stream add up to its span minus the union of its operations.
    """
    view = resolve(source, rules)
    rules = view.rules
    keys, idle, gaps = [], [], []
    chosen = view.select(ranks)
    for rank in chosen:  # ~1 ms a rank of 200k events: threads only add overhead
        for s, gap, cat in _stream_gaps(view, view[rank], rules, streams, consecutive_kernel_delay_us):
            keys.append((rank, s))
            masks = [cat == c for c in range(3)]  # three categories: masks beat bincount here
            idle.append([gap[m].sum() for m in masks])
            gaps.append([np.count_nonzero(m) for m in masks])
    ops = np.array(gaps, dtype=np.int64).reshape(-1, 3) + [0, 0, 1]  # the first operation of a stream: other
    n = len(keys)
    key = np.array(keys, dtype=np.int64).reshape(n, 2)
    idle_us = view.us(np.array(idle, dtype=np.float64).reshape(n, 3))
    total = idle_us.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(total != 0, idle_us / np.where(total != 0, total, 1.0), np.nan if rules.hta_table else 0.0)
    return Table(
        {
            "rank": np.repeat(key[:, 0], 3),
            "stream": np.repeat(key[:, 1], 3),
            "idle_category": np.tile(_CATEGORY_NAMES, n),
            "idle_us": idle_us.reshape(-1),
            "idle_ratio": ratio.reshape(-1),
            "gaps": np.array(gaps, dtype=np.int64).reshape(-1),
            "operations": ops.reshape(-1),
        }
    )


_STATS_COLUMNS = [
    "rank",
    "stream",
    "idle_category",
    "count",
    "mean_us",
    "std_us",
    "min_us",
    "p25_us",
    "p50_us",
    "p75_us",
    "p90_us",
    "max_us",
]


def idle_interval_stats(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
):
    """:func:`idle_interval_stats_table` as a pandas frame."""
    return idle_interval_stats_table(
        source, rules=rules, ranks=ranks, streams=streams, consecutive_kernel_delay_us=consecutive_kernel_delay_us
    ).to_pandas(object_text=True)


def idle_interval_stats_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    streams: Optional[Sequence[int]] = None,
    consecutive_kernel_delay_us: float = 30.0,
) -> Table:
    """Statistics of the individual idle gaps per rank, stream and category (arguments of :func:`idle_breakdown`).

    Returns:
        Columns ``rank, stream, idle_category, count, mean_us, std_us, min_us, p25_us, p50_us, p75_us,
        p90_us, max_us`` (sample std, NaN below two gaps; linear percentiles), one row per category with
        at least one operation (a stream's single first operation gives ``other`` with ``count`` 0),
        rows in the order of :func:`idle_breakdown`.
    """
    view = resolve(source, rules)
    rules = view.rules
    out = []
    chosen = view.select(ranks)
    for rank in chosen:  # ~1 ms a rank of 200k events: threads only add overhead
        for s, gap, cat in _stream_gaps(view, view[rank], rules, streams, consecutive_kernel_delay_us):
            g = view.us(gap)
            # a few groups (categories 0-2, those present and OTHER): numpy's reductions, as pandas' describe
            for c in sorted({*np.flatnonzero(np.bincount(cat, minlength=3)).tolist(), OTHER}):
                x = g[cat == c]
                out.append((rank, s, CATEGORIES[c], len(x), *_describe(x)))
    cols = dict(zip(_STATS_COLUMNS, zip(*out))) if out else {c: () for c in _STATS_COLUMNS}
    return Table(
        {
            c: np.array(
                v,
                dtype=object if c == "idle_category" else np.int64 if c in ("rank", "stream", "count") else np.float64,
            )
            for c, v in cols.items()
        }
    )


def _describe(x: np.ndarray) -> tuple[float, ...]:
    """mean, std, min, p25, p50, p75, p90, max of ``x`` (NaN where undefined)."""
    n = len(x)
    if not n:
        return (np.nan,) * 8
    mean = x.sum() / n
    std = float(np.sqrt(((mean - x) ** 2).sum() / (n - 1))) if n > 1 else np.nan
    q = percentile(x, _QUANTILES)  # (numpy's values, without numpy.ma's import)
    return (mean, std, x.min(), *q.tolist(), x.max())


def idle_by_rank(breakdown):
    """:func:`idle_by_rank_table` as a pandas frame."""
    return idle_by_rank_table(breakdown).to_pandas()


def idle_by_rank_table(breakdown) -> Table:
    """Idle time per rank summed over its streams, and each category's percent of it.

    Args:
        breakdown: output of :func:`idle_breakdown_table` (or the frame of :func:`idle_breakdown`).

    Returns:
        Columns ``rank, idle_us, host_wait_pctg, kernel_wait_pctg, other_pctg`` (0 % when a rank never
        idles), one row per rank ascending. A category's time is pandas' compensated sum over the streams,
        the rank's total the plain sum of its three categories.
    """
    b = Table.of(breakdown)
    ranks, rank_code = np.unique(np.asarray(b["rank"], dtype=np.int64), return_inverse=True)
    cat = np.asarray(b["idle_category"], dtype=object)
    per = np.zeros((len(CATEGORIES), len(ranks)))
    for i, c in enumerate(CATEGORIES):
        m = cat == c
        per[i] = group_sum(rank_code.reshape(-1)[m], np.asarray(b["idle_us"], dtype=np.float64)[m], len(ranks))
    total = (per[0] + per[1]) + per[2]
    safe = np.where(total > 0, total, 1.0)
    out = {"rank": ranks.astype(np.int64), "idle_us": total}
    for i, c in enumerate(CATEGORIES):
        out[f"{c}_pctg"] = np.where(total > 0, 100.0 * per[i] / safe, 0.0)
    return Table(out)
