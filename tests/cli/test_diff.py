"""``holotrace diff``: the CI gate on generated pairs, the report, and bad input.

The generated job: 2 ranks x 8 steps; each step launches ``gemm`` (400 us), ``softmax`` (100 us) and an
``ncclDevKernel_AllReduce`` (150 us) back to back on one stream, every duration jittered by +-2% from a
seeded generator. Planted changes: one kernel 20% slower, or 800 us of CPU work before the
all-reduce launch (the CPU reaches it ~300 us after the stream ran dry).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from holotrace.analysis.diff import diff_jobs
from holotrace.analysis.diff_gate import check_rules, parse_rule
from holotrace.cli import main
from holotrace.errors import AnalysisError
from holotrace.loader import load
from tracebuilder import TraceBuilder

KERNELS = (("gemm_kernel", 400.0), ("softmax_kernel", 100.0), ("ncclDevKernel_AllReduce_Sum_f32", 150.0))
RULES = ["step_time>+5%", "kernel:*>+10%", "host_wait>+10%", "idle>+2pp"]


def make_job(folder, seed, *, slower=None, host_wait_us=0.0, ranks=2, steps=8):
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        tb = TraceBuilder(rank=r, world_size=ranks)
        t = 1000.0
        for s in range(steps):
            start = t
            cpu, gpu = t + 10.0, t + 20.0
            for name, dur in KERNELS:
                d = dur * (1.2 if name == slower else 1.0) * (0.98 + 0.04 * rng.random())
                if name.startswith("nccl"):
                    cpu += host_wait_us
                    gpu = max(gpu, cpu + 8.0)
                tb.launch_kernel(name, cpu_ts_us=cpu, cpu_dur_us=5.0, gpu_ts_us=gpu, gpu_dur_us=round(d, 3))
                cpu += 6.0
                gpu += d + 2.0
            t = max(cpu, gpu) + 10.0
            tb.annotation(f"ProfilerStep#{s + 1}", start, t - start)
            t += 1.0
        tb.write(folder, name=f"rank{r}.json")
    return folder


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("diffjobs")
    return {
        "base": make_job(root / "base", 1),
        "noise": make_job(root / "noise", 2),
        "slow": make_job(root / "slow", 2, slower="softmax_kernel"),
        "wait": make_job(root / "wait", 2, host_wait_us=800.0),
    }


def _run(capsys, *argv):
    rc = main(["diff", *map(str, argv), "--no-cache", "--quiet", "--width", "200"])
    return rc, capsys.readouterr().out


def test_same_job_other_seed_passes_under_the_noise_guard(jobs, capsys):
    rc, out = _run(capsys, jobs["base"], jobs["noise"], *sum([["--fail-on", r] for r in RULES], []))
    assert rc == 0, out
    assert "PASS" in out and "FAIL" not in out


def test_noise_trips_without_the_guard_on_a_tight_rule(jobs):
    d = diff_jobs(load(jobs["base"], cache=False), load(jobs["noise"], cache=False))
    loose = check_rules(d, ["kernel:*>+0.1%"], min_effect=0)
    guarded = check_rules(d, ["kernel:*>+0.1%"], min_effect=2)
    assert len(guarded) < len(loose) or not loose  # the guard only removes trips


def test_planted_slower_kernel_fails_naming_it_first(jobs, capsys):
    rc, out = _run(capsys, jobs["base"], jobs["slow"], *sum([["--fail-on", r] for r in RULES], []))
    assert rc == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fails and "kernel:softmax_kernel" in fails[0]
    assert not any("gemm_kernel" in f or "nccl" in f for f in fails)


def test_planted_host_wait_fails_naming_the_cause_first(jobs, capsys):
    rc, out = _run(capsys, jobs["base"], jobs["wait"], *sum([["--fail-on", r] for r in RULES], []))
    assert rc == 1
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fails and fails[0].startswith("FAIL    host_wait")
    d = diff_jobs(load(jobs["base"], cache=False), load(jobs["wait"], cache=False))
    assert d.contributors["item"].iloc[0] == "idle:host_wait"
    hw = d.metrics.set_index("metric").loc["host_wait"]
    assert hw["base"] == 0 and hw["delta"] == pytest.approx(306.0, abs=15.0)  # CPU at +830 us, stream free at ~+524 us


def test_slower_kernel_figures(jobs):
    d = diff_jobs(load(jobs["base"], cache=False), load(jobs["slow"], cache=False))
    k = d.ops[(d.ops["rank"] == -1) & (d.ops["key"] == "softmax_kernel")].iloc[0]
    assert k["count_base"] == k["count_new"] == 16
    assert k["delta_pct"] == pytest.approx(20.0, abs=3.0)
    assert k["per_step_us_base"] == pytest.approx(100.0, rel=0.03)
    assert d.contributors["item"].iloc[0] == "kernel:softmax_kernel"
    st = d.metrics.set_index("metric").loc["step_time"]
    assert st["delta"] == pytest.approx(20.0, abs=6.0)


def test_json_and_markdown(jobs, capsys):
    rc, out = _run(capsys, jobs["base"], jobs["slow"], "--fail-on", "kernel:softmax*>+10%", "--format", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["meta"]["failed"] and doc["trips"][0]["item"] == "kernel:softmax_kernel"
    rc, out = _run(capsys, jobs["base"], jobs["slow"], "--format", "markdown")
    assert rc == 0 and out.startswith("## holotrace diff") and "| metric" in out


def test_step_ranges_of_one_job(jobs):
    j = load(jobs["base"], cache=False)
    d = diff_jobs(j, j, base_steps=[1, 2, 3], new_steps=[4, 5])
    assert (d.base_steps, d.new_steps) == ([1, 2, 3], [4, 5])
    assert any("different step counts" in n for n in d.notes)


def test_different_rank_counts_give_a_diff_with_a_note(jobs, tmp_path, capsys):
    one = make_job(tmp_path / "one", 3, ranks=1)
    rc, out = _run(capsys, jobs["base"], one, "--fail-on", "step_time>+50%")
    assert rc == 0
    assert "NOTE    different ranks: base has [0, 1], new has [0]" in out


def test_different_models_are_noted(jobs, tmp_path):
    tb = TraceBuilder(rank=0)
    tb.annotation("ProfilerStep#1", 0, 500)
    tb.launch_kernel("other_model_conv", cpu_ts_us=10, cpu_dur_us=5, gpu_ts_us=20, gpu_dur_us=300)
    tb.write(tmp_path / "other", name="rank0.json")
    d = diff_jobs(load(jobs["base"], cache=False), load(tmp_path / "other", cache=False))
    assert any("same model" in n for n in d.notes)


def test_bad_input(jobs, tmp_path, capsys):
    with pytest.raises(AnalysisError):
        parse_rule("step_time>>5")
    with pytest.raises(AnalysisError):
        parse_rule("step_time>+5pp")  # pp is for percentages
    assert parse_rule("overlap<-5pp") == ("overlap", "<", -5.0, "pp")
    assert parse_rule("kernel:nccl*>+10%") == ("kernel:nccl*", ">", 10.0, "%")
    assert parse_rule("host_wait>+2ms") == ("host_wait", ">", 2000.0, "us")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "rank0.json").write_text('{"traceEvents": []}')
    rc = main(["diff", str(jobs["base"]), str(tmp_path / "empty"), "--no-cache", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "no events" in err and len(err.strip().splitlines()) == 1
    rc = main(["diff", str(jobs["base"]), str(jobs["base"]), "--base-steps", "40-41", "--no-cache", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "steps [40, 41] are not in the job" in err


@pytest.mark.parametrize("dtype", [np.int64, np.float64])  # ns (one packed sort) and µs floats (two-key sort)
def test_per_name_statistics_by_hand(dtype):
    from holotrace.analysis.diff_stats import group_stats as _group_stats

    group = np.array([1, 0, 0, 0, 1], dtype=np.int64)
    dur = np.array([10, 3, 1, 2, 30], dtype=dtype)
    step = np.array([0, 0, 1, 1, 1], dtype=np.int64)
    uniq, count, total, mean, p50, p95, per_step = _group_stats(group, dur, step, 2)
    assert uniq.tolist() == [0, 1] and count.tolist() == [3, 2] and total.tolist() == [6.0, 40.0]
    assert mean.tolist() == [2.0, 20.0] and p50.tolist() == [2.0, 20.0]
    assert p95 == pytest.approx([2.9, 29.0])  # sorted 1,2,3: 2 + 0.9 * (3 - 2); 10,30: 10 + 0.95 * 20
    assert per_step.tolist() == [[3.0, 3.0], [10.0, 30.0]]


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_merged_groups_sorted_from_the_per_rank_groups(dtype):
    """The merged groups' order made from the per-rank groups' sorted runs is the order sorted from scratch, and
    the statistics from it the same (a large group id: the lookup table gives way to the search)."""
    from holotrace.analysis.diff_stats import coarser as _coarser
    from holotrace.analysis.diff_stats import group_stats as _group_stats
    from holotrace.analysis.diff_stats import sort_groups as _sort_groups

    rng = np.random.default_rng(3)
    n_ranks = 4
    for big in (0, 10**9):
        key = rng.integers(0, 50, 5000) + big
        rank = rng.integers(0, n_ranks, 5000)
        dur = rng.integers(0, 10**6, 5000).astype(dtype)
        step = rng.integers(0, 3, 5000)
        fine = _sort_groups(key * n_ranks + rank, dur)
        got, want = _coarser(*fine, n_ranks), _sort_groups(key, dur)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[1].dtype == want[1].dtype
        for a, b in zip(_group_stats(key, dur, step, 3, got), _group_stats(key, dur, step, 3)):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_step_positions(dtype):
    """Each iteration's position among the compared steps: the first position of a step listed twice, -1 for
    any other iteration (below, between and above the steps, negative, and NaN for float iterations)."""
    from holotrace.analysis.diff import _step_pos

    it = np.array([-1, 0, 3, 5, 6, 7, 9, 12, 40], dtype=dtype)
    assert _step_pos(it, [7, 5, 6]).tolist() == [-1, -1, -1, 1, 2, 0, -1, -1, -1]
    assert _step_pos(it, [9, 3, 9]).tolist() == [-1, -1, 1, -1, -1, -1, 0, -1, -1]
    if dtype == np.float64:
        assert _step_pos(np.array([np.nan, 5.0]), [5]).tolist() == [-1, 0]


def test_step_positions_of_huge_step_numbers():
    """Step numbers far above the rows' count are searched, not tabled (no allocation sized by a trace's number)."""
    from holotrace.analysis.diff import _step_pos

    it = np.array([2**40, 3, 2**40 + 1], dtype=np.int64)
    assert _step_pos(it, [2**40 + 1, 2**40]).tolist() == [1, -1, 0]
