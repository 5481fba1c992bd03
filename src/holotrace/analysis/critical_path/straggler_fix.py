"""The straggler fix of the job's what-ifs: which ranks to try, the tables every try compares with, and the delay
edit that brings one rank's compute and host time to the median rank's (see
:mod:`holotrace.analysis.critical_path.job_what_if`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import Delays
from holotrace.analysis.grouped import group_median, group_sum, unique_ids
from holotrace.order_stats import distinct

if TYPE_CHECKING:
    import pandas as pd

    from holotrace.table import Table

__all__ = [
    "RankGrid",
    "StragglerTables",
    "compute_positions",
    "pick_stragglers",
    "rank_waits",
    "straggler_candidates",
    "straggler_edit",
    "waits_caused",
    "waits_of",
]


def straggler_candidates(g: JobGraph, kdf: Table, n: int = 2) -> list[int]:
    """Ranks to try as the straggler: the ``n`` others waited for longest, and the one with the most GPU compute
    over the median rank's (``kdf``: :func:`~.job_what_if.compute_table`)."""
    ranks, at = unique_ids(kdf["rank"])
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    waited = rank_waits(g.node_coll[m], g.node_rank[m].astype(np.int64), g.point_time[2 * m])
    return pick_stragglers(waited, (ranks, group_sum(at, kdf["t"], len(ranks))), n)


def compute_positions(g: JobGraph, comm: np.ndarray) -> np.ndarray:
    """Chain positions of GPU compute, ascending: the own durations of GPU operations other than communication
    (``comm``, per node)."""
    gpu_pt = np.repeat(g.node_type == NodeType.GPU, 2)  # (per point: a bool, not a node index per position)
    pos = np.flatnonzero((g.chain_kind == EdgeKind.DURATION) & gpu_pt[g.chain_order])
    del gpu_pt
    return pos[~comm[g.chain_order[pos] >> 1]]


def _nanmedian(x: np.ndarray, axis=None):
    """pandas' median (NaN skipped; NaN where nothing is left) of all of ``x`` or (``axis=1``) of each row, as
    :func:`~holotrace.analysis.grouped.group_median` computes it (one sort for every row; numpy's ``nanmedian`` of
    short rows goes through masked arrays)."""
    x = np.asarray(x, dtype=np.float64)
    if axis == 1:
        return group_median(np.repeat(np.arange(x.shape[0]), x.shape[1]), x.reshape(-1), x.shape[0])
    return float(group_median(np.zeros(x.size, dtype=np.int64), x.reshape(-1), 1)[0])


def _nansum(x: np.ndarray) -> float:
    """pandas' ``Series.sum()``: NaN as 0, numpy's pairwise sum."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.where(np.isnan(x), 0.0, x).sum())


def pick_stragglers(waited: tuple, per: tuple, n: int = 2) -> list[int]:
    """:func:`straggler_candidates` from the time others waited for each rank (``waited``: ranks ascending and
    their waits, ns) and each rank's GPU compute (``per``: ranks ascending and their compute, ns)."""
    w_ranks, w = (np.asarray(x) for x in waited)
    o = np.argsort(-np.asarray(w, dtype=np.float64), kind="stable")[:n]
    ranks = [int(r) for r, x in zip(w_ranks[o].tolist(), w[o].tolist()) if x > 0]
    p_ranks, p = np.asarray(per[0]), np.asarray(per[1], dtype=np.float64)
    if len(p):
        with np.errstate(divide="ignore", invalid="ignore"):
            excess = p / _nanmedian(p)
        top = int(p_ranks[np.argsort(-excess, kind="stable")[0]])
        if top not in ranks:
            ranks.append(top)
    return ranks


def waits_caused(g: JobGraph) -> pd.Series:
    """Per rank: the time the other members of its collectives waited for it (it arrived last), in ns."""
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    return waits_of(g.node_coll[m], g.node_rank[m].astype(np.int64), g.point_time[2 * m])


def waits_of(inst: np.ndarray, rank: np.ndarray, start: np.ndarray) -> pd.Series:
    """:func:`rank_waits` as a pandas series by rank."""
    import pandas as pd

    if not len(inst):
        return pd.Series(dtype=np.float64)
    by, caused = rank_waits(inst, rank, start)
    return pd.Series(caused, index=pd.Index(by, name="rank"), name="wait")


def rank_waits(inst: np.ndarray, rank: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`waits_caused` from the collective members' instances, ranks and measured starts: the ranks that
    arrived last somewhere (ascending) and the time the others waited for them (ns)."""
    inst, rank = np.asarray(inst), np.asarray(rank)
    if not len(inst):
        return rank[:0], np.zeros(0)
    start = np.asarray(start, dtype=np.float64)
    # each instance's last arrival: the latest start, the lowest rank among ties, then the first member
    o = np.lexsort((rank, -start, inst))
    io = inst[o]
    head = np.r_[True, io[1:] != io[:-1]]
    last = o[head]  # per instance, ascending
    k = np.empty(len(o), dtype=np.int64)  # each member's instance, numbered 0..
    k[o] = np.cumsum(head) - 1
    caused = group_sum(k, start[last][k] - start, len(last))
    by, at = unique_ids(rank[last])
    return by, group_sum(at, caused, len(by))


@dataclass
class RankGrid:
    """Sums per key (a step, a kernel name id) and rank: ``values[i, j]`` for ``keys[i]`` and ``ranks[j]``, both
    ascending (NaN: no entry), as ``groupby([rank, key]).sum().unstack(rank)`` gives them."""

    keys: np.ndarray
    ranks: np.ndarray
    values: np.ndarray

    def __contains__(self, r) -> bool:
        return bool(np.any(self.ranks == r))

    def column(self, r: int) -> np.ndarray:
        """Rank ``r``'s sums per key (NaN: no entry)."""
        return np.ascontiguousarray(self.values[:, int(np.flatnonzero(self.ranks == r)[0])])

    def pair(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Rank ``r``'s keys with an entry and its sums."""
        c = self.column(r)
        ok = ~np.isnan(c)
        return self.keys[ok], c[ok]

    def median(self) -> tuple[np.ndarray, np.ndarray]:
        """The median rank's sum per key (``median(axis=1)`` of the frame): the keys and the medians."""
        return self.keys, _nanmedian(self.values, axis=1)


def _unstack(rank: np.ndarray, key: np.ndarray, t: np.ndarray) -> RankGrid:
    """``t`` summed per (``key``, rank)."""
    (ranks, ri), (keys, ki) = unique_ids(rank), unique_ids(key)
    flat = ki * len(ranks) + ri
    n = len(keys) * len(ranks)
    sums = group_sum(flat, t, n)
    sums[np.bincount(flat, minlength=n) == 0] = np.nan
    return RankGrid(keys, ranks, sums.reshape(len(keys), len(ranks)))


def _grid(parts: list) -> RankGrid:
    """A :class:`RankGrid` from each rank's sums: ``(rank, keys ascending, sums)`` per rank with an entry."""
    parts = sorted(parts, key=lambda x: x[0])
    keys = distinct(np.concatenate([k for _, k, _ in parts])) if parts else np.zeros(0, dtype=np.int64)
    out = np.full((len(keys), len(parts)), np.nan)
    for j, (_, k, v) in enumerate(parts):
        out[np.searchsorted(keys, k), j] = v
    return RankGrid(keys, np.array([r for r, _, _ in parts], dtype=np.int64), out)


@dataclass
class StragglerTables:
    """What every straggler candidate compares with, computed once: GPU compute and host time per step and rank,
    GPU compute per kernel name and rank, and per rank the chain positions a straggler fix scales and their
    steps."""

    kdf: Table
    compute: RankGrid  # step x rank: GPU compute (ns)
    host: RankGrid  # step x rank: host time of calls and the gaps between them (ns)
    by_name: tuple  # per kernel name id: the median rank's GPU compute (ids, values)
    names: RankGrid  # kernel name x rank: GPU compute (ns)
    kpos: dict  # per rank: chain positions of GPU compute (a kernel's own duration, not communication), ascending
    kstep: dict  # ... and their steps
    hpos: dict  # per rank: chain positions of host time (calls and the gaps between them), ascending
    hstep: dict
    medians: tuple | None = None  # ((steps, compute), (steps, host)) of the median rank, from the whole job

    @classmethod
    def of(
        cls, g: JobGraph, base: Delays, kdf: Table, comm: np.ndarray, *, compute: np.ndarray | None = None
    ) -> StragglerTables:
        """The tables of ``g`` under ``base`` (``compute``: :func:`compute_positions` of ``comm``, if made)."""
        ck, order = g.chain_kind, g.chain_order
        call = np.repeat(g.node_type == NodeType.CALL, 2)  # per point
        compute = compute_positions(g, comm) if compute is None else compute
        kpos, kstep, hpos, hstep, host = {}, {}, {}, {}, []
        it = order.dtype  # (positions kept as the chain order's: int32 below 2**31, half the memory)
        for r, span in g.rank_positions().items():  # (rank by rank: the temporaries are one rank's)
            kk = ck[span]
            h = np.flatnonzero(((kk == EdgeKind.CPU_GAP) | (kk == EdgeKind.DURATION)) & call[order[span]])
            h += span.start
            hpos[r], hstep[r] = h.astype(it), g.node_step[order[h] >> 1]  # (steps as the graph keeps them)
            if len(h):
                keys, code = unique_ids(hstep[r])
                host.append((r, keys.astype(np.int64), group_sum(code, base.chain[h], len(keys))))
            a, b = np.searchsorted(compute, [span.start, span.stop])
            kpos[r] = compute[a:b]
            kstep[r] = g.node_step[order[kpos[r]] >> 1]
        kr, ks, kname, kt = (kdf[c] for c in ("rank", "step", "name", "t"))
        names = _unstack(kr, kname, kt)
        return cls(kdf, _unstack(kr, ks, kt), _grid(host), names.median(), names, kpos, kstep, hpos, hstep)


def _at(keys: np.ndarray, values: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``values`` (by the distinct ``keys``) at each of ``want``; NaN where a key is missing."""
    out = np.full(len(want), np.nan)
    keys, values = np.asarray(keys), np.asarray(values, dtype=np.float64)
    if len(keys) > 1 and (keys[1:] < keys[:-1]).any():
        o = np.argsort(keys, kind="stable")
        keys, values = keys[o], values[o]
    if len(keys) and len(want):
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        hit = keys[at] == want
        out[hit] = values[at[hit]]
    return out


def _factor(med: tuple, mine: tuple, steps: np.ndarray) -> np.ndarray:
    """Per step of ``steps``: the median's time over the rank's (``med``, ``mine``: keys and values), at most 1;
    1 where either is missing (``(med / mine).clip(upper=1).fillna(1)`` aligned by step)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = _at(*med, steps) / _at(*mine, steps)
    return np.where(np.isnan(f), 1.0, np.minimum(f, 1.0))


def straggler_edit(g: JobGraph, tables: StragglerTables, r: int) -> tuple[Callable, list]:
    """Rank ``r``'s GPU compute and host time per step scaled to the median rank's (its communication kernels keep
    their time): the delay edit and its evidence."""
    med, hs = tables.compute, tables.host
    med_c, med_h = tables.medians or (med.median(), hs.median())
    none = np.zeros(0, dtype=np.int64)
    mine = (med.keys, med.column(r)) if r in med else (none, np.zeros(0))
    kpos, kstep = tables.kpos.get(r, none), tables.kstep.get(r, none)
    hpos, hstep = tables.hpos.get(r, none), tables.hstep.get(r, none)
    kf = _factor(med_c, mine, kstep)
    # host time: gaps and calls of the rank's threads, per step
    hf = _factor(med_h, (hs.keys, hs.column(r)), hstep) if r in hs else np.ones(len(hstep))

    def edit(d, kpos=kpos, kf=kf, hpos=hpos, hf=hf):
        d.chain[kpos] *= kf
        d.chain[hpos] *= hf

    ev = [f"rank {r}"]
    total = _nansum(med_c[1])
    ratio = _nansum(mine[1]) / total if total else 1.0
    ev.append(f"GPU compute is {ratio:.2f}x the median rank's")
    if r in tables.names:
        ids, per_name = tables.names.pair(r)
        m = _at(*tables.by_name, ids)
        excess = per_name - np.where(np.isnan(m), 0.0, m)
        if len(excess):
            top = np.argsort(-excess, kind="stable")[0]
            if excess[top] > 0:
                ev.append(g.view.strings[int(ids[top])])
    return edit, ev
