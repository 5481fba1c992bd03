"""Kill-anywhere: SIGKILL a command (and its workers) at seeded points of load, ingest, cache write and report
write, then read what it left and run it again: no wrong answer, no crash, nothing lost.

Points are named places in the code (``holotrace.atomic.kill_point``: the n-th time a process of the run writes a
file's bytes, renames a file into place, finishes a rank folder, commits a cache entry, starts a rank's task)
and seeded random moments (a timer). The quick profile (a few points) runs by default; the thorough one
(``HOLOTRACE_KILL_POINTS=N``, N >= 200) draws N points from the seed ``HOLOTRACE_KILL_SEED`` (default 26) and
prints its figures.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import doc, kernel

N_THOROUGH = int(os.environ.get("HOLOTRACE_KILL_POINTS", "0"))
SEED = int(os.environ.get("HOLOTRACE_KILL_SEED", "26"))
OPS = ("load", "cache", "ingest", "report")
HOOKS = {  # the named points each operation passes, with how many times at most
    "load": [("write", 1), ("cache", 2)],
    "cache": [("cache", 4), ("write", 1)],
    "ingest": [("task-0", 1), ("task-2", 1), ("rank", 4), ("write", 6), ("rename", 6)],
    "report": [("write", 1), ("rename", 1)],
}


def points(n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        op = OPS[i % len(OPS)]
        if rng.random() < 0.5:
            name, most = rng.choice(HOOKS[op])
            out.append((op, f"{name}:{rng.randint(1, most)}", None))
        else:
            out.append((op, None, round(rng.uniform(0.3, 3.0), 2)))
    return out


QUICK = [
    ("load", "cache:1", None),
    ("ingest", "rank:2", None),
    ("ingest", "rename:3", None),
    ("report", "rename:1", None),
    ("cache", None, 1.2),
]
CASES = points(N_THOROUGH, SEED) if N_THOROUGH else QUICK


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("killjob")
    for r in range(4):
        evs = [kernel(f"k{i % 4}", ts=10 * i + r, dur=3 + (i + r) % 5) for i in range(3000)]
        (d / f"rank-{r}.json").write_text(json.dumps(doc(evs, rank=r, world=4)))
    return d


def _env(root: Path, kill: str | None = None) -> dict:
    (root / "tmp").mkdir(exist_ok=True)  # the temporary folder: checked for what a killed run left
    e = dict(os.environ, HOLOTRACE_CACHE_DIR=str(root / "cache"), TMPDIR=str(root / "tmp"))
    e.pop("HOLOTRACE_KILL_AT", None)
    if kill:
        e["HOLOTRACE_KILL_AT"] = kill
    return e


def cli(root: Path, *args, kill=None, after=None):
    cmd = [sys.executable, "-m", "holotrace.cli", *map(str, args)]
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(root, kill),
        cwd=root,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=after) if after else p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the command and its workers
        out, err = p.communicate()
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _data(r) -> dict:
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return {k: v for k, v in json.loads(r.stdout).items() if k != "meta"}


@pytest.fixture(scope="module")
def clean(job, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("clean")
    assert cli(root, "ingest", job, "--output", root / "ing", "--quiet").returncode == 0
    report = cli(root, "report", job, "-o", root / "r.html", "--quiet")
    assert report.returncode == 0, report.stderr
    return {
        "summary": _data(cli(root, "summary", job, "--format", "json", "--no-cache", "--quiet")),
        "ingested": _data(cli(root, "summary", root / "ing", "--format", "json", "--quiet")),
        "report_size": (root / "r.html").stat().st_size,
    }


TALLY = {"killed": 0, "finished": 0, "cases": 0, "ok": 0}


@pytest.mark.parametrize("op,kill,after", CASES, ids=[f"{i}-{c[0]}-{c[1] or c[2]}" for i, c in enumerate(CASES)])
def test_kill_then_rerun(tmp_path, job, clean, op, kill, after):
    root = tmp_path
    TALLY["cases"] += 1
    if op == "cache":  # a cache already there, then a load whose cache writes are killed (entries replaced)
        assert cli(root, "info", job, "--quiet").returncode == 0
        for f in job.iterdir():  # a new change time: every entry is stale and rewritten by the killed load
            os.utime(f)
    if op in ("load", "cache"):
        args = ["summary", job, "--format", "json", "--quiet"]
    elif op == "ingest":
        args = ["ingest", job, "--output", root / "ing", "--quiet", "--workers", "2"]
    else:
        (root / "r.html").write_text("<html>the report of an earlier run</html>")
        args = ["report", job, "-o", root / "r.html", "--quiet"]
    r = cli(root, *args, kill=kill, after=after)
    TALLY["killed" if r.returncode == -signal.SIGKILL else "finished"] += 1
    if r.returncode != -signal.SIGKILL:
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    # what the kill left is read without a crash, and never gives a wrong answer
    if op in ("load", "cache"):
        if r.returncode == 0:
            assert _data(r) == clean["summary"]
        again = cli(root, *args)
        assert _data(again) == clean["summary"]
        assert _data(cli(root, *args)) == clean["summary"]  # from the cache
        assert not [
            p for p in (root / "cache").iterdir() if p.name.startswith(".")
        ]  # a killed run's work folders swept
    elif op == "ingest":
        if (root / "ing").exists() and any((root / "ing").glob("ingest-*.json")):
            partial = cli(root, "summary", root / "ing", "--format", "json", "--quiet")
            if partial.returncode == 2:  # no whole rank yet: one line that says how to resume
                assert "no whole rank" in partial.stderr and "holotrace ingest" in partial.stderr, partial.stderr
            else:
                got = _data(partial)
                if got != clean["ingested"]:
                    codes = {f["code"] for f in got["findings"]}
                    assert codes & {"incomplete_ingest", "missing_ranks"}, got["findings"]
        again = cli(root, *args)
        assert again.returncode == 0, again.stderr
        assert _data(cli(root, "summary", root / "ing", "--format", "json", "--quiet")) == clean["ingested"]
        assert not [p for p in (root / "ing").iterdir() if p.name.startswith(".tmp-")]
    else:
        text = (root / "r.html").read_text()
        assert text == "<html>the report of an earlier run</html>" or len(text.encode()) == clean["report_size"]
        again = cli(root, *args)
        assert again.returncode == 0 and (root / "r.html").stat().st_size == clean["report_size"]
        assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    # the killed run's private folders (spills of files being decoded) went with the re-run
    assert not [p.name for p in (root / "tmp").iterdir() if p.name.startswith("holotrace-")]
    TALLY["ok"] += 1


def test_kill_figures():
    """Prints the profile's figures (run last in the file)."""
    print(
        f"\nkill-anywhere: {TALLY['cases']} points, {TALLY['killed']} killed, {TALLY['finished']} finished before their point, "
        f"{TALLY['ok']} re-run with the clean answer and nothing left behind, {TALLY['cases'] - TALLY['ok']} failed (seed {SEED})"
    )
