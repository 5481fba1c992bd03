"""Columns derived from a cached rank, kept beside its cache entry: made once, mapped by later loads.

A cached rank's columns come back mapped from ``columns.bin`` at once, but what every command then derives from
them under a rule table (the rules' columns: each event's kernel type, communication kind, deciding rule and
launching collective) would be made again by each command. A :class:`EntryStore` keeps such columns in the rank's
entry folder, one file per name (``derived-<name>.bin``; the name says what made them, e.g. the rule table's
fingerprint), and maps them back for the next command.

A derived file is written in a work folder of the cache and renamed into the entry (readers never see half of
one); its header names the entry's token (a file left from an entry since replaced is not read), the number of
events and a CRC-32 of its data, checked when the file was written before this boot of the machine (as the
entry's columns are). A file that is missing, damaged or of another entry is a miss, never an error: the columns
are made again, and written again.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from holotrace.ingest import cache
from holotrace.ingest._read import crc32
from holotrace.ingest.mapping import map_file

MAGIC = b"HOLOTRACE-DERIVED-2\n"
_ALIGN = 64
_DTYPES = frozenset({"|i1", "<i2", "<i4", "<i8", "|b1", "<f8"})


def is_derived_file(name: str) -> bool:
    """``name`` is a derived file's (a cache entry may hold it)."""
    return bool(cache.DERIVED_FILE.match(name))


class EntryStore:
    """The derived files of one cache entry (``folder``: its columns' ``token``, ``n`` events).

    :meth:`get` maps a derived file's columns (None when it is absent, damaged or not this entry's); :meth:`put`
    writes them (on a thread of the cache's, so the command goes on at once)."""

    __slots__ = ("folder", "token", "n", "written")

    def __init__(self, folder: Path, token: bytes, n: int):
        self.folder, self.token, self.n = Path(folder), bytes(token), int(n)
        self.written: set = set()  # names put by this process (each written once)

    @classmethod
    def of(cls, packed, n: int) -> Optional[EntryStore]:
        """The store of a rank mapped from a cache entry (``packed``: its ``(columns file, layout, token)``), None
        for columns mapped from anywhere else (a first load's work folder, a private spill)."""
        if not packed or not packed[2]:
            return None
        folder = Path(packed[0]).parent
        return cls(folder, packed[2], n) if cache.ENTRY_NAME.match(folder.name) else None

    def _path(self, name: str) -> Path:
        path = self.folder / f"derived-{name}.bin"
        if not is_derived_file(path.name):
            raise ValueError(f"not a derived file name: {name!r}")
        return path

    def get(self, name: str, keys: Sequence[str]) -> Optional[dict[str, np.ndarray]]:
        """The columns ``keys`` kept under ``name`` (read-only, mapped), or None (one of them missing too)."""
        try:
            kept = _read(self._path(name), self.token, self.n)
        except Exception:  # a missing or damaged file is a miss, never an error
            return None
        return {k: kept[k] for k in keys} if kept is not None and all(k in kept for k in keys) else None

    def put(self, name: str, columns: Mapping[str, np.ndarray]) -> None:
        """Keep ``columns`` (one-dimensional arrays of any length) under ``name``, written in the background;
        nothing when they cannot be (a read-only cache, a full disk: the cache is an optimisation)."""
        if name in self.written or any(
            np.ndim(a) != 1 or np.asarray(a).dtype.str not in _DTYPES for a in columns.values()
        ):
            return
        self.written.add(name)
        held = {k: np.asarray(a) for k, a in columns.items()}  # (the arrays are not changed once made)
        path = self._path(name)
        cache.in_background(lambda: _write(path, self.token, self.n, held))


def _header(buf, size: int, token: Optional[bytes], n: Optional[int]) -> Optional[dict]:
    """The header of a derived file's bytes ``buf`` (``size`` of them) when it is one, of ``token``'s entry and
    ``n`` events (None: any), with its data where its CRC-32 says (always checked without ``token``: a whole read;
    with it, for a file written before this boot only). None otherwise."""
    mv = memoryview(buf)
    if size < len(MAGIC) + 4 or bytes(mv[: len(MAGIC)]) != MAGIC:
        return None
    (k,) = struct.unpack_from("<I", mv, len(MAGIC))
    head = json.loads(bytes(mv[len(MAGIC) + 4 : len(MAGIC) + 4 + k]).decode("utf-8"))
    if token is not None and (head.get("token") != token.hex() or head.get("n") != n):
        return None
    start, end = head["data"]
    if end != size or not 0 <= start <= end:
        return None
    trusted = token is not None and head.get("boot") is not None and head["boot"] == cache.boot()
    return head if trusted or crc32(mv[start:end]) == head["crc32"] else None


def _read(path: Path, token: bytes, n: int) -> Optional[dict[str, np.ndarray]]:
    buf, size = map_file(path)
    head = _header(buf, size, token, n)
    if head is None:
        return None
    start, end = head["data"]
    out = {}
    for key, dtype, at, count in head["columns"]:
        if dtype not in _DTYPES or at < start or count < 0 or at + count * np.dtype(dtype).itemsize > end:
            return None
        a = np.frombuffer(buf, dtype=np.dtype(dtype), count=count, offset=at)
        a.flags.writeable = False
        out[key] = a
    return out


def _write(path: Path, token: bytes, n: int, columns: Mapping[str, np.ndarray]) -> None:
    """Write the derived file in a work folder of the cache, then rename it into the entry (the arrays written as
    they are: no copy of them is made)."""
    work = cache.work_dir(path.parent.parent)
    if work is None:
        return
    try:
        arrays = [np.ascontiguousarray(a) for a in columns.values()]
        place, offsets, crc = 0, [], 0
        for a in arrays:
            pad = -place % _ALIGN
            crc = crc32(bytes(pad), crc)
            place += pad
            offsets.append(place)
            crc = crc32(memoryview(a).cast("B"), crc)
            place += a.nbytes

        def header(start: int) -> bytes:
            head = {
                "token": token.hex(),
                "n": n,
                "boot": cache.boot(),
                "crc32": crc,
                "data": [start, start + place],
                "columns": [[k, a.dtype.str, start + at, len(a)] for k, a, at in zip(columns, arrays, offsets)],
            }
            text = json.dumps(head).encode("utf-8")
            return MAGIC + struct.pack("<I", len(text)) + text

        start = -(-len(header(0)) // _ALIGN) * _ALIGN + _ALIGN  # (room for the offsets' digits growing)
        head = header(start)
        if len(head) > start:  # (cannot happen: the slack holds far more digits than the offsets gain)
            return
        tmp = work / path.name
        with open(tmp, "wb") as fh:
            fh.write(head.ljust(start, b"\0"))
            at = 0
            for a, off in zip(arrays, offsets):
                fh.write(bytes(off - at))
                fh.write(memoryview(a).cast("B"))
                at = off + a.nbytes
        if path.parent.is_dir() and (path.parent / cache.COLUMNS).is_file():
            os.replace(tmp, path)  # (an entry replaced meanwhile: its token differs, the file is never read)
            _keep_newest(path)
    except OSError:
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


KEEP_PER_KIND = 4  # derived files of one kind (e.g. the rules' columns under as many rule tables) kept per entry


def _keep_newest(path: Path) -> None:
    """Remove the oldest derived files of ``path``'s kind in its entry beyond :data:`KEEP_PER_KIND` (rules files
    edited again and again would otherwise leave one file per version). A command that maps one keeps its data."""
    kind = path.name[: path.name.rindex("-") + 1]  # ("derived-rules-")
    try:
        same = [p for p in path.parent.iterdir() if p.name.startswith(kind) and is_derived_file(p.name)]
        same.sort(key=lambda p: (p.stat().st_mtime_ns, p.name), reverse=True)
    except OSError:
        return
    for p in same[KEEP_PER_KIND:]:
        try:
            p.unlink()
        except OSError:
            pass


def verify_entry(folder: Path) -> int:
    """Check every derived file of the entry ``folder`` against its data's CRC-32 (whatever boot wrote it) and
    remove those that fail or cannot be read (they are made again when next needed): how many were removed."""
    removed = 0
    try:
        names = sorted(p for p in Path(folder).iterdir() if is_derived_file(p.name))
    except OSError:
        return 0
    for p in names:
        try:
            buf, size = map_file(p)
            ok = _header(buf, size, None, None) is not None
            del buf
        except Exception:  # unreadable: as damaged
            ok = False
        if not ok:
            try:
                p.unlink()
                removed += 1
            except OSError:
                pass
    return removed
