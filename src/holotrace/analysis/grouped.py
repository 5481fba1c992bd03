"""Group reductions of float64 columns, bit for bit as pandas' ``groupby`` computes them, without pandas.

A group is given by integer ``codes`` (one per row, ``0 <= code < n_groups``; a negative code is no group, as
pandas drops a missing key) and the reductions return one value per group, ``n_groups`` long, in code order:

* :func:`group_sum` — pandas' group sum: where the codes ascend (each group's rows in one run) and no value is
  NaN, ``np.add.reduceat`` over the runs, as pandas 3's own fast path (pandas 2 compensates these too: the
  results here are pandas 3's, whichever pandas is installed, or none); otherwise the compensated (Kahan) sum in row
  order of the non-NaN values, exactly pandas' group sum
  (``y = v - c; t = s + y; c = t - s - y``, ``c`` reset to 0 when it is NaN, an infinite value; ``s = t``); a group
  without a value sums to 0.0 (``min_count=0``). It is not ``np.sum`` (pairwise) and not ``np.bincount``.
* :func:`group_count` — rows per group (non-NaN values when ``values`` is given).
* :func:`group_mean` — the compensated sum over the count (NaN for an empty group), as ``groupby().mean()``.
* :func:`group_var` / :func:`group_std` — Welford's running variance in row order, as ``groupby().var()``/``std()``
  (NaN where the count is at most ``ddof``).
* :func:`group_min` / :func:`group_max` (:func:`group_extremes`: both) — NaN skipped, NaN for an empty group; of
  equal values the first row's (``0.0`` and ``-0.0``), as pandas' strict comparisons.
* :func:`group_median` — numpy's median of the group's non-NaN values (the mean of the two middle ones for an
  even count), as ``groupby().median()``; NaN for an empty group.
* :func:`group_first_row` — the first row of each group (-1 for an empty group).
* :func:`factorize` — codes in first-appearance order, as ``pd.factorize``; :func:`unique_ids` — sorted
  codes of integers, as ``np.unique(return_inverse=True)``, without a sort for ids of a small range.

The order-dependent reductions (sum, mean, var, min, max) run in a small compiled core (``holotrace.analysis._grouped``) when it
is built; otherwise in numpy, one vectorised step per position within the groups (the groups still running after
a few steps finish in a Python loop, the same float arithmetic). Set the module attribute ``core`` to ``None`` to
use the numpy path.
"""

from __future__ import annotations

import numpy as np

try:
    from holotrace.analysis import _grouped as core
except ImportError:  # not built (a source checkout without build_ext): numpy computes the same bits
    core = None

__all__ = [
    "factorize",
    "group_count",
    "group_extremes",
    "group_first_row",
    "group_max",
    "group_mean",
    "group_median",
    "group_min",
    "group_std",
    "group_sum",
    "group_var",
    "unique_ids",
]

_FEW = 32  # groups still running below which the numpy path finishes each in a Python loop


def _inputs(codes, values, n_groups: int) -> tuple[np.ndarray, np.ndarray, int]:
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    n_groups = int(n_groups)
    if codes.shape != values.shape or codes.ndim != 1:
        raise ValueError(f"codes and values are one column each of one length (got {codes.shape}, {values.shape})")
    if codes.size and codes.max() >= n_groups:
        raise ValueError(f"a code ({int(codes.max())}) is not below the number of groups ({n_groups})")
    return codes, values, n_groups


def _by_group(codes: np.ndarray, values: np.ndarray, n_groups: int):
    """The non-NaN values of the rows with a group, sorted by group (row order kept within one), with each
    group's count and first position."""
    keep = (codes >= 0) & ~np.isnan(values)
    c, v = codes[keep], values[keep]
    order = np.argsort(c, kind="stable")
    v = v[order]
    counts = np.bincount(c, minlength=n_groups).astype(np.int64)
    starts = np.cumsum(counts) - counts
    return v, counts, starts


@np.errstate(invalid="ignore", over="ignore")
def _kahan_numpy(codes, values, n_groups):
    v, counts, starts = _by_group(codes, values, n_groups)
    sums = np.zeros(n_groups)
    comp = np.zeros(n_groups)
    active = np.flatnonzero(counts)
    k = 0
    while active.size > _FEW:
        s = sums[active]
        y = v[starts[active] + k] - comp[active]
        t = s + y
        c = t - s - y
        c[np.isnan(c)] = 0.0
        comp[active], sums[active] = c, t
        k += 1
        active = active[counts[active] > k]
    for g in active.tolist():
        s, c = float(sums[g]), float(comp[g])
        for x in v[starts[g] + k : starts[g] + counts[g]].tolist():
            y = x - c
            t = s + y
            c = t - s - y
            if c != c:
                c = 0.0
            s = t
        sums[g] = s
    return sums, counts


@np.errstate(invalid="ignore", over="ignore")
def _welford_numpy(codes, values, n_groups):
    v, counts, starts = _by_group(codes, values, n_groups)
    mean = np.zeros(n_groups)
    m2 = np.zeros(n_groups)
    active = np.flatnonzero(counts)
    k = 0
    while active.size > _FEW:
        x = v[starts[active] + k]
        old = mean[active]
        new = old + (x - old) / float(k + 1)
        mean[active] = new
        m2[active] = m2[active] + (x - new) * (x - old)
        k += 1
        active = active[counts[active] > k]
    for g in active.tolist():
        mu, s2, n = float(mean[g]), float(m2[g]), k
        for x in v[starts[g] + k : starts[g] + counts[g]].tolist():
            n += 1
            old = mu
            mu += (x - old) / float(n)
            s2 += (x - mu) * (x - old)
        mean[g], m2[g] = mu, s2
    return mean, m2, counts


def _runs(codes, values, n_groups):
    """pandas' own path for codes in ascending order (rows grouped in runs) and no NaN: each run summed by
    ``np.add.reduceat`` (numpy's pairwise sum after the first value), not compensated; None otherwise."""
    if not len(codes) or (codes[1:] < codes[:-1]).any() or np.isnan(values).any():
        return None
    na = int(np.searchsorted(codes, 0))  # rows without a group come first
    codes, values = codes[na:], values[na:]
    if not len(codes):
        return None
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    sums, counts = np.zeros(n_groups), np.zeros(n_groups, dtype=np.int64)
    sums[codes[starts]] = np.add.reduceat(values, starts)
    counts[codes[starts]] = np.diff(starts, append=len(codes))
    return sums, counts


def _kahan(codes, values, n_groups):
    codes, values, n_groups = _inputs(codes, values, n_groups)
    runs = _runs(codes, values, n_groups)
    if runs is not None:
        return runs
    if core is None:
        return _kahan_numpy(codes, values, n_groups)
    sums = np.empty(n_groups)
    counts = np.empty(n_groups, dtype=np.int64)
    core.kahan(codes, values, sums, counts)
    return sums, counts


def _welford(codes, values, n_groups):
    codes, values, n_groups = _inputs(codes, values, n_groups)
    if core is None:
        return _welford_numpy(codes, values, n_groups)
    mean = np.empty(n_groups)
    m2 = np.empty(n_groups)
    counts = np.empty(n_groups, dtype=np.int64)
    core.welford(codes, values, mean, m2, counts)
    return mean, m2, counts


def group_sum(codes, values, n_groups: int) -> np.ndarray:
    """pandas' ``groupby(codes).sum()`` of float64 ``values``: compensated, in row order, NaN skipped, 0.0 for
    a group without a value."""
    return _kahan(codes, values, n_groups)[0]


def group_count(codes, n_groups: int, values=None) -> np.ndarray:
    """Rows per group (int64); with ``values``, the non-NaN ones (pandas' ``count``)."""
    codes = np.asarray(codes, dtype=np.int64)
    keep = codes >= 0
    if values is not None:
        keep &= ~np.isnan(np.asarray(values, dtype=np.float64))
    return np.bincount(codes[keep], minlength=int(n_groups)).astype(np.int64)


def group_mean(codes, values, n_groups: int) -> np.ndarray:
    """pandas' ``groupby(codes).mean()``: the compensated sum over the count of non-NaN values (NaN if none)."""
    sums, counts = _kahan(codes, values, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = sums / counts.astype(np.float64)
    out[counts == 0] = np.nan
    return out


def group_var(codes, values, n_groups: int, ddof: int = 1) -> np.ndarray:
    """pandas' ``groupby(codes).var(ddof)``: Welford's sum of squared deviations in row order over
    ``count - ddof`` (NaN where the count is at most ``ddof``)."""
    _, m2, counts = _welford(codes, values, n_groups)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = m2 / (counts - ddof).astype(np.float64)
    out[counts <= ddof] = np.nan
    return out


def group_std(codes, values, n_groups: int, ddof: int = 1) -> np.ndarray:
    """pandas' ``groupby(codes).std(ddof)``: the square root of :func:`group_var`."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(group_var(codes, values, n_groups, ddof))


def _extremes(codes, values, n_groups) -> tuple[np.ndarray, np.ndarray]:
    codes, values, n_groups = _inputs(codes, values, n_groups)
    if getattr(core, "extremes", None) is not None:  # (a core built before it had no extremes)
        low, high = np.empty(n_groups), np.empty(n_groups)
        core.extremes(codes, values, low, high, np.empty(n_groups, dtype=np.int64))
        return low, high
    keep = (codes >= 0) & ~np.isnan(values)
    c, v = codes[keep], values[keep]
    out = []
    for key in (v, -v):  # a stable sort by group, then value (min) or value descending (max), ties in row order
        o = np.lexsort((key, c))
        co = c[o]
        start = np.flatnonzero(np.r_[True, co[1:] != co[:-1]]) if len(co) else np.empty(0, dtype=np.int64)
        a = np.full(n_groups, np.nan)
        a[co[start]] = v[o[start]]
        out.append(a)
    return out[0], out[1]


def group_extremes(codes, values, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(group_min, group_max)`` in one pass."""
    return _extremes(codes, values, n_groups)


def group_min(codes, values, n_groups: int) -> np.ndarray:
    """pandas' ``groupby(codes).min()`` of float64 values: NaN skipped, NaN for an empty group."""
    return _extremes(codes, values, n_groups)[0]


def group_max(codes, values, n_groups: int) -> np.ndarray:
    """pandas' ``groupby(codes).max()`` of float64 values: NaN skipped, NaN for an empty group."""
    return _extremes(codes, values, n_groups)[1]


def group_median(codes, values, n_groups: int) -> np.ndarray:
    """pandas' ``groupby(codes).median()``: the middle non-NaN value, or the mean of the two middle ones
    (``(a + b) / 2``), NaN for an empty group."""
    codes, values, n_groups = _inputs(codes, values, n_groups)
    keep = (codes >= 0) & ~np.isnan(values)
    c, v = codes[keep], values[keep]
    v = v[np.lexsort((v, c))]
    counts = np.bincount(c, minlength=n_groups).astype(np.int64)
    starts = np.cumsum(counts) - counts
    out = np.full(n_groups, np.nan)
    has = counts > 0
    hi = v[(starts + counts // 2)[has]]
    lo = v[(starts + (counts - 1) // 2)[has]]
    with np.errstate(invalid="ignore", over="ignore"):
        out[has] = np.where(counts[has] % 2 == 1, hi, (lo + hi) / 2.0)
    return out


def group_first_row(codes, n_groups: int) -> np.ndarray:
    """The first row (position) of each group, -1 for a group without a row."""
    codes = np.asarray(codes, dtype=np.int64)
    rows = np.flatnonzero(codes >= 0)
    first = np.full(int(n_groups), len(codes), dtype=np.int64)
    np.minimum.at(first, codes[rows], rows)
    first[first == len(codes)] = -1
    return first


def unique_ids(ids) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_inverse=True)`` of integers: by a lookup table without a sort when their range is
    at most a few times their number (string ids, ranks, packed pairs of them), else by numpy's sort of the runs of
    equal values (a rank's thread or stream of consecutive events: one sort of the runs, not of every event)."""
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu" or not len(ids):
        uniq, inv = np.unique(ids, return_inverse=True)
        return uniq, inv.reshape(-1).astype(np.int64, copy=False)
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo > 4 * len(ids) + 1024:
        uniq, _, inv = _unique_of_runs(ids)
        return uniq, inv
    present = np.zeros(hi - lo + 1, dtype=bool)
    off = ids.astype(np.int64, copy=False) - lo
    present[off] = True
    code = np.cumsum(present, dtype=np.int64) - 1
    return (np.flatnonzero(present) + lo).astype(ids.dtype, copy=False), code[off]


def _unique_of_runs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(x, return_index=True, return_inverse=True)`` (index and inverse as flat int64) of integers,
    computed on the runs of equal consecutive values: the first row of a value is the first row of its first run.
    Where runs are short, plain ``np.unique``."""
    n = len(x)
    cut = np.flatnonzero(x[1:] != x[:-1]) + 1
    if len(cut) > n // 4:
        u, first, inv = np.unique(x, return_index=True, return_inverse=True)
        return u, first.astype(np.int64, copy=False), inv.reshape(-1).astype(np.int64, copy=False)
    starts = np.empty(len(cut) + 1, dtype=np.int64)
    starts[0], starts[1:] = 0, cut
    u, first_run, inv = np.unique(x[starts], return_index=True, return_inverse=True)
    lengths = np.diff(np.append(starts, n))
    return u, starts[first_run], np.repeat(inv.reshape(-1).astype(np.int64, copy=False), lengths)


def factorize(values) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)`` with the uniques in order of first appearance, as ``pd.factorize`` of a column
    without missing values (a float NaN gets the code -1 and is no unique)."""
    values = np.asarray(values)
    codes = np.full(len(values), -1, dtype=np.int64)
    rows = np.flatnonzero(~np.isnan(values)) if values.dtype.kind == "f" else None
    x = values if rows is None else values[rows]
    if len(x) == 0:
        return codes, x[:0]
    if x.dtype.kind in "iu":
        u, first, inv = _unique_of_runs(x)
    else:
        u, first, inv = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(u), dtype=np.int64)
    rank[order] = np.arange(len(u))
    if rows is None:
        codes = rank[inv.ravel()]
    else:
        codes[rows] = rank[inv.ravel()]
    return codes, u[order]
