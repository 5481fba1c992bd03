"""Interval arithmetic (``holotrace.analysis.intervals``) against brute-force references.

Random interval sets are drawn from a small pool of time points, so touching, zero-length,
nested, identical and partially overlapping intervals are common. Times are integers
(nanoseconds), dyadic floats (sums exact in float64) or arbitrary floats (compared with a
tolerance). The references are quadratic and loop in Python on purpose:

* union: connected components of the "overlap or touch" graph, each ``[min start, max end)``;
* length: sum of the elementary segments (between consecutive distinct end points) that an
  input interval covers.
"""

from __future__ import annotations

import math
import random

import numpy as np
from _profiles import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from holotrace.analysis import intervals

KINDS = ("int", "dyadic", "float")


def _times(kind: str):
    if kind == "int":
        return st.integers(-30, 80)
    if kind == "dyadic":
        return st.integers(-240, 640).map(lambda k: k / 8)
    return st.floats(-1e4, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@st.composite
def pairs_of(draw, kind: str, max_size: int = 25) -> list[tuple]:
    """Intervals as (start, end) with start <= end, end points drawn from a small pool."""
    pool = draw(st.lists(_times(kind), min_size=1, max_size=10))
    idx = st.integers(0, len(pool) - 1)
    out = []
    for a, b in draw(st.lists(st.tuples(idx, idx), max_size=max_size)):
        s, e = sorted((pool[a], pool[b]))
        out.append((s, e))
    return out


@st.composite
def interval_input(draw, max_size: int = 25):
    kind = draw(st.sampled_from(KINDS))
    return kind, draw(pairs_of(kind, max_size))


def _arrays(kind: str, pairs):
    dt = np.int64 if kind == "int" else np.float64
    return np.array([p[0] for p in pairs], dt), np.array([p[1] for p in pairs], dt)


def _close(kind: str, got, want) -> bool:
    if kind == "float":
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-6)
    return got == want


# ---------------------------------------------------------------------------- references


def ref_union(pairs) -> list[tuple]:
    """Union as sorted components: intervals that overlap or touch (zero-length ones included) join."""
    n = len(pairs)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            (s1, e1), (s2, e2) = pairs[i], pairs[j]
            if max(s1, s2) <= min(e1, e2):
                parent[find(i)] = find(j)
    comps: dict[int, list] = {}
    for i in range(n):
        comps.setdefault(find(i), []).append(pairs[i])
    return sorted((min(s for s, _ in c), max(e for _, e in c)) for c in comps.values())


def _segments(points):
    pts = sorted(set(points))
    return list(zip(pts[:-1], pts[1:]))


def _covers(pairs, a, b) -> bool:
    return any(s <= a and b <= e for s, e in pairs)


def ref_length(pairs, window=None):
    """Measure of the union (inside ``[lo, hi)`` when a window is given)."""
    pts = [t for p in pairs for t in p] + (list(window) if window else [])
    total = 0
    for a, b in _segments(pts):
        if window and not (window[0] <= a and b <= window[1]):
            continue
        if _covers(pairs, a, b):
            total += b - a
    return total


def _pairs(iv: intervals.Intervals) -> list[tuple]:
    return list(zip(iv.start.tolist(), iv.end.tolist()))


# ---------------------------------------------------------------------------- merge, length, span


@settings(max_examples=examples(150))
@given(interval_input(), st.randoms(use_true_random=False))
@example(("int", [(0, 2), (2, 4)]), random.Random(0))  # touching: one interval
@example(("int", [(3, 3)]), random.Random(0))  # zero-length alone
@example(("int", [(0, 3), (3, 3), (5, 5), (5, 9)]), random.Random(0))  # zero-length bridges nothing
@example(("int", [(0, 10), (2, 3), (4, 4)]), random.Random(0))  # nested
@example(("float", [(0.0, 5.5), (3.25, 8.0), (9.0, 9.5)]), random.Random(0))  # partial overlap
@example(("int", []), random.Random(0))
def test_merge_equals_connected_components(data, rnd):
    kind, pairs = data
    s, e = _arrays(kind, pairs)
    u = intervals.merge(s, e)
    assert u.start.dtype == s.dtype and u.end.dtype == e.dtype
    assert _pairs(u) == ref_union(pairs)
    assert (u.end[:-1] < u.start[1:]).all()  # sorted, disjoint and not touching
    assert (u.end >= u.start).all()
    assert len(u) == len(ref_union(pairs))
    # the order of the input does not matter
    shuffled = pairs[:]
    rnd.shuffle(shuffled)
    u2 = intervals.merge(*_arrays(kind, shuffled))
    assert _pairs(u2) == _pairs(u)


@settings(max_examples=examples(150))
@given(interval_input())
def test_total_length_and_span(data):
    kind, pairs = data
    u = intervals.merge(*_arrays(kind, pairs))
    total = intervals.total_length(u)
    assert _close(kind, total, ref_length(pairs))
    assert _close(kind, u.length, total)
    if pairs:
        assert intervals.span(u) == max(e for _, e in pairs) - min(s for s, _ in pairs)
    else:
        assert total == 0 and intervals.span(u) == 0
    if kind == "int":  # and by unit cells, a third way
        cells = set()
        for s, e in pairs:
            cells.update(range(s, e))
        assert total == len(cells)


@settings(max_examples=examples(50))
@given(pairs_of("float"), st.lists(st.integers(0, 30), max_size=5))
def test_nan_rows_are_ignored(pairs, where):
    s, e = _arrays("float", pairs)
    for k in where:  # NaN rows at random places, in the start, the end or both
        k = min(k, len(s))
        s = np.insert(s, k, [np.nan, 1.0, np.nan][k % 3])
        e = np.insert(e, k, [2.0, np.nan, np.nan][k % 3])
    assert _pairs(intervals.merge(s, e)) == ref_union(pairs)


# ---------------------------------------------------------------------------- gaps, clip


@settings(max_examples=examples(150))
@given(interval_input())
def test_gaps_are_the_uncovered_holes(data):
    kind, pairs = data
    u = intervals.merge(*_arrays(kind, pairs))
    g = intervals.gaps(u)
    comps = ref_union(pairs)
    assert _pairs(g) == [(a[1], b[0]) for a, b in zip(comps[:-1], comps[1:])]
    assert (g.end > g.start).all()
    for gs, ge in _pairs(g):  # no input reaches inside a gap
        assert all(e <= gs or s >= ge for s, e in pairs)
    if pairs:
        assert _close(kind, intervals.total_length(u) + (g.end - g.start).sum(), intervals.span(u))


@settings(max_examples=examples(150))
@given(st.sampled_from(KINDS).flatmap(lambda k: st.tuples(st.just(k), pairs_of(k), _times(k), _times(k))))
@example(("int", [(0, 10), (20, 30)], 10, 20))  # window exactly on a gap
@example(("int", [(0, 10), (5, 5)], 5, 5))  # empty window
@example(("int", [(0, 10)], 8, 2))  # inverted window
def test_clip_keeps_the_part_inside_the_window(data):
    kind, pairs, lo, hi = data
    u = intervals.merge(*_arrays(kind, pairs))
    c = intervals.clip(u, lo, hi)
    clipped_inputs = [(max(s, lo), min(e, hi)) for s, e in pairs if min(e, hi) > max(s, lo)]
    assert _pairs(c) == ref_union(clipped_inputs)
    assert (c.end > c.start).all() and (c.start >= lo).all() and (c.end <= hi).all()
    assert _close(kind, intervals.total_length(c), ref_length(pairs, (lo, hi)) if lo < hi else 0)


# ---------------------------------------------------------------------------- sweep, coverage, intersection


@st.composite
def interval_sets(draw, max_sets: int = 4):
    kind = draw(st.sampled_from(KINDS))
    raw = draw(st.lists(pairs_of(kind, max_size=8), min_size=0, max_size=max_sets))
    return kind, raw, [intervals.merge(*_arrays(kind, p)) for p in raw]


def ref_sweep(raw):
    """Elementary segments between all boundaries of the merged sets, labelled by the sets covering them."""
    merged = [ref_union(p) for p in raw]
    points = [t for m in merged for iv in m for t in iv]
    out = []
    for a, b in _segments(points):
        mask = sum(1 << i for i, m in enumerate(merged) if _covers(m, a, b))
        if mask:
            out.append((a, b, mask))
    return out


@settings(max_examples=examples(150))
@given(interval_sets())
@example(
    (
        "int",
        [[(0, 2)], [(2, 4)]],
        [intervals.merge(np.array([0]), np.array([2])), intervals.merge(np.array([2]), np.array([4]))],
    )
)  # touching sets
def test_sweep_labels_every_elementary_segment(data):
    kind, raw, sets = data
    s, e, m = intervals.sweep(sets)
    assert list(zip(s.tolist(), e.tolist(), m.tolist())) == ref_sweep(raw)
    masks, lengths = intervals.coverage_by_mask(sets)
    want: dict[int, float] = {}
    for a, b, mask in ref_sweep(raw):
        want[mask] = want.get(mask, 0) + (b - a)
    assert masks.tolist() == sorted(want)
    for k, v in zip(masks.tolist(), lengths.tolist()):
        assert _close(kind, v, want[k])


@settings(max_examples=examples(150))
@given(st.sampled_from(KINDS).flatmap(lambda k: st.tuples(st.just(k), pairs_of(k), pairs_of(k))))
def test_intersection_length(data):
    kind, a, b = data
    ia, ib = intervals.merge(*_arrays(kind, a)), intervals.merge(*_arrays(kind, b))
    ua, ub = ref_union(a), ref_union(b)
    want = sum(
        y - x for x, y in _segments([t for iv in ua + ub for t in iv]) if _covers(ua, x, y) and _covers(ub, x, y)
    )
    got = intervals.intersection_length(ia, ib)
    assert _close(kind, got, want)
    assert _close(kind, intervals.intersection_length(ib, ia), want)
    # inclusion-exclusion against the union of both
    both = intervals.merge(*_arrays(kind, a + b))
    assert _close(kind, intervals.total_length(ia) + intervals.total_length(ib) - got, intervals.total_length(both))
    if kind == "int":
        ca = {c for s, e in a for c in range(s, e)}
        cb = {c for s, e in b for c in range(s, e)}
        assert got == len(ca & cb)


def test_stable_order_is_the_stable_argsort():
    """Narrowed 16-bit keys (radix sort) give numpy's stable order of the keys as given, ties by position."""
    rng = np.random.default_rng(3)
    for dtype in (np.int64, np.int32, np.uint64, np.int8, np.float64):
        for lo, span, n in ((0, 5, 1000), (-40_000, 65_535, 5000), (10**12, 70_000, 5000), (-3, 2, 10), (0, 0, 100)):
            if np.dtype(dtype).kind == "u" and lo < 0 or np.dtype(dtype).itemsize == 1 and (lo < -128 or span > 100):
                continue
            keys = (lo + rng.integers(0, span + 1, n)).astype(dtype)
            assert np.array_equal(intervals.stable_order(keys), np.argsort(keys, kind="stable"))
