"""HTA's ``Trace`` and ``TraceSymbolTable`` (``hta.common.trace``, ``hta.common.trace_symbol_table``).

``TraceAnalysis(...).t`` is a :class:`Trace` over the facade's view: ``traces[rank]`` is HTA's per-rank table
(:func:`holotrace.compat.hta_table.hta_table`), built on first access, one per rank, owned by this object.
Analyses never read these tables, so a notebook that edits one (``symbol_table.add_symbols_to_trace_df(df,
"name")``) changes only that table. ``name``/``cat`` are ids into :attr:`Trace.symbol_table`, which lists the
job's strings in id order.

A :class:`Trace` can also be made on its own, as in HTA (``Trace(trace_dir=...)`` then ``load_traces()``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, MutableMapping
from typing import Optional, Union

import numpy as np
import pandas as pd

from holotrace.compat.hta_table import hta_table
from holotrace.compat.raw_trace import write_raw_trace
from holotrace.compat.symbol_table import TraceSymbolTable

__all__ = ["Trace", "TraceSymbolTable", "parsed_table"]


class _LazyTables(MutableMapping):
    """``{rank: HTA table}``, each built on first access and then kept (HTA's ``Trace.traces``)."""

    def __init__(self, build, ranks: list[int], stage: str = "loaded"):
        self._build, self._ranks, self._data, self.stage = build, list(ranks), {}, stage

    def __getitem__(self, rank):
        if rank not in self._data:
            if rank not in self._ranks:
                raise KeyError(rank)
            self._data[rank] = self._build(rank)
        return self._data[rank]

    def __setitem__(self, rank, df):
        if rank not in self._ranks:
            self._ranks.append(rank)
        self._data[rank] = df

    def __delitem__(self, rank):
        self._ranks.remove(rank)
        self._data.pop(rank, None)

    def __iter__(self):
        return iter(list(self._ranks))

    def __len__(self):
        return len(self._ranks)

    def __contains__(self, rank):
        return rank in self._ranks


class Trace:
    """HTA's ``Trace``: the loaded per-rank tables, their symbol table and metadata."""

    def __init__(
        self,
        trace_files: Optional[Union[list[str], dict[int, str]]] = None,
        trace_dir: str = "",
        parser_config=None,
        *,
        job=None,
        view=None,
        hta_compat: bool = False,
    ) -> None:
        self.trace_path = trace_dir
        self.parser_config = parser_config
        self._trace_files_arg = trace_files
        self.is_parsed = False
        self.job = None
        self.view = None
        self.traces: MutableMapping = {}
        self.symbol_table = TraceSymbolTable()
        self.meta_data: dict[int, dict] = {}
        self.min_ts: int = 0
        self.trace_files: dict[int, str] = dict(trace_files) if isinstance(trace_files, dict) else {}
        self.hta_compat = bool(hta_compat)  # loaded tables keep HTA's absolute ``end``
        if job is not None:
            self._attach(job, view)

    @classmethod
    def from_job(cls, job, view=None, hta_compat: bool = False) -> Trace:
        """The Trace of an already loaded job (and its HTA view, or one built here)."""
        return cls(job=job, view=view, hta_compat=hta_compat)

    def _attach(self, job, view) -> None:
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        self.job = job
        self.view = view if view is not None else job_view(job, HTA)
        ranks = self.view.ranks
        self.trace_files = {r: job.rank(r).file for r in ranks}
        view = self.view
        self.min_ts = _min_ts(job)
        if self.hta_compat:  # HTA aligns ``ts`` only: its ``end`` stays on the file's clock
            offset = self.min_ts
            self.traces = _LazyTables(lambda r: _absolute_end(hta_table(view[r], job.strings), offset), ranks)
        else:
            self.traces = _LazyTables(lambda r: hta_table(view[r], job.strings), ranks)
        self._sym = None
        self.meta_data = {r: {**job.rank(r).meta, "device_type": job.rank(r).device_type} for r in ranks}
        self.is_parsed = True

    @property
    def symbol_table(self) -> TraceSymbolTable:
        if self.job is not None and getattr(self, "_sym", None) is None:
            self._sym = TraceSymbolTable()
            self._sym.sym_table = list(self.job.strings.table)
            self._sym.sym_index = {s: i for i, s in enumerate(self._sym.sym_table)}
        return self._sym

    @symbol_table.setter
    def symbol_table(self, table: TraceSymbolTable) -> None:
        self._sym = table

    # ------------------------------------------------------------------ loading, in HTA's two stages
    def _ensure_job(self) -> None:
        if self.job is None:
            from holotrace.compat.configs import wants_all_args
            from holotrace.compat.inputs import load_inputs

            self.job = load_inputs(
                self._trace_files_arg,
                self.trace_path or ".",
                cache=True,
                workers=None,
                strict=False,
                all_args=wants_all_args(self.parser_config),
            )
            self.trace_files = {r: self.job.rank(r).file for r in self.job.ranks}
            self._sym = None  # the job's string table from now on

    def load_traces(
        self,
        include_last_profiler_step: Optional[bool] = False,
        use_multiprocessing: bool = True,
        use_memory_profiling: bool = True,
    ) -> None:
        """HTA's load: parse, align and filter; the tables are indexed by ``index`` (a no-op once parsed)."""
        if self.is_parsed:
            return
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        self._ensure_job()
        self._attach(self.job, job_view(self.job, HTA, include_last_step=bool(include_last_profiler_step)))

    def _parsed_view(self):
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        self._ensure_job()
        if self.view is None or not self.view.include_last_step:
            self.view = job_view(self.job, HTA, include_last_step=True)
        return self.view

    def _parse(self, ranks: Iterable[int]) -> None:
        """HTA's parsed (not yet aligned) tables of ``ranks``: absolute times, rows in file order."""
        view = self._parsed_view()
        offset = _min_ts(self.job)
        known = [r for r in ranks if r in view.ranks]
        if not isinstance(self.traces, _LazyTables) or getattr(self.traces, "stage", "") != "parsed":
            self.traces = _LazyTables(lambda r: parsed_table(view[r], self.job.strings, offset), [], "parsed")
            self.meta_data = {}
        for r in known:
            if r not in self.traces:
                self.traces._ranks.append(r)
            self.meta_data[r] = {**self.job.rank(r).meta, "device_type": self.job.rank(r).device_type}

    def parse_single_rank(self, rank: int) -> None:
        """Parse one rank's file into ``traces[rank]`` (HTA: absolute times, file order, not aligned)."""
        self._ensure_job()
        if rank in self.trace_files:
            self._parse([rank])

    def parse_multiple_ranks(
        self, ranks: list[int], use_multiprocessing: bool = True, use_memory_profiling: bool = True
    ) -> None:
        """Parse the ranks' files (``KeyError`` for a rank without a file, as HTA)."""
        self._ensure_job()
        for r in ranks:
            if r not in self.trace_files:
                raise KeyError(r)
        self._parse(ranks)

    def parse_traces(
        self, max_ranks: int = -1, use_multiprocessing: bool = True, use_memory_profiling: bool = True
    ) -> None:
        """Parse the first ``max_ranks`` ranks (all for −1): every step kept, absolute times, rows in file
        order, ``min_ts`` still 0 — HTA's state before :meth:`align_and_filter_trace`."""
        self._ensure_job()
        ranks = sorted(self.trace_files)
        ranks = ranks if max_ranks == -1 else ranks[:max_ranks]
        self.min_ts = 0
        self._parse(ranks)
        self.is_parsed = bool(ranks)

    def align_and_filter_trace(self, include_last_profiler_step: Optional[bool] = False) -> None:
        """HTA's second stage: times aligned to the job's first event, the last ``ProfilerStep`` dropped
        (unless ``include_last_profiler_step``), rows in HTA's order with a fresh positional index."""
        if not len(self.traces) or self.job is None:
            return
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        ranks = list(self.traces)
        self._attach(self.job, job_view(self.job, HTA, include_last_step=bool(include_last_profiler_step)))
        build = self.traces._build
        self.traces = _LazyTables(
            lambda r: build(r).reset_index(drop=True), [r for r in ranks if r in self.view.ranks], "aligned"
        )

    # ------------------------------------------------------------------ queries
    def get_ranks(self) -> list[int]:
        return sorted(self.traces.keys())

    def _get_first_rank(self, rank: Optional[int] = None) -> int:
        ranks = self.get_ranks()
        return (ranks[0] if ranks else -1) if rank is None else rank

    def get_trace(self, rank: int) -> pd.DataFrame:
        if rank not in self.traces:
            raise ValueError(f"no trace for rank {rank} (ranks: {self.get_ranks()})")
        return self.traces[rank]

    def get_all_traces(self) -> dict[int, pd.DataFrame]:
        return {r: self.traces[r] for r in self.get_ranks()}

    def get_iterations(self, rank: Optional[int] = None) -> list[int]:
        rank = self._get_first_rank(rank)
        if rank not in self.traces:
            return []
        it = self.traces[rank]["iteration"]
        return sorted(int(i) for i in pd.unique(it.dropna()) if i >= 0)

    def get_trace_duration(self, rank: Optional[int] = None) -> int:
        ts = self.get_trace(self._get_first_rank(rank))["ts"]
        return ts.max() - ts.min()

    def get_device_type(self) -> str:
        rank = next(iter(self.traces))
        return self.meta_data.get(rank, {}).get("device_type", "UNKNOWN")

    def decode_symbol_ids(self, use_shorten_name: bool = True) -> None:
        """Write ``s_name``/``s_cat`` from the ids (shortened names by default), in every loaded table."""
        from holotrace.text import hta_short_names as shorten_names

        table = np.array(self.symbol_table.sym_table + [""], dtype=object)
        if use_shorten_name:
            table = np.asarray(shorten_names(table), dtype=object)
        for rank in self.get_ranks():
            df = self.traces[rank]
            for col in ("name", "cat"):
                ids = df[col].to_numpy()
                df["s_" + col] = table[np.where(ids >= 0, ids, len(table) - 1)]

    def get_raw_trace_for_one_rank(self, rank: int = 0) -> dict:
        if rank not in self.trace_files:
            raise ValueError(f"no trace file for rank {rank}")
        path = self.trace_files[rank]
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as f:
            return json.load(f)

    def write_raw_trace(self, output_file: str, trace_contents: dict) -> None:
        """Write a trace document; gzip-compressed when the name ends with ``.gz`` (HTA always compresses)."""
        write_raw_trace(output_file, trace_contents)

    def get_trace_start_unixtime_ns(self, rank: int) -> int:
        if rank not in self.traces:
            raise ValueError(f"No trace found for rank {rank}")
        base = self.meta_data[rank].get("baseTimeNanoseconds")
        return int(self.min_ts) * 1000 + (int(base) if base is not None else 0)

    def convert_time_series_to_events(self, series: pd.DataFrame, counter_name: str, counter_col: str) -> list[dict]:
        """Chrome counter events (``ph: "C"``) from a time series with ``pid``, ``ts`` and ``counter_col``."""
        if not {"pid", "ts", counter_col} <= set(series.columns):
            return []
        names = series["name"].tolist() if "name" in series.columns else [counter_name] * len(series)
        ids = series["id"].tolist() if "id" in series.columns else None
        out = []
        for i, (pid, ts, v) in enumerate(
            zip(series["pid"].tolist(), (series["ts"] + self.min_ts).tolist(), series[counter_col].tolist())
        ):
            ev = {"pid": pid, "ts": ts, "args": {counter_name: v}, "ph": "C", "name": names[i]}
            if ids is not None:
                ev["id"] = ids[i]
            out.append(ev)
        return out

    @staticmethod
    def flow_event(
        id: int, pid: int, tid: int, ts: int, is_start: bool, name: str, cat: str, args: Optional[dict] = None
    ) -> dict:
        ev = {"ph": "s" if is_start else "f", "id": id, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": name}
        if args is not None:
            ev["args"] = args
        if not is_start:
            ev["bp"] = "e"
        return ev


def parsed_table(view, strings, offset: int, *, args: bool = True) -> pd.DataFrame:
    """HTA's parsed table of one rank (before alignment): every row of the view (built with the last step),
    in file order (``index``), times absolute (``ts``/``end`` + ``offset``), a positional index and no
    decoded text columns (``decode_symbol_ids`` adds them)."""
    df = hta_table(view, strings, args=args).drop(columns=["s_name", "s_cat"])
    df = df.sort_values("index", kind="stable").reset_index(drop=True)
    df["ts"] = df["ts"] + offset
    df["end"] = df["end"] + offset
    return df


def _absolute_end(df: pd.DataFrame, offset: int) -> pd.DataFrame:
    df["end"] = df["end"] + offset
    return df


def _min_ts(job) -> int:
    """HTA's alignment offset: the earliest start (µs, rounded HTA's way) over every rank's non-``Trace`` rows."""
    from holotrace.model.view_hta import as_double_us

    trace_id = job.strings.id("Trace")
    starts = []
    for r in job.ranks:
        t = job.rank(r)
        c = t.columns
        keep = (c["cat"] >= 0) & (c["cat"] != trace_id)
        if not keep.any():
            continue
        ts = np.asarray(c["ts_ns"])[keep]
        starts.append(int(np.ceil(as_double_us(ts)).min()) if t.ts_is_float else int((ts // 1000).min()))
    return min(starts) if starts else 0
