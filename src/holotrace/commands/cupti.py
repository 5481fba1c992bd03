"""``holotrace cupti PATH``: GPU performance counters (CUPTI range-profiler mode) per operator.

Each CUPTI range is paired with its kernel launch; the counters of the SASS floating-point instruction
classes give FLOPs, the DRAM byte counters (when recorded) the arithmetic intensity: per operator (the
outermost ``cpu_op`` around the launch, or the innermost with ``--by bottom``) and per kernel.
"""

from __future__ import annotations

import argparse

import pandas as pd

from holotrace.analysis import cupti as _cupti
from holotrace.commands._load import add_load_options, select_job
from holotrace.commands._load import load_path as load
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.model.classify import NATIVE

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument(
        "--by",
        choices=("top", "bottom"),
        default="top",
        help="attribute kernels to the outermost (top, default) or innermost (bottom) operator",
    )
    p.add_argument("--top", type=int, default=20, metavar="N", help="operators shown (default 20)")


def run(args: argparse.Namespace) -> int:
    job = select_job(
        load(
            args.path,
            strict=args.strict,
            cache=not args.no_cache,
            cache_dir=args.cache_dir,
            workers=args.workers,
            all_args=True,
            progress_bar=False if args.quiet else None,
            rules=args.rules,
        ),
        args,
    )
    return emit(build_report(job, by=args.by, top=args.top, strict=args.strict), args)


def build_report(job, *, by: str = "top", top: int = 20, strict: bool = False) -> Report:
    """Counters of every rank, FLOPs per operator and per kernel (pure but for reading counter values)."""
    col = "top_level_op" if by == "top" else "bottom_level_op"
    frames = _cupti.counters_with_operators(job, rules=NATIVE, strict=strict)
    header, ops_parts, kern_parts = [], [], []
    for r, f in frames.items():
        kernels, ops = _cupti.flops(f, by=col)
        ops_parts.append(ops.assign(rank=r))
        kern_parts.append(kernels.assign(rank=r))
    if not frames:
        header.append(
            "no CUPTI counter ranges (category cuda_profiler_range) could be paired with launches: "
            "record with the CUPTI range profiler (torch.profiler experimental_config profiler_metrics)"
        )
    ops = pd.concat(ops_parts, ignore_index=True) if ops_parts else pd.DataFrame()
    kernels = pd.concat(kern_parts, ignore_index=True) if kern_parts else pd.DataFrame()
    shown = ops
    if len(ops):
        shown = ops[["rank", col, "kernels", "flops", "dram_bytes", "arithmetic_intensity"]].copy()
        shown["GFLOP"] = shown.pop("flops") / 1e9
        shown = shown.rename(columns={col: "operator", "dram_bytes": "DRAM bytes", "arithmetic_intensity": "FLOP/byte"})
    kshown = kernels
    counters = (
        pd.concat(
            [
                f.drop(columns=["op_stack"]).assign(op_stack=[" > ".join(s) for s in f["op_stack"]], rank=r)
                for r, f in frames.items()
            ],
            ignore_index=True,
        )
        if frames
        else pd.DataFrame()
    )
    return Report(
        "CUPTI counters per operator",
        [
            Section(
                "operators",
                f"FLOPs per operator ({'outermost' if by == 'top' else 'innermost'} cpu_op)",
                shown,
                digits={"GFLOP": 3, "FLOP/byte": 2},
                max_rows=top,
            ),
            Section("kernels", "FLOPs per kernel", kshown, max_rows=top),
        ],
        header,
        {"operators": ops, "kernels": kernels, "counters": counters},
    )


COMMAND = Command(
    name="cupti",
    help="GPU performance counters (CUPTI range profiler) per operator: FLOPs, arithmetic intensity",
    description="Pair each CUPTI counter range with its kernel launch and the operators around it, and turn the "
    "SASS floating-point instruction counters into FLOPs (FMA = 2) per kernel and per operator, with "
    "the arithmetic intensity (FLOPs per DRAM byte) when the DRAM byte counters were recorded.",
    add_arguments=add_arguments,
    run=run,
)
