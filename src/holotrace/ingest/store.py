"""Columns kept in files instead of the heap.

While a trace file is decoded, each piece's columns are appended to a :class:`Spill`: held in memory up to
``SPILL_MEMORY`` bytes (a file of a few hundred MB), beyond that moved to one file per column in a private
folder, so the decoder holds only the pieces in flight, whatever the file's size.
When every column is complete, :meth:`Spill.pack` writes them into one *packed file* (a header, then
each column at an aligned offset, in its final dtype), and :func:`open_packed` maps that file read-only:
a loaded rank's columns are views of the mapping, paged in by the operating system when an analysis
reads them and dropped by it under memory pressure. The packed file is also what the cache keeps.

A column may be appended in pieces of different integer widths (each piece is stored in the smallest
type that holds it); the packed column has the widest of them, as concatenating the pieces would give. A column
in a file holds the widest so far (its rows are rewritten when a wider piece comes), so that its file is the
packed column's bytes: a file decoded in the loading process is used from the spill as it is (:meth:`Spill.join`,
:meth:`Spill.mapped`) while its packed file is written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import numpy as np

from holotrace.atomic import sweep, temp_name
from holotrace.ingest._read import Crc32
from holotrace.ingest.mapping import map_file

MAGIC = b"HOLOTRACE-COLUMNS-1\n"
HEADER = 64  # bytes before the first column: the magic and a 16-byte token, zero-padded
ALIGN = 64  # every column starts at a multiple of this


class SpillError(OSError):
    """The folder of a spill or packed file could not be made or written (``filename``: the folder)."""


TEMP_PREFIX = "holotrace-"  # private folders: holotrace-<host>-<pid>-<stem>-<random>
_swept: dict = {}  # the folders this process swept already


def temp_folder(stem: str = "", where: Optional[str] = None) -> Path:
    """A new private folder in ``where`` (default: the system's temporary folder), named after this process;
    :class:`SpillError` naming that folder when it cannot be made. The first one a process makes in a folder
    removes there what killed processes of this machine left (a load killed mid-file, a lost worker)."""
    where = where or tempfile.gettempdir()
    if _swept.get(where) != os.getpid():
        _swept[where] = os.getpid()
        sweep(where, TEMP_PREFIX)
    try:
        return Path(tempfile.mkdtemp(prefix=temp_name(stem, TEMP_PREFIX) + "-", dir=where))
    except OSError as e:
        raise SpillError(e.errno, e.strerror or str(e), where) from None


SPILL_MEMORY = 64 << 20  # bytes of columns a spill holds in memory; beyond that its columns go to files


def spill_memory(path: str) -> int:
    """A :class:`Spill`'s memory for decoding the file ``path``: all its columns held until packed when they fit
    (about 0.35 bytes of columns per byte of JSON; a gzipped trace taken as 12 times its size), else none (columns
    to files from the first piece: the peak stays that of the pieces in flight)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size * (12 if fh.read(2) == b"\x1f\x8b" else 1)
    except OSError:
        return 0
    return SPILL_MEMORY if size * 0.35 <= SPILL_MEMORY else 0


class _Column:
    """One column: segments of (dtype, rows, byte offset) appended in order, held in memory (``parts``, one array
    per segment) until :meth:`to_file` moves them into a spill file of their own."""

    __slots__ = ("fd", "path", "segments", "rows", "nbytes", "parts")

    def __init__(self):
        self.fd = -1
        self.path: Optional[Path] = None
        self.segments: list[tuple[np.dtype, int, int]] = []
        self.parts: Optional[list[np.ndarray]] = []  # None once in a file
        self.rows = 0
        self.nbytes = 0

    def append(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        if self.parts is not None:
            if a.base is not None:  # a view would keep its piece's whole buffer alive
                a = a.copy()
            self.parts.append(a)
            self.segments.append((a.dtype, len(a), self.nbytes))
        else:  # a file holds one dtype, the packed column's, so that it can be mapped as it is
            dt = a.dtype if not self.segments or (not self.rows and len(a)) else self.segments[0][0]
            if len(a) and np.result_type(dt, a.dtype) != dt:  # (empty pieces do not widen it)
                dt = np.result_type(dt, a.dtype)
                self._widen(dt)
            a = a.astype(dt, copy=False)
            _write_all(self.fd, memoryview(a).cast("B") if a.nbytes else b"", self.nbytes)
            self.segments = [(dt, self.rows + len(a), 0)]
        self.nbytes += a.nbytes
        self.rows += len(a)

    def _widen(self, dt: np.dtype) -> None:
        """Rewrite the rows in the file in the wider ``dt``: a few times per column at most (8 to 16 to 32 to 64
        bits), as a rule early (ids grow from the file's start)."""
        rows = self.read(0, self.rows).astype(dt)
        _write_all(self.fd, memoryview(rows).cast("B") if rows.nbytes else b"", 0)
        self.segments, self.nbytes = [(dt, self.rows, 0)], rows.nbytes

    def mapped(self) -> np.ndarray:
        """The column's file mapped read-only (a column in a file holds the packed dtype)."""
        if not self.rows:
            a = np.empty(0, dtype=self.dtype)
        else:
            buf, _ = map_file(self.path)
            a = np.frombuffer(buf, dtype=self.dtype, count=self.rows)
        a.flags.writeable = False
        return a

    def join(self) -> np.ndarray:
        """The parts held in memory as one read-only array in the packed dtype; it becomes the column's only part
        (so :meth:`Spill.pack` writes it as it is)."""
        out = np.empty(self.rows, dtype=self.dtype)
        pos = 0
        for a in self.parts or ():
            out[pos : pos + len(a)] = a
            pos += len(a)
        out.flags.writeable = False  # (as a mapped column is: the packed file is written from it meanwhile)
        self.parts, self.segments, self.nbytes = [out], [(out.dtype, len(out), 0)], out.nbytes
        return out

    def to_file(self, path: Path) -> None:
        """Move the parts held in memory into the file ``path`` (appends go there from now on)."""
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
        self.path = path
        parts, self.parts = self.parts or [], None
        self.segments, self.rows, self.nbytes = [], 0, 0
        for a in parts:
            self.append(a)

    @property
    def dtype(self) -> np.dtype:
        """The packed dtype: what concatenating the segments gives (empty segments do not widen it)."""
        used = [dt for dt, rows, _ in self.segments if rows]
        if not used:
            return self.segments[0][0] if self.segments else np.dtype(np.int8)
        return np.result_type(*used)

    def read(self, a: int, b: int) -> np.ndarray:
        """Rows [a, b) in the packed dtype (a copy on the heap)."""
        out = np.empty(max(0, b - a), dtype=self.dtype)
        pos = 0
        start = 0
        for k, (dt, rows, off) in enumerate(self.segments):
            lo, hi = max(a, start), min(b, start + rows)
            if lo < hi:
                if self.parts is not None:
                    out[pos : pos + hi - lo] = self.parts[k][lo - start : hi - start]
                else:
                    raw = os.pread(self.fd, (hi - lo) * dt.itemsize, off + (lo - start) * dt.itemsize)
                    out[pos : pos + hi - lo] = np.frombuffer(raw, dtype=dt)
                pos += hi - lo
            start += rows
        return out

    def close(self) -> None:
        self.parts = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Spill:
    """Tables appended column by column, in memory up to ``memory`` bytes, then into files of a private folder
    (made when first needed, removed by :meth:`close`).

    ``folder``: where that folder is made (default: the system's temporary folder).
    """

    def __init__(self, folder: Optional[Path] = None, memory: Optional[int] = None):
        self._where = None if folder is None else str(folder)
        self._folder: Optional[Path] = None
        self._memory = SPILL_MEMORY if memory is None else memory
        self._held = 0  # bytes held in memory; -1 once the columns are in files
        self._cols: dict[str, dict[str, _Column]] = {}
        self._n = 0
        self.packed_crc32: Optional[int] = None  # the packed file's CRC-32, when :meth:`pack` wrote it from memory

    @property
    def folder(self) -> Path:
        """The spill's private folder (made now if it was not yet)."""
        if self._folder is None:
            self._folder = temp_folder("spill", self._where)
        return self._folder

    def append(self, table: str, columns: dict[str, np.ndarray]) -> None:
        cols = self._cols.setdefault(table, {})
        try:
            for name, a in columns.items():
                c = cols.get(name)
                if c is None:
                    c = cols[name] = _Column()
                    if self._held < 0:
                        self._to_file(c)
                c.append(a)
                if self._held >= 0:
                    self._held += a.nbytes
            if self._held > self._memory:
                for cs in self._cols.values():
                    for c in cs.values():
                        self._to_file(c)
                self._held = -1
        except OSError as e:  # the temporary folder is full, gone or read-only
            raise SpillError(e.errno, e.strerror or str(e), str(self._where or tempfile.gettempdir())) from None

    def _to_file(self, c: _Column) -> None:
        self._n += 1
        c.to_file(self.folder / f"{self._n}")

    @property
    def in_memory(self) -> bool:
        """Every column is still held in memory (none went to a file)."""
        return self._held >= 0

    def rows(self, table: str) -> int:
        cols = self._cols.get(table)
        return next(iter(cols.values())).rows if cols else 0

    def columns(self, table: str) -> list[str]:
        return list(self._cols.get(table, {}))

    def read(self, table: str, name: str, a: int = 0, b: Optional[int] = None) -> np.ndarray:
        c = self._cols[table][name]
        return c.read(a, c.rows if b is None else b)

    def join(self, order: dict[str, list[str]]) -> dict[str, dict[str, np.ndarray]]:
        """Every column held in memory joined into one read-only array, {table: {column: array}} in the order
        :meth:`pack` writes them (then packing writes these arrays as they are)."""
        if not self.in_memory:
            raise ValueError("the spill's columns are in files, not in memory")
        return {
            table: {name: cols[name].join() for name in _pack_order(cols, order.get(table, ()))}
            for table, cols in self._cols.items()
        }

    def mapped(self, order: dict[str, list[str]]) -> dict[str, dict[str, np.ndarray]]:
        """Every column's file mapped read-only, {table: {column: array}} in the order :meth:`pack` writes them: the
        columns of a spill whose columns are in files, to use before they are packed (or instead). A mapping
        outlives the spill's folder (the file's space is freed with the mapping)."""
        if self.in_memory:
            raise ValueError("the spill's columns are in memory, not in files")
        return {
            table: {name: cols[name].mapped() for name in _pack_order(cols, order.get(table, ()))}
            for table, cols in self._cols.items()
        }

    def pack(self, path: Path, order: dict[str, list[str]], token: bytes) -> dict:
        """Write every column into the packed file ``path``; returns its layout (for :func:`open_packed`).

        ``order``: the column order per table (columns missing from the spill are left out; columns
        not named come after, in the order they were first appended). When every column is held in memory, the
        file's CRC-32 is taken as it is written (``packed_crc32``).
        """
        layout: dict[str, dict[str, list]] = {}
        crc = Crc32() if self.in_memory else None
        self.packed_crc32 = None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            _write_header(fd, token, crc)
            pos = HEADER
            for table, cols in self._cols.items():
                out = layout[table] = {}
                for name in _pack_order(cols, order.get(table, ())):
                    c = cols[name]
                    dt = c.dtype
                    out[name] = [pos, c.rows, dt.str]
                    pos = _copy_column(c, dt, fd, pos, crc)
                    pad = -pos % ALIGN
                    if pad:
                        _write_all(fd, b"\0" * pad, pos, crc)
                        pos += pad
        finally:
            os.close(fd)
        if crc is not None:
            crc.finish(pos)
            self.packed_crc32 = crc.value
        return layout

    def close(self) -> None:
        for cols in self._cols.values():
            for c in cols.values():
                c.close()
        self._cols = {}
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PackedWriter:
    """A packed file written in place: every column's rows and dtype known first, its rows written at their
    offsets in any order (no spill); ``close()`` returns the layout for :func:`open_packed`."""

    def __init__(self, path: Path, columns: dict[str, dict[str, tuple[int, np.dtype]]], token: bytes):
        self._folder = str(Path(path).parent)
        self.layout: dict[str, dict[str, list]] = {}
        pos = HEADER
        for table, cols in columns.items():
            out = self.layout[table] = {}
            for name, (rows, dt) in cols.items():
                dt = np.dtype(dt)
                out[name] = [pos, rows, dt.str]
                pos += rows * dt.itemsize
                pos += -pos % ALIGN
        self._fd = -1
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
            _write_header(self._fd, token)
            os.ftruncate(self._fd, pos)
        except OSError as e:
            self.close()
            raise SpillError(e.errno, e.strerror or str(e), self._folder) from None

    def write(self, table: str, name: str, first_row: int, a: np.ndarray) -> None:
        off, rows, dts = self.layout[table][name]
        a = np.ascontiguousarray(a, dtype=np.dtype(dts))
        if first_row < 0 or first_row + len(a) > rows:
            raise ValueError(f"rows {first_row}..{first_row + len(a)} are outside column {table}.{name} ({rows} rows)")
        try:
            _write_all(self._fd, memoryview(a).cast("B") if a.nbytes else b"", off + first_row * a.dtype.itemsize)
        except OSError as e:
            raise SpillError(e.errno, e.strerror or str(e), self._folder) from None

    def close(self) -> dict:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return self.layout


def _pack_order(cols: dict, order) -> list[str]:
    """A table's column names as packed: those ``order`` names (the ones present), then the others as appended."""
    return [k for k in order if k in cols] + [k for k in cols if k not in order]


def _copy_column(c: _Column, dt: np.dtype, fd: int, pos: int, crc: Optional[Crc32] = None) -> int:
    """Write column ``c`` in dtype ``dt`` at ``pos`` of ``fd``; the position after it (``crc``: takes the bytes
    of a column held in memory)."""
    if c.parts is not None:  # held in memory: written in batches of up to 8 MB
        batch: list[np.ndarray] = []
        size = 0
        for a in [*c.parts, None]:
            if a is None or (batch and size + a.nbytes > 8 << 20):
                if batch:
                    joined = (
                        np.concatenate(batch).astype(dt, copy=False)
                        if len(batch) > 1
                        else batch[0].astype(dt, copy=False)
                    )
                    _write_all(
                        fd, memoryview(np.ascontiguousarray(joined)).cast("B") if joined.nbytes else b"", pos, crc
                    )
                    pos += joined.nbytes
                batch, size = [], 0
            if a is not None and len(a):
                batch.append(a)
                size += a.nbytes
        return pos
    for sdt, rows, off in c.segments:
        if not rows:
            continue
        if sdt == dt:  # same type: copied inside the kernel, never through this process
            left, src = rows * sdt.itemsize, off
            while left:
                k = _copy_range(c.fd, fd, left, src, pos)
                left -= k
                src += k
                pos += k
        else:
            step = max(1, (8 << 20) // sdt.itemsize)
            for a in range(0, rows, step):
                k = min(step, rows - a)
                part = np.frombuffer(os.pread(c.fd, k * sdt.itemsize, off + a * sdt.itemsize), dtype=sdt).astype(dt)
                _write_all(fd, memoryview(part).cast("B"), pos)
                pos += part.nbytes
    return pos


def _copy_range(src: int, dst: int, n: int, src_off: int, dst_off: int) -> int:
    if hasattr(os, "copy_file_range"):
        try:
            k = os.copy_file_range(src, dst, n, src_off, dst_off)
            if k > 0:
                return k
        except OSError:
            pass
    data = os.pread(src, min(n, 8 << 20), src_off)
    if not data:
        raise OSError("spill file is shorter than its columns")
    _write_all(dst, data, dst_off)
    return len(data)


def _write_header(fd: int, token: bytes, crc: Optional[Crc32] = None) -> None:
    _write_all(fd, (MAGIC + token).ljust(HEADER, b"\0"), 0, crc)


def _write_all(fd: int, data, at: int, crc: Optional[Crc32] = None) -> None:
    if crc is not None:
        crc.add(data)
    view = memoryview(data)
    while len(view):
        k = os.pwrite(fd, view, at)
        view = view[k:]
        at += k


def open_packed(path: str | Path, layout: dict, token: Optional[bytes] = None) -> dict[str, dict[str, np.ndarray]]:
    """Map a packed file read-only; {table: {column: read-only array}} as ``layout`` describes.

    Raises ``ValueError`` when the file does not hold what the layout says (or another token).
    """
    mm, size = map_file(Path(path))
    if bytes(memoryview(mm)[: len(MAGIC)]) != MAGIC or (
        token is not None and bytes(memoryview(mm)[len(MAGIC) : len(MAGIC) + len(token)]) != token
    ):
        raise ValueError("not a packed column file of this entry")
    out: dict[str, dict[str, np.ndarray]] = {}
    for table, cols in layout.items():
        t = out[table] = {}
        for name, (off, rows, dts) in cols.items():
            dt = np.dtype(dts)
            if off < HEADER or off + rows * dt.itemsize > size:
                raise ValueError(f"column {table}.{name} lies outside the file")
            a = np.frombuffer(mm, dtype=dt, count=rows, offset=off) if rows else np.empty(0, dtype=dt)
            a.flags.writeable = False
            t[name] = a
    return out
