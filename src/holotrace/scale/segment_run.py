"""The job replay as two maps over the job's rank files and a reduce, on any executor (the scale-out replay).

Up to :data:`~holotrace.scale.replay_choice.JOB_GRAPH_MAX_RANKS` ranks, ``advise``, ``stragglers`` and ``summary`` replay the job graph of every
rank in one process; above it they replay the job at collective granularity
(:mod:`holotrace.analysis.critical_path.segment_replay`), whatever the executor, so the local pool and Ray give the
same answer for every job. ``--replay graph|segments`` (or ``$HOLOTRACE_REPLAY``) chooses one path whatever the
number of ranks.

:func:`segment_advice` maps phase 1 over the files (each task loads its file and returns its
:class:`~holotrace.analysis.critical_path.segments.RankCollectives`), plans in the driver, maps phase 2 (each task
loads its file again, through the cache when asked, and returns its segments) and replays in the driver. The
driver never holds an event: what it keeps is O(collectives x what-ifs) per rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from holotrace.analysis.critical_path.advice import Advice
from holotrace.analysis.critical_path.advice import segment_advice as _advice
from holotrace.analysis.critical_path.job_what_if import WhatIfOptions
from holotrace.analysis.critical_path.segment_replay import intern
from holotrace.analysis.critical_path.segments import (
    RankCollectives,
    RankSegments,
    SegmentPlan,
    rank_collectives,
    rank_segments,
)
from holotrace.errors import TraceFormatError
from holotrace.exec.executor import Executor, LocalExecutor
from holotrace.exec.retry import map_retrying
from holotrace.exec.tasks import TaskFailed
from holotrace.ingest.discover import discover
from holotrace.scale.replay_choice import ENV_REPLAY, JOB_GRAPH_MAX_RANKS, REPLAY_CHOICES, choose_replay
from holotrace.scale.run import RankTask, _Failed, _rules_files, _select, load_rank

__all__ = ["ENV_REPLAY", "JOB_GRAPH_MAX_RANKS", "REPLAY_CHOICES", "choose_replay", "segment_advice"]


@dataclass(frozen=True)
class SegmentTask:
    """One rank's file for a phase of the scale-out replay (phase 2 when ``plan`` is given)."""

    task: RankTask
    plan: Optional[SegmentPlan] = None


def collectives_of_file(t: SegmentTask):
    """Task: phase 1 of one file (a :class:`_Failed` when it cannot be read)."""
    one = load_rank(t.task)
    return one if isinstance(one, _Failed) else rank_collectives(one[1], t.task.rank)


def segments_of_file(t: SegmentTask):
    """Task: phase 2 of one file."""
    one = load_rank(t.task)
    return one if isinstance(one, _Failed) else rank_segments(one[1], t.plan)


def _check(results: list, notes: list | None = None) -> list:
    """The tasks' answers; a rank that cannot be read is left out with a note in ``notes`` (phase 1), or stops the
    replay with its error (``notes`` None: phase 2, where a rank read once fails the second time)."""
    out = []
    for r in results:
        if isinstance(r, TaskFailed):
            raise TraceFormatError(f"a rank's task failed: {r}", fix="run again, or with --executor local")
        if isinstance(r, _Failed):
            if notes is None:
                raise TraceFormatError(
                    f"rank {r.rank} could not be read: {r.problem}",
                    path=r.file,
                    fix="check the file (holotrace doctor PATH)",
                )
            notes.append(f"rank {r.rank} is left out of the replay: its file could not be read ({r.problem})")
            continue
        out.append(r)
    if notes is not None and not out and notes:
        raise TraceFormatError(
            "no rank of the job could be read: " + notes[0], fix="check the files (holotrace doctor PATH)"
        )
    return out


def segment_advice(
    path,
    *,
    executor: Optional[Executor] = None,
    files_ranks: Optional[Sequence[int]] = None,
    cache: bool = False,
    cache_dir=None,
    rules=None,
    ranks: Optional[Sequence[int]] = None,
    steps: Optional[Sequence[int]] = None,
    options: Optional[WhatIfOptions] = None,
    combine: Sequence[Sequence[str]] = (),
    only: Optional[Sequence[str]] = None,
) -> Advice:
    """:func:`holotrace.analysis.critical_path.advice.job_advice` of the job in ``path`` by the scale-out replay,
    its two phases mapped over the rank files on ``executor`` (default: the local pool). ``files_ranks``: only
    these ranks' files; ``ranks``/``steps``/``options``/``combine``/``only``: as ``job_advice``."""
    found = discover(path)
    files = _select(found.files, files_ranks)
    cdir = str(cache_dir) if cache_dir is not None else None
    tasks = {f.rank: RankTask(f.path, f.rank, cache, cdir, rules=_rules_files(rules)) for f in files}
    ex = executor or LocalExecutor()
    pool: dict = {}

    def keep(i, r):
        if isinstance(r, RankCollectives):
            return r.intern(pool)
        return intern(r, pool) if isinstance(r, RankSegments) else r

    notes: list = []

    def phase1():
        work = [SegmentTask(t) for t in tasks.values()]
        return _check(map_retrying(ex, collectives_of_file, work, keep=keep), notes)

    def phase2(plans):
        work = [SegmentTask(tasks[p.rank], p) for p in plans]
        return _check(map_retrying(ex, segments_of_file, work, keep=keep))

    try:
        advice = _advice(phase1, phase2, ranks=ranks, steps=steps, options=options, combine=combine, only=only)
        advice.issues[:0] = notes
        return advice
    finally:
        if executor is None:
            ex.close()
