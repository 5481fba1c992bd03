"""The GPU unions kept on a rank view are the merges of the rows they stand for (integer and float bounds)."""

from __future__ import annotations

import numpy as np
import pytest

from holotrace.analysis import gpu_union, intervals
from holotrace.model.view import RankView

COMP = 0


def _view(seed: int, floats: bool, n: int = 3000, steps_in_order: bool = False) -> RankView:
    rng = np.random.default_rng(seed)
    ts = rng.integers(10**12, 10**12 + 50_000, n)
    if steps_in_order:  # each step's work ends before the next one's starts
        ts -= ((ts - 10**12) % 10_000 > 9_500) * 600
    dur = rng.integers(0, 400, n)
    if floats:  # HTA-like: float ends, a few negative durations and NaN iterations
        ts_f = ts.astype(np.float64)
        end = ts_f + dur - (rng.random(n) < 0.02) * 500
        iteration = rng.integers(-1, 6, n).astype(np.float64)
        iteration[rng.random(n) < 0.05] = np.nan
    else:
        end = ts + dur
        iteration = rng.integers(-1, 6, n).astype(np.int32)
    if steps_in_order:  # each step's GPU work after the previous step's (every row in a step)
        iteration = ((ts - 10**12) // 10_000).astype(iteration.dtype)
    cols = {
        "ts": ts,
        "end": end,
        "gpu": rng.random(n) < 0.7,
        "kernel_type": rng.integers(0, 3, n).astype(np.int8),
        "iteration": iteration,
    }
    return RankView(0, cols, {})


@pytest.mark.parametrize("floats", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unions_are_the_merges_of_their_rows(seed, floats):
    v = _view(seed, floats)
    g = np.flatnonzero(v["gpu"])
    ts, end = v.bounds(g)
    kt = v["kernel_type"][g]
    for t in (None, 0, 1, 2):
        m = slice(None) if t is None else kt == t
        want = intervals.merge(ts[m], end[m])
        got = gpu_union.union(v, t)
        assert got.start.tobytes() == want.start.tobytes() and got.end.tobytes() == want.end.tobytes()
        assert got.start.dtype == want.start.dtype and got.end.dtype == want.end.dtype


@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize("floats", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_work_is_each_steps_merge(seed, floats, in_order):
    v = _view(seed, floats, steps_in_order=in_order)
    w = gpu_union.step_work(v, COMP)
    it = v["iteration"]
    g = np.flatnonzero(v["gpu"] & (it >= 0))
    steps = np.unique(it[g])
    assert w.steps.tolist() == steps.tolist()
    for k, s in enumerate(steps.tolist()):
        rows = g[it[g] == s]
        ts, end = v.bounds(rows)
        u = intervals.merge(ts, end)
        kt = v["kernel_type"][rows] == COMP
        c = intervals.merge(ts[kt], end[kt])
        assert w.counts[k] == len(rows)
        assert w.busy[k] == intervals.total_length(u) and w.span[k] == intervals.span(u)
        assert w.compute[k] == intervals.total_length(c)
        assert w.busy.dtype == np.asarray(intervals.total_length(u)).dtype


def test_kept_on_the_view_and_read_only():
    v = _view(3, False)
    assert gpu_union.union(v, 1) is gpu_union.union(v, 1)
    assert gpu_union.step_work(v, COMP) is gpu_union.step_work(v, COMP)
    assert not gpu_union.union(v).start.flags.writeable
    assert not gpu_union.step_work(v, COMP).busy.flags.writeable


def test_no_gpu_work():
    v = RankView(
        0,
        {
            "ts": np.zeros(0, np.int64),
            "end": np.zeros(0, np.int64),
            "gpu": np.zeros(0, bool),
            "kernel_type": np.zeros(0, np.int8),
            "iteration": np.zeros(0, np.int32),
        },
        {},
    )
    assert len(gpu_union.union(v)) == 0
    w = gpu_union.step_work(v, COMP)
    assert len(w.steps) == len(w.busy) == 0
