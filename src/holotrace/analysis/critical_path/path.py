"""Critical path of a rank's step: the longest weighted path through the graph of
:mod:`holotrace.analysis.critical_path.graph`, its breakdown by what bounds it (spec 25 §4-5).

Native API::

    cp = critical_path(job, rank=0, annotation="ProfilerStep", instance=1)
    cp.success, cp.length, breakdown(cp), summary(cp)

The longest path reproduces ``networkx.dag_longest_path`` (ties: first predecessor in edge insertion order,
last node = first maximum in networkx's topological order), so HTA's path is found, not only its length; it is
computed by chain scans in numpy (:mod:`holotrace.analysis.critical_path.longest`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.analysis.critical_path.graph import (
    EDGE_TYPE_NAMES,
    EdgeType,
    Graph,
    build_graph,
    clip,
    window,
)
from holotrace.analysis.critical_path.longest import dag_longest_path
from holotrace.model import classify
from holotrace.model.classify import NATIVE, KernelType, RuleSet
from holotrace.model.view import job_view
from holotrace.table import Table
from holotrace.text import hta_short_names as shorten_names

log = logging.getLogger("holotrace.critical_path")

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CriticalPath", "critical_path", "breakdown", "summary", "longest_path", "solve", "BOUND_CLASSES"]

BOUND_CLASSES = (
    "cpu_bound",
    "data_loading",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
)


@dataclass
class CriticalPath:
    """One rank's critical-path graph and longest path (arrays)."""

    graph: Graph
    view: object = field(repr=False)
    strings: object = field(repr=False)
    rules: RuleSet = NATIVE
    unit_ns: int = 1
    data_load_events: Optional[list] = None
    success: bool = False
    graph_weight: Optional[np.ndarray] = None  # weights as used for the path (≤ -1 zeroed)
    path_nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    path_edges: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    zeroed_edges: int = 0  # edges of weight <= -1 set to 0 for the path (clock skew between CPU and GPU)
    zeroed_on_path: int = 0  # of those, edges on the path (the only ones that can change its length)

    @property
    def length(self) -> float:
        """Sum of the path's edge weights, in the view's unit."""
        return float(self.graph_weight[self.path_edges].sum()) if self.success else 0.0


def critical_path(
    source,
    *,
    rank: int = 0,
    annotation: str = "ProfilerStep",
    instance=None,
    rules: Optional[RuleSet] = None,
    data_load_events: Optional[Sequence[str]] = None,
) -> CriticalPath:
    """Graph and longest path of ``rank`` in the window of ``annotation`` instance(s) (``""``: whole rank).

    Under holotrace's rules instances are the CPU events containing ``annotation`` ordered by start; under
    HTA's table rules they are numbered in HTA's row order (GPU annotation copies included).
    """
    rules = rules or getattr(source, "rules", NATIVE)
    view = job_view(source, rules, ranks=[rank])
    rv = view[rank]
    win = window(rv, view.strings, annotation, instance, time_ordered=not rules.hta_table)
    rows = clip(rv, view.strings, *win)
    g = build_graph(view, rank, rows, win, rules=rules, data_load_events=data_load_events)
    return solve(
        CriticalPath(g, rv, view.strings, rules, view.unit_ns, list(data_load_events) if data_load_events else None)
    )


def solve(cp: CriticalPath) -> CriticalPath:
    """Fill ``cp``'s longest path; the zeroed negative weights are counted on ``cp`` (commands show them with
    the path) and logged once: at info level when one is on the path (the path's length then differs from the
    graph as built), else at debug level."""
    cp.success, cp.graph_weight, cp.path_nodes, cp.path_edges = longest_path(cp.graph, cp.view)
    neg = cp.graph.weight <= -1
    cp.zeroed_edges = int(neg.sum())
    if cp.zeroed_edges:
        cp.zeroed_on_path = int(neg[cp.path_edges].sum()) if cp.success else 0
        level = logging.INFO if cp.zeroed_on_path else logging.DEBUG
        log.log(
            level,
            "critical path of rank %d: %d negative edge weight(s) set to 0 (%d on the path)",
            cp.graph.rank,
            cp.zeroed_edges,
            cp.zeroed_on_path,
        )
    return cp


# --------------------------------------------------------------------------- longest path (§4)
def longest_path(g: Graph, view) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """``(success, graph weights, path nodes, path edge ids)`` with networkx's tie rules; weights ``<= -1`` are
    zeroed (silently: :func:`solve` counts and reports them)."""
    w = g.weight.copy()
    empty = np.zeros(0, dtype=np.int64)
    strict = os.environ.get("CRITICAL_PATH_STRICT_NEGATIVE_WEIGHT_CHECKS", "0") == "1"
    neg = w <= -1
    if strict and (w < -1).any():
        log.error("critical path: %d edge(s) with negative weight below -1", int((w < -1).sum()))
        return False, w, empty, empty
    w[neg] = 0.0
    sync = g.type == EdgeType.SYNC_DEPENDENCY
    if sync.any():
        s_src = view["stream"][g.node_row[g.src[sync]]]
        s_dst = view["stream"][g.node_row[g.dst[sync]]]
        if ((s_src != -1) & (s_src == s_dst)).any():
            log.error("critical path: a sync edge joins two operations of the same stream; graph not valid")
            return False, w, empty, empty
    if not len(g.src):
        return False, w, empty, empty
    res = dag_longest_path(g.src, g.dst, w)
    if res is None:
        log.error("critical path: the graph has a cycle")
        return False, w, empty, empty
    nodes = res
    # edge id of each consecutive pair
    n_nodes = len(g.node_row)
    key = g.src * n_nodes + g.dst
    srt = np.argsort(key)
    want = nodes[:-1] * n_nodes + nodes[1:]
    eids = srt[np.searchsorted(key[srt], want)]
    return True, w, nodes, eids


# --------------------------------------------------------------------------- breakdown and summary (§5)
def _bound_by(
    cp: CriticalPath, etype: np.ndarray, rows: np.ndarray, inv: np.ndarray, short_u: np.ndarray, full_u: np.ndarray
) -> np.ndarray:
    """Class per path edge; names are tested once per distinct name (``inv``: each edge's position in the
    distinct ``short_u``/``full_u``)."""
    out = np.full(len(etype), "", dtype=object)
    out[etype == EdgeType.KERNEL_KERNEL_DELAY] = "gpu_kernel_kernel_overhead"
    out[etype == EdgeType.KERNEL_LAUNCH_DELAY] = "gpu_kernel_launch_overhead"
    op = np.flatnonzero((etype == EdgeType.OPERATOR_KERNEL) & (rows >= 0))
    if not len(op):
        return out
    stream = cp.view["stream"][rows[op]]
    quirks = cp.rules.hta_quirks
    pats = cp.data_load_events or []
    names_u = short_u if quirks else full_u
    if cp.rules.hta_table:  # HTA's tables: its name rule (on short names with its quirks)
        comm_u = np.array(
            [classify.kernel_type_of_name(str(x), hta_compat=quirks) == KernelType.COMMUNICATION for x in names_u],
            dtype=bool,
        )
        comm = comm_u[inv[op]]
    else:  # holotrace's view: its kernel types (the rule table, by name and by the launching collective)
        comm = cp.view["kernel_type"][rows[op]] == int(KernelType.COMMUNICATION)
    if pats:
        dl = np.array([classify.is_data_loading(str(x), pats, regex=quirks) for x in names_u], dtype=bool)[inv[op]]
    else:
        dl = np.zeros(len(op), dtype=bool)
    cpu = stream < 0
    out[op] = np.where(
        cpu, np.where(dl, "data_loading", "cpu_bound"), np.where(comm, "gpu_communication_bound", "gpu_compute_bound")
    )
    return out


def _edges(cp: CriticalPath, short: bool = True):
    """The path's edges with what :func:`breakdown` and :func:`bound_table` read of them: edge ids, attributed
    rows (``ok``: a row; ``r``: clipped to one), each edge's position in the distinct short names, those names
    (None unless ``short`` or HTA's rules need them), edge types, ``bound_by`` and ``duration``."""
    g, v = cp.graph, cp.view
    e = cp.path_edges
    rows = g.attr[e]
    ok = rows >= 0
    r = np.clip(rows, 0, None)
    # names: decoded and shortened once per distinct id
    ids_u, inv = np.unique(np.where(ok, v["name"][r], -1), return_inverse=True)
    inv = inv.reshape(-1)
    full_u = cp.strings.decode(ids_u)
    short_u = shorten_names(full_u) if short or cp.rules.hta_quirks or cp.rules.hta_table else None
    etype = g.type[e]
    bound = _bound_by(cp, etype, rows, inv, short_u, full_u)
    dur = g.weight[e] if cp.rules.hta_quirks else cp.graph_weight[e]
    return e, rows, ok, r, inv, short_u, etype, bound, dur


def bound_table(cp: CriticalPath) -> Optional[Table]:
    """``bound_by`` and ``duration`` of :func:`breakdown` (one row per critical-path edge, in path order) as a
    :class:`~holotrace.table.Table`, without pandas; None when there is no path."""
    if not cp.success:
        return None
    *_, bound, dur = _edges(cp, short=False)
    return Table({"bound_by": bound, "duration": dur.astype(np.float64)})


def breakdown(cp: CriticalPath) -> Optional[pd.DataFrame]:
    """One row per critical-path edge, in path order: ``event_idx, duration, type, s_name, cat, pid, tid, stream,
    index, bound_by`` (HTA's columns; ``cat`` as text) plus ``ts``/``event_dur`` of the attributed event.
    ``duration`` is the edge's weight as built (HTA keeps negative weights here; holotrace's rules use the path's
    weight). None when there is no path."""
    import pandas as pd

    if not cp.success:
        return None
    v = cp.view
    e, rows, ok, r, inv, short_u, etype, bound, dur = _edges(cp)
    idx = np.where(ok, v["index"][r].astype(np.float64), np.where(rows == -2, -1.0, np.nan))
    cat_u, cat_inv = np.unique(np.where(ok, v["cat"][r], -1), return_inverse=True)

    def col(a, dtype=object):
        out = np.full(len(e), np.nan, dtype=object if dtype is object else np.float64)
        out[ok] = a[ok]
        return out

    return pd.DataFrame(
        {
            "event_idx": idx,
            "duration": dur.astype(np.float64),
            "type": _text(EDGE_TYPE_NAMES, etype),
            "s_name": _text(short_u, inv, ok),
            "cat": _text(cp.strings.decode(cat_u), cat_inv.reshape(-1), ok),
            "pid": col(v["pid"][r].astype(object)),
            "tid": col(v["tid"][r].astype(object)),
            "stream": col(v["stream"][r].astype(np.float64), float),
            "index": idx,
            "bound_by": _text(*_codes(bound)),
            "ts": col(v["ts"][r].astype(np.float64), float),
            "event_dur": col(v["dur"][r].astype(np.float64), float),
        }
    )


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u, inv = np.unique(values.astype(object), return_inverse=True)
    return u, inv.reshape(-1)


def _text(uniq, codes: np.ndarray, ok: Optional[np.ndarray] = None) -> pd.Series:
    """A text column (pandas' default string dtype) of ``uniq[codes]``, missing where ``ok`` is False: each
    distinct string is encoded once (a take on an Arrow array, not one conversion per row)."""
    import pandas as pd

    dtype = pd.Series(["x"]).dtype  # what pandas makes of text: ``str`` (pandas 3) or object
    if dtype == object or getattr(dtype, "storage", None) != "pyarrow":  # noqa: E721  (a dtype, not a type)
        out = np.asarray(uniq, dtype=object)[codes]
        if ok is not None:
            out = np.where(ok, out, np.nan)
        return pd.Series(out, dtype=dtype)
    import pyarrow as pa

    mask = None if ok is None else ~ok
    arr = pa.array([str(x) for x in uniq], type=pa.string()).take(
        pa.array(np.asarray(codes, dtype=np.int64), mask=mask)
    )
    return pd.Series(pd.array(arr, dtype=dtype), copy=False)


def summary(cp: CriticalPath) -> pd.Series:
    """Percent of the path's total weight per ``bound_by`` class (HTA's ``summary()``)."""
    df = breakdown(cp)
    if df is None:
        raise ValueError("no critical path: the graph was not valid (see the logged errors)")
    return df.groupby("bound_by").duration.sum() / df.duration.sum() * 100
