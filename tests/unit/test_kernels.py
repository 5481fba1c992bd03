"""Kernel breakdown and the shared top-k aggregation (values worked out by hand)."""

from __future__ import annotations

import numpy as np
import pytest
from _core_traces import GEMM, MEMCPY, NCCL, OTHER, RELU, load, mixed_trace

from holotrace.analysis import kernels
from holotrace.analysis.topk import OTHERS, top_k
from holotrace.model.classify import HTA, HTA_FIXED
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

KERNEL_COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "kernel_type", "rank"]
HTA_STATS = ["name", "sum", "max", "min", "mean", "std"]


def top_k_hta(*args, **kw):
    """HTA's cut: the one top-k under HTA's rules, HTA's columns."""
    return top_k(*args, rules=HTA, **kw)[HTA_STATS]


# mixed_trace segments: [100,120) COMP 20 · [120,150) COMP+COMM 30 · [150,200) COMM 50 · [250,260) MEM 10 · [300,320) COMP 20


def test_type_breakdown_by_hand(tmp_path):
    job, ta = load(mixed_trace(), tmp_path)
    t = kernels.type_breakdown(job)
    assert t["kernel_type"].tolist() == [
        "COMMUNICATION",
        "COMPUTATION",
        "COMPUTATION overlapping COMMUNICATION",
        "MEMORY",
    ]
    assert t["time_us"].tolist() == [50.0, 40.0, 30.0, 10.0]
    assert t["pctg"].to_numpy() == pytest.approx([100 * 50 / 130, 100 * 40 / 130, 100 * 30 / 130, 100 * 10 / 130])

    types, _ = ta.get_gpu_kernel_breakdown()
    assert list(types.columns) == ["kernel_type", "sum", "percentage"]
    assert types.values.tolist() == [
        ["COMMUNICATION", 50, 38.5],
        ["COMPUTATION", 40, 30.8],
        ["COMPUTATION overlapping COMMUNICATION", 30, 23.1],
        ["MEMORY", 10, 7.7],
    ]
    assert types["sum"].dtype == np.int64


def test_memory_excluded_folds_into_other_labels(tmp_path):
    _, ta = load(mixed_trace(), tmp_path)
    types, kdf = ta.get_gpu_kernel_breakdown(include_memory_kernels=False)
    assert types["kernel_type"].tolist() == ["COMMUNICATION", "COMPUTATION", "COMPUTATION overlapping COMMUNICATION"]
    assert "MEMORY" not in set(kdf["kernel_type"])


def test_kernel_df_each_type_and_row_order(tmp_path):
    tb = mixed_trace()
    tb.launch_kernel(GEMM, 50, 5, 400, 30)  # gemm twice: 50 and 30
    tb.launch_kernel(OTHER, 55, 5, 500, 10)  # OTHER: in no kernel row
    job, ta = load(tb, tmp_path)
    _, kdf = ta.get_gpu_kernel_breakdown()
    assert list(kdf.columns) == KERNEL_COLUMNS
    assert kdf[["kernel_type", "name"]].values.tolist() == [
        ["COMMUNICATION", NCCL],
        ["COMPUTATION", RELU],
        ["COMPUTATION", GEMM],
        ["MEMORY", MEMCPY],
    ]  # (kernel_type, name, rank) in code-point order: "relu…" < "void …"
    gemm = kdf.iloc[2]
    assert gemm[["sum (us)", "max (us)", "min (us)", "mean (us)"]].tolist() == [80.0, 50.0, 30.0, 40.0]
    assert gemm["stddev"] == pytest.approx(np.std([50, 30], ddof=1))
    assert kdf.loc[1, "stddev"] == 0.0  # one instance

    stats = kernels.kernel_stats(job, duration_ratio=1.0)
    assert stats[["kernel_type", "name", "count"]].values.tolist() == [
        ["COMPUTATION", GEMM, 2],
        ["COMPUTATION", RELU, 1],
        ["COMMUNICATION", NCCL, 1],
        ["MEMORY", MEMCPY, 1],
    ]
    assert OTHER not in set(stats["name"])
    # the facade is the same analysis under HTA's rules (µs, HTA's rows), only shaped and sorted
    hta = kernels.kernel_stats(job_view(job, HTA), duration_ratio=1.0)
    assert hta[["name", "sum_us", "count"]].values.tolist() == [
        [GEMM, 80.0, 2],
        [RELU, 20.0, 1],
        [NCCL, 80.0, 1],
        [MEMCPY, 10.0, 1],
    ]
    # COMPUTATION alone 20 + 20 + 30 (the second gemm [400,430)), COMMUNICATION 50, both 30, MEMORY 10
    t = kernels.type_breakdown(job_view(job, HTA_FIXED))
    assert t[["kernel_type", "time_us"]].values.tolist() == [
        ["COMPUTATION", 70.0],
        ["COMMUNICATION", 50.0],
        ["COMPUTATION overlapping COMMUNICATION", 30.0],
        ["MEMORY", 10.0],
    ]


def test_rank_distribution_exposes_the_slow_rank(tmp_path):
    d = tmp_path / "job"
    for rank, dur in ((0, 10), (1, 10), (2, 40)):
        tb = TraceBuilder(rank=rank, world_size=3)
        tb.launch_kernel(GEMM, 0, 5, 10, dur)
        tb.launch_kernel(GEMM, 6, 5, 100, dur)
        tb.write(d)
    import holotrace

    job = holotrace.load(d, cache=False)
    dist = kernels.rank_distribution(job, top=1)
    assert dist["rank"].tolist() == [0, 1, 2]
    assert dist["sum_us"].tolist() == [20.0, 20.0, 80.0]
    assert dist["count"].tolist() == [2, 2, 2]
    assert dist["sum_vs_median"].tolist() == [1.0, 1.0, 4.0]
    _, kdf = __import__("holotrace").TraceAnalysis(job=job).get_gpu_kernel_breakdown()
    assert kdf["rank"].tolist() == [0, 1, 2] and kdf["mean (us)"].tolist() == [10.0, 10.0, 40.0]


def test_no_kernels_gives_empty_frames_with_columns(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("aten::add", 0, 10)
    job, ta = load(tb, tmp_path)
    types, kdf = ta.get_gpu_kernel_breakdown()
    assert types.empty and list(types.columns) == ["kernel_type", "sum", "percentage"]
    assert kdf.empty and list(kdf.columns) == KERNEL_COLUMNS
    assert kernels.kernel_stats(job).empty and kernels.type_breakdown(job).empty
    assert kernels.rank_distribution(job).empty


# ---------------------------------------------------------------- top-k

NAMES = [f"k{i:02d}" for i in range(12)]
SUMS = list(range(12, 0, -1))  # k00 has 12, k11 has 1; total 78


@pytest.mark.parametrize(
    "num_kernels,ratio,kept", [(11, 0.8, 9), (5, 0.8, 5), (11, 0.5, 6), (11, 1.0, 11), (11, 0.0, 1)]
)
def test_hta_topk_cuts_by_count(num_kernels, ratio, kept):
    """Quirk Q1: HTA keeps min(num_kernels, floor(ratio·(n−1)) + 1) names (spec 20 §3)."""
    out = top_k_hta(NAMES, SUMS, num_kernels=num_kernels, duration_ratio=ratio)
    assert sorted(out["name"]) == sorted(NAMES[:kept] + [OTHERS])
    kept_rows = out[out["name"] != OTHERS]
    # Q2: kept rows are per-name totals: max = min = mean = sum, std 0
    assert (kept_rows["max"] == kept_rows["sum"]).all() and (kept_rows["std"] == 0).all()
    # Q3: others is described by per-name totals
    folded = SUMS[kept:]
    o = out[out["name"] == OTHERS].iloc[0]
    assert (o["sum"], o["max"], o["min"], o["mean"]) == (sum(folded), max(folded), min(folded), np.mean(folded))
    assert o["std"] == pytest.approx(np.std(folded, ddof=1) if len(folded) > 1 else 0.0)


def test_native_topk_counts_instances_and_names_under_both_rules():
    out = top_k(NAMES, SUMS, num_kernels=5, duration_ratio=0.8, rules=HTA)
    o = out[out["name"] == OTHERS].iloc[0]
    assert (o["count"], o["num_names"]) == (7, 7)  # k05..k11 folded, one instance each
    assert (out.loc[out["name"] != OTHERS, "num_names"] == 1).all()


def test_hta_topk_without_folding_keeps_instance_stats():
    out = top_k_hta(["a", "a", "b"], [1.0, 3.0, 5.0], num_kernels=10)
    assert out.values.tolist() == [["b", 5.0, 5.0, 5.0, 5.0, 0.0], ["a", 4.0, 3.0, 1.0, 2.0, pytest.approx(np.sqrt(2))]]


def test_native_topk_is_time_based_with_instance_stats():
    # cumulative 12, 23, 33, 42, 50, 57, 63 ≥ 0.8·78 = 62.4 → 7 names kept
    names = sum(([n, n] for n in NAMES), [])
    durs = sum(([s / 2, s / 2] for s in SUMS), [])
    out = top_k(names, durs, num_kernels=10, duration_ratio=0.8)
    assert out["name"].tolist() == NAMES[:7] + [OTHERS]
    first = out.iloc[0]
    assert (first["count"], first["sum"], first["max"], first["mean"]) == (2, 12.0, 6.0, 6.0)
    o = out.iloc[-1]
    folded = sum(([s / 2, s / 2] for s in SUMS[7:]), [])
    assert (o["count"], o["num_names"], o["sum"], o["max"], o["min"]) == (10, 5, 15.0, 2.5, 0.5)
    assert o["std"] == pytest.approx(np.std(folded, ddof=1))
    # the cap applies too
    assert top_k(names, durs, num_kernels=3, duration_ratio=0.8)["name"].tolist() == NAMES[:3] + [OTHERS]


def test_topk_allowlist_and_ties():
    out = top_k(["b", "a", "c", "z"], [5.0, 5.0, 1.0, 0.5], num_kernels=1, duration_ratio=1.0, allowlist=["z"])
    assert out["name"].tolist() == ["a", "z", OTHERS]  # tie on 5.0 broken by name
    hta = top_k_hta(["b", "a", "c", "z"], [5.0, 5.0, 1.0, 0.5], num_kernels=1, duration_ratio=1.0, allowlist=["z"])
    assert hta["name"].tolist() == ["a", OTHERS, "z"]  # HTA regroups by name
