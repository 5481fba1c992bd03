"""``holotrace timeline PATH -o merged.json.gz``: every rank in one Chrome-trace file for Perfetto UI.

All ranks on the job's common clock, one process per rank with its CPU threads and GPU streams inside,
the findings as instant events. ``--ranks`` / ``--steps`` keep only those ranks and steps, ``--gpu-only``
only GPU work, to keep the file small. ``--critical-path`` computes the critical path of every chosen step of
every chosen rank and draws it as flow arrows between the path's events (which carry ``args.critical_path``).
"""

from __future__ import annotations

import argparse

from holotrace.commands._dest import writes
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError

__all__ = ["COMMAND", "add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the Chrome-trace file to write (.json, or .json.gz to compress)",
    )
    writes(p, "output", "file", "merged.json.gz")
    p.add_argument("--gpu-only", action="store_true", help="only GPU work (kernels, copies, sets and GPU annotations)")
    p.add_argument("--no-findings", action="store_true", help="leave out the findings' instant events")
    p.add_argument(
        "--critical-path",
        action="store_true",
        help="draw the critical path of each chosen step and rank as flow arrows (its events get "
        "args.critical_path = step)",
    )


def run(args: argparse.Namespace) -> int:
    from holotrace.render.merged_trace import write_merged_trace

    job = load_job(args)
    paths = _critical_paths(job, args) if args.critical_path else None
    n, size = write_merged_trace(
        job, args.output, gpu_only=args.gpu_only, findings=not args.no_findings, critical_paths=paths
    )
    note = ""
    if paths is not None:
        n_paths = sum(cp.success for v in paths.values() for _, cp in v)
        note = f", the critical path of {n_paths} step(s) as flows"
    print(
        f"wrote {args.output}: {n:,} events of {len(job.ranks)} rank(s){note}, {size / 1e6:.2f} MB "
        "(open it in https://ui.perfetto.dev)"
    )
    return 0


def _critical_paths(job, args) -> dict:
    """``{rank: [(step, CriticalPath), ...]}`` for the chosen steps (all of the job's when none is chosen)."""
    from holotrace.analysis.critical_path import step_paths
    from holotrace.model.classify import NATIVE
    from holotrace.model.view import job_view

    view = job_view(job, NATIVE)
    out = {}
    for r in job.ranks:
        out[r] = list(step_paths(view, rank=r, rules=NATIVE))
    if not any(out.values()):
        raise AnalysisError(
            "no ProfilerStep on the chosen ranks: no critical path to draw",
            path=job.path,
            fix="drop --critical-path, or choose ranks and steps that hold ProfilerStep ranges",
        )
    return out


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
