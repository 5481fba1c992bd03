"""A rank's event checks (model.validate.rank_checks) are made once, where its columns are derived, and kept in
its cache entry: a cached load gives the findings a check of the loaded columns gives, without reading them."""

from __future__ import annotations

import holotrace
from holotrace.findings import FindingCode
from holotrace.ingest import cache
from holotrace.model import validate
from holotrace.model.validate import check_rank
from tracebuilder import TraceBuilder

CHECKED = {
    FindingCode.UNKNOWN_CATEGORY,
    FindingCode.NO_CATEGORY,
    FindingCode.OVERLAPPING_KERNELS,
    FindingCode.GPU_WITHOUT_LAUNCH,
    FindingCode.LAUNCH_WITHOUT_GPU,
}


def _job(tmp_path):
    """Two ranks; rank 1 has one of each problem the event checks find (rank 0 none of them)."""
    folder = tmp_path / "job"
    for r in range(2):
        tb = TraceBuilder(rank=r, world_size=2)
        tb.annotation("ProfilerStep#1", 0, 300)
        tb.launch_kernel("gemm", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=30)
        if r == 1:
            tb.launch_kernel("late", cpu_ts_us=30, cpu_dur_us=5, gpu_ts_us=40, gpu_dur_us=30)  # overlaps gemm
            tb.gpu("orphan", 100, 10, correlation=999)  # no launch
            tb.runtime("cudaLaunchKernel", 120, 5, correlation=998)  # no GPU activity
            tb.cpu_op("odd", 130, 5, cat="my_own_category")
            tb.raw({"ph": "X", "name": "nocat", "pid": 100, "tid": 1, "ts": 140, "dur": 5})
        tb.write(folder, name=f"rank-{r}.json")
    return folder


def _checks(job) -> list:
    return [f for f in job.findings if f.code in CHECKED]


def test_kept_checks_are_the_checks_of_the_loaded_columns(tmp_path, monkeypatch):
    folder = _job(tmp_path)
    fresh = holotrace.load(folder, cache=False)
    want = [f for r in fresh.ranks for f in check_rank(fresh, fresh.rank(r))]
    assert {f.code for f in want} == CHECKED and {f.rank for f in want} == {1}
    assert _checks(fresh) == want
    cdir = tmp_path / "cache"
    cold = holotrace.load(folder, cache_dir=cdir)
    cache.flush()
    assert _checks(cold) == want

    def no_reading(*a, **k):
        raise AssertionError("a cached load checked the columns again")

    monkeypatch.setattr(validate, "check_rank", no_reading)
    assert _checks(holotrace.load(folder, cache_dir=cdir)) == want
