"""Each bad input of the hostile-user review, through the CLI and the API: exit code, one typed line
(file, problem, fix), the findings, inputs unchanged, nothing written outside the cache."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from _reliability import doc, kernel, one_line_error

import holotrace
from holotrace import errors
from holotrace.exec.pool import cpu_count, plan
from holotrace.render.tables import format_table, sanitize

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
SMALL = DATA / "hta_cpu_only"  # one real rank, 2.4 kB gzip


def _codes(job) -> dict:
    return {f.code.value: f for f in job.findings}


# ---------------------------------------------------------------- 1. cache clear and user data


def test_cache_clear_refuses_a_folder_that_is_not_a_cache(env):
    shutil.copytree(SMALL, env.work / "job")
    (env.work / "notes").mkdir()
    (env.work / "notes" / "todo.txt").write_text("keep me")
    env.freeze()
    r = env.cli("cache", "clear", "--cache-dir", str(env.work))
    one_line_error(r, str(env.work), "not a holotrace cache", "nothing was removed")
    env.check_untouched()
    # nor may a load write its cache into such a folder
    r = env.cli("info", str(env.work / "job"), "--cache-dir", str(env.work))
    one_line_error(r, str(env.work), "not a holotrace cache")
    env.check_untouched()


def test_cache_dir_empty_path_is_an_error(env):
    shutil.copytree(SMALL, env.work / "job")
    env.freeze()
    for args in (("cache", "clear", "--cache-dir", ""), ("info", "job", "--cache-dir", "")):
        one_line_error(env.cli(*args), "empty path", "--cache-dir")
    env.check_untouched()
    with pytest.raises(errors.HolotraceError, match="empty path"):
        holotrace.load(env.work / "job", cache_dir="")


def test_cache_clear_removes_only_its_entries(env):
    shutil.copytree(SMALL, env.work / "job")
    env.freeze()
    assert env.cli("info", str(env.work / "job")).returncode == 0
    entries = [p for p in env.cache.iterdir()]
    assert len(entries) == 1 and (entries[0] / "info.json").exists()
    info = json.loads((entries[0] / "info.json").read_text())
    assert info["holotrace_cache"] >= 2 and set(info["fingerprint"]) == {
        "size",
        "mtime_ns",
        "ctime_ns",
        "ino",
        "dev",
        "hash",
    }
    r = env.cli("cache", "clear")
    assert r.returncode == 0 and "removed 1 cached trace(s)" in r.stdout
    assert list(env.cache.iterdir()) == []
    env.check_untouched()


# ---------------------------------------------------------------- 2. wrong times with no finding


TIME_CASES = {
    # name: (the bad event, finding code, the value as the example shows it)
    "dur_2_62": (kernel("bad", dur=2**62), "bad_time", "dur=4611686018427387904"),
    "ts_1e300": (kernel("bad", ts=1e300), "bad_time", "ts=1e+300"),
    "ts_wraps_in_ns": (kernel("bad", ts=9.3e15), "bad_time", "ts=9300000000000000.0"),
    "ts_2_70": (kernel("bad", ts=2**70), "bad_time", "ts=1180591620717411303424"),
    "dur_missing": ({k: v for k, v in kernel("bad").items() if k != "dur"}, "missing_time", "dur=None"),
    "dur_null": (kernel("bad", dur=None), "missing_time", "dur=None"),
    "dur_text": (kernel("bad", dur="5"), "bad_time", 'dur="5"'),
}


@pytest.mark.parametrize("case", sorted(TIME_CASES))
def test_unusable_time_is_an_error_finding_and_the_event_left_out(env, case):
    bad, code, shown = TIME_CASES[case]
    f = env.write("t.json", doc([kernel("good", ts=10, dur=5), bad, kernel("good", ts=30, dur=5)]))
    env.freeze()
    job = holotrace.load(f, cache=False)
    t = job.rank(0)
    assert t.n_events == 2 and job.strings.decode(t.columns["name"]).tolist() == ["good", "good"]
    assert t.columns["ts_ns"].tolist() == [10_000, 30_000] and t.columns["dur_ns"].tolist() == [5_000, 5_000]
    fnd = _codes(job)[code]
    assert fnd.severity == "error" and fnd.count == 1 and fnd.file == str(f)
    assert fnd.example.startswith("event #1: name='bad'") and shown in fnd.example, fnd.example
    r = env.cli("doctor", str(f), "--no-cache")
    assert r.returncode == 1 and code in r.stdout and "event #1" in r.stdout and r.stderr == ""
    one_line_error(env.cli("doctor", "--strict", str(f), "--no-cache"), str(f), "left out", "strict")
    r = env.cli("summary", str(f), "--no-cache")
    assert r.returncode == 0 and "Warning" not in r.stderr and r.stderr == ""
    env.check_untouched()


# ---------------------------------------------------------------- 3. a damaged rank is no INFO note


def _two_ranks(env, damage) -> Path:
    job = env.work / "job"
    for r in (0, 1):
        env.write(f"job/rank-{r}.json", json.dumps(doc([kernel(ts=10 + r), kernel(ts=30 + r)], rank=r, world=2)))
    p = job / "rank-1.json"
    p.write_bytes(damage(p.read_bytes()))
    return job


def test_bom_is_accepted(env):
    f = env.write("t.json", b"\xef\xbb\xbf" + json.dumps(doc([kernel()])).encode())
    job = _two_ranks(env, lambda b: b"\xef\xbb\xbf" + b)
    env.freeze()
    assert holotrace.load(f, cache=False).rank(0).n_events == 1
    j = holotrace.load(job, cache=False)
    assert j.ranks == [0, 1] and j.rank(1).n_events == 2 and not [x for x in j.findings if x.severity == "error"]
    env.check_untouched()


@pytest.mark.parametrize("cut", [200, 60])
def test_truncated_rank_in_a_folder_is_an_error_finding(env, cut):
    job = _two_ranks(env, lambda b: b[:cut])
    env.freeze()
    j = holotrace.load(job, cache=False)
    assert j.ranks == [0] and j.rank(0).n_events == 2
    sk = _codes(j)["skipped_file"]
    assert sk.severity == "error" and sk.file == str(job / "rank-1.json") and sk.rank in (None, 1)
    r = env.cli("doctor", str(job), "--no-cache")
    assert r.returncode == 1 and "skipped_file" in r.stdout and "rank-1.json" in r.stdout and "FAIL" in r.stdout
    one_line_error(env.cli("doctor", "--strict", str(job), "--no-cache"), "rank-1.json")
    env.check_untouched()


# ---------------------------------------------------------------- 4. non-finite and huge numbers


def test_nan_and_infinity_literals_are_findings(env):
    text = json.dumps(doc([kernel("good"), kernel("nan", ts=11), kernel("inf", ts=12, dur=777)]))
    text = text.replace('"ts": 11', '"ts": NaN').replace('"dur": 777', '"dur": -Infinity')
    f = env.write("t.json", text)
    env.freeze()
    job = holotrace.load(f, cache=False)
    c = _codes(job)
    assert job.rank(0).n_events == 1
    assert (
        c["missing_time"].count == 1
        and "event #1: name='nan'" in c["missing_time"].example
        and "ts=NaN" in c["missing_time"].example
    )
    assert (
        c["bad_time"].count == 1
        and "event #2: name='inf'" in c["bad_time"].example
        and "dur=-Infinity" in c["bad_time"].example
    )
    assert c["non_standard_json"].severity == "warning"
    r = env.cli("doctor", str(f), "--no-cache")
    assert r.returncode == 1 and r.stderr == ""
    env.check_untouched()


def test_one_nan_rank_does_not_take_down_the_folder(env):
    job = _two_ranks(env, lambda b: b.replace(b'"ts": 11', b'"ts": NaN'))
    j = holotrace.load(job, cache=False)
    assert j.ranks == [0, 1] and j.rank(0).n_events == 2 and j.rank(1).n_events == 1
    assert _codes(j)["missing_time"].rank == 1


def test_integers_over_64_bits_are_findings(env):
    big = 2**70
    f = env.write(
        "t.json", doc([kernel("good"), kernel("pid", pid=big), kernel("corr", args={"correlation": big, "stream": 7})])
    )
    job = holotrace.load(f, cache=False)
    c = _codes(job)["bad_number"]
    assert job.rank(0).n_events == 1 and c.count == 2 and c.severity == "error"
    assert c.example == f"event #1: name='pid' pid={big}"


def test_huge_rank_is_ignored_with_a_finding(env):
    f = env.write("t.json", doc([kernel()], rank=2**70))
    job = holotrace.load(f, cache=False)
    assert job.ranks == [0] and "bad_rank_info" in _codes(job)
    assert "distributedInfo.rank is 1180591620717411303424" in _codes(job)["bad_rank_info"].message


def test_bare_array_with_one_nan_is_fast_and_exact(env):
    events = [kernel(ts=10 * i) for i in range(50_000)]
    text = json.dumps(events).replace('"ts": 250000,', '"ts": NaN,', 1)
    f = env.write("old.json", text)
    t0 = time.perf_counter()
    job = holotrace.load(f, cache=False)
    assert time.perf_counter() - t0 < 10
    assert job.rank(0).n_events == 49_999 and job.rank(0).n_trace_events == 50_000
    assert _codes(job)["missing_time"].example.startswith("event #25000:")


# ---------------------------------------------------------------- 5. denial of service from one field


@pytest.mark.parametrize("world", [10**12, 10**8, 2**24 - 1])
def test_world_size_allocates_nothing_proportional(env, world):
    import resource

    f = env.write("t.json", doc([kernel()], world=world))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    job = holotrace.load(f, cache=False)
    assert time.perf_counter() - t0 < 5
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # kB: < 200 MB more
    c = _codes(job)
    if world >= 2**24:
        assert "bad_rank_info" in c and "missing_ranks" not in c
    else:
        assert c["missing_ranks"].count == world - 1 and f"1-{world - 1}" in c["missing_ranks"].message


def test_workers_are_clamped(env):
    procs, threads = plan(100_000, [10**9] * 3)
    assert procs <= min(3, cpu_count()) and all(t <= cpu_count() for t in threads)
    job_dir = _two_ranks(env, lambda b: b)
    assert holotrace.load(job_dir, cache=False, workers=100_000).ranks == [0, 1]
    r = env.cli("info", str(job_dir), "--no-cache", "--workers", "100000")
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- 7. typed one-line errors


TYPED = {
    "list_of_numbers": (b'{"traceEvents": [1, 2, 3]}', "not an event object"),
    "nested_too_deep_header": (b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b', "traceEvents": []}', "JSON"),
    "zeros": (b"\x00" * 100, "not JSON"),
    "damaged_gzip_start": (b"\x1f\x8b\x08\x00garbage-garbage", "gzip"),
}


@pytest.mark.parametrize("case", sorted(TYPED))
def test_typed_one_line_error(env, case):
    content, words = TYPED[case]
    f = env.write("t.json", content)
    env.freeze()
    with pytest.raises(errors.HolotraceError) as ei:
        holotrace.load(f, cache=False)
    assert "\n" not in str(ei.value) and str(f) in str(ei.value) and words in str(ei.value)
    one_line_error(env.cli("info", str(f), "--no-cache"), str(f), words)
    env.check_untouched()


def test_non_object_in_a_bare_array_keeps_the_events_before(env):
    f = env.write("t.json", "[" + json.dumps(kernel()) + ", 5, " + json.dumps(kernel(ts=20)) + "]")
    job = holotrace.load(f, cache=False)
    c = _codes(job)["truncated_json"]
    assert job.rank(0).n_events == 1 and "after 1 events" in c.message and "not an event object" in c.message


def test_non_utf8_in_trailing_metadata(env):
    f = env.write("t.json", json.dumps(doc([kernel(), kernel(ts=20)]))[:-1].encode() + b', "note": "\xff"}')
    job = holotrace.load(f, cache=False)
    c = _codes(job)["truncated_json"]
    assert job.rank(0).n_events == 2 and "every one of the 2 events was read" in c.message


def test_bad_regex_and_output_file(env):
    shutil.copytree(DATA / "hta_critical_path_cuda_event_sync", env.work / "job")
    (env.work / "out.csv").write_text("mine")
    env.freeze()
    one_line_error(
        env.cli("sequences", "job", "--no-cache", "--match", "regex", "--op", "("), "not a valid regular expression"
    )
    one_line_error(env.cli("summary", "job", "--no-cache", "--output", "out.csv"), "out.csv", "is a file, not a folder")
    env.check_untouched()


def test_fifo_and_devices_are_refused(env):
    fifo = env.work / "fifo"
    os.mkfifo(fifo)
    env.freeze()
    for p in (fifo, Path("/dev/null")):
        t0 = time.perf_counter()
        with pytest.raises(errors.TraceReadError, match="not a regular file"):
            holotrace.load(p, cache=False)
        with pytest.raises(errors.TraceReadError, match="not a regular file"):
            holotrace.load([p], cache=False)
        one_line_error(env.cli("info", str(p), "--no-cache", timeout=30), str(p), "not a regular file")
        assert time.perf_counter() - t0 < 30
    env.check_untouched()


# ---------------------------------------------------------------- 8. partial data


def test_gzip_with_trailing_garbage_loads(env):
    f = env.write("t.json.gz", gzip.compress(json.dumps(doc([kernel(), kernel(ts=20)])).encode()) + b"garbage!!" * 10)
    job = holotrace.load(f, cache=False)
    c = _codes(job)
    assert job.rank(0).n_events == 2 and c["trailing_data"].severity == "warning"
    assert not [x for x in job.findings if x.severity == "error"]


def test_cut_inside_a_last_event_with_nested_args_keeps_the_rest(env):
    nested = {"a": [{"b": {"c": [1, 2, {"d": "x"}]}} for _ in range(50)]}
    evs = [kernel(ts=i, args={"stream": 7, "correlation": i, "deep": nested}) for i in range(1345)]
    text = json.dumps(doc(evs)).encode()
    cut = text.rindex(b'"deep"') + 300
    f = env.write("t.json", text[:cut])
    job = holotrace.load(f, cache=False)
    assert job.rank(0).n_events == 1344
    assert "after 1344 events" in _codes(job)["truncated_json"].message


def test_rank_cut_inside_its_first_event_leaves_the_other(env):
    job = _two_ranks(env, lambda b: b[: b.index(b'"traceEvents"') + 40])
    j = holotrace.load(job, cache=False)
    assert j.ranks == [0] and j.rank(0).n_events == 2
    sk = _codes(j)["skipped_file"]
    assert sk.severity == "error" and sk.rank == 1 and "rank-1.json" in sk.file and "ends inside an event" in sk.message


# ---------------------------------------------------------------- 9. terminal injection


def test_control_characters_are_escaped_in_tables(env):
    import pandas as pd

    evil = "k\x1b[31mRED\x1b]0;title\x07\rX\u202e"
    assert sanitize(evil) == "k\\x1b[31mRED\\x1b]0;title\\x07\\x0dX\\u202e"
    text = format_table(pd.DataFrame({"name": [evil], "n": [1]}))
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\\x1b[31mRED" in text
    f = env.write(
        "t.json",
        doc(
            [
                kernel(evil, args={"stream": 7, "correlation": 5}),
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": 8,
                    "dur": 1,
                    "args": {"correlation": 5},
                },
            ]
        ),
    )
    for cmd in ("summary", "launches"):
        r = env.cli(cmd, str(f), "--no-cache")
        assert r.returncode in (0, 1), r.stderr
        assert not any(c in r.stdout for c in "\x1b\r\x07\u202e"), (cmd, r.stdout)
