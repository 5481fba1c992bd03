"""HTA's trace filters (``hta.common.trace_filter``, ``hta.common.trace_stack_filter``; spec 12 §3-4).

A filter is a callable ``f(df, symbol_table=None) -> DataFrame`` returning a subset of the rows of an HTA
per-rank frame (the facade's tables, or any frame with HTA's columns), index and columns unchanged. Names
and categories are read from the string columns (``s_name``/``s_cat``, or ``name``/``cat`` when they hold
text); with integer ``name``/``cat`` ids only, a symbol table (HTA's ``TraceSymbolTable`` or holotrace's
``StringTable``) decodes them.

Fixed on purpose (docs/compatibility.md): ``QueryFilter`` is a ``Filter`` (it composes); numpy integers are
accepted wherever HTA takes an ``int``; an empty result keeps the input's columns (``hta_compat=True``: HTA's
``pd.DataFrame()`` without columns, where HTA returns one); ``strict=True`` raises
:class:`~holotrace.errors.AnalysisError` where HTA logs a warning and returns the input unfiltered; After/Before
operator filters work on loaded frames (``end`` is on the same clock as ``ts``).
"""

from __future__ import annotations

import logging
import re
from enum import Enum
from typing import Optional, Union

import numpy as np
import pandas as pd

from holotrace.errors import AnalysisError
from holotrace.model import classify

__all__ = [
    "Filter",
    "IterationFilter",
    "IterationIndexFilter",
    "FirstIterationFilter",
    "RankFilter",
    "TimeRangeFilter",
    "NameFilter",
    "GPUKernelFilter",
    "CPUOperatorFilter",
    "QueryFilter",
    "ZeroDurationFilter",
    "CompositeFilter",
    "MemCopyEventFilter",
    "OperatorFilterMethod",
    "OperatorFilter",
    "UnderOperatorFilter",
    "AfterOperatorFilter",
    "BeforeOperatorFilter",
    "CombinedOperatorFilter",
]

log = logging.getLogger("holotrace.compat")
_GPU_CATEGORY = re.compile(classify.HTA_CATEGORY_PATTERNS["GPU_EVENT_CATEGORY_PATTERN"])  # HTA's GPU-event categories
_INT = (int, np.integer)


def _ints(x, what: str) -> list[int]:
    if isinstance(x, _INT) and not isinstance(x, bool):
        return [int(x)]
    if isinstance(x, (list, tuple, np.ndarray)) and all(isinstance(i, _INT) for i in x):
        return [int(i) for i in x]
    raise TypeError(f"{what} must be an int or a list of ints, not {x!r}")


def _text(df: pd.DataFrame, col: str, symbol_table=None) -> Optional[pd.Series]:
    """The text of ``col`` (``name``/``cat``): the ``s_`` column, the column itself if text, or decoded ids."""
    for c in (f"s_{col}", col):
        if c in df.columns and not pd.api.types.is_numeric_dtype(df[c].dtype):
            return df[c].astype(object)
    if col in df.columns and symbol_table is not None:
        table = getattr(symbol_table, "sym_table", None) or getattr(symbol_table, "table", None)
        if table is not None:
            lut = np.asarray(list(table) + [""], dtype=object)
            ids = df[col].to_numpy(np.int64)
            return pd.Series(lut[np.where((ids >= 0) & (ids < len(table)), ids, len(table))], index=df.index)
    return None


class Filter:
    """Base class: ``strict=True`` raises where the filter cannot apply (HTA: warning, input unchanged)."""

    strict: bool = False
    hta_compat: bool = False

    def __call__(self, df: pd.DataFrame, symbol_table=None) -> pd.DataFrame:
        raise NotImplementedError

    def _nothing(self, df: pd.DataFrame) -> pd.DataFrame:
        """No row selected: the input's columns, or HTA's frame without columns under ``hta_compat``."""
        return pd.DataFrame() if self.hta_compat else df.iloc[0:0]

    def _cannot(self, df: pd.DataFrame, why: str) -> pd.DataFrame:
        if self.strict:
            raise AnalysisError(f"{type(self).__name__} cannot apply: {why}", fix="pass a frame with that column")
        log.warning("%s: %s; the frame is returned unfiltered", type(self).__name__, why)
        return df

    def _isin(self, df: pd.DataFrame, column: str, values, missing: str) -> pd.DataFrame:
        """The rows whose ``column`` is one of ``values`` (``missing`` says why when the column is absent)."""
        if column not in df.columns:
            return self._cannot(df, missing)
        return df[df[column].isin(values)]


class IterationFilter(Filter):
    def __init__(self, iterations: Union[int, list[int]], strict: bool = False):
        self.iterations, self.strict = _ints(iterations, "iterations"), strict

    def __call__(self, df, symbol_table=None):
        return self._isin(df, "iteration", self.iterations, "no iteration column")


class IterationIndexFilter(Filter):
    def __init__(self, iteration_index: Union[int, list[int]], strict: bool = False, hta_compat: bool = False):
        self.iteration_index, self.strict = _ints(iteration_index, "iteration_index"), strict
        self.hta_compat = hta_compat

    def __call__(self, df, symbol_table=None):
        if "iteration" not in df.columns:
            return self._cannot(df, "no iteration column")
        its = sorted(i for i in pd.unique(df["iteration"].dropna()) if i != -1)
        if not its:
            return self._cannot(df, "no iteration other than -1")
        chosen = [its[k] for k in self.iteration_index if 0 <= k < len(its)]
        if not chosen:
            log.warning("IterationIndexFilter: no valid index in %s (%d iterations)", self.iteration_index, len(its))
            return self._nothing(df)
        return df[df["iteration"].isin(chosen)]


class FirstIterationFilter(IterationIndexFilter):
    def __init__(self, strict: bool = False, hta_compat: bool = False):
        super().__init__([0], strict, hta_compat)


class RankFilter(Filter):
    def __init__(self, ranks: Union[int, list[int]], strict: bool = False):
        self.ranks, self.strict = _ints(ranks, "ranks"), strict

    def __call__(self, df, symbol_table=None):
        return self._isin(df, "rank", self.ranks, "no rank column (concatenate the ranks' frames with a rank column)")


class TimeRangeFilter(Filter):
    def __init__(self, time_range: tuple[int, int], strict: bool = False):
        if not (
            isinstance(time_range, tuple) and len(time_range) == 2 and all(isinstance(x, _INT) for x in time_range)
        ):
            raise ValueError("time_range must be a tuple of two integers.")
        if time_range[0] > time_range[1]:
            raise ValueError(f"time_range {time_range}: start is after end.")
        self.time_range, self.strict = (int(time_range[0]), int(time_range[1])), strict

    def __call__(self, df, symbol_table=None):
        if "ts" not in df.columns:
            return self._cannot(df, "no ts column")
        start, end = self.time_range
        return df[(df["ts"] >= start) & (df["ts"] + df["dur"] <= end)]


class NameFilter(Filter):
    """Rows whose name starts with a match of ``name_pattern`` (``re.match``; HTA's keyword, ``pattern`` also
    accepted)."""

    def __init__(
        self,
        name_pattern: Optional[str] = None,
        symbol_table=None,
        name_column: Optional[str] = None,
        strict: bool = False,
        *,
        pattern: Optional[str] = None,
    ):
        if (name_pattern is None) == (pattern is None):
            raise TypeError("NameFilter needs one name pattern: NameFilter(name_pattern=...)")
        self.name_pattern = name_pattern if name_pattern is not None else pattern
        self.symbol_table, self.name_column, self.strict = symbol_table, name_column, strict

    @property
    def pattern(self) -> str:
        return self.name_pattern

    def __call__(self, df, symbol_table=None):
        if df.empty:
            return df
        table = symbol_table if symbol_table is not None else self.symbol_table
        if table is not None and "name" in df.columns and df["name"].dtype.kind == "i":
            names = _text(df[["name"]], "name", table)  # HTA matches the ids' full symbols
        else:
            names = _text(df, "name", table)
        if names is None:
            return self._cannot(df, "no text name column and no symbol table")
        rx = re.compile(self.name_pattern)
        uniq, inv = np.unique(names.to_numpy().astype(str), return_inverse=True)
        hit = np.fromiter((rx.match(s) is not None for s in uniq), bool, len(uniq))
        return df[hit[inv.reshape(-1)]]


class NameStringColumnFilter(NameFilter):
    """HTA's name filter over a text name column (``s_name`` or ``name``); never uses a symbol table."""

    def __init__(self, name_pattern: str, strict: bool = False):
        super().__init__(name_pattern, strict=strict)

    def __call__(self, df, symbol_table=None):
        return super().__call__(df, None)


class NameIdColumnFilter(NameFilter):
    """HTA's name filter over the id column ``name`` through a symbol table (without one: the input, logged)."""

    def __init__(self, name_pattern: str, strict: bool = False):
        super().__init__(name_pattern, name_column="name", strict=strict)

    def __call__(self, df, symbol_table=None):
        if symbol_table is None:
            return self._cannot(df, "NameIdColumnFilter needs a symbol table")
        return super().__call__(df, symbol_table)


def _sync_rows(df, symbol_table) -> np.ndarray:
    """Rows named ``Event Sync`` / ``Context Sync`` (device synchronisation on stream −1), as HTA finds them:
    by text, or by the symbol table's ids (``sym_index``) when names are ids."""
    if "name" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    if not pd.api.types.is_numeric_dtype(df["name"].dtype):
        return df["name"].isin(classify.HTA_SYNC_EVENT_NAMES).to_numpy()
    index = getattr(symbol_table, "sym_index", None) or {}
    return df["name"].isin([index.get(n, -1) for n in classify.HTA_SYNC_EVENT_NAMES]).to_numpy()


def _gpu_mask(df, symbol_table) -> Optional[np.ndarray]:
    cats = _text(df, "cat", symbol_table)
    if cats is None:
        if "correlation" not in df.columns:
            return None
        log.warning("no category text: GPU events taken as stream >= 0 and correlation >= 0, and sync events")
        return ((df["stream"] >= 0) & (df["correlation"] >= 0)).to_numpy() | _sync_rows(df, symbol_table)
    uniq, inv = np.unique(cats.to_numpy().astype(str), return_inverse=True)
    return np.fromiter((_GPU_CATEGORY.match(s) is not None for s in uniq), bool, len(uniq))[inv.reshape(-1)]


class GPUKernelFilter(Filter):
    def __init__(self, strict: bool = False):
        self.strict = strict

    def __call__(self, df, symbol_table=None):
        if "stream" not in df.columns:
            return self._cannot(df, "no stream column")
        m = _gpu_mask(df, symbol_table)
        return df if m is None else df[m]


class CPUOperatorFilter(Filter):
    def __init__(self, strict: bool = False):
        self.strict = strict

    def __call__(self, df, symbol_table=None):
        if "stream" not in df.columns:
            return self._cannot(df, "no stream column")
        m = _gpu_mask(df, symbol_table)
        return df[(df["stream"] == -1).to_numpy()] if m is None else df[~m]


class QueryFilter(Filter):
    """``df.query(query_str)`` (a ``Filter`` here, so it composes)."""

    def __init__(self, query_str: str, strict: bool = False):
        self.query_str, self.strict = query_str, strict

    def __call__(self, df, symbol_table=None):
        return df.query(self.query_str)


ZeroDurationFilter = QueryFilter("dur > 0")  # HTA's name: it keeps the rows with a positive duration


class CompositeFilter(Filter):
    def __init__(self, filters: list[Filter], strict: bool = False):
        if not isinstance(filters, list) or not all(isinstance(f, Filter) for f in filters):
            raise TypeError("CompositeFilter takes a list of Filter objects")
        if any(f is self for f in filters):
            raise ValueError("a CompositeFilter cannot contain itself")
        self.filters, self.strict = filters, strict

    def __call__(self, df, symbol_table=None):
        for f in self.filters:
            df = f(df, symbol_table)
        return df


class MemCopyEventFilter(Filter):
    def __init__(self, memory_copy_type: str, symbol_table=None, strict: bool = False, hta_compat: bool = False):
        self.memory_copy_type, self.symbol_table, self.strict = memory_copy_type, symbol_table, strict
        self.hta_compat = hta_compat

    def __call__(self, df, symbol_table=None):
        if df.empty:
            return df
        st = symbol_table if symbol_table is not None else self.symbol_table
        names, cats = _text(df, "name", st), _text(df, "cat", st)
        if names is None or cats is None:
            return self._cannot(df, "no text name/cat columns and no symbol table")
        named = (names == self.memory_copy_type).to_numpy()
        if self.hta_compat and not named.any():
            return self._nothing(df)  # HTA: a name unknown to the symbol table
        return df[named & (cats == "gpu_memcpy").to_numpy()]


# --------------------------------------------------------------------------- operator / stack filters
class OperatorFilterMethod(Enum):
    Under = 0
    After = 1
    Before = 2
    Ancestors = 3
    Stack = 4


class OperatorFilter(Filter):
    """Rows under / after / before the ``position``-th occurrence (by ``ts``; −1 the last) of ``op_name``,
    on the operator's stream; ``include_gpu_kernels`` adds what the selected ``cuda_runtime`` calls launched."""

    def __init__(
        self,
        op_name: str,
        position: int,
        method: OperatorFilterMethod,
        include_gpu_kernels: bool = False,
        name_column: Optional[str] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        self.hta_compat = hta_compat
        if method in (OperatorFilterMethod.Ancestors, OperatorFilterMethod.Stack):
            raise NotImplementedError(f"{method} is not implemented (as in HTA)")
        self.op_name, self.position, self.method = op_name, int(position), method
        self.include_gpu_kernels, self.name_column, self.strict = include_gpu_kernels, name_column, strict

    def __call__(self, df, symbol_table=None):
        names, cats = _text(df, "name", symbol_table), _text(df, "cat", symbol_table)
        if names is None or cats is None:
            return self._cannot(df, "no text name/cat columns")
        occ = df[(names == self.op_name).to_numpy()].sort_values("ts", kind="stable")
        if occ.empty or not -len(occ) <= self.position < len(occ):
            log.warning("operator %r (position %d) not found", self.op_name, self.position)
            return self._nothing(df)
        op = occ.iloc[self.position]
        end = df["end"] if "end" in df.columns else df["ts"] + df["dur"]
        op_end = op["ts"] + op["dur"]
        same = (df["stream"] == op["stream"]).to_numpy()
        if self.method == OperatorFilterMethod.Under:
            keep = same & (df["ts"] >= op["ts"]).to_numpy() & (end <= op_end).to_numpy()
        elif self.method == OperatorFilterMethod.After:
            keep = same & (df["ts"] >= op_end).to_numpy()
        else:
            keep = same & (end <= op["ts"]).to_numpy()
        out = df[keep]
        if self.include_gpu_kernels:
            out = pd.concat([out, _launched(out, df, _text(out, "cat", symbol_table))])
        return out


def _launched(ops: pd.DataFrame, both: pd.DataFrame, op_cats: pd.Series) -> pd.DataFrame:
    """Rows of ``both`` launched (``index_correlation``) by a ``cuda_runtime`` row of ``ops``."""
    src = (
        ops.loc[(op_cats == "cuda_runtime").to_numpy(), "index"]
        if "index" in ops.columns
        else ops.index[(op_cats == "cuda_runtime").to_numpy()]
    )
    return both[both["index_correlation"].isin(np.asarray(src)).to_numpy() & (both["stream"] != -1).to_numpy()]


class UnderOperatorFilter(OperatorFilter):
    def __init__(
        self,
        op_name: str,
        position: int,
        include_gpu_kernels: bool = False,
        name_column: Optional[str] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        super().__init__(
            op_name, position, OperatorFilterMethod.Under, include_gpu_kernels, name_column, strict, hta_compat
        )


class AfterOperatorFilter(OperatorFilter):
    def __init__(
        self,
        op_name: str,
        position: int,
        include_gpu_kernels: bool = False,
        name_column: Optional[str] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        super().__init__(
            op_name, position, OperatorFilterMethod.After, include_gpu_kernels, name_column, strict, hta_compat
        )


class BeforeOperatorFilter(OperatorFilter):
    def __init__(
        self,
        op_name: str,
        position: int,
        include_gpu_kernels: bool = False,
        name_column: Optional[str] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        super().__init__(
            op_name, position, OperatorFilterMethod.Before, include_gpu_kernels, name_column, strict, hta_compat
        )


class CombinedOperatorFilter(Filter):
    """First iteration → under ``root_op_name`` → after the last ``preceding_op_name`` → before the first
    ``following_op_name`` (a missing op skips its step) → optionally the launched kernels → ``stack_depths``."""

    def __init__(
        self,
        root_op_name: str,
        preceding_op_name: str,
        following_op_name: str,
        include_gpu_kernels: bool = False,
        stack_depths: Optional[list[int]] = None,
        strict: bool = False,
    ):
        self.root, self.pre, self.post = root_op_name, preceding_op_name, following_op_name
        self.include_gpu_kernels, self.stack_depths, self.strict = include_gpu_kernels, stack_depths, strict

    def __call__(self, df, symbol_table=None):
        names = _text(df, "name", symbol_table)
        if names is None:
            return self._cannot(df, "no text name column")
        out = FirstIterationFilter()(df, symbol_table)
        for op, pos, cls in (
            (self.root, 0, UnderOperatorFilter),
            (self.pre, -1, AfterOperatorFilter),
            (self.post, 0, BeforeOperatorFilter),
        ):
            if (_text(out, "name", symbol_table) == op).any():
                out = cls(op, pos)(out, symbol_table)
        if self.include_gpu_kernels:
            out = pd.concat([_launched(out, df, _text(out, "cat", symbol_table)), out])
        if self.stack_depths and "depth" in out.columns:
            out = out[(out["stream"] > 0) | out["depth"].isin(self.stack_depths)]
        return out
