"""Planted causes (tests/plantedjob.py): ``advise`` ranks the planted cause first, names the right rank, kernel or
operator, and its prediction matches the twin generated without the cause (same seed).

Predictions are compared with the twin step by step after the first: in the first step of every job the GPU
waits for the first data loading, which no fix of the planted cause removes from the twin either."""

from __future__ import annotations

import pytest

import holotrace
from holotrace.analysis.critical_path.advice import job_advice
from holotrace.analysis.critical_path.job_graph import build_job_graph
from holotrace.analysis.critical_path.replay import replay
from plantedjob import (
    ALLREDUCE,
    GEMM_BWD,
    check_host_fixes_within_gpu_idle,
    planted_job,
)

CASES = {
    "straggler": ({"straggler": 2}, "straggler"),
    "slow_kernel": ({"slow_kernel": True}, "kernel"),
    "launch_bound": ({"launch_bound": True}, "launch_overhead"),
    "comm_no_overlap": ({"comm_no_overlap": True}, "communication"),
    "loader_stall": ({"loader_stall": True}, "data_loading"),
    "blocking_copy": ({"blocking_copy": True}, "host_sync"),
}


def _load(folder):
    return holotrace.load(str(folder), cache=False)


@pytest.fixture(scope="module", params=[4, 8])
def twin(request, tmp_path_factory):
    ranks = request.param
    job = _load(planted_job(tmp_path_factory.mktemp(f"twin{ranks}"), ranks=ranks))
    steps = replay(build_job_graph(job)).steps.set_index("step")["measured_ms"]
    return ranks, steps


def _check_prediction(advice, fix, twin_steps, rank=None, target=None):
    per = advice.per_step[advice.per_step["fix"] == fix]
    if rank is not None:
        per = per[per["rank"] == rank]
    if target is not None:
        per = per[per["target"] == target]
    per = per.set_index("step")["predicted_step_ms"]
    for s in twin_steps.index[1:]:
        assert per[s] == pytest.approx(twin_steps[s], rel=0.03), f"step {s}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_planted_cause_ranks_first(case, twin, tmp_path):
    ranks, twin_steps = twin
    causes, fix = CASES[case]
    job = _load(planted_job(tmp_path, ranks=ranks, **causes))
    a = job_advice(job)
    first = a.fixes.iloc[0]
    assert first["fix"] == fix, a.fixes[["fix", "rank", "saving_pct"]].head(4).to_string()
    assert (a.replay["error_pct"].abs() < 2.0).all()
    if fix == "straggler":
        assert first["rank"] == 2 and a.costliest.rank == 2
        assert "arrives last" in a.costliest.why and ALLREDUCE in a.costliest.why
    elif fix == "kernel":
        assert first["target"] == GEMM_BWD
    elif fix == "host_sync":
        assert any(e.startswith("aten::item > cudaMemcpyAsync") for e in first["evidence"])
    _check_prediction(a, fix, twin_steps, rank=first["rank"] if fix == "straggler" else None, target=first["target"])
    check_host_fixes_within_gpu_idle(a)


def test_two_causes_bigger_first_and_combined(twin, tmp_path):
    ranks, twin_steps = twin
    job = _load(planted_job(tmp_path, ranks=ranks, straggler=1, comm_no_overlap=True))
    a = job_advice(job, combine=[["straggler", "communication"]])
    single = a.fixes[~a.fixes["fix"].str.contains("+", regex=False)]
    assert single["fix"].tolist()[:2] == ["straggler", "communication"]
    assert single["rank"].iloc[0] == 1
    _check_prediction(a, "straggler+communication", twin_steps)


def test_no_cause_no_waste_fix(twin, tmp_path):
    """The twin itself: GPU-bound and balanced, so its first fix is a kernel fix and no waste fix saves 5 %."""
    ranks, _ = twin
    a = job_advice(_load(planted_job(tmp_path, ranks=ranks)))
    assert a.fixes["fix"].iloc[0] == "kernel"
    steady = a.per_step[(a.per_step["step"] > 1) & ~a.per_step["fix"].isin(["kernel", "cpu_op"])]
    assert (steady["saving_pct"] < 5.0).all()
