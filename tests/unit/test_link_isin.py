"""``isin_ids`` agrees with ``np.isin`` on dense, clustered and scattered integer ids."""

import numpy as np
import pytest

from holotrace.model.link import isin_ids

_RNG = np.random.default_rng(7)
_BASE = np.arange(5000, dtype=np.int64)


@pytest.mark.parametrize(
    "values",
    [
        _BASE,  # dense: one flag array
        np.concatenate([_BASE, _BASE + (1 << 36), _BASE - (1 << 40)]),  # far-apart clusters, negatives too
        _RNG.integers(-(2**50), 2**50, 20000),  # scattered over a wide range
        _BASE * 1000,  # a stride wider than the blocks
    ],
)
def test_isin_ids_matches_np_isin(values):
    members = np.concatenate([values[::3], _RNG.integers(-(2**45), 2**45, 50)])
    got = isin_ids(values, members)
    assert got.dtype == bool
    np.testing.assert_array_equal(got, np.isin(values, members))
    assert got.sum() >= len(values[::3]) - 1  # the members taken from the values are found


def test_isin_ids_empty():
    assert not isin_ids(np.arange(3), np.empty(0, dtype=np.int64)).any()
    assert len(isin_ids(np.empty(0, dtype=np.int64), np.arange(3))) == 0
