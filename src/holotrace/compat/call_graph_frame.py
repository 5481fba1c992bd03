"""HTA's call-graph inputs taken from a DataFrame (``CallGraph.from_dataframe``, ``CallStackGraph(df, ...)``).

The rows are nested by holotrace's one call-stack builder (:func:`holotrace.analysis.callstack.build_call_graph`)
under HTA's rules: nodes are the ``stream == -1`` rows of threads that are not GPU streams; a GPU row with
``stream > 0`` hangs under the row its ``index_correlation`` names (or, given an HTA ``cpu_gpu_correlation``
frame, its ``cpu_index``); the backward thread is linked under the main thread's ``## backward ##`` (or
``ProfilerStep#``) rows as HTA links it.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import (
    CallGraph,
    _backward_parents,
    _thread_codes,
    build_call_graph,
    thread_device_is_gpu,
)
from holotrace.analysis.callstack_columns import stack_columns
from holotrace.model import classify

__all__ = ["frame_arrays", "frame_graph"]


def frame_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """The columns the graph reads, as numpy arrays (``pid``/``tid`` may be text in HTA's frames)."""
    out = {c: df[c].to_numpy() for c in ("index", "pid", "tid", "name", "stream")}
    out["ts"] = df["ts"].to_numpy().astype(np.float64)
    out["dur"] = pd.to_numeric(df["dur"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    out["index"] = out["index"].astype(np.int64)
    out["stream"] = out["stream"].astype(np.int64)
    tid = pd.to_numeric(df["tid"], errors="coerce").fillna(0).to_numpy()
    out["tid_num"] = tid.astype(np.int64)
    return out


def _names(symbol_table, ids: np.ndarray, rule) -> np.ndarray:
    """Rows whose name (an id into ``symbol_table``, or text) satisfies ``rule``."""
    if ids.dtype.kind in "iu":
        table = symbol_table.get_sym_table() if symbol_table is not None else []
        good = np.fromiter((bool(rule(s)) for s in table), bool, len(table))
        ok = (ids >= 0) & (ids < len(table))
        hit = np.zeros(len(ids), dtype=bool)
        hit[ok] = good[ids[ok]]
        return hit
    uniq, inv = np.unique(ids.astype(str), return_inverse=True)
    return np.fromiter((bool(rule(s)) for s in uniq), bool, len(uniq))[inv.reshape(-1)]


def frame_graph(
    df: pd.DataFrame,
    symbol_table=None,
    *,
    correlation: Optional[pd.DataFrame] = None,
    link_backward: bool = True,
    hta_quirks: bool = True,
) -> tuple[CallGraph, dict[str, np.ndarray], dict]:
    """The call graph of the rows of ``df`` (one rank), HTA's stack columns, and the arrays read.

    ``correlation``: HTA's ``cpu_gpu_correlation`` (``gpu_index``, ``cpu_index``); default: each
    ``stream > 0`` row's ``index_correlation``.
    """
    a = frame_arrays(df)
    n = len(df)
    thread = _thread_codes(a["pid"], a["tid"])
    stream = a["stream"]
    pid_num = pd.to_numeric(df["pid"], errors="coerce").fillna(-1).to_numpy()
    gpu_thread = thread_device_is_gpu(thread, stream, pid_num == 0, a["tid_num"] == 0)
    is_node = (stream == -1) & ~gpu_thread[thread] if n else np.zeros(0, dtype=bool)
    pos = pd.Index(a["index"])
    launcher = np.full(n, -1, dtype=np.int64)
    if correlation is not None and len(correlation):
        g = pos.get_indexer(correlation["gpu_index"].to_numpy())
        c = pos.get_indexer(correlation["cpu_index"].to_numpy())
        ok = (g >= 0) & (c >= 0)
        launcher[g[ok]] = c[ok]
    elif "index_correlation" in df.columns:
        corr = df["index_correlation"].to_numpy().astype(np.int64)
        gpu = (stream > 0) & (corr > 0)
        launcher[gpu] = pos.get_indexer(corr[gpu])
    backward = None
    if link_backward and n:
        cpu_thread = ~gpu_thread
        flags = [
            _names(symbol_table, a["name"], rule)
            for rule in (classify.is_step_range_name, classify.is_autograd_name, classify.is_backward_annotation)
        ]
        backward = _backward_parents(thread, cpu_thread, *flags, stream == -1)
    g = build_call_graph(
        thread, a["ts"], a["dur"], a["index"], is_node, launcher, backward_link=backward, hta_quirks=hta_quirks
    )
    rv = {"ts": a["ts"], "dur": a["dur"], "index": a["index"], "tid": a["tid_num"]}
    return g, stack_columns(g, rv), a
