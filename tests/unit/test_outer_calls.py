"""The order the job graph reads a rank's runtime calls in: one packed sort must give numpy's three-key order."""

import numpy as np
import pytest

from holotrace.analysis.critical_path.calls import _by_thread_time


@pytest.mark.parametrize("seed", range(5))
def test_packed_order_is_the_three_key_order(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 80))
        # few values: many ties of (thread, start) and of durations; threads not in ascending code order
        thread = rng.integers(0, 4, n) * 1_000_003 + rng.integers(0, 3, n)
        ts = rng.integers(-5, 9, n)
        dur = rng.integers(0, 4, n)
        assert np.array_equal(_by_thread_time(thread, ts, dur), np.lexsort((-dur, ts, thread)))


def test_float_and_wide_times_take_the_three_key_sort():
    thread = np.array([7, 3, 7, 3])
    ts = np.array([2.5, 1.0, 2.5, 0.5])
    dur = np.array([1.0, 2.0, 3.0, 0.0])
    assert _by_thread_time(thread, ts, dur).tolist() == [3, 1, 2, 0]
    wide = np.array([0, 2**62, 5, 2**62], dtype=np.int64)
    dur = np.array([1, 1, 2, 3], dtype=np.int64)
    assert _by_thread_time(np.array([1, 1, 2, 1]), wide, dur).tolist() == [0, 3, 1, 2]
