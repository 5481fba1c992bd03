"""Annotation assignment (``holotrace.analysis.annotations.assign_annotations``) against a brute-force reference.

Random annotations and GPU operations are drawn on a few tracks with end points from a small pool of
times, so nested, identical, touching, zero-length and negative-length intervals are common. The
reference loops over every (operation, annotation) pair in Python:

* half-open intervals ``[ts, ts + max(dur, 0))``; an empty interval overlaps nothing;
* a zero-length operation at ``t`` belongs to ``a`` when ``a.ts <= t < a.end`` (``"contain"``), or to
  nothing (``"never"``, HTA under pandas 3);
* among the annotations of the operation's track that qualify, the shortest wins; equal lengths: the
  later one in input order.
"""

from __future__ import annotations

import numpy as np
from _profiles import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from holotrace.analysis.annotations import assign_annotations


def _reference(k, a, zero_length: str) -> list[int]:
    out = []
    for kt, ks, kd in k:
        ke = ks + max(kd, 0)
        best, best_len = -1, 0.0
        for j, (at, as_, ad) in enumerate(a):
            ae = as_ + max(ad, 0)
            if at != kt or ae <= as_:
                continue
            if ke > ks:
                hit = ks < ae and as_ < ke
            else:
                hit = zero_length == "contain" and as_ <= ks < ae
            if hit and (best < 0 or ae - as_ <= best_len):  # input order: ties go to the later one
                best, best_len = j, ae - as_
        out.append(best)
    return out


@st.composite
def rows(draw, max_size: int):
    """(track, start, duration) triples; times from a small pool (integers or halves)."""
    half = draw(st.booleans())
    pool = draw(st.lists(st.integers(-4, 40).map(lambda x: x / 2 if half else float(x)), min_size=1, max_size=8))
    point = st.sampled_from(pool)
    dur = st.one_of(st.sampled_from([0.0, -1.0]), st.builds(lambda a, b: b - a, point, point).map(abs))
    return draw(st.lists(st.tuples(st.integers(0, 2), point, dur), max_size=max_size))


def _run(k, a, zero_length):
    arr = lambda xs, i, t: np.array([x[i] for x in xs], dtype=t)
    return assign_annotations(
        arr(k, 0, np.int64),
        arr(k, 1, np.float64),
        arr(k, 2, np.float64),
        arr(a, 0, np.int64),
        arr(a, 1, np.float64),
        arr(a, 2, np.float64),
        zero_length=zero_length,
    ).tolist()


@settings(max_examples=examples(300))
@given(k=rows(30), a=rows(15), zero_length=st.sampled_from(["contain", "never"]))
@example(k=[(0, 5.0, 1.0)], a=[(0, 0.0, 10.0), (0, 0.0, 10.0)], zero_length="contain")  # equal lengths: later wins
@example(k=[(0, 5.0, 0.0), (0, 10.0, 0.0)], a=[(0, 0.0, 10.0), (0, 5.0, 0.0)], zero_length="contain")
@example(k=[(0, 5.0, 0.0)], a=[(0, 0.0, 10.0)], zero_length="never")
@example(k=[(0, 0.0, 10.0)], a=[(0, 10.0, 5.0), (0, -5.0, 5.0), (1, 2.0, 1.0)], zero_length="contain")  # touching
def test_innermost_annotation_equals_brute_force(k, a, zero_length):
    assert _run(k, a, zero_length) == _reference(k, a, zero_length)
