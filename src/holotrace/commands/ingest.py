"""``holotrace ingest PATH --output DIR [--ranks 0-511]``: per-rank Arrow tables and summaries, for later.

Each selected rank's file is read on the executor (``--executor local|ray``), its model columns are
written as Arrow IPC and its summary beside them (see :mod:`holotrace.scale.store`); ``holotrace
summary DIR`` reduces the summaries later, naming the ranks not ingested. Several ingest runs over
disjoint ``--ranks`` ranges (a job array) may write into one folder at once.
"""

from __future__ import annotations

import argparse

import pandas as pd

from holotrace.commands._dest import writes
from holotrace.commands._load import add_executor_options, add_rules_option
from holotrace.commands._output import Report, Section, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError

__all__ = ["COMMAND", "add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="folder of per-rank trace files, or one trace file (.json or .json.gz)")
    p.add_argument(
        "--output", required=True, metavar="DIR", help="folder to write the per-rank tables and summaries into"
    )
    writes(p, "output", "folder")
    p.add_argument("--ranks", metavar="LIST", help="ingest only these ranks, e.g. 0-511 (default: all)")
    g = p.add_argument_group("loading")
    g.add_argument(
        "--cache-dir", metavar="DIR", help="also read/write each file's cache entry in DIR (every worker must reach it)"
    )
    g.add_argument("--workers", type=int, metavar="N", help="local processes (default: every core)")
    g.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    g.add_argument("--debug", action="store_true", help="show tracebacks")
    add_rules_option(g)
    add_executor_options(g)
    p.add_argument("--format", choices=("table", "json", "csv", "markdown"), default="table", help="what to print")
    p.add_argument("--width", type=int, default=None, metavar="N", help="table width in characters")


def run(args: argparse.Namespace) -> int:
    from holotrace.exec.executor import get_executor
    from holotrace.model.filter import parse_int_ranges
    from holotrace.scale import ingest

    ranks = parse_int_ranges(args.ranks, "rank") if args.ranks is not None else None
    with get_executor(args.executor, address=args.ray_address, workers=args.workers) as ex:
        res = ingest(
            args.path,
            args.output,
            executor=ex,
            ranks=ranks,
            cache=args.cache_dir is not None,
            cache_dir=args.cache_dir,
            progress_bar=False if args.quiet else None,
            rules=args.rules,
        )
    if not res["ranks"] and not res["failed"] and not res.get("kept"):
        raise AnalysisError(
            f"--ranks {args.ranks} selects no trace file",
            path=args.path,
            fix="check the job's ranks with holotrace info PATH",
        )
    failed = pd.DataFrame(res["failed"], columns=["rank", "file", "problem"])
    kept = f"; {len(res['kept'])} already there from the same file(s), kept" if res.get("kept") else ""
    lines = [
        f"ingested {len(res['ranks'])} rank(s) into {args.output}"
        + kept
        + (f"; {len(failed)} could not be read" if len(failed) else ""),
        f"next: holotrace summary {args.output}",
    ]
    report = Report(
        title="holotrace ingest",
        header=[f"job     {args.path}"],
        sections=[
            Section("ingest", "Ingested", pd.DataFrame(), lines=lines),
            Section("failed", "Ranks whose file could not be read", failed, lines=[] if len(failed) else ["none"]),
        ],
        data={"failed": failed},
        meta={"path": args.path, "output": args.output, "ranks": res["ranks"]},
    )
    rc = emit(report, _emit_args(args))
    return 1 if len(failed) else rc


def _emit_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(format=args.format, output=None, output_format="csv", width=args.width)


COMMAND = Command(
    name="ingest",
    help="read a job's ranks (or a range of them) into per-rank Arrow tables and summaries, for 'summary DIR'",
    description="Reads each selected rank's trace file on the executor (--executor local|ray), writes its model "
    "columns as Arrow IPC and its per-rank summary into DIR/rank-NNNNNN/, and a manifest of the run. "
    "Run several ingests over disjoint --ranks ranges (e.g. a Slurm job array) into one folder, then "
    "'holotrace summary DIR' reduces what was ingested and names the ranks still missing.",
    add_arguments=add_arguments,
    run=run,
)
