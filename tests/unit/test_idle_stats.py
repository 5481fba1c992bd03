"""The idle gaps' percentiles: numpy's linear interpolation, bit for bit, without calling numpy's function."""

from __future__ import annotations

import numpy as np
import pytest

from holotrace.analysis import idle


def test_percentiles_are_numpys_bits():
    rng = np.random.default_rng(5)
    for i in range(2000):
        n = int(rng.integers(1, 60))
        x = (
            rng.random(n) * 1000,
            rng.integers(0, 5, n).astype(float),  # ties
            np.round(rng.exponential(50, n), 3),
            rng.integers(0, 10**9, n) / 1000.0,
        )[i % 4]
        assert idle._percentiles(x).tobytes() == np.percentile(x, idle._QUANTILES).tobytes(), x


@pytest.mark.parametrize("x", [np.array([1.0, np.nan, 3.0]), np.array([4, 1, 3], dtype=np.int64)])
def test_other_values_go_to_numpy(x):
    assert np.array_equal(idle._percentiles(x), np.percentile(x, idle._QUANTILES), equal_nan=True)
