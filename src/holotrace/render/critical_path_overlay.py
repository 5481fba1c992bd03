"""The critical-path overlay trace (spec 25 §6): the rank's trace file with critical events flagged
(``args.critical = 1``) and flow arrows (``cat``/``name`` ``critical_path``) for the drawn edges, loadable in
Perfetto UI. Flow ids start above every id already in the file (HTA starts at 0 and may collide).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from holotrace.atomic import write_bytes
from holotrace.render.trace_file import gzip_bytes, read_trace_bytes

__all__ = ["write_overlay", "overlay_path"]


def overlay_path(
    cp, trace_path: str, output_dir: str, *, only_critical: bool = True, show_all_edges: bool = False
) -> str:
    """Write the overlay of a :class:`holotrace.analysis.critical_path.CriticalPath` (see module docstring):
    critical-path edges of the default types, or every graph edge with ``show_all_edges`` (except zero-weight
    launch edges unless ``CRITICAL_PATH_SHOW_ZERO_WEIGHT_LAUNCH_EDGE=1``); returns the file's path."""
    import os

    import numpy as np

    from holotrace.analysis.critical_path.graph import EDGE_TYPE_NAMES, EdgeType

    g = cp.graph
    if only_critical:
        show_all_edges = False
    on_path = np.zeros(len(g.src), dtype=bool)
    on_path[cp.path_edges] = True
    if show_all_edges:
        zero_launch = (g.type == EdgeType.KERNEL_LAUNCH_DELAY) & (g.weight == 0)
        if os.environ.get("CRITICAL_PATH_SHOW_ZERO_WEIGHT_LAUNCH_EDGE", "0") == "1":
            zero_launch[:] = False
        drawn = np.flatnonzero(~zero_launch)
    else:
        viz = (EdgeType.DEPENDENCY, EdgeType.KERNEL_LAUNCH_DELAY, EdgeType.SYNC_DEPENDENCY)  # HTA's default
        drawn = cp.path_edges[np.isin(g.type[cp.path_edges], viz)]
    index = cp.view["index"]
    pos = lambda nodes: index[g.node_row[nodes]]  # noqa: E731
    edges = list(
        zip(
            pos(g.src[drawn]).tolist(),
            g.node_start[g.src[drawn]].tolist(),
            pos(g.dst[drawn]).tolist(),
            g.node_start[g.dst[drawn]].tolist(),
            g.weight[drawn].tolist(),
            on_path[drawn].tolist(),
            EDGE_TYPE_NAMES[g.type[drawn]].tolist(),
        )
    )
    critical = set(index[g.node_row[cp.path_nodes]].tolist())
    return write_overlay(trace_path, output_dir, critical, edges, only_critical=only_critical)


def write_overlay(
    trace_path: str, output_dir: str, critical: set, edges: Sequence[tuple], *, only_critical: bool = True
) -> str:
    """Write ``output_dir/overlaid_critical_path_<file name>``; returns its path.

    ``critical``: file positions (``traceEvents`` index) of the critical events. ``edges``: ``(src position,
    src is start, dst position, dst is start, weight, on the critical path, type name)`` per drawn edge.
    """
    out_dir = Path(output_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = msgspec.json.decode(read_trace_bytes(trace_path))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    for i in critical:
        ev = events[i]
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {}
        args["critical"] = 1
    next_id = 1 + max((e["id"] for e in events if isinstance(e.get("id"), int)), default=-1)

    def at(pos: int, is_start: bool) -> tuple:
        ev = events[pos]
        dur = ev.get("dur", 0) or 0
        t = float(ev["ts"]) + (0 if is_start else float(dur))
        if isinstance(ev.get("args"), dict) and (ev["args"].get("device", -1) or 0) >= 0 and "device" in ev["args"]:
            t -= min(1, dur)
        return ev.get("pid"), ev.get("tid"), int(t)

    flows = []
    for k, (sp, ss, dp, ds, w, crit, typ) in enumerate(edges):
        fid = next_id + k
        args = {"weight": int(w), "critical": bool(crit), "type": typ}
        pid, tid, ts = at(sp, ss)
        flows.append(
            {
                "ph": "s",
                "id": fid,
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "cat": "critical_path",
                "name": "critical_path",
                "args": args,
            }
        )
        pid, tid, ts = at(dp, ds)
        flows.append(
            {
                "ph": "f",
                "id": fid,
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "cat": "critical_path",
                "name": "critical_path",
                "bp": "e",
                "args": args,
            }
        )
    if only_critical:
        keep = []
        for i, e in enumerate(events):
            if e.get("ph") != "X" or e.get("cat") in ("user_annotation", "python_function") or i in critical:
                keep.append(e)
        events = keep
    events.extend(flows)
    if isinstance(doc, dict):
        doc["traceEvents"] = events
    else:
        doc = events
    name = Path(trace_path).name
    out = out_dir / ("overlaid_critical_path_" + name)
    data = msgspec.json.encode(doc)
    write_bytes(out, gzip_bytes(data) if name.endswith(".gz") else data)
    return str(out)
