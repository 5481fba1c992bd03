"""The job-wide string table: every name, category and text arg is an int id."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np


class StringTable:
    """Append-only table of strings; ids are dense and deterministic (first seen first)."""

    def __init__(self, strings: Iterable[str] = ()):
        self.table: list[str] = []
        self._index: dict[str, int] = {}
        for s in strings:
            self.add(s)

    def arrow(self, missing: str = ""):
        """The table as one pyarrow ``large_string`` array with ``missing`` appended (id -1 → last entry).

        Built once per table length and ``missing`` value.
        """
        cache = self.__dict__.setdefault("_arrow", {})
        hit = cache.get(missing)
        if hit is None or hit[0] != len(self.table):
            import pyarrow as pa

            hit = (len(self.table), pa.array([*self.table, missing], type=pa.large_string()))
            cache[missing] = hit
        return hit[1]

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, i: int) -> str:
        return self.table[i] if i >= 0 else ""

    def add(self, s: str) -> int:
        k = self._index.get(s)
        if k is None:
            k = len(self.table)
            self._index[s] = k
            self.table.append(s)
        return k

    def id(self, s: str) -> int:
        """Id of ``s``, or -1 when the job never uses it."""
        return self._index.get(s, -1)

    def merge(self, local: list[str]) -> np.ndarray:
        """Add a file-local table; return the array mapping local ids to job ids."""
        return np.array([self.add(s) for s in local], dtype=np.int32)

    def decode(self, ids: np.ndarray, empty: str = "") -> np.ndarray:
        """Vectorised id -> str (object array); -1 -> ``empty``."""
        arr = np.asarray(ids).astype(np.intp, copy=False)  # small id dtypes would wrap the fill value
        lut = np.empty(len(self.table) + 1, dtype=object)
        lut[:-1] = self.table
        lut[-1] = empty
        return lut[np.where(arr >= 0, arr, len(self.table))]

    def matching(self, pattern: str | re.Pattern, *, search: bool = False) -> np.ndarray:
        """Ids of strings matching a regex (at the start, or anywhere with ``search``)."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        f = rx.search if search else rx.match
        return np.array([i for i, s in enumerate(self.table) if f(s)], dtype=np.int32)

    def mask(self, ids: np.ndarray, predicate) -> np.ndarray:
        """Boolean mask over ``ids``: predicate(string) evaluated once per distinct string."""
        lut = np.zeros(len(self.table) + 1, dtype=bool)
        for i, s in enumerate(self.table):
            lut[i] = bool(predicate(s))
        arr = np.asarray(ids).astype(np.intp, copy=False)  # small id dtypes would wrap the fill value
        return lut[np.where(arr >= 0, arr, len(self.table))]

    def lookup(self, ids: np.ndarray, values: np.ndarray, missing) -> np.ndarray:
        """Map ids through a per-string value array (len == len(table)); -1 -> missing."""
        lut = np.empty(len(self.table) + 1, dtype=values.dtype)
        lut[:-1] = values
        lut[-1] = missing
        arr = np.asarray(ids).astype(np.intp, copy=False)  # small id dtypes would wrap the fill value
        return lut[np.where(arr >= 0, arr, len(self.table))]
