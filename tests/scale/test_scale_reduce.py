"""Map over ranks, reduce over summaries: the same frames as the analyses on the whole job, on the local pool."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import holotrace
from corpus import BUNDLED
from frames_check import as_frame, assert_frames_equal, is_table
from holotrace.analysis import idle, kernels, overlap, steps, stragglers, temporal
from holotrace.analysis.rank_summary import SKETCH_ACCURACY, delay_sketch, sketch_quantiles
from holotrace.exec.executor import ExecutorError, LocalExecutor, TaskFailed, get_executor
from holotrace.findings import FindingCode
from holotrace.scale import ingest, read_ingest, summarize
from holotrace.table import Table

# frames the reduce must give bit for bit; top kernels sum per-rank totals (last-bit rounding of the sum)
EXACT = (
    "temporal",
    "temporal_by_step",
    "kernel_types_by_rank",
    "kernel_types",
    "kernel_stats",
    "kernel_rank_distribution",
    "idle",
    "idle_interval_stats",
    "overlap",
    "steps",
    "collective_waits",
    "straggler_report",
    "straggler_summary",
)


def direct_frames(job) -> dict:
    d = {
        "temporal": temporal.breakdown(job),
        "temporal_by_step": temporal.breakdown(job, per_step=True),
        "kernel_types_by_rank": kernels.type_breakdown(job, by_rank=True),
        "kernel_types": kernels.type_breakdown(job),
        "kernel_stats": kernels.kernel_stats(job),
        "kernel_rank_distribution": kernels.rank_distribution(job, top=10),
        "top_kernels": kernels.top_kernels(job, top=10),
        "idle": idle.idle_breakdown(job),
        "idle_interval_stats": idle.idle_interval_stats(job),
        "overlap": overlap.comm_comp_overlap(job),
        "steps": steps.step_times(job),
        "collective_waits": stragglers.collective_waits(job),
    }
    d["straggler_report"] = stragglers.straggler_report(job, waits=d["collective_waits"])
    d["straggler_summary"] = stragglers.straggler_summary(job, report=d["straggler_report"])
    return d


def assert_same_as_direct(js, job) -> None:
    direct = direct_frames(job)
    for key in EXACT:
        assert isinstance(js.frames[key], Table), key
        assert_frames_equal(js.frames[key], direct[key], check_exact=True, obj=key)
    assert_frames_equal(js.frames["top_kernels"], direct["top_kernels"], rtol=1e-12, obj="top_kernels")
    assert [f.as_dict() for f in js.findings] == [f.as_dict() for f in job.findings]
    assert js.ranks == job.ranks


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_reduce_equals_whole_job_analyses_bundled(path):
    js = summarize(path, executor=LocalExecutor(2))
    assert_same_as_direct(js, holotrace.load(path, cache=False, progress_bar=False))


def test_reduce_equals_whole_job_analyses_16_ranks(job16):
    js = summarize(job16, executor=LocalExecutor(2))
    assert_same_as_direct(js, holotrace.load(job16, cache=False, progress_bar=False))
    assert js.frames["straggler_summary"]["rank"][0] == 5  # the planted straggler
    assert max(js.summary_bytes) < 200_000  # a rank's summary is small whatever its event count


def test_ingest_then_summary_equals_direct_summary(job16, tmp_path):
    direct = summarize(job16, executor=LocalExecutor(2))
    ingest(job16, tmp_path, ranks=range(0, 8))
    ingest(job16, tmp_path, ranks=range(8, 16))  # a second run over the other ranks, as a job array does
    back = read_ingest(tmp_path)
    assert back.ranks == list(range(16))
    for key, v in direct.frames.items():
        if is_table(v):
            assert_frames_equal(back.frames[key], v, check_exact=True, obj=key)
        else:
            assert back.frames[key] == pytest.approx(v, nan_ok=True) if isinstance(v, dict) else back.frames[key] == v
    assert [f.as_dict() for f in back.findings] == [f.as_dict() for f in direct.findings]
    assert (tmp_path / "rank-000003" / "events.arrow").is_file()


def test_ingest_folder_names_ranks_not_ingested(job16, tmp_path):
    ingest(job16, tmp_path, ranks=[0, 1, 2, 3, 12])
    js = summarize(tmp_path)  # an ingest folder is recognised
    assert js.ranks == [0, 1, 2, 3, 12]
    missing = [f for f in js.findings if f.code is FindingCode.MISSING_RANKS]
    assert len(missing) == 1 and missing[0].count == 11 and "4-11, 13-15" in missing[0].message


def test_corrupt_rank_in_the_middle_is_a_finding(job16_corrupt, tmp_path):
    js = summarize(job16_corrupt, executor=LocalExecutor(2))
    job = holotrace.load(job16_corrupt, cache=False, progress_bar=False)
    assert_same_as_direct(js, job)
    assert 9 not in js.ranks and 7 in js.ranks and len(js.ranks) == 15
    codes = {(f.code, f.rank) for f in js.findings}
    assert (FindingCode.SKIPPED_FILE, 9) in codes and (FindingCode.TRUNCATED_JSON, 7) in codes
    ingest(job16_corrupt, tmp_path)
    back = read_ingest(tmp_path)
    assert [f.as_dict() for f in back.findings] == [f.as_dict() for f in js.findings]
    assert (tmp_path / "rank-000009.failed.json").is_file()


def test_merged_moments_equal_statistics_over_every_instance(job16):
    js = summarize(job16, executor=LocalExecutor(2))
    job = holotrace.load(job16, cache=False, progress_bar=False)
    view = holotrace.model.view.job_view(job)
    parts = []
    for r in view.ranks:
        v = view[r]
        sel = v["gpu"] & np.isin(v["kernel_type"], [0, 1, 2])
        parts.append(pd.DataFrame({"name": view.names(v["name"][sel]), "dur": v["dur"][sel] / 1000.0}))
    every = pd.concat(parts).groupby("name")["dur"].agg(["count", "sum", "min", "max", "mean", "std"]).fillna(0.0)
    m = as_frame(js.frames["kernel_moments"]).set_index("name").loc[every.index]
    assert (m["count"].to_numpy() == every["count"].to_numpy()).all()
    for a, b in (("sum_us", "sum"), ("min_us", "min"), ("max_us", "max"), ("mean_us", "mean"), ("std_us", "std")):
        np.testing.assert_allclose(m[a].to_numpy(), every[b].to_numpy(), rtol=1e-9, atol=1e-9)


def test_folding_order_does_not_change_any_frame(job16):
    from holotrace.analysis.reduce import Reducer, reduce_summaries
    from holotrace.scale.run import RankTask, summarize_file

    summaries = [summarize_file(RankTask(str(job16 / f"rank-{r}.pt.trace.json"), r)) for r in range(16)]
    in_order = reduce_summaries(summaries)
    shuffled = [summaries[i] for i in np.random.default_rng(7).permutation(16)]
    red = Reducer()
    for s in shuffled:
        red.add(s)
    assert red.ranks == list(range(16))
    with pytest.raises(ValueError, match="rank 3 was already reduced"):
        red.add(summaries[3])
    for key, v in red.frames().items():
        if is_table(v):
            assert_frames_equal(v, in_order[key], check_exact=True, obj=key)
        else:
            assert v == pytest.approx(in_order[key], nan_ok=True) if isinstance(v, dict) else v == in_order[key]
    assert len(in_order["collective_waits"]) > 0 and in_order["straggler_summary"]["rank"][0] == 5
    js = summarize(job16, executor=LocalExecutor(2))
    assert_frames_equal(js.frames["collective_waits"], in_order["collective_waits"], check_exact=True)


def test_sketch_quantiles_within_accuracy():
    rng = np.random.default_rng(3)
    x = rng.lognormal(3.0, 1.5, 20_000)
    parts = [delay_sketch(x[i::4]) for i in range(4)]  # merged from four "ranks"
    merged = Table({c: np.concatenate([p[c] for p in parts]) for c in ("bucket", "count")})
    med, p95 = sketch_quantiles(merged, [0.5, 0.95])
    assert med == pytest.approx(np.percentile(x, 50), rel=SKETCH_ACCURACY * 1.5)
    assert p95 == pytest.approx(np.percentile(x, 95), rel=SKETCH_ACCURACY * 1.5)
    assert sketch_quantiles(delay_sketch(np.zeros(5)), [0.5]) == [0.0]


def _square(x):
    if x == 2:
        raise ValueError("two is bad")
    return x * x


def test_local_executor_keeps_order_and_turns_errors_into_results():
    done = []
    with LocalExecutor(2) as ex:
        out = ex.map(_square, [0, 1, 2, 3], on_done=lambda i, r: done.append(i))
        kept = ex.map(_square, [0, 1, 3], keep=lambda i, r: -r)  # what the list holds of each result
    assert out[:2] == [0, 1] and out[3] == 9 and out[2] == TaskFailed("ValueError", "two is bad")
    assert sorted(done) == [0, 1, 2, 3]
    assert kept == [0, -1, -9]


def test_executor_by_name_and_environment(monkeypatch):
    monkeypatch.setenv("HOLOTRACE_EXECUTOR", "local")
    assert get_executor().name == "local"
    monkeypatch.setenv("HOLOTRACE_EXECUTOR", "spark")
    with pytest.raises(ExecutorError, match="unknown executor 'spark'"):
        get_executor()
