"""Which string ids each id column of a file holds, known once when the file is decoded.

A job's string table is the union of its files' tables, so a file's ids become the job's ids through a map
that moves only the strings an earlier file numbered otherwise (a rank's own process and thread names, mostly).
Knowing which ids a column holds, the loader renumbers only the columns that hold a moved id; the masks are kept
in the cache entry, so a cached load reads no column to decide.
"""

from __future__ import annotations

import base64

import numpy as np

from holotrace.ingest import _scan
from holotrace.schema import compact_in_range, compact_ints


class IdsUsed:
    """Which of the file's string ids each id column holds, gathered piece by piece: the loader renumbers a
    column into the job's ids only when one of them moved."""

    def __init__(self) -> None:
        self._masks: dict[tuple[str, str], np.ndarray] = {}

    def mark(self, table: str, column: str, ids: np.ndarray, n: int) -> None:
        """Mark the file ids ``ids`` (a piece's column renumbered into the file's ids; -1, no string, marks
        nothing); ``n``: more than the largest of them. A mask keeps one slot past its ids, the one -1 writes."""
        self._mask(table, column, n)[ids] = True

    def renumber(self, table: str, column: str, local: np.ndarray, rmx: np.ndarray, n: int) -> np.ndarray:
        """A piece's column of string ids ``local`` as the file's ids (``rmx[local]``, -1 reading ``rmx``'s last
        entry), marked (as :meth:`mark`), in the smallest signed type that holds them (``schema.compact_ints``);
        one compiled pass (``_scan.renumber``) where ``local`` is a column of signed ints and ``rmx`` int32."""
        if rmx.dtype != np.int32 or local.dtype.kind != "i" or not len(local):
            ids = rmx[local]
            self.mark(table, column, ids, n)
            return compact_ints(ids)
        m = self._mask(table, column, n)
        out = np.empty(len(local), dtype=np.int32)
        lo, hi = _scan.renumber(np.ascontiguousarray(local), np.ascontiguousarray(rmx), out, m.view(np.uint8))
        return compact_in_range(out, lo, hi)

    def _mask(self, table: str, column: str, n: int) -> np.ndarray:
        """The column's mask, grown to hold ids below ``n`` (and its last slot, the one -1 writes)."""
        m = self._masks.get((table, column))
        if m is None or len(m) <= n:
            cap = max(n, 2 * (len(m) - 1)) if m is not None else n
            grown = np.zeros(cap + 1, dtype=bool)
            if m is not None:
                grown[: len(m) - 1] = m[:-1]
            self._masks[(table, column)] = m = grown
        return m

    def masks(self, n: int) -> dict[str, dict[str, np.ndarray]]:
        """{table: {column: mask of length ``n``, True where the column holds that file id}}."""
        out: dict[str, dict[str, np.ndarray]] = {}
        for (t, c), m in sorted(self._masks.items()):  # the same order whatever the pieces
            full = np.zeros(n, dtype=bool)
            k = min(n, len(m) - 1)
            full[:k] = m[:k]
            out.setdefault(t, {})[c] = full
        return out


def encode(masks: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, str]]:
    """The masks as text for a cache entry's ``info.json`` (bits, base64)."""
    return {
        t: {c: base64.b64encode(np.packbits(m).tobytes()).decode("ascii") for c, m in cols.items()}
        for t, cols in masks.items()
    }


def decode(text: dict, n: int) -> dict[str, dict[str, np.ndarray]]:
    """:func:`encode`'s masks back, each of length ``n`` (``ValueError`` when one does not fit)."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for t, cols in text.items():
        for c, s in cols.items():
            bits = np.frombuffer(base64.b64decode(s, validate=True), dtype=np.uint8)
            if len(bits) != (n + 7) // 8:
                raise ValueError(f"id mask of {t}.{c} has {len(bits)} bytes for {n} strings")
            out.setdefault(t, {})[c] = np.unpackbits(bits, count=n).astype(bool)
    return out
