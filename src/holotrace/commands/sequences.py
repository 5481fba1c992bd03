"""``holotrace sequences PATH --op NAME``: the kernel sequences an operator launches, most frequent first.

For every instance of the operator (or user annotation) — the outermost match
when matches nest — the GPU kernels launched beneath it, in start order, form
a pattern; identical patterns are counted. With ``--overlay DIR`` a copy of
the rank's trace with the top patterns marked (``args.Patterns``, searchable
in Perfetto / chrome://tracing) is written to ``DIR``; the input is never
modified. Works on traces whose call stacks HTA cannot build.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import pandas as pd

from holotrace.analysis import sequences as _seq
from holotrace.commands._dest import writes
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE
from holotrace.text import fit_names, structural_forms

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--op", required=True, metavar="NAME", help="operator or annotation name to look for")
    p.add_argument(
        "--match",
        choices=("substring", "exact", "regex"),
        default="substring",
        help="how --op matches event names (default substring, as HTA)",
    )
    p.add_argument("--rank", type=int, default=None, help="rank to analyse (default: the lowest)")
    p.add_argument(
        "--min-len", type=int, default=3, metavar="N", help="least number of kernels under an instance (default 3)"
    )
    p.add_argument("--top", type=int, default=5, metavar="N", help="patterns to show and overlay (default 5)")
    p.add_argument(
        "--hta-roots",
        action="store_true",
        help="HTA's root rule: only matches at the shallowest call depth (default: outermost matches)",
    )
    p.add_argument("--overlay", metavar="DIR", help="write the trace with the top patterns marked into DIR")
    writes(p, "overlay", "folder")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    report = build_report(
        job,
        args.op,
        rank=args.rank,
        min_pattern_len=args.min_len,
        top=args.top,
        match=args.match,
        roots="hta" if args.hta_roots else "outermost",
        overlay_dir=args.overlay,
        name_width=None if getattr(args, "wide", False) else 40,
    )
    return emit(report, args)


COMMAND = Command(
    name="sequences",
    help="most frequent GPU kernel sequences launched under an operator or annotation",
    description="Find every instance of an operator (or user annotation) whose name contains --op, collect the "
    "GPU kernels launched beneath it in start order, and count identical sequences. Durations are "
    "microseconds summed over the instances: GPU = kernel time, CPU = the operator's own time.",
    add_arguments=add_arguments,
    run=run,
)


def _labels(patterns, width: Optional[int]) -> list[str]:
    """``operator > kernel > …`` per pattern, the kernel names of all patterns fitted together (two different
    kernels never print alike, so two different patterns never do)."""
    split = [p.split("|") for p in patterns]
    kernels = list(dict.fromkeys(k for parts in split for k in parts[1:]))
    if width is not None:
        # several names on one line: without `void` and argument lists from the start, unless that makes two alike
        bare = [structural_forms(k)[1] for k in kernels]
        short = dict(zip(kernels, fit_names(bare if len(set(bare)) == len(bare) else kernels, width)))
    else:
        short = dict(zip(kernels, fit_names(kernels, None)))
    return [" > ".join([fit_names([parts[0]], None)[0]] + [short[k] for k in parts[1:]]) for parts in split]


def build_report(
    job,
    op: str,
    *,
    rank=None,
    min_pattern_len: int = 3,
    top: int = 5,
    match: str = "substring",
    roots: str = "outermost",
    overlay_dir=None,
    name_width: Optional[int] = 40,
) -> Report:
    """Find the patterns and lay out the report; writes the overlay file when ``overlay_dir`` is given."""
    if not op:
        raise AnalysisError("--op needs a non-empty operator name")
    r = job.ranks[0] if rank is None else int(rank)
    res = _seq.frequent_kernel_sequences(
        job, op, rules=NATIVE, rank=r, min_pattern_len=min_pattern_len, match=match, roots=roots
    )
    pats = res.patterns
    header = [
        f"job     {job.path}",
        f"rank    {r}",
        f"op      {op!r} ({match} match, {roots} instances, at least {min_pattern_len} kernels)",
    ]
    shown = pd.DataFrame(
        {
            "count": pats["count"].to_numpy(),
            "GPU ms": pats["GPU kernel duration (us)"].to_numpy() / 1e3,
            "CPU ms": pats["CPU op duration (us)"].to_numpy() / 1e3,
            "kernels": [p.count("|") for p in pats["pattern"]],
            "sequence": _labels(pats["pattern"].tolist(), name_width),
        }
    )
    lines = []
    if pats.empty:
        lines.append(
            f"no instance of {op!r} launches {min_pattern_len} or more kernels on rank {r} (try --min-len 1, or --match regex)"
        )
    if overlay_dir and not pats.empty:
        d = Path(overlay_dir)
        d.mkdir(parents=True, exist_ok=True)
        header.append(f"overlay {_seq.write_overlay(res, job.rank(r).file, d, top)}")
    section = Section(
        "sequences",
        f"Most frequent kernel sequences under {op}",
        shown,
        [
            (
                "sequence = operator > kernels in start order (kernel names shortened for display; --wide and "
                "--format csv/json have the full names)"
            )
        ],
        digits={"GPU ms": 3, "CPU ms": 3},
        max_rows=top,
        lines=lines,
    )
    meta = {"path": job.path, "rank": r, "op": op, "match": match, "roots": roots, "min_pattern_len": min_pattern_len}
    return Report(
        title="holotrace sequences: kernel sequences under an operator",
        sections=[section],
        header=header,
        data={"sequences": pats},
        meta=meta,
    )
