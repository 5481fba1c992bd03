"""``holotrace advise PATH``: what to fix first, ranked by the step time each fix would save on the critical path."""

from __future__ import annotations

import argparse

from holotrace.analysis.critical_path.what_if import what_if
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.model.classify import NATIVE
from holotrace.model.filter import parse_int_ranges

__all__ = ["COMMAND", "add_arguments", "run"]

_TEXT = {"launch_overhead": "removing launch overhead", "kernel_gaps": "removing kernel-to-kernel gaps",
         "communication": "overlapping communication with compute", "top_kernels": "making the top kernels faster",
         "data_loading": "removing data loading"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--rank", type=int, default=0, help="rank to analyse (default 0)")
    p.add_argument("--step", default=None, metavar="N|A-B", help="ProfilerStep number or range (default: every step)")
    p.add_argument("--speedup", type=float, default=2.0, metavar="K", help="speed-up of the top kernels (default 2)")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows shown (default 10)")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    df = what_if(job, rank=args.rank, steps=None if args.step is None else list(parse_int_ranges(args.step, "step")), rules=NATIVE, k=args.speedup)
    lines = [f"{_TEXT.get(r.fix, r.fix)} saves {r.pct:.0f}% of step {r.step} on rank {args.rank}: {r.saving:.0f} us "
             f"of {r.path_length:.0f} us ({r.evidence})" for r in df.head(3).itertuples()]
    shown = df.head(args.top).rename(columns={"saving": "saving us", "pct": "% of path", "path_length": "path us"})
    report = Report(title="What to fix first", sections=[Section("fixes", "Ranked fixes", shown)], header=lines,
                    data={"fixes": df})
    return emit(report, args)


COMMAND = Command(
    name="advise",
    help="what to fix first: counterfactual savings on each step's critical path, ranked",
    description="Re-time each step's critical-path graph with launch overhead removed, kernel gaps removed, "
                "communication overlapped, the top kernels K x faster and (with data loading) data loading "
                "removed, and rank the fixes by the step time they save. Times in microseconds (us).",
    add_arguments=add_arguments,
    run=run,
)
