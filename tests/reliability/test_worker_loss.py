"""A pool worker killed mid-rank: the rank is run once more; lost again, it is a finding naming the rank, and the
other ranks' answer is complete and equal to a clean run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _reliability import doc, kernel


@pytest.fixture
def job(env):
    for r in range(4):
        env.write(
            f"job/rank-{r}.json",
            doc([kernel(f"k{i % 3}", ts=10 * i + r, dur=3 + r) for i in range(400)], rank=r, world=4),
        )
    return str(env.work / "job")


def run(env, *args, kill_at=None):
    e = dict(os.environ, HOLOTRACE_CACHE_DIR=str(env.cache), HOLOTRACE_KILL_MARK=str(env.root / "killed-once"))
    if kill_at:
        e["HOLOTRACE_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "holotrace.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=e,
        cwd=env.work,
        start_new_session=True,
    )


def _data(r) -> dict:
    return {k: v for k, v in json.loads(r.stdout).items() if k != "meta"}


def test_worker_lost_once_is_retried(env, job):
    clean = run(env, "ingest", job, "--output", "clean", "--workers", "2")
    r = run(env, "ingest", job, "--output", "out", "--workers", "2", kill_at="task-2:1:worker_once")
    assert (env.root / "killed-once").exists()  # a worker was killed
    assert clean.returncode == r.returncode == 0, r.stderr
    a, b = (run(env, "summary", d, "--format", "json") for d in ("clean", "out"))
    assert _data(a) == _data(b)


def test_worker_lost_twice_is_a_finding(env, job):
    r = run(env, "ingest", job, "--output", "out", "--workers", "2", "--format", "json", kill_at="task-2:1:worker")
    assert r.returncode == 1, r.stderr
    failed = json.loads(r.stdout)["failed"]
    assert [f["rank"] for f in failed] == [2] and "worker was lost 2 times" in failed[0]["problem"], failed
    got = run(env, "summary", "out", "--format", "json")
    findings = json.loads(got.stdout)["findings"]
    lost = [f for f in findings if f["code"] == "skipped_file"]
    assert len(lost) == 1 and lost[0]["rank"] == 2 and "worker was lost 2 times" in lost[0]["message"]
    # the other ranks: the same as a clean run over them
    assert run(env, "ingest", job, "--output", "three", "--ranks", "0,1,3").returncode == 0
    a, b = _data(run(env, "summary", "three", "--format", "json")), _data(got)
    assert {k: v for k, v in a.items() if k != "findings"} == {k: v for k, v in b.items() if k != "findings"}
