"""Communication / computation overlap (spec 22).

Per rank: ``overlap = |COMM ∩ COMP|`` where COMM and COMP are the unions of
communication and computation kernels; the percentage is over communication
time — "how much of the communication was hidden behind compute".

:func:`comm_comp_overlap` is the analysis; GPU work, times and kernel types
come from the rule set (holotrace's or HTA's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

from holotrace.analysis import gpu_union, intervals
from holotrace.model.classify import KernelType, RuleSet
from holotrace.model.view import resolve
from holotrace.table import Table

__all__ = ["OverlapTimes", "overlap_times", "comm_comp_overlap", "comm_comp_overlap_table"]


class OverlapTimes(NamedTuple):
    """Communication, computation and overlapped time, in the unit of the inputs."""

    comm: float
    comp: float
    overlap: float


def overlap_times(start: np.ndarray, end: np.ndarray, ktype: np.ndarray) -> OverlapTimes:
    """Union lengths of communication and computation kernels and of their intersection."""
    comm = intervals.merge(start[ktype == KernelType.COMMUNICATION], end[ktype == KernelType.COMMUNICATION])
    comp = intervals.merge(start[ktype == KernelType.COMPUTATION], end[ktype == KernelType.COMPUTATION])
    return _times(comm, comp)


def _times(comm: intervals.Intervals, comp: intervals.Intervals) -> OverlapTimes:
    """:func:`overlap_times` from the unions of the communication and the computation kernels."""
    return OverlapTimes(
        intervals.total_length(comm), intervals.total_length(comp), intervals.intersection_length(comm, comp)
    )


def comm_comp_overlap(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None):
    """:func:`comm_comp_overlap_table` as a pandas frame."""
    return comm_comp_overlap_table(source, rules=rules, ranks=ranks).to_pandas()


def comm_comp_overlap_table(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None) -> Table:
    """Communication/computation overlap of each rank.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job).
        ranks: ranks to report (default: all, ascending).

    Returns:
        Columns ``rank, comm_us, comp_us, overlap_us, overlap_pctg, has_communication``.
        ``overlap_pctg`` = 100 × (overlap / comm), unrounded. A rank without communication kernels
        has ``comm_us = 0``, ``overlap_pctg = 0.0`` and ``has_communication = False`` (no NaN).
    """
    view = resolve(source, rules)
    chosen = view.select(ranks)
    times = []
    for rank in chosen:
        v = view[rank]
        t = _times(gpu_union.union(v, int(KernelType.COMMUNICATION)), gpu_union.union(v, int(KernelType.COMPUTATION)))
        times.append((t.comm, t.comp, t.overlap))
    t = view.us(np.array(times, dtype=np.float64).reshape(-1, 3))
    comm, overlap = t[:, 0], t[:, 2]
    has = comm > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        pctg = np.where(has, 100.0 * (overlap / np.where(has, comm, 1.0)), 0.0)
    return Table(
        {
            "rank": np.array(chosen, dtype=np.int64),
            "comm_us": comm,
            "comp_us": t[:, 1],
            "overlap_us": overlap,
            "overlap_pctg": pctg,
            "has_communication": has,
        }
    )
