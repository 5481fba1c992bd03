"""The chains of the job graph (:mod:`holotrace.analysis.critical_path.job_graph`): each node's chain (a rank's CPU
thread or GPU stream, or an arrival point alone) and the points in chain order."""

from __future__ import annotations

import numpy as np

__all__ = ["chain_ids", "chain_order"]


def chain_ids(parts: list) -> np.ndarray:
    """Chain of every node of the ranks' ``parts`` (laid out one rank after another), numbered in order of first
    appearance: one per (rank, thread or stream)."""
    out, first = [], 0
    for p in parts:
        out.append(p["chain"] + first)
        first += int(p["chain"].max()) + 1 if len(p["chain"]) else 0
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int32)


def chain_order(pt: np.ndarray, ck: np.ndarray, n_work: int) -> tuple[np.ndarray, np.ndarray]:
    """The points sorted by chain, then time, then point (``np.lexsort((pt, p_chain))`` with ``p_chain`` each
    point's node's chain ``ck``; one sort per chain; int32 below 2**31 points), and the chain of every position.
    The first ``n_work`` nodes lie on the threads' and streams' chains; the others are arrival points, one chain
    each (numbered after them), their two points already in order."""
    by_node = np.argsort(ck[:n_work], kind="stable")  # a chain's points ascending: its nodes ascending, start first
    c = ck[by_node]
    cut = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if n_work else np.zeros(0, dtype=np.int64)
    bounds = np.r_[cut, n_work]
    it = np.int32 if len(pt) < 2**31 - 1 else np.int64  # (points: int32 below 2**31, half the memory)
    out = np.empty(len(pt), dtype=it)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        seg = np.empty(2 * (b - a), dtype=it)
        seg[0::2] = 2 * by_node[a:b]
        seg[1::2] = seg[0::2] + 1
        out[2 * a : 2 * b] = seg[np.argsort(pt[seg], kind="stable")]
    out[2 * n_work :] = np.arange(2 * n_work, len(pt), dtype=it)
    n_chains = int(c[-1]) + 1 if n_work else 0
    chain = np.empty(len(pt), dtype=np.int32)
    chain[: 2 * n_work] = np.repeat(c[cut], 2 * np.diff(bounds))
    chain[2 * n_work :] = np.repeat(np.arange(n_chains, n_chains + (len(pt) // 2 - n_work), dtype=np.int32), 2)
    return out, chain
