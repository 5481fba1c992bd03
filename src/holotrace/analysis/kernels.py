"""GPU kernel breakdown: time by kernel type and the top kernels (spec 20 §2).

* :func:`type_breakdown` — wall time during which each combination of kernel types
  (``COMPUTATION``, ``COMMUNICATION``, ``MEMORY``) runs, per rank or summed over ranks;
* :func:`kernel_stats` — per rank and type, the top kernels by total time with the rest folded
  into ``others`` (:func:`holotrace.analysis.topk.top_k`, same rules);
* :func:`top_kernels` — the GPU operations with the most total time over the job;
* :func:`rank_distribution` — for the kernels with the most total time over the job, the per-rank
  duration distribution: the view that exposes a straggler rank.

Each takes a job or a :class:`~holotrace.model.view.JobView` and a rule set. Which events are GPU
work, their times and kernel types come from the view; ``rules.hta_table`` also selects HTA's
definitions: elementary segments of the type sweep truncated to whole µs, and HTA's top-k cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from holotrace.analysis import gpu_union, intervals
from holotrace.analysis.grouped import (
    group_count,
    group_extremes,
    group_mean,
    group_median,
    group_std,
    group_sum,
    unique_ids,
)
from holotrace.analysis.topk import top_k_arrays
from holotrace.model.classify import KernelType, RuleSet, kind_in
from holotrace.model.view import JobView, RankView, resolve
from holotrace.table import Table

__all__ = [
    "KernelType",
    "analysed_types",
    "type_label",
    "type_times",
    "type_breakdown",
    "type_breakdown_table",
    "type_totals_table",
    "kernel_stats",
    "kernel_stats_table",
    "rank_distribution",
    "rank_distribution_table",
    "top_kernels",
    "top_kernels_table",
]

_TYPE_NAMES = np.array([t.name for t in sorted(KernelType)], dtype=object)


def analysed_types(include_memory: bool = True) -> list[KernelType]:
    """The kernel types analysed, in HTA's fixed order (bit i = 1 << i)."""
    types = [KernelType.COMPUTATION, KernelType.COMMUNICATION]
    if include_memory:
        types.append(KernelType.MEMORY)
    return types


def type_label(mask: int, types: Sequence[KernelType]) -> str:
    """``"COMPUTATION overlapping MEMORY"``-style label of a bit mask over ``types``."""
    return " overlapping ".join(t.name for i, t in enumerate(types) if mask & (1 << i))


def type_times(
    start: np.ndarray, end: np.ndarray, ktype: np.ndarray, types: Sequence[KernelType], truncate: bool = False
) -> dict[str, float]:
    """Wall time of each combination of concurrently running kernel types.

    Args:
        start, end, ktype: GPU intervals and their kernel-type codes.
        types: the analysed types (bit order).
        truncate: truncate every elementary segment to an integer (HTA does).

    Returns:
        label → time, only labels with a positive time.
    """
    return _sweep_times([intervals.merge(start[ktype == t], end[ktype == t]) for t in types], types, truncate)


def _sweep_times(sets: Sequence[intervals.Intervals], types: Sequence[KernelType], truncate: bool) -> dict[str, float]:
    """:func:`type_times` from the union of each analysed type's intervals."""
    s, e, m = intervals.sweep(sets)
    seg = e - s
    if truncate:
        seg = np.trunc(seg.astype(np.float64)).astype(np.int64)
    masks, totals = intervals.group_sum(m, seg)
    return {type_label(int(k), types): v for k, v in zip(masks, totals) if v > 0}


def _pctg_table(labels: np.ndarray, time_us: np.ndarray) -> Table:
    """Rows of (label, time) by time descending, label ascending among ties (``labels`` come sorted), and
    ``pctg`` = percent of the total ``time_us`` (``time / total * 100``, as HTA computes it)."""
    order = np.argsort(-time_us, kind="stable")
    t = time_us[order]
    total = np.nansum(t)  # pandas' Series.sum: NaN skipped, numpy's pairwise sum in row order
    return Table({"kernel_type": labels[order], "time_us": t, "pctg": t / total * 100 if total > 0 else t * np.nan})


def type_totals_table(labels, time_us) -> Table:
    """The job's rows of :func:`type_breakdown_table` from rows of (label, time): times summed per label as
    pandas' ``groupby(sort=True).sum()`` (compensated, in row order), then by time descending, label ascending
    among ties, with ``pctg``. Columns ``kernel_type, time_us, pctg``."""
    labels = np.asarray(labels, dtype=object)
    uniq, code = np.unique(labels, return_inverse=True)  # labels ascending, as groupby(sort=True)
    total = group_sum(code.reshape(-1), np.asarray(time_us, dtype=np.float64), len(uniq))
    return _pctg_table(uniq.astype(object), total)


def _analysed(v: RankView, types: Sequence[KernelType]) -> np.ndarray:
    """Rows of the rank's GPU work whose kernel type is analysed (found once per rank view)."""
    codes = tuple(int(t) for t in types)

    def make() -> np.ndarray:
        rows = v.rows_where("gpu", True)
        return _read_only(rows[kind_in(v["kernel_type"][rows], codes)])

    return v.derived(("analysed", codes), make)


def _analysed_columns(view: JobView, v: RankView, types: Sequence[KernelType]) -> tuple[np.ndarray, ...]:
    """``(rows, name ids, kernel types, durations in µs)`` of the rank's analysed GPU rows (:func:`_analysed`),
    found once per rank view for the kernel statistics and the rank distribution."""
    codes = tuple(int(t) for t in types)

    def make() -> tuple[np.ndarray, ...]:
        rows = _analysed(v, types)
        out = (rows, v["name"][rows], v["kernel_type"][rows], view.us(v["dur"][rows]))
        for a in out[1:]:
            _read_only(a)
        return out

    return v.derived(("analysed_columns", codes, view.unit_ns), make)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def type_breakdown(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    include_memory: bool = True,
    by_rank: bool = False,
):
    """:func:`type_breakdown_table` as a pandas frame."""
    t = type_breakdown_table(source, rules=rules, ranks=ranks, include_memory=include_memory, by_rank=by_rank)
    return t.to_pandas(object_text=by_rank)  # the labels of the job's rows are of pandas' str dtype, as ever


def type_breakdown_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    include_memory: bool = True,
    by_rank: bool = False,
) -> Table:
    """Time by kernel-type combination.

    Args:
        source: a loaded :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job). Under HTA's rules every
            elementary segment of the sweep is truncated to whole µs before summing, as HTA does.
        ranks: ranks to include (default all).
        include_memory: analyse MEMORY kernels as a third type.
        by_rank: one block of rows per rank instead of sums over ranks.

    Returns:
        Columns ``[rank,] kernel_type, time_us, pctg``: ``kernel_type`` is a label such as
        ``COMPUTATION overlapping COMMUNICATION``; ``pctg`` is the percent of the (rank's, or job's)
        total, unrounded. Rows by time descending, label ascending among ties; zero-time labels are
        omitted.
    """
    view = resolve(source, rules)
    rules = view.rules
    types = analysed_types(include_memory)
    parts = []
    for rank in view.select(ranks):
        v = view[rank]
        times = _sweep_times([gpu_union.union(v, int(t)) for t in types], types, rules.hta_table)
        if times:
            parts.append((rank, np.array(list(times), dtype=object), view.us(np.array(list(times.values())))))
    if by_rank:  # each rank's rows by time descending, label ascending among ties, and their percent of its total
        cols = {"rank": [], "kernel_type": [], "time_us": [], "pctg": []}
        for rank, labels, t in parts:
            order = np.lexsort((labels.argsort(kind="stable").argsort(kind="stable"), -t))
            t = t[order]
            total = np.nansum(t)  # pandas' Series.sum, as the job's table
            cols["rank"].append(np.full(len(t), rank, dtype=np.int64))
            cols["kernel_type"].append(labels[order])
            cols["time_us"].append(t)
            cols["pctg"].append(t / total * 100 if total > 0 else np.full(len(t), np.nan))
        dtypes = {"rank": np.int64, "kernel_type": object, "time_us": np.float64, "pctg": np.float64}
        return Table(
            {
                c: (np.concatenate(a) if a else np.empty(0, dtype=t)).astype(t, copy=False)
                for (c, a), t in zip(cols.items(), dtypes.values())
            }
        )
    labels = np.concatenate([a for _, a, _ in parts]) if parts else np.empty(0, dtype=object)
    time_us = np.concatenate([t for _, _, t in parts]) if parts else np.empty(0, dtype=np.float64)
    return type_totals_table(labels, time_us)


_STAT_COLUMNS = ["count", "num_names", "sum_us", "max_us", "min_us", "mean_us", "std_us"]


def _name_codes(view: JobView, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, names)`` of name ``ids`` (−1 reads as ``""``): one string decoded per distinct id."""
    n = len(view.strings)
    safe = np.where(ids >= 0, ids, n)  # ids are dense: a lookup array over the job's strings, no sort
    present = np.zeros(n + 1, dtype=bool)
    present[safe] = True
    uniq = np.flatnonzero(present)
    labels, again = np.unique(view.names(np.where(uniq < n, uniq, -1)), return_inverse=True)  # −1 and "" meet
    code = np.zeros(n + 1, dtype=np.intp)
    code[uniq] = again.reshape(-1)
    return code[safe], labels.astype(object)


def kernel_stats(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
):
    """:func:`kernel_stats_table` as a pandas frame."""
    return kernel_stats_table(
        source,
        rules=rules,
        ranks=ranks,
        num_kernels=num_kernels,
        duration_ratio=duration_ratio,
        include_memory=include_memory,
    ).to_pandas(object_text=True)


def kernel_stats_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
) -> Table:
    """Top kernels per rank and kernel type, the rest folded into ``others``.

    The cut and the statistics follow :func:`holotrace.analysis.topk.top_k` under ``rules``
    (holotrace's: statistics over instances; HTA's: HTA's count-based cut and per-name totals).

    Returns:
        Columns ``rank, kernel_type, name, count, num_names, sum_us, max_us, min_us, mean_us,
        std_us`` (``std_us`` sample standard deviation, 0 for one instance); rows by rank, type
        (COMPUTATION, COMMUNICATION, MEMORY), then the order of ``top_k``.
    """
    view = resolve(source, rules)
    rules = view.rules
    types = analysed_types(include_memory)
    parts = []
    for rank in view.select(ranks):
        v = view[rank]
        _, ids, ktype, dur = _analysed_columns(view, v, types)
        codes, labels = _name_codes(view, ids)
        for t in types:
            sel = ktype == t
            if sel.any():
                agg = top_k_arrays(codes[sel], labels, dur[sel], num_kernels, duration_ratio, rules=rules)
                parts.append((rank, t.name, agg))
    cols = ["rank", "kernel_type", "name", *_STAT_COLUMNS]
    if not parts:
        return _empty(cols)
    sizes = [len(a["name"]) for _, _, a in parts]
    out = {
        "rank": np.repeat([r for r, _, _ in parts], sizes).astype(np.int64),
        "kernel_type": np.repeat(np.array([t for _, t, _ in parts], dtype=object), sizes),
        "name": np.concatenate([a["name"] for _, _, a in parts]).astype(object, copy=False),
    }
    for c in _STAT_COLUMNS:
        out[c] = np.concatenate([a[c.removesuffix("_us")] for _, _, a in parts])
    return Table(out)


def _empty(cols: list[str]) -> Table:
    dtypes = {"rank": np.int64, "count": np.int64, "num_names": np.int64, "kernel_type": object, "name": object}
    return Table({c: np.empty(0, dtype=dtypes.get(c, np.float64)) for c in cols})


def rank_distribution(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    top: int = 10,
    include_memory: bool = True,
):
    """:func:`rank_distribution_table` as a pandas frame."""
    return rank_distribution_table(source, rules=rules, ranks=ranks, top=top, include_memory=include_memory).to_pandas()


def rank_distribution_table(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    top: int = 10,
    include_memory: bool = True,
) -> Table:
    """Per-rank duration distribution of the kernels with the most total time over the job.

    Args:
        top: how many kernels (by total time summed over ranks, all analysed types together).

    Returns:
        Columns ``kernel_type, name, rank, count, sum_us, max_us, min_us, mean_us, std_us,
        sum_vs_median`` — ``sum_vs_median`` is the rank's ``sum_us`` over the median of ``sum_us``
        across the ranks that ran the kernel (1.0 = typical; a straggler rank stands out). Rows by
        the kernel's job total descending, then rank.
    """
    view = resolve(source, rules)
    types = analysed_types(include_memory)
    ids, ktypes, durs, rank_of = [], [], [], []
    for rank in view.select(ranks):
        v = view[rank]
        rows, name, ktype, dur = _analysed_columns(view, v, types)
        ids.append(name)
        ktypes.append(ktype)
        durs.append(dur)
        rank_of.append(np.full(len(rows), rank, dtype=np.int64))
    cols = ["kernel_type", "name", "rank", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us", "sum_vs_median"]
    if not sum(len(x) for x in ids):
        return _empty(cols)
    one_rank = len(ids) == 1
    name_id, dur = np.concatenate(ids), np.asarray(np.concatenate(durs), dtype=np.float64)
    uniq, name_code = unique_ids(name_id)
    total = group_sum(name_code, dur, len(uniq))  # pandas' sums (compensated), as every release of this table
    names = view.names(uniq)
    by_text = np.empty(len(uniq), dtype=np.int64)  # total descending, then name ascending, then id
    by_text[np.argsort(names, kind="stable")] = np.arange(len(uniq))
    chosen = np.lexsort((by_text, -total))[:top]  # positions in ``uniq`` of the chosen kernels, in order
    by_id = intervals.stable_order(name_id)
    first = by_id[np.flatnonzero(np.r_[True, name_id[by_id[1:]] != name_id[by_id[:-1]]])]
    ktype_of = np.concatenate(ktypes)[first]  # each kernel's type where it first appears (ranks ascending)
    if one_rank:  # grouped by name alone: the same groups, and ``total`` are their sums
        codes, n_groups, at = name_code, len(uniq), chosen
        stat_rank = np.repeat(rank_of[0][:1], len(chosen))
    else:  # groups of (name, rank), ascending, as groupby([name, rank]); rows kept in their order
        keep = np.isin(name_id, uniq[chosen]) if len(chosen) < len(uniq) else slice(None)
        rank_ids, rank_code = unique_ids(np.concatenate(rank_of)[keep])
        pairs, codes = unique_ids(name_code[keep] * len(rank_ids) + rank_code)
        n_groups = len(pairs)
        dur = dur[keep]
    low, high = group_extremes(codes, dur, n_groups)
    stats = [
        group_count(codes, n_groups, dur),
        high,
        low,
        group_mean(codes, dur, n_groups),
        group_std(codes, dur, n_groups),
    ]
    if one_rank:
        pos = np.arange(len(chosen))
        out_sum = total[at]
        vals = [x[at] for x in stats]
        med = out_sum
    else:
        sums = group_sum(codes, dur, n_groups)
        key_code, stat_rank = pairs // len(rank_ids), rank_ids[pairs % len(rank_ids)].astype(np.int64)
        where = np.full(len(uniq), -1, dtype=np.int64)
        where[chosen] = np.arange(len(chosen))
        pos = where[key_code]
        order = np.lexsort((stat_rank, pos))
        pos, stat_rank = pos[order], stat_rank[order]
        out_sum = sums[order]
        vals = [x[order] for x in stats]
        med = group_median(pos, out_sum, len(chosen))[pos]
        at = chosen[pos]
    n_rows, vmax, vmin, vmean, vstd = vals
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(med > 0, out_sum / np.where(med > 0, med, 1.0), np.nan)
    return Table(
        {
            "kernel_type": _TYPE_NAMES[ktype_of[at].astype(np.int64)],
            "name": names[at],
            "rank": np.asarray(stat_rank, dtype=np.int64),
            "count": n_rows.astype(np.int64),
            "sum_us": out_sum,
            "max_us": vmax,
            "min_us": vmin,
            "mean_us": vmean,
            "std_us": np.where(np.isnan(vstd), 0.0, vstd),
            "sum_vs_median": ratio,
        }
    )


def top_kernels(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None, top: int = 10):
    """:func:`top_kernels_table` as a pandas frame."""
    return top_kernels_table(source, rules=rules, ranks=ranks, top=top).to_pandas(object_text=True)


def top_kernels_table(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None, top: int = 10
) -> Table:
    """The GPU operations (every kernel type) with the most total time, summed over ranks.

    Returns:
        Columns ``kernel_type, name, count, sum_us, mean_us``; ``top`` rows at most, by ``sum_us``
        descending, name ascending among ties.
    """
    view = resolve(source, rules)
    ids, types, durs = [], [], []
    for rank in view.select(ranks):
        v = view[rank]
        rows = v.rows_where("gpu", True)
        ids.append(v["name"][rows])
        types.append(v["kernel_type"][rows])
        durs.append(view.us(v["dur"][rows]))
    ids = np.concatenate(ids) if ids else np.empty(0, dtype=np.int64)
    order = intervals.stable_order(ids)  # np.unique(ids, return_index=True, return_inverse=True), by one stable sort
    new = np.flatnonzero(np.r_[True, ids[order[1:]] != ids[order[:-1]]]) if len(ids) else np.empty(0, dtype=np.intp)
    uniq, first = ids[order[new]], order[new]
    inv = np.empty(len(ids), dtype=np.intp)
    inv[order] = np.repeat(np.arange(len(new)), np.diff(np.r_[new, len(ids)]))
    total = np.bincount(inv, weights=np.concatenate(durs) if durs else None, minlength=len(uniq))
    count = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
    names = view.names(uniq)
    pick = np.lexsort((names.astype(str), -total))[:top] if len(uniq) else np.empty(0, dtype=np.int64)
    ktype = np.concatenate(types)[first[pick]] if len(pick) else np.empty(0, dtype=np.int64)
    return Table(
        {
            "kernel_type": _TYPE_NAMES[ktype.astype(np.int64)],
            "name": np.asarray(names[pick], dtype=object),
            "count": count[pick],
            "sum_us": total[pick],
            "mean_us": total[pick] / np.maximum(count[pick], 1),
        }
    )
