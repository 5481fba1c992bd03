"""The order of the open and close endpoints of events on their threads: the sweep that nests a call stack reads
them in this order (see :mod:`holotrace.analysis.callstack` for the order at one instant)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["endpoint_order"]


def endpoint_order(
    thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, index: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sort the open/close endpoints of events (the order: :mod:`holotrace.analysis.callstack`).

    Returns:
        ``(node, is_open)`` per sorted endpoint: the event (position in the
        input arrays) and whether it is its open endpoint.
    """
    m = len(ts)
    end = ts + dur
    zero = dur == 0
    span = _packed_span(thread, ts, end)
    if span is not None and not zero.any():
        return _positive_order(thread, ts, end, dur, index, span)
    # does a positive-length event open at (thread, time)?
    has_po = np.zeros(m, dtype=bool)
    if zero.any() and (~zero).any():
        if span is not None:  # (thread, time) as one integer
            at = thread * span + (ts - _span_origin(ts, end))
            has_po[np.flatnonzero(zero)] = np.isin(at[zero], at[~zero])
        else:
            po_keys = pd.MultiIndex.from_arrays([thread[~zero], ts[~zero]])
            z_keys_open = pd.MultiIndex.from_arrays([thread[zero], ts[zero]])
            has_po[np.flatnonzero(zero)] = z_keys_open.isin(po_keys)
    node = np.concatenate([np.arange(m), np.arange(m)])
    is_open = np.concatenate([np.ones(m, dtype=bool), np.zeros(m, dtype=bool)])
    time = np.concatenate([ts, end])
    z2 = np.concatenate([zero, zero])
    hp2 = np.concatenate([has_po, has_po])
    # class at one instant: 0 zero-length (no positive open here), 1 positive close,
    # 2 positive open, 3 zero-length (a positive open here)
    cls = np.where(z2, np.where(hp2, 3, 0), np.where(is_open, 2, 1))
    sub = np.where(z2 & ~is_open, 1, 0)  # zero-length: opens before closes
    th2 = np.concatenate([thread, thread])

    def ties(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The two last keys at endpoints ``at``: a positive-length event's duration (opens: longer first, closes:
        shorter first), then its index (opens ascending, closes descending)."""
        e, op = at % m, is_open[at]
        d, i = dur[e].astype(np.float64), index[e].astype(np.float64)
        return np.where(z2[at], 0.0, np.where(op, -d, d)), np.where(op, i, -i)

    if span is None:
        k1, k2 = ties(np.arange(2 * m))
        order = np.lexsort((k2, k1, sub, cls, time, th2))
    else:  # the same order: one sort of (thread, time, class) packed in an integer, then the two keys within ties
        key = ((th2 * span + (time - _span_origin(ts, end))) * 4 + cls) * 2 + sub
        order = packed_order(key, lambda o: ties(o)[::-1])
    return node[order], is_open[order]


def _positive_order(thread, ts, end, dur, index, span: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`endpoint_order` when every event has a positive length and the packed key fits: the same keys (class
    1 for a close, 2 for an open, no sub-key), built without the zero-length cases."""
    m = len(ts)
    base = thread * span - _span_origin(ts, end)
    key = np.concatenate([(base + ts) * 8 + 4, (base + end) * 8 + 2])

    def ties(o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        op = o < m
        e = np.where(op, o, o - m)
        d, i = dur[e].astype(np.float64), index[e].astype(np.float64)
        return np.where(op, i, -i), np.where(op, -d, d)

    order = packed_order(key, ties)
    is_open = order < m
    np.subtract(order, m, out=order, where=~is_open)  # (in place: the event of each endpoint)
    return order, is_open


def packed_order(key: np.ndarray, tie_keys) -> np.ndarray:
    """A stable argsort of the integer ``key``, then each run of equal keys ordered by ``tie_keys(positions)``
    (the keys of those positions, least significant first, as for ``np.lexsort``), computed for the tied only."""
    order = np.argsort(key, kind="stable")
    ks = key[order]
    start = np.r_[True, ks[1:] != ks[:-1]]
    if not start.all():
        run = np.cumsum(start) - 1
        tied = np.flatnonzero(np.bincount(run)[run] > 1)
        o = order[tied]
        order[tied] = o[np.lexsort((*tie_keys(o), run[tied]))]
    return order


def _span_origin(ts: np.ndarray, end: np.ndarray) -> int:
    """The earliest of the endpoints (the origin of :func:`_packed_span`'s times)."""
    return int(min(ts.min(), end.min()))


def _packed_span(thread: np.ndarray, ts: np.ndarray, end: np.ndarray) -> int | None:
    """How many time values a thread takes in a packed sort key ``((thread * span + time) * 4 + class) * 2 + sub``
    of integer endpoints, None when the times are not integers or the key would not fit in int64."""
    if not len(ts) or ts.dtype.kind not in "iu" or end.dtype.kind not in "iu" or thread.dtype.kind not in "iu":
        return None
    lo, hi = int(thread.min()), int(thread.max())
    span = int(max(ts.max(), end.max())) - _span_origin(ts, end) + 1
    if lo < 0 or (hi + 1) * span * 8 >= 2**62:
        return None
    return span
