"""The graph of the whole job: every rank's CPU threads and GPU streams, and the collectives that join them.

Arrays only (no object per node). A **node** is a runtime call on a CPU thread (nested calls are part of the
call around them), a ``ProfilerStep`` boundary (two zero-length nodes: start and end), a GPU operation (kernel,
copy, set) or, per matched collective, one *arrival* point. Each node has a start and an end **point**; times are
nanoseconds on the job's common clock after the per-rank offsets estimated from the collectives.

Edges join points. Every point belongs to one **chain** (a CPU thread or a GPU stream, in time order), and the
edge from the point before it on its chain is its chain edge: ``DURATION`` (a node's own start to its end),
``CPU_GAP`` (host time between two calls of a thread) or ``GPU_GAP`` (a stream's idle time between two
operations). The other edges cross chains:

========== ====================================================================================================
``LAUNCH`` the launch call's start → each GPU operation with its correlation id (``cudaGraphLaunch``: all of
           its kernels)
``STREAM`` another stream's operation end → a GPU operation that started right after it and later than its
           own stream and launch explain (a stream/event wait; inferred from the times)
``SYNC``   a GPU operation's end → the end of a blocking call that waited for it (stream/device/event
           synchronize; a blocking copy waits for its own copy)
``ARRIVE`` each member's collective kernel start → the collective's arrival point (the last member's start)
``XFER``   the arrival point → each member's kernel end (the transfer)
========== ====================================================================================================

Each edge has its measured **lag** (destination time minus source time) and a **floor** (the least it could
take if its source were not the latest: 0 for gaps and waits, the rank's fastest launch for launches, the
transfer for collectives). :mod:`holotrace.analysis.critical_path.replay` re-times the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from holotrace.analysis.critical_path.calls import outer_calls
from holotrace.analysis.critical_path.chains import chain_ids, chain_order
from holotrace.analysis.critical_path.collectives import (
    clock_offsets,
    match_collectives,
    skew_issue,
    view_clock_offsets,
)
from holotrace.analysis.critical_path.edges import (
    EDGE_KIND_NAMES,
    EdgeKind,
    NodeType,
    cross_edges,
)
from holotrace.analysis.critical_path.steps import step_rows
from holotrace.analysis.grouped import factorize
from holotrace.exec.pool import thread_map
from holotrace.model import classify
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view

__all__ = [
    "EDGE_KIND_NAMES",
    "EdgeKind",
    "GraphFrame",
    "JobGraph",
    "NodeType",
    "build_job_graph",
    "release_job_graph",
    "clock_offsets",
    "skew_issue",
]

_LAG_BLOCK = 1 << 16  # positions a chain lag is differenced at a time (in place)


@dataclass
class JobGraph:
    """The job graph (see the module docstring). Node arrays have one entry per node, point arrays one per
    point (point ``2 * n`` is node n's start, ``2 * n + 1`` its end), edge arrays one per cross-chain edge."""

    view: object = field(repr=False)
    node_rank: np.ndarray  # rank (-1 for arrival points); int32 below 2**31 (tables read it as int64)
    node_row: np.ndarray  # row in the rank's view (a step's ProfilerStep row; -1 for arrival points); int32 below 2**31
    node_type: np.ndarray  # NodeType
    node_step: np.ndarray  # ProfilerStep number (-1 none); int32 where every step fits (tables read it as int64)
    node_coll: np.ndarray  # collective instance of a GPU node / arrival point (-1 none); int32 below 2**31
    point_time: np.ndarray  # measured time of every point (ns from ``origin_ns``, float64)
    chain_order: np.ndarray  # points sorted by chain, then time (int32 below 2**31 points, as ``src`` and ``dst``)
    chain_first: np.ndarray  # per position of chain_order: first point of its chain
    chain_kind: np.ndarray  # per position of chain_order: EdgeKind of the edge from the previous point (-1: first)
    floor_pos: np.ndarray  # the chain positions whose edge has a floor other than 0 (``chain_floor``), ascending
    floor_val: np.ndarray  # ... and their floors
    src: np.ndarray  # cross edges: source point
    dst: np.ndarray  # cross edges: destination point
    kind: np.ndarray  # cross edges: EdgeKind
    lag: np.ndarray
    floor: np.ndarray
    offsets_ns: dict  # per rank: the clock offset estimated from the collectives (added to its times)
    skew_ns: float = 0.0  # residual: median spread of a collective's ends after the offsets
    origin_ns: int = 0
    issues: list = field(default_factory=list)
    memo: dict = field(default_factory=dict, repr=False, compare=False)  # what the replay derives once per graph

    @property
    def chain_id(self) -> np.ndarray:
        """Per position of chain_order: its chain (chains are numbered 0, 1, ... in chain order); made when asked
        for, not kept."""
        return np.cumsum(self.chain_first, dtype=np.int64) - 1

    @property
    def chain_lag(self) -> np.ndarray:
        """Per position of chain_order: the measured lag of the edge from the previous point (0 for a first point);
        made when asked for, not kept."""
        lag = self.point_time[self.chain_order]
        # each position less the one before, in place: from the end a block at a time (a block's inputs are copied,
        # not the array), so the array is the only one of its length
        for hi in range(len(lag), 1, -_LAG_BLOCK):
            lo = max(hi - _LAG_BLOCK, 1)
            lag[lo:hi] -= lag[lo - 1 : hi - 1]
        if len(lag):
            lag[0] = 0.0
        lag[self.chain_first] = 0.0
        return lag

    @property
    def chain_floor(self) -> np.ndarray:
        """Per position of chain_order: the floor of the edge from the previous point (made when asked for)."""
        out = np.zeros(len(self.chain_order))
        out[self.floor_pos] = self.floor_val
        return out

    @property
    def n_nodes(self) -> int:
        return len(self.node_rank)

    def ranks(self) -> list[int]:
        """The ranks that have nodes, ascending (kept on the graph)."""
        if "ranks" not in self.memo:
            rk = self.node_rank  # (the ranks' nodes lie in runs, one after another: a sort of the runs' ranks)
            cut = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]]) if len(rk) else np.zeros(0, dtype=np.int64)
            runs = rk[cut]
            self.memo["ranks"] = sorted(set(runs[runs >= 0].tolist()))
        return self.memo["ranks"]

    def rank_nodes(self, r: int) -> np.ndarray:
        """The nodes of rank ``r``, ascending (the ranks' nodes are laid out one rank after another: their ranges
        kept on the graph, each rank's array made when asked for, not kept)."""
        if "rank_nodes" not in self.memo:
            rk = self.node_rank
            cut = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]]) if len(rk) else np.zeros(0, dtype=np.int64)
            runs = rk[cut].tolist()
            if len(set(runs)) == len(runs):  # one run per rank
                ends = np.r_[cut[1:], len(rk)].tolist()
                self.memo["rank_nodes"] = {v: (a, b) for v, a, b in zip(runs, cut.tolist(), ends)}
            else:
                self.memo["rank_nodes"] = {v: np.flatnonzero(rk == v) for v in set(runs)}
        got = self.memo["rank_nodes"].get(r)
        if got is None:
            return np.zeros(0, dtype=np.int64)
        return np.arange(*got) if isinstance(got, tuple) else got

    def rank_positions(self) -> dict:
        """Per rank: the slice of ``chain_order`` positions on its chains (a rank's chains are numbered, so ordered,
        one after another; arrival points come last); kept on the graph."""
        if "rank_positions" not in self.memo:
            starts = np.flatnonzero(self.chain_first)
            rk = self.node_rank[self.chain_order[starts] >> 1]
            cut = np.flatnonzero(np.r_[True, rk[1:] != rk[:-1]]) if len(rk) else np.zeros(0, dtype=np.int64)
            bounds = np.r_[starts[cut], len(self.chain_order)].tolist()
            runs = rk[cut].tolist()
            if len(set(runs)) != len(runs):
                raise ValueError("the job graph's chains are not laid out rank by rank")
            self.memo["rank_positions"] = {r: slice(a, b) for r, a, b in zip(runs, bounds, bounds[1:]) if r >= 0}
        return self.memo["rank_positions"]

    def point_of_position(self) -> np.ndarray:
        """Position in ``chain_order`` of every point."""
        it = self.chain_order.dtype
        pos = np.empty(len(self.chain_order), dtype=it)
        pos[self.chain_order] = np.arange(len(self.chain_order), dtype=it)
        return pos


_NODE_KEYS = ("rows", "type", "start", "dur", "step", "chain")


def _rank_nodes(view, r: int, base: int) -> dict:
    """Nodes of one rank: calls, step boundaries, GPU operations (times relative to ``base`` on the rank's clock).
    A rank whose view keeps what is derived from its cache entry (``RankView.store``) maps the nodes an earlier
    command made of it (its starts kept on the rank's own clock), else makes them and keeps them there."""
    rv = view[r]
    store, table = getattr(rv, "store", None), getattr(view, "table", None)
    name = f"graph_nodes-{table.fingerprint()}{_nodes_code()}" if store is not None and table is not None else None
    out = store.get(name, _NODE_KEYS) if name is not None else None
    if out is not None:
        out["start"] = out["start"] - base  # (a new array: the kept one is the file's)
        return out
    out = _made_rank_nodes(rv, view, base)
    if name is not None:
        store.put(name, {**out, "start": out["start"] + base})
    return out


def _nodes_code() -> str:
    """The digest of the code that makes a rank's nodes (what names those kept beside a cache entry)."""
    import sys

    from holotrace.analysis import grouped
    from holotrace.analysis.critical_path import calls, edges, steps
    from holotrace.code_digest import code_digest
    from holotrace.model import view as view_mod

    return code_digest(sys.modules[__name__], calls, edges, steps, grouped, classify, view_mod)


def _made_rank_nodes(rv, view, base: int) -> dict:
    """:func:`_rank_nodes` made from the rank's view ``rv``."""
    calls = outer_calls(rv)
    steps = step_rows(rv, view.strings, NATIVE, view.per_string(NATIVE.step_number))  # (kept on the view)
    srows = np.array([row for _, row in steps], dtype=np.int64)
    snum = np.array([s for s, _ in steps], dtype=np.int64)
    gpu = np.flatnonzero(classify.is_gpu_activity(rv["kind"]) & (rv["stream"] != -1))
    ts, dur = rv["ts"], rv["dur"]
    rows = np.concatenate([calls, srows, srows, gpu])
    ntype = np.concatenate(
        [
            np.full(len(calls), NodeType.CALL),
            np.full(len(srows), NodeType.STEP_START),
            np.full(len(srows), NodeType.STEP_END),
            np.full(len(gpu), NodeType.GPU),
        ]
    ).astype(np.int8)
    start = np.concatenate([ts[calls], ts[srows], ts[srows] + dur[srows], ts[gpu]]) - base
    length = np.concatenate([dur[calls], np.zeros(2 * len(srows), dtype=np.int64), dur[gpu]])
    it = rv["iteration"]
    it = it if it.dtype == np.int64 else np.nan_to_num(it, nan=-1).astype(np.int64)
    step = np.concatenate([it[calls], snum, snum, it[gpu]])
    # chains: CPU threads keyed by (pid, tid), GPU streams by (device, stream), numbered in order of first appearance
    thread = np.concatenate(
        [
            rv.at("pid", calls) * np.int64(1_000_003) + rv.at("tid", calls),
            rv.at("pid", srows) * np.int64(1_000_003) + rv.at("tid", srows),
            rv.at("pid", srows) * np.int64(1_000_003) + rv.at("tid", srows),
            -(rv.at("pid", gpu) * np.int64(1_000_003) + rv["stream"][gpu]) - 1,
        ]
    )
    out = {
        "rows": rows.astype(_index_dtype(rv.n)),  # (rows of one rank's view: int32 below 2**31)
        "type": ntype,
        "start": start.astype(np.int64, copy=False),
        "dur": np.maximum(length, 0).astype(np.int64, copy=False),
        "step": step,
        "chain": factorize(thread)[0].astype(np.int32),
    }
    rv.release_pages()  # (the rank's nodes are made: its columns' pages go back until read again)
    return out


def _index_dtype(n: int) -> type:
    """The narrowest of int32 and int64 that holds the indices 0..n and -1 (the graph's rows and collective
    instances: half the memory of int64; they only index arrays and compare, never enter a product)."""
    return np.int32 if n < 2**31 - 1 else np.int64


@dataclass
class GraphFrame:
    """What a graph of some ranks of a bigger job takes from the whole job instead of computing it (the scale-out
    replay, :mod:`holotrace.analysis.critical_path.segments`): the collectives matched job-wide (these ranks'
    kernels, instances numbered 0..n-1), the clock offsets and residual skew, the job's time origin, and each
    instance's arrival time (ns from ``origin``, offsets applied). Arrival points then have no incoming edge: each
    is a fixed input at its given time."""

    match: object
    offsets: dict
    skew: float
    origin: int
    arrival: np.ndarray


class _Kept:
    graph: JobGraph | None = None  # the view's slot for one job graph: None until built, or once let go


def build_job_graph(source, *, ranks: Sequence[int] | None = None, frame: GraphFrame | None = None) -> JobGraph:
    """The job graph of every rank (or ``ranks``), under holotrace's rules (see the module docstring). Built once
    per view: the analyses of one command (the summary's costliest rank, the report's fixes) share it and what
    the replay keeps on it (until :func:`release_job_graph`)."""
    view = job_view(source, NATIVE)
    chosen = view.select(ranks)
    if frame is not None:  # a part of a bigger job: not kept on the view
        return _build(view, chosen, frame)
    kept = view.derived(("job_graph", tuple(chosen)), _Kept)
    if kept.graph is None:
        kept.graph = _build(view, chosen)
        view.release_pages()  # (the graph holds what its replays read: the columns' pages go back to the cache)
    return kept.graph


def release_job_graph(source, *, ranks: Sequence[int] | None = None) -> None:
    """Let go of the job graph kept on the view and of what its replays keep on it (for a command that goes on to
    other work); a later :func:`build_job_graph` builds it again."""
    view = job_view(source, NATIVE)
    view.derived(("job_graph", tuple(view.select(ranks))), _Kept).graph = None


def _build(view, chosen: list[int], frame: GraphFrame | None = None) -> JobGraph:
    base = {r: (int(view[r]["ts"].min()) if view[r].n else 0) for r in chosen}
    common = {r: base[r] + view[r].clock_offset for r in chosen}
    per = thread_map(lambda r: _rank_nodes(view, r, base[r]), chosen)  # (numpy on threads)
    if frame is None:
        origin = min(common.values()) if common else 0
        match = match_collectives(view, ranks=chosen)
        offsets, skew = view_clock_offsets(view, match, {r: common[r] - origin - base[r] for r in chosen})
    else:
        origin, match, offsets, skew = frame.origin, frame.match, frame.offsets, frame.skew
    issues = list(match.unmatched) + [x for x in [skew_issue(skew)] if x]
    # concatenate the ranks; times on the common clock (int64 ns from origin, then float64)
    parts = [(r, per[r], common[r] - origin + offsets.get(r, 0)) for r in chosen]
    n_per = [len(p["rows"]) for _, p, _ in parts]
    span = dict(zip(chosen, zip(np.cumsum([0] + n_per[:-1]).tolist(), np.cumsum(n_per).tolist())))  # a rank's nodes
    rank_t = _index_dtype(max([abs(r) for r in chosen], default=0))
    # the job's node arrays: the ranks' nodes, then one arrival point per collective instance (made once, filled)
    n_inst = match.n_instances
    n_work = sum(n_per)
    n = n_work + n_inst

    def joined(key: str, tail, dtype=None) -> np.ndarray:
        arrs = [p[key] for _, p, _ in parts]
        out = np.empty(n, dtype=dtype or (np.result_type(*arrs) if arrs else np.int64))
        if arrs:
            np.concatenate(arrs, out=out[:n_work])
        out[n_work:] = tail
        return out

    node_rank = np.full(n, -1, dtype=rank_t)
    for (r, _, _), (a, b) in zip(parts, span.values()):
        node_rank[a:b] = r
    node_row, node_type, node_step = joined("rows", -1), joined("type", NodeType.ARRIVAL, np.int8), joined("step", -1)
    ck = chain_ids([p for _, p, _ in parts])
    # the points' times (float64 ns on the common clock): a node's start at 2 * node, its end at 2 * node + 1
    pt = np.empty(2 * n)
    for (_, p, s), (a, b) in zip(parts, span.values()):
        st = pt[2 * a : 2 * b : 2]
        np.add(p["start"], s, out=st)
        np.add(st, p["dur"], out=pt[2 * a + 1 : 2 * b : 2])
    # the ranks' node arrays are in the job's now: freed before the bigger arrays below
    per.clear()
    parts.clear()
    node_coll = np.full(n, -1, dtype=_index_dtype(n_inst))  # (int32 below 2**31)
    # collective instances -> GPU nodes
    k = match.table
    for r in chosen:
        sel = span[r][0] + np.flatnonzero(node_type[slice(*span[r])] == NodeType.GPU)
        if len(k):
            kk = k.take(k["rank"] == r)
            if len(kk):
                rows_r, nodes_r = node_row[sel], sel
                srt = np.argsort(rows_r)
                at = srt[np.searchsorted(rows_r[srt], kk["row"])]
                node_coll[nodes_r[at]] = kk["instance"]
    # arrival points: one node per instance, its own chain
    coll_nodes = np.flatnonzero(node_coll[:n_work] >= 0)
    arr_time = np.full(n_inst, -np.inf)
    np.maximum.at(arr_time, node_coll[coll_nodes], pt[2 * coll_nodes])
    if frame is not None:
        arr_time = np.asarray(frame.arrival, dtype=np.float64)[:n_inst]
    arr_node = n_work + np.arange(n_inst)
    node_step[arr_node[node_coll[coll_nodes]]] = node_step[coll_nodes]
    if len(node_step) and -(2**31) < int(node_step.min()) and int(node_step.max()) < 2**31 - 1:
        node_step = node_step.astype(np.int32)  # (step numbers: int32 when they fit)
    node_coll[n_work:] = np.arange(n_inst)
    pt[2 * n_work :: 2] = arr_time
    np.add(arr_time, 0.0, out=pt[2 * n_work + 1 :: 2])  # (an arrival point lasts nothing)
    del arr_time
    # chains: (rank, thread) for calls/steps/GPU; each arrival point alone
    order, c = chain_order(pt, ck, n - n_inst)
    del ck
    first = np.r_[True, c[1:] != c[:-1]] if len(c) else np.zeros(0, dtype=bool)
    del c
    own = np.zeros(len(order), dtype=bool)  # a node's end right after its own start
    own[1:] = order[1:] - order[:-1] == 1
    own &= (order & 1).astype(bool)
    is_gpu_chain = np.repeat(node_type == NodeType.GPU, 2)[order]
    i8 = np.int8  # (int8 kinds chosen from int8 scalars: no int64 array of every point made and cast)
    ckind = np.where(own, i8(EdgeKind.DURATION), np.where(is_gpu_chain, i8(EdgeKind.GPU_GAP), i8(EdgeKind.CPU_GAP)))
    del own, is_gpu_chain
    ckind[first] = -1
    pos = np.empty(len(order), dtype=order.dtype)
    pos[order] = np.arange(len(order), dtype=order.dtype)
    src, dst, kind, floor = cross_edges(
        view, chosen, span, node_row, node_type, node_coll, arr_node, pt, order, first, pos, arrive=frame is None
    )
    src, dst = src.astype(order.dtype, copy=False), dst.astype(order.dtype, copy=False)  # (points, as ``order``)
    elag = pt[dst] - pt[src]
    # a blocking call that waited could shrink to the time it took after the GPU finished (its floor: kept for
    # the few positions where it is not 0)
    sy = kind == EdgeKind.SYNC
    at = pos[dst[sy]]
    own_lag = np.where(first[at], 0.0, pt[order[at]] - pt[order[np.maximum(at - 1, 0)]])
    f_sync = np.clip(elag[sy], 0, own_lag)
    # collectives: a member's own duration could shrink only to its transfer
    xf = kind == EdgeKind.XFER
    x_at = pos[dst[xf]]  # (a transfer's destination is a member's end: its own duration ends there)
    on_dur = ckind[x_at] == EdgeKind.DURATION
    x_at, f_coll = x_at[on_dur], np.clip(np.nan_to_num(elag[xf][on_dur]), 0, None)
    del pos
    # the floors other than 0, by chain position (a transfer's over a sync's at the same position)
    fpos = np.concatenate([at, x_at]).astype(np.int64, copy=False)
    fval = np.concatenate([f_sync, f_coll]).astype(np.float64, copy=False)
    last = np.argsort(fpos, kind="stable")
    fpos, fval = fpos[last], fval[last]
    last = np.r_[fpos[1:] != fpos[:-1], True] if len(fpos) else np.zeros(0, dtype=bool)  # (the later one holds)
    last &= (fval != 0) | np.signbit(fval)
    fpos, fval = fpos[last], fval[last]
    return JobGraph(
        view,
        node_rank,
        node_row,
        node_type,
        node_step,
        node_coll,
        pt,
        order,
        first,
        ckind,
        fpos,
        fval,
        src,
        dst,
        kind,
        elag,
        floor,
        offsets,
        skew,
        origin,
        issues,
    )
