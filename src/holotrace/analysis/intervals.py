"""Vectorised interval arithmetic shared by every analysis.

Intervals are half-open ``[start, end)`` given as two equal-length numpy
arrays. The functions work on any real dtype (int64 nanoseconds in the native
analyses, float64 microseconds in the HTA-compatible ones) and never loop over
events in Python.

Conventions (spec 20-analyses-common C5):

* :func:`merge` sorts by start and joins an interval to the current group when
  its start is ``<=`` the largest end seen so far, so touching intervals merge.
  The result is sorted, pairwise disjoint and non-touching.
* Zero-length intervals take part in merging (they can bridge nothing but
  they do extend a span), exactly as HTA's ``merge_kernel_intervals``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "Intervals",
    "merge",
    "merge_sorted",
    "total_length",
    "span",
    "gaps",
    "intersection_length",
    "clip",
    "sweep",
    "coverage_by_mask",
    "group_sum",
    "stable_order",
]


class Intervals(NamedTuple):
    """A sorted, disjoint, non-touching set of half-open intervals."""

    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:  # number of intervals
        return int(self.start.shape[0])

    @property
    def length(self):
        """Total covered length (same dtype as the bounds)."""
        return total_length(self)


def _as_arrays(start, end) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(start)
    e = np.asarray(end)
    if s.shape != e.shape:
        raise ValueError(f"start and end differ in shape: {s.shape} vs {e.shape}")
    if s.dtype.kind == "f" or e.dtype.kind == "f":
        keep = ~(np.isnan(s) | np.isnan(e))
        if not keep.all():
            s, e = s[keep], e[keep]
    return s, e


def merge(start, end) -> Intervals:
    """Union of intervals.

    Args:
        start: interval starts.
        end: interval ends (``end >= start`` is not checked; an interval with
            ``end < start`` contributes its start only).

    Returns:
        The union as sorted, disjoint, non-touching intervals. Rows with a NaN
        bound are ignored.
    """
    s, e = _as_arrays(start, end)
    if s.size == 0:
        return Intervals(s[:0].copy(), e[:0].copy())
    order = np.argsort(s, kind="stable")
    return merge_sorted(s[order], e[order])


def merge_sorted(s: np.ndarray, e: np.ndarray) -> Intervals:
    """:func:`merge` of intervals already sorted by start (as a stable sort orders them), without a NaN bound."""
    if s.size == 0:
        return Intervals(s[:0].copy(), e[:0].copy())
    running_max = np.maximum.accumulate(e)
    # a new group starts where the start exceeds every earlier end
    new_group = np.empty(s.shape[0], dtype=bool)
    new_group[0] = True
    np.greater(s[1:], running_max[:-1], out=new_group[1:])
    first = np.flatnonzero(new_group)
    return Intervals(s[first], np.maximum.reduceat(e, first))


def total_length(iv: Intervals):
    """Sum of ``end - start`` of already merged intervals (0 when empty)."""
    if len(iv) == 0:
        return iv.start.dtype.type(0)
    return (iv.end - iv.start).sum()


def span(iv: Intervals):
    """``last end - first start`` of merged intervals (0 when empty)."""
    if len(iv) == 0:
        return iv.start.dtype.type(0)
    return iv.end[-1] - iv.start[0]


def gaps(iv: Intervals) -> Intervals:
    """The holes between consecutive merged intervals (inside their span)."""
    return Intervals(iv.end[:-1].copy(), iv.start[1:].copy())


def clip(iv: Intervals, lo, hi) -> Intervals:
    """Restrict merged intervals to the window ``[lo, hi)``; empty pieces are dropped."""
    s = np.maximum(iv.start, lo)
    e = np.minimum(iv.end, hi)
    keep = e > s
    return Intervals(s[keep], e[keep])


def sweep(sets: Sequence[Intervals]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut the time line into elementary segments labelled by which sets are active.

    Each set ``i`` contributes bit ``1 << i``; the sets must each be merged
    (disjoint, non-touching). At equal times ends are processed before starts,
    so touching intervals of different sets never create a zero-length
    combined segment.

    Returns:
        ``(seg_start, seg_end, mask)`` for every segment with a non-zero mask, in time order
        (zero-length segments between simultaneous boundaries are dropped).
    """
    parts_t, parts_d = [], []
    for bit, iv in enumerate(sets):
        value = 1 << bit
        parts_t += [iv.start, iv.end]
        parts_d += [np.full(len(iv), value, np.int64), np.full(len(iv), -value, np.int64)]
    if not parts_t or sum(p.size for p in parts_t) == 0:
        empty = np.empty(0, np.result_type(*parts_t) if parts_t else np.int64)
        return empty, empty.copy(), np.empty(0, np.int64)
    t = np.concatenate(parts_t)
    d = np.concatenate(parts_d)
    order = np.lexsort((d > 0, t))  # by time, ends (negative deltas) first
    t = t[order]
    mask = np.cumsum(d[order])
    keep = (mask[:-1] > 0) & (t[1:] > t[:-1])
    return t[:-1][keep], t[1:][keep], mask[:-1][keep]


def coverage_by_mask(sets: Sequence[Intervals]) -> tuple[np.ndarray, np.ndarray]:
    """Total time each combination of sets is active (see :func:`sweep`).

    Returns:
        ``(masks, lengths)``: the distinct non-zero masks (ascending) and the total
        length during which exactly that combination was active (dtype of the bounds).
    """
    s, e, m = sweep(sets)
    return group_sum(m, e - s)


def group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``values`` per distinct key; returns ``(sorted unique keys, sums)`` keeping the dtype."""
    if keys.size == 0:
        return keys[:0].copy(), values[:0].copy()
    order = stable_order(keys)
    k = keys[order]
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return k[first], np.add.reduceat(values[order], first)


def stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``; integer keys within a 16-bit range are sorted as 16-bit integers
    (numpy's radix sort: the same order, about ten times faster than sorting them as int64)."""
    k = np.asarray(keys)
    if k.dtype.kind in "iu" and k.size > 64 and k.dtype.itemsize > 2:
        lo, hi = k.min(), k.max()
        if int(hi) - int(lo) < 1 << 16:
            k = (k - lo).astype(np.uint16)
    return np.argsort(k, kind="stable")


def intersection_length(a: Intervals, b: Intervals):
    """Total length of ``a ∩ b`` for two merged interval sets."""
    if len(a) == 0 or len(b) == 0:
        return 0
    masks, lengths = coverage_by_mask([a, b])
    return lengths[masks == 3].sum() if masks.size else 0
