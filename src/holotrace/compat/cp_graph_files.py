"""``CPGraph.save`` / ``restore_cpgraph`` in HTA's layout, readable by HTA and from HTA.

HTA writes ``<out_dir>/trace_data.csv`` (the graph's rows, index ``_index_``), ``<out_dir>/cp_graph.pkl``
(networkx node-link data; each edge's ``object`` is a ``CPEdge``) and ``<out_dir>/cp_data.pkl`` (its
``_CPGraphData``: node list, path, event ↔ node/edge maps), zipped as ``<out_dir>.zip`` with those paths.
:func:`write` writes the same three files, its pickles naming HTA's classes
(``hta.analyzers.critical_path_analysis``) so HTA's ``restore_cpgraph`` reads them (``name``/``cat`` are
written as text, which HTA's breakdown uses as is), plus holotrace's own
arrays (``graph.npz``, ``meta.json``) after them in the same folder. :func:`read` restores either: the arrays
when present, otherwise HTA's pickles, read by an unpickler that accepts HTA's four classes and plain data
only (no other code named in a file is run).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from dataclasses import dataclass

import numpy as np
import pandas as pd

from holotrace.analysis import critical_path as _cp
from holotrace.analysis.critical_path.graph import EDGE_TYPE_NAMES, Graph
from holotrace.atomic import write_bytes
from holotrace.compat.hta_table import hta_table
from holotrace.errors import HolotraceError
from holotrace.text import hta_short_names as shorten_names

__all__ = ["CPGraphData", "write", "read"]

HTA_MODULE = "hta.analyzers.critical_path_analysis"
_ARRAYS = (
    "rows",
    "node_row",
    "node_time",
    "node_start",
    "node_blocking",
    "start_node",
    "end_node",
    "src",
    "dst",
    "type",
    "weight",
    "attr",
)


@dataclass(frozen=True)
class CPGraphData:
    """HTA's ``_CPGraphData``: what ``cp_data.pkl`` holds."""

    node_list: list
    critical_path_nodes: list[int]
    critical_path_events_set: set[int]
    critical_path_edges_set: set
    event_to_start_node_map: dict[int, int]
    event_to_end_node_map: dict[int, int]
    edge_to_event_map: dict[tuple[int, int], int]


def _hta_names(classes: dict) -> dict:
    """``{holotrace class: HTA class name}`` from the caller's ``{"CPNode": cls, "CPEdge": ..., "CPEdgeType": ...}``."""
    return {**{cls: name for name, cls in classes.items()}, CPGraphData: "_CPGraphData"}


class _HtaPickler(pickle._Pickler):
    """Pickles holotrace's CPNode/CPEdge/CPEdgeType/CPGraphData under HTA's class names."""

    def __init__(self, f, names: dict):
        super().__init__(f, protocol=4)
        self._names = names

    def save_global(self, obj, name=None):
        hta = self._names.get(obj)
        if hta is None:
            return super().save_global(obj, name)
        self.save(HTA_MODULE)
        self.save(hta)
        self.write(pickle.STACK_GLOBAL)
        self.memoize(obj)


class _HtaUnpickler(pickle.Unpickler):
    """Reads HTA's pickles: its four classes map to holotrace's; only plain builtins are accepted otherwise."""

    _BUILTINS = {"set", "frozenset", "list", "dict", "tuple", "int", "float", "bool", "str", "complex"}

    def __init__(self, f, names: dict):
        super().__init__(f)
        self._by_name = {v: k for k, v in names.items()}

    def find_class(self, module, name):
        if module == HTA_MODULE and name in self._by_name:
            return self._by_name[name]
        if module == "builtins" and name in self._BUILTINS:
            return getattr(__import__("builtins"), name)
        if module in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray") and name in ("scalar", "dtype"):
            return np.dtype if name == "dtype" else _np_scalar  # numpy integers in HTA's maps
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a saved critical-path graph")


def _np_scalar(dtype, data=b""):
    """A numpy scalar from its pickled bytes, as a Python number."""
    return np.frombuffer(data, dtype=dtype, count=1)[0].item()


def write(graph, out_dir: str, classes: dict) -> str:
    """Save ``graph`` (a :class:`~holotrace.compat.cp_graph.CPGraph`) as HTA does; returns ``<out_dir>.zip``.
    ``classes``: the node, edge and edge-type classes, by HTA's names."""
    cp, g = graph.cp, graph.cp.graph
    out = out_dir.rstrip("/\\") or out_dir
    os.makedirs(os.path.expanduser(out), exist_ok=True)
    paths = {
        n: os.path.join(out, n) for n in ("trace_data.csv", "cp_graph.pkl", "cp_data.pkl", "graph.npz", "meta.json")
    }
    table = hta_table(cp.view, cp.strings, rows=g.rows)
    # names as text: HTA's reader decodes integer ids with its own symbol table, whose ids HTA assigns in set
    # order (they differ between processes); text columns it uses as they are
    table["name"], table["cat"] = table["s_name"], table["s_cat"]
    table["s_name"] = shorten_names(np.asarray(table["name"], dtype=object))
    _save(paths["trace_data.csv"], table.to_csv(index=True, index_label="_index_").encode("utf-8"))
    w = cp.graph_weight if cp.graph_weight is not None else g.weight
    edges = [
        {"weight": x, "object": e, "source": e.begin, "target": e.end} for e, x in zip(graph._edge_objs, _as_py(w))
    ]
    link = {
        "directed": True,
        "multigraph": False,
        "graph": {},
        "nodes": [{"id": i} for i in range(len(g.node_row))],
        "edges": edges,
        "links": edges,
    }
    data = CPGraphData(
        graph.node_list,
        graph.critical_path_nodes,
        graph.critical_path_events_set,
        graph.critical_path_edges_set,
        graph.event_to_start_node_map,
        graph.event_to_end_node_map,
        graph.edge_to_event_map,
    )
    for key, obj in (("cp_graph.pkl", link), ("cp_data.pkl", data)):
        buf = io.BytesIO()
        _HtaPickler(buf, _hta_names(classes)).dump(obj)
        _save(paths[key], buf.getvalue())
    arrays = {k: getattr(g, k) for k in _ARRAYS}
    arrays.update(graph_weight=cp.graph_weight, path_nodes=cp.path_nodes, path_edges=cp.path_edges)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    _save(paths["graph.npz"], buf.getvalue())
    meta = {
        "rank": graph.rank,
        "window": list(g.window),
        "rules": cp.rules.name,
        "success": bool(cp.success),
        "data_load_events": cp.data_load_events,
        "format": 2,
    }
    _save(paths["meta.json"], json.dumps(meta).encode("utf-8"))
    zip_path = f"{out}.zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in paths.values():  # HTA finds the folder from the first entry
            z.write(os.path.expanduser(p), arcname=p)
    _save(zip_path, buf.getvalue())
    return zip_path


def _save(path: str, data: bytes) -> None:
    """Each file whole or not at all: written beside itself and renamed (a full disk is one OutputError)."""
    write_bytes(os.path.expanduser(path), data)


def _as_py(a) -> list:
    a = np.asarray(a, dtype=np.float64)
    return a.astype(np.int64).tolist() if np.array_equal(a, np.rint(a)) else a.tolist()


def read(zip_filename: str, view, rank: int, classes: dict):
    """``(CriticalPath, saved rank)`` from a zip written by :func:`write` or by HTA's ``CPGraph.save``."""
    from holotrace.model import classify

    with zipfile.ZipFile(os.path.expanduser(zip_filename)) as z:
        names = {n.rsplit("/", 1)[-1]: n for n in z.namelist()}
        if "graph.npz" in names and "meta.json" in names:
            meta = json.loads(z.read(names["meta.json"]))
            arrays = dict(np.load(io.BytesIO(z.read(names["graph.npz"]))))
            return _from_arrays(meta, arrays, view, classify), int(meta["rank"])
        missing = {"trace_data.csv", "cp_graph.pkl", "cp_data.pkl"} - set(names)
        if missing:
            raise HolotraceError(
                f"{zip_filename}: not a saved critical-path graph (missing {sorted(missing)})",
                fix="pass a zip written by CPGraph.save (holotrace's or HTA's)",
            )
        link = _HtaUnpickler(io.BytesIO(z.read(names["cp_graph.pkl"])), _hta_names(classes)).load()
        data = _HtaUnpickler(io.BytesIO(z.read(names["cp_data.pkl"])), _hta_names(classes)).load()
        trace = pd.read_csv(io.BytesIO(z.read(names["trace_data.csv"])), usecols=["index", "ts"])
    return _from_hta(link, data, trace, view, rank, classify.HTA), rank


def _from_arrays(meta, arrays, view, classify):
    rules = {r.name: r for r in (classify.HTA, classify.HTA_FIXED, classify.NATIVE)}[meta["rules"]]
    rank = int(meta["rank"])
    g = Graph(rank, *(arrays[k] for k in _ARRAYS), tuple(meta["window"]))
    cp = _cp.CriticalPath(
        g,
        view[rank],
        view.strings,
        rules,
        view.unit_ns,
        meta["data_load_events"],
        bool(meta["success"]),
        arrays["graph_weight"],
        arrays["path_nodes"],
        arrays["path_edges"],
    )
    neg = g.weight <= -1
    cp.zeroed_edges, cp.zeroed_on_path = int(neg.sum()), int(neg[cp.path_edges].sum()) if cp.success else 0
    return cp


def _from_hta(link: dict, data, trace: pd.DataFrame, view, rank: int, rules):
    """The arrays of a graph HTA saved, on the rows of ``view[rank]`` (matched by event ``index``)."""
    rv = view[rank]
    pos = pd.Index(rv["index"])

    def rows_of(ev) -> np.ndarray:
        r = pos.get_indexer(np.asarray(ev, dtype=np.int64))
        if (r < 0).any():
            raise HolotraceError(
                f"the saved graph names events not in rank {rank} of this trace",
                fix="restore on the trace (and rank) the graph was built from",
            )
        return r

    nodes = sorted(data.node_list, key=lambda n: n.idx)
    node_row = rows_of([n.ev_idx for n in nodes]) if nodes else np.zeros(0, dtype=np.int64)
    start_node = np.full(rv.n, -1, dtype=np.int64)
    end_node = np.full(rv.n, -1, dtype=np.int64)
    for m, arr in ((data.event_to_start_node_map, start_node), (data.event_to_end_node_map, end_node)):
        if m:
            arr[rows_of(list(m))] = np.asarray(list(m.values()), dtype=np.int64)
    edges = link.get("edges", link.get("links", []))
    type_of = {name: i for i, name in enumerate(EDGE_TYPE_NAMES)}
    src = np.array([e["source"] for e in edges], dtype=np.int64)
    dst = np.array([e["target"] for e in edges], dtype=np.int64)
    typ = np.array([type_of[e["object"].type.value] for e in edges], dtype=np.int8)
    weight = np.array([e["object"].weight for e in edges], dtype=np.float64)
    used = np.array([e.get("weight", e["object"].weight) for e in edges], dtype=np.float64)
    attr = np.full(len(edges), -1, dtype=np.int64)
    where = {(int(s), int(d)): i for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist()))}
    for (s, d), ev in data.edge_to_event_map.items():
        i = where.get((int(s), int(d)))
        if i is not None:
            attr[i] = -2 if ev < 0 else int(rows_of([ev])[0])
    rows = np.sort(rows_of(trace["index"].to_numpy()))
    ts = trace["ts"].to_numpy()
    win = (float(ts.min()), float(ts.max())) if len(ts) else (0.0, 0.0)
    g = Graph(
        rank,
        rows,
        node_row,
        np.array([n.ts for n in nodes], dtype=np.float64),
        np.array([n.is_start for n in nodes], dtype=bool),
        np.array([n.is_blocking for n in nodes], dtype=bool),
        start_node,
        end_node,
        src,
        dst,
        typ,
        weight,
        attr,
        win,
    )
    path_nodes = np.asarray(data.critical_path_nodes, dtype=np.int64)
    path_edges = np.array([where[(int(a), int(b))] for a, b in zip(path_nodes[:-1], path_nodes[1:])], dtype=np.int64)
    graph_weight = np.where(used <= -1, 0.0, used)
    cp = _cp.CriticalPath(
        g, rv, view.strings, rules, view.unit_ns, None, bool(len(path_nodes)), graph_weight, path_nodes, path_edges
    )
    neg = weight <= -1
    cp.zeroed_edges, cp.zeroed_on_path = int(neg.sum()), int(neg[path_edges].sum()) if len(path_edges) else 0
    return cp
