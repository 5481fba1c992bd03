"""The trace model on hand-built traces: times, links, iterations, call stacks, findings."""

from __future__ import annotations

import numpy as np

import holotrace
from holotrace.model.classify import KernelType, Kind, kernel_type_of_name
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder


def _job(tb, tmp_path, **kw):
    return holotrace.load(tb.write(tmp_path / "t.json", **kw), cache=False)


def test_fractional_microseconds_are_exact_nanoseconds(tmp_path):
    # epoch µs with ns digits: a double cannot hold the first one, so the text is written by hand
    f = tmp_path / "t.json"
    f.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
        '"ts": 1712195495519689.047, "dur": 63.813}, {"ph": "X", "cat": "cpu_op", "name": "b", '
        '"pid": 1, "tid": 1, "ts": 2413669096091.5, "dur": 0.001}]}'
    )
    t = holotrace.load(f, cache=False).rank(0)
    assert t.columns["ts_ns"].tolist() == [1712195495519689047, 2413669096091500]
    assert t.columns["dur_ns"].tolist() == [63813, 1]
    assert t.ts_is_float


def test_links_iterations_and_stacks(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#7", 0, 100)
    tb.annotation("ProfilerStep#8", 100, 100)
    tb.cpu_op("aten::linear", 10, 50)
    tb.cpu_op("aten::addmm", 12, 40)
    tb.launch_kernel("gemm", 15, 5, 120, 30)  # launched in step 7, runs during step 8
    tb.launch_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 110, 5, 160, 20, stream=20)
    tb.gpu("Memcpy DtoH (Device -> Pinned)", 190, 2, cat="gpu_memcpy", correlation=999)  # no launch in the trace
    job = _job(tb, tmp_path)
    ev = job.rank(0).events
    names = job.strings.decode(ev["name"].to_numpy())
    row = {n: i for i, n in enumerate(names)}
    gemm, lk = row["gemm"], np.flatnonzero(names == "cudaLaunchKernel")
    assert ev["partner"][gemm] == lk[0] and ev["partner"][lk[0]] == gemm
    assert ev["iteration"][gemm] == 7  # by its launch, not by when it ran
    assert ev["iteration"][row["ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"]] == 8
    ktype = job_view(job)[0]["kernel_type"]  # kernel types are the view's (under a rule table); rows in file order
    assert ktype[row["ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"]] == KernelType.COMMUNICATION
    assert ktype[gemm] == KernelType.COMPUTATION
    assert ev["kind"][row["Memcpy DtoH (Device -> Pinned)"]] == Kind.MEMCPY
    codes = {f.code: f for f in job.findings}
    assert codes["gpu_without_launch"].count == 1
    assert job.rank(0).step_table["step"].tolist() == [7, 8]


def test_no_profiler_step_is_one_finding(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("gemm", 15, 5, 20, 30)
    job = _job(tb, tmp_path)
    f = [x for x in job.findings if x.code == "no_profiler_steps"]
    assert len(f) == 1
    assert (job.rank(0).events["iteration"] == -1).all()


def test_overlapping_kernels_on_one_stream(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel("k1", 1, 1, 10, 20)
    tb.launch_kernel("k2", 2, 1, 25, 10)  # starts before k1 ends, same stream
    tb.launch_kernel("k3", 3, 1, 12, 5, stream=8)  # another stream: fine
    job = _job(tb, tmp_path)
    f = [x for x in job.findings if x.code == "overlapping_kernels"]
    assert f and f[0].count == 1 and "'k2'" in f[0].example


def test_unknown_category_counted_not_dropped(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.cpu_op("x", 1, 2, cat="my_new_cat")
    tb.cpu_op("y", 3, 2)
    job = _job(tb, tmp_path)
    assert job.rank(0).n_events == 2
    f = [x for x in job.findings if x.code == "unknown_category"]
    assert f and f[0].count == 1 and "my_new_cat (1)" in f[0].message


def test_clock_skew_between_ranks(tmp_path):
    for r, offset in ((0, 0), (1, 5_000_000)):  # rank 1 starts 5 s later
        tb = TraceBuilder(rank=r, world_size=2)
        tb.launch_kernel("k", 1 + offset, 1, 10 + offset, 20)
        tb.write(tmp_path)
    job = holotrace.load(tmp_path, cache=False)
    f = [x for x in job.findings if x.code == "clock_skew"]
    assert f and "5.000 s" in f[0].message and "rank 1 latest" in f[0].message


def test_kernel_type_rules_match_hta_examples():
    cases = {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(...)": "COMMUNICATION",
        "ncclDevKernel_AllGather_RING_LL(...)": "COMMUNICATION",
        "void foo<ncclKernel>": "COMMUNICATION",
        "hccl_x": "COMMUNICATION",
        "hipMemcpyAsync": "COMMUNICATION",
        "Memcpy DtoD (Device -> Device)": "MEMORY",
        "Memset (Device)": "MEMORY",
        "dma_request": "MEMORY",
        "Stream Sync": "OTHER",
        "Context Sync": "OTHER",
        "Event Sync": "OTHER",
        "Stream Wait Event": "OTHER",
        "cudaLaunchKernel": "OTHER",
        "void my_Memcpy_kernel": "OTHER",
        "void softmax_dmax": "OTHER",
        "triton_poi_fused_add_cos_sin_0": "COMPUTATION",
        "Cijk_Ailk_Bljk": "COMPUTATION",
        "add-dtype_Float": "COMPUTATION",
        "rcclKernel": "COMPUTATION",
    }
    for name, expected in cases.items():
        assert kernel_type_of_name(name, hta_compat=True).name == expected, name
    assert kernel_type_of_name("rcclKernel").name == "COMMUNICATION"  # holotrace's own rule


def test_cache_reload_is_identical(tmp_path, monkeypatch):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 100)
    tb.launch_kernel("gemm", 10, 5, 20, 30.5)
    f = tb.write(tmp_path / "t.json.gz")
    cdir = tmp_path / "cache"
    from holotrace.ingest import cache

    a = holotrace.load(f, cache_dir=cdir)
    cache.flush()  # the entry is written on a background thread
    assert len(list(cdir.iterdir())) == 1
    b = holotrace.load(f, cache_dir=cdir)
    for col in ("ts_ns", "dur_ns", "name", "kind", "partner", "iteration"):
        assert a.rank(0).columns[col].tolist() == b.rank(0).columns[col].tolist()
    assert a.strings.decode(a.rank(0).columns["name"]).tolist() == b.strings.decode(b.rank(0).columns["name"]).tolist()
    n, _ = cache.clear(cdir)
    assert n == 1 and not list(cdir.iterdir())
