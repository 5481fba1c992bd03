"""Profiler steps: which ``ProfilerStep#N`` a job has, and how long each took per rank.

:func:`profiler_steps` and :func:`step_times` are holotrace's API (every step
in the files; nothing is dropped). :func:`hta_profiler_steps` reproduces
HTA's ``get_profiler_steps`` on HTA's loaded tables (where the last step has
already been dropped unless ``include_last_profiler_step``).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import intervals
from holotrace.analysis._select import gpu_activity, job_ranks, name_codes
from holotrace.model.classify import hta_profiler_step_number
from holotrace.model.link import isin_ids

__all__ = ["profiler_steps", "step_times", "hta_profiler_steps"]



def profiler_steps(job, *, ranks: Optional[Sequence[int]] = None) -> list[int]:
    """Sorted distinct ``ProfilerStep#N`` numbers over the ranks (empty when the trace has none)."""
    found: set[int] = set()
    for rank in job_ranks(job, ranks):
        found.update(int(s) for s in job.rank(rank).step_table["step"].to_numpy())
    return sorted(found)


def step_times(job, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Per rank and step: the CPU step span and the GPU work launched in it.

    Times are in µs; ``start_us`` is relative to the job's time origin
    (earliest event over all ranks, common clock).

    Returns:
        Columns ``rank, step, start_us, dur_us, gpu_events, gpu_busy_us,
        gpu_span_us``: ``dur_us`` is the ``ProfilerStep#N`` annotation's
        duration; GPU columns cover the kernels, memcpy and memset launched
        from the step (union length and first-start-to-last-end span; 0 when
        none). One row per (rank, step), by rank then step. A rank without
        ProfilerStep annotations has no rows.
    """
    rows = []
    origin = job.origin_ns
    for rank in job_ranks(job, ranks):
        t = job.rank(rank)
        st = t.step_table
        if st.empty:
            continue
        # one row per step number: the outermost annotation (earliest start, latest end)
        span = st.groupby("step").agg(ts_ns=("ts_ns", "min"), end_ns=("end_ns", "max")).reset_index()
        ev = t.events
        gpu = ev[gpu_activity(ev) & (ev["iteration"].to_numpy() >= 0)]
        busy, gspan, count = {}, {}, {}
        for step, g in gpu.groupby("iteration", sort=True):
            u = intervals.merge(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
            busy[int(step)], gspan[int(step)], count[int(step)] = intervals.total_length(u), intervals.span(u), len(g)
        for step, ts, end in span.itertuples(index=False):  # one row per step, not per event
            step = int(step)
            rows.append((int(rank), step, (ts + t.clock_offset_ns - origin) / 1000.0, (end - ts) / 1000.0,
                         count.get(step, 0), busy.get(step, 0) / 1000.0, gspan.get(step, 0) / 1000.0))
    cols = ["rank", "step", "start_us", "dur_us", "gpu_events", "gpu_busy_us", "gpu_span_us"]
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"rank": np.int64, "step": np.int64, "start_us": np.float64, "dur_us": np.float64,
                       "gpu_events": np.int64, "gpu_busy_us": np.float64, "gpu_span_us": np.float64})


def hta_profiler_steps(frames: Mapping[int, pd.DataFrame], id_names: Optional[Sequence[str]] = None) -> list[int]:
    """HTA's ``get_profiler_steps``: sorted distinct step numbers of rows named ``ProfilerStep…``.

    ``frames`` are HTA tables (or dicts of their columns, with ``id_names``). With ``id_names``, the
    strings the ``name`` ids index, only the ids of step names are looked for in each table; otherwise
    each distinct name is decoded once.
    """
    found: set[int] = set()
    if id_names is not None:
        numbers = {i: k for i, k in enumerate(map(hta_profiler_step_number, id_names)) if k >= 0}
        ids = np.array(list(numbers), dtype=np.int64)
        for df in frames.values():
            names = np.asarray(df["name"])
            found.update(numbers[int(i)] for i in pd.unique(names[isin_ids(names, ids)]))
        return sorted(found)
    for df in frames.values():
        for n in name_codes(df, np.arange(len(df))).categories:
            k = hta_profiler_step_number(n) if isinstance(n, str) else -1
            if k >= 0:
                found.add(k)
    return sorted(found)