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
    "pick_stragglers",
    "straggler_candidates",
    "straggler_edit",
    "waits_caused",
    "waits_of",
]


def straggler_candidates(g: JobGraph, kdf: pd.DataFrame, n: int = 2) -> list[int]:
    """Ranks to try as the straggler: the ``n`` others waited for longest, and the one with the most GPU compute
    over the median rank's."""
    return pick_stragglers(waits_caused(g), kdf.groupby("rank")["t"].sum(), n)


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
    df = pd.DataFrame({"inst": inst, "rank": rank, "start": start}, copy=False)  # (read only)
    last = (
        df.sort_values(["inst", "start", "rank"], ascending=[True, False, True], kind="stable").groupby("inst").head(1)
    )
    arrive = df["inst"].map(last.set_index("inst")["start"])
    df["wait"] = arrive - df["start"]
    caused = df.groupby("inst")["wait"].sum()
    return caused.groupby(last.set_index("inst")["rank"]).sum()


@dataclass
class StragglerTables:
    """What every straggler candidate compares with, computed once: GPU compute and host time per step and rank,
    GPU compute per kernel name and rank, and the node of every chain position."""

    kdf: pd.DataFrame
    compute: pd.DataFrame  # step x rank: GPU compute (ns)
    host: pd.DataFrame  # step x rank: host time of calls and the gaps between them (ns)
    by_name: pd.Series  # per kernel name: the median rank's GPU compute
    nodes: np.ndarray  # per chain position: its node
    kpos: np.ndarray  # chain positions of GPU compute (a kernel's own duration, not communication)
    hpos: np.ndarray  # chain positions of host time (calls and the gaps between them)
    medians: tuple | None = None  # (compute, host) of the median rank per step, when they come from the whole job

    @classmethod
    def of(cls, g: JobGraph, base: Delays, kdf: pd.DataFrame, comm: np.ndarray) -> StragglerTables:
        nodes = g.chain_order // 2
        host = np.flatnonzero(
            ((g.chain_kind == EdgeKind.CPU_GAP) | (g.chain_kind == EdgeKind.DURATION))
            & (g.node_type[nodes] == NodeType.CALL)
        )
        hn = nodes[host]
        hdf = pd.DataFrame({"rank": g.node_rank[hn], "step": g.node_step[hn], "t": base.chain[host]}, copy=False)
        kpos = np.flatnonzero((g.chain_kind == EdgeKind.DURATION) & (g.node_type[nodes] == NodeType.GPU) & ~comm[nodes])
        return cls(
            kdf,
            kdf.groupby(["rank", "step"])["t"].sum().unstack("rank"),
            hdf.groupby(["rank", "step"])["t"].sum().unstack("rank"),
            kdf.groupby(["rank", "name"])["t"].sum().unstack("rank").median(axis=1),
            nodes,
            kpos,
            host,
        )


def straggler_edit(g: JobGraph, tables: StragglerTables, r: int) -> tuple[Callable, list]:
    """Rank ``r``'s GPU compute and host time per step scaled to the median rank's (its communication kernels keep
    their time): the delay edit and its evidence."""
    kdf, med, hs, nodes = tables.kdf, tables.compute, tables.host, tables.nodes
    med_c, med_h = tables.medians or (med.median(axis=1), hs.median(axis=1))
    factor = (med_c / med[r]).clip(upper=1.0).fillna(1.0)
    # host time: gaps and calls of the rank's threads, per step
    hfac = (med_h / hs[r]).clip(upper=1.0).fillna(1.0) if r in hs else pd.Series(dtype=float)
    kpos = tables.kpos[g.node_rank[nodes[tables.kpos]] == r]
    kf = factor.reindex(g.node_step[nodes[kpos]]).fillna(1.0).to_numpy()
    hpos = tables.hpos[g.node_rank[nodes[tables.hpos]] == r]
    hf = hfac.reindex(g.node_step[nodes[hpos]]).fillna(1.0).to_numpy() if len(hfac) else np.ones(len(hpos))

    def edit(d, kpos=kpos, kf=kf, hpos=hpos, hf=hf):
        d.chain[kpos] *= kf
        d.chain[hpos] *= hf

    per_name = kdf[kdf["rank"] == r].groupby("name")["t"].sum()
    med_name = tables.by_name
    excess = (per_name - med_name.reindex(per_name.index).fillna(0)).sort_values(ascending=False, kind="stable")
    ratio = float(med[r].sum() / med_c.sum()) if med_c.sum() else 1.0
    ev = [f"rank {r}", f"GPU compute is {ratio:.2f}x the median rank's"]
    if len(excess) and excess.iloc[0] > 0:
        ev.append(g.view.strings[int(excess.index[0])])
    return edit, ev
