"""``holotrace stragglers PATH``: which rank holds the others back in collectives, per step, with evidence.

Every communication kernel instance is matched across ranks (the k-th
occurrence of a collective kernel in a step). All ranks leave a collective
together, so a rank's extra time in it over the fastest rank is time spent
waiting; the fastest rank arrived last and is the one the others waited
for. Durations are compared, not start times, so host clock skew does not
matter. The HTA method's candidates (late start of the dominant collective,
fixed to know every NCCL/RCCL kernel family) are listed too, and the rank that costs the job most (the one
analysis ``advise`` and ``summary`` also report: ``costliest_rank`` in the JSON output).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from holotrace.analysis import stragglers as _strag
from holotrace.analysis.critical_path.advice import costliest_rank
from holotrace.commands._load import add_load_options, add_replay_option, load_job, replay_of
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.exec.pool import one_thread
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from holotrace.table import Table

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument(
        "--candidates",
        type=int,
        default=2,
        metavar="K",
        help="number of candidates from HTA's late-start method (default 2)",
    )
    add_replay_option(p)


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    return emit(build_report(job, candidates=args.candidates, replay=replay_of(args, len(job.ranks))), args)


COMMAND = Command(
    name="stragglers",
    help="which rank the others wait for in collectives, per step, with the evidence",
    description="Per step and rank: time spent waiting inside collectives for other ranks, and time the other "
    "ranks waited for this one (it arrived last). The rank others wait for most in a step is its "
    "straggler; the collective with the longest wait is shown as evidence. Needs at least two ranks "
    "with communication kernels. Times in milliseconds (ms).",
    add_arguments=add_arguments,
    run=run,
)


def build_report(job, *, candidates: int = 2, replay: str = "graph") -> Report:
    """Collective waits per step and rank, the stragglers, and HTA's candidates (pure); ``replay``: which replay
    finds the costliest rank (``"graph"`` or ``"segments"``)."""
    view = job_view(job, NATIVE)
    with ThreadPoolExecutor(1) as pool:
        story = pool.submit(costliest_rank, view, replay=replay)  # the longer path (the job replay), with its threads
        with one_thread():  # the tables beside it, on this thread alone
            header, sections, data, cand = _tables(job, view, candidates)
        costliest = story.result()
    header.append(f"costliest rank: {costliest.why}")
    meta = {"path": job.path, "ranks": list(job.ranks), "hta_candidates": cand}
    return Report(
        title="holotrace stragglers: who waits for whom in collectives",
        sections=sections,
        header=header,
        data=data,
        meta=meta,
        objects={"costliest_rank": costliest.as_dict()},
    )


def _tables(job, view, candidates: int) -> tuple:
    """The report's header lines, sections, data tables and HTA's candidates (everything but the costliest rank)."""
    waits = _strag.collective_waits_table(view, rules=NATIVE)
    rep = _strag.straggler_report_table(waits)
    summ = _strag.straggler_summary_table(rep)
    header = [f"job     {job.path}", f"ranks   {len(job.ranks)}"]
    sections = []
    if len(job.ranks) < 2:
        lines = ["one rank: nobody to wait for"]
    elif rep.empty:
        lines = ["no communication kernel occurs on two or more ranks"]
    else:
        lines = []
    overall = Table(
        {
            "rank": summ["rank"],
            "steps as straggler": summ["steps_as_straggler"],
            "others waited ms": summ["waited_for_us"] / 1e3,
            "it waited ms": summ["wait_us"] / 1e3,
        },
        n=len(summ),
    )
    sections.append(
        Section(
            "straggler_summary",
            "Who the others wait for (all steps)",
            overall,
            max_rows=16,
            digits={"others waited ms": 3, "it waited ms": 3},
            lines=lines,
            notes=["others waited = time other ranks spent in collectives this rank arrived at last"]
            if not rep.empty
            else [],
        )
    )
    if not rep.empty:
        st = rep.take(np.asarray(rep["straggler"], dtype=bool))
        per_step = Table(
            {
                "step": st["step"],
                "straggler": st["rank"],
                "others waited ms": st["waited_for_us"] / 1e3,
                "worst collective": np.array([str(x) for x in st["worst_collective"].tolist()], dtype=object),
                "its wait ms": st["worst_collective_wait_us"] / 1e3,
            },
            n=len(st),
        )
        sections.append(
            Section(
                "stragglers_by_step",
                "Straggler per step (evidence: the collective waited on most)",
                per_step,
                max_rows=20,
                digits={"others waited ms": 3, "its wait ms": 3},
                notes=["step -1 = collectives outside any ProfilerStep"],
            )
        )
    cand = _strag.potential_stragglers(view, rules=NATIVE, num_candidates=candidates) if len(job.ranks) >= 2 else []
    header.append(f"HTA late-start candidates: {cand if cand else 'none'}")
    return header, sections, {"straggler_summary": summ, "straggler_report": rep, "collective_waits": waits}, cand
