"""What one rank contributes to the job's answers, small enough to send over a network.

:func:`rank_summary` runs the analyses of ``holotrace summary`` on one rank (holotrace's rules) and keeps
their per-rank rows, plus what the cross-rank answers need: kernel statistics as mergeable moments
(count, sum, min, max, mean, std per kernel name), the rank's collective kernels (for matching across
ranks), a launch-delay sketch (mergeable quantiles) and the worst launches. No frame has a row per event,
except ``collectives`` (one row per communication kernel). :mod:`holotrace.analysis.reduce` combines the
summaries of every rank into the job's tables.

Times that the analyses measure from the job's first event (``steps.start_us``, the launches' ``ts``) are
measured here from ``info["origin_ns"]`` (the source's first event; the rank's own when the source holds
one rank); the reduce moves them to the job's origin exactly.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from holotrace.analysis import idle, kernels, launches, overlap, steps, temporal
from holotrace.model.classify import NATIVE, KernelType, Kind
from holotrace.model.view import Columns, job_view
from holotrace.table import Table

__all__ = [
    "RankSummary",
    "rank_summary",
    "rank_collectives",
    "delay_sketch",
    "sketch_quantiles",
    "merge_sketch",
    "SKETCH_ACCURACY",
    "FRAMES",
]

#: relative accuracy of the launch-delay quantiles read from merged sketches
SKETCH_ACCURACY = 0.01
_GAMMA = (1 + SKETCH_ACCURACY) / (1 - SKETCH_ACCURACY)
_LOG_GAMMA = float(np.log(_GAMMA))
_ZERO_BUCKET = np.iinfo(np.int64).min  # values ≤ 1e-9 µs
#: the frames of a summary, in a fixed order
FRAMES = (
    "temporal",
    "temporal_by_step",
    "kernel_types_by_rank",
    "kernel_stats",
    "kernel_rank_stats",
    "gpu_ops",
    "idle",
    "idle_interval_stats",
    "overlap",
    "steps",
    "collectives",
    "launch_sketch",
    "launch_worst",
)
#: columns of the ``collectives`` frame (the rank's view columns that the cross-rank matching reads)
COLLECTIVE_COLUMNS = ("ts", "dur", "end", "kind", "kernel_type", "gpu", "iteration", "name")
#: the args the matching reads too (group and kind as text, "" when absent; a transfer's peer ranks, -1 when absent)
COLLECTIVE_TEXT_ARGS = ("process_group_name", "collective_name")
COLLECTIVE_INT_ARGS = ("p2p_src", "p2p_dst")


@dataclass
class RankSummary:
    """One rank's summary: ``frames`` (see :data:`FRAMES`) and ``info`` (plain values: origin, launch counts,
    and whatever the caller adds, e.g. model facts and findings)."""

    rank: int
    frames: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def nbytes(self) -> int:
        """Memory of the frames (deep: the text of object columns counted)."""
        total = 0
        for t in self.frames.values():
            for _, a in t.items():
                total += a.nbytes
                if a.dtype == object:
                    total += sum(sys.getsizeof(x) for x in a.tolist())
        return int(total)


#: the frames of a rank's summary that a caller may leave out (``rank_summary(leave_out=...)``): per-step and
#: per-kernel detail that only the full tables show
LEAVE_OUT_ABLE = ("temporal_by_step", "kernel_stats", "idle_interval_stats")


def rank_summary(
    source,
    rank: Optional[int] = None,
    *,
    top_launches: int = 3,
    launch_delay_cutoff: float = 100.0,
    collectives: Optional[Table] = None,
    launch_stats=None,
    leave_out: Collection[str] = (),
) -> RankSummary:
    """The summary of ``rank`` (default: the source's only or first rank) under holotrace's rules.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView` (holotrace's rules).
        top_launches: how many of the rank's worst delayed launches to keep.
        launch_delay_cutoff: µs above which a launch delay is an outlier (as ``holotrace summary``).
        collectives: the rank's :func:`rank_collectives` when the caller has them already.
        launch_stats: the rank's frame (or table) of :func:`holotrace.analysis.launches.launch_stats`
            (``details=True``, the same cutoff) when the caller has it already.
        leave_out: frames not computed (empty, with their columns): those of :data:`LEAVE_OUT_ABLE` a caller
            never shows.
    """
    unknown = set(leave_out) - set(LEAVE_OUT_ABLE)
    if unknown:
        raise ValueError(f"frames that cannot be left out: {sorted(unknown)}")
    view = job_view(source, NATIVE)
    r = int(view.ranks[0] if rank is None else view.select([rank])[0])
    sel = [r]
    origin = view.first_ts()
    all_names = len(view.strings) + 1  # a "top" that keeps every kernel
    dist = kernels.rank_distribution_table(view, rules=NATIVE, ranks=sel, top=all_names)
    only = lambda k: [] if k in leave_out else sel  # noqa: E731  (no rank: the empty frame, with its columns)
    frames = {
        "temporal": temporal.breakdown_table(view, rules=NATIVE, ranks=sel),
        "temporal_by_step": temporal.breakdown_table(view, rules=NATIVE, ranks=only("temporal_by_step"), per_step=True),
        "kernel_types_by_rank": kernels.type_breakdown_table(view, rules=NATIVE, ranks=sel, by_rank=True),
        "kernel_stats": kernels.kernel_stats_table(view, rules=NATIVE, ranks=only("kernel_stats")),
        "kernel_rank_stats": Table({c: dist[c] for c in dist.columns if c != "sum_vs_median"}, n=len(dist)),
        "gpu_ops": kernels.top_kernels_table(view, rules=NATIVE, ranks=sel, top=all_names),
        "idle": idle.idle_breakdown_table(view, rules=NATIVE, ranks=sel),
        "idle_interval_stats": idle.idle_interval_stats_table(view, rules=NATIVE, ranks=only("idle_interval_stats")),
        "overlap": overlap.comm_comp_overlap_table(view, rules=NATIVE, ranks=sel),
        "steps": steps.step_times_table(view, rules=NATIVE, ranks=sel),
        "collectives": rank_collectives(view, r) if collectives is None else Table.of(collectives),
    }
    worst = None
    if launch_stats is None:  # the names decoded for the worst launches only
        got = launches.rank_launches_table(view, r, top=top_launches, launch_delay_cutoff=launch_delay_cutoff)
        rows, worst = got.rows, got.worst
    else:
        rows = Table.of(launch_stats)
    if not len(rows):
        worst = launches.all_launches_table({r: rows}).head(0)  # no launch: the empty table, with its columns
        delay, outliers = np.empty(0, dtype=np.float64), 0
    else:  # the rank's rows as they are (no stacked copy): the worst launches get the rank column
        if worst is None:
            worst = launches.worst_launches_table(rows, "launch_delay", "launch_delay_outlier", top_launches)
        worst = Table({"rank": np.full(len(worst), r, dtype=np.int64), **dict(worst.items())}, n=len(worst))
        delay = np.asarray(rows["launch_delay"], dtype=np.float64)
        outliers = int(np.count_nonzero(np.asarray(rows["launch_delay_outlier"], dtype=bool)))
    frames["launch_sketch"] = delay_sketch(delay)
    frames["launch_worst"] = worst
    v = view[r]
    info = {
        "rank": r,
        "origin_ns": origin,
        "first_ns": int(v["ts"][_first_row(v)]) + v.clock_offset if v.n else None,
        "clock_offset_ns": int(v.clock_offset),
        "launches": int(len(delay)),
        "launch_outliers": outliers,
        "launch_delay_cutoff": float(launch_delay_cutoff),
        "profiler_steps": steps.profiler_steps(view, rules=NATIVE, ranks=sel),
    }
    return RankSummary(r, frames, info)


def rank_collectives(view, r: int) -> Table:
    """The rank's communication kernels (view columns, names as text) and its first event: what
    :func:`holotrace.analysis.stragglers.collective_waits` reads to match collectives across ranks."""
    v = view[r]
    g = v.rows_where("gpu", True)  # kernels are GPU work: the communication kernels found among its rows
    rows = g[(v["kind"][g] == int(Kind.KERNEL)) & (v["kernel_type"][g] == int(KernelType.COMMUNICATION))]
    if v.n:  # the first event keeps the rank's start on the common clock
        first = _first_row(v)
        at = int(np.searchsorted(rows, first))
        if at == len(rows) or rows[at] != first:
            rows = np.insert(rows, at, first)
    out = {c: v[c][rows] for c in COLLECTIVE_COLUMNS if c != "name"}
    out["name"] = _text(view.names(v["name"][rows]))
    for c in COLLECTIVE_TEXT_ARGS:
        ids = _arg_at(v, c, rows) if c in v.model else np.full(len(rows), -1)
        out[c] = _text(np.where(ids >= 0, view.names(np.maximum(ids, 0)), ""))
    for c in COLLECTIVE_INT_ARGS:
        out[c] = (_arg_at(v, c, rows) if c in v.model else np.full(len(rows), -1)).astype(np.int64)
    return Table(out, n=len(rows))


def _first_row(v) -> int:
    """Position of the rank's first event (the first of equal starts), found once per rank view."""
    return v.derived(("first_row",), lambda: int(np.argmin(v["ts"])))


def _arg_at(v, column: str, rows: np.ndarray) -> np.ndarray:
    """``v.arg(column)[rows]``, read at those rows of the model's column when the view holds the model's rows in
    order (as :meth:`~holotrace.model.view.RankView.arg` reads it): the same values, without a copy of the
    whole column."""
    if isinstance(v.cols, Columns) and not v.cols.is_made("row"):
        return np.asarray(v.model[column])[rows]
    return v.arg(column)[rows]


def _text(values) -> np.ndarray:
    """Text as an object array of ``str``."""
    out = np.empty(len(values), dtype=object)
    out[:] = [str(x) for x in values]
    return out


def delay_sketch(values: np.ndarray) -> Table:
    """A mergeable quantile sketch of non-negative values: counts per logarithmic bucket (relative accuracy
    :data:`SKETCH_ACCURACY`). Merge sketches by adding counts of equal buckets."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    small = x <= 1e-9
    b = np.ceil(np.log(x[~small]) / _LOG_GAMMA).astype(np.int64)
    keys, counts = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if len(b):  # a few thousand buckets at most (1e-9 to 1e12 µs): counted, not sorted
        lo = int(b.min())
        per = np.bincount(b - lo)
        keys = np.flatnonzero(per)
        keys, counts = keys.astype(np.int64) + lo, per[keys].astype(np.int64)
    n_small = int(np.count_nonzero(small))
    if n_small:  # the zero bucket sorts first
        keys, counts = np.r_[np.int64(_ZERO_BUCKET), keys], np.r_[np.int64(n_small), counts]
    return Table({"bucket": keys.astype(np.int64), "count": counts.astype(np.int64)})


def merge_sketch(buckets, counts) -> tuple[np.ndarray, np.ndarray]:
    """Sketch rows merged: ``(buckets ascending, distinct; the counts of equal buckets added)``, int64."""
    keys, at = np.unique(np.asarray(buckets, dtype=np.int64), return_inverse=True)
    per = np.zeros(len(keys), dtype=np.int64)
    np.add.at(per, at.reshape(-1), np.asarray(counts, dtype=np.int64))
    return keys, per


def sketch_quantiles(sketch, qs) -> list[float]:
    """Quantiles (0..1) of the values a (merged) sketch counts (a table or frame of ``bucket, count`` rows, equal
    buckets added); NaN when it is empty. Each is within :data:`SKETCH_ACCURACY` relative error of a value at
    that rank."""
    sketch = Table.of(sketch)
    if sketch.empty:
        return [float("nan")] * len(qs)
    keys, per = merge_sketch(sketch["bucket"], sketch["count"])
    cum = np.cumsum(per)
    n = int(cum[-1])
    out = []
    for q in qs:
        k = keys[int(np.searchsorted(cum, q * (n - 1), side="right"))]
        out.append(0.0 if k == _ZERO_BUCKET else float(2 * _GAMMA**k / (_GAMMA + 1)))
    return out
