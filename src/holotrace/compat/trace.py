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
import re
from collections.abc import MutableMapping
from typing import Dict, Iterable, List, Optional, Union

import numpy as np
import pandas as pd

from holotrace.compat.hta_table import hta_table

__all__ = ["Trace", "TraceSymbolTable"]


class TraceSymbolTable:
    """The symbol ↔ id map of a trace's ``name``/``cat`` columns (HTA's ``TraceSymbolTable``)."""

    NULL: int = -128

    def __init__(self, symbols: Iterable[str] = ()) -> None:
        self.sym_table: List[str] = []
        self.sym_index: Dict[str, int] = {}
        self.add_symbols(symbols)

    def is_empty(self) -> bool:
        return not self.sym_table

    def add_symbols(self, symbols: Iterable[str]) -> None:
        for s in symbols:
            if s not in self.sym_index:
                self.sym_index[s] = len(self.sym_table)
                self.sym_table.append(s)

    add_symbols_mp = add_symbols

    def get_sym_id_map(self) -> Dict[str, int]:
        return self.sym_index

    def get_sym_index(self) -> Dict[str, int]:
        return self.sym_index

    def get_sym_table(self) -> List[str]:
        return self.sym_table

    def get_sym_table_series(self) -> pd.Series:
        return pd.Series(self.sym_table, dtype=object)

    def get_sym_index_series(self) -> pd.Series:
        return pd.Series(self.sym_index, dtype="int64")

    def find_matches(self, patterns: List[str]) -> List[int]:
        """Ids of symbols containing any of the (literal) patterns."""
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [i for i, s in enumerate(self.sym_table) if rx.search(s)]

    def find_matched_symbols(self, patterns: List[str]) -> List[str]:
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [s for s in self.sym_table if rx.search(s)]

    def get_symbol_ids(self, symbol_pattern) -> Dict[str, int]:
        """``{symbol: id}`` of the symbols a ``GroupingPattern`` matches (at the start, as ``re.match``)."""
        rx = re.compile(symbol_pattern.pattern) if isinstance(symbol_pattern.pattern, str) else symbol_pattern.pattern
        inverse = bool(getattr(symbol_pattern, "inverse_match", False))
        return {s: i for s, i in self.sym_index.items() if (rx.match(s) is not None) != inverse}

    def get_symbol_names(self, symbol_ids: List[int]) -> Dict[int, str]:
        n = len(self.sym_table)
        return {int(i): self.sym_table[int(i)] for i in symbol_ids if 0 <= int(i) < n}

    def add_symbols_to_trace_df(self, trace_df: pd.DataFrame, col: str) -> None:
        """Replace the ids of ``trace_df[col]`` by their symbols (``""`` for ids out of range), in place."""
        ids = trace_df[col].to_numpy().astype(np.int64)
        table = np.array(self.sym_table + [""], dtype=object)
        trace_df[col] = table[np.where((ids >= 0) & (ids < len(self.sym_table)), ids, len(self.sym_table))]

    def decode_df(self, df: pd.DataFrame, create_new_columns: bool = True) -> None:
        for col in ("name", "cat"):
            if col in df.columns and df[col].dtype.kind == "i":
                out = "s_" + col if create_new_columns else col
                df[out] = np.array(self.sym_table + [""], dtype=object)[
                    np.where(df[col].to_numpy() >= 0, df[col].to_numpy(), len(self.sym_table))]

    def encode_df(self, df: pd.DataFrame) -> None:
        for col in ("name", "cat"):
            if col in df.columns and pd.api.types.is_string_dtype(df[col]):
                df[col] = df[col].map(self.sym_index).astype(np.int64)

    def update_encoded_df(self, df: pd.DataFrame, old_symbol_table: "TraceSymbolTable") -> None:
        lut = np.array([self.sym_index[s] for s in old_symbol_table.sym_table], dtype=np.int64)
        for col in ("cat", "name"):
            df[col] = lut[df[col].to_numpy()]

    def get_cpu_event_cat_ids(self) -> List[int]:
        from holotrace.compat.types import CPU_EVENTS_CATEGORY_PATTERN
        return list(self.get_symbol_ids(CPU_EVENTS_CATEGORY_PATTERN).values())

    def get_gpu_kernel_cat_ids(self) -> List[int]:
        from holotrace.compat.types import KERNEL_CATEGORY_PATTERN
        return list(self.get_symbol_ids(KERNEL_CATEGORY_PATTERN).values())

    def get_profiler_step_ids(self) -> List[int]:
        from holotrace.compat.types import ProfilerStepGroupingPattern
        return list(self.get_symbol_ids(ProfilerStepGroupingPattern).values())

    def get_memory_name_ids(self) -> List[int]:
        from holotrace.compat.types import MemoryKernelGroupingPattern
        return list(self.get_symbol_ids(MemoryKernelGroupingPattern).values())

    def get_kernel_launch_ids(self) -> List[int]:
        from holotrace.compat.types import KERNEL_LAUNCH_CATEGORY_PATTERN
        return list(self.get_symbol_ids(KERNEL_LAUNCH_CATEGORY_PATTERN).values())

    @staticmethod
    def clone(symbol_table: "TraceSymbolTable") -> "TraceSymbolTable":
        t = TraceSymbolTable()
        t.sym_table, t.sym_index = list(symbol_table.sym_table), dict(symbol_table.sym_index)
        return t

    @staticmethod
    def combine_symbol_tables(tables: List["TraceSymbolTable"]) -> "TraceSymbolTable":
        out = TraceSymbolTable()
        for t in tables:
            out.add_symbols(t.sym_table)
        return out

    @staticmethod
    def create_from_df(df: pd.DataFrame) -> "TraceSymbolTable":
        if not all(c in df.columns and pd.api.types.is_string_dtype(df[c]) for c in ("name", "cat")):
            raise ValueError("Expect both name and cat columns of string types to be present in the dataframe")
        return TraceSymbolTable(set(df["cat"].unique()) | set(df["name"].unique()))

    @staticmethod
    def create_from_symbol_id_map(symbol_id_map: Dict[str, int]) -> "TraceSymbolTable":
        inv = {v: k for k, v in symbol_id_map.items()}
        t = TraceSymbolTable()
        t.sym_table = [inv.get(i, f"Undefined-{i}") for i in range(max(symbol_id_map.values()) + 1)]
        t.sym_index = {s: i for i, s in enumerate(t.sym_table)}
        return t


class _LazyTables(MutableMapping):
    """``{rank: HTA table}``, each built on first access and then kept (HTA's ``Trace.traces``)."""

    def __init__(self, build, ranks: List[int]):
        self._build, self._ranks, self._data = build, list(ranks), {}

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

    def __init__(self, trace_files: Optional[Union[List[str], Dict[int, str]]] = None, trace_dir: str = "",
                 parser_config=None, *, job=None, view=None) -> None:
        self.trace_path = trace_dir
        self.parser_config = parser_config
        self._trace_files_arg = trace_files
        self.is_parsed = False
        self.job = None
        self.view = None
        self.traces: MutableMapping = {}
        self.symbol_table = TraceSymbolTable()
        self.meta_data: Dict[int, dict] = {}
        self.min_ts: int = 0
        self.trace_files: Dict[int, str] = dict(trace_files) if isinstance(trace_files, dict) else {}
        if job is not None:
            self._attach(job, view)

    @classmethod
    def from_job(cls, job, view=None) -> "Trace":
        """The Trace of an already loaded job (and its HTA view, or one built here)."""
        return cls(job=job, view=view)

    def _attach(self, job, view) -> None:
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        self.job = job
        self.view = view if view is not None else job_view(job, HTA)
        ranks = self.view.ranks
        self.trace_files = {r: job.rank(r).file for r in ranks}
        self.traces = _LazyTables(lambda r: hta_table(self.view[r], job.strings), ranks)
        self._sym = None
        self.meta_data = {r: {**job.rank(r).meta, "device_type": job.rank(r).device_type} for r in ranks}
        self.min_ts = _min_ts(job)
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

    # ------------------------------------------------------------------ loading (no-ops once loaded)
    def load_traces(self, include_last_profiler_step: Optional[bool] = False, use_multiprocessing: bool = True,
                    use_memory_profiling: bool = True) -> None:
        if self.is_parsed:
            return
        from holotrace.compat.inputs import load_inputs
        from holotrace.model.classify import HTA
        from holotrace.model.view import job_view

        job = load_inputs(self._trace_files_arg, self.trace_path or ".", cache=True, workers=None, strict=False)
        self._attach(job, job_view(job, HTA, include_last_step=bool(include_last_profiler_step)))

    def parse_traces(self, max_ranks: int = -1, use_multiprocessing: bool = True,
                     use_memory_profiling: bool = True) -> None:
        """Read every rank with every step kept (as HTA's parse, before its last-step filter)."""
        self.load_traces(include_last_profiler_step=True)

    def align_and_filter_trace(self, include_last_profiler_step: Optional[bool] = False) -> None:
        """HTA's last-step filter on parsed traces (times are aligned when read); a no-op when already applied."""
        if self.is_parsed and self.view.include_last_step and not include_last_profiler_step:
            from holotrace.model.classify import HTA
            from holotrace.model.view import job_view

            self._attach(self.job, job_view(self.job, HTA, include_last_step=False))

    # ------------------------------------------------------------------ queries
    def get_ranks(self) -> List[int]:
        return sorted(self.traces.keys())

    def _get_first_rank(self, rank: Optional[int] = None) -> int:
        ranks = self.get_ranks()
        return (ranks[0] if ranks else -1) if rank is None else rank

    def get_trace(self, rank: int) -> pd.DataFrame:
        if rank not in self.traces:
            raise ValueError(f"no trace for rank {rank} (ranks: {self.get_ranks()})")
        return self.traces[rank]

    def get_all_traces(self) -> Dict[int, pd.DataFrame]:
        return {r: self.traces[r] for r in self.get_ranks()}

    def get_iterations(self, rank: Optional[int] = None) -> List[int]:
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
        opener = gzip.open if str(output_file).endswith(".gz") else open
        with opener(output_file, "wt") as f:
            json.dump(trace_contents, f, indent=2)

    def get_trace_start_unixtime_ns(self, rank: int) -> int:
        if rank not in self.traces:
            raise ValueError(f"No trace found for rank {rank}")
        base = self.meta_data[rank].get("baseTimeNanoseconds")
        return int(self.min_ts) * 1000 + (int(base) if base is not None else 0)

    def convert_time_series_to_events(self, series: pd.DataFrame, counter_name: str, counter_col: str) -> List[dict]:
        """Chrome counter events (``ph: "C"``) from a time series with ``pid``, ``ts`` and ``counter_col``."""
        if not {"pid", "ts", counter_col} <= set(series.columns):
            return []
        names = series["name"].tolist() if "name" in series.columns else [counter_name] * len(series)
        ids = series["id"].tolist() if "id" in series.columns else None
        out = []
        for i, (pid, ts, v) in enumerate(zip(series["pid"].tolist(), (series["ts"] + self.min_ts).tolist(),
                                             series[counter_col].tolist())):
            ev = {"pid": pid, "ts": ts, "args": {counter_name: v}, "ph": "C", "name": names[i]}
            if ids is not None:
                ev["id"] = ids[i]
            out.append(ev)
        return out

    @staticmethod
    def flow_event(id: int, pid: int, tid: int, ts: int, is_start: bool, name: str, cat: str,
                   args: Optional[dict] = None) -> dict:
        ev = {"ph": "s" if is_start else "f", "id": id, "pid": pid, "tid": tid, "ts": ts, "cat": cat, "name": name}
        if args is not None:
            ev["args"] = args
        if not is_start:
            ev["bp"] = "e"
        return ev


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
