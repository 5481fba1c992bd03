"""The straggler fix of the job's what-ifs: which ranks to try, the tables every try compares with, and the delay
edit that brings one rank's compute and host time to the median rank's (see
:mod:`holotrace.analysis.critical_path.job_what_if`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from holotrace.analysis.critical_path.job_graph import EdgeKind, JobGraph, NodeType
from holotrace.analysis.critical_path.replay import Delays

__all__ = [
    "StragglerTables",
    "compute_positions",
    "group_sums",
    "pick_stragglers",
    "straggler_candidates",
    "straggler_edit",
    "waits_caused",
    "waits_of",
]


def straggler_candidates(g: JobGraph, kdf: pd.DataFrame, n: int = 2) -> list[int]:
    """Ranks to try as the straggler: the ``n`` others waited for longest, and the one with the most GPU compute
    over the median rank's."""
    rank, t = kdf["rank"].to_numpy(), kdf["t"].to_numpy()
    ranks, at = _codes(rank)
    per = pd.Series(group_sums(at, t, len(ranks)), index=pd.Index(ranks, name="rank"), name="t")
    return pick_stragglers(waits_caused(g), per, n)


def compute_positions(g: JobGraph, comm: np.ndarray) -> np.ndarray:
    """Chain positions of GPU compute, ascending: the own durations of GPU operations other than communication
    (``comm``, per node)."""
    gpu_pt = np.repeat(g.node_type == NodeType.GPU, 2)  # (per point: a bool, not a node index per position)
    pos = np.flatnonzero((g.chain_kind == EdgeKind.DURATION) & gpu_pt[g.chain_order])
    del gpu_pt
    return pos[~comm[g.chain_order[pos] >> 1]]


def group_sums(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``values`` per group code ``0..n-1``, as pandas' group sums give it: the graph's times are whole
    nanoseconds, whose sums are exact in any order (one ``bincount``); other values are summed by pandas
    (compensated sums)."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return np.zeros(n)
    if np.abs(v).sum() < 2.0**53 and np.array_equal(v, np.trunc(v)):
        return np.bincount(codes, weights=v, minlength=n)
    return pd.Series(v).groupby(codes).sum().reindex(np.arange(n), fill_value=0.0).to_numpy()


def pick_stragglers(waited: pd.Series, per: pd.Series, n: int = 2) -> list[int]:
    """:func:`straggler_candidates` from the time others waited for each rank (``waited``, ns) and each rank's GPU
    compute (``per``, ns)."""
    ranks = [int(r) for r in waited.sort_values(ascending=False, kind="stable").index[:n] if waited[r] > 0]
    if len(per):
        excess = (per / per.median()).sort_values(ascending=False, kind="stable")
        if int(excess.index[0]) not in ranks:
            ranks.append(int(excess.index[0]))
    return ranks


def waits_caused(g: JobGraph) -> pd.Series:
    """Per rank: the time the other members of its collectives waited for it (it arrived last), in ns."""
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    return waits_of(g.node_coll[m], g.node_rank[m], g.point_time[2 * m])


def waits_of(inst: np.ndarray, rank: np.ndarray, start: np.ndarray) -> pd.Series:
    """:func:`waits_caused` from the collective members' instances, ranks and measured starts."""
    if not len(inst):
        return pd.Series(dtype=np.float64)
    inst, rank = np.asarray(inst), np.asarray(rank)
    start = np.asarray(start, dtype=np.float64)
    # each instance's last arrival: the latest start, the lowest rank among ties, then the first member
    o = np.lexsort((rank, -start, inst))
    io = inst[o]
    head = np.r_[True, io[1:] != io[:-1]]
    last = o[head]  # per instance, ascending
    k = np.empty(len(o), dtype=np.int64)  # each member's instance, numbered 0..
    k[o] = np.cumsum(head) - 1
    caused = group_sums(k, start[last][k] - start, len(last))
    by, at = _codes(rank[last])
    return pd.Series(group_sums(at, caused, len(by)), index=pd.Index(by, name="rank"), name="wait")


def _codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` of integers: by a table over their range when it is small (ranks,
    steps, string ids), else by sorting."""
    if len(x) and x.dtype.kind in "iu":
        lo, hi = int(x.min()), int(x.max())
        if hi - lo <= max(4 * len(x), 1 << 16):
            seen = np.zeros(hi - lo + 1, dtype=bool)
            seen[x - lo] = True
            code = np.cumsum(seen) - 1
            return np.flatnonzero(seen) + lo, code[x - lo]
    u, inv = np.unique(x, return_inverse=True)
    return u, inv.reshape(-1)


def _unstack(rank: np.ndarray, key: np.ndarray, t: np.ndarray, key_name: str) -> pd.DataFrame:
    """``t`` summed per (``key``, rank): one row per key and one column per rank, ascending (NaN: no entry), as
    ``groupby([rank, key]).sum().unstack(rank)`` gives it."""
    (ranks, ri), (keys, ki) = _codes(rank), _codes(key)
    flat = ki * len(ranks) + ri
    n = len(keys) * len(ranks)
    sums = group_sums(flat, t, n)
    sums[np.bincount(flat, minlength=n) == 0] = np.nan
    return pd.DataFrame(
        sums.reshape(len(keys), len(ranks)), index=pd.Index(keys, name=key_name), columns=pd.Index(ranks, name="rank")
    )


def _frame(parts: list, key_name: str) -> pd.DataFrame:
    """:func:`_unstack` from each rank's sums: ``(rank, keys ascending, sums)`` per rank with an entry."""
    parts = sorted(parts, key=lambda x: x[0])
    keys = np.unique(np.concatenate([k for _, k, _ in parts])) if parts else np.zeros(0, dtype=np.int64)
    out = np.full((len(keys), len(parts)), np.nan)
    for j, (_, k, v) in enumerate(parts):
        out[np.searchsorted(keys, k), j] = v
    ranks = np.array([r for r, _, _ in parts], dtype=np.int64)
    return pd.DataFrame(out, index=pd.Index(keys, name=key_name), columns=pd.Index(ranks, name="rank"))


@dataclass
class StragglerTables:
    """What every straggler candidate compares with, computed once: GPU compute and host time per step and rank,
    GPU compute per kernel name and rank, and per rank the chain positions a straggler fix scales and their
    steps."""

    kdf: pd.DataFrame
    compute: pd.DataFrame  # step x rank: GPU compute (ns)
    host: pd.DataFrame  # step x rank: host time of calls and the gaps between them (ns)
    by_name: pd.Series  # per kernel name: the median rank's GPU compute
    names: pd.DataFrame  # kernel name x rank: GPU compute (ns)
    kpos: dict  # per rank: chain positions of GPU compute (a kernel's own duration, not communication), ascending
    kstep: dict  # ... and their steps
    hpos: dict  # per rank: chain positions of host time (calls and the gaps between them), ascending
    hstep: dict
    medians: tuple | None = None  # (compute, host) of the median rank per step, when they come from the whole job

    @classmethod
    def of(cls, g: JobGraph, base: Delays, kdf: pd.DataFrame, comm: np.ndarray) -> StragglerTables:
        ck, order = g.chain_kind, g.chain_order
        call = np.repeat(g.node_type == NodeType.CALL, 2)  # per point
        compute = compute_positions(g, comm)
        kpos, kstep, hpos, hstep, host = {}, {}, {}, {}, []
        for r, span in g.rank_positions().items():  # (rank by rank: the temporaries are one rank's)
            kk = ck[span]
            h = np.flatnonzero(((kk == EdgeKind.CPU_GAP) | (kk == EdgeKind.DURATION)) & call[order[span]])
            h += span.start
            hpos[r], hstep[r] = h, g.node_step[order[h] >> 1]
            if len(h):
                keys, code = _codes(hstep[r])
                host.append((r, keys, group_sums(code, base.chain[h], len(keys))))
            a, b = np.searchsorted(compute, [span.start, span.stop])
            kpos[r] = compute[a:b]
            kstep[r] = g.node_step[order[kpos[r]] >> 1]
        kr, ks, kname, kt = (kdf[c].to_numpy() for c in ("rank", "step", "name", "t"))
        names = _unstack(kr, kname, kt, "name")
        return cls(
            kdf,
            _unstack(kr, ks, kt, "step"),
            _frame(host, "step"),
            names.median(axis=1),
            names,
            kpos,
            kstep,
            hpos,
            hstep,
        )


def _per_step(factor: pd.Series, steps: np.ndarray) -> np.ndarray:
    """``factor`` (by step) at each of ``steps``; 1 for a step it does not name."""
    have, f = factor.index.to_numpy(), factor.to_numpy(np.float64)
    if not len(have):
        return np.ones(len(steps))
    at = np.minimum(np.searchsorted(have, steps), len(have) - 1)
    return np.where(have[at] == steps, f[at], 1.0)


def straggler_edit(g: JobGraph, tables: StragglerTables, r: int) -> tuple[Callable, list]:
    """Rank ``r``'s GPU compute and host time per step scaled to the median rank's (its communication kernels keep
    their time): the delay edit and its evidence."""
    med, hs = tables.compute, tables.host
    med_c, med_h = tables.medians or (med.median(axis=1), hs.median(axis=1))
    factor = (med_c / med[r]).clip(upper=1.0).fillna(1.0)
    # host time: gaps and calls of the rank's threads, per step
    hfac = (med_h / hs[r]).clip(upper=1.0).fillna(1.0) if r in hs else pd.Series(dtype=float)
    none = np.zeros(0, dtype=np.int64)
    kpos, kf = tables.kpos.get(r, none), _per_step(factor, tables.kstep.get(r, none))
    hpos, hf = tables.hpos.get(r, none), _per_step(hfac, tables.hstep.get(r, none))

    def edit(d, kpos=kpos, kf=kf, hpos=hpos, hf=hf):
        d.chain[kpos] *= kf
        d.chain[hpos] *= hf

    per_name = tables.names[r].dropna() if r in tables.names else pd.Series(dtype=np.float64)
    med_name = tables.by_name
    excess = (per_name - med_name.reindex(per_name.index).fillna(0)).sort_values(ascending=False, kind="stable")
    ratio = float(med[r].sum() / med_c.sum()) if med_c.sum() else 1.0
    ev = [f"rank {r}", f"GPU compute is {ratio:.2f}x the median rank's"]
    if len(excess) and excess.iloc[0] > 0:
        ev.append(g.view.strings[int(excess.index[0])])
    return edit, ev
