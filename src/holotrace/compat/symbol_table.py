"""HTA's ``TraceSymbolTable`` (``hta.common.trace_symbol_table``): the strings of a trace and their ids.

On a loaded :class:`holotrace.compat.trace.Trace` it lists the job's string table in id order.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.model import classify

__all__ = ["TraceSymbolTable"]


class TraceSymbolTable:
    """The symbol ↔ id map of a trace's ``name``/``cat`` columns (HTA's ``TraceSymbolTable``)."""

    NULL: int = -128

    def __init__(self, symbols: Iterable[str] = ()) -> None:
        self.sym_table: list[str] = []
        self.sym_index: dict[str, int] = {}
        self.add_symbols(symbols)

    def is_empty(self) -> bool:
        return not self.sym_table

    def add_symbols(self, symbols: Iterable[str]) -> None:
        for s in symbols:
            if s not in self.sym_index:
                self.sym_index[s] = len(self.sym_table)
                self.sym_table.append(s)

    def add_symbols_mp(self, symbols_list: list[Iterable[str]]) -> None:
        """Add the symbols of several iterables (HTA collects them in worker processes, in no set order;
        here in list order)."""
        for symbols in symbols_list:
            self.add_symbols(symbols)

    def _to_csv_file(self, file_path: str) -> None:
        pd.DataFrame({"symbol": self.sym_table}).to_csv(file_path, index=True)

    @staticmethod
    def from_csv_file(file_path: str) -> TraceSymbolTable:
        """A table from a CSV file with a ``symbol`` column (as ``_to_csv_file`` writes)."""
        if not os.path.exists(file_path):
            raise FileNotFoundError(f"File {file_path} does not exist.")
        df = pd.read_csv(file_path, keep_default_na=False, dtype={"symbol": str})
        if "symbol" not in df.columns:
            raise ValueError(f"{file_path}: expect a column 'symbol' in the csv")
        return TraceSymbolTable(df["symbol"].tolist())

    def _ids(self, names: Iterable[str]) -> list[int]:
        return [self.sym_index[s] for s in names if s in self.sym_index]

    def get_operator_or_cuda_runtime_mask(self, df: pd.DataFrame) -> pd.Series:
        """Rows whose category is ``cpu_op``, ``cuda_runtime`` or ``cuda_driver``."""
        return df["cat"].isin(self._ids(("cpu_op", "cuda_runtime", "cuda_driver")))

    RUNTIME_LAUNCH_NAMES = tuple(sorted(classify.HTA_LAUNCH_APIS))  # HTA's runtime launch names

    def get_runtime_launch_events_mask(self, df: pd.DataFrame) -> pd.Series:
        """Runtime kernel/copy/set launch calls (HTA's list of names) that have a GPU partner
        (``index_correlation > 0``)."""
        return df["name"].isin(self._ids(self.RUNTIME_LAUNCH_NAMES)) & (df["index_correlation"] > 0)

    def get_events_mask(self, df: pd.DataFrame, events: Optional[list[str]]) -> pd.Series:
        """Rows whose name contains any of ``events`` (all False for ``None``)."""
        if events is None:
            return pd.Series(False, index=df.index)
        return df["name"].isin(self.find_matches(events))

    def get_sym_id_map(self) -> dict[str, int]:
        return self.sym_index

    def get_sym_index(self) -> dict[str, int]:
        return self.sym_index

    def get_sym_table(self) -> list[str]:
        return self.sym_table

    def get_sym_table_series(self) -> pd.Series:
        return pd.Series(self.sym_table, dtype=object)

    def get_sym_index_series(self) -> pd.Series:
        return pd.Series(self.sym_index, dtype="int64")

    def find_matches(self, patterns: list[str]) -> list[int]:
        """Ids of symbols containing any of the (literal) patterns."""
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [i for i, s in enumerate(self.sym_table) if rx.search(s)]

    def find_matched_symbols(self, patterns: list[str]) -> list[str]:
        rx = re.compile("|".join(re.escape(p) for p in patterns))
        return [s for s in self.sym_table if rx.search(s)]

    def get_symbol_ids(self, symbol_pattern) -> dict[str, int]:
        """``{symbol: id}`` of the symbols a ``GroupingPattern`` matches (at the start, as ``re.match``)."""
        rx = re.compile(symbol_pattern.pattern) if isinstance(symbol_pattern.pattern, str) else symbol_pattern.pattern
        inverse = bool(getattr(symbol_pattern, "inverse_match", False))
        return {s: i for s, i in self.sym_index.items() if (rx.match(s) is not None) != inverse}

    def get_symbol_names(self, symbol_ids: list[int]) -> dict[int, str]:
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
                    np.where(df[col].to_numpy() >= 0, df[col].to_numpy(), len(self.sym_table))
                ]

    def encode_df(self, df: pd.DataFrame) -> None:
        for col in ("name", "cat"):
            if col in df.columns and pd.api.types.is_string_dtype(df[col]):
                df[col] = df[col].map(self.sym_index).astype(np.int64)

    def update_encoded_df(self, df: pd.DataFrame, old_symbol_table: TraceSymbolTable) -> None:
        lut = np.array([self.sym_index[s] for s in old_symbol_table.sym_table], dtype=np.int64)
        for col in ("cat", "name"):
            df[col] = lut[df[col].to_numpy()]

    def get_cpu_event_cat_ids(self) -> list[int]:
        from holotrace.compat.types import CPU_EVENTS_CATEGORY_PATTERN

        return list(self.get_symbol_ids(CPU_EVENTS_CATEGORY_PATTERN).values())

    def get_gpu_kernel_cat_ids(self) -> list[int]:
        from holotrace.compat.types import KERNEL_CATEGORY_PATTERN

        return list(self.get_symbol_ids(KERNEL_CATEGORY_PATTERN).values())

    def get_profiler_step_ids(self) -> list[int]:
        from holotrace.compat.types import ProfilerStepGroupingPattern

        return list(self.get_symbol_ids(ProfilerStepGroupingPattern).values())

    def get_memory_name_ids(self) -> list[int]:
        from holotrace.compat.types import MemoryKernelGroupingPattern

        return list(self.get_symbol_ids(MemoryKernelGroupingPattern).values())

    def get_kernel_launch_ids(self) -> list[int]:
        from holotrace.compat.types import KERNEL_LAUNCH_CATEGORY_PATTERN

        return list(self.get_symbol_ids(KERNEL_LAUNCH_CATEGORY_PATTERN).values())

    @staticmethod
    def clone(symbol_table: TraceSymbolTable) -> TraceSymbolTable:
        t = TraceSymbolTable()
        t.sym_table, t.sym_index = list(symbol_table.sym_table), dict(symbol_table.sym_index)
        return t

    @staticmethod
    def combine_symbol_tables(tables: list[TraceSymbolTable]) -> TraceSymbolTable:
        out = TraceSymbolTable()
        for t in tables:
            out.add_symbols(t.sym_table)
        return out

    @staticmethod
    def create_from_df(df: pd.DataFrame) -> TraceSymbolTable:
        if not all(c in df.columns and pd.api.types.is_string_dtype(df[c]) for c in ("name", "cat")):
            raise ValueError("Expect both name and cat columns of string types to be present in the dataframe")
        return TraceSymbolTable(set(df["cat"].unique()) | set(df["name"].unique()))

    @staticmethod
    def create_from_symbol_id_map(symbol_id_map: dict[str, int]) -> TraceSymbolTable:
        inv = {v: k for k, v in symbol_id_map.items()}
        t = TraceSymbolTable()
        t.sym_table = [inv.get(i, f"Undefined-{i}") for i in range(max(symbol_id_map.values()) + 1)]
        t.sym_index = {s: i for i, s in enumerate(t.sym_table)}
        return t
