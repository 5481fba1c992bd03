"""Links between events: launch ↔ GPU activity, iterations, id lookups.

All functions are vectorised over a rank's event columns (numpy arrays in
file order) and return new arrays; nothing is modified in place.
"""

from __future__ import annotations

import numpy as np


def correlate(correlation: np.ndarray, is_cpu_side: np.ndarray, is_gpu_side: np.ndarray) -> np.ndarray:
    """Row position of the correlated partner of each row, -1 if none.

    GPU rows point to the last CPU row (in file order) with their correlation id;
    CPU rows point to the last GPU row with theirs (a graph launch has several).
    """
    n = len(correlation)
    partner = np.full(n, -1, dtype=np.int64)
    cpu = np.flatnonzero(is_cpu_side & (correlation >= 0))
    gpu = np.flatnonzero(is_gpu_side & (correlation >= 0))
    if len(cpu) == 0 or len(gpu) == 0:
        return partner
    partner[gpu] = _last_match(correlation[gpu], cpu, correlation[cpu])
    partner[cpu] = _last_match(correlation[cpu], gpu, correlation[gpu])
    return partner


def _last_match(keys: np.ndarray, rows: np.ndarray, row_keys: np.ndarray) -> np.ndarray:
    """For each key, the last (largest) row whose key equals it, -1 if none."""
    order = np.lexsort((rows, row_keys))  # by key, then row
    pos = last_equal(row_keys[order], keys)
    return np.where(pos >= 0, rows[order][np.clip(pos, 0, None)], -1)


def last_equal(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each key, the position of the last entry of ``sorted_keys`` equal to it, -1 if none."""
    if not len(sorted_keys) or not len(keys):
        return np.full(len(keys), -1, dtype=np.int64)
    hi = np.searchsorted(sorted_keys, keys, side="right") - 1
    ok = (hi >= 0) & (sorted_keys[np.clip(hi, 0, None)] == keys)
    return np.where(ok, hi, -1)


def containing_step(ts: np.ndarray, step_ts: np.ndarray, step_end: np.ndarray, step_num: np.ndarray) -> np.ndarray:
    """Step number whose [start, end) holds each ts; later steps (file order) win overlaps; -1 none."""
    out = np.full(len(ts), -1, dtype=np.int64)
    if len(step_ts) == 0:
        return out
    order = np.argsort(step_ts, kind="stable")
    s_ts, s_end = step_ts[order], step_end[order]
    overlapping = len(s_ts) > 1 and bool((s_ts[1:] < np.maximum.accumulate(s_end)[:-1]).any())
    if not overlapping:
        k = np.searchsorted(s_ts, ts, side="right") - 1
        kk = np.clip(k, 0, None)
        ok = (k >= 0) & (ts < s_end[kk])
        out[ok] = step_num[order][kk[ok]]
        return out
    for a, b, num in zip(step_ts.tolist(), step_end.tolist(), step_num.tolist()):  # few steps: loop over steps
        out[(ts >= a) & (ts < b)] = num
    return out


#: blocks of ids up to which a search for a value's block beats a hash lookup (ids in a few far-apart clusters)
_FEW_BLOCKS = 32


def isin_ids(values: np.ndarray, members: np.ndarray) -> np.ndarray:
    """``np.isin`` for integer ids, through flag arrays (no sort of ``values``): one over the whole range when
    it is small, else one per block of ids holding a member (ids in a few far-apart clusters), else a hash lookup."""
    if not len(values) or not len(members):
        return np.zeros(len(values), dtype=bool)
    values, members = np.asarray(values), np.asarray(members)
    lo = min(int(values.min()), int(members.min()))
    hi = max(int(values.max()), int(members.max()))
    budget = 8 * (len(values) + len(members)) + 1024
    if hi - lo <= budget:
        flag = np.zeros(hi - lo + 1, dtype=bool)
        flag[members - lo] = True
        return flag[values - lo]
    blocks = np.unique(members >> 16)  # flag arrays of 2**16 ids, one per block that holds a member
    if len(blocks) <= _FEW_BLOCKS and len(blocks) << 16 <= budget:
        return _isin_blocks(values, members, blocks, 16)
    # ids scattered over a wide range (not the command paths' dense ids): pandas' hash lookup; a value's block
    # found by a search costs more than the hash here (4 M values: 0.03-0.07 s against 0.15-0.6 s)
    import pandas as pd

    return pd.Series(values, copy=False).isin(members).to_numpy()


def _isin_blocks(values: np.ndarray, members: np.ndarray, blocks: np.ndarray, shift: int) -> np.ndarray:
    low = (1 << shift) - 1
    flag = np.zeros(len(blocks) << shift, dtype=bool)
    flag[(np.searchsorted(blocks, members >> shift) << shift) | (members & low)] = True
    vb = values >> shift
    at = np.minimum(np.searchsorted(blocks, vb), len(blocks) - 1)
    inside = blocks[at] == vb
    out = np.zeros(len(values), dtype=bool)
    out[inside] = flag[(at[inside] << shift) | (values[inside] & low)]
    return out


def position_lookup(index: np.ndarray) -> np.ndarray:
    """Array mapping each value of ``index`` to its position (-1 where absent).

    ``index`` holds unique non-negative integers (event indexes); the array has ``max + 1`` entries.
    """
    lut = np.full(int(index.max()) + 1 if len(index) else 0, -1, dtype=np.int64)
    lut[index] = np.arange(len(index))
    return lut
