"""Call graphs: CPU call stacks per thread with GPU work attached under its launch call.

This is the call graph HTA's kernel-sequence analysis builds
(``hta.common.trace_call_graph.CallGraph``, spec 12 §1), computed without a
Python comparator or a per-event loop:

* **Nesting** (per ``(pid, tid)`` thread): every CPU event contributes an
  open and a close endpoint. Endpoints are put in one total order (below) and
  the depth of an event is the number of events open when it opens. Like
  HTA's sweep, a close pops *whatever is on top* of the stack, so the parent
  of an event opening at level ``L`` is the latest event that opened at level
  ``L - 1`` before it. Both are found with cumulative sums and binary
  searches over the sorted endpoints.
* **Endpoint order** at one instant on one thread: closes of positive-length
  events (shorter first, then higher index), opens of positive-length events
  (longer first, then lower index), and the endpoints of zero-length events
  (opens by index ascending, then closes by index descending). Zero-length
  events sit *before* the closes when no positive-length event opens at that
  instant, so a zero-length event at an interval's boundary nests inside it,
  as in HTA. Where HTA's comparator is not a consistent order (a zero-length
  event exactly where one interval ends and the next begins) it goes under the
  opening interval. Negative durations (ns rounding) count as zero; HTA raises
  ``ValueError: Unexpected case`` there (spec 12 §1.5).
* **Kernels** hang under their launch call; GPU rows are leaves.
* **Backward thread** (``link_backward``): HTA re-parents the first-layer
  events of the autograd thread under ``## backward ##`` annotations (or
  ``ProfilerStep#`` ranges) of the main thread; reproduced, including the
  corner where a step range ends up as its own parent and drops out of the
  graph (``hta_compat``).

The result holds, per table row, ``parent`` (row position, ``-1`` for none),
``depth`` (``-1`` outside the graph), ``num_kernels`` and ``kernel_dur_sum``
of the subtree, and can label every row with the root of a set of subtrees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "CallGraph",
    "build_call_graph",
    "hta_call_graph",
    "native_call_graph",
    "thread_device_is_gpu",
]


@dataclass(frozen=True)
class CallGraph:
    """A call graph over the rows of one rank's table (all arrays indexed by row position).

    Attributes:
        parent: parent row position; ``-1`` for top-level events and rows outside the graph.
        depth: 0 for top-level CPU events, +1 per level, kernels one below their launch
            call; ``-1`` for rows outside the graph.
        in_graph: the row is a node (a CPU event on a CPU thread, or linked GPU work).
        is_kernel: the row is GPU work linked under a launch call.
        num_kernels: GPU rows in the subtree (1 for a GPU row itself).
        kernel_dur_sum: sum of their durations.
        order: row positions sorted by ``depth`` (ascending), nodes only.
    """

    parent: np.ndarray
    depth: np.ndarray
    in_graph: np.ndarray
    is_kernel: np.ndarray
    num_kernels: np.ndarray
    kernel_dur_sum: np.ndarray
    order: np.ndarray

    def subtree_labels(self, roots: np.ndarray) -> np.ndarray:
        """Label every row with the position of the root whose subtree holds it.

        Args:
            roots: row positions of subtree roots. A root inside another root's
                subtree starts its own subtree (the innermost root wins).

        Returns:
            int64 array, one per row: the root position, or -1.
        """
        n = len(self.parent)
        label = np.full(n, -1, dtype=np.int64)
        roots = np.asarray(roots, dtype=np.int64)
        if roots.size == 0:
            return label
        is_root = np.zeros(n, dtype=bool)
        is_root[roots] = True
        label[roots] = roots
        order = self.order
        d = self.depth[order]
        # walk levels top-down: a non-root child inherits its parent's label
        bounds = np.flatnonzero(np.diff(d)) + 1
        for chunk in np.split(order, bounds):
            p = self.parent[chunk]
            inherit = (~is_root[chunk]) & (p >= 0)
            c = chunk[inherit]
            label[c] = label[p[inherit]]
        # roots outside the graph (not nodes) still label themselves
        return label

    def ancestors_matching(self, mask: np.ndarray) -> np.ndarray:
        """For every row, whether a strict ancestor satisfies ``mask``."""
        n = len(self.parent)
        has = np.zeros(n, dtype=bool)
        order = self.order
        d = self.depth[order]
        bounds = np.flatnonzero(np.diff(d)) + 1
        for chunk in np.split(order, bounds):
            p = self.parent[chunk]
            ok = p >= 0
            c = chunk[ok]
            pp = p[ok]
            has[c] = has[pp] | mask[pp]
        return has


def thread_device_is_gpu(
    codes: np.ndarray, stream: np.ndarray, pid_is_zero: np.ndarray, tid_is_zero: np.ndarray
) -> np.ndarray:
    """HTA's ``infer_device_type(...) == GPU`` per thread group (spec 12 §5.3).

    A ``(pid, tid)`` group is a GPU stream when all its rows have ``stream > 0``,
    or all have ``pid == 0``, or all have ``tid == 0``.

    Args:
        codes: group code per row (0..G-1).
        stream, pid_is_zero, tid_is_zero: per row.

    Returns:
        bool per group.
    """
    g = int(codes.max()) + 1 if codes.size else 0
    size = np.bincount(codes, minlength=g)

    def all_true(x: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=x.astype(np.float64), minlength=g) == size

    return all_true(stream > 0) | all_true(pid_is_zero) | all_true(tid_is_zero)


def _endpoint_order(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort the open/close endpoints of events (see module docstring).

    Returns:
        ``(node, is_open)`` per sorted endpoint: the event (position in the
        input arrays) and whether it is its open endpoint.
    """
    m = len(ts)
    end = ts + dur
    zero = dur == 0
    # does a positive-length event open at (thread, time)?
    po_keys = pd.MultiIndex.from_arrays([thread[~zero], ts[~zero]])
    z_keys_open = pd.MultiIndex.from_arrays([thread[zero], ts[zero]])
    has_po = np.zeros(m, dtype=bool)
    if zero.any() and (~zero).any():
        has_po[np.flatnonzero(zero)] = z_keys_open.isin(po_keys)
    node = np.concatenate([np.arange(m), np.arange(m)])
    is_open = np.concatenate([np.ones(m, dtype=bool), np.zeros(m, dtype=bool)])
    time = np.concatenate([ts, end])
    z2 = np.concatenate([zero, zero])
    hp2 = np.concatenate([has_po, has_po])
    # class at one instant: 0 zero-length (no positive open here), 1 positive close,
    # 2 positive open, 3 zero-length (a positive open here)
    cls = np.where(z2, np.where(hp2, 3, 0), np.where(is_open, 2, 1))
    sub = np.where(z2 & ~is_open, 1, 0)  # zero-length: opens before closes
    d2 = np.concatenate([dur, dur]).astype(np.float64)
    i2 = np.concatenate([index, index]).astype(np.float64)
    k1 = np.where(z2, 0.0, np.where(is_open, -d2, d2))
    k2 = np.where(is_open, i2, -i2)
    th2 = np.concatenate([thread, thread])
    order = np.lexsort((k2, k1, sub, cls, time, th2))
    return node[order], is_open[order]


def _nest(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Level (depth on its thread) and parent (input position, -1 top level) of each event."""
    m = len(ts)
    level = np.zeros(m, dtype=np.int64)
    parent = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return level, parent
    node, is_open = _endpoint_order(thread, ts, dur, index)
    delta = np.where(is_open, 1, -1)
    before = np.cumsum(delta) - delta  # stack size before each endpoint (threads are balanced)
    opos = np.flatnonzero(is_open)
    onode = node[opos]
    olevel = before[opos]
    level[onode] = olevel
    big = np.int64(2 * m + 2)
    keys = olevel * big + opos
    srt = np.argsort(keys, kind="stable")
    skeys = keys[srt]
    has_parent = olevel > 0
    q = (olevel[has_parent] - 1) * big + opos[has_parent]
    j = np.searchsorted(skeys, q, side="left") - 1
    parent[onode[has_parent]] = onode[srt[j]]
    return level, parent


def _finish(
    n: int,
    parent: np.ndarray,
    in_graph: np.ndarray,
    is_kernel: np.ndarray,
    dur: np.ndarray,
    detached: np.ndarray | None = None,
    stale_depth: np.ndarray | None = None,
) -> CallGraph:
    """Depths, subtree kernel counts and durations from a parent array."""
    depth = np.full(n, -1, dtype=np.int64)
    nodes = np.flatnonzero(in_graph)
    # depth: walk every node up one level per pass (passes = height of the forest)
    d = np.zeros(n, dtype=np.int64)
    anc = parent.copy()
    alive = nodes[anc[nodes] >= 0]
    while alive.size:
        d[alive] += 1
        anc[alive] = parent[anc[alive]]
        alive = alive[anc[alive] >= 0]
    depth[nodes] = d[nodes]
    if detached is not None and detached.any():
        depth[detached] = stale_depth[detached]
    order = nodes[np.argsort(depth[nodes], kind="stable")]
    num = np.zeros(n, dtype=np.int64)
    ksum = np.zeros(n, dtype=np.float64)
    num[is_kernel] = 1
    ksum[is_kernel] = np.nan_to_num(dur[is_kernel].astype(np.float64))
    dd = depth[order]
    bounds = np.flatnonzero(np.diff(dd)) + 1
    skip = detached if detached is not None else np.zeros(n, dtype=bool)
    for chunk in reversed(np.split(order, bounds)):
        p = parent[chunk]
        ok = (p >= 0) & ~skip[chunk]
        np.add.at(num, p[ok], num[chunk[ok]])
        np.add.at(ksum, p[ok], ksum[chunk[ok]])
    if detached is not None and detached.any():
        # HTA never visits a detached subtree: its rows (kernels included) keep the initial zeros
        num[detached] = 0
        ksum[detached] = 0.0
    return CallGraph(parent, depth, in_graph, is_kernel, num, ksum, order)


def build_call_graph(
    thread: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    index: np.ndarray,
    is_node: np.ndarray,
    launcher: np.ndarray,
    *,
    backward_link: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    hta_compat: bool = False,
) -> CallGraph:
    """Build a call graph over one rank's rows.

    Args:
        thread: thread code per row (rows of one CPU thread share a code).
        ts, dur: start and duration per row (any unit; negative durations count as 0).
        index: stable event id per row (tie-break, as HTA's ``index``).
        is_node: rows that are CPU events on a CPU thread (nested by time).
        launcher: per row, the row position of the CPU launch call it hangs under
            (GPU work), else -1. Only launchers that are nodes are used.
        backward_link: optional ``(backward thread code, main-thread parent rows, None)``
            (see :func:`_backward_parents`): re-parents the first-layer events of the
            backward thread under those rows, in order, as HTA does.
        hta_compat: reproduce HTA's detached-subtree corner of the backward link.

    Returns:
        The :class:`CallGraph`.
    """
    n = len(ts)
    dur_c = np.where(np.isfinite(dur), np.maximum(dur, 0), 0)
    rows = np.flatnonzero(is_node)
    level_r, parent_r = _nest(thread[rows], ts[rows], dur_c[rows], index[rows])
    parent = np.full(n, -1, dtype=np.int64)
    parent[rows] = np.where(parent_r >= 0, rows[np.clip(parent_r, 0, None)], -1)
    level = np.full(n, -1, dtype=np.int64)
    level[rows] = level_r
    in_graph = is_node.copy()
    is_kernel = (launcher >= 0) & ~is_node
    is_kernel[is_kernel] = is_node[launcher[is_kernel]]
    parent[is_kernel] = launcher[is_kernel]
    in_graph |= is_kernel
    detached = None
    stale = None
    if backward_link is not None:
        bwd_thread, main_parents, _ = backward_link
        detached, stale = _link_backward(parent, level, thread, ts, dur_c, is_node, bwd_thread, main_parents, hta_compat)
        if stale is not None:
            stale[is_kernel] = stale[launcher[is_kernel]] + 1 if is_kernel.any() else stale[is_kernel]
    return _finish(n, parent, in_graph, is_kernel, dur, detached, stale)


def _link_backward(
    parent: np.ndarray,
    level: np.ndarray,
    thread: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    is_node: np.ndarray,
    bwd_thread: int,
    main_parents: np.ndarray,
    hta_compat: bool,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Re-parent first-layer events of the backward thread (modifies ``parent`` in place).

    HTA walks the backward parents ``P`` in row order; for each it moves the
    current root's first-layer nodes that lie within ``[P.ts, P.end]`` under
    ``P``. Once the backward root has no children left, the "current root" is
    the main thread's root, whose first layer includes ``P`` itself when ``P``
    is top level: HTA then makes ``P`` its own parent, which cuts ``P``'s
    subtree out of the graph (depths stay thread-local, kernel counts 0).
    The loop runs over the (few) backward-parent rows, vectorised inside.
    """
    n = len(parent)
    end = ts + dur
    first = np.flatnonzero(is_node & (thread == bwd_thread) & (parent < 0))
    remaining = np.ones(first.size, dtype=bool)
    detached = np.zeros(n, dtype=bool) if hta_compat else None
    cut_roots: list[int] = []
    main_thread = thread[main_parents[0]]
    root_is_main = False  # HTA switches roots once the backward root has no children left
    for p in main_parents.tolist():
        if not root_is_main:
            cand = first[remaining]
            inside = (ts[cand] >= ts[p]) & (end[cand] <= end[p])
            if inside.any():
                parent[cand[inside]] = p
                remaining[np.flatnonzero(remaining)[inside]] = False
                root_is_main = not remaining.any()
        elif hta_compat:
            # the current root is the main root: its first layer within P's range
            top = np.flatnonzero(is_node & (thread == main_thread) & (parent < 0) & ~detached)
            inside = top[(ts[top] >= ts[p]) & (end[top] <= end[p])]
            for q in inside.tolist():
                cut_roots.append(q)
                detached[q] = True
    if not cut_roots:
        return None, None
    # mark everything below the cut roots as detached (thread-local depth kept)
    stale = level.copy()
    # rows whose ancestor chain reaches a cut root
    anc = parent.copy()
    cur = np.flatnonzero(anc >= 0)
    while cur.size:
        hit = detached[anc[cur]]
        detached[cur[hit]] = True
        cur = cur[~hit]
        anc[cur] = parent[anc[cur]]
        cur = cur[anc[cur] >= 0]
    # a moved backward node keeps its own-thread level
    return detached, stale


def hta_call_graph(frame: pd.DataFrame, *, hta_compat: bool = True, link_backward: bool = True) -> CallGraph:
    """The call graph of one rank's HTA-style table (``hta_frame`` or HTA's own).

    Args:
        frame: columns ``index, pid, tid, stream, ts, dur, index_correlation``
            and the decoded names in ``s_name``.
        hta_compat: link only GPU rows with ``stream > 0`` (HTA's correlation
            table); otherwise every stream-bearing row (AMD's stream 0 too).
        link_backward: attach the autograd thread under the main thread.

    Returns:
        The :class:`CallGraph` over the rows of ``frame`` (by position).
    """
    n = len(frame)
    pid = frame["pid"].to_numpy()
    tid = frame["tid"].to_numpy()
    stream = frame["stream"].to_numpy().astype(np.int64)
    ts = frame["ts"].to_numpy().astype(np.float64)
    dur = frame["dur"].to_numpy().astype(np.float64)
    index = frame["index"].to_numpy().astype(np.int64)
    names = frame["s_name"].to_numpy(dtype=object)
    thread = pd.MultiIndex.from_arrays([pd.Index(pid, dtype=object), pd.Index(tid, dtype=object)]).factorize()[0].astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    pid_zero = pd.Series(pid, dtype=object).eq(0).to_numpy()
    tid_zero = pd.Series(tid, dtype=object).eq(0).to_numpy()
    gpu_group = thread_device_is_gpu(thread, stream, pid_zero, tid_zero)
    is_node = (stream == -1) & ~gpu_group[thread] if n else np.zeros(0, dtype=bool)

    # GPU work -> launcher row (by event index)
    icorr = frame["index_correlation"].to_numpy().astype(np.int64)
    gpu_side = (stream > 0) if hta_compat else (stream >= 0)
    linked = gpu_side & (icorr > 0)
    launcher = np.full(n, -1, dtype=np.int64)
    if linked.any():
        srt = np.argsort(index, kind="stable")
        pos = np.searchsorted(index[srt], icorr[linked])
        pos = np.clip(pos, 0, n - 1)
        found = index[srt][pos] == icorr[linked]
        rows = np.flatnonzero(linked)
        launcher[rows[found]] = srt[pos[found]]

    backward = None
    if link_backward and n:
        backward = _backward_parents(thread, ~gpu_group, names, stream == -1)
    return build_call_graph(thread, ts, dur, index, is_node, launcher, backward_link=backward, hta_compat=hta_compat)


def native_call_graph(job, rank: int, *, link_backward: bool = True) -> CallGraph:
    """The call graph of a rank's native events (``RankTrace.events``), cached on the job.

    CPU events (ops, annotations, runtime/driver calls, Python functions) nest
    per ``(pid, tid)`` by time (ns); GPU work (kernels, memcpy, memset) hangs
    under its launch call (``partner``); the autograd thread is attached under
    the main thread's ``## backward ##`` annotations as in HTA.
    """
    from holotrace.analysis._select import gpu_activity
    from holotrace.model.classify import CPU_KINDS

    key = ("holotrace.callgraph", int(rank), bool(link_backward))
    memo = getattr(job, "_memo", None)
    if memo is not None and key in memo:
        return memo[key]
    ev = job.rank(rank).events
    n = len(ev)
    kind = ev["kind"].to_numpy()
    is_node = np.isin(kind, [int(k) for k in CPU_KINDS])
    thread = (
        pd.MultiIndex.from_arrays([ev["pid"].to_numpy(), ev["tid"].to_numpy()]).factorize()[0].astype(np.int64)
        if n else np.zeros(0, dtype=np.int64)
    )
    partner = ev["partner"].to_numpy()
    launcher = np.where(gpu_activity(ev) & (partner >= 0), partner, -1).astype(np.int64)
    backward = None
    if link_backward and n:
        g = int(thread.max()) + 1
        cpu_thread = np.bincount(thread, weights=is_node.astype(float), minlength=g) > 0
        names = job.strings.decode(ev["name"].to_numpy())
        backward = _backward_parents(thread, cpu_thread, names, is_node)
    graph = build_call_graph(
        thread, ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy(), ev["index"].to_numpy(), is_node, launcher,
        backward_link=backward,
    )
    if memo is not None:
        memo[key] = graph
    return graph


def _backward_parents(thread: np.ndarray, cpu_thread: np.ndarray, names: np.ndarray, node_ok: np.ndarray):
    """HTA's main/backward stack pairing (spec 12 §1.2 steps 3-4), or None.

    Args:
        thread: thread code per row; cpu_thread: per thread code, whether it has a stack;
        names: decoded names per row; node_ok: rows that can be parents (call-stack nodes).
    """
    s = pd.Series(names, dtype=object).fillna("")
    is_step = s.str.startswith("ProfilerStep#").to_numpy()
    is_autograd = s.str.contains("autograd::", regex=False).to_numpy()
    is_bwd_anno = s.str.startswith("## backward ##").to_numpy()
    g = len(cpu_thread)
    has_step = np.bincount(thread, weights=is_step.astype(float), minlength=g) > 0
    has_autograd = np.bincount(thread, weights=is_autograd.astype(float), minlength=g) > 0
    cpu_groups = np.flatnonzero(cpu_thread)
    labels = []
    for grp in cpu_groups.tolist():  # one entry per thread, not per event
        if has_step[grp]:
            labels.append(("main", grp))
        elif has_autograd[grp]:
            labels.append(("bwd", grp))
    if len(labels) != 2:
        return None
    labels.sort(key=lambda x: x[0])  # HTA sorts by label: the first is linked as backward
    bwd, main = labels[0][1], labels[1][1]
    in_main = thread == main
    parents = np.flatnonzero(in_main & is_bwd_anno)
    if parents.size == 0:
        parents = np.flatnonzero(in_main & is_step)
    # only nodes can be parents (HTA raises otherwise)
    parents = parents[node_ok[parents]]
    if parents.size == 0:
        return None
    return (bwd, parents, None)
