"""The call-stack sweep's integer keys give what the general keys give: the endpoint order of positive-length
integer events (one packed sort key) equals the order the lexsort gives the same events as floats, and thread codes
number (pid, tid) pairs in order of first appearance whether the pair packs in one integer or not."""

import numpy as np
import pytest

from holotrace.analysis.callstack import _thread_codes
from holotrace.analysis.endpoint_order import endpoint_order


@pytest.mark.parametrize("seed", range(20))
def test_positive_integer_events_sort_as_the_general_path(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 60))
    thread = rng.integers(0, 3, m).astype(np.int64)
    ts = rng.integers(0, 12, m).astype(np.int64)  # small range: many equal times and equal durations
    dur = rng.integers(1, 5, m).astype(np.int64)
    index = rng.permutation(m).astype(np.int64)
    node, is_open = endpoint_order(thread, ts, dur, index)
    ref_node, ref_open = endpoint_order(thread, ts.astype(np.float64), dur.astype(np.float64), index)
    assert np.array_equal(node, ref_node)
    assert np.array_equal(is_open, ref_open)


def test_thread_codes_first_appearance():
    pid = np.array([7, 7, 3, 7, 3, 9], dtype=np.int64)
    tid = np.array([1, 2, 1, 1, 1, 2], dtype=np.int64)
    expected = [0, 1, 2, 0, 2, 3]  # (7,1) (7,2) (3,1) (7,1) (3,1) (9,2)
    assert _thread_codes(pid, tid).tolist() == expected
    # the same pairs with values too far apart to pack in one integer
    assert _thread_codes(pid * 2**40, tid * 2**40).tolist() == expected


def test_pairs_in_is_pandas_multiindex_isin():
    """The membership of (thread, time) pairs of the general path: what a pandas MultiIndex.isin answers."""
    import pandas as pd

    from holotrace.analysis.endpoint_order import _pairs_in

    rng = np.random.default_rng(5)
    a1, a2 = rng.integers(0, 4, 300), rng.integers(0, 30, 300).astype(np.float64) / 2
    b1, b2 = rng.integers(0, 4, 200), rng.integers(0, 30, 200).astype(np.float64) / 2
    want = pd.MultiIndex.from_arrays([a1, a2]).isin(pd.MultiIndex.from_arrays([b1, b2]))
    got = _pairs_in(a1, a2, b1, b2)
    assert got.tolist() == want.tolist() and 0 < got.sum() < len(got)
    assert _pairs_in(a1[:0], a2[:0], b1, b2).shape == (0,)
    assert not _pairs_in(a1, a2, b1[:0], b2[:0]).any()
