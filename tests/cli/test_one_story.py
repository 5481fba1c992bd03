"""One story: ``summary``, ``stragglers`` and ``advise`` (``--format json``) and the HTML report name the same
costliest rank, with the same words, on generated jobs (with and without planted causes) and on every multi-rank
job of the corpus; the report's fix list is advise's."""

from __future__ import annotations

import json

import pytest

import holotrace
from corpus import SHARED
from holotrace.cli import main
from plantedjob import planted_job


def _json(capsys, *args):
    assert main([*args, "--no-cache", "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _stories(capsys, path):
    return [_json(capsys, cmd, str(path))["costliest_rank"] for cmd in ("summary", "stragglers", "advise")]


def _one_story(capsys, path) -> dict:
    """The four outputs agree; returns the story."""
    from holotrace.commands.report import report_data

    stories = _stories(capsys, path)
    assert stories[0] == stories[1] == stories[2], path
    advice = _json(capsys, "advise", str(path))
    data = report_data(holotrace.load(str(path), cache=False), timeline_step=None)
    assert data["meta"]["costliest_rank"] == stories[0], path
    assert data["fixes"]["fix"].tolist() == [f["fix"] for f in advice["fixes"]]
    assert data["fixes"]["saving_ms"].tolist() == pytest.approx([f["saving_ms"] for f in advice["fixes"]])
    strag = [f for f in advice["fixes"] if f["fix"] == "straggler"]
    if strag and strag[0]["saving_ms"] > 0.01 * advice["replay"][0]["measured_ms"]:
        assert strag[0]["rank"] == stories[0]["rank"]  # the straggler fix names the same rank
    return stories[0]


@pytest.mark.parametrize(
    "ranks,causes,expect",
    [
        (4, {}, None),
        (4, {"straggler": 1, "loader_stall": True}, 1),
        (8, {"straggler": 6}, 6),
        (8, {"comm_no_overlap": True, "straggler": 2}, 2),
    ],
)
def test_generated_jobs(tmp_path, capsys, ranks, causes, expect):
    story = _one_story(capsys, planted_job(tmp_path / "job", ranks=ranks, steps=2, layers=3, **causes))
    assert story["rank"] in range(ranks)
    if expect is not None:
        assert story["rank"] == expect and "arrives last" in story["why"]


def test_every_multi_rank_corpus_job(capsys):
    root = SHARED / "traces"
    if not root.is_dir():
        pytest.skip("full trace corpus (../shared/traces beside the repository) not present")
    from holotrace.errors import HolotraceError
    from holotrace.ingest.discover import discover

    def n_files(p):
        try:
            return len(discover(p).files)
        except HolotraceError:
            return 0

    jobs = [p for p in sorted(root.iterdir()) if p.is_dir() and n_files(p) > 1]
    assert jobs
    for job in jobs:
        _one_story(capsys, job)


def test_planted_straggler(tmp_path, capsys):
    job = planted_job(tmp_path / "job", ranks=4, steps=2, straggler=3)
    stories = _stories(capsys, job)
    assert stories[0] == stories[1] == stories[2]
    assert stories[0]["rank"] == 3 and "arrives last" in stories[0]["why"]
    # the HTML report states the same sentence among the job's facts, and takes its critical path on that rank
    from holotrace.commands.report import report_data

    data = report_data(holotrace.load(str(job), cache=False), timeline_step=None)
    assert data["meta"]["costliest_rank"] == stories[0]
    assert data["critical_path_rank"] == 3


def test_advise_rank_narrows(tmp_path, capsys):
    job = planted_job(tmp_path / "job", ranks=4, steps=2, straggler=3)
    whole = _json(capsys, "advise", str(job))
    assert whole["fixes"][0]["fix"] == "straggler" and whole["fixes"][0]["rank"] == 3
    other = _json(capsys, "advise", str(job), "--rank", "0")
    assert all(f["rank"] in (None, 0) for f in other["fixes"])
    assert other["costliest_rank"] == whole["costliest_rank"]  # the job's story does not change with the view


def test_map_reduce_summary_tells_the_same_story(tmp_path, capsys, monkeypatch):
    """``summary --executor`` and an ingest folder carry the same ``costliest_rank`` as the job loaded here; past
    the limit on ranks for the driver's job graph, the scale-out replay (mapped over the rank files) tells it."""
    import holotrace.scale.replay_choice as replay_choice

    job = planted_job(tmp_path / "job", ranks=4, steps=2, layers=3, straggler=2)
    here = _json(capsys, "summary", str(job))["costliest_rank"]
    assert here["rank"] == 2
    assert _json(capsys, "summary", str(job), "--executor", "local", "--workers", "2")["costliest_rank"] == here
    assert main(["ingest", str(job), "--output", str(tmp_path / "ing"), "--quiet"]) == 0
    capsys.readouterr()
    assert _json(capsys, "summary", str(tmp_path / "ing"))["costliest_rank"] == here
    monkeypatch.setattr(replay_choice, "JOB_GRAPH_MAX_RANKS", 3)
    assert _json(capsys, "summary", str(job), "--executor", "local", "--workers", "2")["costliest_rank"] == here
    assert _json(capsys, "summary", str(tmp_path / "ing"))["costliest_rank"] == here
