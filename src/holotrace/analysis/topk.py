"""The shared top-k / "others" aggregation (spec 20 §3).

:func:`top_k` keeps the names with the most total time and folds the rest into one ``others`` row.
Where the cut falls and what the rows describe is a definition of the rule set's table
(``rules.hta_table``), not one of HTA's fixable bugs: HTA's breakdowns always give HTA's numbers,
so :data:`~holotrace.model.classify.HTA` and :data:`~holotrace.model.classify.HTA_FIXED` both cut as
HTA does.

* holotrace's rules: keep the shortest prefix of names (by total time, descending) whose cumulative
  time reaches ``duration_ratio`` × total, capped at ``num_kernels`` names, plus allow-listed names.
  Every row, ``others`` included, carries statistics over its instances.
* HTA's rules (``_aggr_gpu_kernel_time``): nothing is folded while there are at most ``num_kernels``
  names; otherwise ``duration_ratio`` is a quantile of the cumulative sums (so it cuts by count,
  quirk Q1), and the rows are regrouped over per-name totals and sorted by name: kept names lose
  their instance statistics (Q2) and ``others`` is described by the totals of the names it folds (Q3).

Ties in total time are broken by name ascending under both rule sets.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Optional

import numpy as np

from holotrace.analysis.grouped import factorize
from holotrace.analysis.intervals import stable_order
from holotrace.model.classify import NATIVE, RuleSet
from holotrace.table import Table

__all__ = ["OTHERS", "group_stats", "name_stats", "name_stats_table", "top_k", "top_k_table", "top_k_arrays"]

OTHERS = "others"

_COLUMNS = ["name", "count", "num_names", "sum", "max", "min", "mean", "std"]


def group_stats(codes, durations) -> tuple[np.ndarray, ...]:
    """Per-group statistics of durations, groups given by integer ``codes`` (negative: no group).

    Returns ``(code, count, sum, max, min, mean, std)`` arrays, one entry per group in ascending code
    order; ``std`` is the sample deviation, 0 for a single instance. One sort, then per-group
    reductions (measured 5x faster than a pandas groupby with five aggregations).
    """
    codes = np.asarray(codes)
    named = codes >= 0  # a missing name is no group (as pandas' groupby drops NaN keys)
    codes = codes[named]
    dur = np.asarray(durations, dtype=np.float64)[named]
    order = stable_order(codes)
    c, d = codes[order], dur[order]
    if not len(c):
        e = np.empty(0)
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), e, e, e, e, e
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    count = np.diff(np.r_[starts, len(c)]).astype(np.int64)
    total = np.add.reduceat(d, starts)
    high, low = np.maximum.reduceat(d, starts), np.minimum.reduceat(d, starts)
    mean = total / count
    dev = d - np.repeat(mean, count)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.where(count > 1, np.sqrt(np.add.reduceat(dev * dev, starts) / (count - 1)), 0.0)
    return c[starts], count, total, high, low, mean, std


def _codes(names) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, categories)`` of one name per instance (a :class:`pandas.Categorical` is used as is); codes in
    order of first appearance, a missing name (None, NaN) -1, as ``pd.factorize``."""
    pd = sys.modules.get("pandas")  # a Categorical exists only once pandas is imported
    if pd is not None and isinstance(names, pd.Categorical):
        return np.asarray(names.codes), np.asarray(names.categories, dtype=object)
    names = np.asarray(names, dtype=object)
    missing = (names != names) | np.equal(names, None)
    if missing.any():
        codes = np.full(len(names), -1, dtype=np.int64)
        codes[~missing], categories = factorize(names[~missing])
        return codes, np.asarray(categories, dtype=object)
    codes, categories = factorize(names)
    return codes, np.asarray(categories, dtype=object)


def _by_total(names: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Order of groups: ``total`` descending, ties by name ascending."""
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[np.argsort(names, kind="stable")] = np.arange(len(names))
    return np.lexsort((name_rank, -total))


def name_stats(names, durations):
    """:func:`name_stats_table` as a pandas frame."""
    return name_stats_table(names, durations).to_pandas(object_text=True)


def name_stats_table(names, durations) -> Table:
    """Per-name statistics of durations.

    Args:
        names: one name per instance (str-like), or a :class:`pandas.Categorical` of them (faster:
            instances are grouped by integer code).
        durations: one duration per instance.

    Returns:
        Columns ``name, count, sum, max, min, mean, std`` (``std`` sample, 0 for a single instance),
        sorted by ``sum`` descending then ``name`` ascending, ``RangeIndex``.
    """
    codes, categories = _codes(names)
    group_codes, count, total, high, low, mean, std = group_stats(codes, durations)
    group_names = categories[group_codes] if len(group_codes) else np.empty(0, dtype=object)
    final = _by_total(group_names, total)
    return Table(
        {
            "name": group_names[final],
            "count": count[final],
            "sum": total[final],
            "max": high[final],
            "min": low[final],
            "mean": mean[final],
            "std": std[final],
        }
    )


def top_k(
    names,
    durations,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    allowlist: Optional[Iterable[str]] = None,
    *,
    rules: Optional[RuleSet] = None,
):
    """:func:`top_k_table` as a pandas frame."""
    return top_k_table(names, durations, num_kernels, duration_ratio, allowlist, rules=rules).to_pandas(
        object_text=True
    )


def top_k_table(
    names,
    durations,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    allowlist: Optional[Iterable[str]] = None,
    *,
    rules: Optional[RuleSet] = None,
) -> Table:
    """Top names by total time, the rest folded into one ``others`` row (see the module docstring).

    Args:
        names: one name per instance, or a :class:`pandas.Categorical` of them.
        durations: one duration per instance (any unit; the output keeps it).
        num_kernels: at most this many names are kept (allow-listed names come on top).
        duration_ratio: holotrace: keep the shortest prefix of names, by total time descending,
            whose cumulative time is at least this fraction of the total (1.0 keeps every name,
            subject to ``num_kernels``); HTA: the quantile of the cumulative sums kept.
        allowlist: names that are never folded.
        rules: the rule set (default holotrace's); ``rules.hta_table`` selects HTA's cut.

    Returns:
        Columns ``name, count, num_names, sum, max, min, mean, std``: ``count`` is the number of
        instances, ``num_names`` the number of distinct names in the row. holotrace: kept names
        first (by ``sum`` descending), then ``others`` if anything was folded; statistics over
        instances. HTA: per-name instance statistics by ``sum`` descending when there are at most
        ``num_kernels`` names, otherwise rows by name whose statistics are over per-name totals.
    """
    codes, categories = _codes(names)
    out = top_k_arrays(codes, categories, durations, num_kernels, duration_ratio, allowlist, rules=rules)
    out["name"] = np.asarray(out["name"], dtype=object)
    return Table(out)


def top_k_arrays(
    codes,
    categories,
    durations,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    allowlist: Optional[Iterable[str]] = None,
    *,
    rules: Optional[RuleSet] = None,
) -> dict[str, np.ndarray]:
    """:func:`top_k` on integer name ``codes`` into ``categories`` (object array), as a dict of columns."""
    rules = rules or NATIVE
    codes = np.asarray(codes)
    dur = np.asarray(durations, dtype=np.float64)
    group_codes, count, total, high, low, mean, std = group_stats(codes, dur)
    group_names = np.asarray(categories, dtype=object)[group_codes] if len(group_codes) else np.empty(0, dtype=object)
    order = _by_total(group_names, total)
    g_names, g_count, g_total = group_names[order], count[order], total[order]
    n = len(order)
    stats = {
        "name": g_names,
        "count": g_count,
        "num_names": np.ones(n, dtype=np.int64),
        "sum": g_total,
        "max": high[order],
        "min": low[order],
        "mean": mean[order],
        "std": std[order],
    }
    allowed = (
        np.isin(g_names, np.asarray(list(allowlist), dtype=object))
        if allowlist is not None and n
        else np.zeros(n, dtype=bool)
    )
    cum = np.cumsum(g_total)
    if rules.hta_table:
        if n <= num_kernels:
            return stats
        q = np.percentile(cum, duration_ratio * 100.0)  # as pandas' Series.quantile
        fold = ~allowed & ((cum > q) | (np.arange(n) >= num_kernels))
        return _regroup_totals(np.where(fold, OTHERS, g_names).astype(object), g_count, g_total)
    if n == 0:
        return stats
    total_all = cum[-1]
    # shortest prefix reaching the ratio: first position whose cumsum >= ratio*total
    need = duration_ratio * total_all
    reach = int(np.searchsorted(cum, need - 1e-9 * max(abs(total_all), 1.0), side="left")) + 1
    n_keep = min(max(reach, 1 if duration_ratio > 0 else 0), num_kernels, n)
    keep = (np.arange(n) < n_keep) | allowed
    if keep.all():
        return stats
    folded = group_codes[order][~keep]
    d = dur[_member(codes, folded)]
    others = {
        "name": OTHERS,
        "count": d.size,
        "num_names": len(folded),
        "sum": d.sum(),
        "max": d.max(),
        "min": d.min(),
        "mean": d.mean(),
        "std": float(np.std(d, ddof=1)) if d.size > 1 else 0.0,
    }
    return {c: np.append(v[keep], np.asarray([others[c]], dtype=v.dtype)) for c, v in stats.items()}


def _member(codes: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """``np.isin(codes, chosen)`` for integer codes and some of the non-negative group codes among them: by a
    lookup table over the codes (a negative code is in no group)."""
    if codes.dtype.kind not in "iu" or not len(codes) or not len(chosen):
        return np.isin(codes, chosen)
    top = max(int(codes.max()), int(chosen.max()))
    if top > 4 * len(codes) + 1024:
        return np.isin(codes, chosen)
    lut = np.zeros(top + 2, dtype=bool)  # code −1 reads the last entry: False
    lut[chosen] = True
    return lut[np.maximum(codes, -1)]


def _regroup_totals(labels: np.ndarray, count: np.ndarray, total: np.ndarray) -> dict[str, np.ndarray]:
    """HTA's second grouping: per-name totals grouped by label (kept name or ``others``), rows by label."""
    uniq, inv = np.unique(labels, return_inverse=True)
    inv = inv.reshape(-1)
    _, names, s, high, low, mean, std = group_stats(inv, total)
    return {
        "name": uniq.astype(object),
        "count": np.bincount(inv, weights=count, minlength=len(uniq)).astype(np.int64),
        "num_names": names,
        "sum": s,
        "max": high,
        "min": low,
        "mean": mean,
        "std": std,
    }
