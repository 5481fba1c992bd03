"""The rank's GPU work ordered by start, and the unions the breakdowns read, computed once per rank view.

The temporal breakdown, the kernel-type breakdown, the overlap and the step times each merge the GPU work of a
rank, or of one kernel type, or of one profiler step. Merging sorts the intervals by start (stably). Here the
rank's GPU rows are sorted once; a subset taken from that order in place is already sorted as a stable sort of
the subset would sort it, so each union is :func:`holotrace.analysis.intervals.merge_sorted` of a slice: the same
intervals, bit for bit, as :func:`~holotrace.analysis.intervals.merge` of the subset's rows.

Every result is kept on the rank view (:meth:`~holotrace.model.view.RankView.derived`; it depends on the view's
columns alone) and is read-only.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from holotrace.analysis import intervals
from holotrace.analysis.intervals import Intervals
from holotrace.model.view import RankView

__all__ = ["ByStart", "StepUnions", "by_start", "union", "step_unions"]


class ByStart(NamedTuple):
    """The rank's GPU rows (``gpu``) stably sorted by start, with their bounds (:meth:`RankView.bounds`) and
    kernel types in that order."""

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kernel_type: np.ndarray


class StepUnions(NamedTuple):
    """GPU work per profiler step (GPU rows whose ``iteration`` is ``>= 0``): the steps ascending, the number of
    rows of each, the union of each step's rows and the union of its COMPUTATION rows (``compute`` only when
    asked for)."""

    steps: np.ndarray
    counts: np.ndarray
    busy: list
    compute: list


def _read_only(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


def by_start(v: RankView) -> ByStart:
    """The rank's GPU rows by start (ties in row order), found once per rank view."""

    def make() -> ByStart:
        rows = v.rows_where("gpu", True)
        start, end = v.bounds(rows)
        order = np.argsort(start, kind="stable")
        out = ByStart(rows[order], start[order], end[order], v["kernel_type"][rows][order])
        _read_only(*out)
        return out

    return v.derived(("gpu_by_start",), make)


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
    ``intervals.merge`` of those rows' bounds; found once per rank view."""

    def make() -> Intervals:
        b = by_start(v)
        if kernel_type is None:
            return _merged(b.start, b.end)
        m = b.kernel_type == kernel_type
        return _merged(b.start[m], b.end[m])

    return v.derived(("gpu_union", None if kernel_type is None else int(kernel_type)), make)


def step_unions(v: RankView, compute_type: int) -> StepUnions:
    """The GPU work of each profiler step (see :class:`StepUnions`; ``compute_type``: the COMPUTATION code),
    found once per rank view."""

    def make() -> StepUnions:
        b = by_start(v)
        it = v["iteration"][b.rows]
        ok = it >= 0  # NaN compares False
        it, start, end, kt = it[ok], b.start[ok], b.end[ok], b.kernel_type[ok]
        order = intervals.stable_order(it)  # each step's rows by start, ties in row order
        it, start, end, kt = it[order], start[order], end[order], kt[order]
        cut = np.flatnonzero(it[1:] != it[:-1]) + 1
        lo = np.r_[0, cut].astype(np.int64) if len(it) else np.empty(0, dtype=np.int64)
        hi = np.r_[cut, len(it)].astype(np.int64) if len(it) else np.empty(0, dtype=np.int64)
        busy, compute = [], []
        for a, z in zip(lo.tolist(), hi.tolist()):
            busy.append(_merged(start[a:z], end[a:z]))
            m = kt[a:z] == compute_type
            compute.append(_merged(start[a:z][m], end[a:z][m]))
        steps, counts = it[lo], hi - lo
        _read_only(steps, counts)
        return StepUnions(steps, counts, busy, compute)

    return v.derived(("gpu_step_unions", int(compute_type)), make)
