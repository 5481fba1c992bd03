"""The job's summary: one object of frames and findings, whatever ran the per-rank work.

Every ``holotrace summary`` (and the report's matching sections) is computed the same way: one
:class:`~holotrace.analysis.rank_summary.RankSummary` per rank, folded into a
:class:`~holotrace.analysis.reduce.Reducer`, whose frames become a :class:`JobSummary`. The ranks' summaries
come from a job loaded in this process (:func:`summarize_job`, over one shared view), from workers of the local
pool or of Ray, or from an ingest folder (:mod:`holotrace.scale.run`); the :class:`JobSummary` and everything
rendered from it are the same in each case.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Optional

from holotrace.analysis.rank_summary import rank_collectives, rank_summary
from holotrace.analysis.reduce import Reducer
from holotrace.exec.pool import thread_map
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from holotrace.table import Table

__all__ = ["JobSummary", "summarize_job", "findings_frame", "FINDING_COLUMNS", "DATA_KEYS"]

#: columns of the findings table
FINDING_COLUMNS = ("severity", "code", "rank", "file", "count", "message", "example")
#: the frames of a summary that ``holotrace summary`` writes in full (``--format json|csv``, ``--output``), in order
DATA_KEYS = (
    "temporal",
    "temporal_by_step",
    "kernel_types",
    "kernel_types_by_rank",
    "kernel_stats",
    "kernel_rank_distribution",
    "idle",
    "idle_interval_stats",
    "overlap",
    "steps",
)


@dataclass
class JobSummary:
    """The job's answers to "where did the time go", computed once.

    Attributes:
        path: the job's folder or file (or the ingest folder it was read from).
        ranks: the ranks summarised, ascending.
        frames: the reduced frames (:meth:`holotrace.analysis.reduce.Reducer.frames`): per-rank tables stacked
            (``temporal``, ``idle``, ``overlap``, ``steps``, ...), job tables (``kernel_types``, ``top_kernels``,
            ``kernel_rank_distribution``, ``kernel_moments``), cross-rank answers (``collective_waits``,
            ``straggler_report``, ``straggler_summary``), launches (``launch_overview``, ``launch_worst``) and
            ``profiler_steps``.
        findings: what loading and validation found, in the loader's order.
        world_size: the job's world size when the traces say.
        summary_bytes: per rank, the size of its summary as sent by a worker (empty when none was sent).
        executor: what ran the per-rank work: ``"memory"`` (a job loaded in this process), ``"local"``,
            ``"ray"`` or ``"ingest"`` (read from an ingest folder).
        costliest_rank: the "one story" section (the rank that costs the job the most, and why), a
            :class:`~holotrace.analysis.critical_path.advice.CostliestRank` from ``costliest_rank(job)``: the job
            graph's replay up to ``scale.replay_choice.JOB_GRAPH_MAX_RANKS`` ranks (a summary mapped over the ranks
            loads them in the driver for it), the scale-out replay at collective granularity above.
    """

    path: str
    ranks: list
    frames: dict
    findings: list
    world_size: Optional[int] = None
    summary_bytes: list = field(default_factory=list)
    executor: str = "memory"
    costliest_rank: object = None

    @property
    def cross_rank_warning(self) -> Optional[str]:
        """A sentence to print beside any cross-rank number (findings whose code is ``cross_rank``)."""
        bad = [f for f in self.findings if f.code.cross_rank]
        return "; ".join(f.message for f in bad) if bad else None

    @property
    def profiler_steps(self) -> list[int]:
        return list(self.frames.get("profiler_steps", []))

    def findings_frame(self) -> Table:
        return findings_frame(self.findings)

    def data(self) -> dict[str, object]:
        """The full tables ``holotrace summary`` writes, in order, findings last."""
        out = {k: self.frames[k] for k in DATA_KEYS}
        out["findings"] = self.findings_frame()
        return out

    def meta(self) -> dict:
        """Plain facts of the summary (the same whatever ran the per-rank work; the path aside)."""
        return {
            "path": self.path,
            "ranks": list(self.ranks),
            "steps": self.profiler_steps,
            "world_size": self.world_size,
        }


def findings_frame(findings) -> Table:
    """Findings as a table of plain values (``code`` is the :class:`~holotrace.findings.FindingCode`'s value)."""
    return Table.from_records([f.as_dict() for f in findings], FINDING_COLUMNS)


def summarize_job(
    job,
    *,
    view=None,
    top: int = 10,
    launch_delay_cutoff: float = 100.0,
    on_stragglers: Optional[Callable[[object], None]] = None,
    launch_stats: Optional[Callable[[], dict]] = None,
    leave_out: Collection[str] = (),
) -> JobSummary:
    """The summary of a job held in this process: each rank's summary from one view (on threads), reduced.

    Args:
        job: a :class:`~holotrace.model.job.Job`.
        view: the job's view under holotrace's rules when the caller has built it (else built here).
        top: kernels kept in the top-kernel tables.
        launch_delay_cutoff: µs above which a launch delay is an outlier.
        on_stragglers: called with the summary's ``straggler_summary`` as soon as it is known (the ranks'
            collectives are reduced first), before the other per-rank work.
        launch_stats: gives the job's :func:`holotrace.analysis.launches.launch_stats` (``details=True``, the
            same cutoff) when the caller computes them anyway (e.g. a future); asked for after ``on_stragglers``.
        leave_out: frames not computed, empty in the result (``rank_summary.LEAVE_OUT_ABLE``): for a caller that
            does not show them.
    """
    view = view if view is not None else job_view(job, NATIVE)
    reducer = Reducer()
    collectives = {r: rank_collectives(view, r) for r in view.ranks}
    for r in view.ranks:
        reducer.add_collectives(r, collectives[r], int(view[r].clock_offset))
    if on_stragglers is not None:
        on_stragglers(reducer.stragglers()["straggler_summary"])

    stats = launch_stats() if launch_stats is not None else {}

    def one(r: int):
        out = rank_summary(
            view,
            r,
            launch_delay_cutoff=launch_delay_cutoff,
            collectives=collectives[r],
            launch_stats=stats.get(r),
            leave_out=leave_out,
        )
        view[r].release_pages()  # (the rank's tables are made: its columns' pages go back to the cache)
        return out

    per_rank = thread_map(one, view.ranks)
    for r in view.ranks:
        reducer.add(per_rank.pop(r))
    return JobSummary(
        job.path, list(view.ranks), reducer.frames(top=top), list(job.findings), job.world_size, [], "memory"
    )
