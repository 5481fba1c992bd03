"""``holotrace timeline PATH -o merged.json.gz``: every rank in one Chrome-trace file for Perfetto UI.

All ranks on the job's common clock, one process per rank with its CPU threads and GPU streams inside,
the findings as instant events. ``--ranks`` / ``--steps`` keep only those ranks and steps, ``--gpu-only``
only GPU work, to keep the file small.
"""

from __future__ import annotations

import argparse

from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError

__all__ = ["COMMAND", "add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the Chrome-trace file to write (.json, or .json.gz to compress)")
    p.add_argument("--gpu-only", action="store_true", help="only GPU work (kernels, copies, sets and GPU annotations)")
    p.add_argument("--no-findings", action="store_true", help="leave out the findings' instant events")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from holotrace.render.merged_trace import write_merged_trace

    if Path(args.output).is_dir():
        raise AnalysisError("is a folder", path=args.output, fix="give a file name, e.g. -o merged.json.gz")
    job = load_job(args)
    n, size = write_merged_trace(job, args.output, gpu_only=args.gpu_only, findings=not args.no_findings)
    print(f"wrote {args.output}: {n:,} events of {len(job.ranks)} rank(s), {size / 1e6:.2f} MB "
          "(open it in https://ui.perfetto.dev)")
    return 0


COMMAND = Command(
    name="timeline",
    help="merge every rank into one Chrome-trace file on the common clock, findings as instant events (Perfetto)",
    description="Write one Chrome-trace (JSON) file holding every rank of the job on the job's common clock: one "
                "process per rank, its CPU threads and GPU streams inside, each finding as an instant event. "
                "Open it in Perfetto UI to see all ranks side by side. --ranks, --steps and --gpu-only keep it "
                "small; a name ending in .gz is gzip-compressed.",
    add_arguments=add_arguments,
    run=run,
)
