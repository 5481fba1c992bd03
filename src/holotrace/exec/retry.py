"""A task whose worker was lost (killed, out of memory, its node gone) is run once more, on any executor.

:func:`map_retrying` is :meth:`~holotrace.exec.tasks.Executor.map` plus that one retry, and
:func:`run_map_retrying` is :func:`~holotrace.exec.pool.run_map` (the load's map, where this process takes
tasks too) plus the same retry. A local pool that loses a process fails every task it still held (a broken
pool), so the retry gives the innocent tasks their answer; on the local pool each retried task runs in a
process of its own, so a task that kills its process again takes no other down with it. A task whose worker is
lost every time comes back as a :class:`~holotrace.exec.tasks.TaskFailed` saying so, which the caller reports
(a finding, or a typed error). A task that raised is not retried (it would raise again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

from holotrace.exec.tasks import Executor, TaskFailed

__all__ = ["map_retrying", "run_map_retrying", "worker_lost", "LOST_KINDS"]

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
    local = getattr(ex, "name", "") == "local"

    def rerun(redo: list) -> list:
        # Ray's tasks are independent already; a local one runs in a process of its own
        return _isolated(fn, redo, getattr(ex, "_workers", None)) if local else ex.map(fn, redo)

    def settle(i: int, r):
        return keep(i, r) if keep is not None and not isinstance(r, TaskFailed) else r

    return _retry(results, items, rerun, settle, retries)


def run_map_retrying(
    fn: Callable,
    items: Sequence,
    workers: int,
    on_done: Optional[Callable] = None,
    *,
    executor=None,
    retries: int = 1,
) -> list:
    """:func:`~holotrace.exec.pool.run_map` (``fn`` over ``items``, this process taking items too, or on
    ``executor`` when it is not the local pool), where an item whose worker was lost runs again (``retries`` times
    at most) and, lost every time, comes back as a :class:`TaskFailed` saying so. ``on_done(i, result)`` is called
    once per item, with its final result unless it was lost. An item that raises still raises (on another
    executor: a RuntimeError naming the task's error, as ``run_map`` does)."""
    from holotrace.exec.pool import process_map

    items = list(items)
    remote = executor is not None and executor.name != "local" and int(workers) > 1 and len(items) > 1

    def done(i: int, r) -> None:
        if on_done is not None and not isinstance(r, TaskFailed):
            on_done(i, r)

    if remote:
        results = executor.map(fn, items, on_done=done)
    else:
        results = process_map(fn, items, workers, on_done=done, on_lost=_lost_or_raise)

    def rerun(redo: list) -> list:
        return executor.map(fn, redo) if remote else _isolated(fn, redo, workers, wrap=False)

    def settle(i: int, r):
        done(i, r)
        return r

    _raise_failed(results, executor)
    results = _retry(results, items, rerun, settle, retries)
    _raise_failed(results, executor)
    return results


def _raise_failed(results: list, executor) -> None:
    """A task that raised on another executor (not one whose worker was lost): raised here."""
    for r in results:
        if isinstance(r, TaskFailed) and not worker_lost(r):
            raise RuntimeError(f"a task on the {getattr(executor, 'name', 'local')} executor failed: {r}")


def _retry(results: list, items: list, rerun: Callable, settle: Callable, retries: int) -> list:
    """Run the items of ``results`` whose worker was lost again through ``rerun``, ``retries`` times at most; a
    retried result passes through ``settle(i, r)``. Lost every time: a TaskFailed (of a lost kind) saying so."""
    for _ in range(retries):
        again = [i for i, r in enumerate(results) if worker_lost(r)]
        if not again:
            break
        for i, r in zip(again, rerun([items[i] for i in again])):
            results[i] = settle(i, r)
    return [_lost_every_time(r, retries + 1) if worker_lost(r) else r for r in results]


def _lost_every_time(r: TaskFailed, times: int) -> TaskFailed:
    # a broken local pool's own text ("a process in the process pool was terminated abruptly ...") adds nothing
    detail = "" if r.kind in ("BrokenProcessPool", "BrokenExecutor") or not r.message else f": {r.message}"
    return TaskFailed(r.kind, f"its worker was lost {times} times (killed by a signal or out of memory){detail}")


def _lost_or_raise(i: int, e: BaseException) -> TaskFailed:
    """The local pool's ``on_lost``: a lost worker gives a TaskFailed (to be retried); any other error is raised."""
    if type(e).__name__ not in LOST_KINDS:
        raise e
    return TaskFailed(type(e).__name__, str(e) or "the worker process died")


def _isolated(fn: Callable, items: list, workers: Optional[int], *, wrap: bool = True) -> list:
    """Each item in a process of its own (a lost one takes no other task down with it), a few at a time. A lost
    process gives a TaskFailed; an item that raises gives one too (``wrap``), else its error is raised here."""
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
            futures = [p.submit(_call, fn, x) if wrap else p.submit(fn, x) for p, x in zip(pools, items[a : a + step])]
            for k, f in enumerate(futures):
                try:
                    out[a + k] = f.result()
                except Exception as e:  # the process died (or, unwrapped, the item raised)
                    out[a + k] = _lost_or_raise(a + k, e)
        finally:
            for p in pools:
                p.shutdown(wait=True)
    return out
