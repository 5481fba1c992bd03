"""``holotrace counters PATH``: launch-queue length per stream and memory-copy bandwidth per copy kind.

Per rank and stream: how many launched operations wait in the stream's queue (statistics over the change
points and weighted by time), and how long the queue is full (``--max-queue-length``, CUDA's 1024 by
default). Per rank and copy kind: the aggregate bandwidth while copies run. ``--output DIR`` writes the
summaries and the full series; ``--augmented`` also writes each rank's trace with the counter tracks
(Perfetto / chrome://tracing load them) into DIR, never into the trace folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from holotrace.analysis import counters as _ctr
from holotrace.commands._load import add_load_options, load_job
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import HolotraceError
from holotrace.model.classify import NATIVE
from holotrace.model.view import job_view
from holotrace.render import trace_file

__all__ = ["COMMAND", "add_arguments", "build_report", "run", "write_augmented"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument(
        "--max-queue-length",
        type=int,
        default=_ctr.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM,
        metavar="N",
        help="a stream's queue counts as full from this many waiting operations (default 1024)",
    )
    p.add_argument(
        "--augmented",
        action="store_true",
        help="with --output DIR: also write each rank's trace with counter tracks into DIR",
    )


def run(args: argparse.Namespace) -> int:
    if args.augmented and not args.output:
        raise HolotraceError(
            "--augmented needs --output DIR", fix="add --output DIR (the trace folder is never written)"
        )
    job = load_job(args)
    report, series = build_report(job, max_queue_length=args.max_queue_length)
    if args.augmented:
        paths = write_augmented(job, series["queue"], series["membw"], args.output)
        report.header.append(f"wrote {len(paths)} trace file(s) with counter tracks to {args.output}")
    return emit(report, args)


def _flat(summary: pd.DataFrame | None, extra: dict) -> pd.DataFrame:
    if summary is None or summary.empty:
        return pd.DataFrame()
    df = summary.copy()
    df.columns = [b for _, b in df.columns]
    df = df.reset_index()
    for col, scale in extra.items():
        if col in df:
            df[col] = df[col] * scale
    return df


def build_report(job, *, max_queue_length: int = _ctr.CUDA_MAX_LAUNCH_QUEUE_PER_STREAM) -> tuple[Report, dict]:
    """Compute the series and summaries of every rank and lay out the report (pure)."""
    view = job_view(job, NATIVE)
    queue = _ctr.queue_length(view)
    membw = _ctr.memory_bandwidth(view)
    qsum = _flat(_ctr.queue_length_summary(queue, time_weighted=True), {})
    blocked = _ctr.blocked_on_full_queue(
        queue, _ctr.trace_durations(view), max_queue_length=max_queue_length, rules=NATIVE
    )
    blocked = blocked.rename(
        columns={
            "duration_at_max_queue_length": "blocked us",
            "relative_duration_at_max_queue_length": "share of trace",
        }
    )
    blocked["blocked us"] = blocked["blocked us"] / 1e3
    msum = _flat(_ctr.memory_bandwidth_summary(membw, time_weighted=True), {})
    sections = [
        Section(
            "queue_length",
            "Launch queue length per stream (waiting operations; statistics over change points)",
            qsum.rename(columns={"time_mean": "time-weighted mean"}),
            digits={"mean": 2, "std": 2, "time-weighted mean": 2},
        ),
        Section(
            "blocked_on_full_queue",
            f"Time with a full launch queue (>= {max_queue_length} waiting)",
            blocked,
            digits={"blocked us": 1, "share of trace": 4},
            lines=[] if len(blocked) else [f"no stream reaches {max_queue_length} waiting operations"],
        ),
        Section(
            "memory_bandwidth",
            "Memory bandwidth per copy kind (GB/s, while copies run)",
            msum,
            digits={c: 3 for c in ("mean", "std", "min", "25%", "50%", "75%", "max", "time_mean")},
            lines=[] if len(msum) else ["no memory copy or set with a bandwidth"],
        ),
    ]
    findings = _ctr.queue_length_findings(queue, view=view)
    header = [f"{len(job.ranks)} rank(s); times in µs"] + [f.line() for f in findings]
    if not queue:
        header.append("no launch call with its GPU operation in the trace: no queue length")
    data = {
        "queue_length_summary": qsum,
        "blocked_on_full_queue": blocked,
        "memory_bw_summary": msum,
        "queue_length_series": _series_frame(queue),
        "memory_bw_series": _series_frame(membw),
    }
    return Report("Queue length and memory bandwidth", sections, header, data), {"queue": queue, "membw": membw}


def _series_frame(series: dict) -> pd.DataFrame:
    if not series:
        return pd.DataFrame()
    return pd.concat([df.reset_index().assign(rank=r) for r, df in series.items()], ignore_index=True)


def write_augmented(job, queue: dict, membw: dict, output_dir) -> list[Path]:
    """Each rank's trace with ``Queue Length`` (per stream) and ``Memcpy BW`` (per copy kind) counter tracks,
    into ``output_dir`` under the input's name (gzip when the input name ends in ``.gz``)."""
    out = []
    for r in job.ranks:
        events = []
        q, m = queue.get(r), membw.get(r)
        if q is not None:
            events += trace_file.counter_events(
                q["ts"].to_numpy(),
                q["pid"].to_numpy(),
                "Queue Length",
                "Queue Length",
                q["queue_length"].to_numpy(),
                q["stream"].to_numpy(),
                unit_ns=1,
            )
        if m is not None:
            events += trace_file.counter_events(
                m["ts"].to_numpy(),
                m["pid"].to_numpy(),
                m["name"].to_numpy(),
                "Memcpy BW",
                m["memory_bw_gbps"].to_numpy(),
                unit_ns=1,
            )
        if not events:
            continue
        t = job.rank(r)
        dst = trace_file.derived_path(t.file, "_with_counters", output_dir)
        if dst.resolve() == Path(t.file).resolve():
            raise HolotraceError(
                "the augmented trace would replace its input", path=str(dst), fix="choose another --output DIR"
            )
        out.append(trace_file.write_trace_with_events(t.file, dst, events, top_keys=[*t.meta, "traceEvents"]))
    return out


COMMAND = Command(
    name="counters",
    help="launch-queue length per stream, time blocked on a full queue, memory-copy bandwidth",
    description="Queue length: operations launched on a GPU stream that have not started yet (+1 at each launch "
    "call, -1 when its operation starts), per rank and stream, with the time the queue holds at least "
    "--max-queue-length operations (the launch call then blocks). Memory bandwidth: the summed bandwidth "
    "of running copies per rank and copy kind (HtoD, DtoH, DtoD, PtoP, Memset). --output DIR writes the "
    "series; --augmented adds each rank's trace with counter tracks to DIR.",
    add_arguments=add_arguments,
    run=run,
)
