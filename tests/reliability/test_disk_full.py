"""A write that fails (the disk full, the file-size limit: simulated with RLIMIT_FSIZE in a subprocess) is one
typed line naming the path and the room needed; no half-written output, cache entry or rank folder survives;
the next run works and gives the clean answer."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest
from _reliability import doc, kernel, one_line_error


def _job(env, n=4000):
    for r in range(2):
        env.write(
            f"job/rank-{r}.json",
            doc([kernel(f"k{i % 5}", ts=10 * i + r, dur=3 + r) for i in range(n)], rank=r, world=2),
        )
    return str(env.work / "job")


def run_limited(env, limit: int, *args):
    def limit_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    e = dict(os.environ, HOLOTRACE_CACHE_DIR=str(env.cache))
    return subprocess.run(
        [sys.executable, "-m", "holotrace.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=e,
        cwd=env.work,
        preexec_fn=limit_files,
    )


def _data(text):
    return {k: v for k, v in json.loads(text).items() if k != "meta"}


def _left(folder):
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith(".tmp-")) if folder.exists() else []


@pytest.mark.parametrize("cmd,out", [(("report",), "r.html"), (("timeline",), "t.json")])
def test_output_too_big_is_a_typed_error_and_nothing_half_written(env, cmd, out):
    job = _job(env)
    assert env.cli("info", job).returncode == 0  # the cache is warm: only the output write hits the limit
    r = run_limited(env, 20_000, *cmd, job, "-o", out)
    line = one_line_error(r, out, "larger than this process may write", "needs")
    assert not (env.work / out).exists() and not _left(env.work), line
    ok = env.cli(*cmd, job, "-o", out)
    assert ok.returncode == 0 and (env.work / out).stat().st_size > 20_000


def test_table_outputs_too_big(env):
    job = _job(env)
    assert env.cli("info", job).returncode == 0
    r = run_limited(env, 200, "launches", job, "--output", "tables", "--output-format", "json")
    one_line_error(r, "tables", "larger than this process may write")
    assert not _left(env.work / "tables")


def test_cache_write_fails_then_next_run_works(env):
    job = _job(env)
    clean = json.loads(env.cli("summary", job, "--no-cache", "--format", "json").stdout)
    r = run_limited(env, 50_000, "summary", job, "--format", "json")
    assert r.returncode in (0, 2), r.stderr
    if r.returncode == 2:  # no room for the decoded columns anywhere: one line naming where
        one_line_error(r, "cannot write")
    else:  # the answer came without a cache entry
        assert _data(r.stdout) == _data(json.dumps(clean))
    assert (
        not _left(env.cache) and not [p for p in env.cache.iterdir() if p.name.startswith(".")]
        if env.cache.exists()
        else True
    )
    for _ in range(2):  # the next runs write the cache and read it back
        ok = env.cli("summary", job, "--format", "json")
        assert ok.returncode == 0 and _data(ok.stdout) == _data(json.dumps(clean))
    assert len([p for p in env.cache.iterdir() if p.is_dir()]) == 2


def test_ingest_out_of_room(env):
    job = _job(env)
    clean = env.work / "clean"
    assert env.cli("ingest", job, "--output", str(clean)).returncode == 0
    r = run_limited(env, 30_000, "ingest", job, "--output", "ing", "--workers", "1")
    line = one_line_error(r)
    # the file the limit stopped: the trace being decoded (its columns' files), or the ingest folder's own file
    assert "rank-0.json" in line or "ing/rank-0" in line, line
    assert "cannot write the decoded columns" in line or "larger than this process may write" in line, line
    assert not _left(env.work / "ing") and not list((env.work / "ing").glob("rank-*"))
    ok = env.cli("ingest", job, "--output", "ing")
    assert ok.returncode == 0, ok.stderr
    a = json.loads(env.cli("summary", str(clean), "--format", "json").stdout)
    b = json.loads(env.cli("summary", "ing", "--format", "json").stdout)
    assert {k: v for k, v in a.items() if k != "meta"} == {k: v for k, v in b.items() if k != "meta"}
