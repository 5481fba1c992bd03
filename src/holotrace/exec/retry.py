"""A task whose worker was lost (killed, out of memory, its node gone) is run once more, on any executor.

:func:`map_retrying` is :meth:`~holotrace.exec.tasks.Executor.map` plus that one retry: a local pool that
loses a process fails every task it still held (a broken pool), so the retry gives the innocent tasks their
answer; a task whose worker is lost again keeps its :class:`~holotrace.exec.tasks.TaskFailed`, which the
caller reports as a finding. A task that raised is not retried (it would raise again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

from holotrace.exec.tasks import Executor, TaskFailed

__all__ = ["map_retrying", "worker_lost", "LOST_KINDS"]

#: the errors with which a local pool or Ray reports a lost worker
LOST_KINDS = frozenset(
    {
        "BrokenProcessPool",
        "BrokenExecutor",
        "WorkerCrashedError",
        "RayActorError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
        "LocalRayletDiedError",
        "TaskUnschedulableError",
    }
)


def worker_lost(r) -> bool:
    """``r`` is the result of a task whose worker was lost (not of a task that raised)."""
    return isinstance(r, TaskFailed) and r.kind in LOST_KINDS


def map_retrying(
    ex: Executor,
    fn: Callable,
    items: Sequence,
    *,
    on_done: Optional[Callable] = None,
    keep: Optional[Callable] = None,
    retries: int = 1,
) -> list:
    """``ex.map(fn, items)``, then the tasks whose worker was lost run again (``retries`` times at most); those
    lost every time come back as a :class:`TaskFailed` saying so."""
    items = list(items)
    results = ex.map(fn, items, on_done=on_done, keep=keep)
    for _ in range(retries):
        again = [i for i, r in enumerate(results) if worker_lost(r)]
        if not again:
            break
        if getattr(ex, "name", "") == "local":
            redo = _isolated(fn, [items[i] for i in again], getattr(ex, "_workers", None))
        else:  # Ray's tasks are independent already
            redo = ex.map(fn, [items[i] for i in again])
        for i, r in zip(again, redo):
            results[i] = keep(i, r) if keep is not None and not isinstance(r, TaskFailed) else r
    return [
        TaskFailed(r.kind, f"its worker was lost {retries + 1} times (killed or out of memory): {r.message}")
        if worker_lost(r)
        else r
        for r in results
    ]


def _isolated(fn: Callable, items: list, workers: Optional[int]) -> list:
    """Each item in a process of its own (a lost one takes no other task down with it), a few at a time."""
    import multiprocessing as mp
    import os
    from concurrent.futures import ProcessPoolExecutor

    from holotrace.exec.tasks import _call

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    out: list = [None] * len(items)
    step = max(1, min(int(workers or os.cpu_count() or 1), len(items)))
    for a in range(0, len(items), step):
        pools = [ProcessPoolExecutor(max_workers=1, mp_context=ctx) for _ in items[a : a + step]]
        try:
            futures = [p.submit(_call, fn, x) for p, x in zip(pools, items[a : a + step])]
            for k, f in enumerate(futures):
                try:
                    out[a + k] = f.result()
                except Exception as e:  # the process died
                    out[a + k] = TaskFailed(type(e).__name__, str(e) or "the worker process died")
        finally:
            for p in pools:
                p.shutdown(wait=True)
    return out
