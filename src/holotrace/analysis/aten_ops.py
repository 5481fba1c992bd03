"""ATen operators, the kernels they launch, and the delays before the first one (spec 23 §2).

For every kernel launch call, the enclosing ATen operator is the ``aten::``
event that contains the call and starts latest (no thread check in HTA; the
same thread is required by default here). Launches are grouped into operator
*instances* ``(thread, op name, op start)``; an instance's kernel sequence is
the names of its kernels in launch order, its delays those of its first
launch: ``aten_op_delay = launch.ts - op.ts`` and ``runtime_delay =
kernel.ts - launch.ts``. Instances are aggregated per ``(op, sequence)``.

The enclosing-operator search is vectorised: operators sorted by
``(thread, ts)``, a sparse table of running maximum ends, and binary lifting
to find, for every launch, the latest-starting operator that still covers it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = ["ATEN_COLUMNS", "aggregate_aten_records", "aten_launch_records", "empty_aten_frame", "enclosing_interval"]

log = logging.getLogger(__name__)

ATEN_COLUMNS = ["aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"]
_HTA_LAUNCH = re.compile(r"(cuda.*LaunchKernel)|(cuLaunchKernel)|(^runFunction)")
RECORD_COLUMNS = ["thread_id", "aten_op_name", "aten_op_start", "aten_op_delay", "runtime_delay", "correlation_id", "kernel_name"]


def empty_aten_frame() -> pd.DataFrame:
    """The output frame with no rows."""
    return pd.DataFrame(
        {
            "aten_op_name": pd.Series([], dtype=object),
            "kernel_sequence": pd.Series([], dtype=object),
            "occurrence_count": pd.Series([], dtype=np.int64),
            "avg_aten_op_launch_delay": pd.Series([], dtype=np.float64),
            "avg_runtime_delay": pd.Series([], dtype=np.float64),
        }
    )


def enclosing_interval(
    op_thread: np.ndarray,
    op_ts: np.ndarray,
    op_end: np.ndarray,
    q_thread: np.ndarray,
    q_ts: np.ndarray,
    q_end: np.ndarray,
) -> np.ndarray:
    """For each query interval, the operator that covers it and starts latest.

    An operator ``o`` covers a query ``q`` when they share a thread code,
    ``o.ts <= q.ts`` and ``o.end >= q.end``. Among covering operators with the
    same (latest) start, the first one in input order wins (HTA's pick).

    Args:
        op_thread, op_ts, op_end: operators (thread codes; pass zeros to ignore threads).
        q_thread, q_ts, q_end: queries.

    Returns:
        Operator position per query, or -1.
    """
    n, m = len(op_ts), len(q_ts)
    res = np.full(m, -1, dtype=np.int64)
    if n == 0 or m == 0:
        return res
    pos = np.arange(n)
    order = np.lexsort((-pos, op_ts, op_thread))  # among equal starts, first input row sorts last
    ts_s, end_s, th_s = op_ts[order], op_end[order].astype(np.float64), op_thread[order]
    # composite (thread, time) key via a common dense rank of times
    allt = np.concatenate([ts_s, q_ts]).astype(np.float64)
    _, inv = np.unique(allt, return_inverse=True)
    width = np.int64(inv.max() + 2)
    key_ops = th_s.astype(np.int64) * width + inv[:n]
    key_q = q_thread.astype(np.int64) * width + inv[n:]
    p = np.searchsorted(key_ops, key_q, side="right") - 1  # last op starting at or before q (any thread)
    lo = np.searchsorted(th_s, q_thread, side="left")  # first op of q's thread
    # sparse table of max end over windows ending at i: S[k][i] = max(end[i-2^k+1 .. i])
    levels = [end_s]
    k = 1
    while (1 << k) <= n:
        prev = levels[-1]
        half = 1 << (k - 1)
        cur = prev.copy()
        cur[half:] = np.maximum(prev[half:], prev[:-half])
        levels.append(cur)
        k += 1
    need = q_end.astype(np.float64)
    cur_pos = p.copy()
    active = cur_pos >= 0
    # skip blocks whose max end is below the query's end, largest blocks first
    for k in range(len(levels) - 1, -1, -1):
        size = 1 << k
        idx = np.flatnonzero(active & (cur_pos - size + 1 >= 0))
        if idx.size == 0:
            continue
        blockmax = levels[k][cur_pos[idx]]
        skip = blockmax < need[idx]
        cur_pos[idx[skip]] -= size
    ok = (cur_pos >= 0) & (cur_pos >= lo) & active
    ok[ok] &= end_s[cur_pos[ok]] >= need[ok]
    res[ok] = order[cur_pos[ok]]
    return res


def aten_launch_records(
    frame: pd.DataFrame,
    *,
    same_thread: bool = True,
    launch_names: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, int]:
    """One record per kernel launch inside an ``aten::`` operator, in table order.

    Args:
        frame: one rank's HTA-style table (``index, pid, tid, stream, ts, dur,
            correlation, index_correlation, s_name``).
        same_thread: require the operator and the launch on the same (pid, tid).
        launch_names: extra launch-call names (beyond HTA's launch pattern).

    Returns:
        ``(records, skipped)``: the records (columns ``RECORD_COLUMNS``) and the
        number of launches inside an operator that had no single GPU partner.
    """
    names = frame["s_name"].astype(object).fillna("").astype(str)
    uniq, codes = np.unique(names.to_numpy(), return_inverse=True)
    extra = set(launch_names or ())
    is_launch_u = np.array([bool(_HTA_LAUNCH.match(u)) or u in extra for u in uniq], dtype=bool)
    is_aten_u = np.array([u.startswith("aten::") for u in uniq], dtype=bool)
    is_launch = is_launch_u[codes] if len(uniq) else np.zeros(len(frame), dtype=bool)
    is_aten = is_aten_u[codes] if len(uniq) else np.zeros(len(frame), dtype=bool)
    ts = frame["ts"].to_numpy().astype(np.float64)
    dur = np.nan_to_num(frame["dur"].to_numpy().astype(np.float64))
    end = ts + dur
    if same_thread:
        thread = pd.MultiIndex.from_arrays(
            [pd.Index(frame["pid"].to_numpy(), dtype=object), pd.Index(frame["tid"].to_numpy(), dtype=object)]
        ).factorize()[0].astype(np.int64)
    else:
        thread = np.zeros(len(frame), dtype=np.int64)
    ops = np.flatnonzero(is_aten)
    launches = np.flatnonzero(is_launch)
    enc = enclosing_interval(thread[ops], ts[ops], end[ops], thread[launches], ts[launches], end[launches])
    inside = enc >= 0
    launches, op_rows = launches[inside], ops[enc[inside]]

    # GPU partner: stream-bearing rows whose index_correlation is the launch's index
    stream = frame["stream"].to_numpy()
    icorr = frame["index_correlation"].to_numpy()
    index = frame["index"].to_numpy()
    gpu_rows = np.flatnonzero((stream != -1) & (icorr > 0))
    g_key = icorr[gpu_rows]
    srt = np.argsort(g_key, kind="stable")
    g_sorted = g_key[srt]
    lo = np.searchsorted(g_sorted, index[launches], side="left")
    hi = np.searchsorted(g_sorted, index[launches], side="right")
    single = (hi - lo) == 1
    skipped = int((~single).sum())
    launches, op_rows = launches[single], op_rows[single]
    k_rows = gpu_rows[srt[lo[single]]]
    rec = pd.DataFrame(
        {
            "thread_id": frame["tid"].to_numpy()[op_rows],
            "aten_op_name": names.to_numpy()[op_rows],
            "aten_op_start": frame["ts"].to_numpy()[op_rows],
            "aten_op_delay": ts[launches] - ts[op_rows],
            "runtime_delay": ts[k_rows] - ts[launches],
            "correlation_id": frame["correlation"].to_numpy()[launches],
            "kernel_name": names.to_numpy()[k_rows],
        }
    )
    return rec, skipped


def aggregate_aten_records(records: pd.DataFrame, sort_by: Sequence[str] | None = None) -> pd.DataFrame:
    """Group records into operator instances, then into ``(op, kernel sequence)`` rows.

    Args:
        records: output of :func:`aten_launch_records` (possibly several concatenated).
        sort_by: columns to sort by, all descending (default ``["occurrence_count"]``);
            ties keep ``(aten_op_name, kernel_sequence)`` ascending.

    Returns:
        ``ATEN_COLUMNS``; the index is the group position in ascending
        ``(aten_op_name, kernel_sequence)`` order (as HTA), not renumbered.
    """
    sort_by = list(sort_by) if sort_by else ["occurrence_count"]
    if records.empty:
        return empty_aten_frame()
    keys = ["thread_id", "aten_op_name", "aten_op_start"]
    inst_code = records.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    first = ~pd.Series(inst_code).duplicated().to_numpy()
    seq = records["kernel_name"].astype(str).groupby(inst_code, sort=False).agg(" -> ".join)
    inst = pd.DataFrame(
        {
            "aten_op_name": records["aten_op_name"].to_numpy()[first],
            "kernel_sequence": seq.reindex(inst_code[first]).to_numpy(),
            "first_launch_delay": records["aten_op_delay"].to_numpy(dtype=np.float64)[first],
            "first_runtime_delay": records["runtime_delay"].to_numpy(dtype=np.float64)[first],
        }
    )
    out = (
        inst.groupby(["aten_op_name", "kernel_sequence"], sort=True)
        .agg(
            occurrence_count=("first_runtime_delay", "count"),
            avg_aten_op_launch_delay=("first_launch_delay", "mean"),
            avg_runtime_delay=("first_runtime_delay", "mean"),
        )
        .reset_index()
    )
    out["occurrence_count"] = out["occurrence_count"].astype(np.int64)
    out = out.sort_values(sort_by, ascending=False, kind="stable")
    out["avg_runtime_delay"] = out["avg_runtime_delay"].round(3)
    out["avg_aten_op_launch_delay"] = out["avg_aten_op_launch_delay"].round(3)
    return out[ATEN_COLUMNS]
