"""Call graphs: CPU call stacks per thread with GPU work attached under its launch call.

The one call-stack builder of holotrace. :func:`call_graph` builds it for one rank of a
:class:`~holotrace.model.view.JobView`; the rule set decides HTA's differences (which rows are
nodes, which GPU rows are linked, HTA's backward-link corner). It is the call graph HTA's
kernel-sequence analysis builds (``hta.common.trace_call_graph.CallGraph``, spec 12 §1),
computed without a Python comparator or a per-event loop:

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
  ``ProfilerStep#`` ranges) of the main thread; reproduced, including (under
  ``rules.hta_quirks``) the corner where a step range ends up as its own parent
  and drops out of the graph.

The result holds, per row, ``parent`` (row position, ``-1`` for none),
``depth`` (``-1`` outside the graph), ``num_kernels`` and ``kernel_dur_sum``
of the subtree, and can label every row with the root of a set of subtrees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from holotrace.analysis.endpoint_order import endpoint_order as _endpoint_order
from holotrace.analysis.grouped import factorize
from holotrace.model import classify
from holotrace.model.classify import CPU_KINDS, RuleSet, kind_in
from holotrace.model.link import isin_ids
from holotrace.model.view import resolve

try:
    from holotrace.analysis import _callstack as _sweep
except ImportError:  # (a source tree without the compiled sweep: the same levels and parents by sorts and searches)
    _sweep = None

__all__ = [
    "CallGraph",
    "build_call_graph",
    "call_graph",
    "cpu_parents",
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


def _nest(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Level (depth on its thread) and parent (input position, -1 top level) of each event."""
    m = len(ts)
    level = np.zeros(m, dtype=np.int64)
    parent = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return level, parent
    node, is_open = _endpoint_order(thread, ts, dur, index)
    if _sweep is not None:  # (the compiled sweep: a stack, no temporaries)
        _sweep.nest(node, is_open, level, parent)
        return level, parent
    delta = is_open.view(np.int8) * np.int8(2) - np.int8(1)  # (small types: fewer pages to touch)
    before = np.cumsum(delta, dtype=np.int32 if m < 2**30 else np.int64)
    before -= delta  # stack size before each endpoint (threads are balanced)
    opos = np.flatnonzero(is_open)
    onode = node[opos]
    olevel = before[opos]
    level[onode] = olevel
    # the parent of an open at level L: the last open at level L - 1 before it. The opens sorted by (level,
    # position): a stable sort by level alone (positions ascend already; a radix sort when levels are small)
    big = np.int64(2 * m + 2)
    small = olevel.astype(np.int16) if len(olevel) and int(olevel.max()) < 2**15 else olevel
    srt = np.argsort(small, kind="stable")
    skeys = olevel[srt] * big + opos[srt]
    # queried in that order (ascending keys: each a lookup near the previous one), the opens at level 0 first
    k0 = int(np.searchsorted(olevel[srt], 1))
    j = np.searchsorted(skeys, skeys[k0:] - big, side="left") - 1
    parent[onode[srt[k0:]]] = onode[srt[j]]
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
    backward_link: tuple[int, np.ndarray] | None = None,
    hta_quirks: bool = False,
) -> CallGraph:
    """Build a call graph over one rank's rows.

    Args:
        thread: thread code per row (rows of one CPU thread share a code).
        ts, dur: start and duration per row (any unit; negative durations count as 0).
        index: stable event id per row (tie-break, as HTA's ``index``).
        is_node: rows that are CPU events on a CPU thread (nested by time).
        launcher: per row, the row position of the CPU launch call it hangs under
            (GPU work), else -1. Only launchers that are nodes are used.
        backward_link: optional ``(backward thread code, main-thread parent rows)``
            (see :func:`_backward_parents`): re-parents the first-layer events of the
            backward thread under those rows, in order, as HTA does.
        hta_quirks: reproduce HTA's detached-subtree corner of the backward link.

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
        bwd_thread, main_parents = backward_link
        detached, stale = _link_backward(
            parent, level, thread, ts, dur_c, is_node, bwd_thread, main_parents, hta_quirks
        )
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
    hta_quirks: bool,
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
    detached = np.zeros(n, dtype=bool) if hta_quirks else None
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
        elif hta_quirks:
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


def call_graph(view, rank: int, *, rules: RuleSet | None = None, link_backward: bool = True) -> CallGraph:
    """The call graph of one rank of a :class:`~holotrace.model.view.JobView` (rows = the view's rows).

    Args:
        view: a JobView (a Job is read under ``rules``, default holotrace's).
        rank: the rank.
        rules: the rule set (default: the view's). ``rules.hta_table``: HTA's nodes, the CPU rows
            (``stream == -1``) of threads that are not GPU streams (:func:`thread_device_is_gpu`);
            otherwise the CPU kinds of the rule table (ops, annotations, runtime/driver calls,
            Python functions). ``rules.hta_quirks``: only GPU rows with ``stream > 0`` hang under their
            launch (HTA's correlation table; AMD's stream 0 is left out), and HTA's detached-subtree
            corner of the backward link is reproduced.
        link_backward: attach the autograd thread's top-level ops under the main thread's
            ``## backward ##`` annotations (or ``ProfilerStep#`` ranges), as HTA does.

    Returns:
        The :class:`CallGraph`. Nothing is cached: callers that reuse a graph keep it.
    """
    view = resolve(view, rules, ranks=[rank])
    rules = view.rules
    rv = view[rank]
    n = rv.n
    stream = rv["stream"]
    thread = _thread_codes(rv["pid"], rv["tid"])
    if rules.hta_table:
        gpu_thread = thread_device_is_gpu(thread, stream, rv["pid"] == 0, rv["tid"] == 0)
        cpu_thread = ~gpu_thread
        is_node = (stream == -1) & cpu_thread[thread] if n else np.zeros(0, dtype=bool)
        parent_ok = stream == -1
    else:
        is_node = kind_in(rv["kind"], CPU_KINDS)
        g = int(thread.max()) + 1 if n else 0
        cpu_thread = np.bincount(thread, weights=is_node, minlength=g) > 0
        parent_ok = is_node
    gpu_side = rv["gpu"] & (stream > 0) if rules.hta_quirks else rv["gpu"]
    partner = rv["partner"]
    launcher = np.where(gpu_side & (partner >= 0), partner, -1).astype(np.int64)
    backward = None
    if link_backward and n:
        flags = [
            _has_name(view, rv["name"], rule)
            for rule in (classify.is_step_range_name, classify.is_autograd_name, classify.is_backward_annotation)
        ]
        backward = _backward_parents(thread, cpu_thread, *flags, parent_ok)
    return build_call_graph(
        thread, rv["ts"], rv["dur"], rv["index"], is_node, launcher, backward_link=backward, hta_quirks=rules.hta_quirks
    )


def cpu_parents(view, rank: int) -> np.ndarray:
    """Per row of one rank: the row of the innermost CPU event around it on its thread (-1 at the top level and for
    GPU rows). The parents :func:`call_graph` gives CPU rows with ``link_backward=False``, without building the
    rest of the graph (kernels, depths, subtree sums)."""
    view = resolve(view, None, ranks=[rank])
    if view.rules.hta_table:
        return call_graph(view, rank, link_backward=False).parent
    rv = view[rank]
    rows = np.flatnonzero(kind_in(rv["kind"], CPU_KINDS))
    dur = rv["dur"][rows]
    dur = np.maximum(dur, 0) if dur.dtype.kind in "iu" else np.where(np.isfinite(dur), np.maximum(dur, 0), 0)
    thread = _thread_codes(rv.at("pid", rows), rv.at("tid", rows))  # (the CPU rows' threads: a parent is on its own)
    ts, index = rv["ts"][rows], rv["index"][rows]
    parent = np.full(rv.n, -1, dtype=np.int64)
    if _sweep is not None and len(rows):  # (the sweep writes the rows' parents: no per-event arrays)
        _sweep.nest(*_endpoint_order(thread, ts, dur, index), np.zeros(0, dtype=np.int64), parent, rows)
        return parent
    _, parent_r = _nest(thread, ts, dur, index)
    has = np.flatnonzero(parent_r >= 0)
    parent[rows[has]] = rows[parent_r[has]]
    return parent


def _thread_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """A code per ``(pid, tid)`` thread, numbered in order of first appearance."""
    if not len(pid):
        return np.zeros(0, dtype=np.int64)
    return factorize(_pair_key(pid, tid))[0]


def _pair_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One integer per ``(pid, tid)`` pair, equal exactly for equal pairs: the pair packed from its offsets when
    they fit in int64, else from each column's factorize codes."""
    if pid.dtype.kind == "i" and tid.dtype.kind == "i":
        p0, t0 = int(pid.min()), int(tid.min())
        tspan = int(tid.max()) - t0 + 1
        if (int(pid.max()) - p0 + 1) * tspan < 2**62:
            return (pid.astype(np.int64) - p0) * tspan + (tid.astype(np.int64) - t0)
    tc, tu = factorize(tid)
    return factorize(pid)[0] * len(tu) + tc


def _has_name(view, names: np.ndarray, rule) -> np.ndarray:
    """Rows whose name satisfies ``rule`` (evaluated once per string of the job's table)."""
    ids = view.name_ids(rule)
    return isin_ids(names, ids) if len(ids) else np.zeros(len(names), dtype=bool)


def _backward_parents(
    thread: np.ndarray,
    cpu_thread: np.ndarray,
    is_step: np.ndarray,
    is_autograd: np.ndarray,
    is_bwd_anno: np.ndarray,
    parent_ok: np.ndarray,
) -> tuple[int, np.ndarray] | None:
    """HTA's main/backward stack pairing (spec 12 §1.2 steps 3-4), or None.

    Args:
        thread: thread code per row; cpu_thread: per thread code, whether it has a stack;
        is_step, is_autograd, is_bwd_anno: per row, the name rules of :mod:`holotrace.model.classify`;
        parent_ok: rows that can be parents.

    Returns:
        ``(backward thread code, main-thread parent rows)``.
    """
    g = len(cpu_thread)
    has_step = np.bincount(thread, weights=is_step, minlength=g) > 0
    has_autograd = np.bincount(thread, weights=is_autograd, minlength=g) > 0
    labels = []
    for grp in np.flatnonzero(cpu_thread).tolist():  # one entry per thread, not per event
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
    parents = parents[parent_ok[parents]]  # only call-stack rows can be parents (HTA raises otherwise)
    if parents.size == 0:
        return None
    return bwd, parents
