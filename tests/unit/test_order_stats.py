"""order_stats gives numpy's values (the same bits) without importing numpy.ma."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from holotrace.order_stats import distinct, median, percentile

RNG = np.random.default_rng(7)
FLOATS = [
    np.array([5.0]),
    np.array([2.0, 1.0]),
    np.array([3.0, 1.0, 2.0]),
    RNG.normal(size=1000),
    RNG.exponential(size=1001) * 1e6,
    np.repeat(RNG.normal(size=7), 5),
    np.array([0.1, 0.2, 0.3, 0.7, 1e-300, 1e300]),
]


@pytest.mark.parametrize("x", FLOATS + [np.arange(11), RNG.integers(-50, 50, size=400)])
def test_median_is_numpys(x):
    assert np.array_equal(np.float64(median(x)), np.median(x))


def test_median_of_nan_or_nothing_is_nan():
    assert np.isnan(median(np.array([1.0, np.nan, 2.0])))
    assert np.isnan(median(np.array([], dtype=np.float64)))


@pytest.mark.parametrize("x", FLOATS)
@pytest.mark.parametrize("q", [0, 5, 25, 50, 75, 90, 95, 99.9, 100, [25.0, 50.0, 75.0, 90.0]])
def test_percentile_is_numpys(x, q):
    got, want = percentile(x, q), np.percentile(x, q)
    assert np.array_equal(np.asarray(got), want)  # the same bits
    assert isinstance(got, float) == (np.ndim(q) == 0)


def test_percentile_leaves_other_inputs_to_numpy():
    x = np.array([1.0, np.nan, 3.0])
    assert np.isnan(percentile(x, 50))
    with pytest.raises(ValueError):
        percentile(np.arange(4.0), 120)


@pytest.mark.parametrize(
    "x",
    [
        np.array([], dtype=np.int64),
        np.array([3], dtype=np.int32),
        RNG.integers(-5, 5, size=300),
        RNG.integers(0, 2**40, size=300),
        np.array([True, False, True]),
        np.array([2, 1, 2, 1], dtype=np.int8),
        np.array([-100, 100, 5, -100], dtype=np.int8),  # (a range wider than the dtype)
        np.array([2**63 + 5, 3, 2**63 + 5], dtype=np.uint64),
        np.array([-(2**62), 7, 2**62, 7]),  # (a range too wide to count)
        RNG.integers(0, 2**16, size=100).astype(np.uint16),
    ],
)
def test_distinct_is_numpys(x):
    got, want = distinct(x), np.unique(x)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_distinct_of_floats_is_numpys():
    x = np.array([2.0, np.nan, 1.0, np.nan, 2.0])
    assert np.array_equal(distinct(x), np.unique(x), equal_nan=True)


def test_numpy_ma_is_not_imported():
    code = (
        "import sys, numpy as np\n"
        "from holotrace.order_stats import distinct, median, percentile\n"
        "x = np.arange(10.0)\n"
        "distinct(np.arange(5)); median(x); percentile(x, 50); percentile(x, [25.0, 75.0])\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_percentiles_are_numpys_bits_on_many_samples():
    rng = np.random.default_rng(5)
    qs = [25.0, 50.0, 75.0, 90.0]  # (the idle gaps' quantiles)
    for i in range(2000):
        n = int(rng.integers(1, 60))
        x = (
            rng.random(n) * 1000,
            rng.integers(0, 5, n).astype(float),  # ties
            np.round(rng.exponential(50, n), 3),
            rng.integers(0, 10**9, n) / 1000.0,
        )[i % 4]
        assert percentile(x, qs).tobytes() == np.percentile(x, qs).tobytes(), x
        assert np.float64(median(x)).tobytes() == np.median(x).tobytes(), x


@pytest.mark.parametrize("x", [np.array([1.0, np.nan, 3.0]), np.array([4, 1, 3], dtype=np.int64)])
def test_other_values_go_to_numpy(x):
    assert np.array_equal(percentile(x, [25.0, 50.0]), np.percentile(x, [25.0, 50.0]), equal_nan=True)
