"""The small table type of the command paths: named numpy columns of one length, in order.

A :class:`Table` is what a command lays out and what the renderers read (text, markdown, JSON); pandas is
imported only where a pandas frame is asked for (:meth:`Table.to_pandas`: the HTA facade, CSV and Parquet files)
or given (:meth:`Table.of` reads a frame's columns).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Optional

import numpy as np

__all__ = ["Table", "is_frame"]


def _column(values) -> np.ndarray:
    """One column as a 1-d numpy array (a list of text becomes an object array, never fixed-width strings)."""
    if isinstance(values, np.ndarray):
        a = values
    else:
        values = list(values) if not hasattr(values, "__len__") else values
        a = np.asarray(values)
        if a.dtype.kind in "US":  # text stays Python str objects, as a frame's text column
            a = np.array(values, dtype=object)
    if a.ndim != 1:
        raise ValueError(f"a table column is one-dimensional (got shape {a.shape})")
    return a


def _typed(values: list) -> np.ndarray:
    """Python values as the column a pandas frame would infer for them (see :meth:`Table.from_records`)."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if present and kinds <= {bool, np.bool_} and len(present) == len(values):
        return np.array(values, dtype=bool)
    if present and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in present):
        if len(present) == len(values):
            return np.array(values, dtype=np.int64)
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if present and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in present
    ):
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


class Table:
    """Columns by name, in order, each a 1-d numpy array of the same length (text: object arrays of ``str``).

    Treat the arrays as read-only: :meth:`head`, :meth:`take` and :meth:`select` make new tables that may share
    them.
    """

    __slots__ = ("_cols", "_n")

    def __init__(self, columns: Optional[Mapping[str, object]] = None, *, n: Optional[int] = None):
        cols = {str(k): _column(v) for k, v in (columns or {}).items()}
        lengths = {len(a) for a in cols.values()}
        if len(lengths) > 1:
            raise ValueError(f"table columns differ in length: {sorted(lengths)}")
        self._cols = cols
        self._n = lengths.pop() if lengths else int(n or 0)

    @classmethod
    def of(cls, data) -> Table:
        """``data`` as a table: a :class:`Table` as it is, a pandas frame by its columns (index dropped), or a
        mapping of columns."""
        if isinstance(data, Table):
            return data
        if is_frame(data):
            return cls({str(c): data[c].to_numpy() for c in data.columns}, n=len(data))
        return cls(data)

    @classmethod
    def from_records(cls, rows, columns) -> Table:
        """A table of ``rows`` (each a mapping by column name, or a sequence in ``columns``' order), each column
        typed as a pandas frame of the same rows would be: integers int64 (float64 with NaN when one is None),
        numbers float64, booleans bool, anything else (text, None) an object array."""
        columns = [str(c) for c in columns]
        rows = list(rows)
        if rows and isinstance(rows[0], Mapping):
            values = [[r.get(c) for r in rows] for c in columns]
        else:
            values = [list(v) for v in zip(*rows)] if rows else [[] for _ in columns]
        return cls({c: _typed(v) for c, v in zip(columns, values)}, n=len(rows))

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    @property
    def empty(self) -> bool:
        """No row or no column (as a pandas frame)."""
        return self._n == 0 or not self._cols

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]

    def __contains__(self, name) -> bool:
        return name in self._cols

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols)

    def items(self):
        return self._cols.items()

    def __repr__(self) -> str:
        return f"Table({len(self)} rows: {', '.join(self._cols)})"

    def head(self, n: int) -> Table:
        """The first ``n`` rows."""
        return Table({k: a[:n] for k, a in self._cols.items()}, n=min(n, self._n))

    def take(self, rows) -> Table:
        """The rows at positions ``rows`` (a boolean mask or integer positions), in that order."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return Table({k: a[rows] for k, a in self._cols.items()}, n=len(rows))

    def records(self) -> list[tuple]:
        """Rows as tuples of Python values (numpy scalars converted)."""
        return list(zip(*(a.tolist() for a in self._cols.values()))) if self._cols else [() for _ in range(self._n)]

    def to_pandas(self, *, object_text: bool = False, copy: bool = True):
        """A pandas frame of the same columns (imports pandas: for the API boundary and file writers).

        With ``object_text`` an object column stays of dtype ``object`` (pandas would infer its ``str`` dtype
        for text): the frame that an analysis built with ``pd.Series(..., dtype=object)``. ``copy=False`` lets the
        frame hold the table's arrays (for a table made only to be converted)."""
        import pandas as pd

        cols = {
            k: pd.Series(a, dtype=object, copy=False) if object_text and a.dtype == object else a
            for k, a in self._cols.items()
        }
        return pd.DataFrame(cols, index=pd.RangeIndex(self._n), copy=copy)


def is_frame(x) -> bool:
    """``x`` is a pandas DataFrame (without importing pandas: no frame exists before pandas is imported)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(x, pd.DataFrame)
