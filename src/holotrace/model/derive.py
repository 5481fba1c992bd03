"""The columns derived from one rank's decoded events: kind, launches, links, steps.

Kernel types are not among them: they depend on the rule table in use (a user's rules, the launching
operator), so the view derives them (:mod:`holotrace.model.view`).

Derivation runs over the events in chunks of rows, so that its working memory does not grow with the
file: a first pass finds the ``ProfilerStep`` rows; the second classifies each chunk (every rule is a
lookup by string id) and keeps only what a link needs (each correlated CPU row's correlation and step,
each correlated GPU row's correlation); the third links each chunk's rows (the correlated partner, the
step that holds each event) through those.

Columns come from, and derived columns go to, anything with ``rows(table)``, ``read(table, name, a, b)``
and ``append(table, {name: chunk})``: the decoder's file-backed :class:`holotrace.ingest.store.Spill`, or
:class:`Arrays` for columns already in memory.
"""

from __future__ import annotations

import queue
import threading
from typing import Optional, Protocol

import numpy as np

from holotrace.exec.pool import cpu_count
from holotrace.model import classify, link
from holotrace.schema import compact_ints

CHUNK_ROWS = 1 << 16  # rows per chunk: a few MB of working memory, whatever the file's size
#: the derived columns, in the order they follow the decoded ones
DERIVED = ("end_ns", "kind", "is_launch", "partner", "is_step", "step_number", "iteration")


class Columns(Protocol):
    def rows(self, table: str) -> int: ...

    def read(self, table: str, name: str, a: int = 0, b: Optional[int] = None) -> np.ndarray: ...

    def append(self, table: str, columns: dict) -> None: ...


class Arrays:
    """In-memory columns with the spill's interface; ``derived()`` joins what was appended."""

    def __init__(self, columns: dict[str, np.ndarray]):
        self._c = dict(
            columns
        )  # derived columns are read back from here once complete (the caller's dict is not touched)
        self._out: dict[str, list] = {}

    def rows(self, table: str) -> int:
        return len(self._c["ts_ns"])

    def read(self, table: str, name: str, a: int = 0, b: Optional[int] = None) -> np.ndarray:
        if name not in self._c:  # a derived column appended earlier
            self._c[name] = self._join(name)
        return self._c[name][a:b]

    def append(self, table: str, columns: dict) -> None:
        for k, v in columns.items():
            self._out.setdefault(k, []).append(v)

    def _join(self, name: str) -> np.ndarray:
        parts = self._out[name]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def derived(self) -> dict[str, np.ndarray]:
        return {k: self._join(k) for k in DERIVED}


class _Lookup:
    """Per string id lookups of the rule table (one slot more, for a missing id -1)."""

    def __init__(self, table: list[str]):
        n = len(table)
        lut = classify.classify_strings(table)
        self.n = n
        self.is_launch = np.append(lut["is_launch"], False)
        self.step = np.append(lut["step"], np.int64(-1))
        self.kinds = classify.KindLookup(table)


class _Appends:
    """``src.append`` in order: on a thread of its own where it writes files (a spill whose columns are in files: one
    chunk's derived columns are written while the next is derived), else at once. :meth:`close` waits for the
    writes and raises the first one's error."""

    def __init__(self, src: Columns):
        self.src, self.err, self.q = src, None, None
        if getattr(src, "in_memory", True) is False and cpu_count() > 1:
            self.q = queue.Queue(maxsize=2)
            self.t = threading.Thread(target=self._write, name="holotrace-derive-write", daemon=True)
            self.t.start()

    def __call__(self, table: str, columns: dict) -> None:
        if self.q is None:
            self.src.append(table, columns)
            return
        if self.err is not None:
            raise self.err
        self.q.put((table, columns))

    def _write(self) -> None:
        while True:
            item = self.q.get()
            if item is None:
                return
            if self.err is None:
                try:
                    self.src.append(*item)
                except BaseException as e:  # handed to the deriving thread
                    self.err = e

    def close(self) -> None:
        if self.q is not None:
            self.q.put(None)
            self.t.join()
            self.q = None
        if self.err is not None:
            raise self.err

    def __enter__(self) -> _Appends:
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self.close()
        else:  # (the deriving failed: its error is the one raised)
            try:
                self.close()
            except BaseException:
                pass


def derive(src: Columns, table: list[str], chunk: Optional[int] = None) -> None:
    """Append the derived columns (:data:`DERIVED`) of ``src``'s events table to ``src``."""
    look = _Lookup(table)
    n = src.rows("events")
    chunk = chunk or CHUNK_ROWS
    row_type = np.int32 if n < 2**31 else np.int64
    # the steps first (few rows), so that each CPU row's step is known as it is classified
    steps = [_steps(src, look, a, min(n, a + chunk)) for a in range(0, n, chunk)]
    steps = [x for x in steps if x is not None]
    step_ts, step_end, step_no = (np.concatenate(x) for x in zip(*steps)) if steps else (np.empty(0, np.int64),) * 3
    it_type = compact_ints(np.append(step_no, -1)).dtype
    cpu: list = []  # (row, correlation, step) of CPU-side rows with a correlation id
    gpu: list = []  # (row, correlation) of GPU-side rows with one
    with _Appends(src) as append:
        for a in range(0, max(n, 1), chunk):
            b = min(n, a + chunk)
            cat, name = src.read("events", "cat", a, b), src.read("events", "name", a, b)
            ts = src.read("events", "ts_ns", a, b).astype(np.int64, copy=False)
            dur, corr = src.read("events", "dur_ns", a, b), src.read("events", "correlation", a, b)
            kind = look.kinds(cat, name)
            safe = np.where(name >= 0, name, look.n)
            cpu_side, gpu_side = _sides(kind)
            step_num = look.step[safe]
            is_step = _is_step(kind, step_num)
            append(
                "events",
                {
                    "end_ns": ts + dur,
                    "kind": kind,
                    "is_launch": look.is_launch[safe] & cpu_side,
                    "is_step": is_step,
                    "step_number": compact_ints(np.where(is_step, step_num, -1)),
                },
            )
            c = np.flatnonzero(cpu_side & (corr >= 0))
            c_it = link.containing_step(ts[c], step_ts, step_end, step_no).astype(it_type) if len(step_ts) else None
            cpu.append(((c + a).astype(row_type), corr[c], c_it))
            g = np.flatnonzero(gpu_side & (corr >= 0))
            gpu.append(((g + a).astype(row_type), corr[g]))
    cpu_rows, cpu_keys, cpu_it = _sorted_side(cpu)
    gpu_rows, gpu_keys, _ = _sorted_side(gpu)
    with _Appends(src) as append:
        for a in range(0, max(n, 1), chunk):
            b = min(n, a + chunk)
            kind = src.read("events", "kind", a, b)
            corr = src.read("events", "correlation", a, b)
            cpu_side, gpu_side = _sides(kind)
            partner = np.full(b - a, -1, dtype=np.int64)
            it = np.full(b - a, -1, dtype=np.int64)
            g = np.flatnonzero(gpu_side & (corr >= 0))
            pos = link.last_equal(cpu_keys, corr[g])
            found = pos >= 0
            partner[g[found]] = cpu_rows[pos[found]]
            c = np.flatnonzero(cpu_side & (corr >= 0))
            pos_c = link.last_equal(gpu_keys, corr[c])
            partner[c[pos_c >= 0]] = gpu_rows[pos_c[pos_c >= 0]]
            if len(step_ts):
                on_gpu = (kind >= 10) & (kind < 20)
                ts = src.read("events", "ts_ns", a, b)
                it = np.where(on_gpu, -1, link.containing_step(ts, step_ts, step_end, step_no))
                it[g[found]] = cpu_it[pos[found]]
            append("events", {"partner": compact_ints(partner), "iteration": compact_ints(it)})


def _steps(src: Columns, look: _Lookup, a: int, b: int):
    """(start, end, number) of the ``ProfilerStep`` rows among rows [a, b), file order; None if none."""
    cat, name = src.read("events", "cat", a, b), src.read("events", "name", a, b)
    step_num = look.step[np.where(name >= 0, name, look.n)]
    maybe = np.flatnonzero(step_num >= 0)
    if not len(maybe):
        return None
    s = maybe[_is_step(look.kinds(cat[maybe], name[maybe]), step_num[maybe])]
    if not len(s):
        return None
    ts = src.read("events", "ts_ns", a, b)[s].astype(np.int64)
    return ts, ts + src.read("events", "dur_ns", a, b)[s], step_num[s]


def _is_step(kind: np.ndarray, step_num: np.ndarray) -> np.ndarray:
    """``ProfilerStep#N`` rows: a step number from the name, on a CPU op or a user annotation."""
    return (step_num >= 0) & ((kind == classify.Kind.USER_ANNOTATION) | (kind == classify.Kind.CPU_OP))


def _sides(kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CPU side (runtime and driver calls) and GPU side (device activity other than GPU annotations)."""
    cpu_side = (kind == classify.Kind.RUNTIME) | (kind == classify.Kind.DRIVER)
    gpu_side = (kind >= 10) & (kind < 20) & (kind != classify.Kind.GPU_ANNOTATION)
    return cpu_side, gpu_side


def _sorted_side(parts: list):
    """The rows of one side sorted by (correlation, row): rows, correlations and (CPU side) each row's
    step. The parts are consumed as they are joined."""
    fields = [list(x) for x in zip(*parts)] if parts else [[], []]
    parts.clear()

    def take(i: int) -> Optional[np.ndarray]:
        chunks, fields[i] = fields[i], None
        if not chunks or chunks[0] is None:
            return None
        return np.concatenate(chunks)

    keys = take(1)
    if keys is None:
        keys = np.empty(0, np.int64)
    order = np.argsort(keys, kind="stable")  # rows were gathered in increasing order: ties stay by row
    keys = keys[order]
    rows = take(0)
    rows = rows[order] if rows is not None else np.empty(0, np.int64)
    it = take(2) if len(fields) > 2 else None
    return rows, keys, (it[order] if it is not None else None)


def derive_columns(c: dict[str, np.ndarray], table: list[str]) -> dict[str, np.ndarray]:
    """The derived columns of one rank's in-memory columns (ids into ``table``)."""
    src = Arrays(c)
    derive(src, table)
    return src.derived()
