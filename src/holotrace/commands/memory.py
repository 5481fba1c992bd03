"""``holotrace memory PATH``: device memory from the trace's ``[memory]`` events.

Per rank and device: the peak of allocated bytes, when it happened (ms from the rank's first memory event),
reserved bytes, and the CPU operators live at the peak; then the operators that allocate the most. Needs a
trace recorded with ``profile_memory=True``.
"""

from __future__ import annotations

import argparse

import pandas as pd

from holotrace.analysis import memory as _memory
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]

_MIB = 1024.0**2


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--top", type=int, default=10, metavar="N", help="operators to list per device (default 10)")


def run(args: argparse.Namespace) -> int:
    return emit(build_report(load_job(args), top=args.top), args)


COMMAND = Command(
    name="memory",
    help="device memory: peak allocated/reserved per rank and device, operators live at the peak",
    description="Read the [memory] events the profiler writes with profile_memory=True (allocation, free, "
    "bytes, device, allocator totals). Shows per rank and device the peak allocated memory, when "
    "it happened, reserved memory, the CPU operators live at the peak, and the operators that "
    "allocate the most. Sizes in MiB.",
    add_arguments=add_arguments,
    run=run,
)


def build_report(job, *, top: int = 10) -> Report:
    """Compute the memory peaks and allocations by operator, and lay out the report (pure)."""
    peaks = _memory.memory_peaks(job)
    by_op = _memory.allocations_by_operator(job)
    timeline = _memory.memory_timeline(job)
    header = [f"job     {job.path}", f"ranks   {len(job.ranks)}"]
    data = {"memory_peaks": peaks, "allocations_by_operator": by_op, "memory_timeline": timeline}
    meta = {"path": job.path, "ranks": list(job.ranks)}
    if peaks.empty:
        sec = Section(
            "memory_peaks",
            "Memory peaks",
            peaks,
            lines=["no [memory] events in this trace (record with torch.profiler.profile(profile_memory=True))"],
        )
        return Report(
            title="holotrace memory: peak memory per device", sections=[sec], header=header, data=data, meta=meta
        )
    first = timeline.groupby(["rank", "device"])["ts"].min()
    at = [(row.peak_ts - first[(row.rank, row.device)]) / 1e6 for row in peaks.itertuples(index=False)]
    reserved = peaks["peak_reserved"].to_numpy()
    shown = pd.DataFrame(
        {
            "rank": peaks["rank"],
            "device": peaks["device"],
            "peak MiB": peaks["peak_allocated"] / _MIB,
            "at ms": at,
            "reserved MiB": [r / _MIB if r >= 0 else float("nan") for r in reserved],
            "events": peaks["events"],
            "live at peak": peaks["live_operators"],
        }
    )
    digits = {"peak MiB": 1, "at ms": 3, "reserved MiB": 1, "MiB": 1}
    sections = [
        Section(
            "memory_peaks",
            "Peak allocated memory per rank and device",
            shown,
            digits=digits,
            notes=[
                "at ms = time from the device's first memory event; reserved = the allocator's "
                "reserved total at the peak (blank when the trace has no totals)"
            ],
        )
    ]
    top_ops = by_op.groupby(["rank", "device"], sort=True, group_keys=False).head(top)
    sections.append(
        Section(
            "allocations_by_operator",
            f"Operators allocating the most (top {top} per device)",
            pd.DataFrame(
                {
                    "rank": top_ops["rank"],
                    "device": top_ops["device"],
                    "operator": top_ops["operator"].replace("", "(outside any operator)"),
                    "allocs": top_ops["allocations"],
                    "MiB": top_ops["alloc_bytes"] / _MIB,
                }
            ),
            digits=digits,
        )
    )
    return Report(
        title="holotrace memory: peak memory per device", sections=sections, header=header, data=data, meta=meta
    )
