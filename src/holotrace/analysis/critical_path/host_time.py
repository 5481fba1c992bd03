"""Host time of the job's what-ifs: how much of each CPU gap lies inside given CPU events (data loading, a CPU
operator), the host time between calls inside each CPU operator, and the operators around the blocking calls that
waited longest (see :mod:`holotrace.analysis.critical_path.job_what_if`; ``info``: its ``NodeInfo``)."""

from __future__ import annotations

import numpy as np

from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import Delays, _covered
from holotrace.analysis.grouped import group_sum, unique_ids
from holotrace.model import classify

__all__ = ["cpu_op_covers", "cpu_op_totals", "gap_cover", "gap_covers", "intervals", "sync_evidence"]


def gap_cover(g: JobGraph, info, intervals: dict) -> np.ndarray:
    """Per chain position of a CPU gap: how much of it lies inside ``intervals`` ({(rank, thread): (starts, ends)}
    on the job's clock, one rank-thread's intervals possibly nested); 0 elsewhere."""
    out = np.zeros(len(g.chain_order))
    pos, cover = gap_covers(g, info, intervals)
    out[pos] = cover
    return out


def gap_covers(g: JobGraph, info, intervals: dict) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gap_cover` at the gaps of the threads ``intervals`` names alone: their chain positions (each once)
    and their covers."""
    pos, lo, hi, groups = _gaps(g, info)
    at, cover = [], []
    for key, (s, e) in intervals.items():
        m = groups.get(key)
        if m is not None and len(s):
            at.append(pos[m])
            cover.append(_covered(s, e, lo[m], hi[m]))
    if not at:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(at), np.concatenate(cover)


def _gaps(g: JobGraph, info) -> tuple:
    """The CPU gaps (chain positions, start and end times) and, per (rank, thread), which of them are its (ascending);
    kept on the graph."""
    if "cpu_gaps" in g.memo:
        return g.memo["cpu_gaps"]
    pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    node = g.chain_order[pos] // 2
    hi = g.point_time[g.chain_order[pos]]
    lo = g.point_time[g.chain_order[pos - 1]]
    rk, th = g.node_rank[node], _threads(g, pos, node)
    # a CPU chain is one (rank, thread), its positions consecutive: the gaps of a (rank, thread) are one run of
    # chains, in ascending positions
    ch = np.searchsorted(np.flatnonzero(g.chain_first), pos, side="right")  # (the chain of each: its number + 1)
    cut = np.flatnonzero(np.r_[True, ch[1:] != ch[:-1]]) if len(pos) else np.zeros(0, dtype=np.int64)
    bounds = zip(cut.tolist(), np.r_[cut[1:], len(pos)].tolist())
    groups = {(int(rk[a]), int(th[a])): np.arange(a, b) for a, b in bounds}
    if len(groups) != len(cut):  # (a (rank, thread) on more than one chain: grouped by key)
        srt = np.lexsort((th, rk))  # stable: ascending positions within a (rank, thread)
        cut = np.flatnonzero(np.r_[True, (rk[srt][1:] != rk[srt][:-1]) | (th[srt][1:] != th[srt][:-1])])
        bounds = zip(cut.tolist(), np.r_[cut[1:], len(srt)].tolist())
        groups = {(int(rk[srt[a]]), int(th[srt[a]])): srt[a:b] for a, b in bounds}
    g.memo["cpu_gaps"] = out = (pos, lo, hi, groups)
    return out


def _threads(g: JobGraph, pos: np.ndarray, node: np.ndarray) -> np.ndarray:
    """The thread key of the nodes at chain positions ``pos`` (ascending), as ``NodeInfo.thread`` gives it: read
    rank by rank for these nodes only."""
    th = np.full(len(pos), -1, dtype=np.int64)
    for r, span in g.rank_positions().items():
        a, b = np.searchsorted(pos, [span.start, span.stop]).tolist()
        if a == b:
            continue
        nd = node[a:b]
        cpu = g.node_type[nd] != NodeType.GPU
        rows, rv = g.node_row[nd[cpu]], g.view[r]
        th[a:b][cpu] = rv["pid"][rows] * np.int64(1_000_003) + rv["tid"][rows]
    return th


def intervals(g: JobGraph, rows_of_rank: dict) -> dict:
    """{(rank, thread): (starts, ends)} on the job's clock for the given rows of each rank."""
    out = {}
    for r, rows in rows_of_rank.items():
        if not len(rows):
            continue
        rv = g.view[r]
        shift = _shift(g, r)
        th = rv["pid"][rows] * np.int64(1_000_003) + rv["tid"][rows]
        for t in np.unique(th):
            sel = rows[th == t]
            out[(r, int(t))] = ((rv["ts"][sel] + shift).astype(np.float64), (rv["end"][sel] + shift).astype(np.float64))
    return out


def _shift(g: JobGraph, r: int) -> int:
    """What turns a rank's own times into the graph's (ns from the job origin, offsets applied)."""
    v = g.view[r]
    return v.clock_offset - g.origin_ns + g.offsets_ns.get(r, 0)


def sync_evidence(g, info, edges, n) -> list:
    """The operators around the blocking calls that waited longest: ``op > call`` (outermost CPU operator)."""
    if not len(edges):
        return []
    call = g.dst[edges] // 2
    w = g.point_time[g.src[edges]] - g.point_time[2 * call]
    w = np.where(w < 0, 0.0, w)
    # the (rank, name) pairs by their summed wait, the longest first (equal sums: by rank, then name)
    pairs, at = np.unique(np.stack([g.node_rank[call], info.name[call]], axis=1), axis=0, return_inverse=True)
    sums = group_sum(at.reshape(-1), w, len(pairs))
    top = pairs[np.argsort(-sums, kind="stable")]
    out = []
    for r, nm in top[:n].tolist():
        rv = g.view[int(r)]
        rows = g.node_row[call[(g.node_rank[call] == r) & (info.name[call] == nm)]]
        parent = _parents(g.view, int(r))
        p, outer = rows[:1].copy(), rows[:1].copy()
        for _ in range(64):
            ok = p >= 0
            if not ok.any():
                break
            up = parent[np.maximum(p, 0)]
            is_op = (up >= 0) & (rv["kind"][np.maximum(up, 0)] == int(classify.Kind.CPU_OP))
            outer = np.where(ok & is_op, up, outer)
            p = np.where(ok, up, -1)
        op = g.view.strings[int(rv["name"][outer[0]])]
        call_name = g.view.strings[int(nm)]
        text = f"{op} > {call_name}" if outer[0] != rows[0] else call_name
        if text not in out:
            out.append(text)
    return out


def _parents(view, r: int) -> np.ndarray:
    """The parent row of every row of rank ``r`` on its own thread (the call graph without the backward link), built
    once per view: the host-sync evidence and the CPU operator fixes both read it."""
    from holotrace.analysis.callstack import cpu_parents

    return view.derived(("cpu_parents", r), lambda: cpu_parents(view, r))


def cpu_op_totals(g: JobGraph, info, gap_pos: np.ndarray, base: Delays) -> dict:
    """Per CPU operator (name id): the host time between calls inside it (ns, every rank of the graph)."""
    view = g.view
    dst = g.chain_order[gap_pos] // 2
    tot: dict = {}
    for r in np.unique(g.node_rank[dst]).tolist():
        rv = view[r]
        parent = _parents(view, r)
        sel = g.node_rank[dst] == r
        rows = g.node_row[dst[sel]]
        up = parent[rows]
        ok = (up >= 0) & (g.node_type[dst[sel]] == NodeType.CALL)
        ok[ok] = rv["kind"][up[ok]] == int(classify.Kind.CPU_OP)
        ids, at = unique_ids(rv["name"][up[ok]])
        for k, v in zip(ids.tolist(), group_sum(at, base.chain[gap_pos[sel]][ok], len(ids)).tolist()):
            tot[int(k)] = tot.get(int(k), 0.0) + float(v)
    return tot


def cpu_op_covers(g, info, opts, gap_pos, base):
    """The ``opts.top`` CPU operators holding the most host time between calls (or ``opts.cpu_ops``), and each
    one's gap covers (:func:`gap_covers`: chain positions and covers)."""
    view = g.view
    ranks = np.unique(g.node_rank[g.chain_order[gap_pos] // 2]).tolist()
    if opts.cpu_ops is not None:
        named = [(n, view.name_ids({n})) for n in opts.cpu_ops]
    else:
        top = sorted(cpu_op_totals(g, info, gap_pos, base).items(), key=lambda kv: (-kv[1], kv[0]))[: opts.top]
        named = [(view.strings[i], [i]) for i, _ in top]
    for label, ids in named:
        mine = np.zeros(len(view.strings) + 1, dtype=bool)  # per string id (the last entry: id -1)
        mine[np.asarray(ids, dtype=np.int64)] = True
        rows = {r: np.flatnonzero(mine[view[r]["name"]]) for r in ranks}
        yield label, gap_covers(g, info, intervals(g, rows))
