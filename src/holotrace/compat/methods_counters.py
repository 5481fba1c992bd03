"""HTA's counter methods: queue length, memory bandwidth, augmented trace files, CUPTI counters."""

from __future__ import annotations

import json
from enum import Flag, auto
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis import counters as _ctr
from holotrace.analysis import cupti as _cupti
from holotrace.compat.facade_base import FacadeBase, log
from holotrace.compat.raw_trace import AugmentedTrace
from holotrace.model.view_hta import as_double_us
from holotrace.render import trace_file

__all__ = ["CounterMethods", "TimeSeriesTypes"]


class TimeSeriesTypes(Flag):
    """The series :meth:`CounterMethods.generate_trace_with_counters` adds (combine with ``|``)."""

    QUEUE_LENGTH = auto()
    MEMCPY_BANDWIDTH = auto()


def series_types(time_series) -> TimeSeriesTypes:
    """``time_series`` as holotrace's :class:`TimeSeriesTypes`: ``None`` (both series), a member of this enum
    or of HTA's own ``hta.trace_analysis.TimeSeriesTypes`` (matched by member name), a combination of them,
    a name (``"QUEUE_LENGTH"``, ``"queue_length|memcpy_bandwidth"``) or the flag value (1, 2, 3)."""
    if time_series is None:
        return TimeSeriesTypes.QUEUE_LENGTH | TimeSeriesTypes.MEMCPY_BANDWIDTH
    if isinstance(time_series, TimeSeriesTypes):
        return time_series
    if isinstance(time_series, str):
        names = [p.strip().upper() for p in time_series.replace(",", "|").split("|") if p.strip()]
    elif isinstance(time_series, Flag):  # another enum with the same members (HTA's)
        names = [m.name for m in type(time_series) if m.value and (m.value & time_series.value) == m.value]
    elif isinstance(time_series, int) and not isinstance(time_series, bool):
        names = [m.name for m in TimeSeriesTypes if m.value & time_series]
        if time_series <= 0 or time_series & ~sum(m.value for m in TimeSeriesTypes):
            names = [str(time_series)]
    else:
        raise TypeError(f"time_series must be a TimeSeriesTypes value, not {type(time_series).__name__}")
    out = TimeSeriesTypes(0)
    for name in names:
        if name not in TimeSeriesTypes.__members__:
            raise ValueError(f"unknown time series {name!r}; expected {' or '.join(TimeSeriesTypes.__members__)}")
        out |= TimeSeriesTypes[name]
    return out


class CounterMethods(FacadeBase):
    """HTA's counter methods: queue length, memory bandwidth, augmented trace files, CUPTI counters."""

    # ------------------------------------------------------------------ queue length
    def get_queue_length_time_series(
        self, ranks: Optional[list[int]] = None, hta_compat: Optional[bool] = None
    ) -> dict[int, pd.DataFrame]:
        """Per rank: the queue length of each stream as change points (``ts`` µs, ``pid``, ``tid``,
        ``stream``, ``queue_length``; index ``index``). +1 at each launch call with its GPU operation in
        the trace, −1 when that operation starts; +1 before −1 at equal times (HTA: arbitrary). Ranks
        without launches are omitted. A negative value is logged as a warning (``negative_queue_length``)."""
        out = _ctr.queue_length(self.view, rules=self._rules(hta_compat), ranks=self._ranks_arg(ranks))
        for f in _ctr.queue_length_findings(out, view=self.view):
            log.warning(f.line())
        return out

    def get_queue_length_summary(
        self, ranks: Optional[list[int]] = None, hta_compat: Optional[bool] = None
    ) -> Optional[pd.DataFrame]:
        """``describe()`` of the queue length per (rank, stream) over its change points; None without launches."""
        return _ctr.queue_length_summary(self.get_queue_length_time_series(ranks, hta_compat))

    def get_queue_length_summary_from_time_series(
        self, queue_length_dict: dict[int, pd.DataFrame]
    ) -> Optional[pd.DataFrame]:
        """:meth:`get_queue_length_summary` of given series (the caller's frames are left unchanged)."""
        return _ctr.queue_length_summary(queue_length_dict)

    def get_time_spent_blocked_on_full_queue(
        self,
        queue_length_dict: dict[int, pd.DataFrame],
        max_queue_length: int = _ctr.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
        hta_compat: Optional[bool] = None,
    ) -> pd.DataFrame:
        """Time (µs) and share of the rank's trace duration each stream's queue holds ``>= max_queue_length``
        operations. One row per (rank, stream); ``hta_compat=True``: HTA's one row per rank (its last
        qualifying stream)."""
        rules = self._rules(hta_compat)
        ranks = [r for r in queue_length_dict if int(r) in self.view.views]
        durations = _ctr.trace_durations(self.view, ranks=ranks)
        return _ctr.blocked_on_full_queue(queue_length_dict, durations, max_queue_length=max_queue_length, rules=rules)

    # ------------------------------------------------------------------ memory bandwidth
    def get_memory_bw_time_series(
        self, ranks: Optional[list[int]] = None, hta_compat: Optional[bool] = None
    ) -> dict[int, pd.DataFrame]:
        """Per rank: aggregate bandwidth (GB/s) of each copy kind as change points (``ts`` µs, ``pid``,
        ``name``, ``memory_bw_gbps``). Exactly 0 when no copy of the kind runs (``hta_compat=True``: HTA's
        floating-point residue); ends before starts at equal times."""
        return _ctr.memory_bandwidth(self.view, rules=self._rules(hta_compat), ranks=self._ranks_arg(ranks))

    def get_memory_bw_summary(
        self, ranks: Optional[list[int]] = None, hta_compat: Optional[bool] = None
    ) -> Optional[pd.DataFrame]:
        """``describe()`` of the positive bandwidth points per (rank, copy kind); None without memory operations."""
        return _ctr.memory_bandwidth_summary(self.get_memory_bw_time_series(ranks, hta_compat))

    # ------------------------------------------------------------------ augmented traces
    def generate_trace_with_counters(
        self,
        time_series: Optional[TimeSeriesTypes] = None,
        ranks: Optional[list[int]] = None,
        output_suffix: str = "_with_counters",
        output_dir: Optional[str] = None,
        hta_compat: Optional[bool] = None,
    ) -> None:
        """Write each rank's trace with counter tracks: ``Queue Length`` (one track per stream, ``id`` =
        stream) and the memory bandwidth per copy kind (``Memcpy BW``).

        The file goes beside the input (or into ``output_dir``), named as HTA names it: every ``.json`` of
        the input name becomes ``<output_suffix>.json`` (``x.json.gz`` → ``x_with_counters.json.gz``); it
        is gzip-compressed exactly when its name ends in ``.gz`` (HTA always compresses). The input's bytes
        are kept; the counter events are appended to ``traceEvents``. Ranks without any series get no file.
        """
        chosen = self._ranks_arg(ranks)
        time_series = series_types(time_series)
        suffix = output_suffix or "_with_counters"
        queue = (
            self.get_queue_length_time_series(chosen, hta_compat) if TimeSeriesTypes.QUEUE_LENGTH in time_series else {}
        )
        membw = (
            self.get_memory_bw_time_series(chosen, hta_compat)
            if TimeSeriesTypes.MEMCPY_BANDWIDTH in time_series
            else {}
        )
        for r in chosen:
            events: list[str] = []
            offset = self._hta_time_offset(r)
            q = queue.get(r)
            if q is not None:
                events += trace_file.counter_events(
                    q["ts"].to_numpy() + offset,
                    q["pid"].to_numpy(),
                    "Queue Length",
                    "Queue Length",
                    q["queue_length"].to_numpy(),
                    q["stream"].to_numpy(),
                )
            m = membw.get(r)
            if m is not None:
                events += trace_file.counter_events(
                    m["ts"].to_numpy() + offset,
                    m["pid"].to_numpy(),
                    m["name"].to_numpy(),
                    "Memcpy BW",
                    m["memory_bw_gbps"].to_numpy(),
                )
            if not events:
                continue
            t = self.job.rank(r)
            out = trace_file.derived_path(t.file, suffix, output_dir)
            self.t.write_raw_trace(str(out), AugmentedTrace(t.file, events, top_keys=[*t.meta, "traceEvents"]))
            log.info("Writing trace with counters for rank %s to %s", r, out)

    def _hta_time_offset(self, rank: int) -> int:
        """HTA's alignment offset (``min_ts``): adding it to the view's µs gives the file's own µs again."""
        rv = self.view[rank]
        if not rv.n:
            return 0
        t = self.job.rank(rank)
        ns = int(t.columns["ts_ns"][int(rv["row"][0])])
        us = int(np.ceil(as_double_us(np.array([ns], dtype=np.int64)))[0]) if t.ts_is_float else ns // 1000
        return int(us - int(rv["ts"][0]))

    # ------------------------------------------------------------------ CUPTI counters
    def _raw_args(self, rank: int) -> Optional[list]:
        """The rank's raw ``args`` texts (its file read again with every arg when the job kept none)."""
        t = self.job.rank(rank)
        if t.raw_args is not None or not _cupti.has_ranges(self.view):
            return t.raw_args
        from holotrace.loader import load

        again = load([t.file], all_args=True, cache=False)
        return again.rank(again.ranks[0]).raw_args

    def _cupti_columns(self, rank: int, res, frame: pd.DataFrame, hta_end: bool) -> pd.DataFrame:
        """HTA's column order (the counters, in the order of the first range's ``args``, right after the arg
        columns) and, with ``hta_end``, HTA's ``end``: the file's absolute µs (HTA never aligns it)."""
        counters = list(res.counters)
        try:
            rv = self.view[rank]
            first = int(np.flatnonzero(rv["index"] == int(frame["index"].iloc[0]))[0])
            keys = list(json.loads(self._raw_args(rank)[int(rv["row"][first])]))
            counters.sort(key=lambda k: keys.index(k) if k in keys else len(keys))
        except (IndexError, TypeError, ValueError, KeyError):
            pass  # keep the analysis' order
        cols = [c for c in frame.columns if c not in counters]
        at = cols.index("index_correlation") if "index_correlation" in cols else len(cols)
        frame = frame[cols[:at] + counters + cols[at:]]
        if hta_end:
            frame = frame.assign(end=frame["end"] + self._hta_time_offset(rank))
        return frame

    def get_cupti_counter_data_with_operators(
        self, ranks: Optional[list[int]] = None, hta_compat: Optional[bool] = None
    ) -> list[pd.DataFrame]:
        """Each CUPTI range (category ``cuda_profiler_range``) paired by position with its kernel launch,
        with one integer column per counter and the launch's operator stack (``op_stack``, ``top_level_op``,
        ``bottom_level_op``). A launch outside any operator gets empty strings (HTA raises); a rank whose
        range and launch counts differ is skipped with an error log. ``end`` is on the clock of ``ts`` (HTA
        leaves it absolute: ``hta_compat=True`` does too)."""
        rules = self._rules(hta_compat)
        chosen = self._ranks_arg(ranks)
        out = []
        for r in chosen:
            res = _cupti.counter_data(
                self.view, r, rules=rules, job=self.job, raw_args=self._raw_args(r), graph=self._call_graph(r, rules)
            )
            for msg in res.problems:
                log.error(msg) if res.frame is None else log.warning(msg)
            if res.frame is None:
                continue
            out.append(self._cupti_columns(r, res, _cupti.hta_frame(res, self._table(r)), rules.hta_quirks))
        if not out and not _cupti.has_ranges(self.view):
            log.warning(
                "Could not find events of 'cuda_profiler_range' category Please check if you ran CUPTI "
                "profiler mode correctly"
            )
        return out
