"""The job replay on every corpus job: it reproduces the measured job steps (2 % on multi-rank jobs, 5 % on one
rank), fixes that leave GPU work alone never save more than the GPU's idle time, and a GPU-bound job (GPU idle
under 5 % of every step) gets a kernel fix first."""

from __future__ import annotations

import pytest

import holotrace
from corpus import shared_or_skip
from holotrace.analysis.critical_path.advice import job_advice
from holotrace.analysis.critical_path.replay import gpu_idle
from holotrace.errors import TraceNotFoundError
from plantedjob import check_host_fixes_within_gpu_idle


def _jobs():
    root = shared_or_skip() / "traces"
    return sorted(p for p in root.iterdir() if p.is_dir())


def test_every_corpus_job():
    checked = 0
    for path in _jobs():
        try:
            job = holotrace.load(str(path))
        except TraceNotFoundError:
            continue  # a folder that holds no profiler trace (the memory-snapshot job)
        a = job_advice(job)
        if a.replay.empty:
            continue
        limit = 2.0 if len(job.ranks) > 1 else 5.0
        assert (a.replay["error_pct"].abs() <= limit).all(), path.name
        check_host_fixes_within_gpu_idle(a)
        idle = gpu_idle(a.graph).groupby("step")["idle_ms"].max()
        frac = (idle / a.replay.set_index("step")["measured_ms"]).max()
        if len(job.ranks) == 1 and frac < 0.05:
            assert a.fixes["fix"].iloc[0] == "kernel", path.name
        checked += 1
    if not checked:
        pytest.skip("no corpus job with steps")
    assert checked >= 30
