"""The analyses' view: per-string rules cached only when they can be found again."""

from __future__ import annotations

import numpy as np

import holotrace
from holotrace.model import classify
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder


def _view(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#4", 0, 100)
    tb.launch_kernel("ncclDevKernel_AllReduce", 10, 5, 20, 30)
    return job_view(holotrace.load(tb.write(tmp_path / "t.json"), cache=False))


def test_named_rules_are_kept_and_lambdas_are_not(tmp_path):
    v = _view(tmp_path)
    named = v.per_string(classify.is_communication_kernel, missing=False, dtype=bool)
    assert v.per_string(classify.is_communication_kernel, missing=False, dtype=bool) is named
    comm = [v.strings[i] for i in np.flatnonzero(named[:-1])]
    assert comm == ["ncclDevKernel_AllReduce"] and not named[-1]
    for _ in range(3):
        v.per_string(lambda s: s.startswith("Profiler"), missing=False, dtype=bool)
    assert len(v._per_string) == 1  # the lambdas' arrays were not kept
    steps = v.lookup(v[0]["name"], v.per_string(classify.profiler_step_number, prefix="ProfilerStep"))
    assert sorted(set(steps.tolist()) - {-1}) == [4]
