"""ATen operators, the kernels they launch, and the delays before the first one (spec 23 §2).

:func:`aten_op_kernels` is the analysis, over a job view. For every kernel launch call (under the rule
set: :func:`holotrace.model.classify.is_aten_launch`), the enclosing ATen operator is the ``aten::``
event (any category) that contains the call and starts latest; ties go to the first in the view's row
order. Outside HTA's quirks the operator must be on the call's thread. The call's kernel is the one
stream-bearing event linked to it (``index_correlation``); a call with none or several is skipped and
counted in a warning (HTA raises). Launches are grouped into operator *instances* ``(thread, op name,
op start)``; an instance's kernel sequence is the names of its kernels in launch order, its delays those
of its first launch: ``aten_op_delay = launch.ts - op.ts`` and ``runtime_delay = kernel.ts -
launch.ts``. Instances are aggregated per ``(op, sequence)``. Under HTA's quirks each rank's frame also
holds the instances of the ranks before it (HTA never resets its record list).

The enclosing-operator search is vectorised: operators sorted by ``(thread, ts)``, a sparse table of
running maximum ends, and binary lifting to find, for every launch, the latest-starting operator that
still covers it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.model.classify import RuleSet, is_aten_launch, is_aten_op
from holotrace.model.view import resolve

__all__ = ["ATEN_COLUMNS", "aten_op_kernels", "empty_aten_frame", "enclosing_interval"]

log = logging.getLogger(__name__)

ATEN_COLUMNS = ["aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"]


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
    Times are compared in their own dtype (integer ns stay exact).

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
    ts_s, end_s, th_s = op_ts[order], op_end[order], op_thread[order]
    # composite (thread, time) key via a common dense rank of times
    allt = np.concatenate([ts_s, q_ts])
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
    need = q_end
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


def aten_op_kernels(
    source,
    *,
    rules: Optional[RuleSet] = None,
    ranks: Optional[Sequence[int]] = None,
    sort_by: Optional[Sequence[str]] = None,
) -> dict[int, pd.DataFrame]:
    """Per ATen operator and kernel sequence: occurrences and mean delays (µs), per rank.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job). ``hta_quirks``: operator
            and launch matched on any thread, HTA's launch names only, records carried over ranks.
        ranks: ranks to analyse, in this order (default: all, ascending).
        sort_by: columns to sort by, all descending (default ``["occurrence_count"]``); ties keep
            ``(aten_op_name, kernel_sequence)`` ascending.

    Returns:
        ``{rank: frame}`` with ``ATEN_COLUMNS``: ``avg_aten_op_launch_delay`` (operator start → first
        launch call) and ``avg_runtime_delay`` (that call's start → its kernel's start), µs rounded to 3
        decimals. The index is the group position in ascending ``(aten_op_name, kernel_sequence)``
        order (as HTA), not renumbered. A rank without records gets an empty frame.
    """
    view = resolve(source, rules)
    rules = view.rules
    n_str = len(view.strings)
    op_flag = np.zeros(n_str + 1, dtype=bool)  # one flag per string, and False for id -1
    op_flag[view.name_ids(is_aten_op)] = True
    launch_flag = np.zeros(n_str + 1, dtype=bool)
    launch_flag[view.name_ids(lambda s: is_aten_launch(s, rules))] = True
    out: dict[int, pd.DataFrame] = {}
    carried: list[dict[str, np.ndarray]] = []
    for rank in view.select(ranks):
        rec, skipped = _records(view[rank], op_flag, launch_flag, same_thread=not rules.hta_quirks)
        if skipped:
            log.warning(
                "rank %s: %d launch call(s) inside an ATen op without exactly one GPU event were skipped", rank, skipped
            )
        if rules.hta_quirks:  # HTA never resets its record list: later ranks also hold the earlier ones
            carried.append(rec)
            rec = {k: np.concatenate([c[k] for c in carried]) for k in rec}
        out[rank] = _aggregate(rec, view, sort_by)
    return out


def _records(v, op_flag: np.ndarray, launch_flag: np.ndarray, same_thread: bool) -> tuple[dict, int]:
    """One record per launch call inside an operator with exactly one GPU event, in row order; and the
    number of launch calls inside an operator skipped for having none or several."""
    name = v["name"]
    ops, launches = np.flatnonzero(op_flag[name]), np.flatnonzero(launch_flag[name])
    ts, end = v.bounds()
    if same_thread and len(ops) and len(launches):
        sel = np.concatenate([ops, launches])
        codes = pd.MultiIndex.from_arrays([v["pid"][sel], v["tid"][sel]]).factorize()[0].astype(np.int64)
        th_op, th_q = codes[: len(ops)], codes[len(ops) :]
    else:
        th_op, th_q = np.zeros(len(ops), dtype=np.int64), np.zeros(len(launches), dtype=np.int64)
    enc = enclosing_interval(th_op, ts[ops], end[ops], th_q, ts[launches], end[launches])
    inside = enc >= 0
    launches, op_rows = launches[inside], ops[enc[inside]]
    # the GPU event: the stream-bearing row whose index_correlation is the call's index
    icorr = v["index_correlation"]
    gpu = np.flatnonzero((v["stream"] != -1) & (icorr > 0))
    srt = np.argsort(icorr[gpu], kind="stable")
    keys = icorr[gpu][srt]
    want = v["index"][launches]
    lo = np.searchsorted(keys, want, side="left")
    single = (np.searchsorted(keys, want, side="right") - lo) == 1
    launches, op_rows, kern = launches[single], op_rows[single], gpu[srt[lo[single]]]
    rec = {
        "thread": v["tid"][op_rows],
        "op": name[op_rows],
        "op_start": ts[op_rows],
        "op_delay": ts[launches] - ts[op_rows],
        "runtime_delay": ts[kern] - ts[launches],
        "kernel": name[kern],
    }
    return rec, int((~single).sum())


def _aggregate(rec: dict, view, sort_by: Optional[Sequence[str]]) -> pd.DataFrame:
    """Records → operator instances → ``(op, kernel sequence)`` rows (see :func:`aten_op_kernels`)."""
    n = len(rec["op"])
    if n == 0:
        return empty_aten_frame()
    # instances: records sorted by (thread, op, start), record order kept inside each
    order = np.lexsort((np.arange(n), rec["op_start"], rec["op"], rec["thread"]))
    key = [rec[k][order] for k in ("thread", "op", "op_start")]
    new = np.ones(n, dtype=bool)
    new[1:] = (key[0][1:] != key[0][:-1]) | (key[1][1:] != key[1][:-1]) | (key[2][1:] != key[2][:-1])
    first = order[new]  # the first record of each instance
    bounds = np.append(np.flatnonzero(new), n).tolist()
    kernels = rec["kernel"][order].tolist()
    seq_ids: dict[tuple, int] = {}
    seq = np.fromiter(
        (seq_ids.setdefault(tuple(kernels[a:b]), len(seq_ids)) for a, b in zip(bounds[:-1], bounds[1:])),
        dtype=np.int64,
        count=len(first),
    )
    # groups: (op, sequence) of the instances
    op = rec["op"][first]
    groups, inv = np.unique(op * len(seq_ids) + seq, return_inverse=True)
    inv = inv.reshape(-1)
    count = np.bincount(inv, minlength=len(groups))
    mean = lambda x: view.us(np.bincount(inv, weights=x.astype(np.float64), minlength=len(groups)) / count)  # noqa: E731
    names = view.names(groups // len(seq_ids))
    seqs = list(seq_ids)
    texts = [
        " -> ".join(view.names(np.asarray(seqs[i], dtype=np.int64)).tolist()) for i in (groups % len(seq_ids)).tolist()
    ]
    out = pd.DataFrame(
        {
            "aten_op_name": names,
            "kernel_sequence": np.asarray(texts, dtype=object),
            "occurrence_count": count.astype(np.int64),
            "avg_aten_op_launch_delay": mean(rec["op_delay"][first]),
            "avg_runtime_delay": mean(rec["runtime_delay"][first]),
        }
    )
    out = out.sort_values(["aten_op_name", "kernel_sequence"], kind="stable").reset_index(drop=True)  # HTA's index
    out = out.sort_values(list(sort_by) if sort_by else ["occurrence_count"], ascending=False, kind="stable")
    out["avg_aten_op_launch_delay"] = out["avg_aten_op_launch_delay"].round(3)
    out["avg_runtime_delay"] = out["avg_runtime_delay"].round(3)
    return out[ATEN_COLUMNS]
