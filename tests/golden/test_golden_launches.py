"""Launch statistics, ATen-op delays, kernel sequences, user annotations and stragglers vs HTA 0.6.1.

For every job (bundled under tests/data and, when present, the shared corpus)
the HTA-compatible methods are run with ``hta_compat=True`` and compared with
HTA's outputs in ``golden/<job>/``; where HTA raised (``errors.json``), the
default holotrace method must give a well-formed, meaningful result instead.
Golden CSVs are sorted canonically, so rows are compared after sorting.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import holotrace
from corpus import golden_jobs
from holotrace.compat.trace_analysis import TraceAnalysis

JOBS = [j for j in golden_jobs() if (j[2] / "meta.json").exists()]

# Jobs where HTA's call-stack builder mis-nests events (its comparator is not a
# consistent order where a zero-length event sits exactly at the boundary of two
# touching events, which desynchronises its stack for the rest of the thread);
# holotrace nests them consistently, so the kernel-sequence counts differ.
SEQUENCE_KNOWN_DIFF = {"hta_negative_queue_length"}
# Jobs whose operators launch nothing on their own thread: CPU-only, and MTIA
# inference, where launches run on separate runtime threads.
NO_KERNELS_UNDER_OPS = {"hta_cpu_only_full", "hta_mtia_inference"}


def _meta(golden: Path) -> dict:
    return json.loads((golden / "meta.json").read_text())


def _csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


@pytest.fixture(scope="module", params=JOBS, ids=[j[0] for j in JOBS])
def job(request):
    name, traces, golden = request.param
    meta = _meta(golden)
    if meta.get("status", {}).get("load") != "ok":
        pytest.skip(f"HTA could not load {name}")
    ta = TraceAnalysis(job=holotrace.load(traces, cache=False))
    return name, ta, golden, meta


def _ranks(ta, meta) -> list[int]:
    return [int(r) for r in meta.get("params", {}).get("ranks", ta.job.ranks)]


def _sorted(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return df[cols].sort_values(cols, kind="stable").reset_index(drop=True)


def _assert_frames(mine: pd.DataFrame, gold: pd.DataFrame, text_cols: list[str], num_cols: list[str]) -> None:
    cols = text_cols + num_cols
    m, g = _sorted(mine, cols), _sorted(gold, cols)
    assert len(m) == len(g)
    for c in text_cols:
        assert m[c].astype(str).tolist() == g[c].astype(str).tolist(), c
    for c in num_cols:
        np.testing.assert_allclose(
            m[c].to_numpy(dtype=float), g[c].to_numpy(dtype=float), rtol=1e-9, atol=1e-9, err_msg=c
        )


# ---------------------------------------------------------------------------- launch statistics
def test_cuda_kernel_launch_stats(job):
    _name, ta, golden, meta = job
    f = golden / "cuda_kernel_launch_stats.csv"
    if not f.exists():
        pytest.skip("no reference output")
    ranks = _ranks(ta, meta)
    got = ta.get_cuda_kernel_launch_stats(ranks=ranks, hta_compat=True)
    assert list(got) == ranks
    mine = pd.concat([d.assign(rank=r) for r, d in got.items()], ignore_index=True)
    gold = _csv(f)
    if gold.empty:
        assert mine.empty
        return
    _assert_frames(mine, gold, [], ["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"])
    for d in got.values():  # compat mode: HTA's columns only
        assert list(d.columns) == ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
        assert d["launch_delay"].ge(0).all()
    for d in ta.get_cuda_kernel_launch_stats(ranks=ranks).values():  # default: the plotted sets as columns
        np.testing.assert_array_equal(d["launch_delay_outlier"], d["launch_delay"] > 100)


def test_launch_stats_default_covers_more_launch_apis(job):
    _name, ta, _golden, meta = job
    ranks = _ranks(ta, meta)
    compat = ta.get_cuda_kernel_launch_stats(ranks=ranks, hta_compat=True)
    fixed = ta.get_cuda_kernel_launch_stats(ranks=ranks)
    for r in ranks:
        # the rule table knows every launch API HTA knows, so nothing HTA pairs is lost
        assert set(compat[r]["correlation"]) <= set(fixed[r]["correlation"])


# ---------------------------------------------------------------------------- aten ops
def test_aten_op_kernels_and_delay(job):
    name, ta, golden, meta = job
    status = meta["status"].get("aten_op_kernels_and_delay")
    ranks = _ranks(ta, meta)
    if status == "ok":
        got = ta.get_aten_op_kernels_and_delay(ranks=ranks, hta_compat=True)
        mine = pd.concat([d.assign(rank=r) for r, d in got.items()], ignore_index=True)
        gold = _csv(golden / "aten_op_kernels_and_delay.csv")
        _assert_frames(
            mine,
            gold,
            ["aten_op_name", "kernel_sequence"],
            ["rank", "occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"],
        )
    elif status == "error":
        got = ta.get_aten_op_kernels_and_delay(ranks=ranks)
        for d in got.values():
            assert list(d.columns) == [
                "aten_op_name",
                "kernel_sequence",
                "occurrence_count",
                "avg_aten_op_launch_delay",
                "avg_runtime_delay",
            ]
        if name.startswith("tracelens_mi300") or name == "hta_amd_mi250":
            # HIP launches are recognised: AMD traces get real rows where HTA raised KeyError
            assert all(len(d) > 0 for d in got.values())
    else:
        pytest.skip(f"reference status {status}")


def test_aten_op_frames_do_not_carry_over_ranks(job):
    _name, ta, _golden, _meta = job
    if len(ta.job.ranks) < 2:
        pytest.skip("single-rank job")
    ranks = ta.job.ranks
    both = ta.get_aten_op_kernels_and_delay(ranks=ranks)
    alone = ta.get_aten_op_kernels_and_delay(ranks=[ranks[-1]])
    pd.testing.assert_frame_equal(both[ranks[-1]], alone[ranks[-1]])
    carried = ta.get_aten_op_kernels_and_delay(ranks=ranks, hta_compat=True)
    assert carried[ranks[-1]]["occurrence_count"].sum() > both[ranks[-1]]["occurrence_count"].sum()


# ---------------------------------------------------------------------------- kernel sequences
def test_frequent_cuda_kernel_sequences(job, tmp_path):
    name, ta, golden, meta = job
    p = meta.get("params", {}).get("frequent_cuda_kernel_sequences", {})
    status = meta["status"].get("frequent_cuda_kernel_sequences")
    if "operator_name" not in p:
        pytest.skip("no operator was tried for this job")
    args = {
        "operator_name": p["operator_name"],
        "output_dir": str(tmp_path),
        "min_pattern_len": p["min_pattern_len"],
        "rank": p["rank"],
        "top_k": p["top_k"],
    }
    if status in ("ok", "empty"):
        mine = ta.get_frequent_cuda_kernel_sequences(**args, hta_compat=True)
        gold = _csv(golden / "frequent_cuda_kernel_sequences.csv")
        if gold.empty:
            assert mine.empty
            return
        if name in SEQUENCE_KNOWN_DIFF:
            # same pattern; HTA's mis-nesting hides instances (docs/compatibility.md), holotrace counts them all
            assert mine["pattern"].tolist() == gold["pattern"].tolist()
            assert (mine["count"].to_numpy() > gold["count"].to_numpy()).all()
            return
        _assert_frames(mine, gold, ["pattern"], ["count", "GPU kernel duration (us)", "CPU op duration (us)"])
        written = list(tmp_path.iterdir())
        assert [w.name for w in written] == ["overlaid_" + Path(ta.job.rank(p["rank"]).file).name]
    else:
        # HTA raised (its call-stack builder); holotrace answers, also with a looser pattern length
        for mpl in (p["min_pattern_len"], 1):
            res = ta.get_frequent_cuda_kernel_sequences(**{**args, "min_pattern_len": mpl})
            assert list(res.columns) == ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]
            if len(res):
                assert res["count"].ge(1).all()
                assert res["pattern"].str.contains(p["operator_name"], regex=False).all()
        if name not in NO_KERNELS_UNDER_OPS:  # the tried operator launches kernels: patterns exist
            assert len(ta.get_frequent_cuda_kernel_sequences(**{**args, "min_pattern_len": 1})) > 0


# ---------------------------------------------------------------------------- user annotations
@pytest.mark.parametrize("which", ["gpu", "cpu"])
def test_gpu_user_annotation_breakdown(job, which):
    _name, ta, golden, meta = job
    status = meta["status"].get(f"gpu_user_annotation_breakdown_{which}")
    mine = ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=(which == "gpu"))
    if status == "none":
        assert mine is None
        return
    if status != "ok":
        pytest.skip(f"reference status {status}")
    gold = _csv(golden / f"gpu_user_annotation_breakdown_{which}.csv")
    assert list(mine.columns) == ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]
    _assert_frames(mine, gold, ["name"], ["rank", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)"])


def test_gpu_kernels_with_user_annotations(job):
    _name, ta, _golden, meta = job
    has = meta["status"].get("gpu_user_annotation_breakdown_gpu") == "ok"
    for r in ta.job.ranks:
        df = ta.get_gpu_kernels_with_user_annotations(r)
        if not has:
            assert df is None
            continue
        assert {"user_annotation", "s_name", "s_cat", "s_user_annotation"} <= set(df.columns)
        assert (df["end"] == df["ts"] + df["dur"]).all()
        compat = ta.get_gpu_kernels_with_user_annotations(r, hta_compat=True)
        # the fix only adds attributions of zero-duration operations
        changed = compat["user_annotation"].to_numpy() != df["user_annotation"].to_numpy()
        assert (df.loc[changed, "dur"] <= 0).all()
        assert (compat.loc[changed, "user_annotation"] == -1).all()


# ---------------------------------------------------------------------------- stragglers
def test_potential_stragglers(job):
    _name, ta, golden, meta = job
    status = meta["status"].get("potential_stragglers")
    if status == "ok":
        gold = _csv(golden / "potential_stragglers.csv")["rank"].astype(int).tolist()
        assert ta.get_potential_stragglers(hta_compat=True) == gold
        # by default ties are ordered by the later start (HTA: by rank), so compare as sets
        assert sorted(ta.get_potential_stragglers()) == sorted(gold)
    else:
        got = ta.get_potential_stragglers()  # HTA raised; holotrace answers (possibly nobody)
        assert isinstance(got, list)
        assert set(got) <= set(ta.job.ranks)
        if len(ta.job.ranks) == 1:
            assert got == []


# ---------------------------------------------------------------------------- worked examples of the spec
def _job_or_skip(name: str) -> TraceAnalysis:
    for job, traces, _ in golden_jobs():
        if job == name:
            return TraceAnalysis(job=holotrace.load(traces, cache=False))
    pytest.skip(f"{name} is neither bundled under tests/data nor in ../shared")


def test_trace_filter_worked_examples(tmp_path):
    ta = _job_or_skip("hta_trace_filter_2rank")
    st = ta.get_cuda_kernel_launch_stats(ranks=[0, 1], hta_compat=True)
    assert [len(st[0]), len(st[1])] == [602, 577]

    def sets(d):  # HTA's plotted sets: short kernels, runtime outliers (> 50 µs), launch-delay outliers (> 100 µs)
        short = (d["cpu_duration"] <= 50) & (d["gpu_duration"] < d["cpu_duration"])
        return [int(short.sum()), int((d["cpu_duration"] > 50).sum()), int((d["launch_delay"] > 100).sum())]

    assert [sets(st[0]), sets(st[1])] == [[140, 0, 469], [140, 0, 442]]
    assert len(ta.get_cuda_kernel_launch_stats(include_memory_events=False, hta_compat=True)[0]) == 577
    a0 = ta.get_aten_op_kernels_and_delay(ranks=[0], hta_compat=True)[0]
    assert (len(a0), int(a0["occurrence_count"].sum())) == (179, 487)
    a01 = ta.get_aten_op_kernels_and_delay(ranks=[0, 1], hta_compat=True)[1]
    assert (len(a01), int(a01["occurrence_count"].sum())) == (187, 968)
    assert a0["occurrence_count"].value_counts().to_dict() == {4: 68, 1: 47, 2: 36, 3: 25, 8: 2, 5: 1}
    cat = ta.get_frequent_cuda_kernel_sequences("aten::cat", str(tmp_path), min_pattern_len=1, hta_compat=True)
    assert cat[["count", "GPU kernel duration (us)", "CPU op duration (us)"]].values.tolist() == [
        [2, 393.0, 72.0],
        [1, 99.0, 36.0],
    ]
    step = ta.get_frequent_cuda_kernel_sequences("ProfilerStep", str(tmp_path), min_pattern_len=3, hta_compat=True)
    assert step[["count", "GPU kernel duration (us)", "CPU op duration (us)"]].values.tolist() == [
        [1, 302241.0, 607312.0]
    ]
    assert step["pattern"].iloc[0].startswith("ProfilerStep#551|void fbgemm_gpu::permute_2D_lengths_kernel<int>")
    assert ta.get_potential_stragglers(num_candidates=1, hta_compat=True) == [1]
    assert ta.get_potential_stragglers(num_candidates=5) == [1, 0]  # HTA: IndexError
    with pytest.raises(ValueError):
        ta.get_potential_stragglers(profiler_steps=[1, 2])
    assert ta.get_potential_stragglers(profiler_steps=[551, 999], num_candidates=0, hta_compat=True) == [1]
    assert ta.get_gpu_kernels_with_user_annotations(0) is None


def test_ns_resolution_worked_example():
    ta = _job_or_skip("hta_ns_resolution")
    c = ta.get_gpu_kernels_with_user_annotations(0, hta_compat=True)
    assert c.shape == (4876, 34)
    assert c["s_user_annotation"].value_counts().to_dict() == {
        "": 3315,
        "DistributedDataParallel.forward": 1517,
        "Optimizer.step#SGD.step": 27,
        "## backward ##": 17,
    }
    f = ta.get_gpu_kernels_with_user_annotations(0)
    # the zero-duration Memcpy DtoD (correlation 135139) is attributed, as HTA's own unit test expects
    assert f.loc[f["correlation"] == 135139, "s_user_annotation"].tolist() == ["DistributedDataParallel.forward"]
    assert (f["s_user_annotation"] == "DistributedDataParallel.forward").sum() == 1840
    cpu = ta.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, num_kernels=5, allowlist_patterns=["Optimizer"]
    )
    assert cpu["name"].tolist() == [
        "## backward ##",
        "## forward ##",
        "DistributedDataParallel.forward",
        "Optimizer.step#SGD.step",
        "Optimizer.zero_grad#SGD.zero_grad",
        "ProfilerStep#103",
        "ProfilerStep#104",
        "others",
    ]
    assert cpu.iloc[-1][["sum (us)", "max (us)", "min (us)", "mean (us)"]].tolist() == [
        111575.0,
        72076.0,
        148.0,
        22315.0,
    ]
    assert (
        len(
            ta.get_gpu_user_annotation_breakdown(
                use_gpu_annotation=False, num_kernels=5, allowlist_patterns=["Optim.*"]
            )
        )
        == 6
    )
