"""The order of the open and close endpoints of events on their threads: the sweep that nests a call stack reads
them in this order (see :mod:`holotrace.analysis.callstack` for the order at one instant)."""

from __future__ import annotations

import numpy as np

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
    is_open = np.zeros(2 * m, dtype=bool)
    is_open[:m] = True
    # at one instant: class 0 zero-length (no positive open here), 1 positive close, 2 positive open, 3 zero-length
    # (a positive open here); then a zero-length event opens before it closes: ``low`` = class * 2 + (a zero-length
    # close)
    low = np.where(is_open, np.int8(4), np.int8(2))
    z2 = None  # (no zero-length event: nothing of the above to mark)
    if zero.any():
        has_po = np.zeros(m, dtype=bool)  # does a positive-length event open at (thread, time)?
        if (~zero).any():
            if span is not None:  # (thread, time) as one integer
                at = thread * span + (ts - _span_origin(ts, end))
                has_po[np.flatnonzero(zero)] = np.isin(at[zero], at[~zero])
            else:
                has_po[np.flatnonzero(zero)] = _pairs_in(thread[zero], ts[zero], thread[~zero], ts[~zero])
        z2 = np.concatenate([zero, zero])
        low[z2] = (np.where(np.concatenate([has_po, has_po]), 6, 0) + ~is_open)[z2]

    def ties(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The two last keys at endpoints ``at``: a positive-length event's duration (opens: longer first, closes:
        shorter first), then its index (opens ascending, closes descending)."""
        op = at < m
        e = np.where(op, at, at - m)
        d, i = dur[e].astype(np.float64), index[e].astype(np.float64)
        k1 = np.where(op, -d, d)
        if z2 is not None:
            k1[z2[at]] = 0.0
        return k1, np.where(op, i, -i)

    if span is None:
        k1, k2 = ties(np.arange(2 * m))
        order = np.lexsort((k2, k1, low, np.concatenate([ts, end]), np.concatenate([thread, thread])))
    else:  # the same order: one sort of (thread, time, low) packed in an integer, then the two keys within ties
        at = thread * span - _span_origin(ts, end)
        key = np.concatenate([at + ts, at + end]) * 8 + low
        order = packed_order(key, lambda o: ties(o)[::-1])
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


def _pairs_in(a1: np.ndarray, a2: np.ndarray, b1: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """Whether each pair ``(a1, a2)`` is one of the pairs ``(b1, b2)`` (one sort of both sets of pairs)."""
    x1, x2 = np.concatenate([a1, b1]), np.concatenate([a2, b2])
    order = np.lexsort((x2, x1))
    s1, s2 = x1[order], x2[order]
    group = np.cumsum(np.r_[True, (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])]) - 1
    in_b = np.zeros(int(group[-1]) + 1 if len(group) else 0, dtype=bool)
    in_b[group[order >= len(a1)]] = True
    out = np.empty(len(a1), dtype=bool)
    at_a = order < len(a1)
    out[order[at_a]] = in_b[group[at_a]]
    return out


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
