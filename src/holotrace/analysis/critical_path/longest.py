"""Longest path of a critical-path graph, vectorised, with ``networkx.dag_longest_path``'s exact tie rules.

networkx walks the nodes in topological order and keeps, per node, the best ``(distance, predecessor)``: the
first predecessor (edge insertion order) reaching the maximum, ``(0, itself)`` when that maximum is negative or
the node has no predecessor; the path ends at the first node of maximum distance in its topological order
(generation by generation). A Python loop over edges reproduces that at about 1.5 µs per edge.

Here the graph is cut into chains (every node keeps at most one incoming and one outgoing *chain* edge; the
other edges are *cross* edges). Along a chain the longest distance is a max-plus prefix scan,
``d[i] = S[i] + max_{j<=i}(ext[j] - S[j])`` with ``S`` the cumulative chain weight and ``ext`` the best arrival
over cross edges, one ``numpy.maximum.accumulate`` for every chain at once. Cross arrivals are re-evaluated and
the scan repeated until nothing changes (a Bellman-Ford over chains: as many rounds as the most chain switches
on a longest path, a handful on profiler traces, where each thread and stream is one long chain). The number
of edges on the longest hop path (networkx's generation) is carried the same way and breaks ties between end
nodes. Integer arithmetic makes the sums exact, so ties fall exactly as networkx's float sums do; graphs with
fractional weights, or whose scan would not converge within a few rounds, take the exact Python loop.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["dag_longest_path", "dag_longest_path_loop"]

_MAX_ROUNDS = 64


def dag_longest_path(src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> Optional[np.ndarray]:
    """Node ids of networkx's longest path over the edges ``src → dst`` (insertion order, no repeated pair),
    weights ``w``; None when the graph has a cycle."""
    if not len(src):
        return np.zeros(0, dtype=np.int64)
    wi = np.rint(w)
    if not np.array_equal(wi, w) or (wi < 0).any():
        return dag_longest_path_loop(src, dst, w)
    res = _chains(src, dst, wi.astype(np.int64))
    if res is None:
        return None
    if isinstance(res, str):  # too many rounds, or sums too large for exact integer offsets
        return dag_longest_path_loop(src, dst, w)
    return res


def _chains(src, dst, w):
    n = int(max(src.max(), dst.max())) + 1
    m = len(src)
    eid = np.arange(m, dtype=np.int64)
    # chain edges: the first incoming edge of each node, kept when it is its source's first chosen outgoing one
    _, first_in = np.unique(dst, return_index=True)
    cand = np.sort(first_in)
    _, keep = np.unique(src[cand], return_index=True)
    chain_e = cand[np.sort(keep)]
    is_chain = np.zeros(m, dtype=bool)
    is_chain[chain_e] = True
    cpred = np.full(n, -1, dtype=np.int64)
    cpred[dst[chain_e]] = src[chain_e]
    cw = np.zeros(n, dtype=np.int64)
    cw[dst[chain_e]] = w[chain_e]
    # chain head and position of every node by pointer jumping (a cycle of chain edges never reaches a head)
    p = np.where(cpred >= 0, cpred, np.arange(n))
    depth = (cpred >= 0).astype(np.int64)
    for _ in range(int(np.log2(n)) + 2):
        pp = p[p]
        if np.array_equal(pp, p):
            break
        depth = depth + depth[p]
        p = pp
    else:
        return None
    if (cpred[p] >= 0).any():
        return None
    order = np.lexsort((depth, p))  # chains contiguous, each from its head
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    head = p[order]
    seg = np.concatenate([[0], np.cumsum(head[1:] != head[:-1])])
    S = np.cumsum(cw[order])  # cumulative chain weight (heads add 0)
    H = np.cumsum(cpred[order] >= 0)  # cumulative chain hops
    total = int(S[-1]) + int(w.sum()) + 1
    big = 2 * total + 1
    if (int(seg[-1]) + 1) * big >= 2**62 or (int(seg[-1]) + 1) * (2 * m + 3) >= 2**62:
        return "big"
    off_d = seg * big
    off_l = seg * (2 * m + 3)

    def scan(ext, cum, off):
        return cum + np.maximum.accumulate(ext - cum + off) - off

    xs, xd = src[~is_chain], dst[~is_chain]
    xw = w[~is_chain]
    xo = np.argsort(xd, kind="stable")
    xs, xd, xw = xs[xo], xd[xo], xw[xo]
    starts = np.flatnonzero(np.concatenate([[True], xd[1:] != xd[:-1]])) if len(xd) else np.zeros(0, np.int64)
    tgt = pos[xd[starts]] if len(xd) else starts
    ext_d = np.zeros(n, dtype=np.int64)
    ext_l = np.zeros(n, dtype=np.int64)
    d = scan(ext_d, S, off_d)  # in chain order
    lv = scan(ext_l, H, off_l)
    for _ in range(_MAX_ROUNDS):
        if not len(xd):
            break
        nd = np.maximum.reduceat(d[pos[xs]] + xw, starts)
        nl = np.maximum.reduceat(lv[pos[xs]] + 1, starts)
        if np.array_equal(nd, ext_d[tgt]) and np.array_equal(nl, ext_l[tgt]):
            break
        ext_d[tgt], ext_l[tgt] = nd, nl
        d = scan(ext_d, S, off_d)
        lv = scan(ext_l, H, off_l)
    else:
        return "slow"
    dist = np.empty(n, dtype=np.int64)
    dist[order] = d
    level = np.empty(n, dtype=np.int64)
    level[order] = lv
    # back pointer: the first incoming edge (insertion order) reaching the node's distance
    hit = eid[dist[src] + w == dist[dst]]
    back = np.arange(n)
    _, fi = np.unique(dst[hit], return_index=True)
    back[dst[hit[fi]]] = src[hit[fi]]
    # end node: maximum distance; ties by generation, then networkx's order within it
    touched = np.zeros(n, dtype=bool)
    touched[src] = touched[dst] = True
    nodes = np.flatnonzero(touched)
    top = nodes[dist[nodes] == dist[nodes].max()]
    top = top[level[top] == level[top].min()]
    best = int(top[0]) if len(top) == 1 else _first_in_topo(src, dst, set(top.tolist()))
    # walk back along runs of chain-following back pointers
    follows = (cpred[order] >= 0) & (back[order] == cpred[order])
    run0 = np.maximum.accumulate(np.where(follows, 0, np.arange(n)))
    parts = []
    v = best
    while True:
        i = pos[v]
        j = run0[i]
        parts.append(order[j : i + 1])
        u = int(order[j])
        if back[u] == u:
            break
        v = int(back[u])
    return np.concatenate(parts[::-1])


def _topo(src, dst):
    """networkx's topological order (generations; gen 0 in node order, children in edge order), or None."""
    both = np.empty(2 * len(src), dtype=np.int64)
    both[0::2], both[1::2] = src, dst
    _, first = np.unique(both, return_index=True)
    nodes = both[np.sort(first)]
    n_max = int(both.max()) + 1
    so = np.argsort(src, kind="stable")
    sptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n_max))]).tolist()
    succ = dst[so].tolist()
    indeg = np.bincount(dst, minlength=n_max).tolist()
    zero = [v for v in nodes.tolist() if indeg[v] == 0]
    topo = []
    while zero:
        gen, zero = zero, []
        for v in gen:
            for c in succ[sptr[v] : sptr[v + 1]]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    zero.append(c)
        topo.extend(gen)
    return topo if len(topo) == len(nodes) else None


def _first_in_topo(src, dst, wanted: set) -> int:
    return next(v for v in _topo(src, dst) if v in wanted)


def dag_longest_path_loop(src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> Optional[np.ndarray]:
    """The same result by networkx's own walk (a Python loop over edges); the reference for any weights."""
    topo = _topo(src, dst)
    if topo is None:
        return None
    n_max = int(max(src.max(), dst.max())) + 1
    po = np.argsort(dst, kind="stable")
    pp = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n_max))]).tolist()
    psrc, pw = src[po].tolist(), w[po].tolist()
    dist = [0.0] * n_max
    back = list(range(n_max))
    best_v, best = topo[0], None
    for v in topo:
        a, b = pp[v], pp[v + 1]
        if a == b:
            d, u = 0.0, v
        else:
            d, u = dist[psrc[a]] + pw[a], psrc[a]
            for k in range(a + 1, b):
                x = dist[psrc[k]] + pw[k]
                if x > d:
                    d, u = x, psrc[k]
            if d < 0:
                d, u = 0.0, v
        dist[v], back[v] = d, u
        if best is None or d > best:
            best, best_v = d, v
    path = [best_v]
    while back[path[-1]] != path[-1]:
        path.append(back[path[-1]])
    return np.array(path[::-1], dtype=np.int64)
