"""Decode one Kineto trace file into columnar tables.

The file is streamed: it is read (and gunzipped) in large chunks, each chunk
is cut at an event boundary and decoded by msgspec into typed records that
hold only the fields holotrace keeps; the records are turned into numpy
columns and dropped before the next chunk. No Python dict is built per event,
and the whole file is never held in memory at once.

Interface: ``decode_file(path) -> DecodedFile``; nothing else in holotrace
depends on how decoding is done.
"""

from __future__ import annotations

import gc
import json
import math
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterator, Optional, Union

import msgspec
import numpy as np

from holotrace.errors import TraceEventError, TraceFormatError, TraceNotFoundError, TraceReadError
from holotrace.schema import ARG_SPECS, ID_COLUMNS, META_ARG_SPECS, event_columns

CHUNK_BYTES = 16 * 1024 * 1024
PARALLEL_CHUNK_BYTES = 4 * 1024 * 1024  # smaller pieces keep every worker busy (measured best of 4-32 MB)
_MAX_DUR_NS = 7 * 24 * 3600 * 10**9  # a week
_EXACT_TS_LIMIT_US = 2.0**42  # above this, float µs lose sub-ns precision: reparse exactly

_EMPTY_RAW = msgspec.Raw(b"")


# --------------------------------------------------------------------------- records


def _arg_fields(specs, lenient: bool):
    fields = []
    for s in specs:
        if s.kind == "raw":
            typ: Any = msgspec.Raw
            default: Any = _EMPTY_RAW
        elif lenient:
            typ, default = Any, None
        elif s.kind == "int":
            typ, default = (Union[int, str] if s.column in ("stream", "device") else int), s.default
        elif s.kind == "float":
            typ, default = float, s.default
        else:
            typ, default = str, None
        fields.append((s.column, typ, msgspec.field(name=s.raw_key, default=default)))
    return fields


def _event_type(lenient: bool, raw_args: bool):
    args_t: Any
    if raw_args:
        args_t = msgspec.Raw
    else:
        args_t = msgspec.defstruct(
            "LenientArgs" if lenient else "Args",
            _arg_fields(ARG_SPECS + META_ARG_SPECS, lenient),
            forbid_unknown_fields=False,
            gc=False,
        )
    anyish = Any
    fields = [
        ("ph", anyish if lenient else str, ""),
        ("cat", anyish if lenient else Optional[str], None),
        ("name", Any, None),
        ("pid", Any if lenient else Union[int, str, None], None),
        ("tid", Any if lenient else Union[int, str, None], None),
        ("ts", Any if lenient else Union[int, float, None], None),
        ("dur", Any if lenient else Union[int, float, None], None),
        ("id", Any, None),
        ("bp", Any, None),
        ("s", Any, None),
        ("args", msgspec.Raw, _EMPTY_RAW) if raw_args else ("args", Optional[args_t], None),
    ]
    # gc=False: records hold no cycles; untracked objects are cheaper to create and to free
    return msgspec.defstruct("Event" + ("Lenient" if lenient else "") + ("Raw" if raw_args else ""), fields, gc=False)


_EVENT = _event_type(False, False)
_EVENT_LENIENT = _event_type(True, False)
_EVENT_RAWARGS = _event_type(True, True)
_ARGS_PY = msgspec.defstruct("ArgsPy", [(name, Any, msgspec.field(name=f.name, default=None)) for name, _, f in _arg_fields(ARG_SPECS + META_ARG_SPECS, True)])
_EVENT_PY = msgspec.defstruct("EventPy", [(f, Any, None) for f in ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s")] + [("args", Optional[_ARGS_PY], None)])

_ARGS_T = msgspec.defstruct("ArgsDefault", _arg_fields(ARG_SPECS + META_ARG_SPECS, False), gc=False)
_EMPTY_ARGS = _ARGS_T()

# Which args each category carries (lower-cased category); other categories get every arg.
_CPU_OP_ARGS = ("external_id", "external_id_legacy", "ev_idx", "sequence", "fwd_thread_id", "input_dims", "input_type",
                "input_strides", "collective_name", "in_msg_nelems", "out_msg_nelems", "in_msg_size",
                "out_msg_size", "group_size", "msg_dtype", "in_split_size", "out_split_size", "process_group_name",
                "process_group_desc", "process_group_ranks", "process_rank", "seq_num", "kernel_backend", "kernel_hash",
                "stream")
_LAUNCH_ARGS = ("correlation", "external_id", "external_id_legacy", "cbid", "stream", "device", "stream_id", "grid", "block")
_KERNEL_ARGS = ("stream", "correlation", "external_id", "external_id_legacy", "device", "grid", "block", "collective_name",
                "in_msg_nelems", "out_msg_nelems", "in_msg_size", "out_msg_size", "group_size", "msg_dtype", "in_split_size",
                "out_split_size", "process_group_name", "process_group_desc", "process_group_ranks", "process_rank", "seq_num",
                "stream_id")
_MEM_ARGS = ("stream", "correlation", "external_id", "external_id_legacy", "device", "bytes", "memory_bw_gbps", "stream_id")
_SYNC_ARGS = ("stream", "correlation", "external_id", "external_id_legacy", "device", "wait_on_stream",
              "wait_on_cuda_event_record_corr_id", "cuda_sync_kind")
_ANNOT_ARGS = ("external_id", "external_id_legacy", "ev_idx", "device", "stream", "correlation")
_PY_ARGS = ("python_id", "python_parent_id", "external_id")
_SPEC = {s.column: s for s in ARG_SPECS}
ARGS_BY_CATEGORY: dict[str, tuple] = {
    cat: tuple(_SPEC[c] for c in cols)
    for cats, cols in (
        (("cpu_op", "operator"), _CPU_OP_ARGS),
        (("user_annotation", "gpu_user_annotation"), _ANNOT_ARGS),
        (("cuda_runtime", "runtime", "cuda_driver", "mtia_runtime"), _LAUNCH_ARGS),
        (("kernel", "mtia_ccp_events"), _KERNEL_ARGS),
        (("gpu_memcpy", "gpu_memset", "memcpy", "memset"), _MEM_ARGS),
        (("cuda_sync",), _SYNC_ARGS),
        (("python_function",), _PY_ARGS),
        (("trace",), ()),
    )
    for cat in cats
}


def _exact_hook(text: str):
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - msgspec only hands valid numbers
        return float(text)


_DEC_FAST = msgspec.json.Decoder(list[_EVENT])
_DEC_LENIENT = msgspec.json.Decoder(list[_EVENT_LENIENT])
_DEC_EXACT = msgspec.json.Decoder(list[_EVENT_LENIENT], float_hook=_exact_hook)
_DEC_RAWARGS = msgspec.json.Decoder(list[_EVENT_RAWARGS])
_DEC_TOP_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw])


# --------------------------------------------------------------------------- results


@dataclass
class Problem:
    """Something found while decoding; becomes a validation finding."""

    code: str
    severity: str  # "error" | "warning" | "info"
    message: str
    count: int = 1
    example: Optional[str] = None


@dataclass
class DecodedFile:
    """Columnar content of one trace file, with a file-local string table."""

    path: str
    meta: dict
    strings: list[str]
    events: dict[str, np.ndarray]  # events with a duration (X and friends)
    instants: dict[str, np.ndarray]  # ph i/I/n (memory events among them)
    counters: dict[str, np.ndarray]  # ph C, one row per (event, series)
    flows: dict[str, np.ndarray]  # ph s/t/f
    names: dict[str, np.ndarray]  # ph M (process/thread names)
    n_trace_events: int = 0
    phase_counts: dict[str, int] = field(default_factory=dict)
    ts_is_float: bool = False  # any event wrote a fractional/float ts (HTA rounds then)
    problems: list[Problem] = field(default_factory=list)
    raw_args: Optional[list] = None  # per event of ``events``, with all_args=True
    format: str = "object"  # "object" | "array" (legacy 2021 bare array)
    bytes_read: int = 0


# --------------------------------------------------------------------------- reading


def _open_stream(path: Path):
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
    if magic == b"\x1f\x8b":
        return fh, True
    return fh, False


def iter_bytes(path: Path, chunk: int = CHUNK_BYTES, problems: Optional[list] = None) -> Iterator[bytes]:
    """Yield the (decompressed) bytes of a file in chunks.

    A gzip stream that ends early yields what could be decompressed and adds a
    ``truncated_gzip`` problem instead of failing.
    """
    fh, gz = _open_stream(path)
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
            if problems is None:
                raise TraceReadError("gzip stream ends early (truncated file)", path=path)
            problems.append(Problem("truncated_gzip", "error", "gzip stream ends early: the file was cut; only the part before the cut was read"))


_WS = b" \t\r\n"


def _find_split(buf: bytearray | bytes, end: int) -> int:
    """Index of the last ``,`` in buf[:end] that separates two events (``} , {``), or -1."""
    pos = end
    while True:
        c = buf.rfind(b",", 0, pos)
        if c < 0:
            return -1
        j = c + 1
        n = len(buf)
        while j < n and buf[j] in _WS:
            j += 1
        if j < n and buf[j] == 0x7B:  # '{'
            i = c - 1
            while i >= 0 and buf[i] in _WS:
                i -= 1
            if i >= 0 and buf[i] == 0x7D:  # '}'
                return c
        pos = c


# --------------------------------------------------------------------------- columns


class _Strings:
    """File-local string table: id = order of first appearance."""

    def __init__(self) -> None:
        self.index: dict = {None: -1}  # None (absent) interns to -1
        self.table: list[str] = []

    def ids(self, values: list) -> np.ndarray:
        """Intern values (None -> -1) with one dict lookup each; new strings take the next id."""
        n = len(values)
        if not n:
            return np.empty(0, dtype=np.int32)
        if values.count(None) == n:
            return np.full(n, -1, dtype=np.int32)
        index, table = self.index, self.table
        get = index.get
        out = np.fromiter([get(v, -2) for v in values], dtype=np.int32, count=n)
        for k in np.flatnonzero(out == -2).tolist():  # values not seen before
            v = values[k]
            x = get(v)
            if x is None:
                x = len(table)
                index[v] = x
                table.append(v if isinstance(v, str) else _to_text(v))
            out[k] = x
        return out

    def raw_ids(self, raws: list) -> np.ndarray:
        # Raw values are interned by their bytes; the text is the raw JSON.
        e = _EMPTY_RAW
        try:
            return self.ids([None if r is e or not len(r) else bytes(r) for r in raws])
        except TypeError:  # values from Python's json (the NaN fallback) are objects, not Raw
            return self.ids([None if r is None or r is e else (bytes(r) if isinstance(r, msgspec.Raw) else json.dumps(r, separators=(",", ":")).encode()) for r in raws])


def _to_text(v) -> str:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", errors="replace")
    return str(v)


def _int_column(values: list, default: int, name: str, path: str, problems: list) -> np.ndarray:
    if values.count(default) == len(values):
        return np.full(len(values), default, dtype=np.int64)
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    if name in ("pid", "tid", "stream", "device"):
        # strings here are labels ("Spans", "0x0"): not numbers, by design
        try:
            return np.array([v if type(v) is int else (int(v) if isinstance(v, str) and v.isdigit() else default) for v in values], dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
    out = np.empty(len(values), dtype=np.int64)
    bad = 0
    example = None
    for i, v in enumerate(values):
        if v is None:
            out[i] = default
            continue
        if isinstance(v, bool):
            out[i] = int(v)
            continue
        if isinstance(v, int):
            if -(2**63) <= v < 2**63:
                out[i] = v
                continue
            if v < 2**64:  # unsigned 64-bit
                out[i] = v - 2**64
                continue
            raise TraceEventError(f"integer {v} in '{name}' does not fit in 64 bits", path=path, fix="the file is damaged or not written by the PyTorch profiler")
        if isinstance(v, float) and math.isfinite(v) and v == int(v):
            out[i] = int(v)
            continue
        if isinstance(v, str):
            s = v.strip()
            if s.lstrip("-").isdigit():
                out[i] = int(s)
                continue
        out[i] = default
        bad += 1
        if example is None:
            example = repr(v)
    if bad and name not in ("stream", "device", "pid", "tid", "id"):
        problems.append(Problem("bad_arg_type", "warning", f"arg '{name}' has {bad} non-integer values (read as {default})", bad, example))
    return out


def _float_column(values: list) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([float(v) if isinstance(v, (int, float)) else np.nan for v in values], dtype=np.float64)


def _time_ns(values: list, exact: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """µs values (int/float/Decimal/None) -> (ns int64, valid mask, any value written as a float)."""
    n = len(values)
    if not exact:
        try:
            a = np.array(values)
        except (TypeError, ValueError, OverflowError):
            a = None
        if a is not None and a.dtype.kind == "i":
            return a.astype(np.int64) * 1000, np.ones(n, dtype=bool), False
        if a is not None and a.dtype.kind == "f":
            valid = np.isfinite(a)
            f = np.where(valid, a, 0.0)
            whole = np.floor(f)
            # whole µs and the fraction separately: the product f*1000 would round at ns scale
            ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000.0).astype(np.int64)
            return ns, valid, True
    out = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)
    is_float = False
    for i, v in enumerate(values):
        if v is None or isinstance(v, (str, bool)) or (isinstance(v, float) and not math.isfinite(v)):
            valid[i] = False
        elif isinstance(v, int):
            out[i] = v * 1000
        elif isinstance(v, Decimal):
            is_float = True
            if not v.is_finite():
                valid[i] = False
            else:
                out[i] = int((v * 1000).to_integral_value())
        else:
            is_float = True
            out[i] = int(round(float(v) * 1000.0))
    return out, valid, is_float


class _Builder:
    """Accumulates per-chunk columns of every table of one file."""

    def __init__(self, path: str, all_args: bool):
        self.path = path
        self.strings = _Strings()
        self.parts: dict[str, dict[str, list]] = {k: {} for k in ("events", "instants", "counters", "flows", "names")}
        self.problems: list[Problem] = []
        self.phase_counts: dict[str, int] = {}
        self.ts_is_float = False
        self.all_args = all_args
        self.raw_args: list = [] if all_args else None  # type: ignore[assignment]
        self.n = 0  # events seen so far (position in traceEvents)
        self.missing_time = 0
        self.missing_time_example = None

    def _add(self, table: str, cols: dict[str, np.ndarray]) -> None:
        part = self.parts[table]
        for k, v in cols.items():
            part.setdefault(k, []).append(v if k in _WIDE_COLUMNS else compact_ints(v))

    def add_chunk(self, evs: list, exact: bool, raw_evs: Optional[list] = None) -> None:
        base = self.n
        self.n += len(evs)
        if not evs:
            return
        for p, c in Counter(e.ph for e in evs).items():
            p = str(p)
            self.phase_counts[p] = self.phase_counts.get(p, 0) + int(c)
        has_dur = [i for i, e in enumerate(evs) if e.dur is not None]
        if len(has_dur) == len(evs):
            dur_evs = evs
            pos = np.arange(base, base + len(evs), dtype=np.int64)
            others: list[int] = []
        else:
            dur_evs = [evs[i] for i in has_dur]
            pos = base + np.array(has_dur, dtype=np.int64)
            hd = set(has_dur)
            others = [i for i in range(len(evs)) if i not in hd]
        if dur_evs:
            self._events(dur_evs, pos, exact, [raw_evs[i] for i in has_dur] if raw_evs is not None else None)
        if others:
            self._side(evs, others, base, exact, raw_evs)

    def _common(self, evs: list, exact: bool) -> dict[str, np.ndarray]:
        S = self.strings
        ts, ok, is_float = _time_ns([e.ts for e in evs], exact)
        self.ts_is_float = self.ts_is_float or is_float
        cols = {
            "cat": S.ids([e.cat for e in evs]),
            "name": S.ids([e.name for e in evs]),
            "pid": _int_column([e.pid for e in evs], -1, "pid", self.path, self.problems),
            "tid": _int_column([e.tid for e in evs], -1, "tid", self.path, self.problems),
            "ts_ns": ts,
        }
        return cols, ok

    def _events(self, evs: list, pos: np.ndarray, exact: bool, raw_evs) -> None:
        cols, ts_ok = self._common(evs, exact)
        dur, dur_ok, _ = _time_ns([e.dur for e in evs], exact)
        ok = ts_ok & dur_ok
        bad_neg = dur < 0
        bad_long = dur > _MAX_DUR_NS
        if not ok.all():
            nbad = int((~ok).sum())
            i = int(np.argmin(ok))
            self.problems.append(Problem("missing_time", "error", f"{nbad} events with a duration have a missing, NaN or non-numeric ts/dur; they were left out", nbad, f"event #{int(pos[i])}: name={_to_text(evs[i].name)!r} ts={evs[i].ts!r} dur={evs[i].dur!r}"))
        if (bad_neg & ok).any():
            nneg = int((bad_neg & ok).sum())
            i = int(np.argmax(bad_neg & ok))
            self.problems.append(Problem("negative_duration", "error", f"{nneg} events have a negative duration; they were left out", nneg, f"event #{int(pos[i])}: name={_to_text(evs[i].name)!r} dur={evs[i].dur!r}"))
        if (bad_long & ok).any():
            nlong = int((bad_long & ok).sum())
            i = int(np.argmax(bad_long & ok))
            self.problems.append(Problem("absurd_duration", "warning", f"{nlong} events last longer than 7 days", nlong, f"event #{int(pos[i])}: name={_to_text(evs[i].name)!r} dur={evs[i].dur!r}"))
        keep = ok & ~bad_neg
        cols["index"] = pos
        cols["dur_ns"] = dur
        cols.update(self._args(evs, cols["cat"]))
        if not keep.all():
            cols = {k: v[keep] for k, v in cols.items()}
        self._add("events", cols)
        if self.all_args:
            src = raw_evs if raw_evs is not None else evs
            keep_l = keep.tolist()
            self.raw_args.extend(bytes(e.args).decode("utf-8", "replace") if isinstance(e.args, msgspec.Raw) and len(e.args) else None for e, k in zip(src, keep_l) if k)

    def _args(self, evs: list, cat_ids: np.ndarray) -> dict[str, np.ndarray]:
        """Arg columns, extracting per category only the args that category carries (others: defaults)."""
        n = len(evs)
        S = self.strings
        out: dict[str, np.ndarray] = {}
        for spec in ARG_SPECS:
            if spec.kind == "int":
                out[spec.column] = np.full(n, spec.default, dtype=np.int64)
            elif spec.kind == "float":
                out[spec.column] = np.full(n, spec.default, dtype=np.float64)
            else:
                out[spec.column] = np.full(n, -1, dtype=np.int32)
        uniq, inv = np.unique(cat_ids, return_inverse=True)
        for gi, cid in enumerate(uniq.tolist()):
            cat = S.table[cid].lower() if cid >= 0 else ""
            specs = ARGS_BY_CATEGORY.get(cat, ARG_SPECS)
            if not specs:
                continue
            if len(uniq) == 1:
                rows = None
                A = [e.args for e in evs]
            else:
                rows = np.flatnonzero(inv == gi)
                A = [evs[i].args for i in rows.tolist()]
            if None in A:
                A = [a if a is not None else _EMPTY_ARGS for a in A]
            for column, col in self._extract(specs, A):
                if rows is None:
                    out[column] = col
                else:
                    out[column][rows] = col
        return out

    def _extract(self, specs: tuple, A: list):
        """(column, array) for each spec: one generated pass over the records, integers converted at once."""
        ints, lists = _extractor(specs)(A)
        int_specs = [sp for sp in specs if sp.kind == "int"]
        other_specs = [sp for sp in specs if sp.kind != "int"]
        n = len(A)
        if int_specs:
            k = len(int_specs)
            try:
                m = np.fromiter(ints, dtype=np.int64, count=n * k).reshape(n, k)
                for j, sp in enumerate(int_specs):
                    yield sp.column, np.ascontiguousarray(m[:, j])
            except (TypeError, ValueError, OverflowError):  # strings, floats or huge ints somewhere: column by column
                for j, sp in enumerate(int_specs):
                    yield sp.column, _int_column(ints[j::k], sp.default, sp.column, self.path, self.problems)
        S = self.strings
        for sp, vals in zip(other_specs, lists):
            if sp.kind == "float":
                yield sp.column, _float_column([sp.default if v is None else v for v in vals])
            elif sp.kind == "str":
                yield sp.column, S.ids(vals)
            else:
                yield sp.column, S.raw_ids(vals)

    def _side(self, evs: list, others: list[int], base: int, exact: bool, raw_evs) -> None:
        groups: dict[str, list[int]] = {}
        for i in others:
            ph = evs[i].ph
            key = "names" if ph == "M" else "flows" if ph in ("s", "t", "f") else "counters" if ph == "C" else "instants"
            groups.setdefault(key, []).append(i)
        S = self.strings
        for key, idx in groups.items():
            sub = [evs[i] for i in idx]
            cols, _ = self._common(sub, exact)
            cols["index"] = base + np.array(idx, dtype=np.int64)
            cols["ph"] = S.ids([e.ph for e in sub])
            A = [e.args if e.args is not None else _EMPTY_ARGS for e in sub]
            if key == "names":
                for col in ("m_name", "m_labels", "m_sort_index"):
                    cols[col] = S.ids([_raw_text(getattr(a, col)) for a in A])
                self._add("names", cols)
            elif key == "flows":
                cols["flow_id"] = _int_column([e.id for e in sub], -1, "id", self.path, self.problems)
                cols["bp"] = S.ids([e.bp for e in sub])
                self._add("flows", cols)
            elif key == "instants":
                cols["scope"] = S.ids([e.s for e in sub])
                for col in ("mem_bytes", "mem_total_allocated", "mem_total_reserved", "mem_addr", "mem_device_type", "mem_device_id"):
                    cols[col] = _int_column([_raw_int(getattr(a, col)) for a in A], -1, col, self.path, self.problems)
                self._add("instants", cols)
            else:  # counters: need the generic args
                srcs = [raw_evs[i] for i in idx] if raw_evs is not None else None
                series_rows = []
                for j, e in enumerate(sub):
                    raw = srcs[j].args if srcs is not None else None
                    if raw is None or not isinstance(raw, msgspec.Raw) or not len(raw):
                        continue
                    try:
                        d = msgspec.json.decode(raw)
                    except msgspec.DecodeError:
                        continue
                    if isinstance(d, dict):
                        for k, v in d.items():
                            if isinstance(v, (int, float)) and not isinstance(v, bool):
                                series_rows.append((j, k, float(v)))
                if series_rows:
                    jj = np.array([r[0] for r in series_rows], dtype=np.int64)
                    c2 = {k: v[jj] for k, v in cols.items()}
                    c2["series"] = S.ids([r[1] for r in series_rows])
                    c2["value"] = np.array([r[2] for r in series_rows], dtype=np.float64)
                    self._add("counters", c2)

    def state(self) -> dict:
        """Everything decoded so far, picklable (sent from a worker to the parent)."""
        return {"parts": self.parts, "strings": self.strings.table, "problems": self.problems, "phase_counts": self.phase_counts,
                "ts_is_float": self.ts_is_float, "n": self.n, "raw_args": self.raw_args}

    def absorb(self, st: dict) -> None:
        """Append a piece decoded elsewhere (its ids and positions are local to the piece)."""
        remap = self.strings.ids(list(st["strings"])) if st["strings"] else np.empty(0, dtype=np.int32)
        for table, part in st["parts"].items():
            ids = ID_COLUMNS.get(table, ())
            for col, chunks in part.items():
                for arr in chunks:
                    if col in ids and len(remap):
                        arr = np.where(arr >= 0, remap[np.clip(arr, 0, None)], -1).astype(np.int32)
                    elif col == "index":
                        arr = arr + self.n
                    self.parts[table].setdefault(col, []).append(arr)
        self.problems.extend(st["problems"])
        for k, v in st["phase_counts"].items():
            self.phase_counts[k] = self.phase_counts.get(k, 0) + v
        self.ts_is_float = self.ts_is_float or st["ts_is_float"]
        self.n += st["n"]
        if self.all_args and st["raw_args"]:
            self.raw_args.extend(st["raw_args"])

    def finish(self) -> dict[str, dict[str, np.ndarray]]:
        """Concatenate each column, freeing the pieces as it goes; store ints compactly."""
        out = {}
        for table, part in self.parts.items():
            cols = {}
            for k in list(part):
                chunks = part.pop(k)
                arr = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
                del chunks
                cols[k] = compact_ints(arr) if k not in _WIDE_COLUMNS else arr
            out[table] = cols
        ev = out["events"]
        if not ev:
            for col, dt in event_columns():
                ev[col] = np.empty(0, dtype=dt)
        else:
            out["events"] = {col: ev[col] for col, _ in event_columns()}
        return out


_WIDE_COLUMNS = frozenset({"index", "ts_ns", "dur_ns", "value"})


def compact_ints(a: np.ndarray) -> np.ndarray:
    """The smallest signed integer dtype that holds ``a`` (storage only; views widen again)."""
    if a.dtype.kind != "i" or a.dtype.itemsize == 1 or len(a) == 0:
        return a
    lo, hi = int(a.min()), int(a.max())
    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return a.astype(dt) if np.dtype(dt).itemsize < a.dtype.itemsize else a
    return a


_EXTRACTORS: dict = {}


def _extractor(specs: tuple):
    """A generated function: one loop over arg records gathering every spec's value.

    Integer args go into one flat list (converted by a single ``np.fromiter``), the others into a
    list each. Generated once per category's spec list.
    """
    key = tuple(sp.column for sp in specs)
    f = _EXTRACTORS.get(key)
    if f is None:
        ints = [sp.column for sp in specs if sp.kind == "int"]
        others = [sp.column for sp in specs if sp.kind != "int"]
        lines = ["def extract(A):", "    I = []", "    ext = I.extend"]
        lines += [f"    c{k} = []\n    p{k} = c{k}.append" for k in range(len(others))]
        lines.append("    for a in A:")
        if ints:
            lines.append("        ext((" + ", ".join(f"a.{c}" for c in ints) + ",))")
        lines += [f"        p{k}(a.{c})" for k, c in enumerate(others)]
        if not ints and not others:
            lines.append("        pass")
        lines.append("    return I, [" + ", ".join(f"c{k}" for k in range(len(others))) + "]")
        ns: dict = {}
        exec("\n".join(lines), ns)  # the code is built from this module's own column names only
        f = _EXTRACTORS[key] = ns["extract"]
    return f


def _raw_text(r) -> Optional[str]:
    if r is None or not len(r):
        return None
    try:
        v = msgspec.json.decode(r)
    except msgspec.DecodeError:
        return bytes(r).decode("utf-8", "replace")
    return v if isinstance(v, str) else json.dumps(v)


def _raw_int(r):
    if r is None or not len(r):
        return None
    try:
        v = msgspec.json.decode(r)
    except msgspec.DecodeError:
        return None
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return None
    return v if isinstance(v, int) else None


# --------------------------------------------------------------------------- chunk decoding


def _needs_exact(evs: list) -> bool:
    """Epoch-based float µs (>= 2**42) lose ns digits as doubles; a sample decides (a file uses one clock)."""
    for e in evs[:200] + evs[-200:]:
        t = e.ts
        if isinstance(t, float) and abs(t) >= _EXACT_TS_LIMIT_US:
            return True
    return False


def _has_counters(evs: list) -> bool:
    for e in evs:
        if e.ph == "C":
            return True
    return False


def _decode_events(data: bytes, path: str, all_args: bool) -> tuple[list, bool, Optional[list]]:
    """Decode ``[ ... events ... ]`` bytes. Returns (records, exact, raw-args records)."""
    try:
        evs = _DEC_FAST.decode(data)
    except msgspec.ValidationError:
        evs = _DEC_LENIENT.decode(data)
    exact = False
    if _needs_exact(evs):
        evs = _DEC_EXACT.decode(data)
        exact = True
    raw_evs = None
    if all_args or _has_counters(evs):
        raw_evs = _DEC_RAWARGS.decode(data)
    return evs, exact, raw_evs


def _decode_events_fallback(data: bytes, path: str) -> list:
    """Python's json accepts NaN/Infinity, which some writers emit."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TraceReadError(f"text is not valid UTF-8 (byte {e.start} of a chunk)", path=path, fix="the file is damaged or not a JSON trace") from None
    return msgspec.convert(obj, type=list[_EVENT_PY], strict=False)


def _decode_piece(data: bytes, path: str, builder: _Builder) -> None:
    try:
        evs, exact, raw_evs = _decode_events(data, path, builder.all_args)
    except msgspec.DecodeError:
        evs = _decode_events_fallback(data, path)  # raises ValueError when really broken
        exact, raw_evs = False, None
        builder.problems.append(Problem("non_standard_json", "warning", "the file uses non-standard JSON (NaN or Infinity literals)"))
    builder.add_chunk(evs, exact, raw_evs)


def decode_piece_state(data: bytes, path: str, all_args: bool) -> dict:
    """Worker entry point: decode one ``[...]`` piece of events on its own."""
    b = _Builder(path, all_args)
    gc.disable()
    try:
        _decode_piece(data, path, b)
    finally:
        gc.enable()
    return b.state()


def _json_error(path: str, e: Exception) -> TraceFormatError:
    msg = str(e)
    return TraceFormatError(f"not valid JSON ({msg})", path=path, fix="the file is damaged or not a JSON trace")


def _split_header(buf: bytes, path: str) -> tuple[int, str]:
    """Return (offset just after the '[' that opens the events, format)."""
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
    m = re.compile(rb'"traceEvents"\s*:\s*\[').search(buf)
    if not m:
        return -1, "object"
    return m.end(), "object"


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def _find_split_forward(buf: bytes, start: int = 0) -> int:
    """Index of the first ``,`` at or after ``start`` that separates two events (``} , {``), or -1."""
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


def decode_range_state(path: str, start: int, end: int, all_args: bool) -> dict:
    """Worker entry point: read bytes [start, end) of a plain file (whole events) and decode them."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return decode_piece_state(b"[" + data + b"]", path, all_args)


def _decode_ranges(path: Path, events_start: int, fmt: str, builder: "_Builder", workers: int, piece_bytes: int,
                   all_args: bool) -> Optional[tuple[bytes, int]]:
    """Plain files: workers read and decode byte ranges themselves; the parent only finds the cuts.

    Returns (tail bytes, file size), or None to fall back to streaming (no usable cut points, or a
    cut that fell inside an event).
    """
    size = path.stat().st_size
    window = 1 << 18
    with open(path, "rb") as fh:
        # the last cut: the final event boundary, so the tail (last events + metadata) stays with the parent
        tail_from = max(events_start, size - max(piece_bytes, 4 * window))
        fh.seek(tail_from)
        last = fh.read(size - tail_from)
        c = _find_split(last, len(last))
        if c < 0:
            return None
        last_cut = tail_from + c
        if last_cut - events_start < 2 * piece_bytes:
            return None
        cuts = [events_start - 1]  # position of the '[' (a piece starts one byte after its cut)
        target = events_start + piece_bytes
        while target < last_cut - piece_bytes // 2:
            fh.seek(target)
            w = fh.read(window)
            k = _find_split_forward(w)
            if k < 0:
                return None
            cuts.append(target + k)
            target = target + k + piece_bytes
        cuts.append(last_cut)
        fh.seek(last_cut + 1)
        tail = fh.read()
    pool = _piece_pool(workers)
    try:
        futures = [pool.submit(decode_range_state, str(path), a + 1, b, all_args) for a, b in zip(cuts[:-1], cuts[1:])]
        states = []
        for f in futures:
            states.append(f.result())
    except (msgspec.DecodeError, ValueError, msgspec.ValidationError):
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    for st in states:
        builder.absorb(st)
    return tail, size


def _piece_pool(workers: int):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def decode_file(path: str | Path, *, all_args: bool = False, chunk_bytes: int = CHUNK_BYTES, workers: int = 1) -> DecodedFile:
    """Decode one trace file (plain or gzipped JSON) into columnar tables.

    Raises a :class:`holotrace.errors.HolotraceError` subclass for files that
    cannot be used at all. A file damaged in its tail is decoded up to the
    damage and the loss is reported in ``problems``.
    """
    p = Path(path)
    spath = str(p)
    if workers > 1 and chunk_bytes == CHUNK_BYTES:
        chunk_bytes = PARALLEL_CHUNK_BYTES
    problems: list[Problem] = []
    builder = _Builder(spath, all_args)
    stream = iter_bytes(p, chunk_bytes, problems)
    buf = bytearray()
    header_end = -1
    fmt = "object"
    total = 0
    meta: dict = {}
    exhausted = False
    # 1. find the start of the event array
    for b in stream:
        total += len(b)
        buf += b
        if len(buf) >= 16:
            header_end, fmt = _split_header(bytes(buf), spath)
            if header_end >= 0:
                break
    else:
        exhausted = True
        if total == 0:
            raise TraceFormatError("file is empty (0 bytes)", path=spath, fix="the profiler did not finish writing it; re-export the trace")
        header_end, fmt = _split_header(bytes(buf), spath)
        if header_end < 0:
            try:
                top = msgspec.json.decode(bytes(buf))
            except msgspec.DecodeError as e:
                if problems:
                    raise TraceReadError("gzip stream ends early (truncated file) and no events could be read", path=spath) from None
                raise _json_error(spath, e) from None
            if isinstance(top, dict):
                raise TraceFormatError("JSON has no 'traceEvents' (not a PyTorch profiler trace)", path=spath, fix="pass the Kineto trace file, e.g. *.pt.trace.json.gz")
            raise TraceFormatError("JSON is not a trace object", path=spath)
    header = bytes(buf[:header_end])
    if fmt == "object":
        head_text = header[: header.rfind(b'"traceEvents"')]
        head_text = head_text.rstrip()
        if head_text.endswith(b","):
            head_text = head_text[:-1]
        try:
            meta = _decode_meta(head_text + b"}")
        except msgspec.DecodeError as e:
            raise _json_error(spath, e) from None
    if workers > 1 and not exhausted and not _is_gzip(p):
        ranged = _decode_ranges(p, header_end, fmt, builder, workers, chunk_bytes, all_args)
        if ranged is not None:
            stream.close()
            tail, total = ranged
            return _finish_file(spath, tail, fmt, builder, problems, meta, total)
    rest = bytearray(b"[") + buf[header_end:]
    del buf
    # 2. stream whole events, cut at event boundaries
    pool = _piece_pool(workers) if workers > 1 and not exhausted else None
    pending: list = []
    try:
        if not exhausted:
            for b in stream:
                total += len(b)
                rest += b
                if len(rest) < chunk_bytes:
                    continue
                cut = _find_split(rest, len(rest))
                if cut < 0:
                    continue
                rest[cut] = 0x5D  # ']' closes this piece ...
                piece = bytes(rest[: cut + 1])
                if pool is None:
                    try:
                        _decode_piece(piece, spath, builder)
                    except (msgspec.DecodeError, ValueError, msgspec.ValidationError):
                        rest[cut] = 0x2C  # a cut inside an event: try again with more data
                        continue
                else:
                    pending.append(pool.submit(decode_piece_state, piece, spath, all_args))
                    while len(pending) > workers:
                        builder.absorb(pending.pop(0).result())
                rest[cut] = 0x5B  # ... and '[' opens the next one
                del rest[:cut]
                del piece
            while pending:
                builder.absorb(pending.pop(0).result())
    except (msgspec.DecodeError, ValueError, msgspec.ValidationError):
        # a piece cut inside an event in parallel mode: start over, one piece at a time
        for f in pending:
            f.cancel()
        return decode_file(path, all_args=all_args, chunk_bytes=chunk_bytes, workers=1)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    rest = rest[1:]
    # 3. the tail: last events and the metadata written after them
    tail = bytes(rest)
    del rest
    return _finish_file(spath, tail, fmt, builder, problems, meta, total)


def _finish_file(spath: str, tail: bytes, fmt: str, builder: "_Builder", problems: list, meta: dict, total: int) -> DecodedFile:
    tail_meta, ok = _decode_tail(tail, fmt, spath, builder)
    if not ok:
        problems.append(Problem("truncated_json", "error", f"the event list is cut off or damaged after {builder.n} events: those were read, the rest (and any metadata after the events) is lost"))
    meta.update(tail_meta)
    out = builder.finish()
    problems = builder.problems + problems
    for k in ("B", "E", "b", "e", "n"):
        if builder.phase_counts.get(k):
            problems.append(Problem("unsupported_phase", "info", f"{builder.phase_counts[k]} events of phase '{k}' (begin/end pairs are not reconstructed)", builder.phase_counts[k]))
    return DecodedFile(
        path=spath,
        meta=meta,
        strings=builder.strings.table,
        events=out["events"],
        instants=out["instants"],
        counters=out["counters"],
        flows=out["flows"],
        names=out["names"],
        n_trace_events=builder.n,
        phase_counts=builder.phase_counts,
        ts_is_float=builder.ts_is_float,
        problems=_merge_problems(problems),
        raw_args=builder.raw_args,
        format=fmt,
        bytes_read=total,
    )


def _merge_problems(problems: list[Problem]) -> list[Problem]:
    merged: dict[tuple, Problem] = {}
    for p in problems:
        key = (p.code, p.message if p.code not in ("missing_time", "negative_duration", "absurd_duration", "bad_arg_type") else p.message.split(" ", 1)[1])
        if key in merged:
            merged[key].count += p.count
        else:
            merged[key] = Problem(p.code, p.severity, p.message, p.count, p.example)
    for p in merged.values():
        if p.code in ("missing_time", "negative_duration", "absurd_duration"):
            p.message = f"{p.count} " + p.message.split(" ", 1)[1]
    return list(merged.values())


def _decode_meta(text: bytes) -> dict:
    raw = _DEC_TOP_RAW.decode(text)
    meta = {}
    for k, v in raw.items():
        if k == "traceEvents":
            continue
        try:
            meta[k] = msgspec.json.decode(v)
        except msgspec.DecodeError:
            meta[k] = json.loads(bytes(v))
    return meta


def _decode_tail(tail: bytes, fmt: str, path: str, builder: _Builder) -> tuple[dict, bool]:
    """Decode the last events plus trailing metadata. Returns (meta, complete)."""
    if fmt == "object":
        doc = b'{"traceEvents":[' + tail
        try:
            top = _DEC_TOP_RAW.decode(doc)
        except msgspec.DecodeError:
            top = None
            try:  # non-standard JSON (NaN/Infinity) that Python's json accepts
                obj = json.loads(doc.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                obj = None
            if isinstance(obj, dict):
                evs = msgspec.convert(obj.get("traceEvents") or [], type=list[_EVENT_PY], strict=False)
                builder.problems.append(Problem("non_standard_json", "warning", "the file uses non-standard JSON (NaN or Infinity literals)"))
                builder.add_chunk(evs, False, None)
                return {k: v for k, v in obj.items() if k != "traceEvents"}, True
        if top is not None:
            ev = top.get("traceEvents")
            _decode_piece(bytes(ev) if ev is not None else b"[]", path, builder)
            meta = {}
            for k, v in top.items():
                if k != "traceEvents":
                    meta[k] = msgspec.json.decode(v)
            return meta, True
    else:
        doc = b"[" + tail
        try:
            evs, exact, raw_evs = _decode_events(doc, path, builder.all_args)
            builder.add_chunk(evs, exact, raw_evs)
            return {}, True
        except msgspec.DecodeError:
            pass
    # Damaged tail: keep the complete events before the damage.
    try:
        _decode_piece(b"[" + tail + b"]", path, builder)  # e.g. trailing ']' lost only
        return {}, False
    except (msgspec.DecodeError, ValueError, msgspec.ValidationError):
        pass
    end = len(tail)
    attempts = 0
    while attempts < 64:
        cut = _find_split(tail, end)
        if cut < 0:
            break
        try:
            _decode_piece(b"[" + tail[:cut] + b"]", path, builder)
            return {}, False
        except (msgspec.DecodeError, ValueError, msgspec.ValidationError):
            end = cut
            attempts += 1
    if builder.n == 0:
        stripped = tail.strip()
        if stripped in (b"]}", b"]", b"] }") or stripped.startswith(b"]"):
            # an empty event list followed by broken metadata
            raise TraceFormatError("trailing metadata after the (empty) event list is not valid JSON", path=path)
        raise TraceFormatError("not valid JSON: the event list could not be read", path=path, fix="the file is damaged or truncated; re-export the trace")
    return {}, False
