"""``holotrace report PATH -o report.html``: one self-contained HTML file that tells the story of the job.

Findings first, then GPU time per rank, idle causes and overlap, step times and the slowest rank, top kernels
with their per-rank distributions, launch delays, queue length and memory bandwidth, the critical path with
the ranked fixes, and a zoomable GPU timeline of one step. Every number comes from the analyses under
holotrace's rules; the file inlines its style and script and opens with no network. The analyses hand the
renderer tables (:class:`~holotrace.table.Table`): no pandas is imported.
"""

from __future__ import annotations

import argparse
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from holotrace import findings as findings_mod
from holotrace.analysis import counters, launches, steps
from holotrace.analysis.job_summary import findings_frame, summarize_job
from holotrace.analysis.rank_summary import LEAVE_OUT_ABLE
from holotrace.analysis.timeline import gpu_timeline_table
from holotrace.commands._dest import writes
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.exec.pool import one_thread
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
        render=True,
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
    render: bool = False,
) -> dict:
    """Every frame the report shows, computed under holotrace's rules.

    The job's advice (its fixes and costliest rank) runs on this thread; what does not read it (the summary, the
    launches, the counters, the timeline: functions of the view alone) runs beside it on another, and with
    ``render`` that thread also renders the sections made of them alone (``rendered``: their HTML by section id,
    which :func:`~holotrace.render.report.render_report` takes as they are). Then the critical path of the rank the
    advice names."""
    from holotrace.analysis.critical_path.advice import job_advice
    from holotrace.analysis.critical_path.job_graph import release_job_graph
    from holotrace.scale.replay_choice import choose_replay

    view = job_view(job, NATIVE)
    step_list = steps.profiler_steps(view, rules=NATIVE)
    if timeline_step is not None and timeline_step not in step_list:
        raise AnalysisError(
            f"--timeline-step {timeline_step} is not a step of the job",
            path=job.path,
            fix=f"choose one of {step_list}" if step_list else "leave --timeline-step out: the trace has no steps",
        )
    step = timeline_step if timeline_step is not None else (step_list[len(step_list) // 2] if step_list else None)
    if critical_path_rank is not None and critical_path_rank not in view.ranks:
        raise AnalysisError(
            f"--critical-path-rank {critical_path_rank} is not a rank of the job",
            path=job.path,
            fix=f"choose one of {view.ranks}",
        )
    replay = choose_replay(len(view.ranks))
    parents = _parents_for(view, replay)
    ahead = _Ahead(view, step, critical_path, critical_path_rank)
    with ThreadPoolExecutor(max_workers=1) as pool:
        side = pool.submit(_independent, ahead, job, view, step, top, launch_delay_cutoff, parents, render)
        # the one story (the replay advise uses for this many ranks): its fixes are the report's, its rank's
        # critical path is shown
        try:
            advice = job_advice(view, replay=replay)
        except BaseException:
            ahead.claim(None)  # (nothing more made ahead: the error is raised once the other thread is done)
            raise
        costliest, fixes = advice.costliest, advice.fix_table
        del advice  # (and the job graph with what its replays kept: the rest of the report never reads it)
        release_job_graph(view)
        cp_rank = (
            critical_path_rank
            if critical_path_rank is not None
            else (costliest.rank if costliest.rank is not None else view.ranks[0])
        )
        if ahead.claim(cp_rank):  # (made on the other thread: its rank is the one shown)
            data = side.result()
            cp = ahead.result()
        else:
            cp = _critical(view, cp_rank, step, critical_path)
            data = side.result()
    data["meta"] = {
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
    data["fixes"] = fixes if critical_path else None
    data.update(cp)
    return data


def _parents_for(view, replay: str):
    """What makes the CPU parents the advice's CPU-operator and host-sync fixes read (the job graph's replay reads
    them, the segment replay does not), to run beside the advice; None when it needs none."""
    if replay != "graph" or len(view.ranks) < 2:
        return None
    from holotrace.analysis.critical_path.host_time import cpu_parents_later

    return cpu_parents_later(view, view.ranks)


def _rows(t) -> bool:
    return t is not None and len(t) > 0


def _columns(t: Table, *names: str) -> Table:
    """``t`` with only the columns ``names`` (the others let go)."""
    return Table({c: t[c] for c in names}, n=len(t))


class _Ahead:
    """The critical path made on the side thread while the advice runs, of the rank the report will show: the one
    asked for, else the rank the others wait for longest at collectives (as a rule the advice's costliest rank; a
    job of one rank: that rank). Made only if the advice is still running when the side thread is done; the advice's
    thread takes it when it is of the rank the advice names (:meth:`claim`), else makes its own."""

    def __init__(self, view, step, enabled: bool, rank):
        self.view, self.step, self.enabled = view, step, enabled
        ranks = list(view.ranks)
        if rank is not None:  # the rank asked for (none ahead if it is not the job's)
            self.rank = rank if rank in ranks else None
        else:  # guessed later (:meth:`guess`); a job of one rank: that rank
            self.rank = ranks[0] if len(ranks) == 1 else None
        self._asked = rank is not None
        self._lock = threading.Lock()
        self._done = self._making = False
        self._out = None

    def guess(self, straggler_summary) -> None:
        """The rank the others wait for longest (none when nobody waits), unless a rank was asked for."""
        if self._asked or straggler_summary is None or not len(straggler_summary):
            return
        waited = np.nan_to_num(np.asarray(straggler_summary["waited_for_us"], dtype=np.float64), nan=0.0)
        if waited.max() > 0:
            self.rank = int(np.asarray(straggler_summary["rank"])[int(np.argmax(waited))])

    def make(self) -> None:
        """On the side thread, last: the critical path of the rank guessed, if the advice is still running."""
        with self._lock:
            if self._done or self.rank is None:
                return
            self._making = True
        try:
            self._out = (_critical(self.view, self.rank, self.step, self.enabled), None)
        except Exception as e:  # (raised where it is read: only if its rank is the one shown)
            self._out = (None, e)

    def claim(self, rank) -> bool:
        """The advice is done: whether the critical path of ``rank`` is made (or being made) on the side thread."""
        with self._lock:
            self._done = True
            return self._making and rank == self.rank

    def result(self) -> dict:
        out, error = self._out
        if error is not None:
            raise error
        return out


def _independent(ahead: _Ahead, job, view, *frame_args) -> dict:
    """:func:`_frames` on one thread (beside the advice), then the critical path made ahead; then the pages of the
    view's columns read here go back to the cache."""
    with one_thread():
        data = _frames(job, view, *frame_args, ahead=ahead)
    ahead.make()
    view.release_pages()
    return data


def _frames(job, view, step, top: int, launch_delay_cutoff: float, parents, render: bool, ahead=None) -> dict:
    """The report's frames that do not read the advice (and, with ``render``, their sections' HTML in their
    stead: each section drawn as soon as its frames are made, and they are let go, so the frames of one section
    at most are held beside the advice)."""
    if parents is not None:
        parents()
    data: dict = {"launch_delay_cutoff": launch_delay_cutoff, "timeline_step": step}
    rendered: dict = {}

    def drawn(section: str, *keys: str) -> None:
        if render:
            from holotrace.render.report import render_sections

            rendered.update(render_sections(data, (section,)))
            for k in keys:
                del data[k]

    data["timeline"] = gpu_timeline_table(view, rules=NATIVE, iterations=None if step is None else [step])
    drawn("timeline", "timeline")
    js, data["launches"], data["launch_summary"] = _launch_frames(job, view, top, launch_delay_cutoff)
    if ahead is not None and len(view.ranks) > 1:
        ahead.guess(js.frames["straggler_summary"])
    # the counters' series: only the columns drawn are kept
    queue = counters.queue_length_tables(view, rules=NATIVE, columns=("ts", "queue_length")) or {}
    data["queue_length"] = {r: s for r, s in queue.items() if _rows(s)}
    del queue
    bandwidth = counters.memory_bandwidth_tables(view, rules=NATIVE) or {}
    data["memory_bandwidth"] = {r: s for r, s in bandwidth.items() if _rows(s)}
    del bandwidth
    drawn("launches", "launches", "launch_summary", "queue_length", "memory_bandwidth")
    from holotrace.render.report import gpu_time_split

    f = lambda k: Table.of(js.frames[k])  # noqa: E731
    tb, types_by_rank = f("temporal"), f("kernel_types_by_rank")
    data.update(
        findings=_findings(js.findings),
        gpu_split=gpu_time_split(tb, types_by_rank),
        temporal=tb,
        types_by_rank=types_by_rank,
        types=f("kernel_types"),
        idle=f("idle"),
        overlap=f("overlap"),
        steps=f("steps"),
        straggler_summary=Table.of(js.frames["straggler_summary"]) if len(view.ranks) > 1 else None,
        top_kernels=f("top_kernels"),
        rank_distribution=f("kernel_rank_distribution"),
    )
    if render:
        for section in ("gpu-time", "steps", "kernels"):
            drawn(section)
        return {"findings": data["findings"], "rendered": rendered}
    return data


def _launch_frames(job, view, top: int, launch_delay_cutoff: float) -> tuple:
    """The job's summary (which reads the launches' statistics) and the launch frames the report draws; the
    statistics are let go on return."""
    launch_stats = launches.launch_stats_table(  # tables: the launches' text stays Python objects
        view, rules=NATIVE, launch_delay_cutoff=launch_delay_cutoff, details=True
    )
    js = summarize_job(
        job,
        view=view,
        top=top,
        launch_delay_cutoff=launch_delay_cutoff,
        launch_stats=lambda: launch_stats,
        leave_out=LEAVE_OUT_ABLE,  # (per-step and per-kernel detail the report does not draw)
    )
    drawn = launches.all_launches_table(  # (the columns drawn: every delay, the worst ones' step and kernel)
        {r: _columns(t, "iteration", "kernel", "launch_delay") for r, t in launch_stats.items()}
    )
    return js, drawn, launches.launch_summary_table(launch_stats)
