"""Where per-file and per-rank work runs: a local process pool (default) or a Ray cluster.

An :class:`Executor` maps a picklable function over items and gives the results back in input order;
callers never know which executor ran them. Two implementations:

* :class:`LocalExecutor` — processes on this machine (no extra dependency): the one process pool,
  :func:`holotrace.exec.pool.process_map`;
* :class:`holotrace.exec.ray_executor.RayExecutor` — tasks on a Ray cluster (``pip install
  'holotrace[ray]'``); ``ray`` is imported only there.

:func:`get_executor` picks one by name (``local`` | ``ray``), defaulting to ``$HOLOTRACE_EXECUTOR`` and then
``local``. A task that raises does not stop the map: its result is a :class:`TaskFailed` carrying the
error text, so one bad rank never loses the others' work. Ctrl-C cancels what has not run and re-raises.
"""

from __future__ import annotations

import functools
import os
from typing import Optional, TypeVar

from holotrace.exec.pool import cpu_count, process_map
from holotrace.exec.tasks import Executor, ExecutorError, TaskFailed, _call

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "TaskFailed",
    "get_executor",
    "EXECUTORS",
    "ENV_EXECUTOR",
    "ENV_RAY_ADDRESS",
]

EXECUTORS = ("local", "ray")
ENV_EXECUTOR = "HOLOTRACE_EXECUTOR"
ENV_RAY_ADDRESS = "HOLOTRACE_RAY_ADDRESS"


class LocalExecutor(Executor):
    """Processes on this machine (forked where the platform allows), one task per item."""

    name = "local"

    def __init__(self, workers: Optional[int] = None):
        self._workers = max(1, min(int(workers), cpu_count())) if workers else cpu_count()

    @property
    def workers(self) -> int:
        return self._workers

    def map(self, fn, items, *, on_done=None, keep=None) -> list:
        # the pool's processes do the work (this process only collects, holding what ``keep`` gives); a task
        # that raises, or whose process dies, gives a TaskFailed
        return process_map(
            functools.partial(_call, fn),
            list(items),
            self._workers,
            on_done=on_done,
            keep=keep,
            caller_works=False,
            on_lost=_lost,
        )


def _lost(i: int, e: BaseException) -> TaskFailed:
    return TaskFailed(type(e).__name__, str(e) or "the worker process died")


def get_executor(
    name: Optional[str] = None, *, address: Optional[str] = None, workers: Optional[int] = None
) -> Executor:
    """The executor called ``name`` (default ``$HOLOTRACE_EXECUTOR``, else ``local``).

    ``address`` (Ray only; default ``$HOLOTRACE_RAY_ADDRESS``): ``auto`` joins the cluster this machine belongs
    to, ``HOST:PORT`` a given head node; none starts a Ray instance on this machine. ``workers`` bounds the
    local pool (default: every core).
    """
    name = (name or os.environ.get(ENV_EXECUTOR) or "local").strip().lower()
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        from holotrace.exec.ray_executor import RayExecutor

        return RayExecutor(address=address or os.environ.get(ENV_RAY_ADDRESS) or None, num_cpus=workers)
    raise ExecutorError(
        f"unknown executor {name!r}", fix=f"use one of: {', '.join(EXECUTORS)} (--executor or ${ENV_EXECUTOR})"
    )
