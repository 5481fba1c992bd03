"""Communication / computation overlap (spec 22).

Per rank: ``overlap = |COMM ∩ COMP|`` where COMM and COMP are the unions of
communication and computation kernels; the percentage is over communication
time — "how much of the communication was hidden behind compute".

:func:`comm_comp_overlap` is holotrace's API; :func:`hta_comm_comp_overlap`
reproduces HTA's ``get_comm_comp_overlap``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import intervals
from holotrace.analysis._select import KernelType, gpu_activity, hta_kernel_types, hta_stream_rows, job_ranks, name_codes

__all__ = ["OverlapTimes", "overlap_times", "comm_comp_overlap", "hta_comm_comp_overlap", "HTA_COLUMNS"]

HTA_COLUMNS = ["rank", "comp_comm_overlap_pctg"]


class OverlapTimes(NamedTuple):
    """Communication, computation and overlapped time, in the unit of the inputs."""

    comm: float
    comp: float
    overlap: float


def overlap_times(start: np.ndarray, end: np.ndarray, ktype: np.ndarray) -> OverlapTimes:
    """Union lengths of communication and computation kernels and of their intersection."""
    comm = intervals.merge(start[ktype == KernelType.COMMUNICATION], end[ktype == KernelType.COMMUNICATION])
    comp = intervals.merge(start[ktype == KernelType.COMPUTATION], end[ktype == KernelType.COMPUTATION])
    return OverlapTimes(
        intervals.total_length(comm), intervals.total_length(comp), intervals.intersection_length(comm, comp)
    )


def comm_comp_overlap(job, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Communication/computation overlap of each rank (holotrace schema).

    GPU activity is kernels, memcpy and memset; types come from the model's
    rule table.

    Returns:
        Columns ``rank, comm_us, comp_us, overlap_us, overlap_pctg,
        has_communication``. ``overlap_pctg`` = 100 × overlap / comm,
        unrounded. A rank without communication kernels has ``comm_us = 0``,
        ``overlap_pctg = 0.0`` and ``has_communication = False`` (no NaN).
    """
    rows = []
    for rank in job_ranks(job, ranks):
        ev = job.rank(rank).events
        g = ev[gpu_activity(ev)]
        t = overlap_times(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy(), g["kernel_type"].to_numpy())
        rows.append((int(rank), t.comm / 1000.0, t.comp / 1000.0, t.overlap / 1000.0))
    out = pd.DataFrame(rows, columns=["rank", "comm_us", "comp_us", "overlap_us"]).astype(
        {"rank": np.int64, "comm_us": np.float64, "comp_us": np.float64, "overlap_us": np.float64}
    )
    comm = out["comm_us"].to_numpy()
    has = comm > 0
    out["overlap_pctg"] = np.where(has, 100.0 * out["overlap_us"].to_numpy() / np.where(has, comm, 1.0), 0.0)
    out["has_communication"] = has
    return out


def hta_comm_comp_overlap(frames: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """HTA's ``get_comm_comp_overlap`` on HTA-shaped per-rank tables.

    Returns:
        Columns ``rank, comp_comm_overlap_pctg`` (2 decimals); ``NaN`` for a
        rank without communication kernels, as HTA (without its warning).
    """
    rows = []
    for rank in sorted(frames):
        df = frames[rank]
        sel = hta_stream_rows(df)
        ts = df["ts"].to_numpy(dtype=np.float64)[sel]
        dur = df["dur"].to_numpy(dtype=np.float64)[sel]
        t = overlap_times(ts, ts + dur, hta_kernel_types(name_codes(df, sel)))
        ratio = t.overlap / t.comm if t.comm != 0 else np.nan
        rows.append((int(rank), float(np.round(100 * ratio, 2))))
    out = pd.DataFrame(rows, columns=HTA_COLUMNS)
    return out.astype({"rank": np.int64, "comp_comm_overlap_pctg": np.float64})
