"""HTA's reading of a trace (spec 10-11): the rows, times, links and iterations HTA 0.6.1's loader leaves.

Used by :func:`holotrace.model.view.job_view` under a rule set with ``hta_table``:

* rows: events with a duration and a category other than ``Trace``;
* µs times: integer-µs traces keep their values; traces with fractional ``ts`` are rounded HTA's way
  (start up, end down: ``dur`` may become −1), then aligned to the job's earliest rounded start;
* ``index_correlation`` / ``iteration`` by HTA's rules (iteration is float64 with NaN when a device row
  sits on stream 0);
* the last ``ProfilerStep`` and what it launched dropped (unless ``include_last_step``), in HTA's row order
  (GPU rows, then CPU rows);
* ``gpu`` = every row carrying a stream (HTA's selection for its breakdowns); ``kernel_type`` by HTA's rules of the rule table
  (family ``hta``), by name only; ``comm_op`` is −1.

One difference on purpose (docs/compatibility.md): ``end`` is ``ts + dur`` on the aligned clock.
"""

from __future__ import annotations

import numpy as np

from holotrace.exec.pool import thread_map
from holotrace.model import link
from holotrace.model.classify import HTA_PROFILER_STEP, HTA_SYNC_EVENT_NAMES, hta_profiler_step_number
from holotrace.model.comm_evidence import classify_rank
from holotrace.model.rule_table import hta_table

__all__ = ["hta_rank_columns", "as_double_us"]


def hta_rank_columns(job, ranks: list[int], include_last_step: bool) -> dict[int, dict[str, np.ndarray]]:
    """HTA's view columns of ``ranks`` (the alignment offset is taken over every rank of the job)."""
    step_numbers = np.array([hta_profiler_step_number(x) for x in job.strings.table], dtype=np.int64)
    base = thread_map(lambda r: _unaligned(job, r, step_numbers), list(job.ranks))
    starts = [int(b["ts"].min()) for b in base.values() if len(b["ts"])]
    min_ts = min(starts) if starts else 0
    steps = job.strings.matching(HTA_PROFILER_STEP)
    return thread_map(lambda r: _finish(job, r, base[r], steps, min_ts, include_last_step), ranks)


def as_double_us(ns: np.ndarray) -> np.ndarray:
    """The double a JSON parser makes of the µs text of ``ns`` (whole part exact, then + fraction)."""
    whole = ns // 1000
    return whole.astype(np.float64) + (ns - whole * 1000) / 1000.0


def _unaligned(job, rank: int, step_numbers: np.ndarray) -> dict[str, np.ndarray]:
    """One rank's rows with HTA's µs times (not yet aligned), links and iterations, in file order."""
    t = job.rank(rank)
    c = t.columns
    s = job.strings
    keep = (c["cat"] >= 0) & (c["cat"] != s.id("Trace"))
    idx = np.flatnonzero(keep)
    ts_ns, dur_ns = c["ts_ns"][idx], c["dur_ns"][idx]
    if t.ts_is_float:
        # HTA rounds the parsed doubles: start up, end down (dur may become -1)
        ts_f, dur_f = as_double_us(ts_ns), as_double_us(dur_ns)
        ts = np.ceil(ts_f).astype(np.int64)
        dur = (np.floor(ts_f + dur_f).astype(np.int64) - ts).astype(np.float64)
    else:
        ts = ts_ns // 1000
        dur = dur_ns / 1000.0
    cols: dict[str, np.ndarray] = {
        "row": idx.astype(np.int64),
        "index": c["index"][idx].astype(np.int64),
        "cat": c["cat"][idx].astype(np.int64),
        "name": c["name"][idx].astype(np.int64),
        "pid": c["pid"][idx].astype(np.int64),
        "tid": c["tid"][idx].astype(np.int64),
        "ts": ts.astype(np.int64),
        "dur": dur,
        "stream": c["stream"][idx].astype(np.int64),
        "correlation": c["correlation"][idx].astype(np.int64),
        "kind": c["kind"][idx].astype(np.int8),
    }
    name, stream, corr = cols["name"], cols["stream"], cols["correlation"]
    sync_ids = [i for i in (s.id(x) for x in HTA_SYNC_EVENT_NAMES) if i >= 0]
    is_gpu = ((stream >= 0) & (corr >= 0)) | np.isin(name, sync_ids)
    # index_correlation: -1 no correlation, 0 partner absent, else the partner's index
    has = corr != -1
    partner = link.correlate(corr, has & ~is_gpu, has & is_gpu)
    index = cols["index"]
    cols["index_correlation"] = np.where(partner >= 0, index[np.clip(partner, 0, None)], np.minimum(corr, 0)).astype(
        np.int64
    )
    cols["_is_gpu"] = is_gpu
    cols["iteration"] = _iterations(cols, step_numbers, s.id("cpu_op"))
    return cols


def _iterations(cols: dict, step_numbers: np.ndarray, cpu_op_id: int) -> np.ndarray:
    """HTA 10.1: CPU rows by the ``ProfilerStep`` containing their start; launched rows by their launch."""
    name, stream, ts = cols["name"], cols["stream"], cols["ts"]
    step_num = (
        np.where(name >= 0, step_numbers[np.clip(name, 0, None)], -1) if len(step_numbers) else np.full(len(name), -1)
    )
    sr = np.flatnonzero(step_num >= 0)
    contain = (
        link.containing_step(ts, ts[sr], ts[sr] + cols["dur"][sr], step_num[sr]) if len(sr) else np.full(len(name), -1)
    )
    by_time = (stream < 0) | ((stream == 0) & (cols["cat"] == cpu_op_id))
    it = np.full(len(name), np.nan)
    it[by_time] = contain[by_time]
    launched = stream > 0
    icorr = cols["index_correlation"]
    src = np.where(launched & (icorr > 0), icorr, -1)
    ok = src > 0
    it[launched] = -1
    if ok.any():
        lookup = link.position_lookup(cols["index"])
        wanted = src[ok]
        pos = np.full(len(wanted), -1, dtype=np.int64)
        inside = wanted < len(lookup)
        pos[inside] = lookup[wanted[inside]]
        good = pos >= 0
        got = np.full(len(wanted), -1.0)
        p = pos[good]
        got[good] = np.where(by_time[p], contain[p], -1).astype(np.float64)
        it[ok] = got
    return it if np.isnan(it).any() else it.astype(np.int64)


def _finish(job, rank: int, base: dict, steps: np.ndarray, min_ts: int, include_last: bool) -> dict[str, np.ndarray]:
    """Kept rows (last-step filter, HTA's order), aligned times, the view's derived columns."""
    rows = None
    if len(steps) >= 2 and len(base["ts"]):
        rows = _rows_after_last_step_filter(base, steps, min_ts, include_last)
    names = (
        "row",
        "index",
        "cat",
        "name",
        "pid",
        "tid",
        "ts",
        "dur",
        "stream",
        "correlation",
        "kind",
        "index_correlation",
        "iteration",
    )
    cols = {k: (base[k].copy() if rows is None else base[k][rows]) for k in names}
    cols["ts"] = cols["ts"] - min_ts
    cols["end"] = cols["ts"] + cols["dur"]
    gpu = cols["stream"] != -1
    cols["gpu"] = gpu
    cols.update(classify_rank(cols, job.strings, hta_table(), gpu=gpu, by_launch=False))  # HTA's name-only types
    icorr = cols["index_correlation"]
    partner = np.full(len(icorr), -1, dtype=np.int64)
    linked = np.flatnonzero(icorr > 0)
    if len(linked):
        lookup = link.position_lookup(cols["index"])
        want = icorr[linked]
        inside = want < len(lookup)
        partner[linked[inside]] = lookup[want[inside]]
    cols["partner"] = partner
    return cols


def _rows_after_last_step_filter(cols: dict, step_ids: np.ndarray, min_ts: int, include_last: bool) -> np.ndarray:
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
