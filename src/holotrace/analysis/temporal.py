"""Temporal breakdown: where each rank's GPU wall time goes (spec 20 §1).

Per rank, over the *kernel span* (first GPU activity start to last GPU
activity end):

* ``busy``  = length of the union of all GPU activity;
* ``idle``  = span − busy;
* ``compute`` = length of the union of COMPUTATION kernels (compute wins when
  it runs concurrently with communication or memory work);
* ``non_compute`` = busy − compute.

:func:`breakdown` is the analysis; which events are GPU work and how they are
timed and typed comes from the rule set (holotrace's: kernels, memcpy and memset
in exact ns; HTA's: every event with a stream, in HTA's µs, HTA's kernel types).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

from holotrace.analysis import gpu_union, intervals
from holotrace.model.classify import KernelType, RuleSet
from holotrace.model.view import resolve
from holotrace.table import Table

__all__ = ["TemporalTimes", "temporal_times", "breakdown", "breakdown_table"]


class TemporalTimes(NamedTuple):
    """Times of one rank (or one step of a rank), in the unit of the inputs."""

    span: float
    busy: float
    idle: float
    compute: float
    non_compute: float


def temporal_times(start: np.ndarray, end: np.ndarray, is_compute: np.ndarray) -> TemporalTimes:
    """Span, busy, idle, compute and non-compute time of a set of GPU intervals.

    Args:
        start, end: GPU activity bounds.
        is_compute: True for COMPUTATION kernels.
    """
    return _times(intervals.merge(start, end), intervals.merge(start[is_compute], end[is_compute]))


def _times(union: intervals.Intervals, compute: intervals.Intervals) -> TemporalTimes:
    """:func:`temporal_times` from the union of the GPU work and that of its COMPUTATION kernels."""
    span = intervals.span(union)
    busy = intervals.total_length(union)
    comp = intervals.total_length(compute)
    return TemporalTimes(span, busy, span - busy, comp, busy - comp)


def _clamped_times(v, step) -> TemporalTimes:
    """:func:`temporal_times` of the rank's GPU rows (of one step when ``step`` is not None), each ending no
    earlier than it starts."""
    sel = v.rows_where("gpu", True)
    if step is not None:
        it = v["iteration"][sel]
        sel = sel[(it >= 0) & (it == step)]
    ts, end = v.bounds(sel)
    return temporal_times(ts, np.maximum(end, ts), v["kernel_type"][sel] == KernelType.COMPUTATION)


def _pctg(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    whole = np.asarray(whole, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.asarray(part, dtype=np.float64) / np.where(whole > 0, whole, 1.0)
    return np.where(whole > 0, 100.0 * ratio, np.nan)


def breakdown(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None, per_step: bool = False
):
    """:func:`breakdown_table` as a pandas frame."""
    return breakdown_table(source, rules=rules, ranks=ranks, per_step=per_step).to_pandas()


def breakdown_table(
    source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None, per_step: bool = False
) -> Table:
    """Temporal breakdown of each rank.

    Args:
        source: a loaded :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job). Under holotrace's rules
            GPU work is every kernel, memcpy and memset, timed exactly in ns; under HTA's it is every
            event with a stream, in HTA's µs.
        ranks: ranks to report (default: all, ascending).
        per_step: one row per (rank, profiler step) instead of per rank; a GPU event belongs to the
            step its launch ran in; events outside any step are left out of the per-step rows.

    Returns:
        Columns ``rank, [step,] gpu_events, span_us, busy_us, idle_us, compute_us, non_compute_us,
        idle_pctg, compute_pctg, non_compute_pctg`` (percent of ``span_us``, unrounded). A rank
        without GPU activity has zeros and NaN percentages. Events whose duration HTA's rounding
        left negative cover no time.
    """
    view = resolve(source, rules)
    keys, counts, times = [], [], []
    comp = int(KernelType.COMPUTATION)
    for rank in view.select(ranks):
        v = view[rank]
        if per_step:
            w = gpu_union.step_work(v, comp)
            groups = zip(w.steps.tolist(), w.counts.tolist(), w.busy.tolist(), w.span.tolist(), w.compute.tolist())
        else:
            busy, compute = gpu_union.union(v), gpu_union.union(v, comp)
            n = len(v.rows_where("gpu", True))
            groups = [(0, n, intervals.total_length(busy), intervals.span(busy), intervals.total_length(compute))]
        for step, n, busy, span, compute in groups:
            t = TemporalTimes(span, busy, span - busy, compute, busy - compute)
            if t.idle > t.span or t.compute > t.span or t.non_compute < 0 or t.span < 0:
                # only HTA's rounding leaves negative durations: such an event covers no time
                t = _clamped_times(v, step if per_step else None)
            keys.append((int(rank), int(step)))
            counts.append(n)
            times.append(t)
    key = np.array(keys, dtype=np.int64).reshape(-1, 2)
    out = {"rank": key[:, 0]}
    if per_step:
        out["step"] = key[:, 1]
    out["gpu_events"] = np.array(counts, dtype=np.int64)
    t = np.array(times, dtype=np.float64).reshape(-1, 5)
    for i, c in enumerate(TemporalTimes._fields):
        out[f"{c}_us"] = view.us(t[:, i])
    for c in ("idle", "compute", "non_compute"):
        out[f"{c}_pctg"] = _pctg(out[f"{c}_us"], out["span_us"])
    return Table(out)
