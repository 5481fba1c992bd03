"""The rank's GPU work ordered by start, and the unions the breakdowns read, computed once per rank view.

The temporal breakdown, the kernel-type breakdown, the overlap and the step times each merge the GPU work of a
rank, or of one kernel type, or of one profiler step. Merging sorts the intervals by start (stably). Here the
rank's GPU rows are sorted once; a subset taken from that order in place is already sorted as a stable sort of
the subset would sort it, so each union is :func:`holotrace.analysis.intervals.merge_sorted` of a slice: the same
intervals, bit for bit, as :func:`~holotrace.analysis.intervals.merge` of the subset's rows.

The order, the unions and the steps' figures are kept on the rank view
(:meth:`~holotrace.model.view.RankView.derived`; they depend on the view's columns alone) and are read-only; the
sorted bounds are not kept (on job8 ~1.3 MB a rank, against a few kB of unions).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from holotrace.analysis import intervals
from holotrace.analysis.intervals import Intervals
from holotrace.model.classify import KernelType
from holotrace.model.view import RankView

__all__ = ["ByStart", "StepWork", "by_start", "union", "step_work"]


class ByStart(NamedTuple):
    """The rank's GPU rows (``gpu``) stably sorted by start, with their bounds (:meth:`RankView.bounds`) and
    kernel types in that order."""

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray


class StepWork(NamedTuple):
    """GPU work per profiler step (GPU rows whose ``iteration`` is ``>= 0``): the steps ascending, the number of
    rows of each, and per step the length and the span (first start to last end) of the union of its rows and the
    length of the union of its COMPUTATION rows (the bounds' dtype: what ``intervals.total_length`` and
    ``intervals.span`` give for each step's union)."""

    steps: np.ndarray
    counts: np.ndarray
    busy: np.ndarray
    span: np.ndarray
    compute: np.ndarray


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


def by_start(v: RankView) -> ByStart:
    """The rank's GPU rows by start (ties in row order): the order is found once per rank view and kept (int32
    positions where they fit), the bounds and types are taken in that order at each call (not kept: what is read
    from them is kept, and is small)."""

    def make() -> np.ndarray:
        rows = v.rows_where("gpu", True)
        order = rows[np.argsort(v.bounds(rows)[0], kind="stable")]
        order = order.astype(np.int32) if v.n < 2**31 else order
        _read_only(order)
        return order

    rows = v.derived(("gpu_by_start",), make)
    start, end = v.bounds(rows)
    return ByStart(rows, start, end, v["kernel_type"][rows])


def _merged(start: np.ndarray, end: np.ndarray) -> Intervals:
    """``intervals.merge`` of bounds already in stable start order."""
    if start.dtype.kind == "f" or end.dtype.kind == "f":
        keep = ~(np.isnan(start) | np.isnan(end))
        if not keep.all():  # a NaN start sorts last: the other rows keep their order
            start, end = start[keep], end[keep]
    out = intervals.merge_sorted(start, end)
    _read_only(*out)
    return out


def union(v: RankView, kernel_type: Optional[int] = None) -> Intervals:
    """The union of the rank's GPU work (of one kernel type when ``kernel_type`` is given), as
    ``intervals.merge`` of those rows' bounds; found once per rank view (the union of every GPU row and of each
    kernel type, at once)."""

    def make() -> dict:
        b = by_start(v)
        out = {None: _merged(b.start, b.end)}
        for t in KernelType:
            m = b.kernel_type == int(t)
            out[int(t)] = _merged(b.start[m], b.end[m])
        return out

    unions = v.derived(("gpu_unions",), make)
    key = None if kernel_type is None else int(kernel_type)
    if key in unions:
        return unions[key]
    b = by_start(v)  # a code of no kernel type
    m = b.kernel_type == key
    return _merged(b.start[m], b.end[m])


def step_work(v: RankView, compute_type: int) -> StepWork:
    """The GPU work of each profiler step (see :class:`StepWork`; ``compute_type``: the COMPUTATION code), found
    once per rank view."""

    def make() -> StepWork:
        b = by_start(v)
        it = v["iteration"][b.rows]
        start, end, kt = b.start, b.end, b.kernel_type
        ok = it >= 0  # NaN compares False
        if not ok.all():
            it, start, end, kt = it[ok], start[ok], end[ok], kt[ok]
        if not (
            it[1:] >= it[:-1]
        ).all():  # steps' work interleaved in time: each step's rows by start, ties in row order
            order = intervals.stable_order(it)
            it, start, end, kt = it[order], start[order], end[order], kt[order]
        new = np.flatnonzero(np.r_[True, it[1:] != it[:-1]]) if len(it) else np.empty(0, dtype=np.intp)
        counts = np.diff(np.r_[new, len(it)]).astype(np.int64)
        seg = np.repeat(np.arange(len(new)), counts)
        busy, span = _segment_union(start, end, seg, len(new))
        m = kt == compute_type
        compute, _ = _segment_union(start[m], end[m], seg[m], len(new))
        out = StepWork(it[new], counts, busy, span, compute)
        _read_only(*out)
        return out

    return v.derived(("gpu_step_work", int(compute_type)), make)


def _segment_union(start: np.ndarray, end: np.ndarray, seg: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(length, span)`` of the union of each segment's intervals (``seg``: ascending segment numbers below ``n``,
    each segment's rows in stable start order), as ``intervals.total_length`` and ``intervals.span`` of
    ``intervals.merge`` of each segment's rows; 0 for a segment without a row."""
    dtype = np.result_type(start.dtype, end.dtype)
    length, span = np.zeros(n, dtype=dtype), np.zeros(n, dtype=dtype)
    if not len(start):
        return length, span
    if dtype.kind in "iu":  # one merge of every segment, none joining the one before it
        cut = np.flatnonzero(seg[1:] != seg[:-1]) + 1
        run = np.maximum.accumulate(end)
        if (run[cut - 1] <= end[cut]).all():  # no segment's latest end is past the next one's first end: within
            s = start  # each segment the running maximum of every row is the segment's own
        else:  # each segment shifted past the ones before it
            lo = min(int(start.min()), int(end.min()))
            width = max(int(start.max()), int(end.max())) - lo + 1
            if width * n >= 2**62:
                return _segment_union_loop(start, end, seg, length, span)
            shift = seg.astype(np.int64) * width - lo
            s, run = start + shift, np.maximum.accumulate(end + shift)
        new = np.empty(len(s), dtype=bool)
        new[0] = True
        np.greater(s[1:], run[:-1], out=new[1:])
        new[cut] = True
        first = np.flatnonzero(new)
        gs, ge, gseg = start[first], np.maximum.reduceat(end, first), seg[first]
        at = np.flatnonzero(np.r_[True, gseg[1:] != gseg[:-1]])
        last = np.r_[at[1:], len(gseg)] - 1
        length[gseg[at]] = np.add.reduceat(ge - gs, at)
        span[gseg[at]] = ge[last] - gs[at]
        return length, span
    return _segment_union_loop(start, end, seg, length, span)


def _segment_union_loop(start, end, seg, length, span) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_segment_union` by one merge per segment (float bounds), into ``length`` and ``span``."""
    cut = np.flatnonzero(seg[1:] != seg[:-1]) + 1
    for a, z in zip(np.r_[0, cut].tolist(), np.r_[cut, len(seg)].tolist()):
        u = _merged(start[a:z], end[a:z])
        length[seg[a]], span[seg[a]] = intervals.total_length(u), intervals.span(u)
    return length, span
