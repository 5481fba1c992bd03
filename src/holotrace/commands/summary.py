"""``holotrace summary PATH``: where did the GPU time go, on one screen.

Sections: GPU time per rank (temporal breakdown), idle time by cause,
communication hidden behind compute, time by kernel type, the top kernels,
the slowest rank, and the findings that affect these numbers. ``--output
DIR`` writes every full result table (per-step, per-stream and per-kernel
detail included).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Collection

import numpy as np

from holotrace import findings as findings_mod
from holotrace.analysis import idle
from holotrace.analysis.critical_path.costliest import LONGEST_VS_LAST
from holotrace.analysis.job_summary import JobSummary, summarize_job
from holotrace.analysis.rank_summary import LEAVE_OUT_ABLE
from holotrace.commands._load import add_load_options, add_replay_option, load_job, replay_of
from holotrace.commands._output import Report, Section, add_output_options, emit, writes_frames
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.exec.executor import ENV_EXECUTOR
from holotrace.order_stats import distinct, median
from holotrace.render.summary_lines import launch_lines, straggler_lines
from holotrace.table import Table
from holotrace.text import fmt_significant, fmt_steps

__all__ = ["COMMAND", "add_arguments", "run", "build_report", "job_summary_of_args", "AFFECTING_CODES"]

#: finding codes that change what the summary's numbers mean (shown under the tables): the ``FindingCode``
#: members flagged ``affects_numbers`` (error findings are shown whatever their code)
AFFECTING_CODES = findings_mod.AFFECTING_CODES
_TYPE_ABBREV = {"COMPUTATION": "comp", "COMMUNICATION": "comm", "MEMORY": "mem"}
MAX_RANK_ROWS = 16
MAX_FINDINGS = 8
_TITLE = "holotrace summary: where did the GPU time go?"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_load_options(p)
    add_output_options(p)
    p.add_argument("--top", type=int, default=10, metavar="N", help="number of top kernels to show (default 10)")
    add_replay_option(p)


def run(args: argparse.Namespace) -> int:
    # the per-step, per-kernel and idle-interval tables are only in the full frames: made when they are written
    leave_out = () if writes_frames(args) else LEAVE_OUT_ABLE
    return emit(build_report(job_summary_of_args(args, leave_out=leave_out), top=getattr(args, "top", 10)), args)


COMMAND = Command(
    name="summary",
    help="where the GPU time went: per-rank breakdown, idle causes, overlap, top kernels, slowest rank",
    description="One screen that answers 'where did the time go': per-rank GPU time (idle / compute / "
    "non-compute over the kernel span), idle time by cause (host wait, kernel launch gaps, other), "
    "communication hidden behind compute, time by kernel type, the top kernels, the slowest rank, "
    "and the findings that affect these numbers. Times are microseconds (us) or milliseconds (ms) "
    "as the column names say.",
    add_arguments=add_arguments,
    run=run,
)


# ---------------------------------------------------------------------------- the summary


def _wants_map(args: argparse.Namespace) -> bool:
    """The per-rank work runs on an executor (named by option or environment) or was done by an ingest run."""
    from holotrace.scale.store import is_ingest_folder

    return bool(getattr(args, "executor", None) or os.environ.get(ENV_EXECUTOR)) or is_ingest_folder(args.path)


def job_summary_of_args(args: argparse.Namespace, *, leave_out: Collection[str] = ()) -> JobSummary:
    """The :class:`JobSummary` the command line asks for: from the job loaded here, by a map over its files on
    an executor, or from an ingest folder; the same object in every case. ``leave_out``: frames of
    :data:`~holotrace.analysis.rank_summary.LEAVE_OUT_ABLE` not computed (left empty) for a job loaded here."""
    top = getattr(args, "top", 10)
    if not _wants_map(args):
        from concurrent.futures import ThreadPoolExecutor

        from holotrace.analysis.critical_path.costliest import one_rank
        from holotrace.model.classify import NATIVE
        from holotrace.model.view import job_view

        job = load_job(args)
        view = job_view(job, NATIVE)  # one view: the replay and the per-rank summaries read it at once
        replay = replay_of(args, len(job.ranks))
        answer = one_rank(view) if replay == "graph" else None  # (one rank: no replay, not even its import)
        if answer is not None:
            js = summarize_job(job, view=view, top=top, leave_out=leave_out)
            js.costliest_rank = answer
            return js
        from holotrace.analysis.critical_path.advice import GRAPH_WHAT_IFS_READ, build_job_graph, costliest_rank
        from holotrace.exec.pool import LastOut, one_thread

        # once the summaries and the job graph are made, the view's columns wait: the replays read the graph
        shed = LastOut(2, lambda: view.shed(keep=GRAPH_WHAT_IFS_READ))

        def story():  # the one story: the longer path, with its threads
            if replay == "graph":
                build_job_graph(view)  # (kept on the view: the replay below reads it)
                shed.arrive()
                shed.wait()  # (the replays start once the view is shed, whichever thread finished last)
            try:
                return costliest_rank(view, replay=replay)
            finally:
                if replay != "graph":
                    shed.arrive()

        with ThreadPoolExecutor(1) as pool:
            told = pool.submit(story)
            try:
                with one_thread():  # the ranks' summaries one after another beside it (job8: 0.58 -> 0.535 s median)
                    js = summarize_job(job, view=view, top=top, leave_out=leave_out)
            finally:
                shed.arrive()  # (also when the summaries failed: the story waits for it)
            js.costliest_rank = told.result()
        return js
    from holotrace.exec.executor import get_executor
    from holotrace.model.filter import parse_int_ranges
    from holotrace.scale import summarize
    from holotrace.scale.store import is_ingest_folder

    if getattr(args, "steps", None) is not None:
        raise AnalysisError(
            "--steps cannot be combined with --executor or an ingest folder (summaries are per rank)",
            path=args.path,
            fix="drop --steps, or run without --executor on the trace folder",
        )
    ranks = parse_int_ranges(args.ranks, "rank") if getattr(args, "ranks", None) is not None else None
    if is_ingest_folder(args.path):
        js = summarize(args.path, ranks=ranks, top=top)
    else:
        with get_executor(
            getattr(args, "executor", None),
            address=getattr(args, "ray_address", None),
            workers=getattr(args, "workers", None),
        ) as ex:
            js = summarize(
                args.path,
                executor=ex,
                ranks=ranks,
                cache=not getattr(args, "no_cache", False),
                cache_dir=getattr(args, "cache_dir", None),
                top=top,
                progress_bar=False if getattr(args, "quiet", False) else None,
                rules=getattr(args, "rules", None),
            )
    js.costliest_rank = _costliest_in_driver(args, js)
    return js


def _costliest_in_driver(args: argparse.Namespace, js: JobSummary):
    """The one story for a summary made by a map over ranks: up to ``JOB_GRAPH_MAX_RANKS`` ranks (or with
    ``--replay graph``) the driver loads the ranks (decoded on the executor, or read back from the ingest folder)
    and replays the job graph; above it, the scale-out replay maps its two phases over the rank files on the same
    executor and replays the job at collective granularity."""
    from holotrace.analysis.critical_path.advice import costliest_rank
    from holotrace.analysis.critical_path.costliest import CostliestRank
    from holotrace.commands._load import segment_advice_of, trace_ranks

    if not js.ranks:
        return CostliestRank(None, "no rank was summarised")
    if replay_of(args, len(js.ranks)) == "graph":
        return costliest_rank(load_job(args))
    path, found = trace_ranks(args)
    if path is None:
        return CostliestRank(
            None,
            "not computed: the scale-out replay reads the trace files, and this ingest folder does not name one "
            "folder they came from; run 'holotrace summary' on the trace folder",
        )
    return segment_advice_of(args, path, [r for r in found if r in set(js.ranks)], only=("straggler",)).costliest


def build_report(js: JobSummary, *, top: int = 10) -> Report:
    """Lay out a job's summary: display sections, the full tables and plain facts (pure)."""
    f = js.frames
    tb = Table.of(f["temporal"])
    findings = js.findings_frame()
    sections = [
        _temporal_section(tb),
        _idle_section(f["idle"]),
        _overlap_section(Table.of(f["overlap"])),
        _types_section(Table.of(f["kernel_types"])),
        _top_kernels_section(Table.of(f["top_kernels"]), top, f["gpu_ops_sum_us"]),
        _slowest_section(tb, Table.of(f["steps"]), Table.of(f["kernel_rank_distribution"]), js.costliest_rank),
        Section("stragglers", "Stragglers", lines=straggler_lines(js)),
        Section("launch_delays", "Kernel launches", lines=launch_lines(js)),
        _findings_section(findings),
    ]
    header = [
        f"job     {js.path}",
        f"ranks   {_ranks_text(js.ranks)}" + (f"  (world size {js.world_size})" if js.world_size else ""),
        f"steps   {_steps_text(js.profiler_steps)}",
    ]
    if js.executor != "memory":
        how = "read from an ingest folder" if js.executor == "ingest" else f"mapped on the {js.executor} executor"
        header.append(f"run     {len(js.ranks)} rank summaries {how}, reduced here")
    warn = js.cross_rank_warning
    if warn:
        header.append(f"WARNING cross-rank numbers are incomplete: {warn}")
    objects = {}
    if js.costliest_rank is not None:
        header.append(f"costliest rank: {js.costliest_rank.why}")
        objects["costliest_rank"] = js.costliest_rank.as_dict()
    return Report(title=_TITLE, sections=sections, header=header, data=js.data(), meta=js.meta(), objects=objects)


def _ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "none"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]} ({len(ranks)})"
    return ", ".join(map(str, ranks)) + f" ({len(ranks)})"


def _steps_text(step_list: list[int]) -> str:
    return fmt_steps(step_list)


def _descending(x: np.ndarray) -> np.ndarray:
    """Positions of ``x`` by value, largest first, ties in their order, NaN last (a stable descending sort)."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    kept = np.flatnonzero(~nan)
    return np.concatenate([kept[np.argsort(-x[kept], kind="stable")], np.flatnonzero(nan)])


def _temporal_section(tb: Table) -> Section:
    shown = Table(
        {
            "rank": tb["rank"],
            "span ms": tb["span_us"] / 1000.0,
            "busy ms": tb["busy_us"] / 1000.0,
            "idle %": tb["idle_pctg"],
            "compute %": tb["compute_pctg"],
            "non-compute %": tb["non_compute_pctg"],
        },
        n=len(tb),
    )
    notes = []
    empty = tb["rank"][tb["gpu_events"] == 0].tolist() if len(tb) else []
    if empty:
        notes.append(f"rank(s) {_short_list(empty)} have no GPU activity (CPU-only): shown as 0 with no percentages")
    notes.append("span = first to last GPU activity; compute wins when it overlaps communication or memory work")
    if len(tb) > MAX_RANK_ROWS:
        shown = shown.take(_descending(shown["idle %"]))
        notes.insert(0, f"showing the {MAX_RANK_ROWS} ranks with the most idle time of {len(tb)}")
    return Section(
        "temporal",
        "GPU time per rank",
        shown,
        notes,
        digits={"span ms": 2, "busy ms": 2, "idle %": 1, "compute %": 1, "non-compute %": 1},
        max_rows=MAX_RANK_ROWS,
    )


def _idle_section(idle_df) -> Section:
    if idle_df.empty:
        return Section(
            "idle_causes",
            "Idle time by cause (gaps between GPU operations on each stream)",
            notes=["no GPU operations, so no idle gaps"],
        )
    per = idle.idle_by_rank_table(idle_df)
    shown = Table(
        {
            "rank": per["rank"],
            "stream idle ms": per["idle_us"] / 1000.0,
            "host wait %": per["host_wait_pctg"],
            "kernel wait %": per["kernel_wait_pctg"],
            "other %": per["other_pctg"],
        },
        n=len(per),
    )
    notes = [
        "summed over streams (concurrent streams each count); host wait = the CPU launched late, "
        "kernel wait = gap under 30 us between launches"
    ]
    return Section(
        "idle_causes",
        "Idle time by cause (gaps between GPU operations on each stream)",
        shown,
        notes,
        digits={"stream idle ms": 2, "host wait %": 1, "kernel wait %": 1, "other %": 1},
        max_rows=MAX_RANK_ROWS,
    )


def _overlap_section(ov: Table) -> Section:
    title = "Communication hidden behind compute"
    if ov.empty or not ov["has_communication"].any():
        return Section("overlap", title, notes=["no communication kernels in any rank"])
    shown = Table(
        {
            "rank": ov["rank"],
            "comm ms": ov["comm_us"] / 1000.0,
            "overlapped ms": ov["overlap_us"] / 1000.0,
            "hidden %": ov["overlap_pctg"],
        },
        n=len(ov),
    )
    notes = ["hidden % = communication time during which a compute kernel also ran"]
    none = ov["rank"][~ov["has_communication"].astype(bool)].tolist()
    if none:
        notes.append(f"rank(s) {_short_list(none)} have no communication kernels (shown as 0)")
    return Section(
        "overlap", title, shown, notes, digits={"comm ms": 2, "overlapped ms": 2, "hidden %": 1}, max_rows=MAX_RANK_ROWS
    )


def _types_section(types: Table) -> Section:
    n = len(types)
    shown = Table(
        {
            "kernel type": [str(t).replace(" overlapping ", " + ") for t in types["kernel_type"].tolist()]
            if n
            else np.empty(0, dtype=object),
            "time ms": types["time_us"] / 1000.0 if n else np.empty(0),
            "%": types["pctg"] if n else np.empty(0),
        },
        n=n,
    )
    return Section(
        "kernel_types",
        "GPU time by kernel type (all ranks)",
        shown,
        ["A + B = both types running at the same time"],
        digits={"time ms": 2, "%": 1},
    )


def _top_kernels_section(top_k: Table, top: int, total: float) -> Section:
    """``total``: the summed duration of every GPU operation of every rank (the rows' universe)."""
    title = f"Top {top} kernels (all ranks)"
    if top_k.empty:
        return Section("top_kernels", title, notes=["no GPU kernels"])
    sums = top_k["sum_us"].astype(np.float64)
    shown = Table(
        {
            "kernel": np.array([str(x) for x in top_k["name"].tolist()], dtype=object),
            "type": np.array([_TYPE_ABBREV.get(t, "other") for t in top_k["kernel_type"].tolist()], dtype=object),
            "count": top_k["count"].astype(np.int64),
            "total ms": sums / 1e3,
            "mean us": top_k["mean_us"],
            "% of all": 100.0 * sums / total if total > 0 else np.full(len(top_k), np.nan),
        }
    )
    return Section(
        "top_kernels",
        title,
        shown,
        [
            f"% of all = total ms / {fmt_significant(total / 1e3)} ms, the summed duration of every GPU operation on "
            f"all ranks (operations running at the same time each count in full)"
        ],
        digits={"total ms": 2, "mean us": 1, "% of all": 1},
    )


def _mean_by_rank(st: Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(ranks ascending, mean of ``column`` per rank: an exactly rounded sum over the count, NaN values skipped)."""
    ranks = np.asarray(st["rank"])
    values = np.asarray(st[column], dtype=np.float64)
    uniq = distinct(ranks)
    means = np.empty(len(uniq))
    for i, r in enumerate(uniq.tolist()):
        x = values[ranks == r]
        x = x[~np.isnan(x)]
        means[i] = math.fsum(x.tolist()) / len(x) if len(x) else np.nan
    return uniq, means


def _slowest_section(tb: Table, st: Table, dist: Table, costliest=None) -> Section:
    """The worst rank per metric, and how it relates to the rank that costs the job most (the one story: the
    same rank and words as ``advise`` and ``stragglers``)."""
    title = "Slowest rank"
    if len(tb) < 2:
        return Section("slowest_rank", title, notes=["one rank: nothing to compare"])
    rows = []

    def add(what: str, ranks: np.ndarray, values: np.ndarray, unit_scale: float, unit: str) -> None:
        values = np.asarray(values, dtype=np.float64)
        ok = ~np.isnan(values)
        if not ok.any():
            return
        r, x = np.asarray(ranks)[ok], values[ok]
        i = int(np.argmax(x))  # the first of equal maxima
        rows.append((what + f" ({unit})", int(r[i]), float(x[i]) * unit_scale, median(x) * unit_scale))

    if not st.empty:
        add("mean step time", *_mean_by_rank(st, "dur_us"), 1e-3, "ms")
    add("GPU span", tb["rank"], tb["span_us"], 1e-3, "ms")
    add("GPU busy", tb["rank"], tb["busy_us"], 1e-3, "ms")
    add("GPU idle", tb["rank"], tb["idle_us"], 1e-3, "ms")
    shown = Table.from_records(rows, ["metric", "worst rank", "worst", "median"])
    notes = []
    ratio = np.asarray(dist["sum_vs_median"], dtype=np.float64) if not dist.empty else np.empty(0)
    if (~np.isnan(ratio)).any():
        i = int(np.nanargmax(ratio))
        if ratio[i] > 1.1:
            notes.append(
                f"rank {int(dist['rank'][i])} spends {ratio[i]:.2f}x the median rank's time in "
                f"{dist['kernel_type'][i].lower()} kernel {dist['name'][i][:60]}"
            )
    lines = []
    if costliest is not None and costliest.rank is not None:
        lines.append(f"costs the job most: rank {costliest.rank} (see 'costliest rank' above)")
        longest = [r for m, r, _, _ in rows if m.startswith("mean step time")]
        if longest and longest[0] != costliest.rank:
            lines.append(
                f"rank {longest[0]} has the longest mean step, rank {costliest.rank} costs most. {LONGEST_VS_LAST}"
            )
    return Section("slowest_rank", title, shown, notes, digits={"worst": 2, "median": 2}, lines=lines)


_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def _findings_section(findings: Table) -> Section:
    title = "Findings that affect these numbers"
    rel = [
        (sev, rank, msg)
        for sev, code, rank, msg in zip(
            findings["severity"].tolist(),
            findings["code"].tolist(),
            findings["rank"].tolist(),
            findings["message"].tolist(),
        )
        if code in AFFECTING_CODES or sev == "error"
    ]
    rel.sort(key=lambda x: _SEVERITY_ORDER.get(x[0], 3))  # stable: the loader's order within a severity
    lines = []
    for sev, rank, msg in rel:
        where = "" if rank is None or (isinstance(rank, float) and np.isnan(rank)) else f" rank {int(rank)}:"
        lines.append(f"{str(sev).upper()}{where} {msg}")
    notes = []
    if len(lines) > MAX_FINDINGS:
        notes.append(f"{len(lines) - MAX_FINDINGS} more; run 'holotrace doctor PATH' for all findings with evidence")
    if not lines:
        lines = ["none"]
    return Section("findings", title, notes=notes, lines=lines[:MAX_FINDINGS])


def _short_list(values: list, n: int = 8) -> str:
    text = ", ".join(map(str, values[:n]))
    return text + (f" … ({len(values)} in all)" if len(values) > n else "")
