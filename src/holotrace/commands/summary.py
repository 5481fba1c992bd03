"""``holotrace summary PATH``: where did the GPU time go, on one screen.

Sections: GPU time per rank (temporal breakdown), idle time by cause,
communication hidden behind compute, time by kernel type, the top kernels,
the slowest rank, and the findings that affect these numbers. ``--output
DIR`` writes every full result table (per-step, per-stream and per-kernel
detail included).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from holotrace import findings as findings_mod
from holotrace.analysis import idle
from holotrace.analysis.critical_path.advice import LONGEST_VS_LAST
from holotrace.analysis.job_summary import JobSummary, summarize_job
from holotrace.commands._load import add_load_options, add_replay_option, load_job, replay_of
from holotrace.commands._output import Report, Section, add_output_options, emit
from holotrace.commands.base import Command
from holotrace.errors import AnalysisError
from holotrace.exec.executor import ENV_EXECUTOR
from holotrace.render.summary_lines import launch_lines, straggler_lines
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
    return emit(build_report(job_summary_of_args(args), top=getattr(args, "top", 10)), args)


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


def job_summary_of_args(args: argparse.Namespace) -> JobSummary:
    """The :class:`JobSummary` the command line asks for: from the job loaded here, by a map over its files on
    an executor, or from an ingest folder; the same object in every case."""
    top = getattr(args, "top", 10)
    if not _wants_map(args):
        from holotrace.analysis.critical_path.advice import costliest_rank

        job = load_job(args)
        js = summarize_job(job, top=top)
        js.costliest_rank = costliest_rank(job, replay=replay_of(args, len(job.ranks)))  # the one story
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
    from holotrace.analysis.critical_path.advice import CostliestRank, costliest_rank
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
    tb = f["temporal"]
    findings = js.findings_frame()
    sections = [
        _temporal_section(tb),
        _idle_section(f["idle"]),
        _overlap_section(f["overlap"]),
        _types_section(f["kernel_types"]),
        _top_kernels_section(f["top_kernels"], top, f["gpu_ops_sum_us"]),
        _slowest_section(tb, f["steps"], f["kernel_rank_distribution"], js.costliest_rank),
        Section("stragglers", "Stragglers", pd.DataFrame(), lines=straggler_lines(js)),
        Section("launch_delays", "Kernel launches", pd.DataFrame(), lines=launch_lines(js)),
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


def _temporal_section(tb: pd.DataFrame) -> Section:
    shown = pd.DataFrame(
        {
            "rank": tb["rank"],
            "span ms": tb["span_us"] / 1000.0,
            "busy ms": tb["busy_us"] / 1000.0,
            "idle %": tb["idle_pctg"],
            "compute %": tb["compute_pctg"],
            "non-compute %": tb["non_compute_pctg"],
        }
    )
    notes = []
    empty = tb.loc[tb["gpu_events"] == 0, "rank"].tolist()
    if empty:
        notes.append(f"rank(s) {_short_list(empty)} have no GPU activity (CPU-only): shown as 0 with no percentages")
    notes.append("span = first to last GPU activity; compute wins when it overlaps communication or memory work")
    if len(tb) > MAX_RANK_ROWS:
        shown = shown.sort_values("idle %", ascending=False, kind="stable")
        notes.insert(0, f"showing the {MAX_RANK_ROWS} ranks with the most idle time of {len(tb)}")
    return Section(
        "temporal",
        "GPU time per rank",
        shown,
        notes,
        digits={"span ms": 2, "busy ms": 2, "idle %": 1, "compute %": 1, "non-compute %": 1},
        max_rows=MAX_RANK_ROWS,
    )


def _idle_section(idle_df: pd.DataFrame) -> Section:
    if idle_df.empty:
        return Section(
            "idle_causes",
            "Idle time by cause (gaps between GPU operations on each stream)",
            pd.DataFrame(),
            ["no GPU operations, so no idle gaps"],
        )
    per = idle.idle_by_rank(idle_df)
    shown = pd.DataFrame(
        {
            "rank": per["rank"],
            "stream idle ms": per["idle_us"] / 1000.0,
            "host wait %": per["host_wait_pctg"],
            "kernel wait %": per["kernel_wait_pctg"],
            "other %": per["other_pctg"],
        }
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


def _overlap_section(ov: pd.DataFrame) -> Section:
    title = "Communication hidden behind compute"
    if ov.empty or not ov["has_communication"].any():
        return Section("overlap", title, pd.DataFrame(), ["no communication kernels in any rank"])
    shown = pd.DataFrame(
        {
            "rank": ov["rank"],
            "comm ms": ov["comm_us"] / 1000.0,
            "overlapped ms": ov["overlap_us"] / 1000.0,
            "hidden %": ov["overlap_pctg"],
        }
    )
    notes = ["hidden % = communication time during which a compute kernel also ran"]
    none = ov.loc[~ov["has_communication"], "rank"].tolist()
    if none:
        notes.append(f"rank(s) {_short_list(none)} have no communication kernels (shown as 0)")
    return Section(
        "overlap", title, shown, notes, digits={"comm ms": 2, "overlapped ms": 2, "hidden %": 1}, max_rows=MAX_RANK_ROWS
    )


def _types_section(types: pd.DataFrame) -> Section:
    shown = pd.DataFrame(
        {
            "kernel type": types["kernel_type"].str.replace(" overlapping ", " + ", regex=False),
            "time ms": types["time_us"] / 1000.0,
            "%": types["pctg"],
        }
    )
    return Section(
        "kernel_types",
        "GPU time by kernel type (all ranks)",
        shown,
        ["A + B = both types running at the same time"],
        digits={"time ms": 2, "%": 1},
    )


def _top_kernels_section(top_k: pd.DataFrame, top: int, total: float) -> Section:
    """``total``: the summed duration of every GPU operation of every rank (the rows' universe)."""
    title = f"Top {top} kernels (all ranks)"
    if top_k.empty:
        return Section("top_kernels", title, pd.DataFrame(), ["no GPU kernels"])
    shown = pd.DataFrame(
        {
            "kernel": top_k["name"].astype(str).to_numpy(),
            "type": [_TYPE_ABBREV.get(t, "other") for t in top_k["kernel_type"].to_numpy()],
            "count": top_k["count"].to_numpy(np.int64),
            "total ms": top_k["sum_us"].to_numpy() / 1e3,
            "mean us": top_k["mean_us"].to_numpy(),
            "% of all": 100.0 * top_k["sum_us"].to_numpy() / total if total > 0 else np.nan,
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


def _slowest_section(tb: pd.DataFrame, st: pd.DataFrame, dist: pd.DataFrame, costliest=None) -> Section:
    """The worst rank per metric, and how it relates to the rank that costs the job most (the one story: the
    same rank and words as ``advise`` and ``stragglers``)."""
    title = "Slowest rank"
    if len(tb) < 2:
        return Section("slowest_rank", title, pd.DataFrame(), ["one rank: nothing to compare"])
    rows = []

    def add(what: str, series: pd.Series, unit_scale: float, unit: str) -> None:
        s = series.dropna()
        if s.empty:
            return
        r = s.idxmax()
        rows.append((what + f" ({unit})", int(r), float(s.loc[r]) * unit_scale, float(s.median()) * unit_scale))

    by_rank = tb.set_index("rank")
    if not st.empty:
        add("mean step time", st.groupby("rank")["dur_us"].mean(), 1e-3, "ms")
    add("GPU span", by_rank["span_us"], 1e-3, "ms")
    add("GPU busy", by_rank["busy_us"], 1e-3, "ms")
    add("GPU idle", by_rank["idle_us"], 1e-3, "ms")
    shown = pd.DataFrame(rows, columns=["metric", "worst rank", "worst", "median"])
    notes = []
    if not dist.empty:
        worst = dist.loc[dist["sum_vs_median"].idxmax()]
        if worst["sum_vs_median"] > 1.1:
            notes.append(
                f"rank {int(worst['rank'])} spends {worst['sum_vs_median']:.2f}x the median rank's time in "
                f"{worst['kernel_type'].lower()} kernel {worst['name'][:60]}"
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


def _findings_section(findings: pd.DataFrame) -> Section:
    title = "Findings that affect these numbers"
    rel = findings[findings["code"].isin(AFFECTING_CODES) | (findings["severity"] == "error")]
    order = {"error": 0, "warning": 1, "info": 2}
    rel = rel.assign(_o=rel["severity"].map(order).fillna(3)).sort_values("_o", kind="stable")
    lines = []
    for sev, rank, msg in zip(rel["severity"], rel["rank"], rel["message"]):
        where = "" if rank is None or (isinstance(rank, float) and np.isnan(rank)) else f" rank {int(rank)}:"
        lines.append(f"{str(sev).upper()}{where} {msg}")
    notes = []
    if len(lines) > MAX_FINDINGS:
        notes.append(f"{len(lines) - MAX_FINDINGS} more; run 'holotrace doctor PATH' for all findings with evidence")
    if not lines:
        lines = ["none"]
    return Section("findings", title, pd.DataFrame(), notes, lines=lines[:MAX_FINDINGS])


def _short_list(values: list, n: int = 8) -> str:
    text = ", ".join(map(str, values[:n]))
    return text + (f" … ({len(values)} in all)" if len(values) > n else "")
