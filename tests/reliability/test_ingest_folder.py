"""An ingest folder is read by every command as its trace folder is; a killed ingest leaves a folder that says
which ranks are missing and the exact command that resumes; that command does only what is missing; two
overlapping ingests into one folder give one whole, consistent folder."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import one_line_error

from corpus import DATA, REPO

BUNDLED = DATA / "traces" / "hta_trace_filter_2rank"


@pytest.fixture(scope="module")
def job4(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job4")
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "generate.py"),
            "--out",
            str(out),
            "--ranks",
            "4",
            "--target-mb",
            "0.15",
            "--steps",
            "2",
            "--straggler-rank",
            "2",
            "--jobs",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return out


def cli(env, *args, kill_at=None, timeout=300):
    e = dict(os.environ, HOLOTRACE_CACHE_DIR=str(env.cache))
    if kill_at:
        e["HOLOTRACE_KILL_AT"] = kill_at
    return subprocess.run(
        [sys.executable, "-m", "holotrace.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        cwd=env.work,
        start_new_session=True,
    )


def data(r) -> dict:
    assert r.returncode in (0, 1), r.stderr
    return {k: v for k, v in json.loads(r.stdout).items() if k != "meta"}


COMMANDS = [
    ("summary",),
    ("launches",),
    ("stragglers",),
    ("memory",),
    ("counters",),
    ("annotations",),
    ("advise",),
    ("critical-path",),
    ("sequences", "--op", "aten::mm", "--min-len", "1"),
]


@pytest.mark.parametrize("which", ["bundled", "generated"])
def test_every_command_reads_an_ingest_folder(env, job4, which):
    job = BUNDLED if which == "bundled" else job4
    out = env.work / "ing"
    r = cli(env, "ingest", str(job), "--output", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    for cmd in COMMANDS:
        a = cli(env, cmd[0], str(job), *cmd[1:], "--format", "json", "--quiet")
        b = cli(env, cmd[0], str(out), *cmd[1:], "--format", "json", "--quiet")
        da, db = data(a), data(b)
        assert da == db, cmd
    for cmd in ("info", "doctor"):  # text: the same lines but the first (the path)
        a, b = cli(env, cmd, str(job), "--quiet"), cli(env, cmd, str(out), "--quiet")
        assert a.returncode == b.returncode and a.stdout.splitlines()[1:] == b.stdout.splitlines()[1:], cmd
    assert cli(env, "report", str(out), "-o", "r.html", "--quiet").returncode == 0
    assert cli(env, "timeline", str(out), "-o", "t.html", "--quiet").returncode == 0
    # cupti reads every event's raw args, which an ingest folder does not keep: one line naming the trace folder
    one_line_error(cli(env, "cupti", str(out), "--quiet"), str(out), "raw args", f"ingested from, {job}")
    d = cli(env, "diff", str(job), str(out), "--format", "json", "--quiet")
    assert d.returncode == 0, d.stderr


def _finding(out_dir: Path, env) -> dict:
    r = cli(env, "summary", str(out_dir), "--format", "json", "--quiet")
    assert r.returncode in (0, 1), r.stderr
    return next(f for f in json.loads(r.stdout)["findings"] if f["code"] in ("incomplete_ingest", "missing_ranks"))


def test_killed_ingest_names_the_missing_ranks_and_resumes(env, job4):
    clean = env.work / "clean"
    assert cli(env, "ingest", str(job4), "--output", str(clean), "--quiet", "--workers", "1").returncode == 0
    out = env.work / "killed"
    r = cli(env, "ingest", str(job4), "--output", str(out), "--quiet", "--workers", "1", kill_at="rank:3")
    assert r.returncode == -signal.SIGKILL
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("rank-")) == ["rank-000000", "rank-000001"]
    f = _finding(out, env)
    assert f["code"] == "incomplete_ingest" and f["count"] == 2 and "2-3" in f["message"], f
    cmd = f["message"].split("resume with: ")[1].split("; cross-rank")[0]
    assert cmd == f"holotrace ingest {shlex.quote(str(job4))} --output {shlex.quote(str(out))} --ranks 2-3"
    for other in ("launches", "memory"):  # every command reads the partial folder, with the finding
        assert cli(env, other, str(out), "--quiet").returncode in (0, 1)
    again = cli(env, *shlex.split(cmd)[1:], "--quiet", "--workers", "1")
    assert again.returncode == 0, again.stderr
    assert "ingested 2 rank(s)" in " ".join(again.stdout.split())
    rerun = cli(env, "ingest", str(job4), "--output", str(out), "--quiet")
    said = " ".join(rerun.stdout.split())  # (the table wraps long lines where the temporary folder's name ends)
    assert "ingested 0 rank(s)" in said and "4 already there" in said, rerun.stdout
    a = cli(env, "summary", str(clean), "--format", "json", "--quiet")
    b = cli(env, "summary", str(out), "--format", "json", "--quiet")
    assert data(a)["findings"] == data(b)["findings"] and data(a) == data(b)
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


def test_overlapping_concurrent_ingests(env, job4):
    clean = env.work / "clean"
    assert cli(env, "ingest", str(job4), "--output", str(clean), "--quiet").returncode == 0
    out = env.work / "both"
    e = dict(os.environ, HOLOTRACE_CACHE_DIR=str(env.cache))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "holotrace.cli",
                "ingest",
                str(job4),
                "--output",
                str(out),
                "--ranks",
                rr,
                "--quiet",
                "--workers",
                "1",
            ],
            env=e,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rr in ("0-2", "1-3")
    ]
    for p in procs:
        o, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    a = cli(env, "summary", str(clean), "--format", "json", "--quiet")
    b = cli(env, "summary", str(out), "--format", "json", "--quiet")
    assert data(a) == data(b)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("ingest-")) == [
        f"rank-00000{r}" for r in range(4)
    ]


def test_a_left_over_temporary_rank_folder_is_never_read(env, job4):
    out = env.work / "ing"
    assert cli(env, "ingest", str(job4), "--output", str(out), "--ranks", "0-2", "--quiet").returncode == 0
    shutil.copytree(out / "rank-000001", out / ".tmp-rank-000003-1-abcd")  # a whole temporary folder a kill left
    f = _finding(out, env)
    assert f["code"] == "missing_ranks" and "3" in f["message"]
