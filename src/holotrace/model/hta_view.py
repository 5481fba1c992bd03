"""HTA's per-rank table, rebuilt from holotrace's model.

``hta_frame(job, rank)`` returns the DataFrame that HTA 0.6.1's
``TraceAnalysis(trace_dir=...).t.traces[rank]`` holds after loading, so that the
compat facade's analyses see exactly HTA's inputs:

* rows: events with a duration and a category other than ``Trace``;
* µs times: integer µs traces keep their values; traces with fractional ``ts``
  are rounded the HTA way (start up, end down: ``dur`` may become −1);
* ``ts`` aligned to HTA's ``min_ts`` (earliest rounded start over all ranks);
* ``stream`` / ``correlation`` / ``index_correlation`` / ``iteration`` by HTA's rules
  (iteration is float64 with NaN when a device row sits on stream 0);
* last-``ProfilerStep`` filtering and HTA's row order (GPU rows, then CPU rows).

Deliberate differences (see docs/compatibility.md): ``end`` = ``ts + dur`` on the
aligned clock (HTA keeps the unaligned value); ``name`` and ``cat`` are ids into
``job.strings`` with the strings in ``s_name`` / ``s_cat``; GPU rows whose
correlation matches several kept CPU rows appear once (HTA duplicates them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from holotrace.model import link
from holotrace.model.classify import HTA_PROFILER_STEP, hta_profiler_step_number

# HTA's default arg columns, in HTA's order: (column, default for absent values)
ARG_COLUMNS = (
    "stream", "correlation", "bytes", "memory_bw_gbps", "wait_on_stream", "wait_on_cuda_event_record_corr_id",
    "input_dims", "input_type", "input_strides", "external_id", "python_id", "python_parent_id", "collective_name",
    "in_msg_nelems", "out_msg_nelems", "msg_dtype", "group_size", "process_rank", "in_split_size", "out_split_size",
)
_TEXT_DEFAULTS = {"input_dims": "-1", "input_type": "-1", "input_strides": "-1", "in_split_size": "[]",
                  "out_split_size": "[]", "collective_name": "", "msg_dtype": ""}


def _unaligned(job, rank: int) -> pd.DataFrame:
    """One rank's rows with HTA's µs times (not yet aligned), HTA's links, in file order."""
    t = job.rank(rank)
    c = t.columns
    s = job.strings
    trace_id = s.id("Trace")
    keep = (c["cat"] >= 0) & (c["cat"] != trace_id)
    idx = np.flatnonzero(keep)
    ts_ns, dur_ns = c["ts_ns"][idx], c["dur_ns"][idx]
    if t.ts_is_float:
        # HTA rounds the parsed doubles: start up, end down (dur may become -1)
        ts_f, dur_f = _as_double_us(ts_ns), _as_double_us(dur_ns)
        ts = np.ceil(ts_f).astype(np.int64)
        end = np.floor(ts_f + dur_f).astype(np.int64)
        dur = (end - ts).astype(np.float64)
    else:
        ts = ts_ns // 1000
        dur = dur_ns / 1000.0
    df = pd.DataFrame({
        "index": c["index"][idx],
        "cat": c["cat"][idx].astype(np.int64),
        "name": c["name"][idx].astype(np.int64),
        "pid": c["pid"][idx].astype(np.int64),
        "tid": c["tid"][idx].astype(np.int64),
        "ts": ts.astype(np.int64),
        "dur": dur,
    })
    for col in ARG_COLUMNS:
        v = c[col][idx]
        if col in _TEXT_DEFAULTS:
            df[col] = s.decode(v, empty=_TEXT_DEFAULTS[col])
        else:
            df[col] = v.astype(np.float64 if v.dtype.kind == "f" else np.int64)
    name = df["name"].to_numpy()
    stream = df["stream"].to_numpy()
    corr = df["correlation"].to_numpy()
    sync_ids = [i for i in (s.id("Event Sync"), s.id("Context Sync")) if i >= 0]
    is_gpu = ((stream >= 0) & (corr >= 0)) | np.isin(name, sync_ids)
    # index_correlation: -1 no correlation, 0 partner absent, else the partner's index
    icorr = np.minimum(corr, 0)
    has = corr != -1
    partner = link.correlate(corr, has & ~is_gpu, has & is_gpu)
    index_arr = df["index"].to_numpy()
    linked = partner >= 0
    icorr = np.where(linked, index_arr[np.clip(partner, 0, None)], icorr)
    df["index_correlation"] = icorr.astype(np.int64)
    df["_is_gpu"] = is_gpu
    # iteration (HTA 10.1): rows starting with ProfilerStep, numbered by ProfilerStep\s*#\s*(\d+)
    step_num = s.lookup(name, np.array([hta_profiler_step_number(x) for x in s.table], dtype=np.int64), -1)
    is_step = s.mask(name, lambda x: x.startswith("ProfilerStep")) & (step_num >= 0)
    sr = np.flatnonzero(is_step)
    ts_a = df["ts"].to_numpy()
    end_a = ts_a + df["dur"].to_numpy()
    contain = link.containing_step(ts_a, ts_a[sr], end_a[sr], step_num[sr]) if len(sr) else np.full(len(df), -1)
    cpu_op_id = s.id("cpu_op")
    by_time = (stream < 0) | ((stream == 0) & (df["cat"].to_numpy() == cpu_op_id))
    it = np.full(len(df), np.nan)
    it[by_time] = contain[by_time]
    launched = stream > 0
    pos_by_index = pd.Series(np.arange(len(df)), index=index_arr)
    src = np.where(launched & (icorr > 0), icorr, -1)
    ok = src > 0
    it[launched] = -1
    if ok.any():
        it[ok] = _iteration_of(contain, by_time, pos_by_index, src, ok)
    df["iteration"] = it if np.isnan(it).any() else it.astype(np.int64)
    return df


def _as_double_us(ns: np.ndarray) -> np.ndarray:
    """The double a JSON parser makes of the µs text of ``ns`` (whole part exact, then + fraction)."""
    whole = ns // 1000
    return whole.astype(np.float64) + (ns - whole * 1000) / 1000.0


def _iteration_of(contain, by_time, pos_by_index, src, ok):
    """Iteration of the partner row (whose own iteration came from time containment)."""
    pos = pos_by_index.reindex(src[ok]).to_numpy()
    good = ~np.isnan(pos)
    out = np.full(int(ok.sum()), -1.0)
    p = pos[good].astype(np.int64)
    vals = np.where(by_time[p], contain[p], -1).astype(np.float64)
    out[good] = vals
    return out


def hta_min_ts(job) -> int:
    """HTA's alignment offset: the earliest (rounded µs) start over all ranks."""
    key = ("hta_min_ts",)
    if key not in job._memo:
        starts = [int(_unaligned_cached(job, r)["ts"].min()) for r in job.ranks if len(_unaligned_cached(job, r))]
        job._memo[key] = min(starts) if starts else 0
    return job._memo[key]


def _unaligned_cached(job, rank: int) -> pd.DataFrame:
    key = ("hta_unaligned", rank)
    if key not in job._memo:
        job._memo[key] = _unaligned(job, rank)
    return job._memo[key]


def hta_step_symbols(job) -> list[int]:
    """Ids of names matching HTA's ``^ProfilerStep#(\\d+)`` anywhere in the job."""
    return job.strings.matching(HTA_PROFILER_STEP).tolist()


def hta_frame(job, rank: int, include_last_profiler_step: bool = False) -> pd.DataFrame:
    """HTA's loaded table for one rank (see the module docstring). Read-only: do not modify."""
    key = ("hta_frame", int(rank), bool(include_last_profiler_step))
    if key in job._memo:
        return job._memo[key].copy(deep=False)
    base = _unaligned_cached(job, int(rank))
    min_ts = hta_min_ts(job)
    df = base.copy()
    steps = hta_step_symbols(job)
    if len(steps) >= 2 and len(df):
        df = _filter_last_step(df, steps, min_ts, include_last_profiler_step)
    df["ts"] = df["ts"] - min_ts
    df["end"] = df["ts"] + df["dur"]
    df["s_name"] = job.strings.decode(df["name"].to_numpy())
    df["s_cat"] = job.strings.decode(df["cat"].to_numpy())
    df = df.drop(columns=["_is_gpu"])
    df.index = df["index"].to_numpy()
    job._memo[key] = df
    return df.copy(deep=False)


def _filter_last_step(df: pd.DataFrame, step_ids: list[int], min_ts: int, include_last: bool) -> pd.DataFrame:
    """HTA 11.4: drop the last ProfilerStep and what it launched; GPU rows first."""
    is_gpu = df["_is_gpu"].to_numpy()
    cpu = df[~is_gpu]
    if cpu.empty:
        return df
    gpu = df[is_gpu]
    steps = cpu[np.isin(cpu["name"].to_numpy(), step_ids)]
    if include_last:
        # HTA compares aligned ts with the unaligned end: every CPU row passes
        cpu_ts_aligned = cpu["ts"].to_numpy() - min_ts
        last_end = (steps["ts"] + steps["dur"]).max() if len(steps) else (cpu["ts"] + cpu["dur"]).max()
        kept_cpu = cpu[cpu_ts_aligned <= last_end]
    else:
        last_start = steps["ts"].max() if len(steps) else cpu["ts"].min()
        kept_cpu = cpu[cpu["ts"].to_numpy() < last_start]
    kept_corr = np.unique(kept_cpu["correlation"].to_numpy())
    kept_gpu = gpu[np.isin(gpu["correlation"].to_numpy(), kept_corr)]
    return pd.concat([kept_gpu, kept_cpu], ignore_index=True)
