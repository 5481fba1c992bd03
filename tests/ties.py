"""Bounds on HTA's summary statistics of a step series over every order of its equal-time points.

HTA builds the queue-length and memory-bandwidth series by sorting change points by time with numpy's
default sort, which is not stable: the order of points at equal times depends on the CPU (SIMD sorts), and
with it the values the series takes at those times. The points, the time and the value after each run of
equal times are fixed; only the values inside a run move. At position ``j`` of a run of deltas, the value
is the value before the run plus the sum of some ``j`` of its deltas: at most the sum of the ``j`` largest
(``hi``), at least the sum of the ``j`` smallest (``lo``). Every statistic below follows from these
position-wise bounds, so a golden value written on any machine lies inside them.

* count: exact (every point), or for a positive-only summary between the points certainly positive and
  those possibly positive (a value that is exactly 0 may carry a float residue of either sign);
* min, quartiles, max, mean: the statistic of the ``lo`` values and of the ``hi`` values (order statistics
  of position-wise smaller values are smaller);
* std: within ``||hi - lo|| / sqrt(n - 1)`` of any order's std (std is a norm of the centred values), or,
  for a positive-only summary, from the bounds on the sums of values and of squares.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

QUANTILES = ("min", "25%", "50%", "75%", "max", "mean")
EPS = 1e-9  # below this a bandwidth is a float residue of 0 (docs/compatibility.md)


def tie_paths(frame: pd.DataFrame, keys: list[str], value: str) -> pd.DataFrame:
    """``frame`` (a series in any order of equal times: rows grouped by ``keys``, then time) with columns
    ``lo`` and ``hi``: the least and greatest value each position of a run of equal times can take."""
    f = frame[keys + ["ts", value]].reset_index(drop=True)
    prev = f.groupby(keys, sort=False)[value].shift(1, fill_value=0)
    delta = (f[value] - prev).to_numpy(dtype=np.float64)
    block_keys = f[keys + ["ts"]]
    new = np.r_[True, (block_keys.iloc[1:].to_numpy() != block_keys.iloc[:-1].to_numpy()).any(axis=1)]
    block = np.cumsum(new) - 1
    start = np.flatnonzero(new)
    v0 = prev.to_numpy(dtype=np.float64)[start][block]
    out = f.copy()
    for col, sign in (("hi", -1.0), ("lo", 1.0)):
        order = np.lexsort((sign * delta, block))
        cs = pd.Series(delta[order]).groupby(block[order]).cumsum().to_numpy()
        path = np.empty(len(f))
        path[np.arange(len(f))] = v0[order] + cs  # position i of the sorted run keeps slot i of the run
        out[col] = path
    return out


def _describe(values: np.ndarray) -> pd.Series:
    return pd.Series(values, dtype=np.float64).describe()


def check_all_points(gold: pd.DataFrame, series: pd.DataFrame, keys: list[str], value: str, rtol: float) -> int:
    """Assert each golden row (``keys`` + ``value|stat`` columns) lies inside the bounds of ``series``
    summarised over all its points (HTA's queue-length summary). Returns how many positions sit in runs
    whose order matters (0: the golden must match exactly, and the bounds say so)."""
    paths = tie_paths(series, keys, value)
    moving = 0
    for k, p in paths.groupby(keys, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        row = gold
        for name, v in zip(keys, k):
            row = row[row[name] == v]
        assert len(row) == 1, (k, len(row))
        row = row.iloc[0]
        lo, hi, ref = (p[c].to_numpy(dtype=np.float64) for c in ("lo", "hi", value))
        moving += int((hi != lo).sum())
        assert row[f"{value}|count"] == len(p)
        dlo, dhi = _describe(lo), _describe(hi)
        for stat in QUANTILES:
            g = float(row[f"{value}|{stat}"])
            slack = rtol * max(abs(g), 1.0)
            assert dlo[stat] - slack <= g <= dhi[stat] + slack, (k, stat, dlo[stat], g, dhi[stat])
        if len(p) > 1:
            tol = float(np.sqrt(((hi - lo) ** 2).sum() / (len(p) - 1)))
            g = float(row[f"{value}|std"])
            assert abs(g - _describe(ref)["std"]) <= tol + rtol * max(abs(g), 1.0), (k, "std", g, tol)
    return moving


def check_positive_points(gold: pd.DataFrame, series: pd.DataFrame, keys: list[str], value: str, rtol: float) -> int:
    """As :func:`check_all_points` for a summary of the positive points only (HTA's memory-bandwidth
    summary). Groups of ``series`` without any possibly positive point have no golden row."""
    paths = tie_paths(series, keys, value)
    moving = 0
    seen = 0
    for k, p in paths.groupby(keys, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        lo, hi = p["lo"].to_numpy(dtype=np.float64), p["hi"].to_numpy(dtype=np.float64)
        certain = lo > EPS
        maybe = ~certain & (hi > -EPS)
        row = gold
        for name, v in zip(keys, k):
            row = row[row[name] == v]
        if not (certain | maybe).any():
            assert row.empty, k
            continue
        moving += int(((hi != lo) | maybe).sum())
        if row.empty:
            assert not certain.any(), k
            continue
        seen += 1
        row = row.iloc[0]
        n = int(row[f"{value}|count"])
        nc, m = int(certain.sum()), int(maybe.sum())
        assert nc <= n <= nc + m, (k, nc, n, nc + m)
        low = _describe(np.r_[lo[certain], np.zeros(m)])
        top = np.sort(np.maximum(hi[maybe], 0.0))[::-1]
        highs = [_describe(np.r_[hi[certain], top[:j]]) for j in range(m + 1) if nc + j > 0]
        for stat in QUANTILES:
            g = float(row[f"{value}|{stat}"])
            slack = rtol * max(abs(g), 1.0)
            up = max(d[stat] for d in highs)
            assert low[stat] - slack <= g <= up + slack, (k, stat, low[stat], g, up)
        if n > 1:
            s1lo, s1hi = lo[certain].sum(), hi[certain].sum() + top.sum()
            s2lo, s2hi = (lo[certain] ** 2).sum(), (hi[certain] ** 2).sum() + (top**2).sum()
            var_hi = (s2hi - s1lo**2 / n) / (n - 1)
            var_lo = max(0.0, (s2lo - s1hi**2 / n) / (n - 1))
            g = float(row[f"{value}|std"])
            slack = rtol * max(abs(g), 1.0)
            assert np.sqrt(var_lo) - slack <= g <= np.sqrt(max(var_hi, 0.0)) + slack, (k, "std", var_lo, g, var_hi)
    assert seen == len(gold), (seen, len(gold))
    return moving
