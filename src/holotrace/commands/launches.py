"""``holotrace launches PATH``: how long launching GPU work takes, and how long it waits to start.

Per rank: launch calls, CPU launch time, GPU time and launch delay (time from
the end of the launch call to the start of the GPU work), with the three sets
HTA plots: short kernels (the GPU work is shorter than its launch call),
runtime outliers (launch calls longer than ``--runtime-cutoff``) and
launch-delay outliers (delay above ``--launch-delay-cutoff``). Every step of
the trace is analysed (nothing is dropped).
"""

from __future__ import annotations

import argparse

import pandas as pd

from holotrace.analysis import launches as _launches
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.model.classify import NATIVE

__all__ = ["COMMAND", "add_arguments", "build_report", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument(
        "--runtime-cutoff",
        type=float,
        default=50,
        metavar="US",
        help="launch calls longer than this are runtime outliers (default 50 us)",
    )
    p.add_argument(
        "--launch-delay-cutoff",
        type=float,
        default=100,
        metavar="US",
        help="launches whose GPU work starts later than this after the call are delay outliers (default 100 us)",
    )
    p.add_argument("--no-memory", action="store_true", help="leave out memcpy/memset launches")
    p.add_argument("--top", type=int, default=10, metavar="N", help="number of worst launches to list (default 10)")


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    report = build_report(
        job,
        runtime_cutoff=args.runtime_cutoff,
        launch_delay_cutoff=args.launch_delay_cutoff,
        include_memory_events=not args.no_memory,
        top=args.top,
    )
    return emit(report, args)


COMMAND = Command(
    name="launches",
    help="kernel launch statistics: launch time, GPU time, launch delay and their outliers",
    description="Pair every CPU launch call (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel, memcpy/memset, "
    "graph launches, MTIA runFunction) with the GPU work it queued. Shows per rank the launch "
    "count, launch-call and GPU durations, the launch delay (end of the call to the start on the "
    "GPU), the number of short kernels (GPU time below the launch call's), runtime outliers and "
    "launch-delay outliers, and the worst individual launches. Times in microseconds (us).",
    add_arguments=add_arguments,
    run=run,
)


def _worst(df: pd.DataFrame, col: str, flag: str, top: int) -> pd.DataFrame:
    sel = _launches.worst_launches(df, col, flag, top)
    return pd.DataFrame(
        {
            "rank": sel["rank"].to_numpy(),
            "step": sel["iteration"].to_numpy(),
            "at ms": sel["ts"].to_numpy() / 1e3,
            "launch": sel["launch"].to_numpy(),
            "kernel": sel["kernel"].astype(str).to_numpy(),
            "cpu us": sel["cpu_duration"].to_numpy(),
            "gpu us": sel["gpu_duration"].to_numpy(),
            "delay us": sel["launch_delay"].to_numpy(),
        }
    )


_DELAY_SHOWN = ["rank", "step", "at ms", "kernel", "cpu us", "delay us"]
_SLOW_SHOWN = ["rank", "step", "at ms", "launch", "kernel", "cpu us"]


def build_report(
    job,
    *,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
    top: int = 10,
) -> Report:
    """Compute launch statistics of every rank and lay out the report (pure)."""
    stats = _launches.launch_stats(
        job,
        rules=NATIVE,
        runtime_cutoff=runtime_cutoff,
        launch_delay_cutoff=launch_delay_cutoff,
        include_memory_events=include_memory_events,
        details=True,
    )
    summary = _launches.launch_summary(stats)
    allrows = _launches.all_launches(stats)
    digits = {
        "cpu mean us": 1,
        "cpu max us": 1,
        "gpu mean us": 1,
        "delay median us": 1,
        "delay p95 us": 1,
        "delay max us": 1,
        "at ms": 3,
        "cpu us": 1,
        "gpu us": 1,
        "delay us": 1,
    }
    shown = pd.DataFrame(
        {
            "rank": summary["rank"],
            "launches": summary["launches"],
            "cpu avg": summary["cpu_mean_us"],
            "gpu avg": summary["gpu_mean_us"],
            "delay p50": summary["delay_median_us"],
            "delay max": summary["delay_max_us"],
            "short": summary["short_kernels"],
            "slow": summary["runtime_outliers"],
            "late": summary["launch_delay_outliers"],
        }
    )
    digits.update({"cpu avg": 1, "gpu avg": 1, "delay p50": 1, "delay max": 1})
    sections = [
        Section(
            "launch_summary",
            "Kernel launches per rank (us)",
            shown,
            [
                (
                    f"short = GPU work shorter than its launch call (launch-bound); slow = launch call over "
                    f"{runtime_cutoff:g} us; late = GPU work started over {launch_delay_cutoff:g} us after the "
                    f"call ended (queued behind other work)"
                )
            ],
            digits=digits,
        )
    ]
    data = {"launch_summary": summary, "launches": allrows}
    if allrows.empty:
        sections[0].notes.append("no launch call paired with GPU work (CPU-only trace, or no correlation ids)")
    else:
        worst = _worst(allrows, "launch_delay", "launch_delay_outlier", top)
        sections.append(
            Section(
                "worst_launch_delays",
                f"Worst launch delays (> {launch_delay_cutoff:g} us)",
                worst[_DELAY_SHOWN],
                digits=digits,
                lines=[] if len(worst) else ["none"],
            )
        )
        slow = _worst(allrows, "cpu_duration", "runtime_outlier", top)
        sections.append(
            Section(
                "slowest_launch_calls",
                f"Slowest launch calls (> {runtime_cutoff:g} us)",
                slow[_SLOW_SHOWN],
                digits=digits,
                lines=[] if len(slow) else ["none"],
            )
        )
        data["worst_launch_delays"] = worst
        data["slowest_launch_calls"] = slow
    header = [f"job     {job.path}", f"ranks   {len(job.ranks)}"]
    meta = {
        "path": job.path,
        "ranks": list(job.ranks),
        "runtime_cutoff_us": runtime_cutoff,
        "launch_delay_cutoff_us": launch_delay_cutoff,
        "include_memory_events": include_memory_events,
    }
    return Report(
        title="holotrace launches: launch time and launch delay", sections=sections, header=header, data=data, meta=meta
    )
