"""The critical-path graph of one rank and window (spec 25 §2-3), as arrays.

Nodes are the start and end instants of the window's operators, runtime calls and GPU operations, numbered by
``(time, event index)``; edges are durations or zero-weight dependencies built in three passes (runtime lock,
CPU call stacks, GPU streams). Everything is a numpy column: no Python object per node or edge. The passes that
are sequential by nature walk only the runtime-lock calls (pass 1) and the GPU operations (pass 3).

Event identity is the row position in the rank's view; ``index`` (the file position, HTA's event id) is kept
beside it. Times are in the view's unit (HTA's µs under ``rules.hta_table``, exact ns natively).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from holotrace.model import classify
from holotrace.order_stats import distinct

log = logging.getLogger("holotrace.critical_path")

__all__ = [
    "EdgeType",
    "EDGE_TYPE_NAMES",
    "Graph",
    "build_graph",
    "window",
    "cpu_rows",
    "KERNEL_KERNEL_DELAY_THRESHOLD_US",
]

KERNEL_KERNEL_DELAY_THRESHOLD_US = 1500


class EdgeType:
    OPERATOR_KERNEL, DEPENDENCY, KERNEL_LAUNCH_DELAY, KERNEL_KERNEL_DELAY, SYNC_DEPENDENCY = range(5)


EDGE_TYPE_NAMES = np.array(
    [
        "critical_path_operator",
        "critical_path_dependency",
        "critical_path_kernel_launch_delay",
        "critical_path_kernel_kernel_delay",
        "critical_path_sync_dependency",
    ],
    dtype=object,
)


def _env(name: str) -> bool:
    return os.environ.get(name, "0") == "1"


@dataclass
class Graph:
    """Nodes and edges of one critical-path graph (arrays; rows are positions in the rank's view)."""

    rank: int
    rows: np.ndarray  # clipped rows of the view (ascending)
    node_row: np.ndarray  # event row of each node
    node_time: np.ndarray  # float64, view unit
    node_start: np.ndarray  # bool
    node_blocking: np.ndarray  # bool
    start_node: np.ndarray  # per view row: its start node, -1 none
    end_node: np.ndarray  # per view row: its end node, -1 none
    src: np.ndarray  # edges, in insertion order, (src, dst) unique
    dst: np.ndarray
    type: np.ndarray  # int8 EdgeType
    weight: np.ndarray  # float64 as built (may be negative)
    attr: np.ndarray  # attributed event row, -1 none (-2: HTA's root parent)
    window: tuple


# --------------------------------------------------------------------------- window and clipping (§1-2)
def window(view, strings, annotation: str, instance, *, time_ordered: bool = False) -> tuple[float, float]:
    """``(start, end)`` of the selected annotation instance(s); the whole rank for ``annotation == ""``.

    Instances are the rows whose name contains ``annotation`` in table order (HTA), or, with ``time_ordered``,
    the CPU rows ordered by start. Raises ``ValueError`` naming the available count when out of range.
    """
    ts = view["ts"]
    if annotation == "":
        return (float(ts.min()) if len(ts) else 0.0), float("inf")
    ids = np.array([i for i, s in enumerate(strings.table) if annotation in s], dtype=np.int64)
    if not len(ids):
        raise LookupError(f"no event name contains {annotation!r}")
    rows = np.flatnonzero(np.isin(view["name"], ids))
    if time_ordered:
        rows = rows[cpu_rows(view)[rows]]
        rows = rows[np.argsort(ts[rows], kind="stable")]
    i0, i1 = (0, 0) if instance is None else (instance if isinstance(instance, tuple) else (instance, instance))
    i0, i1 = int(i0), int(i1)
    if i0 < 0 or i1 >= len(rows) or i0 > i1:
        raise ValueError(
            f"annotation {annotation!r} has {len(rows)} instance(s); instance {instance} is out of range "
            f"(use 0..{len(rows) - 1})"
        )
    sel = rows[i0 : i1 + 1]
    return float(ts[sel].min()), float((ts[sel] + view["dur"][sel]).max())


def cpu_rows(view) -> np.ndarray:
    """CPU-timeline rows: no stream and not a GPU-timeline kind (a ``gpu_user_annotation`` written without a
    stream is still a GPU range)."""
    kind = view["kind"]
    return (view["stream"] == -1) & ~((kind >= 10) & (kind < 20))


def clip(view, strings, start: float, end: float) -> np.ndarray:
    """Rows of the window (§2.2): CPU rows starting inside with ``dur > 0``, GPU rows launched by such a row,
    every ``Stream Wait Event``."""
    ts, dur, stream = view["ts"], view["dur"], view["stream"]
    cpu_in = (stream == -1) & (ts >= start) & (ts <= end) & (dur > 0)
    gpu = stream != -1
    p = view["partner"]
    launched = gpu & (p >= 0)
    launched[launched] = cpu_in[p[launched]] & (view["index_correlation"][p[launched]] == view["index"][launched])
    swe = strings.id("Stream Wait Event")
    keep = cpu_in | launched | (gpu & (view["name"] == swe) if swe >= 0 else cpu_in | launched)
    return np.flatnonzero(keep)


# --------------------------------------------------------------------------- graph
class _Edges:
    def __init__(self):
        self.parts = []

    def add(self, src, dst, typ, zero, attr):
        src = np.atleast_1d(np.asarray(src, dtype=np.int64))
        n = len(src)
        self.parts.append(
            (
                src,
                np.atleast_1d(np.asarray(dst, dtype=np.int64)),
                np.broadcast_to(np.asarray(typ, dtype=np.int8), n),
                np.broadcast_to(np.asarray(zero, dtype=bool), n),
                np.broadcast_to(np.asarray(attr, dtype=np.int64), n),
            )
        )

    def arrays(self):
        if not self.parts:
            e = np.zeros(0, dtype=np.int64)
            return e, e, e.astype(np.int8), e.astype(bool), e
        return tuple(np.concatenate([p[k] for p in self.parts]) for k in range(5))


def _name_mask(view, strings, names) -> np.ndarray:
    ids = [i for i in (strings.id(n) for n in names) if i >= 0]
    return np.isin(view["name"], ids) if ids else np.zeros(view.n, dtype=bool)


def build_graph(jv, rank: int, rows: np.ndarray, win, *, rules=None, data_load_events=None) -> Graph:
    """The graph on the clipped ``rows`` of rank ``rank`` of the job view ``jv`` (spec 25 §3)."""
    view, strings, unit_ns = jv[rank], jv.strings, jv.unit_ns
    rules = rules or jv.rules
    n = view.n
    ts = view["ts"].astype(np.float64)
    dur = view["dur"].astype(np.float64)
    stream, icorr = view["stream"], view["index_correlation"]
    cat_ok = jv.per_string(lambda s: classify.is_cp_node_category(s, rules), missing=0, dtype=bool)
    is_node_ev = jv.lookup(view["cat"], cat_ok)
    if data_load_events:
        pats = list(data_load_events)
        dl = jv.per_string(lambda s: classify.is_data_loading(s, pats), missing=0, dtype=bool)
        is_node_ev = is_node_ev | jv.lookup(view["name"], dl)
    is_node_ev = is_node_ev | ((stream != -1) & (icorr >= 0))
    ev = rows[is_node_ev[rows]]
    blocking = _name_mask(view, strings, classify.CP_BLOCKING_NAMES)
    # nodes: starts and ends sorted by (time, event index), a zero-length event's start first
    m = len(ev)
    t = np.concatenate([ts[ev], ts[ev] + dur[ev]])
    r2 = np.concatenate([ev, ev])
    st = np.concatenate([np.ones(m, bool), np.zeros(m, bool)])
    order = np.lexsort((~st, view["index"][r2], t))
    node_row, node_time, node_start = r2[order], t[order], st[order]
    start_node = np.full(n, -1, dtype=np.int64)
    end_node = np.full(n, -1, dtype=np.int64)
    ids = np.arange(2 * m, dtype=np.int64)
    start_node[node_row[node_start]] = ids[node_start]
    end_node[node_row[~node_start]] = ids[~node_start]
    g = Graph(
        view.rank, rows, node_row, node_time, node_start, blocking[node_row], start_node, end_node, *([None] * 5), win
    )
    edges = _Edges()
    lock = _name_mask(view, strings, classify.CP_LOCK_NAMES)
    _lock_pass(g, lock, edges)
    _stack_pass(g, jv, view, strings, rows, lock, edges)
    _gpu_pass(g, view, strings, rules, rows, edges, KERNEL_KERNEL_DELAY_THRESHOLD_US * 1000.0 / unit_ns)
    src, dst, typ, zero, attr = edges.arrays()
    w = (
        np.where(
            zero | (typ == EdgeType.DEPENDENCY) | (typ == EdgeType.SYNC_DEPENDENCY),
            0.0,
            node_time[dst] - node_time[src],
        )
        if len(src)
        else np.zeros(0)
    )
    g.src, g.dst, g.type, g.weight, g.attr = _dedupe(src, dst, typ, w, attr, 2 * m)
    return g


def _dedupe(src, dst, typ, w, attr, n_nodes):
    """networkx's add_edge on a repeated pair: first position kept, attributes of the last call; an attribution
    (OPERATOR_KERNEL / KERNEL_KERNEL_DELAY) stays once set."""
    if not len(src):
        return src, dst, typ, w, attr
    key = src * n_nodes + dst
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    if len(uniq) == len(key):
        return src, dst, typ, w, attr
    last = np.zeros(len(uniq), dtype=np.int64)
    np.maximum.at(last, inv, np.arange(len(key)))
    has_attr = attr != -1
    la = np.full(len(uniq), -1, dtype=np.int64)
    pos = np.flatnonzero(has_attr)
    lastattr = np.full(len(uniq), -1, dtype=np.int64)
    np.maximum.at(lastattr, inv[pos], pos)
    la[lastattr >= 0] = attr[lastattr[lastattr >= 0]]
    keep = np.sort(first)
    k_of = inv[keep]
    return src[keep], dst[keep], typ[last[k_of]], w[last[k_of]], la[k_of]


def _lock_pass(g: Graph, lock: np.ndarray, edges: _Edges) -> None:
    """Pass 1 (§3.3): the CUDA runtime lock across threads."""
    nodes = np.flatnonzero(lock[g.node_row]).tolist()
    row, is_start = g.node_row.tolist(), g.node_start.tolist()
    src, dst, typ, att = [], [], [], []
    stack: list[int] = []
    last = -1
    for v in nodes:
        if is_start[v]:
            stack.append(v)
        else:
            while stack:
                p = stack.pop()
                own = row[p] == row[v]
                src.append(p)
                dst.append(v)
                typ.append(EdgeType.OPERATOR_KERNEL if own else EdgeType.DEPENDENCY)
                att.append(row[v] if own else -1)
            if last >= 0 and not is_start[last]:
                src.append(last)
                dst.append(v)
                typ.append(EdgeType.DEPENDENCY)
                att.append(-1)
        last = v
    if src:
        edges.add(src, dst, np.array(typ, dtype=np.int8), False, att)


def _threads(jv, view, strings, rows: np.ndarray) -> np.ndarray:
    """Thread code per clipped row, ordered as (pid, tid) after HTA's backward-thread merge."""
    tid = view["tid"][rows].copy()
    cat, name = view["cat"][rows], view["name"][rows]
    cats = [i for i in (strings.id("cpu_op"), strings.id("user_annotation")) if i >= 0]
    in_cat = np.isin(cat, cats)

    def single_tid(word):
        ids = jv.name_ids(lambda s: word in s)
        t = distinct(tid[in_cat & np.isin(name, ids)])
        return int(t[0]) if len(t) == 1 else None

    fwd, bwd = single_tid("forward"), single_tid("autograd")
    if fwd and bwd and fwd != bwd:
        tid[tid == bwd] = fwd
    _, pc = np.unique(view["pid"][rows], return_inverse=True)
    tu, tc = np.unique(tid, return_inverse=True)
    _, code = np.unique(pc.reshape(-1).astype(np.int64) * len(tu) + tc.reshape(-1), return_inverse=True)
    return code.reshape(-1)


def _stack_pass(g: Graph, jv, view, strings, rows: np.ndarray, lock: np.ndarray, edges: _Edges) -> None:
    """Pass 2 (§3.4): depth-first walk of each CPU thread's call stack, as one sort of open/close endpoints."""
    if not len(rows):
        return
    thread = _threads(jv, view, strings, rows)
    stream = view["stream"][rows]
    gpu_thread = np.zeros(thread.max() + 1, dtype=bool)
    gpu_thread[thread[stream >= 0]] = True
    cpu = ~gpu_thread[thread]
    r = rows[cpu]
    th = thread[cpu]
    m = len(r)
    if not m:
        return
    ts = view["ts"][r].astype(np.float64)
    dur = np.maximum(view["dur"][r].astype(np.float64), 0)
    idx = view["index"][r].astype(np.float64)
    is_open = np.concatenate([np.ones(m, bool), np.zeros(m, bool)])
    node = np.concatenate([np.arange(m), np.arange(m)])
    time = np.concatenate([ts, ts + dur])
    d2, i2 = np.concatenate([dur, dur]), np.concatenate([idx, idx])
    # HTA's comparator on positive durations: ends before starts; starts longer first then lower index;
    # ends shorter first then higher index
    k1 = np.where(is_open, -d2, d2)
    k2 = np.where(is_open, i2, -i2)
    order = np.lexsort((k2, k1, is_open, time, np.concatenate([th, th])))
    node, is_open = node[order], is_open[order]
    delta = np.where(is_open, 1, -1)
    before = np.cumsum(delta) - delta
    opos = np.flatnonzero(is_open)
    olevel = before[opos]
    big = np.int64(2 * m + 2)
    keys = olevel * big + opos
    srt = np.argsort(keys, kind="stable")
    skeys = keys[srt]
    # a close pops whatever is on top: the latest open one level down
    cpos = np.flatnonzero(~is_open)
    j = np.searchsorted(skeys, (before[cpos] - 1) * big + cpos, side="left") - 1
    tok = node.copy()
    tok[cpos] = node[opos[srt[j]]]
    parent = np.full(m, -1, dtype=np.int64)
    hp = olevel > 0
    jp = np.searchsorted(skeys, (olevel[hp] - 1) * big + opos[hp], side="left") - 1
    parent[node[opos[hp]]] = node[opos[srt[jp]]]
    # keep the tokens of events with nodes
    has = (g.start_node[r] >= 0) & (g.end_node[r] >= 0)
    keep = has[tok]
    tok, is_open = tok[keep], is_open[keep]
    tth = th[tok]
    depth_before = np.cumsum(np.where(is_open, 1, -1)) - np.where(is_open, 1, -1)
    a, b = tok[:-1], tok[1:]
    same = tth[:-1] == tth[1:]
    a_open, b_open = is_open[:-1], is_open[1:]
    ra, rb = r[a], r[b]
    shared = lock[ra] & lock[rb] & (a_open | ~b_open)
    ok = same & ~shared
    a, b, ra, rb, a_open, b_open = a[ok], b[ok], ra[ok], rb[ok], a_open[ok], b_open[ok]
    dep = b_open & (depth_before[1:][ok] == 0)
    src = np.where(a_open, g.start_node[ra], g.end_node[ra])
    dst = np.where(b_open, g.start_node[rb], g.end_node[rb])
    typ = np.where(dep, EdgeType.DEPENDENCY, EdgeType.OPERATOR_KERNEL).astype(np.int8)
    zero = ~b_open & g.node_blocking[g.start_node[rb]]
    par = parent[a]
    attr = np.where(a_open, ra, np.where(~b_open, rb, np.where(par >= 0, r[np.clip(par, 0, None)], -2)))
    attr = np.where(dep, -1, attr)
    edges.add(src, dst, typ, zero, attr)


def queue_lengths(view, strings) -> np.ndarray:
    """Queue length at each row's own change point (spec 24 §1; +1 before -1 at equal times), NaN elsewhere."""
    n = view.n
    out = np.full(n, np.nan)
    launch = _name_mask(view, strings, classify.HTA_LAUNCH_APIS) & (view["index_correlation"] > 0)
    p = view["partner"]
    launch &= p >= 0
    launch[launch] = view["stream"][p[launch]] != -1
    lr = np.flatnonzero(launch)
    if not len(lr):
        return out
    kr = p[lr]
    rr = np.concatenate([lr, kr])
    s = np.concatenate([view["stream"][kr], view["stream"][kr]])
    t = view["ts"][rr].astype(np.float64)
    sign = np.concatenate([np.ones(len(lr)), -np.ones(len(kr))])
    order = np.lexsort((-sign, t, s))
    rr, s, sign = rr[order], s[order], sign[order]
    c = np.cumsum(sign)
    bounds = np.flatnonzero(np.diff(s)) + 1
    base = np.zeros(len(c))
    starts = np.concatenate([[0], bounds])
    prev = np.where(starts > 0, c[np.maximum(starts - 1, 0)], 0)
    base[starts] = np.diff(np.concatenate([[0], prev]))
    out[rr] = c - np.cumsum(base)
    return out


def _gpu_pass(g: Graph, view, strings, rules, rows: np.ndarray, edges: _Edges, threshold: float) -> None:
    """Pass 3 (§3.5): GPU operations per stream, launch vs kernel-kernel delays, CUDA syncs."""
    from holotrace.analysis.critical_path.sync import sync_sources

    stream, icorr, name, cat = view["stream"], view["index_correlation"], view["name"], view["cat"]
    sid = strings.id
    event_sync, context_sync, stream_sync, swe = (
        sid("Event Sync"),
        sid("Context Sync"),
        sid("Stream Sync"),
        sid("Stream Wait Event"),
    )
    sync_cat = sid("cuda_sync")
    r = rows[
        ((stream[rows] != -1) | np.isin(name[rows], [x for x in (event_sync, context_sync) if x >= 0]))
        & (icorr[rows] >= 0)
    ]
    if not len(r):
        return
    ql = queue_lengths(view, strings)
    partner = view["partner"]
    ts = view["ts"].astype(np.float64)
    end = ts + view["dur"].astype(np.float64)
    is_sync = (cat[r] == sync_cat) if sync_cat >= 0 else np.zeros(len(r), bool)
    key = np.where(is_sync, end[r], ts[r])
    r = r[np.lexsort((view["index"][r], key))]
    src_kernel, dest_kernel = sync_sources(view, strings, r)
    quirks = rules.hta_quirks
    zero_launch = _env("CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE")
    # python lists for the sequential walk
    L = lambda a: a.tolist()  # noqa: E731
    rs, names, cats, strm = L(r), L(name[r]), L(cat[r]), L(stream[r])
    pids = L(view["pid"][r])
    prt = L(partner[r])
    sn, en, nt = L(g.start_node), L(g.end_node), L(g.node_time)
    qk, qr = L(ql[r]), L(np.where(partner[r] >= 0, ql[np.clip(partner[r], 0, None)], np.nan))
    rts = L(np.where(partner[r] >= 0, ts[np.clip(partner[r], 0, None)], np.nan))
    srck, dstk = L(src_kernel), L(dest_kernel)
    S, D, T, A = [], [], [], []
    last: dict = {}
    pending: dict = {}
    missing_runtime = 0

    def add(s, d, t_, a=-1):
        S.append(s)
        D.append(d)
        T.append(t_)
        A.append(a)

    for i, row in enumerate(rs):
        skey = strm[i] if quirks else (pids[i], strm[i])
        if cats[i] == sync_cat:
            nm = names[i]
            cpu = prt[i]
            if nm == swe or nm == event_sync:
                src = srck[i]
                if src < 0:
                    continue
                if nm == swe:
                    if dstk[i] >= 0:
                        pending[dstk[i]] = src
                elif en[src] >= 0 and cpu >= 0 and en[cpu] >= 0:
                    add(en[src], en[cpu], EdgeType.SYNC_DEPENDENCY)
                continue
            if cpu < 0 or en[cpu] < 0:
                continue
            if nm == context_sync:
                for node in last.values():
                    add(node, en[cpu], EdgeType.SYNC_DEPENDENCY)
            elif nm == stream_sync:
                node = last.get(skey)
                if node is not None:
                    add(node, en[cpu], EdgeType.SYNC_DEPENDENCY)
            continue
        s0, e0 = sn[row], en[row]
        if s0 < 0 or e0 < 0:
            continue
        add(s0, e0, EdgeType.OPERATOR_KERNEL, row)
        sync_end = None
        has_sync = False
        src = pending.pop(row, None)
        if src is not None:
            if en[src] >= 0:
                sync_end = en[src]
                has_sync = True
                add(sync_end, s0, EdgeType.SYNC_DEPENDENCY)
        prev = last.get(skey)
        rt = rts[i]
        launch_added = False
        if qr[i] == 1 and qk[i] == 0 and (prev is None or nt[prev] < rt) and (not has_sync or nt[sync_end] < rt):
            rs_node = sn[prt[i]] if prt[i] >= 0 else -1
            if rs_node >= 0:
                add(rs_node, s0, EdgeType.KERNEL_LAUNCH_DELAY)
                launch_added = True
            else:
                missing_runtime += 1
        elif prev is not None and nt[s0] - nt[prev] < threshold and (not has_sync or nt[sync_end] < nt[prev]):
            add(prev, s0, EdgeType.KERNEL_KERNEL_DELAY, g.node_row[prev])
        if zero_launch and not launch_added and prt[i] >= 0 and sn[prt[i]] >= 0:
            add(sn[prt[i]], s0, EdgeType.KERNEL_LAUNCH_DELAY + 10)  # zero-weight marker, fixed below
        last[skey] = e0
    if missing_runtime:
        log.info(
            "%d GPU operation(s) qualified for a launch edge but their launch call is not a graph node; "
            "no launch edge added for them",
            missing_runtime,
        )
    if S:
        T = np.array(T, dtype=np.int8)
        zero = T >= 10
        T[zero] -= 10
        edges.add(S, D, T, zero, A)
