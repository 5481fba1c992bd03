"""``holotrace summary`` by map/reduce: on an executor (``--executor``), or over an ingest folder.

The report has the sections of the in-memory summary, laid out by the same functions, from the frames of
:func:`holotrace.scale.summarize` (every per-rank table identical to the in-memory analyses; launch-delay
median and p95 from merged sketches, within 1 %).
"""

from __future__ import annotations

import argparse
import os

import pandas as pd

from holotrace.analysis.annotations import shorten_names
from holotrace.commands._output import Report, Section
from holotrace.errors import AnalysisError
from holotrace.exec.executor import ENV_EXECUTOR

__all__ = ["wants_scale", "scale_report", "summary_of_args"]


def wants_scale(args: argparse.Namespace) -> bool:
    """Map/reduce is asked for: an executor named (option or environment), or an ingest folder given."""
    from holotrace.scale.store import is_ingest_folder

    return bool(getattr(args, "executor", None) or os.environ.get(ENV_EXECUTOR)) or is_ingest_folder(args.path)


def summary_of_args(args: argparse.Namespace):
    """The :class:`~holotrace.scale.JobSummary` the command line asks for."""
    from holotrace.exec.executor import get_executor
    from holotrace.model.filter import parse_int_ranges
    from holotrace.scale import summarize

    if getattr(args, "steps", None) is not None:
        raise AnalysisError("--steps cannot be combined with --executor or an ingest folder (summaries are per rank)",
                            path=args.path, fix="drop --steps, or run without --executor on the trace folder")
    ranks = parse_int_ranges(args.ranks, "rank") if getattr(args, "ranks", None) is not None else None
    quiet = getattr(args, "quiet", False)
    from holotrace.scale.store import is_ingest_folder

    if is_ingest_folder(args.path):
        return summarize(args.path, ranks=ranks, top=getattr(args, "top", 10))
    with get_executor(getattr(args, "executor", None), address=getattr(args, "ray_address", None), workers=getattr(args, "workers", None)) as ex:
        return summarize(args.path, executor=ex, ranks=ranks, cache=not getattr(args, "no_cache", False), cache_dir=getattr(args, "cache_dir", None),
                         top=getattr(args, "top", 10), progress_bar=False if quiet else None)


def scale_report(js, *, layout, top: int = 10) -> Report:
    """The summary report of a :class:`~holotrace.scale.JobSummary`, laid out by ``layout`` (the module
    :mod:`holotrace.commands.summary`, whose section builders the in-memory summary uses)."""
    _summary = layout
    f = js.frames
    tb, st, dist = f["temporal"], f["steps"], f["kernel_rank_distribution"]
    findings = pd.DataFrame([x.as_dict() for x in js.findings], columns=["severity", "code", "rank", "file", "count", "message", "example"])
    sections = [
        _summary._temporal_section(tb),
        _summary._idle_section(f["idle"]),
        _summary._overlap_section(f["overlap"]),
        _summary._types_section(f["kernel_types"]),
        _summary._top_kernels_section(f["top_kernels"], top, tb),
        _summary._slowest_section(None, tb, st, dist),
        Section("stragglers", "Stragglers", pd.DataFrame(), lines=_straggler_lines(js)),
        Section("launch_delays", "Kernel launches", pd.DataFrame(), lines=_launch_lines(f["launch_overview"], f["launch_worst"])),
        _summary._findings_section(findings),
    ]
    header = [f"job     {js.path}",
              f"ranks   {_summary._ranks_text(js.ranks)}" + (f"  (world size {js.world_size})" if js.world_size else ""),
              f"steps   {_summary._steps_text(f['profiler_steps'])}",
              f"run     map over {len(js.ranks)} rank(s) on the {js.executor} executor, reduce over their summaries"]
    if js.cross_rank_warning:
        header.append(f"WARNING cross-rank numbers are incomplete: {js.cross_rank_warning}")
    keys = ("temporal", "temporal_by_step", "kernel_types", "kernel_types_by_rank", "kernel_stats", "kernel_rank_distribution",
            "kernel_moments", "idle", "idle_interval_stats", "overlap", "steps", "collective_waits", "straggler_report")
    data = {k: f[k] for k in keys}
    data["findings"] = findings
    meta = {"path": js.path, "ranks": list(js.ranks), "steps": f["profiler_steps"], "world_size": js.world_size, "executor": js.executor}
    return Report(title="holotrace summary: where did the GPU time go?", sections=sections, header=header, data=data, meta=meta)


def _straggler_lines(js) -> list[str]:
    rep, summ = js.frames["straggler_report"], js.frames["straggler_summary"]
    if len(js.ranks) < 2:
        return ["stragglers: one rank, nothing to compare"]
    if rep.empty:
        return ["stragglers: no communication kernel occurs on two or more ranks"]
    top = summ.iloc[0]
    if top["waited_for_us"] <= 0:
        return ["stragglers: none (collectives take the same time on every rank)"]
    st = rep[(rep["rank"] == top["rank"]) & rep["straggler"]]
    worst = st.sort_values("worst_collective_wait_us", ascending=False).head(1)
    ev = ""
    if len(worst):
        w = worst.iloc[0]
        ev = (f"; worst: {shorten_names([str(w['worst_collective'])])[0][:50]} in step {int(w['step'])}, "
              f"{w['worst_collective_wait_us'] / 1e3:.3f} ms")
    return [f"straggler: rank {int(top['rank'])} (the others waited {top['waited_for_us'] / 1e3:.3f} ms for it; "
            f"straggler in {int(top['steps_as_straggler'])}/{rep['step'].nunique()} steps{ev})"]


def _launch_lines(o: dict, worst: pd.DataFrame, cutoff: float = 100) -> list[str]:
    if not o["launches"]:
        return ["launch delay: no launch call paired with GPU work"]
    lines = [f"launch delay: median {o['median_us']:.1f} us, p95 {o['p95_us']:.1f} us (within 1 %) over {o['launches']} launches; "
             f"{o['outliers']} above {cutoff:g} us"]
    for row in worst.itertuples(index=False):
        step = f" step {row.iteration}" if row.iteration >= 0 else ""
        lines.append(f"  rank {row.rank}{step} at {row.ts / 1e3:.3f} ms: {str(shorten_names([str(row.kernel)])[0])[:60]} "
                     f"started {row.launch_delay:.1f} us after its {row.launch}")
    return lines
