"""The compiled call-stack sweep (``holotrace.analysis._callstack``) gives the levels and parents the sorts and
searches give, on events with equal times, zero lengths, nesting and partial overlaps; a bad endpoint list raises."""

import numpy as np
import pytest

from holotrace.analysis import callstack

sweep = pytest.importorskip("holotrace.analysis._callstack")


@pytest.mark.parametrize("seed", range(40))
def test_compiled_sweep_is_the_sorted_one(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 200))
    thread = rng.integers(0, 3, m).astype(np.int64)
    ts = rng.integers(0, 30, m).astype(np.int64)
    dur = rng.integers(0, 12, m).astype(np.int64)  # zero lengths, equal times, overlaps that are not nested
    index = rng.permutation(m).astype(np.int64)
    for args in ((thread, ts, dur, index), (thread, ts.astype(np.float64), dur.astype(np.float64), index)):
        compiled = callstack._nest(*args)
        monkeypatch.setattr(callstack, "_sweep", None)
        sorted_ = callstack._nest(*args)
        monkeypatch.setattr(callstack, "_sweep", sweep)
        assert compiled[0].tolist() == sorted_[0].tolist() and compiled[1].tolist() == sorted_[1].tolist()


def test_bad_endpoints_raise():
    level, parent = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError):
        sweep.nest(np.array([0, 5, 0, 1]), np.array([1, 1, 0, 0], dtype=bool), level, parent)
    with pytest.raises(ValueError):
        sweep.nest(np.array([0, 0, 0, 1]), np.array([1, 1, 1, 0], dtype=bool), np.zeros(1, dtype=np.int64), parent)
    with pytest.raises(TypeError):
        sweep.nest(np.array([0, 1, 0, 1], dtype=np.int32), np.array([1, 1, 0, 0], dtype=bool), level, parent)


def test_cpu_parents_with_and_without_the_compiled_sweep(monkeypatch):
    import holotrace
    from corpus import DATA
    from holotrace.model.view import job_view

    view = job_view(holotrace.load(str(DATA / "traces" / "hta_trace_filter_2rank"), cache=False))
    compiled = {r: callstack.cpu_parents(view, r) for r in view.ranks}
    monkeypatch.setattr(callstack, "_sweep", None)
    for r in view.ranks:
        assert (compiled[r] >= 0).sum() > 1000
        assert np.array_equal(compiled[r], callstack.cpu_parents(view, r))


def test_rows_out_of_range_raise():
    node, is_open = np.array([0, 1, 1, 0]), np.array([1, 1, 0, 0], dtype=bool)
    parent = np.full(4, -1, dtype=np.int64)
    sweep.nest(node, is_open, np.zeros(0, dtype=np.int64), parent, np.array([3, 1]))
    assert parent.tolist() == [-1, 3, -1, -1]
    with pytest.raises(ValueError):
        sweep.nest(node, is_open, np.zeros(0, dtype=np.int64), parent, np.array([3, 9]))
