"""What to fix first, for the whole job: what-ifs on the replay of the job graph, ranked by the step time they save.

Each fix edits the replay's delays (:mod:`holotrace.analysis.critical_path.replay`) and replays the whole job; its
saving is the replayed job step minus the fix's, per step, and in percent of the **measured** job step:

=================== =================================================================================================
``straggler``       one rank's GPU compute and host time per step scaled to the median rank's (its collectives are
                    not touched: their waits shrink by themselves when it arrives earlier)
``communication``   collective transfers hidden (``comm_speedup=None``) or ``comm_speedup`` times faster
``launch_overhead`` launch calls (not blocking copies or synchronisation) at ``launch_floor_us``, and the launch
                    to kernel delay at the rank's fastest
``host_sync``       the GPU → CPU waits of blocking copies and synchronize calls removed (``.item()``, pageable
                    copies, ``torch.cuda.synchronize``): the call takes only what it took after the GPU finished
``kernel``          one kernel name (or every kernel containing ``kernel_match``) ``speedup`` times faster
``data_loading``    host time inside data-loader annotations removed
``kernel_gaps``     stream idle time that no launch or wait explains removed
``cpu_op``          host time inside one CPU operator (by name) ``speedup`` times faster
=================== =================================================================================================

Fixes combine (``combine=[("straggler", "communication")]``): their edits are applied together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import (
    Delays,
    _covered,
    replay,
    step_ends,
    step_table,
)
from holotrace.model import classify
from holotrace.model.classify import KernelType

__all__ = ["FIXES", "Candidate", "NodeInfo", "WhatIfOptions", "apply", "candidates", "evaluate", "node_info"]

FIXES = (
    "straggler",
    "communication",
    "launch_overhead",
    "host_sync",
    "kernel",
    "data_loading",
    "kernel_gaps",
    "cpu_op",
)
PURE_LAUNCH_APIS = frozenset(n for n in classify.LAUNCH_APIS if "Memcpy" not in n and "memcpy" not in n) | frozenset(
    {"cudaMemcpyAsync", "hipMemcpyAsync"}
)


@dataclass
class WhatIfOptions:
    speedup: float = 2.0  # kernel / cpu_op fixes
    comm_speedup: float | None = None  # None: communication perfectly overlapped
    launch_floor_us: float = 2.0  # a launch call's cost once launch overhead is at its floor
    top: int = 3  # kernels / CPU operators tried
    data_load_patterns: tuple = ("DataLoader",)
    kernel_match: str | None = None  # a kernel class (substring) instead of the top kernel names


@dataclass
class NodeInfo:
    """Per node: name id, whether a communication kernel, and the CPU thread key (calls and step marks)."""

    name: np.ndarray
    comm: np.ndarray
    thread: np.ndarray


def node_info(g: JobGraph) -> NodeInfo:
    n = g.n_nodes
    name = np.full(n, -1, dtype=np.int64)
    comm = np.zeros(n, dtype=bool)
    thread = np.full(n, -1, dtype=np.int64)
    for r in sorted(set(g.node_rank[g.node_rank >= 0].tolist())):
        sel = np.flatnonzero(g.node_rank == r)
        rv = g.view[r]
        rows = g.node_row[sel]
        name[sel] = rv["name"][rows]
        comm[sel] = (rv["kernel_type"][rows] == int(KernelType.COMMUNICATION)) & (g.node_type[sel] == NodeType.GPU)
        cpu = g.node_type[sel] != NodeType.GPU
        thread[sel[cpu]] = rv["pid"][rows[cpu]] * 1_000_003 + rv["tid"][rows[cpu]]
    return NodeInfo(name, comm, thread)


@dataclass
class Candidate:
    fix: str
    rank: int | None
    target: str | None
    edit: Callable[[Delays], None] = field(repr=False)
    evidence: list = field(default_factory=list)


def _positions(g: JobGraph, kinds, node_mask: np.ndarray) -> np.ndarray:
    """Chain positions whose edge is of ``kinds`` and whose destination node satisfies ``node_mask``."""
    return np.flatnonzero(np.isin(g.chain_kind, list(kinds)) & node_mask[g.chain_order // 2])


def _gap_cover(g: JobGraph, info: NodeInfo, intervals: dict) -> np.ndarray:
    """Per chain position of a CPU gap: how much of it lies inside ``intervals`` ({(rank, thread): (starts, ends)}
    on the job's clock, one rank-thread's intervals possibly nested)."""
    out = np.zeros(len(g.chain_order))
    pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    node = g.chain_order[pos] // 2
    hi = g.point_time[g.chain_order[pos]]
    lo = g.point_time[g.chain_order[pos - 1]]
    keys = pd.MultiIndex.from_arrays([g.node_rank[node], info.thread[node]])
    for key, (s, e) in intervals.items():
        m = np.flatnonzero(keys.isin([key]))
        if len(m) and len(s):
            out[pos[m]] = _covered(s, e, lo[m], hi[m])
    return out


def _intervals(g: JobGraph, rows_of_rank: dict) -> dict:
    """{(rank, thread): (starts, ends)} on the job's clock for the given rows of each rank."""
    out = {}
    for r, rows in rows_of_rank.items():
        if not len(rows):
            continue
        rv = g.view[r]
        shift = _shift(g, r)
        th = rv["pid"][rows] * 1_000_003 + rv["tid"][rows]
        for t in np.unique(th):
            sel = rows[th == t]
            out[(r, int(t))] = ((rv["ts"][sel] + shift).astype(np.float64), (rv["end"][sel] + shift).astype(np.float64))
    return out


def _shift(g: JobGraph, r: int) -> int:
    """What turns a rank's own times into the graph's (ns from the job origin, offsets applied)."""
    v = g.view[r]
    return v.clock_offset - g.origin_ns + g.offsets_ns.get(r, 0)


def _scale(pos: np.ndarray, factor, *, cross: np.ndarray | None = None) -> Callable[[Delays], None]:
    """An edit: the chain delays at ``pos`` (and the cross delays at ``cross``) times ``factor``."""

    def edit(d: Delays) -> None:
        d.chain[pos] = d.chain[pos] * factor
        if cross is not None:
            d.cross[cross] = d.cross[cross] * factor

    return edit


def _drop(edges: np.ndarray) -> Callable[[Delays], None]:
    """An edit: the cross edges ``edges`` no longer hold."""

    def edit(d: Delays) -> None:
        d.keep[edges] = False

    return edit


def _less_host(cover: np.ndarray, factor: float) -> Callable[[Delays], None]:
    """An edit: each host gap loses ``factor`` times the part of it covered (``cover``, per chain position)."""
    m = cover > 0

    def edit(d: Delays) -> None:
        d.chain[m] = np.maximum(d.chain[m] - cover[m] * factor, 0.0)

    return edit


def candidates(
    g: JobGraph, base: Delays, info: NodeInfo, opts: WhatIfOptions, *, only: Sequence[str] | None = None
) -> list[Candidate]:
    """The fixes worth trying on this job (see the module docstring), each with its delay edit and evidence;
    ``only``: just these fixes."""
    want = set(only or FIXES)
    view = g.view
    out: list[Candidate] = []
    nt, rk = g.node_type, g.node_rank
    gpu = nt == NodeType.GPU
    dur_pos = np.flatnonzero(g.chain_kind == EdgeKind.DURATION)
    dur_node = g.chain_order[dur_pos] // 2
    # per (rank, step, name): GPU compute time
    comp = dur_pos[gpu[dur_node] & ~info.comm[dur_node]]
    cn = g.chain_order[comp] // 2
    kdf = pd.DataFrame({"rank": rk[cn], "step": g.node_step[cn], "name": info.name[cn], "t": base.chain[comp]})
    multi = len(set(rk[rk >= 0].tolist())) > 1
    # straggler: the ranks others wait for most, and the one with the most compute over the median
    if multi and len(kdf) and "straggler" in want:
        tables = _StragglerTables.of(g, base, kdf)
        for r in straggler_candidates(g, kdf):
            out.append(_straggler(g, info, tables, r))
    # communication
    cpos = dur_pos[info.comm[dur_node]]
    xf = g.kind == EdgeKind.XFER
    if (len(cpos) or xf.any()) and "communication" in want:
        f = 0.0 if opts.comm_speedup is None else 1.0 / opts.comm_speedup
        names = _top_names(view, g, info, cpos, base.chain[cpos], opts.top)
        out.append(Candidate("communication", None, None, _scale(cpos, f, cross=xf), names))
    # launch overhead
    launch_ids = view.name_ids(set(PURE_LAUNCH_APIS))
    synced = np.zeros(g.n_nodes, dtype=bool)
    synced[g.dst[g.kind == EdgeKind.SYNC] // 2] = True
    lmask = (nt == NodeType.CALL) & np.isin(info.name, launch_ids) & ~synced
    lpos = dur_pos[lmask[dur_node]]
    le = np.flatnonzero(g.kind == EdgeKind.LAUNCH)
    if len(lpos) and "launch_overhead" in want:
        floor = opts.launch_floor_us * 1e3

        def launch(d, lpos=lpos, le=le, floor=floor):
            d.chain[lpos] = np.minimum(d.chain[lpos], floor)
            d.cross[le] = np.minimum(d.cross[le], g.floor[le])

        out.append(
            Candidate(
                "launch_overhead",
                None,
                None,
                launch,
                _top_names(view, g, info, lpos, np.clip(base.chain[lpos] - floor, 0, None), opts.top),
            )
        )
    # host sync
    se = np.flatnonzero(g.kind == EdgeKind.SYNC)
    if len(se) and "host_sync" in want:
        waited = se[base.cross[se] >= 0]
        out.append(Candidate("host_sync", None, None, _drop(se), _sync_evidence(g, info, waited, opts.top)))
    # kernels
    if len(kdf) and "kernel" in want:
        if opts.kernel_match:
            ids = view.name_ids(lambda s: opts.kernel_match in s)
            targets = [(opts.kernel_match, np.isin(info.name, ids))]
        else:
            top = kdf.groupby("name")["t"].sum().sort_values(ascending=False, kind="stable").head(opts.top)
            targets = [(view.strings[int(i)], info.name == i) for i in top.index]
        for label, m in targets:
            kp = dur_pos[(gpu & ~info.comm & m)[dur_node]]
            out.append(Candidate("kernel", None, label, _scale(kp, 1.0 / opts.speedup), [label]))
    # data loading, CPU operators (host time between calls inside them)
    gap_pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    if len(gap_pos) and "data_loading" in want:
        dl_ids = view.name_ids(lambda s: classify.is_data_loading(s, opts.data_load_patterns))
        rows = {r: np.flatnonzero(np.isin(view[r]["name"], dl_ids)) for r in view.ranks if r in set(rk.tolist())}
        cover = _gap_cover(g, info, _intervals(g, rows))
        if cover.any():
            out.append(
                Candidate(
                    "data_loading",
                    None,
                    None,
                    _less_host(cover, 1.0),
                    sorted({view.strings[int(i)] for i in dl_ids})[: opts.top],
                )
            )
    if len(gap_pos) and "cpu_op" in want:
        for label, cov in _cpu_op_covers(g, info, opts, gap_pos, base):
            k = 1.0 - 1.0 / opts.speedup
            out.append(Candidate("cpu_op", None, label, _less_host(cov, k), [label]))
    # kernel gaps
    gg = np.flatnonzero(g.chain_kind == EdgeKind.GPU_GAP)
    if len(gg) and (base.chain[gg] > 0).any() and "kernel_gaps" in want:
        out.append(
            Candidate(
                "kernel_gaps", None, None, _scale(gg, 0.0), _top_names(view, g, info, gg, base.chain[gg], opts.top)
            )
        )
    return out


def straggler_candidates(g: JobGraph, kdf: pd.DataFrame, n: int = 2) -> list[int]:
    """Ranks to try as the straggler: the ``n`` others waited for longest, and the one with the most GPU compute
    over the median rank's."""
    waited = waits_caused(g)
    ranks = [int(r) for r in waited.sort_values(ascending=False, kind="stable").index[:n] if waited[r] > 0]
    per = kdf.groupby("rank")["t"].sum()
    if len(per):
        excess = (per / per.median()).sort_values(ascending=False, kind="stable")
        if int(excess.index[0]) not in ranks:
            ranks.append(int(excess.index[0]))
    return ranks


def waits_caused(g: JobGraph) -> pd.Series:
    """Per rank: the time the other members of its collectives waited for it (it arrived last), in ns."""
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    if not len(m):
        return pd.Series(dtype=np.float64)
    inst, start = g.node_coll[m], g.point_time[2 * m]
    df = pd.DataFrame({"inst": inst, "rank": g.node_rank[m], "start": start})
    last = (
        df.sort_values(["inst", "start", "rank"], ascending=[True, False, True], kind="stable").groupby("inst").head(1)
    )
    arrive = df["inst"].map(last.set_index("inst")["start"])
    df["wait"] = arrive - df["start"]
    caused = df.groupby("inst")["wait"].sum()
    return caused.groupby(last.set_index("inst")["rank"]).sum()


@dataclass
class _StragglerTables:
    """What every straggler candidate compares with, computed once: GPU compute and host time per step and rank,
    GPU compute per kernel name and rank, and the node of every chain position."""

    kdf: pd.DataFrame
    compute: pd.DataFrame  # step x rank: GPU compute (ns)
    host: pd.DataFrame  # step x rank: host time of calls and the gaps between them (ns)
    by_name: pd.Series  # per kernel name: the median rank's GPU compute
    nodes: np.ndarray  # per chain position: its node

    @classmethod
    def of(cls, g: JobGraph, base: Delays, kdf: pd.DataFrame) -> _StragglerTables:
        nodes = g.chain_order // 2
        host = np.flatnonzero(
            ((g.chain_kind == EdgeKind.CPU_GAP) | (g.chain_kind == EdgeKind.DURATION))
            & (g.node_type[nodes] == NodeType.CALL)
        )
        hn = nodes[host]
        hdf = pd.DataFrame({"rank": g.node_rank[hn], "step": g.node_step[hn], "t": base.chain[host]})
        return cls(
            kdf,
            kdf.groupby(["rank", "step"])["t"].sum().unstack("rank"),
            hdf.groupby(["rank", "step"])["t"].sum().unstack("rank"),
            kdf.groupby(["rank", "name"])["t"].sum().unstack("rank").median(axis=1),
            nodes,
        )


def _straggler(g: JobGraph, info: NodeInfo, tables: _StragglerTables, r: int) -> Candidate:
    kdf, med, hs, nodes = tables.kdf, tables.compute, tables.host, tables.nodes
    factor = (med.median(axis=1) / med[r]).clip(upper=1.0).fillna(1.0)
    # host time: gaps and calls of the rank's threads, per step
    hfac = (hs.median(axis=1) / hs[r]).clip(upper=1.0).fillna(1.0) if r in hs else pd.Series(dtype=float)
    mine = g.node_rank[nodes] == r
    kpos = np.flatnonzero(
        mine & (g.chain_kind == EdgeKind.DURATION) & (g.node_type[nodes] == NodeType.GPU) & ~info.comm[nodes]
    )
    kf = factor.reindex(g.node_step[nodes[kpos]]).fillna(1.0).to_numpy()
    hpos = np.flatnonzero(
        mine
        & ((g.chain_kind == EdgeKind.CPU_GAP) | (g.chain_kind == EdgeKind.DURATION))
        & (g.node_type[nodes] == NodeType.CALL)
    )
    hf = hfac.reindex(g.node_step[nodes[hpos]]).fillna(1.0).to_numpy() if len(hfac) else np.ones(len(hpos))

    def edit(d, kpos=kpos, kf=kf, hpos=hpos, hf=hf):
        d.chain[kpos] *= kf
        d.chain[hpos] *= hf

    per_name = kdf[kdf["rank"] == r].groupby("name")["t"].sum()
    med_name = tables.by_name
    excess = (per_name - med_name.reindex(per_name.index).fillna(0)).sort_values(ascending=False, kind="stable")
    ratio = float(med[r].sum() / med.median(axis=1).sum()) if med.median(axis=1).sum() else 1.0
    ev = [f"rank {r}", f"GPU compute is {ratio:.2f}x the median rank's"]
    if len(excess) and excess.iloc[0] > 0:
        ev.append(g.view.strings[int(excess.index[0])])
    return Candidate("straggler", int(r), None, edit, ev)


def _top_names(view, g, info, pos, weight, n) -> list:
    """Names of the nodes at chain positions ``pos`` carrying the most ``weight``."""
    if not len(pos):
        return []
    nm = info.name[g.chain_order[pos] // 2]
    s = pd.Series(weight).groupby(nm).sum().sort_values(ascending=False, kind="stable")
    return [view.strings[int(i)] for i in s.index[:n] if i >= 0 and s[i] > 0]


def _sync_evidence(g, info, edges, n) -> list:
    """The operators around the blocking calls that waited longest: ``op > call`` (outermost CPU operator)."""
    if not len(edges):
        return []
    from holotrace.analysis.callstack import call_graph

    call = g.dst[edges] // 2
    w = pd.Series(g.point_time[g.src[edges]] - g.point_time[2 * call]).clip(lower=0)
    top = w.groupby([g.node_rank[call], info.name[call]]).sum().sort_values(ascending=False, kind="stable")
    out = []
    for r, nm in list(top.index)[:n]:
        rv = g.view[int(r)]
        rows = g.node_row[call[(g.node_rank[call] == r) & (info.name[call] == nm)]]
        parent = call_graph(g.view, int(r), link_backward=False).parent
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


def _cpu_op_covers(g, info, opts, gap_pos, base):
    """The ``opts.top`` CPU operators holding the most host time between calls, and each one's gap cover."""
    from holotrace.analysis.callstack import call_graph

    view = g.view
    dst = g.chain_order[gap_pos] // 2
    ranks = sorted(set(g.node_rank[dst].tolist()))
    tot: dict = {}
    parents = {}
    for r in ranks:
        rv = view[r]
        parent = call_graph(view, r, link_backward=False).parent
        parents[r] = parent
        sel = g.node_rank[dst] == r
        rows = g.node_row[dst[sel]]
        up = parent[rows]
        ok = (up >= 0) & (g.node_type[dst[sel]] == NodeType.CALL)
        ok[ok] = rv["kind"][up[ok]] == int(classify.Kind.CPU_OP)
        s = pd.Series(base.chain[gap_pos[sel]][ok]).groupby(rv["name"][up[ok]]).sum()
        for k, v in s.items():
            tot[int(k)] = tot.get(int(k), 0.0) + float(v)
    top = sorted(tot.items(), key=lambda kv: (-kv[1], kv[0]))[: opts.top]
    for name_id, _ in top:
        rows = {r: np.flatnonzero(view[r]["name"] == name_id) for r in ranks}
        yield view.strings[name_id], _gap_cover(g, info, _intervals(g, rows))


def apply(base: Delays, cands: Sequence[Candidate]) -> Delays:
    d = base.copy()
    for c in cands:
        c.edit(d)
    return d


def evaluate(g: JobGraph, base: Delays, cands: Sequence[Candidate], *, combine: Sequence[Sequence[str]] = ()):
    """One row per fix and step: ``fix, rank, target, step, saving_ms, saving_pct, predicted_step_ms, measured_ms,
    evidence``; combined fixes (lists of fix names) are added as ``a+b``."""
    ref = replay(g, base)
    measured = ref.steps.set_index("step")["measured_ms"]
    replayed = ref.steps.set_index("step")["replayed_ms"]
    rows = []
    tried = [(c.fix, c.rank, c.target, [c], c.evidence) for c in cands]
    for combo in combine:
        parts = []
        for name in combo:
            hit = [c for c in cands if c.fix == name]
            if hit:
                parts.append(hit[0])
        if parts:
            tried.append(("+".join(c.fix for c in parts), None, None, parts, [e for c in parts for e in c.evidence]))
    for fix, rank, target, parts, ev in tried:
        t = replay_times(g, apply(base, parts))
        sav = (replayed - t.reindex(replayed.index)).fillna(0.0).clip(lower=0.0)
        for s in replayed.index:
            m = float(measured[s])
            rows.append(
                {
                    "fix": fix,
                    "rank": rank,
                    "target": target,
                    "step": int(s),
                    "saving_ms": float(sav[s]),
                    "saving_pct": 100.0 * float(sav[s]) / m if m > 0 else 0.0,
                    "predicted_step_ms": m - float(sav[s]),
                    "measured_ms": m,
                    "evidence": list(ev),
                }
            )
    return ref, pd.DataFrame(
        rows,
        columns=[
            "fix",
            "rank",
            "target",
            "step",
            "saving_ms",
            "saving_pct",
            "predicted_step_ms",
            "measured_ms",
            "evidence",
        ],
    )


def replay_times(g: JobGraph, d: Delays) -> pd.Series:
    """Replayed job step times (ms) under delays ``d``."""
    from holotrace.analysis.critical_path.replay import solve

    t, _ = solve(g, d)
    tab = step_table(step_ends(g, t))
    return pd.Series(tab["time"].to_numpy() / 1e6, index=tab["step"].astype(np.int64))
