"""The scale-out replay (each rank's step as segments between collectives, the job replayed at collective
granularity in the driver) against the job graph's replay.

The unmodified segment replay is exact when the arrivals are the measured ones (the graph's unmodified replay
gives back the measured times): the same job step times as the graph's replay on the bundled multi-rank jobs and
on planted jobs. The what-ifs are approximate only where a fix changes which collective a segment hangs off; on the
planted jobs below they agree with the graph's too (the table in docs/analyses.md has the measured differences).
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest
from test_job_replay import _job as three_rank_job

import holotrace
from corpus import DATA
from holotrace.analysis.critical_path.advice import costliest_rank, job_advice
from holotrace.cli import main
from holotrace.errors import AnalysisError, TraceFormatError
from holotrace.scale.segment_run import ENV_REPLAY, JOB_GRAPH_MAX_RANKS, choose_replay
from plantedjob import planted_job

BUNDLED = sorted(p for p in (DATA / "traces").iterdir() if p.is_dir())


def _same_advice(a, b, *, what_ifs: bool = True, evidence: bool = True) -> None:
    """The same replay, costliest rank and what-ifs; ``evidence``: the same evidence too (a job-wide fix's evidence
    is merged from the ranks' lists by the segment replay, weighed by time over the job by the graph's: they can
    differ in order where names carry unequal time on different ranks)."""
    np.testing.assert_allclose(b.replay["replayed_ms"], a.replay["replayed_ms"], rtol=1e-9, atol=1e-9)
    pd.testing.assert_series_equal(b.replay["measured_ms"], a.replay["measured_ms"])
    ca, cb = a.costliest, b.costliest
    assert (cb.rank, cb.why, cb.arrives_last, cb.longest_step) == (ca.rank, ca.why, ca.arrives_last, ca.longest_step)
    assert cb.saving_ms == pytest.approx(ca.saving_ms, rel=1e-9, abs=1e-12)
    if what_ifs:
        key = ["fix", "rank", "target", "step"]
        pa = a.per_step.sort_values(key, kind="stable", key=lambda c: c.astype(str)).reset_index(drop=True)
        pb = b.per_step.sort_values(key, kind="stable", key=lambda c: c.astype(str)).reset_index(drop=True)
        assert pa[key].astype(str).equals(pb[key].astype(str))
        np.testing.assert_allclose(pb["saving_ms"], pa["saving_ms"], rtol=1e-9, atol=1e-9)
        if evidence:
            assert pb["evidence"].tolist() == pa["evidence"].tolist()


@pytest.mark.parametrize("folder", [p for p in BUNDLED if len(holotrace.load(str(p), cache=False).ranks) > 1])
def test_bundled_multi_rank_jobs(folder):
    job = holotrace.load(str(folder), cache=False)
    _same_advice(job_advice(job), job_advice(job, replay="segments"), evidence=False)


@pytest.mark.parametrize(
    "ranks,causes",
    [
        (4, {"straggler": 1}),
        (8, {"straggler": 5}),
        (8, {"comm_no_overlap": True}),
        (8, {"straggler": 2, "comm_no_overlap": True}),
        (4, {"launch_bound": True, "loader_stall": True}),
        (4, {"blocking_copy": True}),
    ],
)
def test_planted_jobs(tmp_path, ranks, causes):
    job = holotrace.load(str(planted_job(tmp_path / "job", ranks=ranks, steps=2, layers=3, **causes)), cache=False)
    _same_advice(job_advice(job), job_advice(job, replay="segments"))


def test_worked_by_hand(tmp_path):
    """The three-rank job of test_job_replay: rank 2 at the median saves 200 us, hidden communication 50 us."""
    a = job_advice(three_rank_job(tmp_path), replay="segments")
    assert a.replay["replayed_ms"].tolist() == pytest.approx([0.37])
    save = a.fixes.set_index("fix")["saving_ms"]
    assert save["straggler"] == pytest.approx(0.2)
    assert save["communication"] == pytest.approx(0.05)
    assert a.costliest.rank == 2


def test_combined_fixes_and_steps(tmp_path):
    job = holotrace.load(str(planted_job(tmp_path / "job", ranks=4, steps=3, layers=2, straggler=3)), cache=False)
    # a combination is named by the fixes the job has (no host synchronisation here): the same rows either way
    kw = dict(
        combine=[["straggler", "communication"], ["straggler", "host_sync", "kernel"], ["host_sync"]], steps=[2, 3]
    )
    _same_advice(job_advice(job, **kw), job_advice(job, replay="segments", **kw))


def test_a_rank_recorded_earlier_keeps_its_collectives_aligned(tmp_path):
    """Rank 3's profiler recorded one operator 20 ms before anything else on a clock shared with the other ranks:
    its collectives still end with the others' (no offset, no skew), on either replay, and the advice is the job's
    without that operator."""
    folder = planted_job(tmp_path / "job", ranks=4, steps=2, layers=3, straggler=2)
    plain = job_advice(holotrace.load(str(folder), cache=False))
    path = sorted(folder.iterdir())[3]
    doc = json.loads(path.read_text())
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    doc["traceEvents"].append(dict(op, name="early_setup", ts=first - 20_000, dur=5))
    path.write_text(json.dumps(doc))
    job = holotrace.load(str(folder), cache=False)
    from holotrace.analysis.critical_path.job_graph import build_job_graph

    g = build_job_graph(job)
    assert g.offsets_ns == {0: 0, 1: 0, 2: 0, 3: 0}
    assert g.skew_ns == 0.0
    for a in (job_advice(job), job_advice(job, replay="segments")):
        assert (a.costliest.rank, a.costliest.why) == (plain.costliest.rank, plain.costliest.why)
        np.testing.assert_allclose(a.replay["replayed_ms"], plain.replay["replayed_ms"], rtol=1e-9)
        np.testing.assert_allclose(a.fixes["saving_ms"], plain.fixes["saving_ms"], rtol=1e-9, atol=1e-9)


def test_planted_straggler_64_ranks(tmp_path):
    job = holotrace.load(str(planted_job(tmp_path / "job", ranks=64, steps=2, layers=2, straggler=41)), cache=False)
    a = job_advice(job, replay="segments")
    assert a.costliest.rank == 41
    assert (a.fixes["fix"].iloc[0], a.fixes["rank"].iloc[0]) == ("straggler", 41)
    assert costliest_rank(job, replay="segments").why == a.costliest.why


def test_which_replay(monkeypatch):
    monkeypatch.delenv(ENV_REPLAY, raising=False)
    assert choose_replay(JOB_GRAPH_MAX_RANKS) == "graph"
    assert choose_replay(JOB_GRAPH_MAX_RANKS + 1) == "segments"
    assert choose_replay(2, "segments") == "segments"
    assert choose_replay(1024, "graph") == "graph"
    monkeypatch.setenv(ENV_REPLAY, "segments")
    assert choose_replay(2) == "segments"
    assert choose_replay(2, "auto") == "graph"
    monkeypatch.setenv(ENV_REPLAY, "fast")
    with pytest.raises(AnalysisError, match="unknown replay 'fast'"):
        choose_replay(2)


def _cli(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*map(str, argv), "--format", "json", "--quiet", "--no-cache"]) == 0
    return json.loads(out.getvalue())


def test_commands_same_json_on_either_replay(tmp_path):
    job = planted_job(tmp_path / "job", ranks=8, steps=2, layers=2, straggler=6)
    for cmd in ("advise", "stragglers", "summary"):
        graph = _cli(cmd, job, "--replay", "graph")
        assert graph["costliest_rank"]["rank"] == 6
        assert _cli(cmd, job, "--replay", "segments")["costliest_rank"] == graph["costliest_rank"]
    assert _cli("advise", job, "--replay", "segments") == _cli("advise", job, "--replay", "graph")
    # the summary mapped over the ranks (the segments' two phases on the local pool)
    mapped = _cli("summary", job, "--executor", "local", "--replay", "segments")
    assert mapped["costliest_rank"] == graph["costliest_rank"]


def test_a_rank_that_cannot_be_read_is_left_out(tmp_path):
    """Mapped over the files, a rank whose file is cut short is a note of the advice, and the other ranks answer."""
    from holotrace.scale.segment_run import segment_advice

    job = planted_job(tmp_path / "job", ranks=4, steps=2, layers=2, straggler=1)
    bad = sorted(job.iterdir())[3]
    bad.write_bytes(bad.read_bytes()[:200])
    a = segment_advice(job)
    assert any(x.startswith("rank 3 is left out of the replay") for x in a.issues)
    assert a.costliest.rank == 1
    for f in sorted(job.iterdir())[:3]:
        f.write_bytes(f.read_bytes()[:200])
    with pytest.raises(TraceFormatError, match="no rank of the job could be read"):
        segment_advice(job)


def test_one_story_on_the_segment_replay(tmp_path, monkeypatch):
    """With ``HOLOTRACE_REPLAY=segments`` the summary, ``stragglers``, ``advise`` and the HTML report tell one story."""
    from holotrace.commands.report import report_data

    monkeypatch.setenv(ENV_REPLAY, "segments")
    job = planted_job(tmp_path / "job", ranks=6, steps=2, layers=2, straggler=4)
    stories = [_cli(cmd, job)["costliest_rank"] for cmd in ("summary", "stragglers", "advise")]
    assert stories[0]["rank"] == 4 and stories[0] == stories[1] == stories[2]
    data = report_data(holotrace.load(str(job), cache=False), timeline_step=None)
    assert data["meta"]["costliest_rank"] == stories[0]
    assert data["fixes"]["fix"].tolist() == [f["fix"] for f in _cli("advise", job)["fixes"]]
