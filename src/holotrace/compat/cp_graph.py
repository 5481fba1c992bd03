"""HTA's ``CPGraph`` (a ``networkx.DiGraph``) as a view of holotrace's array critical path.

The graph, path and breakdown are computed by :mod:`holotrace.analysis.critical_path` on arrays; this class
only presents them with HTA's public surface (``summary()``, ``get_critical_path_breakdown()``,
``critical_path_nodes``, ``critical_path_events_set``, ``critical_path_edges_set``, ``node_list``, the
event ↔ node/edge lookups, ``save`` / :func:`restore_cpgraph`). The networkx structure and the per-node objects
are built when this object is created, i.e. only when the facade is asked for a graph. Needs ``networkx``
(``pip install 'holotrace[hta]'``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis import critical_path as _cp
from holotrace.analysis.critical_path.graph import EDGE_TYPE_NAMES
from holotrace.errors import HolotraceError

try:
    import networkx as nx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise HolotraceError(
        "CPGraph needs networkx, which is not installed",
        fix="pip install 'holotrace[hta]' (or use holotrace.analysis.critical_path, which needs no networkx)",
    ) from exc

log = logging.getLogger("holotrace.compat")

__all__ = ["CPGraph", "CPNode", "CPEdge", "CPEdgeType", "BoundType", "restore_cpgraph"]


class CPEdgeType(Enum):
    OPERATOR_KERNEL = "critical_path_operator"
    DEPENDENCY = "critical_path_dependency"
    KERNEL_LAUNCH_DELAY = "critical_path_kernel_launch_delay"
    KERNEL_KERNEL_DELAY = "critical_path_kernel_kernel_delay"
    SYNC_DEPENDENCY = "critical_path_sync_dependency"


_TYPES = [CPEdgeType(v) for v in EDGE_TYPE_NAMES]


class BoundType(Enum):
    CPU_BOUND = "cpu_bound"
    DATA_LOADING = "data_loading"
    GPU_COMPUTE_BOUND = "gpu_compute_bound"
    GPU_COMMUNICATION_BOUND = "gpu_communication_bound"
    GPU_KERNEL_KERNEL_OVERHEAD = "gpu_kernel_kernel_overhead"
    GPU_KERNEL_LAUNCH_OVERHEAD = "gpu_kernel_launch_overhead"


@dataclass
class CPNode:
    idx: int = -1
    ev_idx: int = -1
    ts: float = 0
    is_start: bool = False
    is_blocking: bool = False


@dataclass(frozen=True)
class CPEdge:
    begin: int
    end: int
    type: CPEdgeType
    weight: float = 0


_CLASSES = {"CPNode": CPNode, "CPEdge": CPEdge, "CPEdgeType": CPEdgeType}  # HTA's class names in saved files


def _lazy(descriptor, name: str):
    """networkx's resetting descriptor for ``name``, which first fills the graph from the arrays when read."""

    class Lazy(type(descriptor)):
        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            od = obj.__dict__
            if od.get("_pending"):
                od["_pending"] = False
                obj._populate()
            return od[name]

    return Lazy()


class CPGraph(nx.DiGraph):
    """HTA's critical-path graph object over a :class:`holotrace.analysis.critical_path.CriticalPath`.

    The networkx adjacency and the ``CPEdge`` objects are filled from the arrays on first use of the graph
    API (nodes, edges, networkx algorithms); the breakdown, summary and path members never need them."""

    _adj = _lazy(nx.DiGraph.__dict__["_adj"], "_adj")
    _succ = _adj
    _pred = _lazy(nx.DiGraph.__dict__["_pred"], "_pred")
    _node = _lazy(nx.Graph.__dict__["_node"], "_node")

    def __init__(self, t, t_full=None, rank: Optional[int] = None, G=None, data_load_events=None):
        """``CPGraph(t, t_full, rank, G=None, data_load_events=None)`` as in HTA: the graph of ``rank`` over the
        rows of ``t`` (a ``Trace``, e.g. clipped to an annotation; every row of its table is used) on the
        full trace ``t_full`` (a ``TraceAnalysis`` or its ``Trace``), under HTA's rules; the longest path is
        computed with it. ``CPGraph(critical_path, rank)`` wraps an already computed
        :class:`holotrace.analysis.critical_path.CriticalPath`. A saved graph is read by :func:`restore_cpgraph`
        (``t=None`` with ``G`` is HTA's internal restore path and is not offered)."""
        super().__init__()
        if isinstance(t, _cp.CriticalPath):
            cp, rank = t, (t_full if rank is None else rank)
        elif t is None:
            raise ValueError(
                "CPGraph(None, t_full, rank, G): restore a saved graph with restore_cpgraph(zip, t_full, rank) instead"
            )
        else:
            cp = _build(t, t_full if t_full is not None else t, int(rank if rank is not None else 0), data_load_events)
        self.cp = cp
        self.rank = rank
        self.data_load_events = data_load_events if data_load_events is not None else cp.data_load_events
        g = cp.graph
        self._index = cp.view["index"]
        self.critical_path_nodes: list[int] = cp.path_nodes.tolist()
        self.critical_path_events_set: set[int] = set(self._index[g.node_row[cp.path_nodes]].tolist())
        self.__dict__["_pending"] = True

    def _populate(self) -> None:
        g, cp = self.cp.graph, self.cp
        w = cp.graph_weight if cp.graph_weight is not None else g.weight
        self.add_edges_from(
            (s, d, {"weight": x, "object": e})
            for s, d, x, e in zip(g.src.tolist(), g.dst.tolist(), _nums(w), self._edge_objs)
        )

    @cached_property
    def _edge_objs(self) -> list[CPEdge]:
        g = self.cp.graph
        return [
            CPEdge(s, d, _TYPES[t], o)
            for s, d, t, o in zip(g.src.tolist(), g.dst.tolist(), g.type.tolist(), _nums(g.weight))
        ]

    @cached_property
    def critical_path_edges_set(self) -> set[CPEdge]:
        g, e = self.cp.graph, self.cp.path_edges
        if "_edge_objs" in self.__dict__:
            return {self._edge_objs[i] for i in e.tolist()}
        return {
            CPEdge(s, d, _TYPES[t], o)
            for s, d, t, o in zip(g.src[e].tolist(), g.dst[e].tolist(), g.type[e].tolist(), _nums(g.weight[e]))
        }

    # ------------------------------------------------------------------ HTA's members
    @cached_property
    def node_list(self) -> list[CPNode]:
        g = self.cp.graph
        ev = self._index[g.node_row].tolist()
        return [
            CPNode(i, e, _num(t), s, b)
            for i, (e, t, s, b) in enumerate(
                zip(ev, g.node_time.tolist(), g.node_start.tolist(), g.node_blocking.tolist())
            )
        ]

    @cached_property
    def event_to_start_node_map(self) -> dict[int, int]:
        g = self.cp.graph
        rows = np.flatnonzero(g.start_node >= 0)
        return dict(zip(self._index[rows].tolist(), g.start_node[rows].tolist()))

    @cached_property
    def event_to_end_node_map(self) -> dict[int, int]:
        g = self.cp.graph
        rows = np.flatnonzero(g.end_node >= 0)
        return dict(zip(self._index[rows].tolist(), g.end_node[rows].tolist()))

    @cached_property
    def edge_to_event_map(self) -> dict[tuple[int, int], int]:
        g = self.cp.graph
        k = np.flatnonzero(g.attr != -1)
        ev = np.where(g.attr[k] >= 0, self._index[np.clip(g.attr[k], 0, None)], -1)
        return dict(zip(zip(g.src[k].tolist(), g.dst[k].tolist()), ev.tolist()))

    @cached_property
    def _event_to_attributed_edges_map(self) -> dict[int, list[CPEdge]]:
        out: dict[int, list[CPEdge]] = {}
        for (u, v), ev in self.edge_to_event_map.items():
            out.setdefault(ev, []).append(self.edges[u, v]["object"])
        return out

    def get_nodes_for_event(self, ev_id: int) -> tuple[Optional[CPNode], Optional[CPNode]]:
        s = self.event_to_start_node_map.get(ev_id, -1)
        e = self.event_to_end_node_map.get(ev_id, -1)
        return (self.node_list[s] if s >= 0 else None, self.node_list[e] if e >= 0 else None)

    def get_events_for_edge(self, edge: CPEdge) -> tuple[int, int]:
        return int(self.node_list[edge.begin].ev_idx), int(self.node_list[edge.end].ev_idx)

    def get_event_attribution_for_edge(self, edge: CPEdge) -> Optional[int]:
        return self.edge_to_event_map.get((edge.begin, edge.end))

    def get_edges_attributed_to_event(self, ev_idx: int) -> list[CPEdge]:
        return self._event_to_attributed_edges_map.get(ev_idx, [])

    def critical_path(self) -> bool:
        """Whether the graph has a critical path (computed when the graph was built)."""
        return bool(self.cp.success)

    def get_critical_path_breakdown(self) -> Optional[pd.DataFrame]:
        """One row per critical-path edge, in path order (HTA: set order)."""
        df = _cp.breakdown(self.cp)
        return None if df is None else df.drop(columns=["ts", "event_dur"])

    def summary(self) -> pd.Series:
        """Percent of the path per ``bound_by`` class; the header line goes to the log, not stdout."""
        if not self.cp.success:
            raise AssertionError("Critical path breakdown is required for summary")
        log.info("Critical Path broken down by boundedness = (in % of duration)")
        return _cp.summary(self.cp)

    def show_critical_path(self) -> None:
        for n in self.critical_path_nodes:
            log.info("Critical %s", self.node_list[n])

    # ------------------------------------------------------------------ save / restore
    def save(self, out_dir: str) -> str:
        """Write the graph as HTA does: ``out_dir/`` with ``trace_data.csv``, ``cp_graph.pkl`` and ``cp_data.pkl``
        (readable by HTA's ``restore_cpgraph``) plus holotrace's arrays, zipped as ``<out_dir>.zip``; returns
        that path."""
        from holotrace.compat import cp_graph_files

        return cp_graph_files.write(self, out_dir, _CLASSES)


def restore_cpgraph(zip_filename: str, t_full, rank: int) -> CPGraph:
    """A :class:`CPGraph` from a zip written by :meth:`CPGraph.save` or by HTA's ``CPGraph.save``, on the trace
    it was built from (a ``TraceAnalysis`` or its ``Trace``)."""
    from holotrace.compat import cp_graph_files

    view = _view_of(t_full)
    cp, saved = cp_graph_files.read(zip_filename, view, rank, _CLASSES)
    if int(saved) != int(rank):
        raise ValueError(f"{zip_filename}: saved for rank {saved}, not rank {rank}; pass rank={saved}")
    return CPGraph(cp, rank)


def _build(t, t_full, rank: int, data_load_events) -> _cp.CriticalPath:
    """HTA's constructor: the graph of ``rank`` over every row of ``t``'s table (HTA's constructor does not
    clip: ``critical_path_analysis`` clips ``t`` first), on ``t_full``'s view."""
    from holotrace.analysis.critical_path.graph import build_graph, window
    from holotrace.model.classify import HTA

    view = _view_of(t_full)
    rv = view[rank]
    ev = t.get_trace(rank)["index"].to_numpy()
    rows = pd.Index(rv["index"]).get_indexer(ev)
    rows = np.unique(rows[rows >= 0])
    ts = rv["ts"][rows]
    win = (float(ts.min()), float(ts.max())) if len(rows) else window(rv, view.strings, "", None)
    dle = list(data_load_events) if data_load_events else None
    g = build_graph(view, rank, rows, win, rules=HTA, data_load_events=dle)
    return _cp.solve(_cp.CriticalPath(g, rv, view.strings, HTA, view.unit_ns, dle))


def _view_of(t):
    """HTA's view of a ``TraceAnalysis``, a ``Trace`` or a view."""
    view = getattr(t, "view", None)
    if view is None and hasattr(t, "views"):
        return t
    if view is None:
        raise ValueError("pass the TraceAnalysis (or its Trace) the graph was built from")
    return view


def _num(x: float):
    """An integral float as int (HTA's weights and times are ints on integer-µs traces)."""
    return int(x) if float(x).is_integer() else float(x)


def _nums(a: np.ndarray) -> list:
    """:func:`_num` over an array (one conversion when every value is integral)."""
    a = np.asarray(a, dtype=np.float64)
    if np.array_equal(a, np.rint(a)):
        return a.astype(np.int64).tolist()
    return [_num(x) for x in a.tolist()]
