"""Reading a trace file as a stream of bytes, and cutting it into pieces of whole events."""

from __future__ import annotations

import os
import queue
import re
import stat
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Optional

from holotrace.errors import TraceFormatError, TraceNotFoundError, TraceReadError

try:  # ISA-L's inflater (the optional ``isal`` package, extra ``fast``): zlib's interface at 2-4x its speed
    from isal import igzip as _igzip
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover - depends on what is installed
    _igzip = _isal_zlib = None

# the module whose ``decompressobj``/``error`` inflate gzip files: ISA-L's where installed, else zlib
INFLATE = _isal_zlib if _isal_zlib is not None else zlib
GZ_READ = 1 << 20  # compressed bytes read (and inflated) at a time (256 KiB-4 MiB: the same within the spread)
crc32 = INFLATE.crc32  # the same values from either module; ISA-L's is about five times faster


class Crc32:
    """The CRC-32 of a file's bytes taken as they pass, in order: ``value`` once :meth:`finish` found that
    every byte of the file was added (None otherwise: the caller reads the file again)."""

    __slots__ = ("crc", "at", "value")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Start again from the file's first byte."""
        self.crc, self.at, self.value = 0, 0, None

    def add(self, b) -> None:
        self.crc = crc32(b, self.crc)
        self.at += len(b)

    def finish(self, size: int) -> None:
        self.value = self.crc if self.at == size else None


_WS = b" \t\r\n"


class NotATraceError(TraceFormatError):
    """The file is another kind of file (not JSON, or JSON that is not a trace), not a damaged trace."""


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


BOM = b"\xef\xbb\xbf"


def open_stream(path: Path):
    """(binary file, is gzip) with the typed error of each way opening can fail.

    Only regular files are read: a FIFO, socket or device is refused before anything waits on it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceNotFoundError("file does not exist", path=path, fix="check the path") from None
    except PermissionError:
        raise TraceReadError(
            "file is not readable (permission denied)", path=path, fix="check its permissions"
        ) from None
    except IsADirectoryError:
        raise TraceReadError(
            "is a folder, not a trace file", path=path, fix="pass the folder as the job, or a file inside it"
        ) from None
    except OSError as e:
        raise TraceReadError(f"cannot open: {e.strerror or e}", path=path, fix="check the path") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TraceReadError(
                "is a folder, not a trace file", path=path, fix="pass the folder as the job, or a file inside it"
            )
        if not stat.S_ISREG(mode):
            raise TraceReadError(
                "is not a regular file (a FIFO, socket or device)",
                path=path,
                fix="save the trace to a file and pass that file",
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    try:
        magic = fh.read(2)
        fh.seek(0)
    except OSError as e:
        fh.close()
        raise TraceReadError(f"read failed: {e.strerror or e}", path=path, fix="check the file and the disk") from None
    return fh, magic == b"\x1f\x8b"


def raw_bytes(
    path: Path,
    chunk: int,
    on_problem: Optional[Callable[[str, str], None]] = None,
    is_gzip: Optional[list] = None,
    crc: Optional[Crc32] = None,
) -> Iterator[bytes]:
    """Yield the (decompressed) bytes of a file in chunks of about ``chunk`` bytes, without a leading BOM.

    A gzip stream that ends early or is damaged yields what could be decompressed and calls
    ``on_problem("truncated" | "damaged", detail)``; bytes after the last gzip member that are not
    gzip data are ignored with ``on_problem("trailing", detail)``. Without ``on_problem``, the first two
    raise :class:`TraceReadError`. ``is_gzip``: a list whose items 0 and 1 are set to (is gzip, bytes
    of BOM skipped). ``crc``: takes the CRC-32 of a gzip file's (compressed) bytes as they are read.
    """
    fh, gz = open_stream(path)
    if is_gzip is not None:
        is_gzip[0] = gz
    first = [True]
    given = [0]

    def out(b: bytes) -> bytes:
        given[0] += len(b)
        if first[0]:
            first[0] = False
            if b.startswith(BOM):
                if is_gzip is not None and len(is_gzip) > 1:
                    is_gzip[1] = len(BOM)
                return b[len(BOM) :]
        return b

    with fh:
        if not gz:
            while True:
                b = _read(fh, chunk, path)
                if not b:
                    return
                yield out(b)
        skip = 0  # bytes the fast reader gave already (the careful reader below starts again after damage)
        if INFLATE is _isal_zlib and _igzip is not None:
            try:
                for b in _fast_gzip(fh, chunk, crc):
                    yield out(b)
                return
            except (EOFError, OSError, _isal_zlib.error):  # damage, a cut stream or trailing bytes: read with care
                skip = given[0]
                fh.seek(0)
                if crc is not None:
                    crc.reset()
        inflate = INFLATE
        d = inflate.decompressobj(wbits=47)
        members = 0

        def fresh(o: bytes) -> bytes:  # what the careful reader adds to what the fast one gave
            nonlocal skip
            if skip:
                k = min(skip, len(o))
                skip -= k
                return o[k:]
            return o

        blocks = _compressed(fh, path, crc)
        for b in blocks:
            while b:
                try:
                    o = d.decompress(b, chunk)
                except inflate.error as e:
                    if on_problem is None or not given[0]:
                        raise TraceReadError(
                            f"damaged gzip data ({e})", path=path, fix="re-copy or re-compress the file"
                        ) from None
                    on_problem("trailing" if members else "damaged", str(e))
                    return
                o = fresh(o)
                if o:
                    yield out(o)
                if d.eof:  # a further gzip member may follow
                    members += 1
                    b = d.unused_data
                    if b and not b.startswith(b"\x1f\x8b"[: len(b)]):
                        if _zeros_to_the_end(b, blocks):  # padding, as gzip allows: nothing lost
                            return
                        if on_problem is None:
                            raise TraceReadError(
                                "bytes after the gzip stream are not gzip data", path=path, fix="re-copy the file"
                            )
                        on_problem("trailing", f"{len(b)}+ bytes")
                        return
                    if b:
                        d = inflate.decompressobj(wbits=47)
                else:
                    b = d.unconsumed_tail
        tail = fresh(d.flush())
        if tail:
            yield out(tail)
        if not d.eof:
            if on_problem is None or not given[0]:
                raise TraceReadError(
                    "gzip stream ends early (truncated file)", path=path, fix="re-copy or re-export the file"
                )
            on_problem("truncated", "")


def _read(fh, n: int, path: Path) -> bytes:
    """Up to ``n`` bytes of ``fh``; a failed read is a :class:`TraceReadError` naming the file."""
    try:
        return fh.read(n)
    except OSError as e:
        raise TraceReadError(f"read failed: {e.strerror or e}", path=path, fix="check the file and the disk") from None


class _Counted:
    """A binary file whose bytes go through ``crc`` (when given) as the gzip reader takes them."""

    __slots__ = ("fh", "crc")

    def __init__(self, fh, crc: Optional[Crc32]):
        self.fh, self.crc = fh, crc

    def readinto(self, b) -> int:
        k = self.fh.readinto(b)
        if self.crc is not None and k:
            self.crc.add(memoryview(b)[:k])
        return k

    def read(self, n: int = -1) -> bytes:
        b = self.fh.read(n)
        if self.crc is not None:
            self.crc.add(b)
        return b


def _fast_gzip(fh, chunk: int, crc: Optional[Crc32]) -> Iterator[bytes]:
    """The inflated bytes of a whole, undamaged gzip file (any number of members, zero padding allowed), in
    chunks of ``chunk`` bytes, by ISA-L's file reader (about twice the pace of ``decompressobj`` here, and no
    output buffers grown and thrown away). Damage, a cut stream or trailing bytes raise ``EOFError``,
    ``OSError`` or ``isal_zlib.error``, after the bytes read before it."""
    g = _igzip.IGzipFile(fileobj=_Counted(fh, crc), mode="rb")
    while True:
        b = g.read(chunk)
        if not b:
            break
        yield b
    if crc is not None:
        crc.finish(os.fstat(fh.fileno()).st_size)


def _compressed(fh, path: Path, crc: Optional[Crc32]) -> Iterator[bytes]:
    """The file's (compressed) bytes from where ``fh`` stands, ``GZ_READ`` at a time, through ``crc`` when given
    (finished at the file's end)."""
    while True:
        b = _read(fh, GZ_READ, path)
        if not b:
            if crc is not None:
                crc.finish(os.fstat(fh.fileno()).st_size)
            return
        if crc is not None:
            crc.add(b)
        yield b


def _zeros_to_the_end(b: bytes, rest: Iterator[bytes]) -> bool:
    """Whether ``b`` and the ``rest`` of the file are zero bytes (gzip's padding); reads the rest when ``b`` is."""
    return b.count(0) == len(b) and all(r.count(0) == len(r) for r in rest)


def read_ahead(items: Iterable, depth: int = 2) -> Iterator:
    """The items of ``items``, produced on a thread up to ``depth`` ahead of the caller (gzip: the inflating
    overlaps the scanning). An exception of ``items`` is raised to the caller at its place in the sequence;
    closing this generator early stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    done = object()

    def put(x) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        it = iter(items)
        try:
            for x in it:
                if not put((x, None)):
                    return
            put((done, None))
        except BaseException as e:  # handed to the caller
            put((done, e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    t = threading.Thread(target=produce, name="holotrace-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            x, err = q.get()
            if x is done:
                if err is not None:
                    raise err
                return
            yield x
    finally:
        stop.set()
        t.join()


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
        raise TraceFormatError(
            "file is empty", path=path, fix="the profiler did not finish writing it; re-export the trace"
        )
    first = buf[i]
    if first == 0x5B:  # '[': legacy bare array of events
        return i + 1, "array"
    if first != 0x7B:
        raise NotATraceError(
            "not JSON (does not start with '{' or '[')", path=path, fix="pass a Kineto trace (.json or .json.gz)"
        )
    m = _EVENTS_KEY.search(buf)
    if not m:
        return -1, "object"
    return m.end(), "object"


def pieces(
    first: bytes, stream: Iterator[bytes], piece_bytes: int, on_bytes: Callable[[int], None]
) -> Iterator[tuple[bytes, bool]]:
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
        rest = joined[cut + 1 :]
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
