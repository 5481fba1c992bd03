"""Run one function per input file, in a process pool when it pays off.

This is the only process pool of holotrace (:func:`process_map`): per-file work (decoding, derived columns,
packing) goes through ``run_map``, where the calling process takes tasks too (``n`` workers are the caller and
``n - 1`` pool processes), and the local executor's tasks go through it as well. Workers receive a task and return the name of the file they wrote (never
column arrays). Results come back in input order, so output does not depend on the degree of
parallelism. Within one file, the decoder scans pieces on threads (its scanner
runs without the GIL); ``plan`` splits the cores between processes and threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Optional, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Memory one process needs for a file of n bytes: the interpreter, numpy and the pieces in flight (about
# 50-90 MB whatever the file: columns go to files), and the rows kept to link events (about 7 bytes per
# event, some 420 bytes of JSON: measured on generated ranks).
_BYTES_PER_FILE_BYTE = 0.02
_PROCESS_BYTES = 96 * 2**20
THREAD_MIN_FILE_BYTES = 32 * 2**20  # smaller files are scanned in one piece: threads would only wait


def available_memory_bytes() -> Optional[int]:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def clamp_workers(requested: Optional[int], sizes: Sequence[int]) -> int:
    """Processes worth starting for files of these sizes: at most one per file and per core, and as
    many as the available memory holds (``requested`` None: as many as that allows)."""
    if not sizes:
        return 1
    n = min(cpu_count(), len(sizes))
    if requested is not None:
        n = min(n, max(1, int(requested)))
    mem = available_memory_bytes()
    if mem:
        per = _PROCESS_BYTES + _BYTES_PER_FILE_BYTE * max(sizes)
        n = min(n, int(0.8 * mem / per))
    return max(1, n)


def plan(requested: Optional[int], sizes: Sequence[int]) -> tuple[int, list[int]]:
    """(processes, scanning threads per file): files spread over processes first, the cores left
    over scan each big file's pieces on threads. ``requested`` bounds the total (None: cores)."""
    procs = clamp_workers(requested, sizes)
    budget = min(cpu_count(), max(1, int(requested))) if requested is not None else cpu_count()
    per = max(1, budget // procs)
    return procs, [per if s >= THREAD_MIN_FILE_BYTES else 1 for s in sizes]


def run_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    on_done: Optional[Callable[[int, R], None]] = None,
    *,
    executor=None,
) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``workers`` processes (never more than items or cores), or on
    ``executor`` (an :class:`holotrace.exec.executor.Executor` whose workers are not this machine's pool, e.g.
    Ray's) when ``workers`` > 1. The first item that raises stops the map and its error reaches the caller."""
    if executor is not None and executor.name != "local" and int(workers) > 1 and len(items) > 1:
        return _delegate(executor, fn, items, on_done)
    return process_map(fn, items, workers, on_done=on_done)


def process_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    on_done: Optional[Callable[[int, R], None]] = None,
    keep: Optional[Callable[[int, R], object]] = None,
    caller_works: bool = True,
    on_lost: Optional[Callable[[int, BaseException], object]] = None,
) -> list:
    """The one process pool: ``fn`` over ``items`` on up to ``workers`` processes, results in input order.

    Args:
        on_done: called in this process as each item finishes, ``on_done(i, result)``.
        keep: what the returned list holds for item ``i`` instead of its result (called before ``on_done``).
        caller_works: this process takes items too (``workers - 1`` pool processes); else ``workers`` pool
            processes do the work and this one only collects.
        on_lost: gives the result of an item whose pool process failed it (the process died); without it the
            error is raised, and so is any error of an item run in this process.
    """
    workers = min(int(workers), len(items), cpu_count())
    if workers <= 1:
        results: list = [None] * len(items)
        for i, x in enumerate(items):
            results[i] = _done(i, fn(x), keep, on_done)
        return results
    return _with_pool(fn, items, workers, on_done, keep, caller_works, on_lost)


def _done(i: int, r, keep, on_done):
    kept = keep(i, r) if keep is not None else r
    if on_done is not None:
        on_done(i, r)
    return kept


def _with_pool(fn, items: Sequence, workers: int, on_done, keep, caller_works: bool, on_lost) -> list:
    """:func:`process_map` on a pool: each worker takes the next item when free."""
    import queue
    import threading

    n = len(items)
    results: list = [None] * n
    finished: queue.SimpleQueue = queue.SimpleQueue()  # (index, future or exception) from the pool
    lock = threading.Lock()
    order = iter(range(n))
    in_pool = [0]

    def take() -> Optional[int]:
        with lock:
            return next(order, None)

    import multiprocessing as mp  # (imported here: a command that maps in one process never needs it)
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    procs = workers - 1 if caller_works else workers
    with ProcessPoolExecutor(max_workers=procs, mp_context=ctx) as ex:

        def feed() -> None:
            while True:
                with lock:  # taken and counted at once: the caller never sees an item neither done nor counted
                    i = next(order, None)
                    if i is None:
                        return
                    in_pool[0] += 1
                try:
                    f = ex.submit(fn, items[i])
                except BaseException as e:  # a broken pool: this item and every one left reported, never lost
                    finished.put((i, e))
                    continue
                f.add_done_callback(lambda f, i=i: (finished.put((i, f)), feed()))
                return

        def collect(block: bool) -> None:
            while True:
                try:
                    i, f = finished.get(block=block)
                except queue.Empty:
                    return
                with lock:
                    in_pool[0] -= 1
                try:
                    if isinstance(f, BaseException):
                        raise f
                    r = f.result()
                except Exception as e:
                    if on_lost is None:
                        raise
                    r = on_lost(i, e)
                results[i] = _done(i, r, keep, on_done)
                if block:
                    return

        for _ in range(procs):
            feed()
        while caller_works and (i := take()) is not None:
            results[i] = _done(i, fn(items[i]), keep, on_done)
            collect(block=False)
        while True:
            with lock:
                left = in_pool[0]
            if not left:
                break
            collect(block=True)
    return results


def _delegate(executor, fn, items, on_done) -> list:
    """``run_map`` on another executor: results in input order, ``on_done`` as each task finishes (so a
    progress bar moves), and a task's failure raised here as it would be by the pool."""

    def done(i, r):
        if on_done is not None and type(r).__name__ != "TaskFailed":
            on_done(i, r)

    results = executor.map(fn, items, on_done=done if on_done is not None else None)
    for r in results:
        if type(r).__name__ == "TaskFailed":
            raise RuntimeError(f"a task on the {executor.name} executor failed: {r}")
    return results


_here = threading.local()


@contextmanager
def one_thread() -> Iterator[None]:
    """:func:`thread_map` called on this thread inside the block maps on this thread alone (for work that already
    runs beside other work: its own threads would take the core the other work runs on)."""
    before = getattr(_here, "one", False)
    _here.one = True
    try:
        yield
    finally:
        _here.one = before


def thread_map(fn: Callable[[T], R], items: Sequence[T]) -> dict:
    """``{x: fn(x)}`` on threads, one per core at most (for numpy/pyarrow work, which releases the GIL); on the
    calling thread inside :func:`one_thread`."""
    items = list(items)
    workers = 1 if getattr(_here, "one", False) else min(cpu_count(), len(items))
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            return dict(zip(items, ex.map(fn, items)))
    return {x: fn(x) for x in items}


class LastOut:
    """Calls ``then()`` once ``arrive()`` has been called ``n`` times, on the thread that arrives last: for work
    that may start only when every one of ``n`` tasks on different threads is done with something (:meth:`wait`
    returns once it has run)."""

    def __init__(self, n: int, then: Callable[[], object]):
        self._left, self._then, self._lock, self._done = n, then, threading.Lock(), threading.Event()

    def arrive(self) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            try:
                self._then()
            finally:
                self._done.set()

    def wait(self) -> None:
        """Return once ``then()`` has run (or failed)."""
        self._done.wait()
