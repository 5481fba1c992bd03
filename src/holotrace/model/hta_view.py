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


# the arg columns the links need; with the columns above, the "lean" table the analyses read
_LINK_ARGS = ("stream", "correlation")
_LEAN_COLUMNS = ("index", "cat", "name", "pid", "tid", "ts", "dur", *_LINK_ARGS, "index_correlation", "iteration")


def _unaligned(job, rank: int) -> dict[str, np.ndarray]:
    """One rank's rows with HTA's µs times (not yet aligned), HTA's links, in file order.

    Plain numpy columns (text args as string ids): the DataFrame is built once, in
    :func:`hta_frame`, after the rows are chosen, so no text column is ever filtered.
    """
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
    cols: dict[str, np.ndarray] = {
        "index": c["index"][idx],
        "cat": c["cat"][idx].astype(np.int64),
        "name": c["name"][idx].astype(np.int64),
        "pid": c["pid"][idx].astype(np.int64),
        "tid": c["tid"][idx].astype(np.int64),
        "ts": ts.astype(np.int64),
        "dur": dur,
    }
    for col in _LINK_ARGS:  # the other arg columns are read by hta_frame when asked for
        cols[col] = c[col][idx].astype(np.int64)
    cols["_rows"] = idx
    name = cols["name"]
    stream = cols["stream"]
    corr = cols["correlation"]
    sync_ids = [i for i in (s.id("Event Sync"), s.id("Context Sync")) if i >= 0]
    is_gpu = ((stream >= 0) & (corr >= 0)) | np.isin(name, sync_ids)
    # index_correlation: -1 no correlation, 0 partner absent, else the partner's index
    icorr = np.minimum(corr, 0)
    has = corr != -1
    partner = link.correlate(corr, has & ~is_gpu, has & is_gpu)
    index_arr = cols["index"]
    linked = partner >= 0
    icorr = np.where(linked, index_arr[np.clip(partner, 0, None)], icorr)
    cols["index_correlation"] = icorr.astype(np.int64)
    cols["_is_gpu"] = is_gpu
    # iteration (HTA 10.1): rows starting with ProfilerStep, numbered by ProfilerStep\s*#\s*(\d+)
    step_num = s.lookup(name, _step_numbers(job), -1)
    is_step = s.mask(name, lambda x: x.startswith("ProfilerStep")) & (step_num >= 0)
    sr = np.flatnonzero(is_step)
    ts_a = cols["ts"]
    end_a = ts_a + cols["dur"]
    contain = link.containing_step(ts_a, ts_a[sr], end_a[sr], step_num[sr]) if len(sr) else np.full(len(idx), -1)
    cpu_op_id = s.id("cpu_op")
    by_time = (stream < 0) | ((stream == 0) & (cols["cat"] == cpu_op_id))
    it = np.full(len(idx), np.nan)
    it[by_time] = contain[by_time]
    launched = stream > 0
    pos_by_index = link.position_lookup(index_arr)
    src = np.where(launched & (icorr > 0), icorr, -1)
    ok = src > 0
    it[launched] = -1
    if ok.any():
        it[ok] = _iteration_of(contain, by_time, pos_by_index, src, ok)
    cols["iteration"] = it if np.isnan(it).any() else it.astype(np.int64)
    return cols


def _step_numbers(job) -> np.ndarray:
    """``ProfilerStep#N`` number of every string of the job (-1 for other strings), memoized."""
    key = ("hta_step_numbers", len(job.strings))
    if key not in job._memo:
        job._memo[key] = np.array([hta_profiler_step_number(x) for x in job.strings.table], dtype=np.int64)
    return job._memo[key]


def _as_double_us(ns: np.ndarray) -> np.ndarray:
    """The double a JSON parser makes of the µs text of ``ns`` (whole part exact, then + fraction)."""
    whole = ns // 1000
    return whole.astype(np.float64) + (ns - whole * 1000) / 1000.0


def _iteration_of(contain, by_time, pos_by_index, src, ok):
    """Iteration of the partner row (whose own iteration came from time containment)."""
    wanted = src[ok]
    inside = wanted < len(pos_by_index)
    pos = np.full(len(wanted), -1, dtype=np.int64)
    pos[inside] = pos_by_index[wanted[inside]]
    good = pos >= 0
    out = np.full(len(wanted), -1.0)
    p = pos[good]
    out[good] = np.where(by_time[p], contain[p], -1).astype(np.float64)
    return out


def hta_min_ts(job) -> int:
    """HTA's alignment offset: the earliest (rounded µs) start over all ranks."""
    key = ("hta_min_ts",)
    if key not in job._memo:
        starts = [int(cols["ts"].min()) for cols in (_unaligned_cached(job, r) for r in job.ranks) if len(cols["ts"])]
        job._memo[key] = min(starts) if starts else 0
    return job._memo[key]


def _unaligned_cached(job, rank: int) -> dict[str, np.ndarray]:
    key = ("hta_unaligned", rank)
    if key not in job._memo:
        job._memo[key] = _unaligned(job, rank)
    return job._memo[key]


def hta_step_symbols(job) -> list[int]:
    """Ids of names matching HTA's ``^ProfilerStep#(\\d+)`` anywhere in the job."""
    return job.strings.matching(HTA_PROFILER_STEP).tolist()


def hta_frame(job, rank: int, include_last_profiler_step: bool = False, lean: bool = False) -> pd.DataFrame:
    """HTA's loaded table for one rank (see the module docstring). Read-only: do not modify.

    ``lean=True`` keeps only the columns holotrace's analyses read (``index, cat, name, pid, tid,
    ts, dur, stream, correlation, index_correlation, iteration, end, s_name, s_cat``): decoding
    HTA's other arg columns, the text ones above all, is most of the cost of building the table.
    """
    key = ("hta_frame", int(rank), bool(include_last_profiler_step), bool(lean))
    if key in job._memo:
        return job._memo[key].copy(deep=False)
    if lean:
        data = _lean_columns(job, int(rank), bool(include_last_profiler_step))
    else:  # the lean table plus HTA's other arg columns, in HTA's column order
        data = _with_arg_columns(job, int(rank), bool(include_last_profiler_step),
                                 hta_columns(job, rank, include_last_profiler_step, lean=True))
    df = pd.DataFrame(data, index=np.asarray(data["index"]), copy=False)
    job._memo[key] = df
    job._memo[("hta_columns", *key[1:])] = data  # the same arrays (pandas keeps them without a copy)
    return df.copy(deep=False)


def _kept_rows(job, rank: int, include_last_profiler_step: bool):
    """``(unaligned columns, kept row positions or None for all rows in file order)``."""
    base = _unaligned_cached(job, rank)
    steps = hta_step_symbols(job)
    if len(steps) >= 2 and len(base["ts"]):
        return base, _rows_after_last_step_filter(base, steps, hta_min_ts(job), include_last_profiler_step)
    return base, None


def _lean_columns(job, rank: int, include_last_profiler_step: bool) -> dict:
    """The columns of the lean table (see :func:`hta_frame`)."""
    base, rows = _kept_rows(job, rank, include_last_profiler_step)

    def pick(v: np.ndarray) -> np.ndarray:
        return v.copy() if rows is None else v[rows]  # the table never shares memory with the memo

    data = {col: pick(base[col]) for col in _LEAN_COLUMNS}
    data["ts"] = data["ts"] - hta_min_ts(job)
    data["end"] = data["ts"] + data["dur"]
    data["s_name"] = text_column(job.strings, data["name"])
    data["s_cat"] = text_column(job.strings, data["cat"])
    return data


def _with_arg_columns(job, rank: int, include_last_profiler_step: bool, lean: dict) -> dict:
    """The lean columns with HTA's other arg columns added, in HTA's order."""
    base, rows = _kept_rows(job, rank, include_last_profiler_step)
    src = base["_rows"] if rows is None else base["_rows"][rows]
    c = job.rank(rank).columns
    data = {col: lean[col] for col in _LEAN_COLUMNS[:7]}
    for col in ARG_COLUMNS:
        if col in _LINK_ARGS:
            data[col] = lean[col]
        elif col in _TEXT_DEFAULTS:
            data[col] = text_column(job.strings, c[col][src], _TEXT_DEFAULTS[col])
        else:
            v = c[col][src]
            data[col] = v.astype(np.float64 if v.dtype.kind == "f" else np.int64)
    for col in ("index_correlation", "iteration", "end", "s_name", "s_cat"):
        data[col] = lean[col]
    return data


def hta_columns(job, rank: int, include_last_profiler_step: bool = False, lean: bool = False) -> dict:
    """The columns of :func:`hta_frame` as a dict of arrays (numpy, text as pandas string arrays).

    Reading a column here costs nothing, against a fraction of a millisecond through the DataFrame;
    the analyses that run in milliseconds use it. Read-only.
    """
    key = ("hta_columns", int(rank), bool(include_last_profiler_step), bool(lean))
    if key not in job._memo:
        hta_frame(job, rank, include_last_profiler_step, lean)
    return job._memo[key]


def hta_frames(job, ranks, include_last_profiler_step: bool = False, lean: bool = False) -> dict[int, pd.DataFrame]:
    """:func:`hta_frame` of several ranks, built on threads (numpy and pyarrow release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    from holotrace.exec.pool import cpu_count

    ranks = [int(r) for r in ranks]
    todo = [r for r in ranks if ("hta_frame", r, bool(include_last_profiler_step), bool(lean)) not in job._memo]
    workers = min(cpu_count(), len(todo))
    if workers > 1:
        with ThreadPoolExecutor(workers) as ex:
            list(ex.map(lambda r: _unaligned_cached(job, r), job.ranks))  # every rank: hta_min_ts needs them all
            list(ex.map(lambda r: hta_frame(job, r, include_last_profiler_step, lean), todo))
    return {r: hta_frame(job, r, include_last_profiler_step, lean) for r in ranks}


def _rows_after_last_step_filter(cols: dict, step_ids: list[int], min_ts: int, include_last: bool) -> np.ndarray:
    """HTA 11.4: drop the last ProfilerStep and what it launched. Kept row positions, GPU rows first."""
    is_gpu = cols["_is_gpu"]
    cpu = ~is_gpu
    if not cpu.any():
        return np.arange(len(is_gpu))
    ts, dur = cols["ts"], cols["dur"]
    steps = cpu & np.isin(cols["name"], step_ids)
    if include_last:
        # HTA compares aligned ts with the unaligned end: every CPU row passes
        last_end = (ts[steps] + dur[steps]).max() if steps.any() else (ts[cpu] + dur[cpu]).max()
        kept_cpu = cpu & (ts - min_ts <= last_end)
    else:
        last_start = ts[steps].max() if steps.any() else ts[cpu].min()
        kept_cpu = cpu & (ts < last_start)
    kept_gpu = is_gpu & link.isin_ids(cols["correlation"], cols["correlation"][kept_cpu])
    return np.concatenate([np.flatnonzero(kept_gpu), np.flatnonzero(kept_cpu)])


def text_column(strings, ids: np.ndarray, empty: str = ""):
    """Decode string ids (-1 → ``empty``) into the array pandas uses for text by default.

    With pandas' pyarrow-backed ``str`` dtype, the values are gathered by pyarrow from the
    job's table without creating a Python string per row; otherwise an object array.
    """
    ids = np.asarray(ids)
    dtype = default_text_dtype()
    if dtype is None:
        return strings.decode(ids, empty=empty)
    import pyarrow as pa

    table = strings.arrow(empty)
    pos = ids.astype(np.int64)  # widen first: small id dtypes cannot hold the table's length
    pos[pos < 0] = len(table) - 1
    return pd.arrays.ArrowStringArray(table.take(pa.array(pos)), dtype=dtype)


def default_text_dtype():
    """pandas' default text dtype when it is the pyarrow-backed ``str``, else None (object arrays)."""
    dtype = pd.Series([""]).dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return dtype
    return None
