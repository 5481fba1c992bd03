"""Host time of the job's what-ifs: how much of each CPU gap lies inside given CPU events (data loading, a CPU
operator), the host time between calls inside each CPU operator, and the operators around the blocking calls that
waited longest (see :mod:`holotrace.analysis.critical_path.job_what_if`; ``info``: its ``NodeInfo``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import Delays, _cover_of, _covered, _union
from holotrace.analysis.grouped import group_sum, unique_ids
from holotrace.model import classify
from holotrace.order_stats import distinct

__all__ = [
    "cpu_op_covers",
    "cpu_op_totals",
    "cpu_parents_later",
    "gap_cover",
    "gap_covers",
    "intervals",
    "sync_evidence",
]


def gap_cover(g: JobGraph, info, intervals: dict) -> np.ndarray:
    """Per chain position of a CPU gap: how much of it lies inside ``intervals`` ({(rank, thread): (starts, ends)}
    on the job's clock, one rank-thread's intervals possibly nested); 0 elsewhere."""
    out = np.zeros(len(g.chain_order))
    pos, cover = gap_covers(g, info, intervals)
    out[pos] = cover
    return out


def gap_covers(g: JobGraph, info, intervals: dict) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gap_cover` at the gaps of the threads ``intervals`` names alone: chain positions (each once) and
    covers, every gap with a cover among them (a thread's gaps in time order: those the intervals reach; else all
    its gaps)."""
    pos, lo, hi, groups = _gaps(g, info)
    ordered = g.memo.setdefault("cpu_gaps_ordered", {})
    at, cover = [], []
    for key, (s, e) in intervals.items():
        m = groups.get(key)
        if m is None or not len(s):
            continue
        if key not in ordered:
            ordered[key] = _ascending(lo[m]) and _ascending(hi[m])
        if ordered[key]:
            m, c = _covered_ordered(s, e, lo[m], hi[m], m)
        else:
            c = _covered(s, e, lo[m], hi[m])
        at.append(pos[m])
        cover.append(c)
    if not at:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(at), np.concatenate(cover)


def _ascending(x: np.ndarray) -> bool:
    return bool(np.all(x[1:] >= x[:-1]))


def _covered_ordered(s, e, lo, hi, m) -> tuple[np.ndarray, np.ndarray]:
    """``replay._covered(s, e, lo, hi)`` at the windows the intervals reach (the windows' starts and ends each in
    ascending order): those windows of ``m`` and their covers, the same numbers."""
    us, ue = _union(s, e)
    # the windows each union meets: end after its start, start before its end (a run, the windows being ordered)
    a = np.searchsorted(hi, us, side="right")
    b = np.searchsorted(lo, ue, side="left")
    some = a < b
    n = len(lo)
    depth = np.cumsum(np.bincount(a[some], minlength=n + 1) - np.bincount(b[some], minlength=n + 1))
    w = np.flatnonzero(depth[:n] > 0)
    return m[w], _cover_of(us, ue, lo[w], hi[w])


def _gaps(g: JobGraph, info) -> tuple:
    """The CPU gaps (chain positions, start and end times) and, per (rank, thread), which of them are its (ascending);
    kept on the graph."""
    if "cpu_gaps" in g.memo:
        return g.memo["cpu_gaps"]
    pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    hi = g.point_time[g.chain_order[pos]]
    lo = g.point_time[g.chain_order[pos - 1]]
    # a CPU chain is one (rank, thread), its positions consecutive: the gaps of a (rank, thread) are one run of
    # chains, in ascending positions. A run starts at a gap with a chain's first point at or before it and after the
    # previous gap (a search per chain, not per gap); its rank and thread are read there
    cut = distinct(np.r_[0, np.searchsorted(pos, np.flatnonzero(g.chain_first))]) if len(pos) else pos[:0]
    cut = cut[cut < len(pos)]
    bounds = list(zip(cut.tolist(), np.r_[cut[1:], len(pos)].tolist()))
    node = g.chain_order[pos[cut]] // 2
    keys = zip(g.node_rank[node].tolist(), _threads(g, pos[cut], node).tolist())
    groups = {k: np.arange(a, b) for k, (a, b) in zip(keys, bounds)}
    if len(groups) != len(cut):  # (a (rank, thread) on more than one chain: grouped by key)
        node = g.chain_order[pos] // 2
        rk, th = g.node_rank[node], _threads(g, pos, node)
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
        th[a:b][cpu] = rv.at("pid", rows) * np.int64(1_000_003) + rv.at("tid", rows)
    return th


def intervals(g: JobGraph, rows_of_rank: dict) -> dict:
    """{(rank, thread): (starts, ends)} on the job's clock for the given rows of each rank (ascending rows)."""
    out = {}
    for r, rows in rows_of_rank.items():
        if not len(rows):
            continue
        rv = g.view[r]
        shift = _shift(g, r)
        th = rv.at("pid", rows) * np.int64(1_000_003) + rv.at("tid", rows)
        ts, end = rv["ts"][rows], rv["end"][rows]
        for t, sel in _groups(th):
            out[(r, t)] = ((ts[sel] + shift).astype(np.float64), (end[sel] + shift).astype(np.float64))
    return out


def _groups(keys: np.ndarray) -> list:
    """``(key, positions)`` per distinct key of ``keys``, ascending keys, each key's positions ascending: slices
    where each key is one run (a thread's rows together, the ranks in order), else the positions of a stable sort."""
    if not len(keys):
        return []
    cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    first = keys[np.r_[0, cut]].tolist()
    if len(set(first)) == len(first):
        bounds = np.r_[0, cut, len(keys)].tolist()
        return sorted((k, slice(a, b)) for k, a, b in zip(first, bounds, bounds[1:]))
    o = np.argsort(keys, kind="stable")
    cut = np.flatnonzero(keys[o][1:] != keys[o][:-1]) + 1
    bounds = np.r_[0, cut, len(keys)].tolist()
    return [(int(keys[o[a]]), o[a:b]) for a, b in zip(bounds, bounds[1:])]


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
    return _parents_once(view, r).get()


def cpu_parents_later(view, ranks) -> Callable[[], None]:
    """Reserve on ``view`` the CPU parents of ``ranks`` that the CPU-operator and host-sync fixes read, and return
    what makes them: a command can run it on another thread while the job graph is built. A fix that asks for a
    rank's parents first makes them itself; one that asks while they are being made waits for them (each rank's
    are made once)."""
    once = [_parents_once(view, r) for r in ranks]  # (reserved here: the slots exist before either thread reads)

    def make() -> None:
        for o in once:
            o.get()

    return make


def _parents_once(view, r: int) -> _Once:
    from holotrace.analysis.callstack import cpu_parents

    return view.derived(("cpu_parents", r), lambda: _Once(lambda: cpu_parents(view, r)))


class _Once:
    """A value made once, by the first thread that asks; the others wait for it."""

    __slots__ = ("_make", "_lock", "_value")

    def __init__(self, make: Callable[[], np.ndarray]):
        self._make, self._lock, self._value = make, threading.Lock(), None

    def get(self) -> np.ndarray:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._make()
                    self._make = None
        return self._value


def cpu_op_totals(g: JobGraph, info, gap_pos: np.ndarray, base: Delays) -> dict:
    """Per CPU operator (name id): the host time between calls inside it (ns, every rank of the graph)."""
    view = g.view
    dst = g.chain_order[gap_pos] // 2
    wait = base.chain[gap_pos]
    call = g.node_type[dst] == NodeType.CALL
    tot: dict = {}
    for r, sel in _groups(g.node_rank[dst]):
        rv = view[r]
        up = _parents(view, r)[g.node_row[dst[sel]]]
        ok = (up >= 0) & call[sel]
        ok[ok] = rv["kind"][up[ok]] == int(classify.Kind.CPU_OP)
        ids, at = unique_ids(rv["name"][up[ok]])
        for k, v in zip(ids.tolist(), group_sum(at, wait[sel][ok], len(ids)).tolist()):
            tot[int(k)] = tot.get(int(k), 0.0) + float(v)
    return tot


def cpu_op_covers(g, info, opts, gap_pos, base):
    """The ``opts.top`` CPU operators holding the most host time between calls (or ``opts.cpu_ops``), and each
    one's gap covers (:func:`gap_covers`: chain positions and covers)."""
    view = g.view
    ranks = distinct(g.node_rank[g.chain_order[gap_pos] // 2]).tolist()
    if opts.cpu_ops is not None:
        named = [(n, view.name_ids({n})) for n in opts.cpu_ops]
    else:
        top = sorted(cpu_op_totals(g, info, gap_pos, base).items(), key=lambda kv: (-kv[1], kv[0]))[: opts.top]
        named = [(view.strings[i], [i]) for i, _ in top]
    for label, rows in zip([n for n, _ in named], _rows_named(view, ranks, [ids for _, ids in named])):
        yield label, gap_covers(g, info, intervals(g, rows))


def _rows_named(view, ranks: list, named: list) -> list:
    """Per list of string ids: {rank: the rows with one of those names} (every list found in one pass over a rank's
    names when no id is in two lists)."""
    ids = [np.asarray(i, dtype=np.int64) for i in named]
    code = np.full(len(view.strings) + 1, -1, dtype=np.int16)  # per string id (the last entry: id -1)
    for j, i in enumerate(ids):
        code[i] = j
    if len(ids) >= 2**15 or sum(len(distinct(i)) for i in ids) != int((code >= 0).sum()):
        out = []
        for i in ids:  # (a name in two lists: each its own pass)
            mine = np.zeros(len(view.strings) + 1, dtype=bool)
            mine[i] = True
            out.append({r: np.flatnonzero(mine[view[r]["name"]]) for r in ranks})
        return out
    out = [{} for _ in ids]
    for r in ranks:
        c = code[view[r]["name"]]
        hit = np.flatnonzero(c >= 0)
        o = np.argsort(c[hit], kind="stable")  # (each list's rows ascending)
        bounds = np.searchsorted(c[hit][o], np.arange(len(ids) + 1)).tolist()
        for j in range(len(ids)):
            out[j][r] = hit[o[bounds[j] : bounds[j + 1]]]
    return out
