"""The replays of the job's what-ifs (:mod:`holotrace.analysis.critical_path.job_what_if`): each try's delays (the
shared base edited by its fixes), its replayed job step times, and the unmodified replay with the tries of one
command, on a worker thread where a core is spare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from holotrace.analysis.critical_path.job_graph import JobGraph
from holotrace.analysis.critical_path.replay import Delays, job_step_table, replay

__all__ = ["FixReplays", "apply", "replay_times", "replays"]


def apply(base: Delays, cands: Sequence) -> Delays:
    """A copy of ``base`` with the edits of ``cands`` (the what-ifs' candidates) applied; ``base`` is not changed."""
    d = base.copy()
    for c in cands:
        c.edit(d)
    return d


class FixReplays:
    """The unmodified replay (on this thread, first: it finds the graph's order, which every later replay reads)
    and each try's (a list of candidates applied to ``base``), in the order added. With the compiled sweep
    (it runs without the GIL), more than a few tries and a core to spare, they start on a worker thread as they
    are added (while this thread makes the next candidates); at :meth:`results` this thread replays those the
    worker has not started. Otherwise one after another at :meth:`results`. A try with a ``key`` already on the
    graph's memo is not replayed again, and its times are kept there. Each replay is a function of its own delays:
    the times are the same whichever thread replays them, whenever.

    (Measured on the 8-rank job, two cores: with the other core idle, the worker takes the replays off the
    command's path; with it busy, the two threads share one core and the command is slower, and the worker's
    replays in flight add ~50 MB to the peak either way. Hence a worker only with a core to spare.)"""

    MAX_THREADS = 2  # this thread and the workers (each replay in flight holds a copy of the delays and its times)
    MIN_TRIES = 4  # fewer are replayed on this thread (a worker's memory is not worth it)

    def __init__(self, g: JobGraph, base: Delays):
        from holotrace.analysis.critical_path.replay import compiled_order, sweep_built

        self.g, self.base, self.tries, self.pool, self.ref = g, base, [], None, None
        self.workers = min(self.MAX_THREADS - 1, _spare_cores()) if sweep_built() else 0
        if self.workers > 0:  # (else made last, once the candidates' memory is free again)
            self.ref = replay(g, base)
            self.workers = self.workers if compiled_order(g) else 0

    def __enter__(self) -> FixReplays:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _one(self, parts):
        return replay_times(self.g, apply(self.base, parts))

    def add(self, key, parts) -> None:
        """A try: ``parts`` applied together (``key``: where its times are kept on the graph, or None)."""
        kept = self.g.memo.get(key) if key is not None else None
        self.tries.append([key, kept, None, parts])
        if kept is not None or self.workers < 1:
            return
        if self.pool is None and sum(t[1] is None for t in self.tries) >= self.MIN_TRIES:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(self.workers)
            for t in self.tries:
                if t[1] is None:
                    t[2] = self.pool.submit(self._one, t[3])
        elif self.pool is not None:
            self.tries[-1][2] = self.pool.submit(self._one, parts)

    def results(self) -> tuple:
        """The unmodified replay and each try's times (as :func:`replay_times`), in the order added."""
        if self.ref is None:
            self.ref = replay(self.g, self.base)
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
        return self.ref, out


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
