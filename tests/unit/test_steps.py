"""Profiler steps: the list (HTA drops the last step by default) and per-step times."""

from __future__ import annotations

from _core_traces import GEMM, load

from holotrace import TraceAnalysis
from holotrace.analysis import steps, temporal
from holotrace.model.classify import HTA
from holotrace.model.view import job_view
from tracebuilder import TraceBuilder


def step_trace() -> TraceBuilder:
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#3", 0, 100)
    tb.annotation("ProfilerStep#4", 100, 120)
    tb.launch_kernel(GEMM, 10, 5, 20, 30)  # step 3
    tb.launch_kernel(GEMM, 20, 5, 60, 10)  # step 3: union [20,50)+[60,70) = 40, span 50
    tb.launch_kernel(GEMM, 110, 5, 150, 25)  # step 4
    return tb


def test_profiler_steps(tmp_path):
    job, ta = load(step_trace(), tmp_path)
    assert ta.get_profiler_steps() == [3]  # the last step is dropped, as HTA does
    assert TraceAnalysis(job=job, include_last_profiler_step=True).get_profiler_steps() == [3, 4]
    assert steps.profiler_steps(job) == [3, 4]


def test_step_times(tmp_path):
    job, _ = load(step_trace(), tmp_path)
    df = steps.step_times(job)
    assert df.values.tolist() == [
        [0, 3, 0.0, 100.0, 2, 40.0, 50.0],
        [0, 4, 100.0, 120.0, 1, 25.0, 25.0],
    ]
    # the facade's temporal breakdown sees step 3 only
    _, ta = load(step_trace(), tmp_path, name="again")
    assert ta.get_temporal_breakdown()["kernel_time(us)"].tolist() == [50.0]


def test_trace_without_profiler_steps(tmp_path):
    tb = TraceBuilder(rank=0)
    tb.launch_kernel(GEMM, 0, 5, 10, 10)
    job, ta = load(tb, tmp_path)
    assert ta.get_profiler_steps() == [] and steps.profiler_steps(job) == []
    assert steps.step_times(job).empty and list(steps.step_times(job).columns)[:2] == ["rank", "step"]
    assert temporal.breakdown(job, per_step=True).empty
    # the whole trace is analysed as one span
    assert ta.get_temporal_breakdown()["kernel_time(us)"].tolist() == [10.0]


def test_hta_step_numbers_allow_spaces(tmp_path):
    tb = TraceBuilder(rank=0)
    for i, name in enumerate(["ProfilerStep # 12", "ProfilerStep#7", "ProfilerStep#x", "aten::mm"]):
        tb.annotation(name, 100 * i, 50)
    job, ta = load(tb, tmp_path)
    # one name matches HTA's last-step rule (^ProfilerStep#N): nothing is dropped
    assert ta.get_profiler_steps() == [7, 12]
    assert steps.profiler_steps(job_view(job, HTA)) == [7, 12] == steps.profiler_steps(job)
