"""The shared top-k / "others" aggregation (spec 20 §3).

Two flavours:

* :func:`top_k` — holotrace's definition: keep the shortest prefix of names
  (by total time, descending) whose cumulative time reaches
  ``duration_ratio`` × total, capped at ``num_kernels`` names, plus
  allow-listed names. Kept names carry their per-instance statistics; the
  ``others`` row carries statistics over every folded instance, with
  ``count`` (instances) and ``num_names`` (names folded).
* :func:`top_k_hta` — HTA's ``_aggr_gpu_kernel_time`` reproduced exactly:
  ``duration_ratio`` is a quantile of the cumulative sums (so it cuts by
  count, quirk Q1), kept names lose their statistics (Q2) and the ``others``
  row is described by per-name totals (Q3). Used by the compat facade so its
  output matches HTA.

Ties in total time are broken by name ascending in both flavours.
"""

from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
import pandas as pd

__all__ = ["OTHERS", "group_stats", "name_stats", "top_k", "top_k_hta"]

OTHERS = "others"

_STATS = ["sum", "max", "min", "mean", "std"]


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
    order = np.argsort(codes, kind="stable")
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


def name_stats(names, durations) -> pd.DataFrame:
    """Per-name statistics of durations.

    Args:
        names: one name per instance (str-like), or a :class:`pandas.Categorical`
            of them (faster: instances are grouped by integer code).
        durations: one duration per instance.

    Returns:
        Columns ``name, count, sum, max, min, mean, std`` (``std`` sample, 0 for
        a single instance), sorted by ``sum`` descending then ``name``
        ascending, ``RangeIndex``.
    """
    if isinstance(names, pd.Categorical):
        codes, categories = names.codes, np.asarray(names.categories, dtype=object)
    else:
        codes, categories = pd.factorize(pd.Series(np.asarray(names, dtype=object), dtype=object))
        categories = np.asarray(categories, dtype=object)
    group_codes, count, total, high, low, mean, std = group_stats(codes, durations)
    group_names = categories[group_codes] if len(group_codes) else np.empty(0, dtype=object)
    # by sum descending, ties by name ascending
    name_rank = np.empty(len(group_names), dtype=np.int64)
    name_rank[np.argsort(group_names, kind="stable")] = np.arange(len(group_names))
    final = np.lexsort((name_rank, -total))
    return pd.DataFrame({
        "name": pd.Series(group_names[final], dtype=object),
        "count": count[final], "sum": total[final], "max": high[final], "min": low[final],
        "mean": mean[final], "std": std[final],
    })


def _allowed(names: pd.Series, allowlist: Optional[Iterable[str]]) -> np.ndarray:
    if allowlist is None:
        return np.zeros(len(names), dtype=bool)
    return names.isin(list(allowlist)).to_numpy()


def top_k(
    names,
    durations,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    allowlist: Optional[Iterable[str]] = None,
) -> pd.DataFrame:
    """Top names by total time, the rest folded into one ``others`` row.

    Args:
        names: one name per instance.
        durations: one duration per instance (any unit; the output keeps it).
        num_kernels: at most this many names are kept (allow-listed names come on top).
        duration_ratio: keep the shortest prefix of names, by total time
            descending, whose cumulative time is at least this fraction of the
            total (1.0 keeps every name, subject to ``num_kernels``).
        allowlist: names that are never folded.

    Returns:
        Columns ``name, count, num_names, sum, max, min, mean, std``; kept
        names first (by ``sum`` descending), then ``others`` if anything was
        folded. ``count`` is the number of instances, ``num_names`` the number
        of distinct names in the row. Statistics of every row, ``others``
        included, are over instances.
    """
    names_arr = np.asarray(names, dtype=object)
    dur = np.asarray(durations, dtype=np.float64)
    stats = name_stats(names_arr, dur)
    n = len(stats)
    stats.insert(2, "num_names", np.ones(n, dtype=np.int64))
    if n == 0:
        return stats
    cum = stats["sum"].cumsum().to_numpy()
    total = cum[-1]
    # shortest prefix reaching the ratio: first position whose cumsum >= ratio*total
    need = duration_ratio * total
    reach = int(np.searchsorted(cum, need - 1e-9 * max(abs(total), 1.0), side="left")) + 1
    n_keep = min(max(reach, 1 if duration_ratio > 0 else 0), num_kernels, n)
    keep = np.arange(n) < n_keep
    keep |= _allowed(stats["name"], allowlist)
    if keep.all():
        return stats
    kept = stats[keep]
    folded_names = set(stats.loc[~keep, "name"])
    mask = pd.Series(names_arr, dtype=object).isin(folded_names).to_numpy()
    d = dur[mask]
    others = pd.DataFrame(
        {
            "name": [OTHERS],
            "count": [np.int64(d.size)],
            "num_names": [np.int64(len(folded_names))],
            "sum": [d.sum()],
            "max": [d.max()],
            "min": [d.min()],
            "mean": [d.mean()],
            "std": [float(np.std(d, ddof=1)) if d.size > 1 else 0.0],
        }
    )
    return pd.concat([kept, others], ignore_index=True)


def top_k_hta(
    names,
    durations,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    allowlist: Optional[Iterable[str]] = None,
) -> pd.DataFrame:
    """HTA's top-k aggregation, quirks included (spec 20 §3 steps 1-3e).

    Returns:
        Columns ``name, sum, max, min, mean, std``. When no folding happens the
        rows are per-name instance statistics sorted by ``sum`` descending;
        otherwise the rows are grouped again over per-name totals and sorted by
        name (as HTA does).
    """
    stats = name_stats(names, durations).drop(columns="count")
    n = len(stats)
    if n <= num_kernels:
        return stats
    keep = _allowed(stats["name"], allowlist)
    cum = stats["sum"].cumsum()
    q = cum.quantile(duration_ratio)
    fold = ~keep & ((cum.to_numpy() > q) | (np.arange(n) >= num_kernels))
    renamed = stats["name"].where(~fold, OTHERS)
    regrouped = pd.DataFrame({"name": renamed, "sum": stats["sum"]}).groupby("name", sort=True)["sum"]
    out = regrouped.agg(_STATS).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out
