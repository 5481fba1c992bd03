"""Replay of the job graph: every point re-timed as the latest of its incoming edges.

Each edge gets a **delay**. The edge that explains a point's measured time (its latest source, the smallest lag;
the chain edge on ties) keeps its measured lag, so time nothing explains (a thread busy between calls, a stream
idle for no traced reason) stays as measured slack; every other edge gets ``min(lag, floor)``. The unmodified
replay therefore gives back the measured times wherever the measured edges agree with each other (the error left
is where they do not: clocks of two ranks that disagree, operations that overlap on one stream). A what-if changes
delays (:mod:`holotrace.analysis.critical_path.job_what_if`) and replays.

Solving: every point is the latest of its inputs, ``v[k] = max(x[k], v[k-1] + d[k])`` along its chain with ``x[k]``
the latest cross edge into it. The compiled sweep (``_replay``) settles each point once, after its inputs
(topological order). Without it, or on a graph with a cycle, passes solve it: along a chain the recurrence is a
running maximum after subtracting the chain's cumulative delays, so each pass solves every chain at once for given
cross-chain inputs ``x``; passes repeat until nothing moves (one pass per cross-chain hop of the longest dependency
path). Both give the same times (to float rounding, well under a nanosecond).

Steps (when each rank's and the job's steps end under given times, the tables a replay reports):
:mod:`holotrace.analysis.critical_path.step_times`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.delays import Delays, base_delays, shared_base
from holotrace.analysis.critical_path.job_graph import JobGraph, NodeType
from holotrace.analysis.critical_path.step_times import (
    job_step_table,
    replay_step_tables,
    replay_tables,
    step_ends,
    step_ends_of,
    step_ends_table,
    step_points,
    step_table,
)
from holotrace.table import Table

try:
    from holotrace.analysis.critical_path import _replay as _compiled
    from holotrace.analysis.critical_path._replay import relax as _relax
    from holotrace.analysis.critical_path._replay import sweep as _sweep

    _NARROW = 4 in getattr(_compiled, "INDEX_BYTES", ())  # the topology's indices may be int32 (a build before: no)
    _relax_topo = getattr(_compiled, "relax_topo", None)  # (a build before it: relax, the same times)
    _topo_layout = getattr(_compiled, "topo_layout", None)
    _GRAPH_NARROW = 4 in getattr(_compiled, "GRAPH_BYTES", ())  # the sweep reads the graph's int32 arrays as they are
except ImportError:  # not built (a source checkout without build_ext): the passes solve it
    _sweep = _relax = _relax_topo = _topo_layout = None
    _NARROW = _GRAPH_NARROW = False

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Delays",
    "Replay",
    "base_delays",
    "compiled_order",
    "gpu_idle",
    "replay",
    "replay_step_ends",
    "replay_tables",
    "shared_base",
    "sweep_built",
    "solve",
    "job_step_table",
    "replay_step_tables",
    "step_ends",
    "step_ends_table",
    "step_table",
]

MAX_PASSES = 100_000
WINDOW_POINTS = 8_192  # points per time window of the solver


@dataclass
class _Plan:
    """What solving needs of the graph and the edges that hold, whatever the delays: the chain positions of each
    time window (ascending), the edges into each window (sorted by destination), and the edges that run backwards
    across windows. Kept on the graph for the edge set of the unmodified replay (every edge holds)."""

    pos: np.ndarray  # chain positions, window by window, ascending within a window
    p_cut: np.ndarray  # window k's positions: pos[p_cut[k]:p_cut[k + 1]]
    edges: np.ndarray  # indices into the held edges, window by window, sorted by destination within a window
    e_cut: np.ndarray
    back: np.ndarray  # held edges whose source lies in a later window than their destination
    fixed_pos: np.ndarray  # per chain position: a chain's first point with no incoming edge (kept at its time)


def _plan(g: JobGraph, src: np.ndarray, dst: np.ndarray, window_points: int) -> _Plan:
    order, first = g.chain_order, g.chain_first
    n_pts = len(g.point_time)
    has_in = np.zeros(n_pts, dtype=bool)
    has_in[dst] = True
    pos_of = g.point_of_position()
    # windows of positions by measured time (each chain's points in a window are consecutive positions)
    t_pos = g.point_time[order]
    n_win = max(1, len(order) // max(window_points, 1))
    edges_t = np.quantile(t_pos, np.linspace(0, 1, n_win + 1)[1:-1]) if n_win > 1 and len(order) else np.zeros(0)
    win_of_pos = np.searchsorted(edges_t, t_pos, side="right")
    win_of_dst = win_of_pos[pos_of[dst]]
    e_order = np.lexsort((dst, win_of_dst))  # stable: by window, then destination, then edge order
    e_cut = np.searchsorted(win_of_dst[e_order], np.arange(n_win + 1))
    p_order = np.argsort(win_of_pos, kind="stable")  # ascending positions within each window
    p_cut = np.searchsorted(win_of_pos[p_order], np.arange(n_win + 1))
    back = np.flatnonzero(win_of_pos[pos_of[src]] > win_of_dst)
    return _Plan(p_order, p_cut, e_order, e_cut, back, first & ~has_in[order])


def solve(
    g: JobGraph, d: Delays, *, window_points: int = WINDOW_POINTS, passes: bool = False
) -> tuple[np.ndarray, int]:
    """Replayed time of every point, and the number of passes it took (1 for the sweep).

    The compiled sweep settles every point once (unless ``passes``). Passes: dependencies run forward in measured
    time, so the points are solved window by window in time order (each window's passes see the earlier windows
    settled, which keeps the passes per window few). An edge that runs backwards across windows is checked
    afterwards: if one moves its destination, passes over the whole graph settle everything again."""
    n_pts = len(g.point_time)
    order, first = g.chain_order, g.chain_first
    every = bool(d.keep.all())
    src, dst, w = (g.src, g.dst, d.cross) if every else (g.src[d.keep], g.dst[d.keep], d.cross[d.keep])
    if _sweep is not None and not passes:
        v = _swept(g, d, dst, every)
        if v is not None:
            return v, 1
    key = ("plan", window_points)
    plan = g.memo.get(key) if every else None
    if plan is None:
        plan = _plan(g, src, dst, window_points)
        if every:
            g.memo[key] = plan
    fixed_pos = plan.fixed_pos
    dd = np.where(first, 0.0, d.chain)
    v = np.full(n_pts, -np.inf)
    passes = 0
    local = np.full(n_pts, -1, dtype=np.int64)
    for k in range(len(plan.p_cut) - 1):
        pos = plan.pos[plan.p_cut[k] : plan.p_cut[k + 1]]
        sel = plan.edges[plan.e_cut[k] : plan.e_cut[k + 1]]
        v, n = _settle(g, v, pos, src[sel], dst[sel], w[sel], dd, first, fixed_pos, local, by_dst=True)
        passes += n
    b = plan.back
    if len(b) and np.any(v[src[b]] + w[b] > v[dst[b]]):
        v, n = _settle(g, v, np.arange(len(order)), src, dst, w, dd, first, fixed_pos, local)
        passes += n
    return v, passes


def sweep_built() -> bool:
    """Whether the compiled sweep is built (a replay then runs without the GIL)."""
    return _sweep is not None


def compiled_order(g: JobGraph) -> bool:
    """Whether replays of ``g`` run the compiled sweep in one pass (it is built and the graph has no cycle): then
    each replay reads only what is kept on the graph (found once) and its own delays, and replays may run on
    threads."""
    return _sweep is not None and _topology(g) is not None


def _swept(g: JobGraph, d: Delays, dst: np.ndarray, every: bool) -> np.ndarray | None:
    """The compiled sweep's times, or None when the graph has a cycle. The order the points settle in and the
    edges into each point do not depend on the delays: they are kept on the graph, and each replay is one pass."""
    if "topology" not in g.memo and every:  # the first replay: the sweep that orders the points also settles them
        v = np.empty(len(g.point_time))
        return v if _topology(g, d, v) is not None else None
    top = _topology(g)
    if top is None:
        return None
    v = np.empty(len(g.point_time))
    args = _relax_args(g, top, d, dst, every)
    if _relax_topo is None:
        _relax_by_point(g, top, *args, v)
    else:
        _relax_topo(top.topo, top.prev, top.cpos, args[0], top.measured, top.head, top.esrc, top.eidx, *args[1:], v)
    return v


def _relax_args(g: JobGraph, top: _Topology, d: Delays, dst: np.ndarray, every: bool) -> tuple:
    """What a replay under ``d`` gives the compiled relax besides the graph: the fixed points (by position in
    topo), the chain delays and the cross delays (-inf: an edge that does not hold)."""
    fixed = top.fixed
    if not every:  # a dropped edge holds no longer: a first point it alone fed keeps its measured time
        has_in = np.zeros(len(g.point_time), dtype=bool)
        has_in[dst] = True
        fixed = (top.first & ~has_in[top.order])[top.cpos]
    cross = d.cross if every else np.where(d.keep, d.cross, -np.inf)
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    return fixed, f64(d.chain), f64(cross)  # (the chain delays are read for positions after a chain's first)


def replay_step_ends(g: JobGraph, d: Delays) -> Table:
    """``step_ends_table(g, solve(g, d)[0])``, the same table. Once the graph's topological order is known (the
    compiled sweep, a first replay done), the times are kept by position in that order and only the steps' points
    are read: no array of every point's time, no writes scattered over it."""
    top = g.memo.get("topology") if _relax_topo is not None else None
    at = _step_positions(g, top) if top is not None else None
    if at is None:
        return step_ends_table(g, solve(g, d)[0])
    every = bool(d.keep.all())
    fixed, dd, cross = _relax_args(g, top, d, g.dst if every else g.dst[d.keep], every)
    vt = np.empty(len(g.point_time))
    _relax_topo(top.topo, top.prev, top.cpos, fixed, top.measured, top.head, top.esrc, top.eidx, dd, cross, vt, False)
    return step_ends_of(g, *(vt[a] for a in at))


def _step_positions(g: JobGraph, top: _Topology) -> tuple | None:
    """The positions in the topological order of the points a step table reads (kept on the graph); None when the
    steps are grouped by label."""
    if "step_positions" not in g.memo:
        pts = step_points(g)
        out = None
        if pts is not None:
            at = np.empty(len(top.topo), dtype=top.topo.dtype)
            at[top.topo] = np.arange(len(top.topo), dtype=top.topo.dtype)
            out = tuple(at[p] for p in pts)
        g.memo["step_positions"] = out
    return g.memo["step_positions"]


def _relax_by_point(g: JobGraph, top: _Topology, fixed: np.ndarray, dd: np.ndarray, w: np.ndarray, v: np.ndarray):
    """The replay by the compiled relax of a build before relax_topo: the same points in the same order, each
    the same maximum (the graph by point, found once)."""
    if "topology_by_point" not in g.memo:
        n, it = len(top.topo), top.topo.dtype
        pos = np.empty(n, dtype=it)
        pos[top.order] = np.arange(n, dtype=it)
        dst = np.ascontiguousarray(g.dst, dtype=np.int64)
        in_head = np.zeros(n + 1, dtype=it)
        in_head[1:] = np.cumsum(np.bincount(dst, minlength=n))
        src = np.ascontiguousarray(g.src, dtype=np.int64)
        order = np.ascontiguousarray(top.order, dtype=np.int64)  # (relax reads int64 chains)
        g.memo["topology_by_point"] = (pos, in_head, np.argsort(dst, kind="stable").astype(it, copy=False), src, order)
    pos, in_head, in_edge, src, order = g.memo["topology_by_point"]
    by_pos = np.empty(len(fixed), dtype=bool)
    by_pos[top.cpos] = fixed
    _relax(top.topo, pos, order, top.first, dd, by_pos, top.measured, in_head, in_edge, src, w, v)


@dataclass
class _Topology:
    """What the compiled sweep reads of a graph, whatever the delays (contiguous arrays), laid out in the order the
    points settle in: position ``k`` is the point ``topo[k]``."""

    topo: np.ndarray  # the points in an order that settles each after its inputs (every edge held; a subset too)
    cpos: np.ndarray  # per k: the point's chain position (its chain delay is read there)
    prev: np.ndarray  # per k: the position in topo of the point's chain predecessor (-1: the first of its chain)
    fixed: np.ndarray  # per k: kept at its measured time (a chain's first point without an incoming edge)
    head: np.ndarray  # the cross edges into topo[k]: esrc[head[k]:head[k + 1]], in edge order
    esrc: np.ndarray  # ... their sources' positions in topo
    eidx: np.ndarray  # ... and the edges themselves (their delays are read there)
    order: np.ndarray  # chain_order
    first: np.ndarray  # chain_first
    measured: np.ndarray  # point_time


def _topology(g: JobGraph, d: Delays | None = None, v: np.ndarray | None = None) -> _Topology | None:
    """The graph's :class:`_Topology`, None when it has a cycle; computed once per graph. With delays ``d`` under
    which every edge holds, the sweep that finds the order also writes their replayed times into ``v``."""
    if "topology" in g.memo:
        return g.memo["topology"]
    n = len(g.point_time)
    as_is = _GRAPH_NARROW and _relax_topo is not None  # the graph's own index arrays (int32 or int64), no wider copy

    def index(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=a.dtype if as_is and a.dtype in (np.int32, np.int64) else np.int64)

    order, src, dst = index(g.chain_order), index(g.src), index(g.dst)
    first = np.ascontiguousarray(g.chain_first, dtype=bool)
    measured = np.ascontiguousarray(g.point_time, dtype=np.float64)
    has_in = np.zeros(n, dtype=bool)
    has_in[dst] = True
    fixed = first & ~has_in[order]
    it = np.int32 if _NARROW and max(n, len(src)) < 2**31 - 1 else np.int64  # (the kept indices: half the memory)
    topo = np.empty(n, dtype=it)
    f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
    dd, w = (f64(d.chain), f64(d.cross)) if d is not None else (np.zeros(n), np.zeros(len(src)))
    settled = _sweep(order, first, dd, fixed, measured, src, dst, w, v if v is not None else np.empty(n), topo)
    del dd, w
    out = None
    if settled == n:
        out = _Topology(topo, *_layout(topo, order, first, fixed, src, dst), order, first, measured)
    g.memo["topology"] = out
    return out


def _layout(topo, order, first, fixed, src, dst) -> tuple:
    """:class:`_Topology`'s ``cpos, prev, fixed, head, esrc, eidx`` from the order ``topo`` (compiled when built)."""
    n, e, it = len(topo), len(src), topo.dtype
    if _topo_layout is not None and max(n, e) < 2**31 - 1:
        prev, cpos, head = np.empty(n, dtype=it), np.empty(n, dtype=it), np.empty(n + 1, dtype=it)
        fixed_k, esrc, eidx = np.empty(n, dtype=bool), np.empty(e, dtype=it), np.empty(e, dtype=it)
        _topo_layout(topo, order, first, fixed, src, dst, prev, cpos, fixed_k, head, esrc, eidx)
        return cpos, prev, fixed_k, head, esrc, eidx
    at = np.empty(n, dtype=it)  # per point: its position in topo
    at[topo] = np.arange(n, dtype=it)
    pos = np.empty(n, dtype=it)
    pos[order] = np.arange(n, dtype=it)
    cpos = pos[topo]
    del pos
    prev = at[order[np.maximum(cpos - 1, 0)]]
    prev[first[cpos]] = -1
    dk = at[dst]
    eidx = np.argsort(dk, kind="stable").astype(it, copy=False)  # (into a point: ascending edges, as relax)
    head = np.zeros(n + 1, dtype=it)
    head[1:] = np.cumsum(np.bincount(dk, minlength=n))  # (summed in int64: into int32 directly is slow)
    return cpos, prev, fixed[cpos], head, at[src[eidx]], eidx


def _settle(g, v, pos, src, dst, w, dd, first, fixed_pos, local, *, by_dst: bool = False):
    """Passes over the chain positions ``pos`` (ascending) and the cross edges into them until nothing moves
    (``by_dst``: the edges come sorted by destination)."""
    order = g.chain_order
    if not len(pos):
        return v, 0
    pts = order[pos]
    if not by_dst:
        srt = np.argsort(dst, kind="stable")
        src, dst, w = src[srt], dst[srt], w[srt]
    cut = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else np.zeros(0, dtype=np.int64)
    local[pts] = np.arange(len(pts))  # (a scratch array of all points: only this window's entries are read)
    targets = local[dst[cut]] if len(dst) else np.zeros(0, dtype=np.int64)
    seg = first[pos] | np.r_[True, pos[1:] != pos[:-1] + 1]
    carry_from = np.where(seg & ~first[pos], order[np.maximum(pos - 1, 0)], -1)
    has_carry = carry_from >= 0
    d_local = np.where(seg, 0.0, dd[pos])
    cs = np.cumsum(d_local)
    seg_start = np.maximum.accumulate(np.where(seg, np.arange(len(pos)), 0))
    c_cum = cs - cs[seg_start]
    bounds = np.r_[np.flatnonzero(seg), len(pos)]
    runs = [(a, b) for a, b in pairwise(bounds.tolist()) if b - a > 1]  # a one-point segment is its own maximum
    few = len(runs) <= 256  # few chain segments: one running maximum each beats a grouped one
    seg_id = None if few else np.cumsum(seg)
    fixed = fixed_pos[pos]
    measured = g.point_time[pts]
    for n in range(1, MAX_PASSES + 1):
        x = np.full(len(pos), -np.inf)
        if len(dst):
            x[targets] = np.maximum.reduceat(v[src] + w, cut)
        x[fixed] = measured[fixed]
        x[has_carry] = np.maximum(x[has_carry], v[carry_from[has_carry]] + dd[pos[has_carry]])
        y = x - c_cum
        if few:
            for a, b in runs:
                np.maximum.accumulate(y[a:b], out=y[a:b])
        else:
            y = _segment_cummax(y, seg_id)
        new = c_cum + y
        old = v[pts]
        fin = np.isfinite(new)
        done = np.array_equal(fin, np.isfinite(old)) and (not fin.any() or np.abs(new[fin] - old[fin]).max() < 0.5)
        v[pts] = new
        if done:
            return v, n
    raise RuntimeError("the job graph's replay did not settle: a dependency cycle gains time")


def _segment_cummax(y: np.ndarray, seg_id: np.ndarray) -> np.ndarray:
    """The running maximum of ``y`` within each run of equal ``seg_id`` (ascending along ``y``), exactly: by the
    values' ranks, each run's shifted above the runs before it, in one running maximum of integers."""
    u, r = np.unique(y, return_inverse=True)
    shift = seg_id.astype(np.int64) * len(u)
    return u[np.maximum.accumulate(r.reshape(-1) + shift) - shift]


@dataclass
class Replay:
    """A replay of the job graph: the point times and the job's steps (measured and replayed, ms): ``step_tab``
    (``step, measured_ms, replayed_ms, error_pct, slowest_rank``) and ``rank_tab`` (``rank, step, measured_ms,
    replayed_ms``), also as pandas frames (``steps``, ``rank_steps``). ``times``: the replayed time of every point
    (made again, to the same values, when read after :meth:`release_times`)."""

    graph: JobGraph
    delays: Delays
    _times: np.ndarray | None = field(repr=False)
    passes: int
    step_tab: Table
    rank_tab: Table

    @property
    def times(self) -> np.ndarray:
        t = self._times
        if t is None:
            t = self._times = solve(self.graph, self.delays)[0]
        return t

    def release_times(self) -> None:
        """Let go of the point times (the step tables are kept): for a caller that reads only the steps."""
        self._times = None

    @property
    def steps(self) -> pd.DataFrame:
        return self.step_tab.to_pandas()

    @property
    def rank_steps(self) -> pd.DataFrame:
        return self.rank_tab.to_pandas()


def replay(g: JobGraph, delays: Delays | None = None) -> Replay:
    """Replay ``g`` (unmodified when ``delays`` is None or :func:`shared_base`) and compare with the measured
    steps. The unmodified replay is computed once per graph and kept."""
    d = delays if delays is not None else shared_base(g)
    if d is g.memo.get("base"):
        if "replay" not in g.memo:
            g.memo["replay"] = _replay(g, d)
        return g.memo["replay"]
    return _replay(g, d)


def _replay(g: JobGraph, d: Delays) -> Replay:
    t, passes = solve(g, d)
    steps, rank_steps = replay_step_tables(step_ends_table(g, g.point_time), step_ends_table(g, t))
    return Replay(g, d, t, passes, steps, rank_steps)


def gpu_idle(g: JobGraph) -> pd.DataFrame:
    """Measured GPU idle time per (rank, step) in ms, within the job's step (:func:`step_table`: from the end of
    the job's previous step to the end of this one): the step's time minus the union of the rank's GPU
    operations inside it, a collective kernel counting from its last member's arrival (its wait is idle)."""
    import pandas as pd

    job = step_table(step_ends(g, g.point_time))
    if job.empty:
        return pd.DataFrame({"rank": [], "step": [], "idle_ms": []})
    hi = job["end"].to_numpy()
    lo = hi - job["time"].to_numpy()
    arrival = np.full(max(int(g.node_coll.max()) + 1, 1) if len(g.node_coll) else 1, -np.inf)
    arr = np.flatnonzero(g.node_type == NodeType.ARRIVAL)
    arrival[g.node_coll[arr]] = g.point_time[2 * arr]
    rows = []
    for r in g.ranks():
        nodes = g.rank_nodes(r)
        gpu = nodes[g.node_type[nodes] == NodeType.GPU]
        start = g.point_time[2 * gpu]
        c = g.node_coll[gpu]
        start = np.where(c >= 0, np.maximum(start, arrival[np.maximum(c, 0)]), start)
        busy = _covered(start, g.point_time[2 * gpu + 1], lo, hi)
        rows.append(pd.DataFrame({"rank": r, "step": job["step"].to_numpy(), "idle_ms": (hi - lo - busy) / 1e6}))
    return pd.concat(rows, ignore_index=True)


def _covered(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of the union of intervals ``[s, e)`` inside each window ``[lo, hi)``."""
    if not len(s):
        return np.zeros(len(lo))
    return _cover_of(*_union(s, e), lo, hi)


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals ``[s, e)`` (at least one) as disjoint runs ``[us, ue)``, ascending."""
    o = np.argsort(s, kind="stable")
    s, e = s[o], np.maximum.accumulate(e[o])
    new = np.r_[True, s[1:] > e[:-1]]
    return s[new], np.r_[e[np.flatnonzero(new)[1:] - 1], e[-1:]]


def _cover_of(us: np.ndarray, ue: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of the runs ``[us, ue)`` (:func:`_union`) inside each window ``[lo, hi)``."""
    cum = np.r_[0.0, np.cumsum(ue - us)]

    def upto(x):
        i = np.searchsorted(us, x, side="right")
        j = np.maximum(i - 1, 0)
        return np.where(i > 0, cum[j] + np.clip(np.minimum(x, ue[j]) - us[j], 0, None), 0.0)

    return upto(hi) - upto(lo)
