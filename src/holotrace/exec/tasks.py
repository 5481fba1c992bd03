"""What every executor shares: the interface, a failed task's result, the executor's error."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional, TypeVar

from holotrace.errors import HolotraceError

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Executor", "ExecutorError", "TaskFailed"]


class ExecutorError(HolotraceError, ValueError):
    """An executor cannot be used as asked (unknown name, Ray not installed or not reachable)."""


@dataclass(frozen=True)
class TaskFailed:
    """The result of a task that raised (or whose worker was lost): the error, as text."""

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class Executor:
    """Maps a function over items; results in input order. Use as a context manager or call :meth:`close`."""

    name = "executor"
    #: workers run on this machine (the parent may hand them paths on local disk)
    local = True

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        *,
        on_done: Optional[Callable[[int, object], None]] = None,
        keep: Optional[Callable[[int, object], object]] = None,
    ) -> list:
        """``[fn(x) for x in items]``; a task that raises gives a :class:`TaskFailed`. ``on_done(i, result)`` is
        called in this process as each task finishes (in completion order). ``keep(i, result)``, called first,
        gives what the returned list holds for that task instead of the result (a caller folding results as
        they arrive keeps only a small part of each)."""
        raise NotImplementedError

    @property
    def workers(self) -> int:
        """How many tasks run at once."""
        return 1

    def close(self) -> None:
        """Release what this executor started."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _finish(i: int, result, keep, on_done):
    """What the map keeps of task ``i``'s result, after the caller's callbacks."""
    kept = keep(i, result) if keep is not None else result
    if on_done is not None:
        on_done(i, result)
    return kept


def _call(fn, x):
    try:
        return fn(x)
    except Exception as e:  # one bad item must not lose the others: the caller turns it into a finding
        return TaskFailed(type(e).__name__, str(e))
