"""``holotrace advise PATH``: what to fix first in the whole job, ranked by the job step time each fix would save.

The job graph of every rank is replayed (``holotrace.analysis.critical_path.advice``); each fix re-times it, and
its saving is stated in ms and in % of the measured job step (a step ends when its slowest rank ends). Above 64
ranks (or with ``--replay segments``) the scale-out replay answers instead, mapped over the rank files on the
executor (``holotrace.scale.segment_run``)."""

from __future__ import annotations

import argparse
from collections import namedtuple

import numpy as np

from holotrace.analysis.critical_path.advice import job_advice, parse_combination
from holotrace.analysis.critical_path.job_what_if import WhatIfOptions
from holotrace.commands._load import (
    add_load_options,
    add_replay_option,
    load_job,
    replay_of,
    segment_advice_of,
    trace_ranks,
)
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.model.filter import parse_int_ranges
from holotrace.table import Table
from holotrace.text import fit_name, fit_names

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]

_TEXT = {
    "straggler": "bringing the slowest rank to the median",
    "communication": "overlapping communication",
    "launch_overhead": "cutting launch overhead to its floor",
    "host_sync": "removing host-device synchronisation",
    "kernel": "making a kernel faster",
    "data_loading": "removing data loading",
    "kernel_gaps": "removing kernel-to-kernel gaps",
    "cpu_op": "making a CPU operator faster",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--rank", type=int, default=None, help="only fixes job-wide or on this rank (default: whole job)")
    p.add_argument("--step", default=None, metavar="N|A-B", help="ProfilerStep number or range (default: every step)")
    p.add_argument(
        "--speedup",
        type=float,
        default=2.0,
        metavar="K",
        help="speed-up tried for kernels and CPU operators (default 2)",
    )
    p.add_argument(
        "--comm-speedup",
        type=float,
        default=None,
        metavar="K",
        help="communication K x faster instead of perfectly overlapped",
    )
    p.add_argument(
        "--launch-floor-us", type=float, default=2.0, metavar="US", help="a launch call's cost at its floor (default 2)"
    )
    p.add_argument(
        "--kernel", default=None, metavar="TEXT", help="try the kernels whose name contains TEXT (a kernel class)"
    )
    p.add_argument(
        "--what-if",
        default=None,
        metavar="A,B[;C,D]",
        help="also try these fixes together, e.g. 'straggler,comm-overlap'",
    )
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows shown (default 10)")
    add_replay_option(p)


def run(args: argparse.Namespace) -> int:
    path, found = trace_ranks(args)
    segments = path is not None and replay_of(args, len(found)) == "segments"
    job = None if segments else load_job(args)
    have = found if segments else list(job.ranks)
    if args.rank is not None and args.rank not in have:
        raise AnalysisError(f"no rank {args.rank} in this job", path=args.path, fix=f"use --rank with one of {have}")
    for name in ("speedup", "comm_speedup"):
        v = getattr(args, name)
        if v is not None and not v > 1.0:
            raise AnalysisError(
                f"--{name.replace('_', '-')} must be above 1 (got {v})", path=args.path, fix="pass a factor such as 2"
            )
    try:
        combine = parse_combination(args.what_if)
        steps = None if args.step is None else list(parse_int_ranges(args.step, "step"))
        opts = WhatIfOptions(
            speedup=args.speedup,
            comm_speedup=args.comm_speedup,
            launch_floor_us=args.launch_floor_us,
            kernel_match=args.kernel,
        )
        kw = dict(ranks=None if args.rank is None else [args.rank], steps=steps, options=opts, combine=combine)
        advice = segment_advice_of(args, path, found, **kw) if segments else job_advice(job, **kw)
    except AnalysisError as exc:  # a --what-if name or --step the job does not have: name the job
        if exc.path is not None:
            raise
        raise AnalysisError(exc.problem, path=args.path, fix=exc.fix) from None
    return emit(build_report(advice, top=args.top), args)


NAME_WIDTH = 60  # a kernel or operator named in a line: shortened by the one formatter (--format json: in full)


def _ms(x: float) -> str:
    """A time of the advice in ms (3 decimals), or in us when under 10 us and not 0 (a step of a few us)."""
    return f"{x:.3f} ms" if x == 0 or abs(x) >= 0.01 else f"{x * 1e3:.3g} us"


def _line(r) -> str:
    what = _TEXT.get(r.fix, r.fix.replace("+", " and "))
    who = f" on rank {r.rank}" if r.rank is not None and r.rank == r.rank else ""
    target = f" ({fit_name(r.target, NAME_WIDTH)})" if isinstance(r.target, str) and r.target else ""
    if r.step is None or r.step != r.step:
        step = "step"
    else:
        step = "trace (no ProfilerStep)" if int(r.step) == -1 else f"step {r.step}"
    ev = "; ".join(fit_names(list(r.evidence), NAME_WIDTH)) if r.evidence else ""  # never two alike
    return (
        f"{what}{target}{who} saves {_ms(r.saving_ms)} per {step} ({r.saving_pct:.1f}% of the measured job step, "
        f"predicted {_ms(r.predicted_step_ms)})" + (f": {ev}" if ev and not target else "")
    )


def build_report(advice, *, top: int = 10) -> Report:
    """The advice as lines, tables and the JSON contract (``fixes``, ``replay``, ``costliest_rank``)."""
    f, rep = advice.fix_table, advice.replay_table
    row = namedtuple("Fix", f.columns)
    lines = [_line(row(*r)) for r in f.head(3).records()]
    err = np.abs(np.asarray(rep["error_pct"], dtype=np.float64)) if len(rep) else np.empty(0)
    if (~np.isnan(err)).any():
        worst = int(np.nanargmax(err))  # the first of equal maxima
        if len(rep) == 1:
            one = int(rep["step"][0])
            what = "the whole trace (no ProfilerStep)" if one == -1 else f"step {one}"
            lines.append(f"replay of {what} reproduces its measured time within {err[worst]:.2f}%")
        else:
            lines.append(
                f"replay of {len(rep)} steps reproduces the measured job step within "
                f"{err[worst]:.2f}% (worst: step {int(rep['step'][worst])})"
            )
    c = advice.costliest
    lines.append(f"costliest rank: {c.why}")
    lines += [f"note: {x}" for x in advice.issues[:5]]
    rank_col = _or_none(f["rank"])
    fixes = Table(
        {
            "fix": f["fix"],
            "rank": rank_col,
            "step": _or_none(f["step"]),
            "saving_ms": f["saving_ms"],
            "saving_pct": f["saving_pct"],
            "predicted_step_ms": f["predicted_step_ms"],
            "evidence": f["evidence"],
        }
    )
    shown = Table(
        {
            "fix": f["fix"],
            "rank": rank_col,
            "target / evidence": _objects(
                [t if isinstance(t, str) and t else ", ".join(e) for t, e in zip(f["target"], f["evidence"])]
            ),
            "saving ms": f["saving_ms"],
            "% of step": f["saving_pct"],
            "predicted ms": f["predicted_step_ms"],
        }
    )
    sections = [
        Section(
            "fixes",
            "Ranked fixes (mean over the steps)",
            shown.head(top),
            digits={"saving ms": 3, "% of step": 1, "predicted ms": 3},
        ),
        Section(
            "replay", "Replay of the job's steps", rep, digits={"measured_ms": 3, "replayed_ms": 3, "error_pct": 2}
        ),
    ]
    return Report(
        title="What to fix first",
        sections=sections,
        header=lines,
        data={"fixes": fixes, "replay": rep},
        objects={"costliest_rank": c.as_dict()},
    )


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _or_none(a: np.ndarray) -> np.ndarray:
    """A column of values as Python objects, a missing value (None or NaN) as None (JSON ``null``)."""
    if not len(a):
        return a
    return _objects([None if x is None or x != x else x for x in a.tolist()])


COMMAND = Command(
    name="advise",
    help="what to fix first in the whole job: fixes ranked by the job step time they save on a replay of all ranks",
    description="Build the dependency graph of every rank (CPU threads, launches, GPU streams, stream and host "
    "synchronisation, collectives matched across ranks), replay the measured steps, and re-time them "
    "with each fix: the slowest rank at the median, communication overlapped, launch overhead at its "
    "floor, host-device synchronisation removed, a kernel or CPU operator K x faster, data loading or "
    "kernel gaps removed. Savings in ms and in % of the measured job step.",
    add_arguments=add_arguments,
    run=run,
)
