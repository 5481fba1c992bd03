"""A rank's outermost runtime calls on its CPU threads: the calls the job graph has as nodes (a call inside another
is part of it)."""

from __future__ import annotations

import numpy as np

from holotrace.analysis.endpoint_order import packed_order
from holotrace.analysis.grouped import unique_ids
from holotrace.model.classify import Kind, kind_in

__all__ = ["outer_calls"]


def outer_calls(rv) -> np.ndarray:
    """Rows of runtime/driver calls on CPU threads, outermost only (a call inside another is part of it)."""
    sel = np.flatnonzero(kind_in(rv["kind"], (Kind.RUNTIME, Kind.DRIVER)) & (rv["stream"] == -1))
    if not len(sel):
        return sel
    thread = rv.at("pid", sel) * np.int64(1_000_003) + rv.at("tid", sel)
    order = _by_thread_time(thread, rv["ts"][sel], rv["dur"][sel])
    sel, thread = sel[order], thread[order]
    end = rv["end"][sel]
    keep = np.ones(len(sel), dtype=bool)
    cut = np.flatnonzero(thread[1:] != thread[:-1]) + 1
    for a, b in zip(np.r_[0, cut], np.r_[cut, len(sel)]):
        prev = np.maximum.accumulate(end[a:b])
        keep[a + 1 : b] = end[a + 1 : b] > prev[:-1]
    return sel[keep]


def _by_thread_time(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, ts, thread))``: by thread, then start, the longer first, then position. Integer times:
    one sort of (thread, start) packed in an integer, then the durations within ties only."""
    n = len(ts)
    if not n or ts.dtype.kind not in "iu" or dur.dtype.kind not in "iu":
        return np.lexsort((-dur, ts, thread))
    uniq, codes = unique_ids(thread)  # codes in the threads' order
    lo = int(ts.min())
    span = int(ts.max()) - lo + 1
    if len(uniq) * span >= 2**62:
        return np.lexsort((-dur, ts, thread))
    return packed_order(codes * span + (ts - lo), lambda o: (-dur[o],))
