"""The scale-out replay, rank by rank: what each rank's map returns, in two phases, so that the driver can replay
the job at collective granularity (:mod:`holotrace.analysis.critical_path.segment_replay`) without any event.

**Phase 1** (:func:`rank_collectives`): the rank's communication kernels as the matcher reads them (group and kind
as text, start and end in ns from the rank's first event), its first event on the common clock, and the totals the
job-wide choices need: GPU compute and host time per step (the straggler fix's median rank), GPU compute per kernel
name and host time per CPU operator (the kernels and operators every rank tries).

**Phase 2** (:func:`rank_segments`, given the driver's :class:`SegmentPlan`): the rank's own job graph (its
threads, streams, launch, stream and sync edges) whose collective members end no earlier than their instance's
arrival (a fixed input: the measured arrival the driver found) plus their transfer, replayed with the base delays
and once per what-if edit. Each replay is kept as **segments**: for every collective member start and every step
start and end, the collective member end it hangs off on the binding path (the latest input, traced back to the
nearest member end) and the length of that path; -1 when the path starts at a point with no input (then the length
is the point's time). Per member also its own duration and its transfer under the edit. The result is
O(collectives x what-ifs), whatever the number of events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path import job_what_if as jw
from holotrace.analysis.critical_path.collectives import CollectiveMatch, rank_kernels
from holotrace.analysis.critical_path.job_graph import EdgeKind, GraphFrame, JobGraph, NodeType, build_job_graph
from holotrace.analysis.critical_path.replay import Delays, base_delays, shared_base, solve, step_ends
from holotrace.analysis.critical_path.straggler_fix import StragglerTables
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COMBINED",
    "RankCollectives",
    "RankSegments",
    "SegmentPlan",
    "Segments",
    "rank_collectives",
    "rank_segments",
]


COMBINED = "+"  # the key of a combination of fixes starts with it: ``+straggler+communication``


@dataclass
class RankCollectives:
    """Phase 1 of one rank (see the module docstring), in plain arrays (a driver holds one per rank)."""

    rank: int
    first_ns: int  # the rank's first event on the common clock; kernel times below count from its first event
    kernels: dict  # column -> array: the matcher's table (group, kind as text) with start, end (ns), name (text)
    totals: dict  # name -> (index, values): ``compute``, ``host`` (per step, ns), ``kernel_time`` (per kernel
    # name), ``cpu_op_time`` (per CPU operator name)

    def series(self, name: str) -> pd.Series:
        import pandas as pd

        index, values = self.totals[name]
        return pd.Series(values, index=index, dtype=np.float64)

    def intern(self, pool: dict) -> RankCollectives:
        """The texts shared with the other ranks' (``pool``): what the driver keeps of a rank as it arrives."""
        for col in ("group", "kind", "name"):
            self.kernels[col] = np.array([pool.setdefault(x, x) for x in self.kernels[col]], dtype=object)
        for key in ("kernel_time", "cpu_op_time"):
            index, values = self.totals[key]
            self.totals[key] = (np.array([pool.setdefault(x, x) for x in index], dtype=object), values)
        return self


@dataclass
class SegmentPlan:
    """The driver's answers to phase 1 that one rank's phase 2 needs."""

    rank: int
    kernels: dict  # the rank's matched members (``CollectiveMatch.kernels``' columns, instances numbered 0..k-1)
    member: np.ndarray  # per row of ``kernels``: the member's id in the job
    arrival: np.ndarray  # per instance of ``kernels``: its measured arrival (ns from ``origin``, offsets applied)
    offset: int
    skew: float
    origin: int
    options: jw.WhatIfOptions
    fixes: tuple = ()  # job-wide fixes to try (the straggler fix is asked for by ``straggler``)
    straggler: tuple | None = None  # (compute, host) of the median rank per step, compute per kernel name
    straggler_in_combos: bool = False  # this rank is the straggler the combined fixes use
    combine: tuple = ()


@dataclass
class Segments:
    """One replay of a rank as segments (see the module docstring); members in :attr:`RankSegments.member` order,
    steps in :attr:`RankSegments.steps` order."""

    src: np.ndarray  # per member start, two segments (rows): the member id whose end it hangs off (-1: none)
    length: np.ndarray  # ... and the path's length (its time when ``src`` is -1)
    own: np.ndarray  # per member: its own duration
    xfer: np.ndarray  # per member: its transfer after the arrival (-inf: the arrival does not hold it)
    start_src: np.ndarray  # per step, two segments (rows): its start's
    start_len: np.ndarray
    end_step: np.ndarray  # the step end's segments: the step (index), the source, the longest path from it
    end_src: np.ndarray
    end_len: np.ndarray


@dataclass
class RankSegments:
    """Phase 2 of one rank: its measured steps and, per try (the first: no fix), its key ``(fix, rank, target)``,
    evidence and :class:`Segments`, packed in a few arrays (a driver holds one of these per rank)."""

    rank: int
    member: np.ndarray  # (M,) member ids
    steps: np.ndarray  # (S,) step numbers
    measured: np.ndarray  # (S, 2): each step's measured start and end (ns from the job's origin)
    keys: list  # per try
    evidence: list  # per try (a tuple of names)
    src: np.ndarray  # (T, 2, M)
    length: np.ndarray  # (T, 2, M)
    own: np.ndarray  # (T, M)
    xfer: np.ndarray  # (T, M)
    start_src: np.ndarray  # (T, 2, S)
    start_len: np.ndarray  # (T, 2, S)
    end_cut: np.ndarray  # (T + 1,): try i's step-end segments are ``end_*[end_cut[i]:end_cut[i + 1]]``
    end_step: np.ndarray
    end_src: np.ndarray
    end_len: np.ndarray

    @classmethod
    def pack(cls, rank, member, steps, measured, tries: list) -> RankSegments:
        """From ``(key, evidence, Segments)`` per try."""
        segs = [t[2] for t in tries]
        cut = np.r_[0, np.cumsum([len(x.end_step) for x in segs])].astype(np.int64)
        return cls(
            rank,
            member,
            steps,
            measured,
            [t[0] for t in tries],
            [tuple(t[1]) for t in tries],
            *(
                np.stack([getattr(x, f) for x in segs])
                for f in ("src", "length", "own", "xfer", "start_src", "start_len")
            ),
            cut,
            *(np.concatenate([getattr(x, f) for x in segs]) for f in ("end_step", "end_src", "end_len")),
        )

    def segments(self, i: int) -> Segments:
        """Try ``i``'s segments."""
        a, b = self.end_cut[i], self.end_cut[i + 1]
        return Segments(
            self.src[i],
            self.length[i],
            self.own[i],
            self.xfer[i],
            self.start_src[i],
            self.start_len[i],
            self.end_step[a:b],
            self.end_src[a:b],
            self.end_len[a:b],
        )


def _texts(view, ids: np.ndarray) -> list:
    u, inv = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    text = [view.strings[int(i)] if i >= 0 else None for i in u]
    return [text[i] for i in inv.reshape(-1)]


def _named(view, s: pd.Series) -> pd.Series:
    import pandas as pd

    return pd.Series(s.to_numpy(), index=_texts(view, s.index.to_numpy()), dtype=np.float64)


def rank_collectives(source, rank: int) -> RankCollectives:
    """Phase 1 of ``rank`` (see the module docstring)."""
    import pandas as pd

    view = job_view(source, NATIVE)
    rv = view[rank]
    base = int(rv["ts"].min()) if rv.n else 0
    k = rank_kernels(view, rank)
    rows = k["row"].to_numpy()
    k = k.assign(
        group=_texts(view, k["group"].to_numpy()),
        kind=_texts(view, k["kind"].to_numpy()),
        start=rv["ts"][rows] - base,
        end=rv["end"][rows] - base,
        name=_texts(view, rv["name"][rows]),
    )
    g = build_job_graph(view, ranks=[rank])
    d = shared_base(g)
    info = jw.node_info(g)
    kdf = jw.compute_table(g, d, info)
    compute = host = (np.zeros(0, dtype=np.int64), np.zeros(0))
    if len(kdf):
        t = StragglerTables.of(g, d, kdf, info.comm)
        compute = t.compute.pair(rank) if rank in t.compute else compute
        host = t.host.pair(rank) if rank in t.host else host
    cpu = jw.cpu_op_totals(g, info, np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP), d)
    packed = lambda x: (x.index.to_numpy(), x.to_numpy(np.float64))  # noqa: E731
    totals = {
        "compute": (compute[0], np.asarray(compute[1], dtype=np.float64)),
        "host": (host[0], np.asarray(host[1], dtype=np.float64)),
        "kernel_time": packed(_named(view, pd.Series(kdf["t"]).groupby(kdf["name"]).sum())),
        "cpu_op_time": packed(_named(view, pd.Series(cpu, dtype=np.float64))),
    }
    return RankCollectives(rank, base + rv.clock_offset, {c: k[c].to_numpy() for c in k.columns}, totals)


def rank_segments(source, plan: SegmentPlan) -> RankSegments:
    """Phase 2 of ``plan.rank`` (see the module docstring)."""

    view = job_view(source, NATIVE)
    r = plan.rank
    match = CollectiveMatch(Table({c: np.asarray(a) for c, a in plan.kernels.items()}))
    frame = GraphFrame(match, {r: plan.offset}, plan.skew, plan.origin, plan.arrival)
    g = build_job_graph(view, ranks=[r], frame=frame)
    base = base_delays(g)
    info = jw.node_info(g)
    fixes = [f for f in plan.fixes if f != "straggler"]
    cands = jw.candidates(g, base, info, plan.options, only=fixes) if fixes else []
    if plan.straggler is not None:
        kdf = jw.compute_table(g, base, info)
        if len(kdf):
            (med_c, med_h), by_name = plan.straggler[:2], plan.straggler[2]
            t = StragglerTables.of(g, base, kdf, info.comm)
            ids = {view.strings[int(i)]: int(i) for i in t.by_name[0]}
            named = [(ids[n], v) for n, v in by_name.items() if n in ids]
            t.by_name = (np.array([i for i, _ in named], dtype=np.int64), np.array([v for _, v in named], np.float64))
            pair = lambda x: (x.index.to_numpy(), x.to_numpy(np.float64))  # noqa: E731
            t.medians = (pair(med_c), pair(med_h))
            cands.insert(0, jw._straggler(g, info, t, r))
    tried = [(None, None, None, [], [])] + [(c.fix, c.rank, c.target, [c], c.evidence) for c in cands]
    for combo in plan.combine:
        parts = []
        for name in combo:
            hit = [c for c in cands if c.fix == name]
            if hit and (name != "straggler" or plan.straggler_in_combos):
                parts.append(hit[0])
        tried.append((COMBINED + "+".join(combo), None, None, parts, []))  # named and evidenced by the driver
    ctx = _Context.of(g, plan)
    xf = np.flatnonzero(g.kind == EdgeKind.XFER)
    tries = []
    for fix, rank, target, parts, ev in tried:
        d = jw.apply(base, parts) if parts else base
        early = d.copy()  # the members' ends held by nothing but their own start
        early.keep[xf] = False
        tries.append(((fix, rank, target), ev, ctx.segments(g, d, solve(g, d)[0], early, solve(g, early)[0])))
    m = step_ends(g, g.point_time).set_index("step").reindex(ctx.steps)
    measured = np.stack([m["start"].to_numpy(np.float64), m["end"].to_numpy(np.float64)], axis=1)
    return RankSegments.pack(r, ctx.member_id, ctx.steps, measured, tries)


@dataclass
class _Context:
    """What tracing needs of the rank's graph, whatever the delays."""

    member_node: np.ndarray
    member_id: np.ndarray
    steps: np.ndarray
    start_pt: np.ndarray  # per step: the point of its start (steps without marks: every work start, ``start_step``)
    start_step: np.ndarray
    end_pt: np.ndarray  # the points a step's end is the latest of, and their steps (index)
    end_step: np.ndarray
    xfer_edge: np.ndarray  # per member: its XFER edge (-1 none)
    stop: np.ndarray  # per point: a member end (a segment's source)
    member_of_point: np.ndarray  # per point: the member id of a member end (-1)

    @classmethod
    def of(cls, g: JobGraph, plan: SegmentPlan) -> _Context:
        nt, st = g.node_type, g.node_step
        gpu = np.flatnonzero(nt == NodeType.GPU)
        mn = gpu[g.node_coll[gpu] >= 0]
        # member ids: the plan's, by the member's row
        by_row = dict(zip(np.asarray(plan.kernels["row"]).tolist(), np.asarray(plan.member).tolist()))
        mid = np.array([by_row[int(x)] for x in g.node_row[mn]], dtype=np.int64)
        n_pts = len(g.point_time)
        stop = np.zeros(n_pts, dtype=bool)
        stop[2 * mn + 1] = True
        mop = np.full(n_pts, -1, dtype=np.int64)
        mop[2 * mn + 1] = mid
        xe = np.full(n_pts, -1, dtype=np.int64)
        xf = np.flatnonzero(g.kind == EdgeKind.XFER)
        xe[g.dst[xf]] = xf
        marks = np.flatnonzero(nt == NodeType.STEP_START)
        if len(marks):
            steps = st[marks]
            sidx = {int(s): i for i, s in enumerate(steps.tolist())}
            ends = np.flatnonzero(nt == NodeType.STEP_END)
            g_in = gpu[np.isin(st[gpu], steps)]
            end_nodes = np.concatenate([ends, g_in])
            end_step = np.array([sidx[int(s)] for s in st[end_nodes]], dtype=np.int64)
            start_pt, start_step = 2 * marks, np.arange(len(marks))
        else:
            work = np.flatnonzero((nt == NodeType.CALL) | (nt == NodeType.GPU))
            steps = np.array([-1] if len(work) else [], dtype=np.int64)
            end_nodes, end_step = work, np.zeros(len(work), dtype=np.int64)
            start_pt, start_step = 2 * work, np.zeros(len(work), dtype=np.int64)
        return cls(mn, mid, steps, start_pt, start_step, 2 * end_nodes + 1, end_step, xe[2 * mn + 1], stop, mop)

    def segments(self, g: JobGraph, d: Delays, t: np.ndarray, early: Delays, t_early: np.ndarray) -> Segments:
        """The segments of two replays under the same edit: with the arrivals fixed at their measured times
        (``d``, ``t``), and with every member's end held by its own start alone (``early``, ``t_early``). Each
        segment is a path of the rank's graph, so the driver's latest of the two never exceeds the time the whole
        job's replay gives; with the measured arrivals it is that time."""
        import pandas as pd

        mn = self.member_node
        pairs = []
        for dd, tt in ((d, t), (early, t_early)):
            root = _roots(g, dd, tt, self.stop)
            pairs.append((root, tt))

        def seg(pts, k):
            root, tt = pairs[k]
            rp = root[pts]
            src = self.member_of_point[rp]
            return src, np.where(src >= 0, tt[pts] - tt[rp], tt[pts])

        both = [seg(2 * mn, 0), seg(2 * mn, 1)]
        pos = g.point_of_position()
        pe = pos[2 * mn + 1]
        prev = g.chain_order[np.maximum(pe - 1, 0)]
        own = np.where(prev == 2 * mn, 0.0, t[prev] - t[2 * mn]) + d.chain[pe]
        xe = self.xfer_edge
        xfer = np.where((xe >= 0) & d.keep[np.maximum(xe, 0)], d.cross[np.maximum(xe, 0)], -np.inf)
        # a step starts at its mark (without marks: at its earliest work start), ends at the latest of its points
        if len(self.start_pt) and len(self.steps):
            at = self.start_pt[pd.Series(t[self.start_pt]).groupby(self.start_step).idxmin().to_numpy()]
        else:
            at = np.zeros(0, dtype=np.int64)
        starts = [seg(at, 0), seg(at, 1)]
        e1, e2 = seg(self.end_pt, 0), seg(self.end_pt, 1)
        e = pd.DataFrame(
            {
                "step": np.r_[self.end_step, self.end_step],
                "src": np.r_[e1[0], e2[0]],
                "len": np.r_[e1[1], e2[1]],
            }
        )
        e = e.groupby(["step", "src"], sort=True)["len"].max().reset_index()
        return Segments(
            np.stack([both[0][0], both[1][0]]),
            np.stack([both[0][1], both[1][1]]),
            own,
            xfer,
            np.stack([starts[0][0], starts[1][0]]),
            np.stack([starts[0][1], starts[1][1]]),
            e["step"].to_numpy(np.int64),
            e["src"].to_numpy(np.int64),
            e["len"].to_numpy(np.float64),
        )


def _roots(g: JobGraph, d: Delays, t: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Per point: where its binding path (the latest input, the chain edge on ties) starts: the nearest point of
    ``stop`` upstream, else the point with no input it starts at."""
    n = len(t)
    order, first = g.chain_order, g.chain_first
    val = np.full(n, -np.inf)
    pred = np.full(n, -1, dtype=np.int64)
    k = np.flatnonzero(~first)
    val[order[k]] = t[order[k - 1]] + d.chain[k]
    pred[order[k]] = order[k - 1]
    held = np.flatnonzero(d.keep)
    if len(held):
        dst, src = g.dst[held], g.src[held]
        ev = t[src] + d.cross[held]
        o = np.lexsort((-ev, dst))
        lead = np.r_[True, dst[o][1:] != dst[o][:-1]]
        bd, bv, bs = dst[o][lead], ev[o][lead], src[o][lead]
        win = bv > val[bd]
        pred[bd[win]] = bs[win]
    root = np.where(stop | (pred < 0), np.arange(n), pred)
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            return root
        root = nxt
