"""``holotrace critical-path PATH --rank R --step N``: the critical path of one step (or a range), by what bounds it.

With ``--output DIR`` the step tables and the overlaid trace (critical events flagged, flow arrows for the path's
dependency, launch and sync edges) are written into DIR, never beside the trace: one step →
``DIR/overlaid_critical_path_<trace file>``, several → ``DIR/step-<N>/overlaid_critical_path_<trace file>``."""

from __future__ import annotations

import argparse
import os

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
    p.add_argument("--rank", type=int, default=0, help="rank to analyse (default 0)")
    p.add_argument("--step", default=None, metavar="N|A-B", help="ProfilerStep number or range (default: every step)")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    if args.rank not in job.ranks:
        raise AnalysisError(f"no rank {args.rank} in this job", path=args.path, fix=f"use --rank with one of {list(job.ranks)}")
    steps = parse_steps(args.step)
    paths: dict = {}
    try:
        df = _cp.per_step(job, rank=args.rank, steps=steps, rules=NATIVE, paths=paths)
    except ValueError as exc:
        raise AnalysisError(str(exc), path=args.path, fix="pass --step with a step number of that rank") from None
    df = df.assign(duration=df.duration / 1e3, path_length=df.path_length / 1e3).rename(
        columns={"duration": "duration us", "path_length": "path us", "pct": "% of path"})
    notes = []
    zeroed = {s: cp for s, cp in paths.items() if cp.zeroed_edges}
    if zeroed:
        on_path = sum(cp.zeroed_on_path for cp in zeroed.values())
        notes.append(f"zeroed_edges: dependencies of negative duration (a GPU operation starting before its cause "
                     f"on the CPU: the rank's clocks disagree) counted as 0 in {len(zeroed)} of {len(paths)} "
                     f"step(s); {on_path} lie on the path, whose length they change")
    report = Report(title=f"Critical path, rank {args.rank}",
                    sections=[Section("steps", "By step and bound", df, notes)])
    if getattr(args, "output", None):
        from holotrace.render.critical_path_overlay import overlay_path

        trace = job.rank(args.rank).file
        done = [s for s, cp in paths.items() if cp.success]
        for s in done:
            out = args.output if len(done) == 1 else os.path.join(args.output, f"step-{s}")
            written = overlay_path(paths[s], trace, out)
            report.meta.setdefault("overlays", {})[str(s)] = written
            report.header.append(f"overlay of step {s}: {written}")
    return emit(report, args)


COMMAND = Command(
    name="critical-path",
    help="critical path of each step: how much of it is CPU, GPU compute, communication, launch and gap overhead",
    description="Build the dependency graph of a rank's step (CPU operators, runtime calls, GPU operations, "
                "launch, kernel-to-kernel and synchronisation edges) and break its longest path down by what "
                "bounds it. Times in microseconds (us).",
    add_arguments=add_arguments,
    run=run,
)
