"""Decode one Kineto trace file into columnar tables.

The file is streamed (plain or gzip) and cut into pieces of whole events; a compiled scanner
(``holotrace.ingest._scan``) reads each piece straight into typed column buffers, on several
threads when asked (it runs without the GIL). No Python object is made per event: this module
only works on the pieces' numpy columns (string ids, category arg rules, bad values) and
concatenates them. Times are exact integer nanoseconds from the decimal text.

Interface: ``decode_into(path, spill) -> DecodedFile`` (the loader's: tables written to a spill, then
packed and mapped) and ``decode_file(path) -> DecodedFile`` (a file on its own, tables in memory: the
decoder's tests); nothing else in holotrace depends on how decoding is done.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import msgspec
import numpy as np

from holotrace.errors import TraceFormatError, TraceReadError
from holotrace.findings import FindingCode
from holotrace.ingest import _scan
from holotrace.ingest._read import Crc32, pieces, range_cuts, raw_bytes, read_ahead
from holotrace.ingest._read import split_header as _split_header
from holotrace.ingest.columns import PieceOut, Problem, piece_strings, piece_tables, to_file
from holotrace.ingest.decoded import DecodedFile, set_tables  # noqa: F401  (part of this module's interface)
from holotrace.ingest.ids_used import IdsUsed
from holotrace.ingest.meta import decode_meta as _decode_meta
from holotrace.ingest.meta import json_error as _json_error
from holotrace.ingest.meta import tail_meta as _tail_meta
from holotrace.ingest.store import Spill, open_packed
from holotrace.schema import event_columns

# piece size: a scanning thread's unit of work (1-8 MB measured: 4 as fast as 8 with a peak 35-40 MB lower, 2 and
# less slower)
CHUNK_BYTES = 4 * 1024 * 1024
ST_DONE, ST_END, ST_TRUNC, ST_ERR = 0, 1, 2, 3

# --------------------------------------------------------------------------- results


def iter_bytes(
    path: Path,
    chunk: int = CHUNK_BYTES,
    problems: Optional[list] = None,
    is_gzip: Optional[list] = None,
    crc: Optional[Crc32] = None,
):
    """Yield the (decompressed) bytes of a file in chunks.

    A gzip stream that ends early yields what could be decompressed and adds a
    ``truncated_gzip`` problem instead of failing. ``crc``: see :func:`raw_bytes`.
    """

    def note(kind: str, detail: str) -> None:
        if kind == "truncated":
            problems.append(
                Problem(
                    FindingCode.TRUNCATED_GZIP,
                    "gzip stream ends early: the file was cut; only the part before the cut was read",
                )
            )
        elif kind == "damaged":
            problems.append(
                Problem(
                    FindingCode.TRUNCATED_GZIP,
                    f"gzip data is damaged ({detail}): only the part before the damage was read",
                )
            )
        else:
            problems.append(
                Problem(
                    FindingCode.TRAILING_DATA,
                    f"bytes after the end of the gzip stream are not gzip data ({detail}); they were ignored",
                )
            )

    return raw_bytes(Path(path), chunk, note if problems is not None else None, is_gzip, crc)


# --------------------------------------------------------------------------- the tables of a file


class _Tables:
    """The pieces' columns of one file, in file order, with one string table."""

    def __init__(self, path: str, all_args: bool, spill: Spill):
        self.path = path
        self.interner = _scan.Interner()
        self.strings: list[str] = []
        self.used = IdsUsed()
        self.spill = spill
        self.problems: list[Problem] = []
        self.phase_counts: dict[str, int] = {}
        self.ts_is_float = False
        self.nonstd = False
        self.all_args = all_args
        self.raw_args: Optional[list] = [] if all_args else None
        self.n = 0
        self.on_bytes = None
        self.damage = ""  # what the event list's damage looks like, for the message

    def add(self, r: dict, piece, out: Optional[PieceOut]) -> None:
        """Append a scanned piece (``out``: its tables from ``piece_tables``, made on the scanning thread)."""
        n = r["n"]
        self.nonstd = self.nonstd or r["nonstd"]
        if not n:
            return
        if out is None:
            raise TraceReadError(
                "text is not valid UTF-8", path=self.path, fix="the file is damaged or not a JSON trace"
            )
        self.ts_is_float = self.ts_is_float or r["ts_float"]
        remap = np.frombuffer(self.interner.add(r["sblob"], r["soff"]), dtype=np.int32)
        try:
            self.strings.extend(self.interner.strings(len(self.strings)))
        except UnicodeDecodeError as e:
            raise TraceReadError(
                f"text is not valid UTF-8 ({e.reason})", path=self.path, fix="the file is damaged or not a JSON trace"
            ) from None
        to_file(out, np.append(remap, np.int32(-1)), self.n, self.used)
        for ph, cnt in out.phase_counts.items():
            self.phase_counts[ph] = self.phase_counts.get(ph, 0) + cnt
        for table, cols in out.tables.items():
            self.spill.append(table, cols)
        for p, pos in out.problems:
            if pos is not None:
                p.example = f"event #{pos + self.n}: {p.example}"
            self.problems.append(p)
        for col, (cnt, example, default) in out.bad.items():
            self.problems.append(
                Problem(
                    FindingCode.BAD_ARG_TYPE,
                    f"non-integer values of arg '{col}' (read as {default})",
                    cnt,
                    example,
                    counted=True,
                )
            )
        if self.all_args:
            self.raw_args.extend(out.raw_args)
        self.n += n


# --------------------------------------------------------------------------- the file


def decode_file(
    path: str | Path,
    *,
    all_args: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    workers: int = 1,
    on_bytes: Optional[Callable[[int], None]] = None,
) -> DecodedFile:
    """Decode one trace file (plain or gzipped JSON) into columnar tables.

    ``workers`` threads scan pieces of about ``chunk_bytes`` at once; ``on_bytes(k)`` is called as
    ``k`` more (uncompressed) bytes are read. Raises a :class:`holotrace.errors.HolotraceError`
    subclass for files that cannot be used at all. A file damaged in its tail is decoded up to
    the damage and the loss is reported in ``problems``.

    The tables are read-only arrays mapped from a private file (see :mod:`holotrace.ingest.store`).
    """
    with Spill() as spill:
        d = decode_into(path, spill, all_args=all_args, chunk_bytes=chunk_bytes, workers=workers, on_bytes=on_bytes)
        packed = spill.folder / "packed"
        token = os.urandom(16)
        layout = spill.pack(packed, {"events": [c for c, _ in event_columns()]}, token)
        set_tables(d, open_packed(packed, layout, token))
    return d


def decode_into(
    path: str | Path,
    spill: Spill,
    *,
    all_args: bool = False,
    chunk_bytes: int = CHUNK_BYTES,
    workers: int = 1,
    on_bytes: Optional[Callable[[int], None]] = None,
    checksum: bool = True,
) -> DecodedFile:
    """:func:`decode_file`, with the tables appended to ``spill`` (the result's tables are left empty); ``checksum``:
    take the file's CRC-32 (``content_crc32``) as its bytes pass."""
    p = Path(path)
    spath = str(p)
    problems: list[Problem] = []
    gz = [False, 0]  # is gzip, bytes of BOM skipped
    crc = Crc32() if checksum else None  # for the cache entry, taken as the bytes pass (gzip: as they are read)
    stream = iter_bytes(p, chunk_bytes, problems, gz, crc)
    total = [0]

    def count(k: int) -> None:
        total[0] += k
        if on_bytes is not None:
            on_bytes(k)

    buf = bytearray()
    header_end = -1
    fmt = "object"
    meta: dict = {}
    # 1. find the start of the event array
    for b in stream:
        count(len(b))
        buf += b
        if len(buf) >= 16:
            header_end, fmt = _split_header(bytes(buf), spath)
            if header_end >= 0:
                break
    else:
        if total[0] == 0:
            raise TraceFormatError(
                "file is empty (0 bytes)", path=spath, fix="the profiler did not finish writing it; re-export the trace"
            )
        header_end, fmt = _split_header(bytes(buf), spath)
        if header_end < 0:
            try:
                top = msgspec.json.decode(bytes(buf))
            except (msgspec.DecodeError, RecursionError) as e:
                if problems:
                    raise TraceReadError(
                        "gzip stream ends early (truncated file) and no events could be read",
                        path=spath,
                        fix="re-copy or re-export the file",
                    ) from None
                raise _json_error(spath, e, "(cut off or damaged before its event list)") from None
            if isinstance(top, dict):
                raise TraceFormatError(
                    "JSON has no 'traceEvents' (not a PyTorch profiler trace)",
                    path=spath,
                    fix="pass the Kineto trace file, e.g. *.pt.trace.json.gz",
                )
            raise TraceFormatError(
                "JSON is not a trace object", path=spath, fix="pass a Kineto trace (.json or .json.gz)"
            )
    if fmt == "object":
        header = bytes(buf[:header_end])
        head_text = header[: header.rfind(b'"traceEvents"')].rstrip()
        if head_text.endswith(b","):
            head_text = head_text[:-1]
        try:
            meta = _decode_meta(head_text + b"}")
        except (msgspec.DecodeError, ValueError, RecursionError) as e:
            raise _json_error(spath, e, "before 'traceEvents'") from None
    # 2. scan the pieces, in order
    tables = _Tables(spath, all_args, spill)
    tables.on_bytes = on_bytes
    fd = -1
    items = None
    try:
        if not gz[0]:  # plain file: the scanning threads read their own byte ranges
            stream.close()
            fd = os.open(spath, os.O_RDONLY)
            size = os.fstat(fd).st_size
            seen = total[0]
            total[0] = size
            if crc is not None:  # the header, then each piece and the comma cut before the next
                crc.add(os.pread(fd, header_end + gz[1], 0))
            items = _range_items(fd, range_cuts(fd, header_end + gz[1], size, max(1, chunk_bytes)), seen, on_bytes)
        else:
            # the gzip stream is inflated on a thread of its own, ahead of the pieces being cut and scanned
            items = (
                (_const(pc), last, 0)
                for pc, last in pieces(bytes(buf[header_end:]), read_ahead(stream), max(1, chunk_bytes), count)
            )
        del buf
        state, tail = _scan_pieces(items, tables, max(1, workers), all_args, None if gz[0] else crc)
        if fd >= 0 and crc is not None:
            crc.finish(size)
    finally:
        if items is not None:
            items.close()  # stops the inflating thread (gzip) when the event list ended early
        if fd >= 0:
            os.close(fd)
    # 3. what follows the event list
    complete = False
    if state == "end":
        tail_meta, complete = _tail_meta(tail, fmt)
        if complete:
            meta.update(tail_meta)
        elif tables.n == 0:
            raise TraceFormatError(
                "metadata after the (empty) event list is not valid JSON",
                path=spath,
                fix="the file is damaged; re-export the trace",
            )
    elif tables.n == 0:
        raise TraceFormatError(
            f"the event list could not be read{tables.damage or ' (damaged at its first event)'}",
            path=spath,
            fix="the file is damaged or truncated; re-export the trace",
        )
    if not complete:
        if state == "end":
            problems.append(
                Problem(
                    FindingCode.TRUNCATED_JSON,
                    f"every one of the {tables.n} events was read, but the metadata after the event list is damaged "
                    f"(not valid JSON/UTF-8, or not closed): it was ignored",
                )
            )
        else:
            problems.append(
                Problem(
                    FindingCode.TRUNCATED_JSON,
                    f"the event list is cut off or damaged after {tables.n} events{tables.damage}: those were read, "
                    f"the rest (and any metadata after the events) is lost",
                )
            )
    if tables.nonstd:
        problems.append(
            Problem(FindingCode.NON_STANDARD_JSON, "the file uses non-standard JSON (NaN or Infinity literals)")
        )
    _scan.trim()  # the pieces' buffers are gone: give their memory back
    if not spill.rows("events") and not spill.columns("events"):  # no events: the schema's columns, empty
        spill.append("events", {col: np.empty(0, dtype=dt) for col, dt in event_columns()})
    phase_counts = dict(sorted(tables.phase_counts.items()))  # (by phase: the same order whatever the pieces)
    problems = tables.problems + problems
    for k in ("B", "E", "b", "e", "n"):
        if phase_counts.get(k):
            problems.append(
                Problem(
                    FindingCode.UNSUPPORTED_PHASE,
                    f"events of phase '{k}' (begin/end pairs are not reconstructed)",
                    phase_counts[k],
                    counted=True,
                )
            )
    return DecodedFile(
        path=spath,
        meta=meta,
        strings=tables.strings,
        events={},
        instants={},
        counters={},
        flows={},
        names={},
        n_trace_events=tables.n,
        phase_counts=phase_counts,
        ts_is_float=tables.ts_is_float,
        problems=_merge_problems(problems),
        raw_args=tables.raw_args,
        format=fmt,
        bytes_read=total[0],
        ids_used=tables.used.masks(len(tables.strings)),
        content_crc32=crc.value if crc is not None else None,
    )


def _const(piece):
    return lambda: piece


def _range_items(fd: int, cuts: list, seen: int, on_bytes):
    """(read the piece, is last, bytes it adds to the progress) for each byte range of a plain file."""
    for i, (a, b) in enumerate(cuts):
        new = max(0, b - max(a, seen))
        yield (lambda a=a, b=b: os.pread(fd, b - a, a)), i == len(cuts) - 1, new if on_bytes else 0


def _scan_pieces(items, tables: _Tables, workers: int, all_args: bool, crc: Optional[Crc32]) -> tuple[str, bytes]:
    """Read and scan pieces (on ``workers`` threads) and add them to the tables in file order.

    ``items`` yields (function returning the piece's bytes, is last, progress bytes); ``crc`` (a plain file's
    byte ranges): takes each piece and the comma cut after it. Returns
    ("end", bytes after the event list's ``]``) or ("cut", b"") when the list ends early or is
    damaged: the events before the damage are kept.
    """
    ex = ThreadPoolExecutor(workers) if workers > 1 else None
    window: deque = deque()
    carry = None
    state: Optional[str] = None
    tail: list = []

    def tables_of(piece, r):
        try:
            return piece_tables(r, piece, piece_strings(r), all_args) if r["n"] else PieceOut()
        except UnicodeDecodeError:
            return None

    def work(get):
        piece = get()
        r = _scan.scan(piece, all_args)
        # an unfinished piece is joined to the next one: its tables would be thrown away
        return piece, r, (tables_of(piece, r) if r["status"] != ST_TRUNC else None)

    def passed(raw, last: bool):
        if crc is not None:
            crc.add(raw)
            if not last:
                crc.add(b",")
        return raw

    def handle(get, last: bool, fut, progress: int) -> None:
        nonlocal carry, state
        if state == "end":
            tail.append(passed(fut.result()[0] if fut is not None else get(), last))
            return
        if state is not None:
            return
        if carry is not None:  # the previous cut fell inside a string: scan both as one piece
            piece = b"".join((carry, b",", passed(fut.result()[0] if fut is not None else get(), last)))
            carry = None
            r = _scan.scan(piece, all_args)
            out = tables_of(piece, r)
        else:
            piece, r, out = fut.result() if fut is not None else work(get)
            passed(piece, last)
        st = r["status"]
        if st == ST_TRUNC and not last:
            carry = piece
            return
        if st == ST_TRUNC and out is None:
            out = tables_of(piece, r)
        tables.add(r, piece, out)
        if progress and tables.on_bytes is not None:
            tables.on_bytes(progress)
        if st == ST_END:
            state = "end"
            tail.append(piece[r["end"] + 1 :])
        elif st != ST_DONE or last:
            state = "cut"
            if st == ST_ERR:
                at = bytes(piece[r["end"] : r["end"] + 24]).decode("utf-8", "replace")
                tables.damage = f" (unexpected {at!r}; a list element that is not an event object, or broken JSON)"
            else:
                tables.damage = " (the file ends inside an event)"

    try:
        for get, last, progress in items:
            window.append((get, last, ex.submit(work, get) if ex is not None and state is None else None, progress))
            while window and (ex is None or len(window) > workers + 1 or last):
                handle(*window.popleft())
        while window:
            handle(*window.popleft())
    finally:
        if ex is not None:
            ex.shutdown(wait=True, cancel_futures=True)
    if state == "end":
        return "end", b",".join(tail)
    return "cut", b""


def _merge_problems(problems: list[Problem]) -> list[Problem]:
    """Problems of the same code and message (from different pieces) become one, their counts summed;
    the count goes into the text here, once."""
    merged: dict[tuple, Problem] = {}
    for p in problems:
        key = (p.code, p.message)
        if key in merged:
            merged[key].count += p.count
        else:
            merged[key] = Problem(p.code, p.message, p.count, p.example, p.severity, p.counted)
    for p in merged.values():
        p.message, p.counted = p.text(), False
    return list(merged.values())
