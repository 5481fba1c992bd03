"""User annotations: kernels attributed to the innermost annotation, and time per annotation."""

from __future__ import annotations

import numpy as np
import pytest

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import annotations as anno
from holotrace.model.classify import HTA, NATIVE
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder

BREAKDOWN = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]


def _trace() -> TraceBuilder:
    """GPU-timeline annotations on stream 7: fwd [100,500) ⊃ layer1 [150,250), layer2 [300,400).

    GPU work: k1 [160,200) s7 → layer1 · k2 [260,280) s7 → fwd · k3 [390,420) s7 → layer2 (straddles its end;
    the shortest overlapping annotation wins) · k4 [600,610) s7 → none · zero-length memcpy at 310 s7 →
    layer2 (HTA under pandas 3: none) · k5 [160,170) on stream 8 → none (annotations are per stream).
    CPU side: user annotations fwd [0,90) ⊃ layer1 [5,30), layer2 [40,70) hold the launches.
    """
    tb = TraceBuilder(rank=0)
    tb.annotation("fwd", 0, 90)
    tb.annotation("layer1", 5, 25)
    tb.annotation("layer2", 40, 30)
    tb.annotation("fwd", 100, 400, tid=7, cat="gpu_user_annotation")
    tb.annotation("layer1", 150, 100, tid=7, cat="gpu_user_annotation")
    tb.annotation("layer2", 300, 100, tid=7, cat="gpu_user_annotation")
    tb.launch_kernel("k1", 10, 2, 160, 40)
    tb.launch_kernel("k5", 12, 2, 160, 10, stream=8)
    tb.launch_kernel("k2", 35, 2, 260, 20)
    tb.launch_kernel("k3", 45, 2, 390, 30)
    tb.launch_kernel("Memcpy DtoD (Device -> Device)", 50, 2, 310, 0, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    tb.launch_kernel("k4", 95, 2, 600, 10)
    return tb


@pytest.fixture
def loaded(tmp_path):
    job = holotrace.load(_trace().write(tmp_path / "t.json"), cache=False)
    return job, TraceAnalysis(job=job)


def _by_name(df):
    return dict(zip(df["s_name"], df["s_user_annotation"]))


def test_innermost_annotation_per_kernel(loaded):
    _, ta = loaded
    df = ta.get_gpu_kernels_with_user_annotations(0)
    assert _by_name(df) == {
        "k1": "layer1",
        "k5": "",
        "k2": "fwd",
        "k3": "layer2",
        "Memcpy DtoD (Device -> Device)": "layer2",
        "k4": "",
    }
    assert list(df.columns[-4:]) == ["user_annotation", "s_name", "s_cat", "s_user_annotation"]
    assert (df["end"] == df["ts"] + df["dur"]).all()
    assert df["user_annotation"].dtype == np.int64
    ids = dict(zip(df["s_name"], df["user_annotation"]))
    assert ids["k4"] == -1 and ta.job.strings[int(ids["k1"])] == "layer1"


def test_zero_duration_compat(loaded):
    _, ta = loaded
    df = ta.get_gpu_kernels_with_user_annotations(0, hta_compat=True)
    assert _by_name(df)["Memcpy DtoD (Device -> Device)"] == ""
    assert _by_name(df)["k1"] == "layer1"


def test_expand_and_shorten_flags(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("outer", 0, 100, tid=7, cat="gpu_user_annotation")
    tb.launch_kernel("void foo<int>(int*)", 1, 2, 10, 5)
    ta = TraceAnalysis(job=holotrace.load(tb.write(tmp_path / "t.json"), cache=False))
    assert ta.get_gpu_kernels_with_user_annotations(0)["s_name"].tolist() == ["foo"]
    assert ta.get_gpu_kernels_with_user_annotations(0, shorten_names=False)["s_name"].tolist() == [
        "void foo<int>(int*)"
    ]
    plain = ta.get_gpu_kernels_with_user_annotations(0, expand_names=False)
    assert "s_name" not in plain.columns and plain.columns[-1] == "user_annotation"


def test_no_gpu_annotations_gives_none(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k", 1, 2, 10, 5)
    ta = TraceAnalysis(job=holotrace.load(tb.write(tmp_path / "t.json"), cache=False))
    assert ta.get_gpu_kernels_with_user_annotations(0) is None
    assert ta.get_gpu_user_annotation_breakdown() is None
    assert ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False) is None


def test_breakdown_gpu_and_cpu(loaded):
    _, ta = loaded
    g = ta.get_gpu_user_annotation_breakdown()
    assert list(g.columns) == BREAKDOWN
    assert g[["name", "sum (us)", "rank"]].values.tolist() == [
        ["fwd", 400.0, 0],
        ["layer1", 100.0, 0],
        ["layer2", 100.0, 0],
    ]
    c = ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False)
    assert c[["name", "sum (us)"]].values.tolist() == [["fwd", 90.0], ["layer1", 25.0], ["layer2", 30.0]]


def test_breakdown_topk_and_allowlist(tmp_path):
    tb = TraceBuilder(rank=0)
    for i, d in enumerate([50, 40, 30, 20, 10]):
        tb.annotation(f"a{i}", 100 * i, d)
    ta = TraceAnalysis(job=holotrace.load(tb.write(tmp_path / "t.json"), cache=False))
    df = ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, num_kernels=2, duration_ratio=1.0)
    assert df["name"].tolist() == ["a0", "a1", "others"]
    others = df.iloc[2]
    assert others[["sum (us)", "max (us)", "min (us)", "mean (us)"]].tolist() == [60.0, 30.0, 10.0, 20.0]
    allow = ta.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, num_kernels=2, duration_ratio=1.0, allowlist_patterns=["a4"]
    )
    assert allow["name"].tolist() == ["a0", "a1", "a4", "others"]
    # literal substrings, as HTA; regex only on request
    assert (
        "a3"
        not in ta.get_gpu_user_annotation_breakdown(
            use_gpu_annotation=False, num_kernels=2, duration_ratio=1.0, allowlist_patterns=["a[34]"]
        )["name"].tolist()
    )
    assert ta.get_gpu_user_annotation_breakdown(
        use_gpu_annotation=False, num_kernels=2, duration_ratio=1.0, allowlist_patterns=["a[34]"], regex=True
    )["name"].tolist() == ["a0", "a1", "a3", "a4", "others"]


def test_native_views(loaded):
    job, _ = loaded
    t = anno.annotation_time(job, gpu=True)
    assert t[["name", "count", "sum_us"]].values.tolist() == [
        ["fwd", 1, 400.0],
        ["layer1", 1, 100.0],
        ["layer2", 1, 100.0],
    ]
    k = anno.kernel_time_by_annotation(job, gpu=True)
    assert k[["annotation", "kernels", "kernel_time_us"]].values.tolist() == [
        ["layer1", 1, 40.0],
        ["layer2", 2, 30.0],
        ["", 2, 20.0],
        ["fwd", 1, 20.0],
    ]
    # CPU ranges: through the launch calls (k1, k5 in layer1; k2 in fwd; k3, memcpy in layer2; k4 nowhere)
    kc = anno.kernel_time_by_annotation(job, gpu=False)
    assert kc[["annotation", "kernels", "kernel_time_us"]].values.tolist() == [
        ["layer1", 2, 50.0],
        ["layer2", 2, 30.0],
        ["fwd", 1, 20.0],
        ["", 1, 10.0],
    ]


def test_assign_annotations_equal_lengths_later_wins():
    pos = anno.assign_annotations(
        np.zeros(1, dtype=np.int64),
        np.array([5.0]),
        np.array([1.0]),
        np.zeros(2, dtype=np.int64),
        np.array([0.0, 0.0]),
        np.array([10.0, 10.0]),
    )
    assert pos.tolist() == [1]


def test_one_path_under_each_rule_set(loaded):
    job, ta = loaded
    native = job_view(job, NATIVE)
    ops, ann = anno.annotate_gpu_ops(native, 0)
    names = dict(
        zip(native.names(native[0]["name"][ops]), native.names(np.where(ann >= 0, native[0]["name"][ann], -1)))
    )
    assert names["Memcpy DtoD (Device -> Device)"] == "layer2" and names["k5"] == "" and names["k3"] == "layer2"
    # HTA's rules with its bugs: the zero-length copy is never attributed; the view's rows are HTA's
    ops, ann = anno.annotate_gpu_ops(ta.view, 0, rules=HTA)
    got = dict(zip(ta.view.names(ta.view[0]["name"][ops]), ann >= 0))
    assert got["Memcpy DtoD (Device -> Device)"] is np.False_ and got["k1"] is np.True_
    assert anno.annotation_time(ta.view, rules=HTA, sort="name")["name"].tolist() == ["fwd", "layer1", "layer2"]
    with pytest.raises(ValueError, match="unknown sort"):
        anno.annotation_time(native, sort="size")


def test_native_fold_keeps_instance_statistics(tmp_path):
    tb = TraceBuilder(rank=0)
    for i, d in enumerate([50, 40, 30, 20, 10]):
        tb.annotation(f"a{i}", 100 * i, d)
    job = holotrace.load(tb.write(tmp_path / "t.json"), cache=False)
    t = anno.annotation_time(job, gpu=False, num_kernels=2, duration_ratio=1.0)
    # holotrace's cut: a0, a1 kept; others = the 3 folded instances (30, 20, 10)
    assert t[["name", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us"]].values.tolist() == [
        ["others", 3, 60.0, 30.0, 10.0, 20.0, 10.0],
        ["a0", 1, 50.0, 50.0, 50.0, 50.0, 0.0],
        ["a1", 1, 40.0, 40.0, 40.0, 40.0, 0.0],
    ]
