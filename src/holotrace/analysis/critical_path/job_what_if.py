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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.fix_replays import FixReplays, apply, replay_times, replays
from holotrace.analysis.critical_path.host_time import (
    cpu_op_covers,
    cpu_op_totals,
    gap_covers,
    intervals,
    sync_evidence,
)
from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import Delays
from holotrace.analysis.critical_path.straggler_fix import (
    StragglerTables,
    compute_positions,
    straggler_candidates,
    straggler_edit,
    waits_caused,
)
from holotrace.analysis.grouped import group_sum, unique_ids
from holotrace.model import classify
from holotrace.model.classify import KernelType
from holotrace.table import Table

if TYPE_CHECKING:
    pass

__all__ = [
    "FIXES",
    "Candidate",
    "NodeInfo",
    "WhatIfOptions",
    "apply",
    "replay_times",
    "replays",
    "candidates",
    "iter_candidates",
    "compute_table",
    "cpu_op_totals",
    "evaluate",
    "node_info",
    "saving_rows",
    "straggler_candidates",
    "waits_caused",
]

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
    kernels: tuple | None = None  # these kernel names instead of the top ones (the job's, agreed by a scale-out run)
    cpu_ops: tuple | None = None  # these CPU operator names instead of the top ones (likewise)


@dataclass
class NodeInfo:
    """Per node: name id, whether a communication kernel, and the CPU thread key (calls and step marks; made when
    first read: only the host-time fixes read it); the chain positions of GPU compute (made when first read)."""

    name: np.ndarray
    comm: np.ndarray
    graph: JobGraph | None = field(default=None, repr=False)
    _thread: np.ndarray | None = field(default=None, repr=False)
    _compute: np.ndarray | None = field(default=None, repr=False)

    @property
    def compute(self) -> np.ndarray:
        """Chain positions of GPU compute (``straggler_fix.compute_positions``), made when first read."""
        if self._compute is None:
            self._compute = compute_positions(self.graph, self.comm)
        return self._compute

    @property
    def thread(self) -> np.ndarray:
        if self._thread is None:
            g = self.graph
            thread = np.full(g.n_nodes, -1, dtype=np.int64)
            for r in g.ranks():
                sel = g.rank_nodes(r)
                cpu = sel[g.node_type[sel] != NodeType.GPU]
                rows, rv = g.node_row[cpu], g.view[r]
                thread[cpu] = rv["pid"][rows] * np.int64(1_000_003) + rv["tid"][rows]
            self._thread = thread
        return self._thread


def node_info(g: JobGraph) -> NodeInfo:
    n = g.n_nodes
    # (the views' string ids: int32 when every rank's are, half the memory of int64)
    name = np.full(n, -1, dtype=np.result_type(np.int32, *(g.view[r]["name"].dtype for r in g.ranks())))
    comm = np.zeros(n, dtype=bool)
    for r in g.ranks():
        sel = g.rank_nodes(r)
        rv = g.view[r]
        rows = g.node_row[sel]
        name[sel] = rv["name"][rows]
        comm[sel] = (rv["kernel_type"][rows] == int(KernelType.COMMUNICATION)) & (g.node_type[sel] == NodeType.GPU)
    return NodeInfo(name, comm, g)


@dataclass
class Candidate:
    fix: str
    rank: int | None
    target: str | None
    edit: Callable[[Delays], None] = field(repr=False)
    evidence: list = field(default_factory=list)


def _scale(pos: np.ndarray, factor, *, cross: np.ndarray | None = None) -> Callable[[Delays], None]:
    """An edit: the chain delays at ``pos`` (and the cross delays at ``cross``) times ``factor``."""

    def edit(d: Delays) -> None:
        d.chain[pos] = d.chain[pos] * factor
        if cross is not None:
            w = d.own("cross")
            w[cross] = w[cross] * factor

    return edit


def _drop(edges: np.ndarray) -> Callable[[Delays], None]:
    """An edit: the cross edges ``edges`` no longer hold."""

    def edit(d: Delays) -> None:
        d.own("keep")[edges] = False

    return edit


def _less_host(covers: tuple, factor: float) -> Callable[[Delays], None]:
    """An edit: each host gap loses ``factor`` times the part of it covered (``covers``: chain positions, each once,
    and their covers)."""
    pos, cover = covers
    hit = cover > 0
    m, less = pos[hit], cover[hit] * factor  # kept: the covered positions and their cover

    def edit(d: Delays) -> None:
        d.chain[m] = np.maximum(d.chain[m] - less, 0.0)

    return edit


def candidates(
    g: JobGraph, base: Delays, info: NodeInfo, opts: WhatIfOptions, *, only: Sequence[str] | None = None
) -> list[Candidate]:
    """The fixes worth trying on this job (see the module docstring), each with its delay edit and evidence;
    ``only``: just these fixes."""
    return list(iter_candidates(g, base, info, opts, only=only))


def iter_candidates(
    g: JobGraph, base: Delays, info: NodeInfo | None, opts: WhatIfOptions, *, only: Sequence[str] | None = None
) -> Iterator[Candidate]:
    """:func:`candidates`, each as soon as it is made (its replay can start while the next is made); ``info`` None:
    :func:`node_info` is made when the first candidate is asked for."""
    info = node_info(g) if info is None else info
    want = set(only or FIXES)
    view = g.view
    gpu = g.node_type == NodeType.GPU
    durations = want & {"communication", "launch_overhead", "kernel"}  # (the fixes that read every duration)
    dur_pos = np.flatnonzero(g.chain_kind == EdgeKind.DURATION) if durations else np.zeros(0, dtype=np.int64)
    dur_node = g.chain_order[dur_pos] // 2
    kdf = compute_table(g, base, info) if want & {"straggler", "kernel"} else None  # (each fix's data: if tried)
    multi = len(g.ranks()) > 1
    # straggler: the ranks others wait for most, and the one with the most compute over the median
    if "straggler" in want and multi and len(kdf):
        shared = base is g.memo.get("base")  # the same on every call: kept on the graph
        strag = g.memo.get("straggler_candidates") if shared else None
        if strag is None:
            tables = StragglerTables.of(g, base, kdf, info.comm, compute=info.compute)
            strag = [_straggler(g, info, tables, r) for r in straggler_candidates(g, kdf)]
            if shared:
                g.memo["straggler_candidates"] = strag
        yield from strag
    # communication
    cpos = dur_pos[info.comm[dur_node]] if "communication" in want else dur_pos[:0]
    xf = g.kind == EdgeKind.XFER if "communication" in want else None
    if "communication" in want and (len(cpos) or xf.any()):
        f = 0.0 if opts.comm_speedup is None else 1.0 / opts.comm_speedup
        names = _top_names(view, g, info, cpos, base.chain[cpos], opts.top)
        yield (Candidate("communication", None, None, _scale(cpos, f, cross=xf), names))
    # launch overhead
    lpos = _launch_positions(g, info, dur_pos, dur_node) if "launch_overhead" in want else dur_pos[:0]
    if len(lpos):
        le = np.flatnonzero(g.kind == EdgeKind.LAUNCH)
        floor = opts.launch_floor_us * 1e3

        def launch(d, lpos=lpos, le=le, floor=floor):
            d.chain[lpos] = np.minimum(d.chain[lpos], floor)
            w = d.own("cross")
            w[le] = np.minimum(w[le], g.floor[le])

        yield (
            Candidate(
                "launch_overhead",
                None,
                None,
                launch,
                _top_names(view, g, info, lpos, np.clip(base.chain[lpos] - floor, 0, None), opts.top),
            )
        )
    # host sync
    se = np.flatnonzero(g.kind == EdgeKind.SYNC) if "host_sync" in want else dur_pos[:0]
    if len(se):
        waited = se[base.cross[se] >= 0]
        yield (Candidate("host_sync", None, None, _drop(se), sync_evidence(g, info, waited, opts.top)))
    # kernels
    if "kernel" in want and len(kdf):
        kpos = dur_pos[(gpu & ~info.comm)[dur_node]]  # the durations of compute kernels, and their names
        kname = info.name[g.chain_order[kpos] >> 1]
        if opts.kernel_match:
            ids = view.name_ids(lambda s: opts.kernel_match in s)
            targets = [(opts.kernel_match, np.isin(kname, ids))]
        elif opts.kernels is not None:
            targets = [(k, np.isin(kname, view.name_ids({k}))) for k in opts.kernels]
        else:
            top, _ = heaviest(kdf["name"], kdf["t"])
            targets = [(view.strings[int(i)], kname == i) for i in top[: opts.top]]
        for label, m in targets:
            yield (Candidate("kernel", None, label, _scale(kpos[m], 1.0 / opts.speedup), [label]))
    # data loading, CPU operators (host time between calls inside them)
    gap_pos = np.flatnonzero(g.chain_kind == EdgeKind.CPU_GAP)
    if len(gap_pos) and "data_loading" in want:
        dl_ids = view.name_ids(lambda s: classify.is_data_loading(s, opts.data_load_patterns))
        is_dl = np.zeros(len(view.strings) + 1, dtype=bool)  # per string id (the last entry: id -1)
        is_dl[dl_ids] = True
        in_graph = set(g.ranks())
        rows = {r: np.flatnonzero(is_dl[view[r]["name"]]) for r in view.ranks if r in in_graph}
        cover = gap_covers(g, info, intervals(g, rows))
        if cover[1].any():
            yield (
                Candidate(
                    "data_loading",
                    None,
                    None,
                    _less_host(cover, 1.0),
                    sorted({view.strings[int(i)] for i in dl_ids})[: opts.top],
                )
            )
    if len(gap_pos) and "cpu_op" in want:
        for label, cov in cpu_op_covers(g, info, opts, gap_pos, base):
            k = 1.0 - 1.0 / opts.speedup
            yield (Candidate("cpu_op", None, label, _less_host(cov, k), [label]))
    # kernel gaps
    gg = np.flatnonzero(g.chain_kind == EdgeKind.GPU_GAP)
    if len(gg) and (base.chain[gg] > 0).any() and "kernel_gaps" in want:
        yield (
            Candidate(
                "kernel_gaps", None, None, _scale(gg, 0.0), _top_names(view, g, info, gg, base.chain[gg], opts.top)
            )
        )


def _launch_positions(g: JobGraph, info: NodeInfo, dur_pos: np.ndarray, dur_node: np.ndarray) -> np.ndarray:
    """Chain positions of the durations of launch calls that no host synchronisation waited on."""
    launch_ids = g.view.name_ids(set(PURE_LAUNCH_APIS))
    synced = np.zeros(g.n_nodes, dtype=bool)
    synced[g.dst[g.kind == EdgeKind.SYNC] // 2] = True
    lmask = (g.node_type == NodeType.CALL) & np.isin(info.name, launch_ids) & ~synced
    return dur_pos[lmask[dur_node]]


def compute_table(g: JobGraph, base: Delays, info: NodeInfo) -> Table:
    """GPU compute (communication kernels aside) under ``base``: one row per kernel, ``rank, step, name, t`` (ns)."""
    comp = info.compute if info.graph is g else compute_positions(g, info.comm)
    cn = g.chain_order[comp] >> 1
    rank, step = g.node_rank[cn].astype(np.int64), g.node_step[cn].astype(np.int64)  # (the graph's may be int32)
    return Table({"rank": rank, "step": step, "name": info.name[cn], "t": base.chain[comp]})


def heaviest(keys: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` by the sum of their ``weight``, heaviest first (equal sums: ascending keys), and the
    sums: ``Series(weight).groupby(keys).sum().sort_values(ascending=False, kind="stable")``."""
    u, at = unique_ids(keys)  # (name ids: a lookup table, no sort)
    sums = group_sum(at, weight, len(u))
    o = np.argsort(-sums, kind="stable")
    return u[o], sums[o]


def _straggler(g: JobGraph, info: NodeInfo, tables: StragglerTables, r: int) -> Candidate:
    edit, evidence = straggler_edit(g, tables, r)
    return Candidate("straggler", int(r), None, edit, evidence)


def _top_names(view, g, info, pos, weight, n) -> list:
    """Names of the nodes at chain positions ``pos`` carrying the most ``weight``."""
    if not len(pos):
        return []
    ids, sums = heaviest(info.name[g.chain_order[pos] // 2], weight)
    return [view.strings[int(i)] for i, w in zip(ids[:n].tolist(), sums[:n].tolist()) if i >= 0 and w > 0]


def evaluate(
    g: JobGraph,
    base: Delays,
    cands: Iterable[Candidate],
    *,
    combine: Sequence[Sequence[str]] = (),
    keep_times: bool = True,
):
    """One row per fix and step: ``fix, rank, target, step, saving_ms, saving_pct, predicted_step_ms, measured_ms,
    evidence``; combined fixes (lists of fix names) are added as ``a+b``.

    With the compiled sweep, the replays run on threads (it runs without the GIL), the unmodified one first, each
    fix's as soon as ``cands`` (an iterator too: :func:`iter_candidates`) gives it, while the next is made. Each
    replay is a function of its own delays, so the times are the same whichever thread replays them, whenever, and
    the rows come in the fixes' order. ``keep_times`` False: the unmodified replay lets go of its point times once
    its step tables are made (:meth:`~.replay.Replay.release_times`), for a caller that reads only the steps."""
    shared = base is g.memo.get("base")  # the replays of the shared base and of its stragglers are kept
    with FixReplays(g, base, keep_times=keep_times) as runs:
        kept, tried = [], []
        for c in cands:
            kept.append(c)
            tried.append((c.fix, c.rank, c.target, [c], c.evidence))
            runs.add(("straggler", c.rank) if shared and c.fix == "straggler" else None, [c])
        for combo in combine:
            parts = []
            for name in combo:
                hit = [c for c in kept if c.fix == name]
                if hit:
                    parts.append(hit[0])
            if parts:
                tried.append(
                    ("+".join(c.fix for c in parts), None, None, parts, [e for c in parts for e in c.evidence])
                )
                runs.add(None, parts)
        ref, times = runs.results()
    steps = ref.step_tab["step"], ref.step_tab["measured_ms"], ref.step_tab["replayed_ms"]
    rows = []
    for (fix, rank, target, _, ev), t in zip(tried, times):
        rows += saving_rows(fix, rank, target, ev, t, *steps)
    return ref, Table.from_records(rows, SAVING_COLUMNS)


SAVING_COLUMNS = [
    "fix",
    "rank",
    "target",
    "step",
    "saving_ms",
    "saving_pct",
    "predicted_step_ms",
    "measured_ms",
    "evidence",
]


def saving_rows(fix, rank, target, evidence, t: tuple, steps: np.ndarray, measured: np.ndarray, replayed: np.ndarray):
    """One row per step of a fix whose replayed job step times are ``t`` (``(steps, ms)``, as
    :func:`replay_times`): the saving against the unmodified replay (``replayed``, ms, per step of ``steps``), in
    ms and in % of the ``measured`` job step (ms); a step the fix's replay lacks saves nothing."""
    t_steps, t_ms = t
    mine = np.full(len(steps), np.nan)
    if len(t_steps):
        o = np.argsort(t_steps, kind="stable")
        at = np.minimum(np.searchsorted(t_steps[o], steps), len(o) - 1)
        hit = t_steps[o][at] == steps
        mine[hit] = t_ms[o][at][hit]
    sav = replayed - mine
    sav = np.where(np.isnan(sav), 0.0, sav)
    sav = np.where(sav < 0.0, 0.0, sav)
    rows = []
    for s, m, x in zip(steps.tolist(), np.asarray(measured, dtype=np.float64).tolist(), sav.tolist()):
        rows.append(
            {
                "fix": fix,
                "rank": rank,
                "target": target,
                "step": int(s),
                "saving_ms": x,
                "saving_pct": 100.0 * x / m if m > 0 else 0.0,
                "predicted_step_ms": m - x,
                "measured_ms": m,
                "evidence": list(evidence),
            }
        )
    return rows
