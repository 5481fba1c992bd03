"""The group reductions of holotrace.analysis.grouped against pandas' groupby, bit for bit, compiled and numpy."""

import numpy as np
import pandas as pd
import pytest

from holotrace.analysis import grouped


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


def _same(a, b) -> bool:
    """The same float64 bits (every NaN counted equal: pandas and numpy may differ in a NaN's payload only)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (
        a.shape == b.shape
        and np.array_equal(np.isnan(a), np.isnan(b))
        and np.array_equal(_bits(np.where(np.isnan(a), 0.0, a)), _bits(np.where(np.isnan(b), 0.0, b)))
    )


def _data(seed: int, rows: int, groups: int, *, specials: bool):
    """Codes with a few empty groups and some rows in no group (-1); values of mixed magnitude (sums that
    compensation changes), with NaN and infinities when ``specials``."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, groups, rows)
    codes[codes == groups // 2] = -1  # an empty group in the middle
    values = rng.standard_normal(rows) * 10.0 ** rng.integers(-8, 9, rows)
    if specials:
        pick = rng.random(rows)
        values[pick < 0.05] = np.nan
        values[(pick >= 0.05) & (pick < 0.055)] = np.inf
        values[(pick >= 0.055) & (pick < 0.06)] = -np.inf
        values[codes == 1] = np.nan  # a group of NaN only
    return codes, values


def _pandas(codes, values, groups, how, **kw):
    """pandas' result per group 0..groups-1 (reindexed: pandas leaves out a group without a row)."""
    s = pd.Series(values).groupby(pd.Categorical.from_codes(codes, categories=range(groups)), observed=False)
    return getattr(s, how)(**kw).to_numpy(dtype=np.float64)


CASES = [(0, 5000, 7, False), (1, 5000, 7, True), (2, 20000, 3000, True), (3, 20000, 3000, False), (4, 300, 1, True)]


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    if request.param == "compiled":
        if grouped.core is None:
            pytest.skip("the compiled core is not built (setup.py build_ext)")
    else:
        monkeypatch.setattr(grouped, "core", None)
    return request.param


@pytest.mark.parametrize("seed,rows,groups,specials", CASES)
def test_sums_means_and_variances_are_pandas_bits(path, seed, rows, groups, specials):
    codes, values = _data(seed, rows, groups, specials=specials)
    assert _same(grouped.group_sum(codes, values, groups), _pandas(codes, values, groups, "sum"))
    assert _same(grouped.group_mean(codes, values, groups), _pandas(codes, values, groups, "mean"))
    assert _same(grouped.group_var(codes, values, groups), _pandas(codes, values, groups, "var"))
    assert _same(grouped.group_std(codes, values, groups), _pandas(codes, values, groups, "std"))
    assert _same(grouped.group_std(codes, values, groups, ddof=0), _pandas(codes, values, groups, "std", ddof=0))


@pytest.mark.parametrize("seed,rows,groups,specials", CASES)
def test_order_free_reductions_are_pandas_values(path, seed, rows, groups, specials):
    codes, values = _data(seed, rows, groups, specials=specials)
    for how in ("min", "max", "median"):
        assert _same(getattr(grouped, f"group_{how}")(codes, values, groups), _pandas(codes, values, groups, how))
    assert np.array_equal(grouped.group_count(codes, groups, values), _pandas(codes, values, groups, "count"))
    assert np.array_equal(grouped.group_count(codes, groups), _pandas(codes, values, groups, "size"))


def test_the_sum_is_compensated_not_pairwise(path):
    """1 + 1e-16 ten thousand times: a plain running sum stays 1.0, the compensated one reaches 1 + 1e-12."""
    values = np.r_[1.0, np.full(10_000, 1e-16)]
    codes = np.zeros(len(values), dtype=np.int64)
    got = grouped.group_sum(codes, values, 1)[0]
    assert got == pd.Series(values).groupby(codes).sum().iloc[0]
    assert abs(got - (1.0 + 1e-12)) < 1e-15 and sum(values.tolist()) == 1.0


def test_compiled_and_numpy_agree_on_one_huge_group_and_many_small(monkeypatch):
    """The numpy path's two regimes (vectorised steps, then a Python loop) give the compiled core's bits."""
    if grouped.core is None:
        pytest.skip("the compiled core is not built (setup.py build_ext)")
    rng = np.random.default_rng(9)
    codes = np.where(rng.random(50_000) < 0.5, 0, rng.integers(1, 5000, 50_000))
    values = rng.exponential(1e3, 50_000) * 10.0 ** rng.integers(-6, 7, 50_000)
    fs = (grouped.group_sum, grouped.group_mean, grouped.group_var, grouped.group_min, grouped.group_max)
    want = [f(codes, values, 5000) for f in fs]
    monkeypatch.setattr(grouped, "core", None)
    got = [f(codes, values, 5000) for f in fs]
    assert all(_same(a, b) for a, b in zip(want, got))


def test_empty_input_and_groups_without_rows(path):
    empty = np.empty(0)
    assert _same(grouped.group_sum(empty.astype(np.int64), empty, 3), [0.0, 0.0, 0.0])
    assert np.isnan(grouped.group_mean(empty.astype(np.int64), empty, 2)).all()
    assert np.isnan(grouped.group_median([], [], 2)).all() and np.isnan(grouped.group_min([], [], 2)).all()
    assert grouped.group_sum([], [], 0).shape == (0,)


def test_bad_codes_are_refused(path):
    with pytest.raises(ValueError, match="not below the number of groups"):
        grouped.group_sum([0, 3], [1.0, 2.0], 3)
    with pytest.raises(ValueError, match="one length"):
        grouped.group_sum([0, 1], [1.0], 3)


def test_first_row_and_factorize_as_pandas():
    codes = np.array([2, -1, 0, 2, 0, 4])
    assert grouped.group_first_row(codes, 5).tolist() == [2, -1, 0, -1, 5]
    for values in (
        np.array(["b", "a", "b", "c", "a"], dtype=object),
        np.array([30, 10, 30, 20, 10, 5]),
        np.array([2.5, np.nan, 1.0, 2.5, np.nan, -0.5]),
    ):
        want_codes, want_uniques = pd.factorize(values)
        got_codes, got_uniques = grouped.factorize(values)
        assert got_codes.tolist() == want_codes.tolist()
        assert list(got_uniques) == list(want_uniques)


#: pandas 3 sums rows already in group order with ``np.add.reduceat``; pandas 2 compensates them as any other rows
PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_codes_in_runs_are_summed_by_run(seed):
    """Rows in ascending runs without NaN: each run summed by ``np.add.reduceat`` (whatever pandas is installed)."""
    rng = np.random.default_rng(seed)
    codes = np.sort(rng.integers(0, 5, 400))
    values = np.round(rng.uniform(300, 400, len(codes)), 6)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    want = np.zeros(6)
    want[codes[starts]] = np.add.reduceat(values, starts)
    assert _same(grouped.group_sum(codes, values, 6), want)


@pytest.mark.skipif(not PANDAS_3, reason="pandas 2 compensates rows in group order too; holotrace follows pandas 3")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_codes_in_runs_take_pandas_reduceat_path(seed):
    """Rows grouped in ascending runs without NaN: pandas sums each run with ``np.add.reduceat`` (not compensated);
    the same bits here. Values whose compensated and running sums differ (341.07648850000004 against ...4885)."""
    rng = np.random.default_rng(seed)
    codes = np.sort(rng.integers(0, 5, 400))
    values = np.round(rng.uniform(300, 400, len(codes)), 6)
    assert _same(grouped.group_sum(codes, values, 6), _pandas(codes, values, 6, "sum"))
    assert _same(grouped.group_mean(codes, values, 6), _pandas(codes, values, 6, "mean"))
    m = np.array([340.314711, 341.100176, 339.197615, 341.482187, 342.345287, 341.720326, 340.562205, 341.889401])
    zero = np.zeros(len(m), dtype=np.int64)
    assert grouped.group_mean(zero, m, 1)[0] == pd.Series(m).groupby(zero).mean().iloc[0] == 341.07648850000004


def _in_order_cases(rng):
    """Rows in group order, the same rows out of order (the compensated sum) and in order with a NaN (compensated,
    NaN skipped); durations in ns steps: sums that round."""
    for n_rows, n_groups in ((200, 3), (2000, 40), (50, 50)):
        values = np.round(rng.uniform(0, 1200, n_rows), 3)
        sorted_codes = np.sort(rng.integers(0, n_groups, n_rows))
        yield sorted_codes, values, n_groups
        yield rng.permutation(sorted_codes), values, n_groups
        with_nan = values.copy()
        with_nan[::7] = np.nan
        yield sorted_codes, with_nan, n_groups


@pytest.mark.skipif(not PANDAS_3, reason="pandas 2 compensates rows in group order too; holotrace follows pandas 3")
@pytest.mark.parametrize("how", ["sum", "mean"])
def test_sums_as_pandas_in_and_out_of_order(path, how):
    for codes, values, n in _in_order_cases(np.random.default_rng(11)):
        got = getattr(grouped, f"group_{how}")(codes, values, n)
        want = _pandas(codes, values, n, how)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)) or np.array_equal(got, want, equal_nan=True)


@pytest.mark.skipif(not PANDAS_3, reason="pandas 2 compensates rows in group order too; holotrace follows pandas 3")
def test_in_order_sums_with_rows_without_group_first():
    rng = np.random.default_rng(11)
    codes = np.r_[-1, -1, np.sort(rng.integers(0, 5, 100))]
    values = np.round(rng.uniform(0, 1200, len(codes)), 3)
    keep = codes >= 0
    want = pd.Series(values[keep]).groupby(codes[keep]).sum().reindex(range(5), fill_value=0.0).to_numpy()
    assert np.array_equal(grouped.group_sum(codes, values, 5), want)


def test_extremes_keep_the_first_of_equal_values(path):
    """0.0 and -0.0 are equal: the group's first one is its min and max, as pandas' strict comparisons."""
    codes = np.array([0, 0, 1, 1, 2])
    values = np.array([-0.0, 0.0, 0.0, -0.0, np.nan])
    low, high = grouped.group_extremes(codes, values, 4)
    for got, how in ((low, "min"), (high, "max")):
        assert _same(got, _pandas(codes, values, 4, how))
        assert np.signbit(got[:2]).tolist() == [True, False]


def test_unique_ids_is_numpy_unique():
    rng = np.random.default_rng(4)
    for ids in (rng.integers(-1, 50, 1000), rng.integers(0, 10**15, 100), np.array([7, 7, 3], dtype=np.int32)):
        uniq, inv = grouped.unique_ids(ids)
        want_u, want_inv = np.unique(ids, return_inverse=True)
        assert uniq.tolist() == want_u.tolist() and inv.tolist() == want_inv.tolist() and uniq.dtype == ids.dtype
    assert grouped.unique_ids(np.empty(0, dtype=np.int64))[0].shape == (0,)


def test_wide_ids_in_runs_as_numpy_and_pandas():
    """Ids of a wide range in runs of equal values (a rank's threads and streams): the unique values, inverse and
    first-appearance codes of the runs' shortcut are numpy's and pandas' (long runs, short runs, one run)."""
    rng = np.random.default_rng(11)
    threads = rng.integers(0, 2**40, 6) * 1_000_003
    for lengths in (rng.integers(1, 400, 300), rng.integers(1, 3, 3000), np.array([50])):
        ids = np.repeat(threads[rng.integers(0, len(threads), len(lengths))], lengths)
        uniq, inv = grouped.unique_ids(ids)
        want_u, want_inv = np.unique(ids, return_inverse=True)
        assert uniq.tolist() == want_u.tolist() and inv.tolist() == want_inv.tolist()
        codes, uniques = grouped.factorize(ids)
        want_codes, want_uniques = pd.factorize(ids)
        assert codes.tolist() == want_codes.tolist() and uniques.tolist() == want_uniques.tolist()


def test_the_straggler_fix_median_is_numpys_nanmedian():
    """The median rank's per-step sums (rows of a keys x ranks grid, NaN where a rank has no entry) are numpy's
    ``nanmedian``, bit for bit: odd and even counts, rows without a value, scales far apart."""
    import warnings

    from holotrace.analysis.critical_path.straggler_fix import _nanmedian

    rng = np.random.default_rng(7)
    for _ in range(300):
        r, c = (int(k) for k in rng.integers(1, 10, size=2))
        x = rng.normal(size=(r, c)) * rng.choice([1.0, 1e6, 1e12])
        x[rng.random((r, c)) < rng.random()] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rows, whole = np.nanmedian(x, axis=1), np.nanmedian(x)
        assert np.array_equal(_nanmedian(x, axis=1), rows, equal_nan=True)
        got = _nanmedian(x)
        assert got == whole or (np.isnan(got) and np.isnan(whole))
    assert np.isnan(_nanmedian(np.full((3, 0), 1.0), axis=1)).all() and np.isnan(_nanmedian(np.zeros(0)))
