"""Kernel launch statistics on a hand-built trace (every value worked out by hand)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import launches
from holotrace.analysis.job_summary import summarize_job
from holotrace.model.view import job_view
from holotrace.render.summary_lines import launch_lines
from tracebuilder import TraceBuilder


def summary_lines(job):
    return launch_lines(summarize_job(job))


def _trace() -> TraceBuilder:
    """Launches (CPU [ts, end) → GPU [ts, end), µs):

    k_plain   [10, 15)  → [16, 26)    cpu 5,  gpu 10, delay 1
    k_short   [20, 30)  → [31, 33)    cpu 10, gpu 2,  delay 1   short kernel
    k_late    [40, 45)  → [300, 320)  cpu 5,  gpu 20, delay 255 launch-delay outlier
    k_slow    [50, 110) → [400, 405)  cpu 60, gpu 5,  delay 290 runtime + delay outlier
    memcpy    [120,125) → [500, 510)  cudaMemcpyAsync, delay 375
    k_driver  [130,135) → [136, 146)  cuLaunchKernel (driver API), delay 1
    """
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k_plain", 10, 5, 16, 10)
    tb.launch_kernel("k_short", 20, 10, 31, 2)
    tb.launch_kernel("k_late", 40, 5, 300, 20)
    tb.launch_kernel("k_slow", 50, 60, 400, 5)
    tb.launch_kernel(
        "Memcpy HtoD (Pageable -> Device)", 120, 5, 500, 10, cat="gpu_memcpy", launch_name="cudaMemcpyAsync"
    )
    tb.launch_kernel("k_driver", 130, 5, 136, 10, launch_name="cuLaunchKernel")
    return tb


@pytest.fixture
def loaded(tmp_path):
    job = holotrace.load(_trace().write(tmp_path / "t.json"), cache=False)
    return job, TraceAnalysis(job=job)


def test_hta_compat_pairs_htas_launch_names(loaded):
    _, ta = loaded
    df = ta.get_cuda_kernel_launch_stats(hta_compat=True)[0]
    assert list(df.columns[:4]) == ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    # cuLaunchKernel is unknown to HTA
    assert df[["cpu_duration", "gpu_duration", "launch_delay"]].values.tolist() == [
        [5, 10, 1],
        [10, 2, 1],
        [5, 20, 255],
        [60, 5, 290],
        [5, 10, 375],
    ]
    assert df["cpu_duration"].dtype == np.float64


def test_outlier_sets(loaded):
    _, ta = loaded
    df = ta.get_cuda_kernel_launch_stats()[0]
    assert len(df) == 6  # the driver-API launch is paired by default
    by = dict(zip(df["gpu_duration"], zip(df["short_kernel"], df["runtime_outlier"], df["launch_delay_outlier"])))
    assert by[2.0] == (True, False, False)  # k_short
    assert by[20.0] == (False, False, True)  # k_late
    assert by[5.0] == (False, True, True)  # k_slow: 60 us call, 290 us delay
    assert df["short_kernel"].sum() == 1 and df["runtime_outlier"].sum() == 1 and df["launch_delay_outlier"].sum() == 3
    # cutoffs are parameters
    df2 = ta.get_cuda_kernel_launch_stats(runtime_cutoff=4, launch_delay_cutoff=300)[0]
    assert df2["runtime_outlier"].sum() == 6 and df2["launch_delay_outlier"].sum() == 1
    assert df2["short_kernel"].sum() == 0  # nothing has cpu <= 4


def test_memory_events_switch(loaded):
    _, ta = loaded
    assert len(ta.get_cuda_kernel_launch_stats(include_memory_events=False, hta_compat=True)[0]) == 4
    assert len(ta.get_cuda_kernel_launch_stats(include_memory_events=False)[0]) == 5


def test_unknown_rank_raises(loaded):
    _, ta = loaded
    with pytest.raises(ValueError, match="rank 3"):
        ta.get_cuda_kernel_launch_stats(ranks=[3])


def test_native_launch_stats_and_summary(loaded):
    job, _ = loaded
    stats = launches.launch_stats(job, details=True)
    df = stats[0]
    assert df["launch"].tolist() == ["cudaLaunchKernel"] * 4 + ["cudaMemcpyAsync", "cuLaunchKernel"]
    assert df["kernel"].tolist()[:4] == ["k_plain", "k_short", "k_late", "k_slow"]
    assert df["launch_delay"].tolist() == [1.0, 1.0, 255.0, 290.0, 375.0, 1.0]
    assert df["ts"].tolist() == [0.0, 10.0, 30.0, 40.0, 110.0, 120.0]  # µs from the job's first event (10 µs)
    s = launches.launch_summary(stats).iloc[0]
    assert s["launches"] == 6 and s["launch_delay_outliers"] == 3 and s["runtime_outliers"] == 1
    assert s["short_kernels"] == 1 and s["delay_max_us"] == 375.0 and s["delay_median_us"] == pytest.approx(128.0)


def test_summary_lines_name_the_worst_delay(loaded):
    job, _ = loaded
    lines = summary_lines(job)
    # delays 1, 1, 1, 255, 290, 375 µs: the median read from the merged sketch is the value at rank 2.5 of 0..5
    # (1 µs, within 1 %), the p95 the value at rank 4.75 (290 µs, within 1 %)
    assert lines[0].startswith("launch delay: median 1.0 us, p95 ") and "3 above 100 us" in lines[0]
    p95 = float(lines[0].split("p95 ")[1].split(" us")[0])
    assert p95 == pytest.approx(290.0, rel=0.01) and "over 6 launches" in lines[0]
    assert "375.0 us after its cudaMemcpyAsync" in lines[1]
    assert "k_slow" in lines[2] and "290.0 us" in lines[2]


def test_cpu_only_trace_is_empty_not_an_error(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    job = holotrace.load(tb.write(tmp_path / "cpu.json"), cache=False)
    df = TraceAnalysis(job=job).get_cuda_kernel_launch_stats()[0]
    assert df.empty and list(df.columns[:4]) == ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
    assert summary_lines(job) == ["launch delay: no launch call paired with GPU work"]


def test_pairing_rule_comes_from_the_rule_set(tmp_path):
    # spec 23 §1.3: HTA's CPU side is every stream -1 row sharing a launch's correlation, so a cuda_sync
    # record with that correlation adds a pair; the strict pairing takes the launch call only
    from holotrace.model.classify import HTA, HTA_FIXED
    from holotrace.model.view import job_view

    tb = _trace()
    cpu, _ = tb.launch_kernel("k_sync", 600, 4, 610, 10)
    tb.raw(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Sync",
            "pid": tb.pid,
            "tid": 1,
            "ts": 620,
            "dur": 3,
            "args": {"correlation": cpu["args"]["correlation"], "stream": -1},
        }
    )
    job = holotrace.load(tb.write(tmp_path / "t.json"), cache=False)
    view = job_view(job, HTA)
    hta = launches.launch_stats(view, rules=HTA)[0]
    fixed = launches.launch_stats(view, rules=HTA_FIXED)[0]
    k = cpu["args"]["correlation"]
    assert hta.loc[hta["correlation"] == k, ["cpu_duration", "gpu_duration", "launch_delay"]].values.tolist() == [
        [4, 10, 6],
        [3, 10, 0],
    ]
    assert fixed.loc[fixed["correlation"] == k, ["cpu_duration", "gpu_duration", "launch_delay"]].values.tolist() == [
        [4, 10, 6]
    ]


def test_worst_launches_and_delay_overview_by_hand():
    from holotrace.analysis.launches import all_launches, delay_overview, worst_launches

    def frame(delays, ts):
        d = np.asarray(delays, dtype=float)
        return pd.DataFrame(
            {
                "correlation": np.arange(len(d)),
                "cpu_duration": np.ones(len(d)),
                "gpu_duration": np.ones(len(d)),
                "launch_delay": d,
                "short_kernel": False,
                "runtime_outlier": False,
                "launch_delay_outlier": d > 100,
                "ts": np.asarray(ts, dtype=np.int64),
            }
        )

    both = all_launches({1: frame([50, 300], [10, 20]), 0: frame([300, 120, 10], [30, 5, 1])})
    assert both.columns[0] == "rank" and len(both) == 5
    worst = worst_launches(both, "launch_delay", "launch_delay_outlier", 2)
    # two launches of 300 us: rank 0 before rank 1; the 120 us one is cut by top=2
    assert worst[["rank", "launch_delay"]].values.tolist() == [[0, 300.0], [1, 300.0]]
    o = delay_overview(both)
    assert o == {
        "launches": 5,
        "median_us": 120.0,
        "p95_us": float(np.percentile([10, 50, 120, 300, 300], 95)),
        "outliers": 3,
    }
    assert delay_overview(all_launches({}))["launches"] == 0


@pytest.mark.parametrize("top,cutoff", [(2, 100.0), (10, 100.0), (0, 100.0), (3, 1e9)])
def test_rank_launches_is_launch_stats_and_worst_launches(loaded, top, cutoff):
    """The summary's path (names decoded for the worst launches only) gives the frame of launch_stats without the
    detail columns and exactly the rows worst_launches picks from the detailed frame, with its column types; the
    cutoff of 1e9 flags nothing (an empty pick)."""
    job, _ = loaded
    view = job_view(job)
    rows, worst = launches.rank_launches(view, 0, top=top, launch_delay_cutoff=cutoff)
    plain = launches.launch_stats(view, launch_delay_cutoff=cutoff)[0]
    detailed = launches.launch_stats(view, launch_delay_cutoff=cutoff, details=True)[0]
    pd.testing.assert_frame_equal(rows, plain, check_exact=True)
    expect = launches.worst_launches(detailed, "launch_delay", "launch_delay_outlier", top)
    pd.testing.assert_frame_equal(worst, expect, check_exact=True)
    if top and cutoff == 100.0:  # k_late (255), k_slow (290), memcpy (375): the largest delays first
        assert worst["kernel"].tolist()[:2] == ["Memcpy HtoD (Pageable -> Device)", "k_slow"]


def test_rank_launches_of_a_rank_without_launches(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    job = holotrace.load(tb.write(tmp_path / "t.json"), cache=False)
    rows, worst = launches.rank_launches(job_view(job), 0, top=3)
    assert worst is None and rows.empty
    assert list(rows.columns) == list(launches.launch_stats(job, details=True)[0].columns)


def test_worst_launches_are_the_first_of_the_full_sort():
    """Sorting the candidates only (values at least the k-th largest, ties included) picks the same rows, in the
    same order, as sorting every outlier by value descending (NaN last), then time."""
    from holotrace.analysis.launches import _worst

    rng = np.random.default_rng(7)
    for _ in range(2000):
        n, k = int(rng.integers(0, 40)), int(rng.integers(0, 10))
        value = rng.integers(0, 5, n).astype(float)  # few distinct values: many ties
        value[rng.random(n) < 0.2] = np.nan
        ts = rng.integers(0, 4, n).astype(float)
        pos = np.sort(rng.choice(500, n, replace=False))
        full = pos[np.lexsort((ts, -np.nan_to_num(value), np.isnan(value)))[:k]]
        assert np.array_equal(_worst(pos, value, ts, k), full)


def test_unique_lookup_of_sparse_keys_is_pandas_get_indexer():
    """The sorted lookup of sparse correlation keys gives what a hash index gives, and None for a repeated key."""
    import pandas as pd

    from holotrace.analysis.launches import _unique_lookup

    rng = np.random.default_rng(3)
    keys = rng.choice(10**12, 500, replace=False).astype(np.int64)
    queries = np.r_[keys[::3], rng.integers(0, 10**12, 200), keys[:5]].astype(np.int64)
    got = _unique_lookup(keys, queries)
    assert got.tolist() == pd.Index(keys).get_indexer(queries).tolist()
    assert (got[: len(keys[::3])] >= 0).all()
    assert _unique_lookup(np.r_[keys, keys[7]], queries) is None


def test_worst_of_many_launches_are_the_first_of_the_full_sort():
    """Many outliers (the k-th largest found among the values at least the k-th largest block maximum): the same
    rows as the full sort, ties and NaN included."""
    from holotrace.analysis.launches import _worst

    rng = np.random.default_rng(11)
    for _ in range(60):
        n, k = int(rng.integers(4000, 20000)), int(rng.integers(0, 70))
        spread = int(rng.choice([3, 50, 10**6]))
        value = rng.integers(0, spread, n).astype(float)
        value[rng.random(n) < float(rng.choice([0.0, 0.3]))] = np.nan
        ts = rng.integers(0, 4, n).astype(float)
        pos = np.arange(n) * 2
        full = pos[np.lexsort((ts, -np.nan_to_num(value), np.isnan(value)))[:k]]
        assert np.array_equal(_worst(pos, value, ts, k), full)
