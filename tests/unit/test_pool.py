"""One process pool for per-file work, with worker counts clamped to what files, cores and memory can use."""

from __future__ import annotations

import subprocess
import sys

import pytest

import holotrace
from holotrace.exec import pool
from holotrace.exec.progress import DecodeBar
from tracebuilder import TraceBuilder


def _job(tmp_path, ranks=3):
    for r in range(ranks):
        tb = TraceBuilder(rank=r, world_size=ranks)
        tb.annotation("ProfilerStep#1", 0, 100)
        tb.launch_kernel(f"k{r}", 10, 5, 20, 30)
        tb.write(tmp_path)
    return tmp_path


def test_asking_for_huge_worker_counts_starts_few_processes(tmp_path, monkeypatch):
    import concurrent.futures

    started = []
    real = concurrent.futures.ProcessPoolExecutor

    def recording(*a, max_workers=None, **k):
        started.append(max_workers)
        return real(*a, max_workers=max_workers, **k)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", recording)  # (the pool imports it when it starts)
    monkeypatch.setattr(pool, "cpu_count", lambda: 2)
    job = holotrace.load(_job(tmp_path), cache=False, workers=100_000)
    assert job.ranks == [0, 1, 2]
    assert started == [1]  # three files, two cores: this process and one pool process, not 100,000
    assert pool.clamp_workers(100_000, [10] * 3) == 2
    assert pool.clamp_workers(100_000, [10]) == 1
    assert pool.clamp_workers(0, [10] * 3) == 1


def test_memory_bounds_the_process_count(monkeypatch):
    monkeypatch.setattr(pool, "cpu_count", lambda: 64)
    monkeypatch.setattr(pool, "available_memory_bytes", lambda: 512 * 2**20)
    # 2 GB files: each process needs ~141 MB (96 MB + 2% of the file), 80% of 512 MB holds three
    assert pool.clamp_workers(None, [2 * 10**9] * 8) == 3
    assert pool.clamp_workers(None, [10**6] * 8) == 4  # the interpreter and the pieces in flight: ~100 MB each
    monkeypatch.setattr(pool, "available_memory_bytes", lambda: 4 * 2**30)
    assert pool.clamp_workers(None, [10**6] * 8) == 8


def test_plan_spreads_cores_over_processes_then_threads(monkeypatch):
    monkeypatch.setattr(pool, "cpu_count", lambda: 8)
    monkeypatch.setattr(pool, "available_memory_bytes", lambda: None)
    big, small = 10**9, 10**6
    assert pool.plan(None, [big]) == (1, [8])  # one big file: every core scans it
    assert pool.plan(None, [big, big]) == (2, [4, 4])
    assert pool.plan(None, [big] * 8) == (8, [1] * 8)
    assert pool.plan(2, [big]) == (1, [2])
    assert pool.plan(None, [small]) == (1, [1])  # small files are one piece
    assert pool.plan(100_000, [big]) == (1, [8])


def test_progress_bar_counts_file_bytes(capsys):
    bar = DecodeBar([100, 50], 3, True)
    assert bar.shown
    bar.file_done(False)  # a cache hit: no bytes to decode
    bar.bytes_read(70)
    bar.bytes_read(500)  # a gzip file's uncompressed bytes are capped at its size
    assert bar._bar.n == 100
    bar.file_done(True)
    bar.file_done(True)  # decoded elsewhere: counted when done
    assert bar._bar.n == 150 and bar.files == 3
    bar.close()
    assert not DecodeBar([100], 1, False).shown


def test_quiet_flag(tmp_path):
    f = _job(tmp_path, ranks=1)
    r = subprocess.run(
        [sys.executable, "-m", "holotrace.cli", "info", str(f), "--no-cache", "--quiet"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""


def test_the_caller_works_too_and_results_keep_their_order(monkeypatch):
    import os as _os

    monkeypatch.setattr(pool, "cpu_count", lambda: 3)
    seen = []
    out = pool.run_map(_pid_and_square, list(range(12)), 3, lambda i, r: seen.append(i))
    assert [r for _, r in out] == [i * i for i in range(12)]
    assert sorted(seen) == list(range(12))  # every result reported once
    pids = {p for p, _ in out}
    assert _os.getpid() in pids and len(pids) <= 3  # this process took items, beside at most two others


def test_a_failing_item_in_a_pool_process_reaches_the_caller(monkeypatch):
    monkeypatch.setattr(pool, "cpu_count", lambda: 2)
    with pytest.raises(ZeroDivisionError):
        pool.run_map(_inverse, [1, 2, 0, 4, 5, 6], 2)


def _pid_and_square(x):
    import os as _os
    import time as _time

    _time.sleep(0.01)
    return _os.getpid(), x * x


def _inverse(x):
    return 1 / x


def test_after_a_failure_no_further_item_is_started(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "cpu_count", lambda: 2)
    items = [(str(tmp_path), i) for i in range(40)]
    with pytest.raises(ZeroDivisionError):
        pool.run_map(_mark_or_fail, items, 2)
    assert len(list(tmp_path.iterdir())) < 10  # the rest of the 40 items were never run


def _mark_or_fail(item):
    import time as _time

    folder, i = item
    if i == 1:
        raise ZeroDivisionError("item 1")
    _time.sleep(0.05)
    open(f"{folder}/{i}", "w").close()
    return i


def test_one_thread_maps_on_the_calling_thread():
    import threading

    def where(x):
        return threading.get_ident()

    with pool.one_thread():
        assert set(pool.thread_map(where, range(8)).values()) == {threading.get_ident()}
        with pool.one_thread():
            pass
        assert set(pool.thread_map(where, range(8)).values()) == {threading.get_ident()}  # (still, after a nested one)
    assert list(pool.thread_map(lambda x: x * 2, [1, 2, 3]).values()) == [2, 4, 6]


def test_last_out_runs_once_on_the_thread_that_arrives_last():
    import threading

    ran = []
    last = pool.LastOut(3, lambda: ran.append(threading.current_thread().name))
    last.arrive()
    assert ran == []
    t = threading.Thread(target=last.arrive, name="second")
    t.start()
    t.join()
    assert ran == []
    t = threading.Thread(target=last.arrive, name="third")
    t.start()
    t.join()
    assert ran == ["third"]
