"""The report's tables without pandas give what the pandas frames gave: the counters' and the timeline's tables
are their frames' columns, the critical path's bound table is its breakdown's, and the report's sums, medians and
orders over tables are pandas' (``pivot_table``, ``groupby``, ``value_counts``) on random data with ties."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import holotrace
from holotrace.analysis import counters
from holotrace.analysis import critical_path as cpm
from holotrace.analysis.critical_path.path import bound_table
from holotrace.analysis.timeline import gpu_timeline, gpu_timeline_table
from holotrace.commands.report import _devices
from holotrace.model.classify import HTA, NATIVE
from holotrace.model.view import job_view
from holotrace.render import plots
from holotrace.render.groups import pivot_sum, rows_by
from holotrace.table import Table

JOB = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta_trace_filter_2rank"


@pytest.fixture(scope="module")
def job():
    return holotrace.load(str(JOB), cache=False)


def _same(table: Table, frame: pd.DataFrame, skip=("index",)):
    assert [c for c in table.columns if c not in skip] == list(frame.columns)
    for c in frame.columns:
        np.testing.assert_array_equal(table[c], frame[c].to_numpy(), err_msg=c)


@pytest.mark.parametrize("rules", [NATIVE, HTA], ids=["native", "hta"])
def test_counter_tables_are_the_frames(job, rules):
    view = job_view(job, rules)
    for tables, frames, index in (
        (counters.queue_length_tables(view), counters.queue_length(view), "index"),
        (counters.memory_bandwidth_tables(view), counters.memory_bandwidth(view), None),
    ):
        assert tables.keys() == frames.keys() and frames
        for r, f in frames.items():
            _same(tables[r], f)
            np.testing.assert_array_equal(tables[r]["index"], f.index.to_numpy())
            assert f.index.name == index


@pytest.mark.parametrize("rules", [NATIVE, HTA], ids=["native", "hta"])
def test_queue_length_tables_with_some_columns(job, rules):
    view = job_view(job, rules)
    full = counters.queue_length_tables(view)
    some = counters.queue_length_tables(job_view(job, rules), columns=("queue_length", "ts"))
    assert some.keys() == full.keys() and full
    for r, t in some.items():
        assert list(t.columns) == ["queue_length", "ts"]
        for c in t.columns:
            np.testing.assert_array_equal(t[c], full[r][c])


@pytest.mark.parametrize("rules", [NATIVE, HTA], ids=["native", "hta"])
def test_timeline_table_is_the_frame(job, rules):
    view = job_view(job, rules)
    steps = sorted({int(s) for s in view[view.ranks[0]]["iteration"].tolist()} - {-1})
    for kw in ({}, {"iterations": steps[:1]}, {"window": (0, 2_000)}, {"iterations": [10**6]}):
        t, f = gpu_timeline_table(view, **kw), gpu_timeline(view, **kw)
        _same(t, f, skip=())
        assert len(t) == len(f)


def test_bound_table_is_the_breakdown(job):
    view = job_view(job, NATIVE)
    for _, cp in cpm.step_paths(view, rank=view.ranks[0], rules=NATIVE):
        b, t = cpm.breakdown(cp), bound_table(cp)
        assert t.columns == ["bound_by", "duration"]
        assert t["bound_by"].tolist() == b["bound_by"].tolist()
        np.testing.assert_array_equal(t["duration"], b["duration"].to_numpy())


def _ties(rng, n):
    return np.round(rng.exponential(5.0, n), 1) * rng.choice([1.0, 1.0, 1e-9, 1e9], n)


@pytest.mark.parametrize("seed", range(6))
def test_pivot_sums_are_pandas(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    rank = rng.integers(0, 4, n)
    cat = rng.choice(np.array(["other", "host_wait", "kernel_wait"], dtype=object), n)
    if seed % 2:  # grouped in runs: pandas' other summation path
        o = np.lexsort((cat, rank))
        rank, cat = rank[o], cat[o]
    v = _ties(rng, n)
    want = pd.DataFrame({"r": rank, "c": cat, "v": v}).pivot_table(
        index="r", columns="c", values="v", aggfunc="sum", fill_value=0.0
    )
    rows, cols, sums = pivot_sum(rank, cat, v)
    assert rows.tolist() == want.index.tolist() and cols.tolist() == want.columns.tolist()
    np.testing.assert_array_equal(sums, want.to_numpy())


@pytest.mark.parametrize("seed", range(6))
def test_critical_path_classes_are_pandas(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    bound = rng.choice(np.array(["", "cpu_bound", "gpu_compute_bound", "data_loading"], dtype=object), n)
    dur = rng.choice([1.0, 2.0, 3.0], n) * (1e6 if seed % 2 else 1.0) + (0 if seed < 3 else _ties(rng, n))
    cp = pd.DataFrame({"bound_by": bound, "duration": dur})
    agg = cp.groupby("bound_by", sort=False)["duration"].sum()
    agg = agg[agg.index.astype(str) != ""].sort_values(ascending=False)
    _, frame = plots.critical_path(Table.of(cp))
    assert frame["bound_by"].tolist() == agg.index.tolist()
    np.testing.assert_array_equal(frame["ms"], agg.to_numpy() / 1e6)
    np.testing.assert_array_equal(frame["pct"], 100 * agg.to_numpy() / agg.sum() if agg.sum() else 0.0)


@pytest.mark.parametrize("seed", range(4))
def test_groups_are_pandas_groupby(seed):
    rng = np.random.default_rng(seed)
    keys = rng.choice(np.array(["b", "a", "c"], dtype=object), 30)
    for sort in (True, False):
        want = [(k, g.index.to_numpy()) for k, g in pd.Series(keys).groupby(keys, sort=sort)]
        got = rows_by(keys, sort=sort)
        assert [k for k, _ in got] == [k for k, _ in want]
        for (_, a), (_, b) in zip(got, want):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "devices", [["b", "a", "a", "b", "c"], ["x", "y"], ["y", "x", "x", "y", "y", "x"], list("cbacbaddd")]
)
def test_devices_in_value_counts_order(devices):
    job = SimpleNamespace(ranks=list(range(len(devices))), rank=lambda r: SimpleNamespace(device_type=devices[r]))
    want = ", ".join(f"{n} x {d}" for d, n in pd.Series(devices).value_counts().items())
    assert _devices(job) == want


@pytest.mark.parametrize("seed", range(30))
def test_histogram_bin_counts_are_numpys(seed):
    from holotrace.render.report_svg import bin_counts

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 20, int(rng.integers(1, 300))).astype(np.float64) * rng.choice([1.0, 0.5, 0.1])
    lo, hi = float(x.min()) - rng.choice([0.0, 1.0]), float(x.max()) + rng.choice([0.0, 1.0])
    ties = np.sort(rng.choice(x, 6))  # (equal edges: empty bins)
    for edges in (np.linspace(lo, hi if hi > lo else lo + 1, int(rng.integers(2, 45))), np.unique(x), ties):
        if len(edges) < 2:
            continue
        assert bin_counts(x, edges).tolist() == np.histogram(x, edges)[0].tolist()
    edges = np.geomspace(max(lo, 0.05), max(hi, 1.0), 41)
    assert bin_counts(x, edges).tolist() == np.histogram(x, edges)[0].tolist()
