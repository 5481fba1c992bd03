"""``holotrace report PATH -o report.html``: one self-contained HTML file that tells the story of the job.

Findings first, then GPU time per rank, idle causes and overlap, step times and the slowest rank, top kernels
with their per-rank distributions, launch delays, queue length and memory bandwidth, the critical path with
the ranked fixes, and a zoomable GPU timeline of one step. Every number comes from the analyses under
holotrace's rules; the file inlines its style and script and opens with no network. The analyses hand the
renderer tables (:class:`~holotrace.table.Table`): no pandas is imported.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from holotrace import findings as findings_mod
from holotrace.analysis import counters, launches, steps
from holotrace.analysis.job_summary import findings_frame, summarize_job
from holotrace.analysis.timeline import gpu_timeline_table
from holotrace.commands._dest import writes
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from holotrace.render.html_file import write_html
from holotrace.table import Table

__all__ = ["COMMAND", "add_arguments", "run", "report_data", "write_report"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write (e.g. report.html)")
    writes(p, "output", "file", "report.html")
    p.add_argument("--top", type=int, default=10, metavar="N", help="number of top kernels (default 10)")
    p.add_argument(
        "--timeline-step",
        type=int,
        default=None,
        metavar="N",
        help="ProfilerStep shown on the timeline and analysed on the critical path (default: the middle step)",
    )
    p.add_argument(
        "--critical-path-rank",
        type=int,
        default=None,
        metavar="R",
        help="rank whose critical path is shown (default: the costliest rank, else the first)",
    )
    p.add_argument("--no-critical-path", action="store_true", help="leave out the critical path and the ranked fixes")
    p.add_argument(
        "--launch-delay-cutoff",
        type=float,
        default=100,
        metavar="US",
        help="launch delays above this are outliers (default 100 us)",
    )


def run(args: argparse.Namespace) -> int:
    job = load_job(args)
    data = report_data(
        job,
        top=args.top,
        timeline_step=args.timeline_step,
        critical_path=not args.no_critical_path,
        critical_path_rank=args.critical_path_rank,
        launch_delay_cutoff=args.launch_delay_cutoff,
    )
    size = write_report(data, args.output)
    print(f"wrote {args.output} ({size / 1e6:.2f} MB)")
    return 0


COMMAND = Command(
    name="report",
    help="one self-contained HTML report of the job (opens offline): findings, GPU time, steps, kernels, timeline",
    description="Write one HTML file that needs no network: the job and its findings, per-rank GPU time "
    "(compute / communication / memory / idle), idle causes, communication overlap, step times and "
    "the slowest rank, top kernels with their per-rank distributions, launch delays, queue length and "
    "memory bandwidth when recorded, the critical path of one step with the ranked fixes, and a "
    "zoomable GPU timeline of that step for every rank.",
    add_arguments=add_arguments,
    run=run,
)


def write_report(data: dict, output) -> int:
    """Render ``data`` and write it to ``output``; returns the size in bytes."""
    from holotrace.render.report import render_report

    return write_html(render_report(data), output)


_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}  # then any other


def _findings(findings) -> Table:
    """The findings that affect the numbers, and every error: errors first, then warnings, then the rest."""
    f = findings_frame(findings)
    code, severity = f["code"].tolist(), f["severity"].tolist()
    keep = np.array([c in findings_mod.AFFECTING_CODES or s == "error" for c, s in zip(code, severity)], dtype=bool)
    rows = np.flatnonzero(keep)
    order = np.array([_SEVERITY_ORDER.get(severity[i], 3) for i in rows.tolist()], dtype=np.int64)
    return f.take(rows[np.argsort(order, kind="stable")])


def _devices(job) -> str:
    """``N x device`` per device type of the ranks, the most common first (ties in rank order)."""
    counts: dict = {}
    for r in job.ranks:
        d = job.rank(r).device_type
        counts[d] = counts.get(d, 0) + 1
    return ", ".join(f"{n} x {d}" for d, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _ranks_text(job) -> str:
    r = list(job.ranks)
    text = f"{r[0]}-{r[-1]} ({len(r)})" if len(r) > 2 and r == list(range(r[0], r[-1] + 1)) else ", ".join(map(str, r))
    return text + (f", world size {job.world_size}" if job.world_size else "")


def _steps_text(step_list) -> str:
    if not step_list:
        return "none (no ProfilerStep#N)"
    return (
        f"{step_list[0]}-{step_list[-1]} ({len(step_list)})" if len(step_list) > 3 else ", ".join(map(str, step_list))
    )


def _span_ms(view) -> float:
    lo = [int(view[r]["ts"].min()) + view[r].clock_offset for r in view.ranks if view[r].n]
    hi = [int(view[r]["end"].max()) + view[r].clock_offset for r in view.ranks if view[r].n]
    return (max(hi) - min(lo)) / 1e6 if lo else 0.0


def _critical(view, rank: int, step, enabled: bool) -> dict:
    from holotrace.analysis import critical_path as cpm
    from holotrace.analysis.critical_path.path import bound_table

    if not enabled:
        return {"critical_path": None, "critical_path_note": "left out (--no-critical-path)"}
    wanted = None if step is None else [step]
    try:
        paths = dict(cpm.step_paths(view, rank=rank, steps=wanted, rules=NATIVE))
    except AnalysisError as e:  # the rank has no such step
        return {"critical_path": None, "critical_path_note": f"not computed: {e.problem}"}
    one = paths.get(step) if step is not None else next(iter(paths.values()), None)
    cp = bound_table(one) if one is not None else None
    if cp is None:
        cp = Table({"bound_by": np.empty(0, dtype=object), "duration": np.empty(0, dtype=np.float64)})
    return {"critical_path": cp, "critical_path_rank": rank, "critical_path_step": step}


def report_data(
    job,
    *,
    top: int = 10,
    timeline_step=None,
    critical_path: bool = True,
    critical_path_rank=None,
    launch_delay_cutoff: float = 100.0,
) -> dict:
    """Every frame the report shows, computed under holotrace's rules (analyses run on threads)."""
    view = job_view(job, NATIVE)
    step_list = steps.profiler_steps(view, rules=NATIVE)
    if timeline_step is not None and timeline_step not in step_list:
        raise AnalysisError(
            f"--timeline-step {timeline_step} is not a step of the job",
            path=job.path,
            fix=f"choose one of {step_list}" if step_list else "leave --timeline-step out: the trace has no steps",
        )
    step = timeline_step if timeline_step is not None else (step_list[len(step_list) // 2] if step_list else None)
    jobs = {
        "launch_stats": lambda: launches.launch_stats_table(  # tables: the launches' text stays Python objects
            view, rules=NATIVE, launch_delay_cutoff=launch_delay_cutoff, details=True
        ),
        "queue_length": lambda: counters.queue_length_tables(view, rules=NATIVE),
        "memory_bandwidth": lambda: counters.memory_bandwidth_tables(view, rules=NATIVE),
        "timeline": lambda: gpu_timeline_table(view, rules=NATIVE, iterations=None if step is None else [step]),
    }
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        chosen: dict = {}
        from holotrace.analysis.critical_path.advice import job_advice
        from holotrace.analysis.critical_path.job_graph import release_job_graph
        from holotrace.scale.segment_run import choose_replay

        # the one story (the replay advise uses for this many ranks): its fixes are the report's, its rank's
        # critical path is shown
        advice = job_advice(view, replay=choose_replay(len(view.ranks)))
        costliest, fixes = advice.costliest, advice.fix_table
        del advice  # (and the job graph with what its replays kept: the rest of the report never reads it)
        release_job_graph(view)

        def start_critical(ss) -> None:  # the rank is known: its critical path starts first
            cp_rank = (
                critical_path_rank
                if critical_path_rank is not None
                else (costliest.rank if costliest.rank is not None else view.ranks[0])
            )
            if cp_rank not in view.ranks:
                raise AnalysisError(
                    f"--critical-path-rank {cp_rank} is not a rank of the job",
                    path=job.path,
                    fix=f"choose one of {view.ranks}",
                )
            chosen["cp"] = pool.submit(_critical, view, cp_rank, step, critical_path)
            chosen.update({k: pool.submit(f) for k, f in jobs.items()})

        js = summarize_job(
            job,
            view=view,
            top=top,
            launch_delay_cutoff=launch_delay_cutoff,
            on_stragglers=start_critical,
            launch_stats=lambda: chosen["launch_stats"].result(),
        )
        js.costliest_rank = costliest
        ss = Table.of(js.frames["straggler_summary"]) if len(view.ranks) > 1 else None
        res = {k: f.result() for k, f in chosen.items()}
        cp = res.pop("cp")
    f = lambda k: Table.of(js.frames[k])  # noqa: E731
    res.update(
        tb=f("temporal"),
        types_by_rank=f("kernel_types_by_rank"),
        types=f("kernel_types"),
        idle=f("idle"),
        overlap=f("overlap"),
        steps=f("steps"),
        top_kernels=f("top_kernels"),
        rank_distribution=f("kernel_rank_distribution"),
    )
    from holotrace.render.report import gpu_time_split

    la = launches.all_launches_table(res["launch_stats"])
    meta = {
        "name": Path(str(job.path)).name,
        "path": str(job.path),
        "ranks_text": _ranks_text(job),
        "devices": _devices(job),
        "steps_text": _steps_text(step_list),
        "span_ms": _span_ms(view),
        "warning": job.cross_rank_warning,
        "costliest_rank": costliest.as_dict(),
        "ranks": list(job.ranks),
        "steps": step_list,
        "subtitle": "numbers under holotrace's rules: exact nanoseconds, every event, every step",
    }
    return {
        "meta": meta,
        "findings": _findings(js.findings),
        "gpu_split": gpu_time_split(res["tb"], res["types_by_rank"]),
        "temporal": res["tb"],
        "types_by_rank": res["types_by_rank"],
        "types": res["types"],
        "idle": res["idle"],
        "overlap": res["overlap"],
        "steps": res["steps"],
        "straggler_summary": ss,
        "top_kernels": res["top_kernels"],
        "rank_distribution": res["rank_distribution"],
        "launches": la,
        "launch_summary": launches.launch_summary_table(res["launch_stats"]),
        "launch_delay_cutoff": launch_delay_cutoff,
        "queue_length": {r: s for r, s in (res["queue_length"] or {}).items() if s is not None and len(s)},
        "memory_bandwidth": {r: s for r, s in (res["memory_bandwidth"] or {}).items() if s is not None and len(s)},
        "timeline": res["timeline"],
        "timeline_step": step,
        "fixes": fixes if critical_path else None,
        **cp,
    }
