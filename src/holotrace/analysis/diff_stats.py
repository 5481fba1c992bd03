"""Per-group statistics of durations for :mod:`holotrace.analysis.diff` (a name's instances per rank, or merged
over the ranks): the groups sorted once by group then duration, counts, totals, means, linear quantiles as pandas
computes them, and the total of each step."""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["coarser", "group_stats", "sort_groups"]


def sort_groups(group: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``group`` and ``dur`` sorted by group, then duration: one sort of ``group << bits | dur`` when both fit
    in 63 bits (integer ns), else a two-key sort."""
    if len(dur) and dur.dtype.kind in "iu" and dur.min() >= 0:
        bits = int(dur.max()).bit_length()
        if bits + int(group.max()).bit_length() <= 63:
            packed = np.sort((group << bits) | dur.astype(np.int64))
            return packed >> bits, packed & ((1 << bits) - 1)
    order = np.lexsort((dur, group))
    return group[order], dur[order]


def coarser(g: np.ndarray, x: np.ndarray, div: int) -> tuple[np.ndarray, np.ndarray]:
    """``sort_groups(g // div, x)`` from ``g, x`` already sorted by group, then value: the finer groups' sorted
    runs merged by a stable sort (which finds the runs), not sorted again from scratch; the same arrays."""
    gc = g // div
    if len(x) and x.dtype.kind in "iu" and x.min() >= 0:
        bits = int(x.max()).bit_length()
        if bits + int(gc.max()).bit_length() <= 63:
            packed = np.sort((gc << bits) | x.astype(np.int64), kind="stable")
            return packed >> bits, packed & ((1 << bits) - 1)
    order = np.lexsort((x, gc))
    return gc[order], x[order]


def group_stats(
    group: np.ndarray, dur: np.ndarray, step: np.ndarray, n_steps: int, sorted_pair: Optional[tuple] = None
) -> tuple:
    """Per distinct ``group``: the groups, count, total, mean, p50, p95 (linear interpolation, as pandas) and
    the total of each step (groups × steps), in the unit of ``dur``; ``sorted_pair``: ``sort_groups(group, dur)``
    when the caller has it."""
    g, x = sort_groups(group, dur) if sorted_pair is None else sorted_pair
    start = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]])) if len(g) else np.empty(0, dtype=np.int64)
    count = np.diff(np.append(start, len(g)))
    total = np.add.reduceat(x, start).astype(np.float64) if len(g) else np.empty(0)

    def quantile(q: float) -> np.ndarray:
        at = start + q * (count - 1)
        lo = np.floor(at).astype(np.int64)
        hi = np.minimum(lo + 1, start + count - 1)
        return x[lo] + (x[hi] - x[lo]) * (at - lo)

    uniq = g[start]
    if len(uniq) and 0 <= uniq[0] and uniq[-1] <= 4 * len(group) + 1024:  # group ids dense: a lookup table
        lut = np.zeros(int(uniq[-1]) + 1, dtype=np.int64)
        lut[uniq] = np.arange(len(uniq))
        slot = lut[group]
    else:
        slot = np.searchsorted(uniq, group)
    per_step = np.bincount(slot * n_steps + step, weights=dur, minlength=len(uniq) * n_steps).reshape(-1, n_steps)
    return uniq, count, total, total / np.maximum(count, 1), quantile(0.5), quantile(0.95), per_step
