"""Run one function per input, in a process pool when it pays off.

Workers receive a path and return columnar tables; the parent never receives
more than that. Results come back in input order, so output does not depend on
the degree of parallelism.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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


def default_workers(sizes: Sequence[int]) -> int:
    """As many workers as cores, bounded by memory (a worker needs ~1.5x its largest file)."""
    cores = cpu_count()
    n = min(cores, len(sizes)) or 1
    mem = available_memory_bytes()
    if mem and sizes:
        per = max(max(sizes) * 1.5, 64 * 2**20)
        n = max(1, min(n, int(0.8 * mem / per)))
    return n


def run_map(fn: Callable[[T], R], items: Sequence[T], workers: int, on_done: Optional[Callable[[int, R], None]] = None) -> list[R]:
    """``[fn(x) for x in items]``, on ``workers`` processes when > 1."""
    results: list = [None] * len(items)
    if workers <= 1 or len(items) <= 1:
        for i, x in enumerate(items):
            results[i] = fn(x)
            if on_done:
                on_done(i, results[i])
        return results
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        futures = [ex.submit(fn, x) for x in items]
        for i, f in enumerate(futures):
            results[i] = f.result()
            if on_done:
                on_done(i, results[i])
    return results


def thread_map(fn: Callable[[T], R], items: Sequence[T]) -> dict:
    """``{x: fn(x)}`` on threads, one per core at most (for numpy/pyarrow work, which releases the GIL)."""
    items = list(items)
    workers = min(cpu_count(), len(items))
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            return dict(zip(items, ex.map(fn, items)))
    return {x: fn(x) for x in items}
