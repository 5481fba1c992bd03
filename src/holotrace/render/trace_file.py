"""Writing Kineto trace files with extra events (counter tracks, overlays) that Perfetto and HTA load.

The input file is never parsed into Python objects: its bytes are copied and the extra events are
spliced in just before the ``]`` that closes ``traceEvents``, so a 100 MB rank is written in well
under a second. Output is gzip-compressed exactly when its name ends in ``.gz`` (compressed on threads
into one standard gzip member).

* :func:`write_trace_with_events` — the general helper: a trace file plus extra event JSON objects.
* :func:`counter_events` — Chrome-trace counter events (``"ph": "C"``) from numpy columns.
* :func:`derived_path` — HTA's output name: every ``.json`` of the name becomes ``<suffix>.json``.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional, Union

import msgspec
import numpy as np

from holotrace.errors import TraceFormatError, TraceReadError

__all__ = ["counter_events", "write_trace_with_events", "derived_path", "read_trace_bytes", "gzip_bytes"]

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"


def derived_path(file: Union[str, Path], suffix: str, output_dir: Optional[Union[str, Path]] = None) -> Path:
    """HTA's name for a derived trace (``x.json.gz`` → ``x<suffix>.json.gz``; every ``.json`` is replaced),
    beside the input or in ``output_dir``."""
    p = Path(file)
    name = p.name.replace(".json", f"{suffix}.json") if ".json" in p.name else p.name + suffix + ".json"
    return (Path(output_dir) if output_dir is not None else p.parent) / name


def _fmt_ts(ts: np.ndarray, unit_ns: int) -> list[str]:
    """Timestamps as JSON µs text: integers as integers, exact ns as µs with three decimals, floats as repr."""
    if ts.dtype.kind == "f":
        return [repr(x) for x in ts.tolist()]
    ts = ts.astype(np.int64)
    if unit_ns == 1000:
        return [str(x) for x in ts.tolist()]
    ns = ts * unit_ns
    if not (ns % 1000).any():
        return [str(x) for x in (ns // 1000).tolist()]
    whole, frac = np.divmod(ns, 1000)
    return [f"{w}.{f:03d}" for w, f in zip(whole.tolist(), frac.tolist())]


def counter_events(
    ts: np.ndarray,
    pid: np.ndarray,
    name: Union[str, Sequence[str], np.ndarray],
    arg: str,
    value: np.ndarray,
    ids: Optional[np.ndarray] = None,
    *,
    unit_ns: int = 1000,
) -> list[str]:
    """One Chrome counter event (JSON text) per row: ``{"ph": "C", "name", "pid", "ts", ["id"], "args": {arg: value}}``.

    ``ts`` is in ``unit_ns`` nanoseconds per unit (1000: µs as given; 1: exact ns written as µs text).
    """
    ts_txt = _fmt_ts(np.asarray(ts), unit_ns)
    pids = np.asarray(pid).astype(np.int64).tolist()
    v = np.asarray(value)
    vals = [str(x) for x in v.tolist()] if v.dtype.kind in "iub" else [repr(float(x)) for x in v.tolist()]
    key = msgspec.json.encode(arg).decode()
    if isinstance(name, str):
        names = [msgspec.json.encode(name).decode()] * len(ts_txt)
    else:
        arr = np.asarray(name, dtype=object)
        uniq, inv = np.unique(arr.astype(str), return_inverse=True)
        enc = [msgspec.json.encode(u).decode() for u in uniq.tolist()]
        names = [enc[i] for i in inv.reshape(-1).tolist()]
    if ids is None:
        return [
            f'{{"ph": "C", "name": {n}, "pid": {p}, "ts": {t}, "args": {{{key}: {x}}}}}'
            for n, p, t, x in zip(names, pids, ts_txt, vals)
        ]
    idl = np.asarray(ids).astype(np.int64).tolist()
    return [
        f'{{"ph": "C", "name": {n}, "pid": {p}, "ts": {t}, "id": {i}, "args": {{{key}: {x}}}}}'
        for n, p, t, i, x in zip(names, pids, ts_txt, idl, vals)
    ]


def read_trace_bytes(path: Union[str, Path]) -> bytes:
    """The (decompressed) bytes of a trace file, with a typed error when it cannot be read."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise TraceReadError(
            f"cannot read: {e.strerror or e}", path=p, fix="check that the file still exists"
        ) from None
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(wbits=47)
            parts = [d.decompress(raw)]
            while d.eof and d.unused_data:  # further gzip members
                rest = d.unused_data
                d = zlib.decompressobj(wbits=47)
                parts.append(d.decompress(rest))
            raw = b"".join(parts)
        except zlib.error as e:
            raise TraceReadError(f"damaged gzip data ({e})", path=p, fix="re-copy or re-compress the file") from None
    return raw


def _object_keys(text: bytes) -> Optional[set]:
    try:
        obj = msgspec.json.decode(text, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError:
        return None
    return set(obj)


def _events_end(data: bytes, path, top_keys: Optional[Iterable[str]]) -> int:
    """Position of the ``]`` that closes the event list."""
    start = len(data) - len(data.lstrip(_WS))
    if data[start : start + 1] == b"[":  # legacy bare array of events
        end = data.rstrip(_WS).rfind(b"]")
        if end < 0:
            raise TraceFormatError("the event list is not closed", path=path, fix="re-export the trace")
        return end
    m = _EVENTS_KEY.search(data)
    if m is None:
        raise TraceFormatError("JSON has no 'traceEvents'", path=path, fix="pass a Kineto trace file")
    want = None
    if top_keys is not None:
        head = data[: m.start()].rstrip(_WS)
        head_keys = _object_keys((head[:-1] if head.endswith(b",") else head) + b"}") or set()
        want = set(top_keys) - head_keys - {"traceEvents"}
    pos = len(data)
    while True:
        pos = data.rfind(b"]", m.end() - 1, pos)
        if pos < 0:
            raise TraceFormatError(
                "the event list is not closed (damaged or truncated file)", path=path, fix="re-export the trace"
            )
        tail = data[pos + 1 :].strip(_WS)
        if tail == b"}":
            if not want:
                return pos
        elif tail.startswith(b","):
            keys = _object_keys(b"{" + tail[1:])
            if keys is not None and (want is None or keys == want):
                return pos


def gzip_bytes(data: bytes, level: int = 6, piece: int = 8 << 20, threads: Optional[int] = None) -> bytes:
    """One standard gzip member of ``data``, its pieces deflated on threads (zlib releases the GIL)."""
    mv = memoryview(data)
    n = max(1, -(-len(data) // piece))

    def deflate(i: int) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        out = c.compress(mv[i * piece : (i + 1) * piece])
        return out + c.flush(zlib.Z_FINISH if i == n - 1 else zlib.Z_SYNC_FLUSH)

    workers = max(1, min(n, threads or os.cpu_count() or 1))
    if workers == 1:
        body = [deflate(i) for i in range(n)]
    else:
        with ThreadPoolExecutor(workers) as ex:
            body = list(ex.map(deflate, range(n)))
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return b"".join([header, *body, trailer])


def _plain_tail_end(src: Path, top_keys) -> Optional[tuple[int, bool]]:
    """For an uncompressed object trace: (position of the events' closing ``]``, the list is empty), found
    by reading only the file's head and its last MB; None when that does not settle it."""
    size = src.stat().st_size
    with open(src, "rb") as fh:
        head = fh.read(4 << 20)
        if head[:2] == b"\x1f\x8b" or head.lstrip(_WS)[:1] != b"{":
            return None
        m = _EVENTS_KEY.search(head)
        if m is None or size <= (1 << 20) + m.end():
            return None
        fh.seek(size - (1 << 20))
        tail = fh.read()
    try:
        pos = _events_end(head[: m.end()] + b"\n" + tail, src, top_keys)
    except TraceFormatError:
        return None
    base = size - len(tail) - (m.end() + 1)
    if pos <= m.end():  # the candidate fell into the head part: let the full read decide
        return None
    before = tail[: pos - m.end() - 1].rstrip(_WS)
    return base + pos, before.endswith(b"[")


def write_atomic(dst: Path, write) -> None:
    """Write ``dst`` through ``write(fh)`` into a temporary file beside it, then rename: a reader never sees a
    partial file, and the temporary file is removed on failure (:func:`holotrace.atomic.write_atomic`)."""
    from holotrace.atomic import write_atomic as _write_atomic

    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(dst, write)


def _copy_range(src: Path, fh, length: int) -> None:
    """The first ``length`` bytes of ``src`` into ``fh`` (in the kernel where the system allows)."""
    fh.flush()
    with open(src, "rb") as inp:
        done = 0
        try:
            while done < length:
                n = os.copy_file_range(inp.fileno(), fh.fileno(), length - done, done, None)
                if n <= 0:
                    break
                done += n
        except (AttributeError, OSError):
            pass
        if done < length:
            inp.seek(done)
            fh.seek(done)
            left = length - done
            while left:
                b = inp.read(min(left, 16 << 20))
                if not b:
                    raise TraceReadError("file shrank while being copied", path=src)
                fh.write(b)
                left -= len(b)
        fh.seek(length)


def write_trace_with_events(
    source: Union[str, Path],
    output: Union[str, Path],
    events: Sequence[str],
    *,
    top_keys: Optional[Iterable[str]] = None,
    compress: Optional[bool] = None,
) -> Path:
    """Write ``source``'s trace to ``output`` with ``events`` (JSON object texts) appended to ``traceEvents``.

    Args:
        top_keys: the file's top-level keys (``RankTrace.meta`` plus ``traceEvents``) when known: makes
            finding the end of the event list certain whatever follows it.
        compress: gzip the output; default: exactly when ``output`` ends in ``.gz``.

    Every other byte of the input is kept as it is. The file is written to a temporary name and renamed,
    so a reader never sees half a file; an existing output is replaced. An uncompressed input written
    uncompressed is copied without reading its event list into memory.
    """
    src, dst = Path(source), Path(output)
    if compress is None:
        compress = dst.name.endswith(".gz")
    extra = ",\n".join(events).encode() if events else b""
    if not compress:
        found = _plain_tail_end(src, top_keys)
        if found is not None:
            end, empty = found
            with open(src, "rb") as fh:
                fh.seek(end)
                rest = fh.read()

            def write_plain(out):
                _copy_range(src, out, end)
                out.write(b"".join([(b"\n" if empty else b",\n") if extra else b"", extra, b"\n", rest]))

            write_atomic(dst, write_plain)
            return dst
    data = read_trace_bytes(src)
    end = _events_end(data, src, top_keys)
    before = data[:end].rstrip(_WS)
    sep = b"\n" if before.endswith(b"[") else b",\n"
    out = b"".join([before, sep if extra else b"", extra, b"\n", data[end:]])
    if compress:
        out = gzip_bytes(out)
    write_atomic(dst, lambda fh: fh.write(out))
    return dst
