"""A pool worker killed mid-rank: the rank is run once more; lost again, it is a finding naming the rank, and the
other ranks' answer is complete and equal to a clean run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from _reliability import doc, kernel, one_line_error

two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="the command's process pool needs two cores to lose a worker"
)


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


# ------------------------------------------------------------------ the pool itself


def _dies_on_zero(x: int) -> int:
    if x == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)  # the others are still queued when the pool breaks
    return 10 * x


def test_a_broken_pool_reports_every_task_and_the_retry_answers_the_innocent(monkeypatch):
    from holotrace.exec import executor, pool
    from holotrace.exec.retry import map_retrying, worker_lost

    monkeypatch.setattr(pool, "cpu_count", lambda: 2)
    monkeypatch.setattr(executor, "cpu_count", lambda: 2)
    first = executor.LocalExecutor(2).map(_dies_on_zero, list(range(8)))
    # every task has a result: its value, or that its worker was lost (never nothing: none is silently dropped)
    assert all(worker_lost(r) or r == 10 * i for i, r in enumerate(first)) and worker_lost(first[0]), first
    got = map_retrying(executor.LocalExecutor(2), _dies_on_zero, list(range(8)))
    assert got[1:] == [10 * i for i in range(1, 8)]
    assert worker_lost(got[0]) and "lost 2 times" in got[0].message


# ------------------------------------------------------------------ a plain load on the local pool (API and CLI)


@pytest.fixture
def kill(monkeypatch, env):
    """``kill(point)``: make the load's pool processes (not this one) die at ``point`` (holotrace.atomic's hook);
    two cores whatever the machine has, so that the pool is used."""
    from holotrace import atomic
    from holotrace.exec import pool

    monkeypatch.setattr(pool, "cpu_count", lambda: 2)
    monkeypatch.setenv("HOLOTRACE_KILL_DRIVER", str(os.getpid()))
    monkeypatch.setenv("HOLOTRACE_KILL_MARK", str(env.root / "killed-once"))

    def at(point: str) -> None:
        monkeypatch.setattr(atomic, "_KILL_AT", point)
        monkeypatch.setattr(atomic, "_hits", {})

    return at


def _answer(job) -> tuple:
    """What a command computes from a job: the summary's frames (names, not string ids) and its findings."""
    from holotrace.analysis.job_summary import summarize_job

    js = summarize_job(job)
    frames = {
        k: v.to_pandas().to_dict("records") if hasattr(v, "to_pandas") else str(v)
        for k, v in js.data().items()
        if k != "findings"
    }
    return json.dumps(frames, sort_keys=True, default=str), [f.as_dict() for f in js.findings]  # NaN == NaN


def test_load_worker_lost_once_is_retried(env, job, kill):
    import holotrace

    clean = holotrace.load(job, cache=False, workers=2)
    kill("load-rank-0.json:1:worker_once")
    got = holotrace.load(job, cache=False, workers=2)
    assert (env.root / "killed-once").exists()  # the first file's pool process was killed
    assert got.ranks == [0, 1, 2, 3]
    assert _answer(got) == _answer(clean)


def test_load_worker_lost_twice_is_a_finding_and_the_rest_is_whole(env, job, kill):
    import holotrace

    kill("load-rank-0.json:1:worker")
    got = holotrace.load(job, cache=False, workers=2)
    assert got.ranks == [1, 2, 3]
    lost = [f for f in got.findings if f.code.value == "skipped_file"]
    assert [(f.rank, os.path.basename(f.file)) for f in lost] == [(0, "rank-0.json")]
    assert "worker was lost 2 times" in lost[0].message and "fewer --workers" in lost[0].message
    kill("none")
    three = holotrace.load([os.path.join(job, f"rank-{r}.json") for r in (1, 2, 3)], cache=False, workers=2)
    frames, findings = _answer(got)
    clean_frames, clean_findings = _answer(three)
    assert frames == clean_frames
    # the same findings but how rank 0 is missing: its file was seen (skipped_file) or never given (missing_ranks)
    how = ("skipped_file", "missing_ranks")
    assert [f for f in findings if f["code"] not in how] == [f for f in clean_findings if f["code"] not in how]


def test_load_worker_lost_twice_is_a_typed_error_for_named_files_and_strict(env, job, kill):
    import holotrace
    from holotrace.errors import JobConsistencyError, WorkerLostError

    kill("load-rank-0.json:1:worker")
    files = [os.path.join(job, f"rank-{r}.json") for r in range(4)]
    with pytest.raises(WorkerLostError) as e:
        holotrace.load(files, cache=False, workers=2)
    assert e.value.path == files[0] and "worker was lost 2 times" in e.value.problem and "fewer" in e.value.fix
    with pytest.raises(JobConsistencyError, match="rank 0 is missing from every number: its worker was lost"):
        holotrace.load(job, cache=False, workers=2, strict=True)


@two_cores
def test_cli_worker_lost_once_answers_as_a_clean_run(env, job):
    clean = run(env, "summary", job, "--workers", "2", "--no-cache", "--format", "json")
    r = run(
        env,
        "summary",
        job,
        "--workers",
        "2",
        "--no-cache",
        "--format",
        "json",
        kill_at="load-rank-0.json:1:worker_once",
    )
    assert (env.root / "killed-once").exists()
    assert clean.returncode == r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert _data(r) == _data(clean)


@two_cores
def test_cli_worker_lost_twice(env, job):
    strict = run(env, "summary", job, "--workers", "2", "--no-cache", "--strict", kill_at="load-rank-0.json:1:worker")
    one_line_error(strict, "rank-0.json", "its worker was lost 2 times", "fewer --workers")
    r = run(
        env, "summary", job, "--workers", "2", "--no-cache", "--format", "json", kill_at="load-rank-0.json:1:worker"
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    warned = r.stderr.strip().splitlines()  # said on stderr too, where a terminal user sees it
    assert len(warned) == 1 and "rank-0.json: rank 0 not loaded" in warned[0] and "fewer --workers" in warned[0]
    got = _data(r)
    lost = [f for f in got.pop("findings") if f["code"] == "skipped_file"]
    assert [f["rank"] for f in lost] == [0] and "its worker was lost 2 times" in lost[0]["message"]
    clean = _data(run(env, "summary", job, "--workers", "2", "--no-cache", "--format", "json", "--ranks", "1-3"))
    clean.pop("findings")
    assert got == clean


# ------------------------------------------------------------------ Ray


@pytest.mark.ray
def test_ray_worker_lost(env, job):
    """On both ways a command sends files to Ray (``summary``: one task per rank; ``info``: the load's decoding):
    Ray runs a lost task again, holotrace once more; lost every time, the rank is a finding, the other ranks'
    answer equals a clean run's, and stdout holds only the output (Ray's own messages go to the log)."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install '.[ray]' runs these tests")
    ray = ("--executor", "ray", "--workers", "2", "--no-cache")
    clean = run(env, "summary", job, *ray, "--format", "json")
    assert clean.returncode == 0, clean.stderr

    once = run(env, "summary", job, *ray, "--format", "json", kill_at="load-rank-0.json:1:worker_once")
    assert (env.root / "killed-once").exists()  # a Ray worker was killed
    assert once.returncode == 0 and "Traceback" not in once.stderr, once.stderr
    assert _data(once) == _data(clean)  # stdout is the JSON document alone

    always = run(env, "summary", job, *ray, "--format", "json", kill_at="load-rank-0.json:1:worker")
    assert always.returncode == 0 and "Traceback" not in always.stderr, always.stderr
    got = _data(always)
    lost = [f for f in got.pop("findings") if f["code"] == "skipped_file"]
    assert [f["rank"] for f in lost] == [0] and "worker was lost 2 times" in lost[0]["message"], lost
    rest = _data(run(env, "summary", job, *ray, "--format", "json", "--ranks", "1-3"))
    rest.pop("findings")
    assert got == rest

    info = run(env, "info", job, *ray, "--json", kill_at="load-rank-0.json:1:worker")
    assert info.returncode == 0 and "Traceback" not in info.stderr, info.stderr
    facts = json.loads(info.stdout)
    assert facts["ranks"] == [1, 2, 3]
    assert [
        (os.path.basename(s["file"]), "worker was lost 2 times" in s["reason"]) for s in facts["skipped_files"]
    ] == [("rank-0.json", True)]


# ------------------------------------------------------------------ what a killed load leaves in the temporary folder


def test_private_folders_of_killed_processes_are_swept(env, job, monkeypatch):
    """A load killed mid-file (or a lost worker) leaves its spill in the temporary folder; the next load of this
    machine removes it, and leaves those of live processes alone."""
    import socket

    import holotrace
    from holotrace.ingest import store

    tmp = env.root / "tmp"
    tmp.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname().replace("-", "_") or "host"
    left = tmp / f"holotrace-{host}-{int(dead.stdout)}-spill-0123abcd-xyz"  # a killed process's spill
    live = tmp / f"holotrace-{host}-{os.getpid()}-spill-4567ef01-xyz"  # this process's: in use
    other = tmp / "holotrace-notes"  # not a name holotrace makes
    for d in (left, live, other):
        d.mkdir()
        (d / "events.ts_ns").write_bytes(b"\0" * 4096)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(store.tempfile, "tempdir", None)  # read TMPDIR again
    monkeypatch.setattr(store, "_swept", {})
    job_ = holotrace.load(job, cache=False, workers=1)
    assert job_.ranks == [0, 1, 2, 3]
    assert sorted(p.name for p in tmp.iterdir()) == sorted([live.name, other.name])
