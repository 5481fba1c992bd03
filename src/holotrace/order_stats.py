"""Order statistics of numpy arrays, the same values numpy's functions give, without their first-call cost.

numpy's ``unique`` (without ``return_*``), ``median`` and ``percentile`` import ``numpy.ma`` the first time any of
them runs (about 8 ms of a command's start, on most commands' paths). These compute the same values from a sort,
in the same order of operations (the same bits), for the inputs the analyses pass them; anything else goes to
numpy's own function.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "median", "percentile"]


def distinct(values) -> np.ndarray:
    """``np.unique(values)`` of integers or booleans: the distinct values, ascending, in their dtype."""
    x = np.asarray(values).ravel()
    if x.dtype.kind not in "iub":
        return np.unique(x)
    if len(x) > 1 and x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if hi - lo <= 4 * len(x) + 1024 and -(2**62) < lo and hi < 2**62:  # a compact range (ids, ranks, streams):
            seen = np.bincount(x.astype(np.intp, copy=False) - lo)  # counted, not sorted
            return (np.flatnonzero(seen) + lo).astype(x.dtype, copy=False)
    s = np.sort(x)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def median(values) -> float:
    """``float(np.median(values))`` of a 1-D float64 or integer array: the middle value, or ``(a + b) / 2`` of the
    two middle ones (as numpy's mean of two values); NaN when a value is NaN or there is none."""
    x = np.asarray(values)
    if x.ndim != 1 or x.dtype.kind not in "fiu":
        return float(np.median(x))
    x = x.astype(np.float64, copy=False)
    n = len(x)
    if n == 0 or np.isnan(x).any():
        return float("nan")
    half = n // 2
    if n % 2:
        return float(np.partition(x, half)[half])
    part = np.partition(x, [half - 1, half])
    return float((part[half - 1] + part[half]) / 2.0)


def percentile(values, q):
    """``np.percentile(values, q)`` (linear interpolation) of float64 values without NaN: from the sorted values,
    numpy's interpolation in numpy's order of operations (a scalar ``q`` gives a float, a sequence an array)."""
    x = np.asarray(values)
    if x.ndim != 1 or x.dtype != np.float64 or not len(x) or np.isnan(x).any():
        return np.percentile(x, q)
    scalar = np.ndim(q) == 0
    frac = np.true_divide(np.atleast_1d(np.asarray(q, dtype=np.float64)), 100)
    if ((frac < 0) | (frac > 1) | np.isnan(frac)).any():
        return np.percentile(x, q)  # (numpy's error)
    n = len(x)
    at = (n - 1) * frac
    lo = np.floor(at)
    hi = lo + 1
    top = at >= n - 1  # at or past the last value: the last value
    lo[top], hi[top] = -1, -1
    lo, hi = lo.astype(np.intp), hi.astype(np.intp)
    s = np.sort(x)
    a, b = s[lo], s[hi]
    t = at - lo
    diff = b - a
    out = a + diff * t
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return float(out[0]) if scalar else out
