"""The replays of the job's what-ifs (:mod:`holotrace.analysis.critical_path.job_what_if`): each try's delays (the
shared base edited by its fixes), its replayed job step times, and the unmodified replay with the tries of one
command, on a worker thread where a core is spare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from holotrace.analysis.critical_path.job_graph import JobGraph
from holotrace.analysis.critical_path.replay import Delays, compiled_order, job_step_table, replay, sweep_built

__all__ = ["FixReplays", "apply", "replay_times", "replays"]


def apply(base: Delays, cands: Sequence) -> Delays:
    """A copy of ``base`` with the edits of ``cands`` (the what-ifs' candidates) applied; ``base`` is not changed
    (an edit writes the cross delays or the held edges through :meth:`~.replay.Delays.own`)."""
    d = base.edited()
    for c in cands:
        c.edit(d)
    return d


class FixReplays:
    """The unmodified replay and each try's (a list of candidates applied to ``base``), in the order added.

    With the compiled sweep (it runs without the GIL) and more than one core, the unmodified replay starts on a
    worker thread at once, while this thread makes the candidates; every later replay reads the graph's order it
    finds, so a try replays after it. With more than a few tries and a core to spare by the load average, tries
    start on the worker as they are added; at :meth:`results` the tries not started are shared between the worker
    and this thread. Otherwise, one after another at :meth:`results` (the unmodified replay last made, once the
    candidates' memory is free again). A try with a ``key`` already on the graph's memo is not replayed again, and
    its times are kept there. Each replay is a function of its own delays: the times are the same whichever
    thread replays them, whenever.

    (Measured on the 8-rank job, two cores: the unmodified replay beside the making of the candidates takes it off
    the command's path. Tries in flight on the worker while candidates are made add ~50 MB to the peak, and with
    the other core busy the two threads share one: hence tries as they come only with a core to spare.)"""

    MAX_THREADS = 2  # this thread and the workers (each replay in flight holds a copy of the delays and its times)
    MIN_TRIES = 4  # fewer wait for :meth:`results` (a worker's memory while candidates are made is not worth it)

    def __init__(self, g: JobGraph, base: Delays, *, keep_times: bool = True):
        from holotrace.exec.pool import cpu_count

        self.g, self.base, self.tries, self.pool, self.ref_run = g, base, [], None, None
        self.keep_times = keep_times
        threads = min(self.MAX_THREADS, cpu_count()) if sweep_built() else 1
        self.workers = min(threads - 1, _spare_cores())  # workers for tries as they are added
        if threads > 1:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(threads - 1)
            self.ref_run = self.pool.submit(self._ref)  # the unmodified replay, on the worker

    def __enter__(self) -> FixReplays:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _ref(self):
        """The unmodified replay (``keep_times`` False: its point times let go once its step tables are made)."""
        ref = replay(self.g, self.base)
        if not self.keep_times:
            ref.release_times()
        return ref

    def _one(self, parts):
        return replay_times(self.g, apply(self.base, parts))

    def _threaded(self) -> bool:
        """Whether tries may run on the worker: the unmodified replay found the graph's order (no cycle)."""
        return self.pool is not None and compiled_order(self.g)

    def add(self, key, parts) -> None:
        """A try: ``parts`` applied together (``key``: where its times are kept on the graph, or None)."""
        kept = self.g.memo.get(key) if key is not None else None
        self.tries.append([key, kept, None, parts])
        if kept is not None or self.workers < 1:
            return
        waiting = [t for t in self.tries if t[1] is None and t[2] is None]
        if not self.ref_run.done() or not (len(waiting) >= self.MIN_TRIES or any(t[2] is not None for t in self.tries)):
            return  # (a try replays after the unmodified replay: it reads the order that one finds)
        if not self._threaded():
            self.workers = 0
            return
        for t in waiting:
            t[2] = self.pool.submit(self._one, t[3])

    def results(self) -> tuple:
        """The unmodified replay and each try's times (as :func:`replay_times`), in the order added."""
        ref = self.ref_run.result() if self.ref_run is not None else self._ref()
        waiting = [t for t in self.tries if t[1] is None and t[2] is None]
        if len(waiting) >= self.MIN_TRIES and self._threaded():  # every other try on the worker, the rest here
            for t in waiting[1::2]:
                t[2] = self.pool.submit(self._one, t[3])
        out = []
        for key, kept, running, parts in self.tries:
            if kept is not None:
                t = kept
            elif running is not None and not running.cancel():  # started on a worker: its times
                t = running.result()
            else:
                t = self._one(parts)
            if key is not None:
                self.g.memo[key] = t
            out.append(t)
        return ref, out


def _spare_cores() -> int:
    """Cores this process may use that the last minute's load leaves idle (besides the one it runs on)."""
    import os

    from holotrace.exec.pool import cpu_count

    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # (no load average on this system: assume none spare)
        return 0
    return max(0, int(cpu_count() - 0.5 - load))


def replays(g: JobGraph, base: Delays, tries: Sequence[Sequence]) -> list:
    """:func:`replay_times` of ``base`` edited by each list of candidates in ``tries``, in that order (on threads
    with the compiled sweep, as :func:`evaluate`)."""
    with FixReplays(g, base) as runs:
        for parts in tries:
            runs.add(None, parts)
        return runs.results()[1]


def replay_times(g: JobGraph, d: Delays) -> tuple[np.ndarray, np.ndarray]:
    """Replayed job step times under delays ``d``: the steps and their times (ms)."""
    from holotrace.analysis.critical_path.replay import replay_step_ends

    tab = job_step_table(replay_step_ends(g, d))
    return tab["step"].astype(np.int64), tab["time"] / 1e6
