"""Group sums and means of rows already in group order: bit for bit as pandas computes them (it sums each run of
rows with ``np.add.reduceat`` then, and compensates only otherwise)."""

import numpy as np
import pandas as pd
import pytest

from holotrace.analysis import grouped

_RNG = np.random.default_rng(11)
pytestmark = pytest.mark.skipif(
    int(pd.__version__.split(".")[0]) < 3,
    reason="pandas 2 compensates rows in group order too; holotrace follows pandas 3",
)


def _pandas(codes, values, n, how):
    s = pd.Series(values).groupby(pd.Categorical.from_codes(codes, categories=range(n)), observed=False)
    return getattr(s, how)().to_numpy(np.float64)


def _cases():
    for n_rows, n_groups in ((200, 3), (2000, 40), (50, 50)):
        values = np.round(_RNG.uniform(0, 1200, n_rows), 3)  # microsecond durations in ns steps: sums that round
        sorted_codes = np.sort(_RNG.integers(0, n_groups, n_rows))
        yield sorted_codes, values, n_groups
        yield _RNG.permutation(sorted_codes), values, n_groups  # out of order: the compensated sum
        with_nan = values.copy()
        with_nan[::7] = np.nan
        yield sorted_codes, with_nan, n_groups  # a NaN: the compensated sum, NaN skipped


@pytest.mark.parametrize("how", ["sum", "mean"])
@pytest.mark.parametrize("use_core", [True, False])
def test_sums_as_pandas_in_and_out_of_order(how, use_core, monkeypatch):
    if not use_core:
        monkeypatch.setattr(grouped, "core", None)
    for codes, values, n in _cases():
        got = getattr(grouped, f"group_{how}")(codes, values, n)
        want = _pandas(codes, values, n, how)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)) or np.array_equal(got, want, equal_nan=True)


def test_in_order_sums_with_rows_without_group_first():
    codes = np.r_[-1, -1, np.sort(_RNG.integers(0, 5, 100))]
    values = np.round(_RNG.uniform(0, 1200, len(codes)), 3)
    keep = codes >= 0
    want = pd.Series(values[keep]).groupby(codes[keep]).sum().reindex(range(5), fill_value=0.0).to_numpy()
    assert np.array_equal(grouped.group_sum(codes, values, 5), want)
