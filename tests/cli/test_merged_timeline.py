"""``holotrace timeline``: every rank merged into one Chrome-trace file that loads back with the same events."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import holotrace
from holotrace.render.merged_trace import CPU_TID_SHIFT

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
JOB = DATA / "hta_trace_filter_2rank"


def run(*args):
    return subprocess.run([sys.executable, "-m", "holotrace.cli", "timeline", *args], capture_output=True, text=True)


def _events(job, r, *, gpu_only=False):
    """(name, cat, ts on the common clock, dur, stream, correlation) of every duration event of rank ``r``."""
    t = job.rank(r)
    c = t.columns
    keep = c["stream"] >= 0 if gpu_only else np.ones(len(c["ts_ns"]), dtype=bool)
    names = np.array(job.strings.decode(c["name"][keep].astype(np.int64)), dtype=object)
    cats = np.array(job.strings.decode(c["cat"][keep].astype(np.int64)), dtype=object)
    rows = zip(
        names,
        cats,
        (c["ts_ns"][keep].astype(np.int64) + t.clock_offset_ns).tolist(),
        c["dur_ns"][keep].astype(np.int64).tolist(),
        c["stream"][keep].astype(np.int64).tolist(),
        c["correlation"][keep].astype(np.int64).tolist(),
    )
    return sorted(map(tuple, rows), key=lambda x: (x[2], x[0], x[3], x[4]))


def _merged_rank(merged, pid, *, gpu_only=False):
    t = merged.rank(merged.ranks[0])
    c = t.columns
    sel = c["pid"] == pid
    names = np.array(merged.strings.decode(c["name"][sel].astype(np.int64)), dtype=object)
    cats = np.array(merged.strings.decode(c["cat"][sel].astype(np.int64)), dtype=object)
    rows = zip(
        names,
        cats,
        (c["ts_ns"][sel].astype(np.int64) + t.clock_offset_ns).tolist(),
        c["dur_ns"][sel].astype(np.int64).tolist(),
        c["stream"][sel].astype(np.int64).tolist(),
        c["correlation"][sel].astype(np.int64).tolist(),
    )
    return sorted(map(tuple, rows), key=lambda x: (x[2], x[0], x[3], x[4]))


def _check_chrome_trace(doc: dict) -> None:
    """The Chrome trace event format's rules for the phases written here."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "i", "M") and isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["args"], dict)
        elif e["ph"] == "i":
            assert e["s"] in ("g", "p", "t") and e["ts"] >= 0
        else:
            assert e["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")


def test_merged_job_loads_back_with_the_same_events_per_rank(tmp_path):
    out = tmp_path / "merged.json.gz"
    r = run(str(JOB), "-o", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(gzip.decompress(out.read_bytes()))
    _check_chrome_trace(doc)
    job = holotrace.load(str(JOB))
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    finds = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert [e["args"]["code"] for e in finds] == [f.as_dict()["code"] for f in job.findings]
    merged = holotrace.load(str(out))
    assert len(merged.ranks) == 1
    for rank in job.ranks:
        want = _events(job, rank)
        got = _merged_rank(merged, rank)
        assert len(got) == len(want) == job.rank(rank).n_events
        assert got == want  # names, categories, exact ns on the common clock, durations, streams, correlations
    # GPU streams are threads of their rank's process, apart from every CPU thread
    gpu = [e for e in doc["traceEvents"] if e["ph"] == "X" and "stream" in e["args"]]
    assert gpu and all(e["tid"] == e["args"]["stream"] for e in gpu)
    assert all(e["tid"] < CPU_TID_SHIFT or "stream" not in e["args"] for e in gpu)


def test_gpu_only_steps_and_ranks(tmp_path):
    out = tmp_path / "gpu.json"
    r = run(str(JOB), "-o", str(out), "--gpu-only", "--ranks", "1", "--steps", "552", "--no-findings", "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    _check_chrome_trace(doc)
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in xs} == {1} and all("stream" in e["args"] for e in xs)
    assert not [e for e in doc["traceEvents"] if e["ph"] == "i"]
    from holotrace.model.filter import TraceFilter, filter_job

    sub = filter_job(holotrace.load(str(JOB)), TraceFilter(ranks=[1], steps=[552]))
    want = _events(sub, 1, gpu_only=True)
    assert len(xs) == len(want) > 0
    assert _merged_rank(holotrace.load(str(out)), 1) == want


def test_bad_output(tmp_path):
    r = run(str(JOB), "-o", str(tmp_path), "--quiet")
    assert r.returncode == 2 and "is a folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1
