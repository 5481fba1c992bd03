"""One story: ``summary``, ``stragglers`` and ``advise`` (``--format json``) name the same costliest rank, with the
same words, on a generated job with a planted straggler and on the corpus' multi-rank job."""

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


def test_corpus_two_ranks(capsys):
    job = SHARED / "traces" / "hta_trace_filter_2rank"
    if not job.is_dir():
        pytest.skip("full trace corpus (../shared/traces beside the repository) not present")
    stories = _stories(capsys, job)
    assert stories[0] == stories[1] == stories[2]
    assert stories[0]["rank"] in (0, 1)


def test_advise_rank_narrows(tmp_path, capsys):
    job = planted_job(tmp_path / "job", ranks=4, steps=2, straggler=3)
    whole = _json(capsys, "advise", str(job))
    assert whole["fixes"][0]["fix"] == "straggler" and whole["fixes"][0]["rank"] == 3
    other = _json(capsys, "advise", str(job), "--rank", "0")
    assert all(f["rank"] in (None, 0) for f in other["fixes"])
    assert other["costliest_rank"] == whole["costliest_rank"]  # the job's story does not change with the view
