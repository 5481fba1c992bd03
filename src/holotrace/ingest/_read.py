"""Reading a trace file as a stream of bytes, and cutting it into pieces of whole events."""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import Callable, Iterator, Optional

from holotrace.errors import TraceFormatError, TraceNotFoundError, TraceReadError

_WS = b" \t\r\n"
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def open_stream(path: Path):
    """(binary file, is gzip) with the typed error of each way opening can fail."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise TraceNotFoundError("file does not exist", path=path) from None
    except PermissionError:
        raise TraceReadError("file is not readable (permission denied)", path=path, fix="check its permissions") from None
    except IsADirectoryError:
        raise TraceReadError("is a folder, not a trace file", path=path) from None
    except OSError as e:
        raise TraceReadError(f"cannot open: {e.strerror or e}", path=path) from None
    magic = fh.read(2)
    fh.seek(0)
    return fh, magic == b"\x1f\x8b"


def raw_bytes(path: Path, chunk: int, on_truncated: Optional[Callable[[], None]] = None,
              is_gzip: Optional[list] = None) -> Iterator[bytes]:
    """Yield the (decompressed) bytes of a file in chunks of about ``chunk`` bytes.

    A gzip stream that ends early yields what could be decompressed and calls ``on_truncated``
    (without it, raises :class:`TraceReadError`).
    """
    fh, gz = open_stream(path)
    if is_gzip is not None:
        is_gzip[0] = gz
    with fh:
        if not gz:
            while True:
                try:
                    b = fh.read(chunk)
                except OSError as e:
                    raise TraceReadError(f"read failed: {e}", path=path) from None
                if not b:
                    return
                yield b
        d = zlib.decompressobj(wbits=47)
        while True:
            try:
                b = fh.read(1 << 20)
            except OSError as e:
                raise TraceReadError(f"read failed: {e}", path=path) from None
            if not b:
                break
            while b:
                try:
                    out = d.decompress(b, chunk)
                except zlib.error as e:
                    raise TraceReadError(f"damaged gzip data ({e})", path=path, fix="re-copy or re-compress the file") from None
                if out:
                    yield out
                if d.eof:  # a further gzip member may follow
                    b = d.unused_data
                    if b:
                        d = zlib.decompressobj(wbits=47)
                else:
                    b = d.unconsumed_tail
        tail = d.flush()
        if tail:
            yield tail
        if not d.eof:
            if on_truncated is None:
                raise TraceReadError("gzip stream ends early (truncated file)", path=path)
            on_truncated()


def find_split(buf, end: int) -> int:
    """Index of the last ``,`` in buf[:end] between ``}`` and ``{`` (an event boundary, unless inside a string), or -1."""
    pos = end
    n = len(buf)
    while True:
        c = buf.rfind(b",", 0, pos)
        if c < 0:
            return -1
        j = c + 1
        while j < n and buf[j] in _WS:
            j += 1
        if j < n and buf[j] == 0x7B:  # '{'
            i = c - 1
            while i >= 0 and buf[i] in _WS:
                i -= 1
            if i >= 0 and buf[i] == 0x7D:  # '}'
                return c
        pos = c


def split_header(buf: bytes, path: str) -> tuple[int, str]:
    """Return (offset just after the '[' that opens the events, format); -1 when not seen yet."""
    i = 0
    n = len(buf)
    if buf[:3] == b"\xef\xbb\xbf":
        i = 3
    while i < n and buf[i] in _WS:
        i += 1
    if i >= n:
        raise TraceFormatError("file is empty", path=path, fix="the profiler did not finish writing it; re-export the trace")
    first = buf[i]
    if first == 0x5B:  # '[': legacy bare array of events
        return i + 1, "array"
    if first != 0x7B:
        raise TraceFormatError("not JSON (does not start with '{' or '[')", path=path, fix="pass a Kineto trace (.json or .json.gz)")
    m = _EVENTS_KEY.search(buf)
    if not m:
        return -1, "object"
    return m.end(), "object"


def pieces(first: bytes, stream: Iterator[bytes], piece_bytes: int, on_bytes: Callable[[int], None]) -> Iterator[tuple[bytes, bool]]:
    """(piece, is last) of about ``piece_bytes``, each cut before a ``,`` that looks like an event boundary.

    The last piece holds the end of the event list and whatever follows it. A cut that falls inside a
    string leaves its piece unfinished; the scanner reports that, and the caller joins it to the next.
    """
    chunks = [first]
    size = len(first)
    for b in stream:
        on_bytes(len(b))
        chunks.append(b)
        size += len(b)
        if size < piece_bytes:
            continue
        joined = b"".join(chunks)
        cut = find_split(joined, len(joined))
        if cut <= 0:
            chunks, size = [joined], len(joined)
            continue
        yield memoryview(joined)[:cut], False
        rest = joined[cut + 1:]
        chunks, size = [rest], len(rest)
    yield b"".join(chunks), True


def find_split_forward(buf, start: int = 0) -> int:
    """Index of the first ``,`` at or after ``start`` between ``}`` and ``{``, or -1."""
    pos = start
    n = len(buf)
    while True:
        c = buf.find(b",", pos)
        if c < 0:
            return -1
        j = c + 1
        while j < n and buf[j] in _WS:
            j += 1
        i = c - 1
        while i >= 0 and buf[i] in _WS:
            i -= 1
        if j < n and buf[j] == 0x7B and i >= 0 and buf[i] == 0x7D:
            return c
        pos = c + 1


def range_cuts(fd: int, start: int, size: int, piece_bytes: int) -> list[tuple[int, int]]:
    """Byte ranges [a, b) of a plain file, from ``start`` to its end, cut before event-boundary commas.

    Only small windows around each cut are read here; the pieces themselves are read by whoever
    scans them. The last range runs to the end of the file.
    """
    out = []
    a = start
    window = min(1 << 18, max(4096, piece_bytes))
    while size - a > piece_bytes + piece_bytes // 2:
        target = a + piece_bytes
        k = -1
        while target < size:
            w = os.pread(fd, window, target)
            k = find_split_forward(w)
            if k >= 0 or len(w) < window:
                break
            target += len(w) - 64  # windows overlap: a boundary across two is still seen
        if k < 0:
            break
        out.append((a, target + k))
        a = target + k + 1
    out.append((a, size))
    return out
