"""Straggler detection on a hand-built 4-rank job where rank 2 is slow."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import holotrace
from holotrace import TraceAnalysis
from holotrace.analysis import stragglers
from holotrace.analysis.job_summary import summarize_job
from holotrace.model.classify import HTA, NATIVE
from holotrace.model.view import job_view
from holotrace.render.summary_lines import straggler_lines
from tracebuilder import TraceBuilder


def summary_lines(job):
    return straggler_lines(summarize_job(job))


DEV = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
OLD = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"


def _job(tmp_path, name=DEV, slow=2, ranks=4, steps=(1, 2, 3), stream=20, late=400, skew=None):
    """Each step is 1000 µs. Every rank computes, then enters an all-reduce that ends at step start + 1000.

    The slow rank computes ``late`` µs longer, so it enters the collective ``late`` µs after the others:
    the others spend ``late`` µs more in it (700 vs 300 µs). ``skew`` shifts a rank's whole clock.
    """
    folder = tmp_path / "job"
    for r in range(ranks):
        tb = TraceBuilder(rank=r, world_size=ranks, pid=100 + r, device=r)
        off = (skew or {}).get(r, 0)
        for i, s in enumerate(steps):
            t0 = 1000.0 * i + off
            tb.annotation(f"ProfilerStep#{s}", t0, 1000)
            compute = 300 + (late if r == slow else 0)
            tb.launch_kernel("gemm", t0 + 1, 5, t0 + 10, compute - 10)
            enter = t0 + compute
            tb.launch_kernel(name, t0 + 6, 5, enter, t0 + 1000 - enter - 1, stream=stream)
        tb.write(folder)
    return holotrace.load(folder, cache=False)


def test_slow_rank_is_named(tmp_path):
    job = _job(tmp_path)
    ta = TraceAnalysis(job=job)
    assert ta.get_potential_stragglers(num_candidates=1) == [2]
    assert ta.get_profiler_steps() == [1, 2]  # HTA drops the last step
    # HTA only knows ncclKernel*: with modern names it finds nothing (HTA raises; compat mode says [])
    assert ta.get_potential_stragglers(num_candidates=1, hta_compat=True) == []


def test_htas_names_still_work_in_compat(tmp_path):
    ta = TraceAnalysis(job=_job(tmp_path, name=OLD))
    assert ta.get_potential_stragglers(num_candidates=1, hta_compat=True) == [2]
    assert ta.get_potential_stragglers(num_candidates=1) == [2]


def test_ties_and_zero_scores(tmp_path):
    ta = TraceAnalysis(job=_job(tmp_path, name=OLD))
    # k=2: rank 2 starts latest; the three others tie at the 2nd place, so all four get the same score.
    # HTA then returns the lowest ranks and misses rank 2; holotrace breaks the tie by the later start
    assert ta.get_potential_stragglers(num_candidates=2, hta_compat=True) == [0, 1]
    assert ta.get_potential_stragglers(num_candidates=2) == [2, 0]
    assert ta.get_potential_stragglers(num_candidates=10) == [2, 0, 1, 3]  # more than ranks: no IndexError


def test_invalid_steps_raise(tmp_path):
    ta = TraceAnalysis(job=_job(tmp_path))
    with pytest.raises(ValueError, match="available profiler steps=\\[1, 2\\]"):
        ta.get_potential_stragglers(profiler_steps=[7])
    assert ta.get_potential_stragglers(profiler_steps=[2, 7], num_candidates=1) == [2]


def test_single_step_zero_and_no_steps(tmp_path):
    job = _job(tmp_path, steps=(0,))
    ta = TraceAnalysis(job=job)
    assert ta.get_profiler_steps() == [0]  # one marker: nothing is dropped
    assert ta.get_potential_stragglers(num_candidates=1) == [2]
    assert ta.get_potential_stragglers(num_candidates=1, hta_compat=True) == []  # HTA skips iteration 0


def test_trace_without_profiler_steps(tmp_path):
    folder = tmp_path / "nosteps"
    for r in range(3):
        tb = TraceBuilder(rank=r, world_size=3, pid=100 + r, device=r)
        enter = 300 + (500 if r == 1 else 0)
        tb.launch_kernel("gemm", 1, 5, 10, enter - 10)
        tb.launch_kernel(DEV, 6, 5, enter, 1000 - enter)
        tb.write(folder)
    ta = TraceAnalysis(job=holotrace.load(folder, cache=False))
    assert ta.get_profiler_steps() == []
    assert ta.get_potential_stragglers(num_candidates=1) == [1]


def test_single_rank_says_nobody(tmp_path, caplog):
    ta = TraceAnalysis(job=_job(tmp_path, ranks=1, slow=0))
    with caplog.at_level(logging.WARNING):
        assert ta.get_potential_stragglers() == []
    assert "at least two ranks" in caplog.text
    assert summary_lines(ta.job) == ["stragglers: one rank, nothing to compare"]


def test_custom_scorer(tmp_path):
    ta = TraceAnalysis(job=_job(tmp_path))

    def by_event_count(df, symbol_table, k, visualize):
        assert symbol_table.get_sym_table()[int(df["name"].iloc[0])] == df["s_name"].iloc[0]
        return df.groupby("rank").size().rename(None) * 0 + np.array([0, 5, 1, 0])

    assert ta.get_potential_stragglers(num_candidates=2, straggler_identification_impl=by_event_count) == [1, 2]


def test_native_waits_name_the_slow_rank_with_evidence(tmp_path):
    job = _job(tmp_path)
    w = stragglers.collective_waits(job)
    assert len(w) == 4 * 3  # one collective per step, on 4 ranks, every step kept natively
    assert set(w["last_arrival"]) == {2}
    assert w.loc[w["rank"] == 2, "wait_us"].tolist() == [0.0, 0.0, 0.0]
    assert w.loc[w["rank"] == 0, "wait_us"].tolist() == [400.0, 400.0, 400.0]
    rep = stragglers.straggler_report(job)
    st = rep[rep["straggler"]]
    assert st["rank"].tolist() == [2, 2, 2] and st["step"].tolist() == [1, 2, 3]
    assert st["waited_for_us"].tolist() == [1200.0] * 3  # 3 ranks × 400 µs
    assert st["worst_collective"].tolist() == [DEV] * 3
    assert rep.loc[rep["rank"] == 0, "wait_us"].tolist() == [400.0] * 3
    s = stragglers.straggler_summary(job, report=rep)
    assert s.iloc[0].tolist() == [2, 3, 3600.0, 0.0]
    line = summary_lines(job)[0]
    assert line.startswith("straggler: rank 2 (the others waited 3.600 ms for it; straggler in 3/3 steps")
    assert "ncclDevKernel_AllReduce_Sum_f32_RING_LL" in line


def test_native_view_ignores_clock_skew(tmp_path):
    job = _job(tmp_path, skew={2: -5000.0, 3: 250.0})
    rep = stragglers.straggler_report(job)
    assert rep.loc[rep["straggler"], "rank"].unique().tolist() == [2]


def test_one_path_under_each_rule_set(tmp_path):
    job = _job(tmp_path, name=OLD)
    native = job_view(job, NATIVE)
    # holotrace's rules keep every step (HTA drops the last one)
    assert stragglers.straggler_steps(native) == [1, 2, 3]
    assert stragglers.potential_stragglers(native, num_candidates=1) == [2]
    scores, metric = stragglers.straggler_scores(native, steps=[1, 2, 3], num_candidates=1)
    assert scores.to_dict() == {0: 0, 1: 0, 2: 3, 3: 0}  # rank 2 starts the all-reduce last in all 3 steps
    assert sorted(set(metric["iteration"])) == [1, 2, 3] and len(metric) == 12
    ta = TraceAnalysis(job=job)
    assert stragglers.straggler_steps(ta.view, rules=HTA) == [1, 2]
    with pytest.raises(ValueError, match="available profiler steps"):
        stragglers.straggler_steps(ta.view, [9], rules=HTA)
    assert stragglers.potential_stragglers(
        ta.view, rules=HTA, scorer=lambda steps: pd.Series([0, 4], index=[0, 3])
    ) == [3, 0]


def test_whole_trace_is_one_step_only_without_quirks(tmp_path):
    folder = tmp_path / "nosteps"
    for r in range(2):
        tb = TraceBuilder(rank=r, world_size=2, pid=100 + r, device=r)
        tb.launch_kernel(DEV, 6, 5, 300 + 200 * r, 700 - 200 * r)
        tb.write(folder)
    job = holotrace.load(folder, cache=False)
    assert stragglers.straggler_steps(job) is None
    assert stragglers.potential_stragglers(job, num_candidates=1) == [1]  # rank 1 enters 200 µs later
    with pytest.raises(ValueError):
        stragglers.straggler_steps(job, rules=HTA)
