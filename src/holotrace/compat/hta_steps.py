"""The steps of HTA's parser and call-stack builder as functions of frames (``hta.common.trace``,
``hta.common.trace_call_stack``), for code and tests that call them on frames of their own.

holotrace's loader does this work on its columns (``holotrace.model.link``, ``holotrace.analysis.callstack``);
each function here hands a frame's columns to that same code and writes the result as HTA does:

* :func:`transform_correlation_to_index` adds ``index_correlation`` (the partner's ``index``; ``0`` for a
  correlated row whose partner is absent, ``-1`` for an uncorrelated one) through ``link.correlate``;
* :func:`add_iteration` adds ``iteration`` (CPU rows: the ``ProfilerStep`` holding their start, through
  ``link.containing_step``; GPU rows: their launch's) and returns the steps;
* :func:`add_fwd_bwd_links` adds ``fwdbwd_index``/``fwdbwd`` from the ``fwdbwd`` flow events of a raw frame
  (HTA 0.6.1's parser calls it on its encoded frame, where it finds no flow and adds nothing; the loaded
  tables of both have no such columns);
* :func:`sort_events` / :func:`is_events_sorted` order open/close endpoint rows ``[index, dur, kind, ts]``
  by the one endpoint order of holotrace's call-stack builder. It is HTA's comparator wherever that is a
  consistent order; where it is not (a zero-length event exactly where one interval ends and the next begins)
  the zero-length event goes under the opening interval (docs/compatibility.md, Call graph).

Like HTA's, the three ``add``/``transform`` functions write their columns into the frame they are given.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import _endpoint_order
from holotrace.compat.filters import _gpu_mask
from holotrace.model import classify, link

__all__ = [
    "OPEN_END",
    "CLOSE_END",
    "transform_correlation_to_index",
    "add_iteration",
    "add_fwd_bwd_links",
    "sort_events",
    "is_events_sorted",
]

OPEN_END = -1  # the ``kind`` of an event's start in an endpoint row (HTA's constants)
CLOSE_END = 1


def _positions(df: pd.DataFrame, labels: np.ndarray) -> np.ndarray:
    """Row positions of index labels (−1 where absent)."""
    return pd.Index(df.index).get_indexer(labels)


def transform_correlation_to_index(df: pd.DataFrame, symbol_table) -> pd.DataFrame:
    """Add ``index_correlation`` to ``df`` (and return it): each correlated CPU row and GPU row (kernels,
    copies, sets, and ``Event Sync``/``Context Sync`` rows) gets its partner's ``index``."""
    if "correlation" not in df.columns:
        return df
    corr = df["correlation"].to_numpy(np.int64)
    gpu = _gpu_mask(df, symbol_table)
    if gpu is None:
        gpu = (df["stream"] >= 0).to_numpy() & (corr >= 0)
    has = corr != -1
    partner = link.correlate(corr, has & ~gpu, has & gpu)
    index = df["index"].to_numpy(np.int64) if "index" in df.columns else np.arange(len(df))
    out = np.where(partner >= 0, index[np.clip(partner, 0, None)], np.minimum(corr, 0))
    df["index_correlation"] = pd.to_numeric(pd.Series(out, index=df.index), downcast="integer")
    return df


def add_iteration(df: pd.DataFrame, symbol_table) -> pd.DataFrame:
    """Add ``iteration`` to ``df``; returns the ``ProfilerStep`` rows (``ts``, ``dur``, ``name``, ``s_name``: the
    step number, ``iter``: the step's name), as HTA's function does."""
    sym_index: dict = dict(getattr(symbol_table, "sym_index", {}) or {})
    names = {i: s for s, i in sym_index.items()}
    step_ids = [i for s, i in sym_index.items() if s.startswith("ProfilerStep")]
    steps = df.loc[df["name"].isin(step_ids), ["ts", "dur", "name"]].copy()
    steps["s_name"] = [classify.hta_profiler_step_number(names[i]) for i in steps["name"].tolist()]
    steps["iter"] = [names[i] for i in steps["name"].tolist()]
    s_ts = steps["ts"].to_numpy(np.int64)
    s_num = steps["s_name"].to_numpy(np.int64)
    ts = df["ts"].to_numpy(np.int64)
    stream = df["stream"].to_numpy(np.int64)
    it = df["iteration"].to_numpy(np.int64).copy() if "iteration" in df.columns else np.full(len(df), -1)
    cpu = stream < 0
    if "cpu_op" in sym_index:  # stream-carrying CPU ops (Triton) count as CPU rows
        cpu |= (stream == 0) & (df["cat"].to_numpy() == sym_index["cpu_op"])
    it[cpu] = link.containing_step(ts[cpu], s_ts, s_ts + steps["dur"].to_numpy(np.int64), s_num)
    gpu = stream > 0
    ic = df["index_correlation"].to_numpy(np.int64)[gpu]
    pos = _positions(df, ic)
    it[gpu] = np.where((ic > 0) & (pos >= 0), it[np.clip(pos, 0, None)], -1)
    df["iteration"] = pd.to_numeric(pd.Series(it, index=df.index), downcast="integer")
    return steps


def add_fwd_bwd_links(df: pd.DataFrame) -> None:
    """Link the CPU ops at the two ends of each ``fwdbwd`` flow (raw frame: text ``cat``, ``ph``, ``bp``,
    ``id``): ``fwdbwd_index`` = the other end's ``index``, ``fwdbwd`` = 0 forward, 1 backward, −1 neither.
    Where several ops start at a flow end's ``(ts, tid, pid)``, the one with the highest ``index`` is taken."""
    flows = df[df["cat"].eq("fwdbwd")] if "cat" in df.columns else df.iloc[0:0]
    if flows.empty:
        return
    df["fwdbwd_index"] = -1
    df["fwdbwd"] = -1
    key = ["ts", "tid", "pid"]
    ops = df.loc[df["cat"].eq("cpu_op"), [*key, "index"]]

    def ends(rows: pd.DataFrame) -> pd.Series:
        m = rows[[*key, "id"]].merge(ops, on=key, how="inner")
        return m.groupby("id")["index"].max()

    start = ends(flows[flows["ph"].eq("s")])
    end = ends(flows[flows["ph"].eq("f") & flows.get("bp", pd.Series(index=flows.index)).eq("e")])
    pairs = pd.concat([start.rename("start"), end.rename("end")], axis=1, join="inner")
    if pairs.empty:
        return
    lookup = link.position_lookup(df["index"].to_numpy(np.int64))
    s_pos, e_pos = lookup[pairs["start"].to_numpy(np.int64)], lookup[pairs["end"].to_numpy(np.int64)]
    col_i, col_k = df.columns.get_loc("fwdbwd_index"), df.columns.get_loc("fwdbwd")
    df.iloc[s_pos, col_i] = pairs["end"].to_numpy()
    df.iloc[e_pos, col_i] = pairs["start"].to_numpy()
    df.iloc[s_pos, col_k] = 0
    df.iloc[e_pos, col_k] = 1


def _endpoint_rank(a: np.ndarray) -> np.ndarray:
    """Rank of each endpoint row ``[index, dur, kind, ts]`` in holotrace's endpoint order (one thread)."""
    a = np.asarray(a)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    idx, dur, kind, t = (a[:, k].astype(np.int64) for k in range(4))
    is_open = kind == OPEN_END
    uniq, first, inv = np.unique(idx, return_index=True, return_inverse=True)
    ev_dur = np.maximum(dur[first], 0)
    ev_ts = np.where(is_open, t, t - np.maximum(dur, 0))[first]
    node, opened = _endpoint_order(np.zeros(len(uniq), dtype=np.int64), ev_ts, ev_dur, uniq)
    rank = np.empty(2 * len(uniq), dtype=np.int64)
    rank[2 * node + opened] = np.arange(len(node))
    return rank[2 * inv.reshape(-1) + is_open]


def sort_events(a: np.ndarray) -> None:
    """Sort endpoint rows ``[index, dur, kind, ts]`` in place (see the module)."""
    a[:] = np.asarray(a)[np.argsort(_endpoint_rank(a), kind="stable")]


def is_events_sorted(arr: np.ndarray) -> bool:
    """Whether endpoint rows are in the order :func:`sort_events` gives."""
    r = _endpoint_rank(arr)
    return bool(np.all(r[:-1] <= r[1:]))
