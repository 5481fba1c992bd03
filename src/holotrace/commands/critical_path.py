"""``holotrace critical-path PATH --rank R --step N``: the critical path of one step (or a range), by what bounds it.

With ``--output DIR`` the step tables and the overlaid trace (critical events flagged, flow arrows for the path's
dependency, launch and sync edges) are written into DIR, never beside the trace: one step →
``DIR/overlaid_critical_path_<trace file>``, several → ``DIR/step-<N>/overlaid_critical_path_<trace file>``."""

from __future__ import annotations

import argparse
import os
from collections import namedtuple

from holotrace.analysis import critical_path as _cp
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE
from holotrace.model.filter import parse_int_ranges

__all__ = ["COMMAND", "add_arguments", "run", "parse_steps"]


def parse_steps(text):
    """``"12"`` → [12]; ``"10-14"`` → [10..14]; None → every step (bad text: a one-line error)."""
    if text is None:
        return None
    return list(parse_int_ranges(text, "step"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--rank", type=int, default=None, help="rank to analyse (default: the job's lowest rank)")
    p.add_argument("--step", default=None, metavar="N|A-B", help="ProfilerStep number or range (default: every step)")
    p.add_argument(
        "--job",
        action="store_true",
        help="the job's critical path across every rank (job graph replay) instead of one rank's",
    )


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    if getattr(args, "job", False):
        return emit(job_report(job, parse_steps(args.step), getattr(args, "output", None)), args)
    rank = min(job.ranks) if args.rank is None else args.rank  # a job of one rank 34 is analysed on rank 34
    if rank not in job.ranks:
        raise AnalysisError(
            f"no rank {rank} in this job", path=args.path, fix=f"use --rank with one of {list(job.ranks)}"
        )
    steps = parse_steps(args.step)
    paths: dict = {}
    try:
        df = _cp.per_step(job, rank=rank, steps=steps, rules=NATIVE, paths=paths)
    except AnalysisError as exc:  # no such step on the rank
        raise AnalysisError(exc.problem, path=args.path, fix="pass --step with a step number of that rank") from None
    df = df.assign(duration=df.duration / 1e3, path_length=df.path_length / 1e3).rename(
        columns={"duration": "duration us", "path_length": "path us", "pct": "% of path"}
    )
    notes = []
    zeroed = {s: cp for s, cp in paths.items() if cp.zeroed_edges}
    if zeroed:
        on_path = sum(cp.zeroed_on_path for cp in zeroed.values())
        notes.append(
            f"zeroed_edges: dependencies of negative duration (a GPU operation starting before its cause "
            f"on the CPU: the rank's clocks disagree) counted as 0 in {len(zeroed)} of {len(paths)} "
            f"step(s); {on_path} lie on the path, whose length they change"
        )
    report = Report(title=f"Critical path, rank {rank}", sections=[Section("steps", "By step and bound", df, notes)])
    if getattr(args, "output", None):
        from holotrace.render.critical_path_overlay import overlay_path

        trace = job.rank(rank).file
        done = [s for s, cp in paths.items() if cp.success]
        for s in done:
            out = args.output if len(done) == 1 else os.path.join(args.output, f"step-{s}")
            written = overlay_path(paths[s], trace, out)
            report.meta.setdefault("overlays", {})[str(s)] = written
            report.header.append(f"overlay of step {s}: {written}")
    return emit(report, args)


def job_report(job, steps=None, output=None) -> Report:
    """The job's cross-rank critical path per step: time by rank and edge kind, and the path's segments; with
    ``output``, the merged timeline of every rank with the path's hops as flow arrows, written into that folder."""
    from holotrace.analysis.critical_path.job_graph import build_job_graph
    from holotrace.analysis.critical_path.job_path import job_critical_path, path_summary
    from holotrace.analysis.critical_path.replay import replay

    rep = replay(build_job_graph(job))
    path = job_critical_path(rep)
    if steps is not None:
        have = rep.step_tab["step"].tolist()
        missing = sorted(set(steps) - set(have))
        if missing:
            raise AnalysisError(f"step(s) {missing} not in the job", path=job.path, fix=f"choose among {have}")
        path = path[path["step"].isin(steps)].reset_index(drop=True)
    summ = path_summary(path)
    header = [
        f"job step {int(r.step)}: {r.measured_ms:.3f} ms, ends on rank {int(r.slowest_rank)}"
        for r in map(namedtuple("Step", rep.step_tab.columns)._make, rep.step_tab.records())
        if steps is None or r.step in steps
    ]
    header += [f"note: {x}" for x in rep.graph.issues[:5]]
    sections = [
        Section("job_path_summary", "Job critical path by rank and edge kind (ms)", summ, digits={"ms": 3}),
        Section(
            "job_path",
            "Job critical path segments",
            path,
            max_rows=40,
            digits={"start_ms": 3, "dur_ms": 3},
            notes=[
                "kinds: duration = an event's own time, cpu_gap = host time between calls, gpu_gap = "
                "stream idle, launch/stream/sync = waits on another thread or stream, arrive/xfer = "
                "a collective's wait for its last member and its transfer (docs/analyses.md)"
            ],
        ),
    ]
    report = Report(
        title="Critical path of the job (all ranks)",
        sections=sections,
        header=header,
        data={"job_path_summary": summ, "job_path": path, "replay": rep.step_tab},
    )
    if output:
        from holotrace.analysis.critical_path.job_path import job_path_hops
        from holotrace.render.merged_trace import write_merged_trace

        hops = job_path_hops(rep)
        if steps is not None:
            hops = hops[hops["step"].isin(steps)]
        target = os.path.join(output, "job_critical_path.pt.trace.json")
        write_merged_trace(job, target, job_path=hops)
        report.meta["timeline"] = target
        report.header.append(f"timeline with the path's {len(hops)} hops as flow arrows: {target}")
    return report


COMMAND = Command(
    name="critical-path",
    help="critical path of each step: how much of it is CPU, GPU compute, communication, launch and gap overhead",
    description="Build the dependency graph of a rank's step (CPU operators, runtime calls, GPU operations, "
    "launch, kernel-to-kernel and synchronisation edges) and break its longest path down by what "
    "bounds it. Times in microseconds (us). With --job: the job's critical path across every rank, from a "
    "replay of the whole job's dependency graph (times in ms).",
    add_arguments=add_arguments,
    run=run,
)
