"""Temporal breakdown: where each rank's GPU wall time goes (spec 20 §1).

Per rank, over the *kernel span* (first GPU activity start to last GPU
activity end):

* ``busy``  = length of the union of all GPU activity;
* ``idle``  = span − busy;
* ``compute`` = length of the union of COMPUTATION kernels (compute wins when
  it runs concurrently with communication or memory work);
* ``non_compute`` = busy − compute.

:func:`breakdown` is holotrace's API (GPU activity = kernels, memcpy, memset;
µs columns, unrounded percentages, optional per-step rows).
:func:`hta_temporal_breakdown` reproduces HTA's ``get_temporal_breakdown`` on
HTA's per-rank tables (S-stream selection: every event with a stream).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import intervals
from holotrace.analysis._select import KernelType, gpu_activity, hta_kernel_types, hta_stream_rows, job_ranks, name_codes

__all__ = ["TemporalTimes", "temporal_times", "breakdown", "hta_temporal_breakdown", "HTA_COLUMNS"]

HTA_COLUMNS = [
    "rank",
    "idle_time(us)",
    "compute_time(us)",
    "non_compute_time(us)",
    "kernel_time(us)",
    "idle_time_pctg",
    "compute_time_pctg",
    "non_compute_time_pctg",
]


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
    union = intervals.merge(start, end)
    span = intervals.span(union)
    busy = intervals.total_length(union)
    compute = intervals.total_length(intervals.merge(start[is_compute], end[is_compute]))
    return TemporalTimes(span, busy, span - busy, compute, busy - compute)


def _pctg(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    whole = np.asarray(whole, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.asarray(part, dtype=np.float64) / np.where(whole > 0, whole, 1.0)
    return np.where(whole > 0, 100.0 * ratio, np.nan)


def breakdown(job, *, ranks: Optional[Sequence[int]] = None, per_step: bool = False) -> pd.DataFrame:
    """Temporal breakdown of each rank (holotrace schema).

    GPU activity is every kernel, memcpy and memset (sync events and CPU ops
    that carry a stream are not GPU work). Times are exact: computed in
    integer nanoseconds, reported in µs.

    Args:
        job: a loaded :class:`holotrace.model.job.Job`.
        ranks: ranks to report (default: all, ascending).
        per_step: one row per (rank, profiler step) instead of per rank; a GPU
            event belongs to the step its launch ran in; events outside any
            step are left out of the per-step rows.

    Returns:
        Columns ``rank, [step,] gpu_events, span_us, busy_us, idle_us,
        compute_us, non_compute_us, idle_pctg, compute_pctg, non_compute_pctg``
        (percent of ``span_us``, unrounded). A rank without GPU activity has
        zeros and NaN percentages.
    """
    rows = []
    for rank in job_ranks(job, ranks):
        ev = job.rank(rank).events
        gpu = ev[gpu_activity(ev)]
        groups = [(None, gpu)] if not per_step else [
            (int(step), g) for step, g in gpu[gpu["iteration"].to_numpy() >= 0].groupby("iteration", sort=True)
        ]
        for step, g in groups:
            start = g["ts_ns"].to_numpy()
            end = g["end_ns"].to_numpy()
            is_comp = g["kernel_type"].to_numpy() == KernelType.COMPUTATION
            t = temporal_times(start, end, is_comp)
            row = {"rank": int(rank)}
            if per_step:
                row["step"] = step
            row.update(gpu_events=int(len(g)), span=t.span, busy=t.busy, idle=t.idle,
                       compute=t.compute, non_compute=t.non_compute)
            rows.append(row)
    cols = ["rank", *(["step"] if per_step else []), "gpu_events"]
    out = pd.DataFrame(rows, columns=cols + ["span", "busy", "idle", "compute", "non_compute"])
    for c in ("rank", "gpu_events", *(["step"] if per_step else [])):
        out[c] = out[c].astype(np.int64)
    for c in ("span", "busy", "idle", "compute", "non_compute"):
        out[f"{c}_us"] = out.pop(c).to_numpy(dtype=np.float64) / 1000.0
    for c in ("idle", "compute", "non_compute"):
        out[f"{c}_pctg"] = _pctg(out[f"{c}_us"], out["span_us"])
    return out


def hta_temporal_breakdown(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_temporal_breakdown`` on HTA-shaped per-rank tables.

    Args:
        frames: rank → table as HTA loads it (needs ``ts``, ``dur``,
            ``stream`` and the decoded name ``s_name``).

    Returns:
        HTA's columns (:data:`HTA_COLUMNS`), one row per rank ascending.
        Deviations from HTA, where HTA raises: a rank without any
        stream-carrying event gets zeros and NaN percentages (HTA: ``IndexError``);
        negative durations (left by HTA's rounding of sub-µs events) count as 0
        (HTA: ``AssertionError`` when they make a time negative).
    """
    rows = []
    for rank in sorted(frames):
        df = frames[rank]
        sel = hta_stream_rows(df)
        ts = df["ts"].to_numpy(dtype=np.float64)[sel]
        dur = df["dur"].to_numpy(dtype=np.float64)[sel]
        is_comp = hta_kernel_types(name_codes(df, sel)) == KernelType.COMPUTATION
        t = temporal_times(ts, ts + dur, is_comp)
        if t.idle > t.span or t.compute > t.span or t.non_compute < 0 or t.span < 0:
            # HTA fails an assertion here: its rounding of ns traces leaves dur = -1 on
            # sub-µs events. Such an event covers no time: count it as zero-length.
            t = temporal_times(ts, ts + np.maximum(dur, 0.0), is_comp)
        rows.append((int(rank), float(t.idle), float(t.compute), float(t.non_compute), float(t.span)))
    out = pd.DataFrame(rows, columns=HTA_COLUMNS[:5])
    out["rank"] = out["rank"].astype(np.int64)
    for c in HTA_COLUMNS[1:5]:
        out[c] = out[c].astype(np.float64)
    span = out["kernel_time(us)"].to_numpy()
    for src, dst in zip(HTA_COLUMNS[1:4], HTA_COLUMNS[5:8]):
        out[dst] = np.round(_pctg(out[src].to_numpy(), span), 2)
    return out
