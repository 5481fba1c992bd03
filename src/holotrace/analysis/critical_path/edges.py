"""The job graph's node types and edge kinds, and its cross-chain edges (:mod:`holotrace.analysis.critical_path.job_graph`
builds the nodes and chains, then asks :func:`cross_edges` for the ``LAUNCH``, ``STREAM``, ``SYNC``, ``ARRIVE`` and
``XFER`` edges; the module docstring there says what each is)."""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from holotrace.exec.pool import thread_map
from holotrace.order_stats import distinct, percentile

__all__ = [
    "BLOCKING_COPIES",
    "EDGE_KIND_NAMES",
    "LAUNCH_FLOOR_QUANTILE",
    "STREAM_WAIT_SLACK_NS",
    "STREAM_WAIT_WINDOW_NS",
    "SYNC_CALLS",
    "SYNC_TOLERANCE_NS",
    "EdgeKind",
    "NodeType",
    "cross_edges",
]

STREAM_WAIT_WINDOW_NS = 10_000  # a stream wait is inferred when the operation starts within this of the other's end
STREAM_WAIT_SLACK_NS = 2_000  # ... and at least this later than its own stream and launch explain
SYNC_TOLERANCE_NS = 2_000  # a blocking call ends at most this before the GPU operation it waited for
LAUNCH_FLOOR_QUANTILE = 5  # percentile of a rank's launch lags taken as its fastest launch

SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
    }
)
BLOCKING_COPIES = frozenset(
    {
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "hipMemcpy",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
        "cudaMemcpy2D",
        "cudaMemcpy2DAsync",
        "cuMemcpyDtoH",
        "cuMemcpyAsync",
    }
)


class NodeType(IntEnum):
    CALL = 0
    STEP_START = 1
    STEP_END = 2
    GPU = 3
    ARRIVAL = 4


class EdgeKind(IntEnum):
    DURATION = 0
    CPU_GAP = 1
    GPU_GAP = 2
    LAUNCH = 3
    STREAM = 4
    SYNC = 5
    ARRIVE = 6
    XFER = 7


EDGE_KIND_NAMES = np.array([k.name.lower() for k in EdgeKind], dtype=object)


def cross_edges(view, chosen, span, node_row, node_type, node_coll, arr_node, pt, order, first, pos, arrive=True):
    """``(src, dst, kind, floor)`` of the cross-chain edges (see the module docstring); ``span``: each rank's nodes
    (a range); ``pos``: the position in ``order`` of every point; ``arrive``: with the ``ARRIVE`` edges (without
    them, each arrival point is a fixed input)."""
    S, D, K, F = [], [], [], []

    def add(s, d, k, f):
        S.append(np.asarray(s, dtype=np.int64))
        D.append(np.asarray(d, dtype=np.int64))
        K.append(np.full(len(s), int(k), dtype=np.int8))
        F.append(np.broadcast_to(np.asarray(f, dtype=np.float64), (len(s),)).copy())

    sync_ids = view.name_ids(set(SYNC_CALLS))
    copy_ids = view.name_ids(set(BLOCKING_COPIES))
    args = (view, span, node_row, node_type, pt, order, first, pos, sync_ids, copy_ids)
    per = thread_map(lambda r: _rank_edges(r, *args), chosen)  # (numpy on threads; added in rank order)
    for r in chosen:
        for e in per.pop(r):
            add(*e)
    # collectives: member starts -> arrival point -> member ends
    members = np.flatnonzero((node_coll >= 0) & (node_type == NodeType.GPU))
    if len(members):
        a = arr_node[node_coll[members]]
        if arrive:
            add(2 * members, 2 * a, EdgeKind.ARRIVE, 0.0)
        xfer = pt[2 * members + 1] - pt[2 * a]
        add(2 * a, 2 * members + 1, EdgeKind.XFER, np.clip(xfer, 0, None))
    if not S:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(0, dtype=np.int8), np.zeros(0)
    return np.concatenate(S), np.concatenate(D), np.concatenate(K), np.concatenate(F)


def _rank_edges(r, view, span, node_row, node_type, pt, order, first, pos, sync_ids, copy_ids) -> list:
    """The launch, stream-wait and sync edges of rank ``r`` (see :func:`_cross_edges`), as ``(src, dst, kind,
    floor)`` in the order they are added."""
    out = []
    add = lambda s, d, k, f: out.append((s, d, k, f))  # noqa: E731
    rv = view[r]
    nodes = np.arange(*span[r])
    call = nodes[node_type[nodes] == NodeType.CALL]
    gpu = nodes[node_type[nodes] == NodeType.GPU]
    if not len(gpu):
        return out
    # launch edges by correlation (a graph launch: every kernel with its correlation)
    corr = rv["correlation"]
    cc, gc = corr[node_row[call]], corr[node_row[gpu]]
    okc = cc >= 0
    srt = np.argsort(cc[okc], kind="stable")
    ck, cn = cc[okc][srt], call[okc][srt]
    at = np.searchsorted(ck, gc)
    hit = (at < len(ck)) & (gc >= 0)
    hit[hit] = ck[at[hit]] == gc[hit]
    l_src, l_dst = 2 * cn[at[hit]], 2 * gpu[hit]
    lags = pt[l_dst] - pt[l_src]
    fl = percentile(lags, LAUNCH_FLOOR_QUANTILE) if len(lags) else 0.0
    add(l_src, l_dst, EdgeKind.LAUNCH, np.minimum(lags, max(fl, 0.0)))
    # inferred stream waits: a GPU op that starts later than its stream and launch explain, right after an
    # operation of another stream of the same rank ends
    s_pt = 2 * gpu  # per GPU operation: the latest its stream and its launch explain
    explained = np.where(first[pos[s_pt]], -np.inf, pt[order[np.maximum(pos[s_pt] - 1, 0)]])
    np.maximum.at(explained, np.flatnonzero(hit), pt[l_src])
    slack = pt[s_pt] - explained
    stream = rv["stream"][node_row[gpu]]
    ends, end_nodes = pt[2 * gpu + 1], gpu
    eo = np.argsort(ends, kind="stable")
    for s in distinct(stream):
        cand = np.flatnonzero((stream == s) & (slack > STREAM_WAIT_SLACK_NS))
        other = eo[stream[eo] != s]
        if not len(cand) or not len(other):
            continue
        oe = ends[other]
        j = np.searchsorted(oe, pt[s_pt[cand]], side="right") - 1
        ok = j >= 0
        gap = pt[s_pt[cand[ok]]] - oe[j[ok]]
        good = (gap <= STREAM_WAIT_WINDOW_NS) & (oe[j[ok]] > explained[cand[ok]])
        add(2 * end_nodes[other[j[ok][good]]] + 1, s_pt[cand[ok][good]], EdgeKind.STREAM, 0.0)
    # host syncs: a blocking call ends right after the GPU operation it waited for
    name = rv["name"][node_row[call]]
    is_sync = np.isin(name, sync_ids)
    is_copy = np.isin(name, copy_ids)
    c_start, c_end = pt[2 * call], pt[2 * call + 1]
    target = np.full(len(call), -1, dtype=np.int64)
    if is_copy.any():
        partner = rv["partner"][node_row[call]]
        g_of_row = np.full(rv.n, -1, dtype=np.int64)
        g_of_row[node_row[gpu]] = gpu
        tg = np.where(is_copy & (partner >= 0), g_of_row[np.maximum(partner, 0)], -1)
        target = np.where(tg >= 0, tg, target)
    if is_sync.any():
        si = np.flatnonzero(is_sync)  # the latest GPU end by the call's end (with tolerance)
        j = np.searchsorted(ends[eo], c_end[si] + SYNC_TOLERANCE_NS, side="right") - 1
        target[si[j >= 0]] = end_nodes[eo[j[j >= 0]]]
    ok = target >= 0
    ok[ok] = (pt[2 * target[ok] + 1] > c_start[ok]) & (pt[2 * target[ok] + 1] <= c_end[ok] + SYNC_TOLERANCE_NS)
    add(2 * target[ok] + 1, 2 * call[ok] + 1, EdgeKind.SYNC, 0.0)
    rv.release_pages()  # (the rank's edges are made: its columns' pages go back until read again)
    return out
