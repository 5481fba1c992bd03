"""The call-stack builder (``holotrace.analysis.callstack.call_graph``) against brute-force nesting.

Events are drawn per thread from a small pool of time points, so nested, touching, identical,
zero-length, negative-duration (ns rounding) and partially overlapping events are common; event ids
are shuffled against row order so the tie-breaks read the id, not the row. Two references, both
quadratic Python on purpose:

* **containment** (sets with no partial overlap): an event's ancestors are the events that contain
  it under the documented boundary rules (touching events are siblings; a zero-length event at an
  interval's end nests inside it unless another interval opens there; zero-length events at one
  instant nest in id order); depth = number of ancestors, parent = the innermost;
* **stack sweep** (any set): the endpoints in the documented order, replayed with an explicit stack
  where a close pops whatever is on top (HTA's sweep).

GPU rows hang under their launch call; subtree kernel counts and durations are checked by walking
parent pointers.
"""

from __future__ import annotations

import numpy as np
from _profiles import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from holotrace.analysis.callstack import call_graph
from holotrace.model.classify import HTA, HTA_FIXED, NATIVE, Kind
from holotrace.model.strings import StringTable
from holotrace.model.view import COLUMNS, JobView, RankView

THREADS = [(1, 1), (1, 2), (2, 1)]


# ---------------------------------------------------------------------------- generated event sets


def _partial_overlap(a, b) -> bool:
    (s1, e1), (s2, e2) = a, b
    return (s1 < s2 < e1 < e2) or (s2 < s1 < e2 < e1)


@st.composite
def event_sets(draw, laminar: bool):
    """CPU events as (thread, ts, dur), plus kernels as (launch row, dur)."""
    pool = sorted(set(draw(st.lists(st.integers(0, 60), min_size=1, max_size=8))))
    idx = st.integers(0, len(pool) - 1)
    events = []
    kept: dict[int, list] = {}
    for th, a, b, shape in draw(
        st.lists(
            st.tuples(st.integers(0, len(THREADS) - 1), idx, idx, st.sampled_from(["interval", "zero", "negative"])),
            max_size=24,
        )
    ):
        ts, end = sorted((pool[a], pool[b]))
        if shape == "zero":
            end = ts
        if shape == "negative":  # HTA's rounding can leave dur = -1: counts as zero-length at ts
            events.append((th, ts, -1))
            continue
        if laminar and end > ts and any(_partial_overlap((ts, end), k) for k in kept.get(th, [])):
            continue
        kept.setdefault(th, []).append((ts, end))
        events.append((th, ts, end - ts))
    n = len(events)
    kernels = []
    if n:
        for row, dur in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, 9)), max_size=8)):
            kernels.append((row, dur))
    ids = draw(st.permutations(list(range(n + len(kernels)))))
    return events, kernels, list(ids)


def _view(events, kernels, ids) -> JobView:
    """One rank of CPU events (ops on THREADS) and kernels (stream 7) launched by CPU rows."""
    n, k = len(events), len(kernels)
    m = n + k
    cpu = np.arange(m) < n
    pid = np.array([THREADS[e[0]][0] for e in events] + [0] * k, dtype=np.int64)
    tid = np.array([THREADS[e[0]][1] for e in events] + [7] * k, dtype=np.int64)
    ts = np.array([e[1] for e in events] + [100 + i for i in range(k)], dtype=np.int64)
    dur = np.array([e[2] for e in events] + [d for _, d in kernels], dtype=np.int64)
    partner = np.full(m, -1, dtype=np.int64)
    partner[n:] = [r for r, _ in kernels]
    kind = np.where(cpu, int(Kind.CPU_OP), int(Kind.KERNEL)).astype(np.int8)
    cols = {c: np.full(m, -1, dtype=np.int64) for c in COLUMNS}
    cols.update(
        row=np.arange(m, dtype=np.int64),
        index=np.array(ids, dtype=np.int64),
        name=np.zeros(m, dtype=np.int64),
        pid=pid,
        tid=tid,
        ts=ts,
        dur=dur,
        end=ts + dur,
        stream=np.where(cpu, -1, 7).astype(np.int64),
        kind=kind,
        gpu=~cpu,
        kernel_type=np.where(cpu, -1, 2).astype(np.int8),
        partner=partner,
    )
    return JobView({0: RankView(0, cols, cols)}, StringTable(["op"]), NATIVE, 1)


# ---------------------------------------------------------------------------- references


def _order_key(i, is_open, thread, ts, dur, ids, positive_opens):
    """The documented endpoint order at one instant on one thread."""
    d = max(dur[i], 0)
    t = ts[i] + (0 if is_open else d)
    if d == 0:
        cls = 3 if (thread[i], ts[i]) in positive_opens else 0
        return (t, cls, 0 if is_open else 1, 0, ids[i] if is_open else -ids[i])
    return (t, 2 if is_open else 1, 0, -d if is_open else d, ids[i] if is_open else -ids[i])


def ref_sweep(thread, ts, dur, ids):
    """Depth and parent of every event by replaying the endpoints with an explicit stack."""
    n = len(ts)
    depth, parent = [-1] * n, [-1] * n
    positive_opens = {(thread[i], ts[i]) for i in range(n) if dur[i] > 0}
    for th in set(thread):
        rows = [i for i in range(n) if thread[i] == th]
        ends = [(r, o) for r in rows for o in (True, False)]
        ends.sort(key=lambda e: _order_key(e[0], e[1], thread, ts, dur, ids, positive_opens))
        stack: list[int] = []
        for r, is_open in ends:
            if is_open:
                depth[r] = len(stack)
                parent[r] = stack[-1] if stack else -1
                stack.append(r)
            else:
                stack.pop()  # whatever is on top
    return depth, parent


def ref_containment(thread, ts, dur, ids):
    """Depth and parent from containment (valid when no two positive-length events partially overlap)."""
    n = len(ts)
    d = [max(x, 0) for x in dur]
    positive_opens = {(thread[i], ts[i]) for i in range(n) if d[i] > 0}

    def contains(b, a):
        if b == a or thread[a] != thread[b]:
            return False
        if d[b] == 0:
            return d[a] == 0 and ts[a] == ts[b] and ids[b] < ids[a]
        sb, eb = ts[b], ts[b] + d[b]
        if d[a] == 0:
            t = ts[a]
            return sb <= t <= eb and not (t == eb and (thread[a], t) in positive_opens)
        sa, ea = ts[a], ts[a] + d[a]
        return sb <= sa and ea <= eb and (d[b] > d[a] or ids[b] < ids[a])

    anc = [[b for b in range(n) if contains(b, a)] for a in range(n)]
    depth = [len(x) for x in anc]
    parent = [max(x, key=lambda b: depth[b]) if x else -1 for x in anc]
    return depth, parent


def _lists(events, ids):
    thread = [e[0] for e in events]
    return thread, [e[1] for e in events], [e[2] for e in events], ids[: len(events)]


def _check_kernels(g, events, kernels):
    """Kernels one level below their launch; subtree counts and sums by walking parent pointers."""
    n = len(events)
    parent = g.parent.tolist()
    want_num = [0] * (n + len(kernels))
    want_sum = [0.0] * (n + len(kernels))
    for j, (launch, dur) in enumerate(kernels):
        row = n + j
        assert parent[row] == launch and g.depth[row] == g.depth[launch] + 1 and g.is_kernel[row]
        x = row
        while x >= 0:
            want_num[x] += 1
            want_sum[x] += dur
            x = parent[x]
    assert g.num_kernels.tolist() == want_num
    assert g.kernel_dur_sum.tolist() == want_sum


# ---------------------------------------------------------------------------- properties


@settings(max_examples=examples(200))
@given(event_sets(laminar=True))
def test_nesting_equals_containment(case):
    events, kernels, ids = case
    g = call_graph(_view(events, kernels, ids), 0, rules=NATIVE, link_backward=False)
    n = len(events)
    want_depth, want_parent = ref_containment(*_lists(events, ids))
    assert g.depth[:n].tolist() == want_depth
    assert g.parent[:n].tolist() == want_parent
    assert (want_depth, want_parent) == ref_sweep(*_lists(events, ids))  # the two references agree here
    _check_kernels(g, events, kernels)


@settings(max_examples=examples(200))
@given(event_sets(laminar=False))
def test_nesting_equals_stack_sweep(case):
    events, kernels, ids = case
    view = _view(events, kernels, ids)
    g = call_graph(view, 0, rules=NATIVE, link_backward=False)
    n = len(events)
    want_depth, want_parent = ref_sweep(*_lists(events, ids))
    assert g.depth[:n].tolist() == want_depth
    assert g.parent[:n].tolist() == want_parent
    _check_kernels(g, events, kernels)
    # a parent is on the same thread and opens no later than its child
    p = g.parent[:n]
    has = np.flatnonzero(p >= 0)
    thread = np.array([e[0] for e in events], dtype=np.int64)
    assert (thread[p[has]] == thread[has]).all()
    assert (view[0]["ts"][p[has]] <= view[0]["ts"][has]).all()
    # HTA's reading of the same rows (CPU rows on CPU threads, kernels on stream 7 > 0) builds the same graph
    for rules in (HTA, HTA_FIXED):
        h = call_graph(view, 0, rules=rules, link_backward=False)
        assert h.parent.tolist() == g.parent.tolist() and h.depth.tolist() == g.depth.tolist()


@settings(max_examples=examples(100))
@given(event_sets(laminar=False), st.randoms(use_true_random=False))
def test_nesting_is_per_thread(case, rnd):
    """Moving one thread's events to the end of the rows (new ids included) changes nothing for any thread."""
    events, kernels, ids = case
    g = call_graph(_view(events, [], ids), 0, rules=NATIVE, link_backward=False)
    th = rnd.randrange(len(THREADS))
    order = [i for i, e in enumerate(events) if e[0] != th] + [i for i, e in enumerate(events) if e[0] == th]
    moved = [events[i] for i in order]
    h = call_graph(_view(moved, [], [ids[i] for i in order]), 0, rules=NATIVE, link_backward=False)
    pos = {old: new for new, old in enumerate(order)}
    assert [h.depth[pos[i]] for i in range(len(events))] == g.depth[: len(events)].tolist()
    assert [(-1 if h.parent[pos[i]] < 0 else order[h.parent[pos[i]]]) for i in range(len(events))] == g.parent[
        : len(events)
    ].tolist()
