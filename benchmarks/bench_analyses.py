#!/usr/bin/env python3
"""Analysis benchmark: holotrace's HTA-compatible facade versus HTA, method by method.

One subprocess per tool: it builds ``TraceAnalysis(trace_dir=...)`` (``from holotrace import
TraceAnalysis`` or ``from hta.trace_analysis import TraceAnalysis``), then times each analysis
below separately, catching errors per analysis.  The default job is 8 ranks of 10 MB of JSON with
a straggler (rank 3, GPU 30% slower), generated once and cached under ``--work``.

Example::

    HOLOTRACE_HTA_PYTHON=/path/to/hta-venv/bin/python \\
        python benchmarks/bench_analyses.py --results analyses.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as h  # noqa: E402

SCRIPT = os.path.abspath(__file__)

# name -> call(ta, ranks, tmp_dir); the same calls for both tools (HTA's method names and defaults).
ANALYSES = {
    "get_temporal_breakdown": lambda ta, ranks, tmp: ta.get_temporal_breakdown(visualize=False),
    "get_gpu_kernel_breakdown": lambda ta, ranks, tmp: ta.get_gpu_kernel_breakdown(visualize=False),
    "get_idle_time_breakdown": lambda ta, ranks, tmp: ta.get_idle_time_breakdown(ranks=ranks, visualize=False),
    "get_comm_comp_overlap": lambda ta, ranks, tmp: ta.get_comm_comp_overlap(visualize=False),
    "get_cuda_kernel_launch_stats": lambda ta, ranks, tmp: ta.get_cuda_kernel_launch_stats(
        ranks=ranks, visualize=False
    ),
    "get_aten_op_kernels_and_delay": lambda ta, ranks, tmp: ta.get_aten_op_kernels_and_delay(ranks=ranks),
    "get_frequent_cuda_kernel_sequences": lambda ta, ranks, tmp: ta.get_frequent_cuda_kernel_sequences(
        operator_name="aten::linear", output_dir=tmp, min_pattern_len=3, rank=0, top_k=5, visualize=False
    ),
    "get_gpu_kernels_with_user_annotations": lambda ta, ranks, tmp: ta.get_gpu_kernels_with_user_annotations(rank=0),
    "get_gpu_user_annotation_breakdown": lambda ta, ranks, tmp: ta.get_gpu_user_annotation_breakdown(visualize=False),
    "get_potential_stragglers": lambda ta, ranks, tmp: ta.get_potential_stragglers(visualize=False),
    "get_queue_length_summary": lambda ta, ranks, tmp: ta.get_queue_length_summary(ranks=ranks),
    "get_memory_bw_summary": lambda ta, ranks, tmp: ta.get_memory_bw_summary(ranks=ranks),
    "critical_path_analysis": lambda ta, ranks, tmp: ta.critical_path_analysis(
        rank=0, annotation="ProfilerStep", instance_id=0
    ),
}


def describe(value, depth=0):
    """A short text summary of an analysis result (shape of frames, values of small lists)."""
    if value is None:
        return "None"
    if hasattr(value, "shape") and hasattr(value, "columns"):
        return f"{value.shape[0]}x{value.shape[1]} frame"
    if isinstance(value, dict):
        inner = describe(next(iter(value.values())), depth + 1) if value and depth < 1 else ""
        return f"{{{len(value)} keys}}" + (f" of {inner}" if inner else "")
    if isinstance(value, (tuple, list)):
        if value and all(isinstance(x, (int, float, str)) or type(x).__name__.startswith("int") for x in value):
            return str([int(x) if type(x).__name__.startswith("int") else x for x in value])[:60]
        if depth < 1:
            return "(" + ", ".join(describe(x, depth + 1) for x in value) + ")"
        return f"{type(value).__name__}[{len(value)}]"
    return type(value).__name__


# ---- child side -------------------------------------------------------------------------------


class AnalysisTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise AnalysisTimeout()


def child(args):
    out = {"tool": args.child, "analyses": {}}
    ranks = [int(r) for r in args.ranks.split(",")]
    tmp = tempfile.mkdtemp(prefix="holotrace-bench-seq-")
    signal.signal(signal.SIGALRM, _alarm)
    try:
        t = time.perf_counter()
        if args.child == "hta":
            h.silence_plotly()
            from hta.trace_analysis import TraceAnalysis
        else:
            TraceAnalysis = h.import_holotrace().TraceAnalysis
        out["import_s"] = time.perf_counter() - t
        t = time.perf_counter()
        ta = TraceAnalysis(trace_dir=args.trace_dir)
        out["load_s"] = time.perf_counter() - t
        print(f"loaded in {out['load_s']:.2f} s", flush=True)
        selected = args.analyses.split(",") if args.analyses else list(ANALYSES)
        for name in selected:
            entry = out["analyses"][name] = {}
            signal.alarm(int(args.analysis_timeout))
            t = time.perf_counter()
            try:
                value = ANALYSES[name](ta, ranks, tmp)
                entry["seconds"] = time.perf_counter() - t
                entry["result"] = describe(value)
                if args.repeat > 1 and entry["seconds"] < 1.0:  # sub-second calls: also the best of --repeat
                    best = entry["seconds"]
                    for _ in range(args.repeat - 1):
                        t = time.perf_counter()
                        ANALYSES[name](ta, ranks, tmp)
                        best = min(best, time.perf_counter() - t)
                    entry["best_s"] = best
            except AnalysisTimeout:
                entry["error"] = f"timeout after {args.analysis_timeout:g} s"
            except Exception as e:
                entry["seconds"] = time.perf_counter() - t
                entry["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            finally:
                signal.alarm(0)
            print(f"{name}: {entry}", flush=True)
    except BaseException as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out.update(h.child_rusage())
    h.write_child_result(args.child_result, out)
    return 1 if "error" in out else 0


# ---- parent side ------------------------------------------------------------------------------


def cell(run, name):
    """(seconds or None, note) for one analysis of one tool's run."""
    entry = (run or {}).get("result", {}).get("analyses", {}).get(name)
    if entry is None:
        return None, ""
    if "error" in entry:
        return None, "error: " + entry["error"].split(":")[0]
    return entry["seconds"], entry.get("result", "")


def best(run, name):
    """The fastest of the repeated calls of one analysis (``--repeat``), or None."""
    entry = (run or {}).get("result", {}).get("analyses", {}).get(name) or {}
    return entry.get("best_s")


def render(runs, skipped, json_mb, ranks):
    hta, holo = runs.get("hta"), runs.get("holotrace")
    headers = ["analysis", "HTA (s)", "holotrace (s)", "speedup", "HTA result", "holotrace result"]
    rows = []

    def add(label, a, b, note_a="", note_b=""):
        gain = h.ratio(a, b)
        rows.append([label, a, b, f"{gain:.1f}x" if gain else None, note_a, note_b])

    get = lambda run, key: run.get("result", {}).get(key) if run else None  # noqa: E731
    ok = lambda run, key: run[key] if run and run["status"] == "ok" else None  # noqa: E731
    add(
        "load: TraceAnalysis(trace_dir=...)",
        get(hta, "load_s"),
        get(holo, "load_s"),
        hta["status"] if hta else "",
        holo["status"] if holo else "",
    )
    totals = [0.0, 0.0]
    for name in ANALYSES:
        (a, note_a), (b, note_b) = cell(hta, name), cell(holo, name)
        if a is None and b is None and not note_a and not note_b:
            continue
        totals[0] += a or 0
        totals[1] += b or 0
        add(name, a, b, note_a, note_b)
        best_a, best_b = best(hta, name), best(holo, name)
        if best_a is not None or best_b is not None:
            add("  best of repeated calls", best_a, best_b)
    add("all analyses (sum of the above)", totals[0] or None, totals[1] or None)
    add("process wall time", ok(hta, "process_wall_s"), ok(holo, "process_wall_s"))
    rows.append(
        ["peak RSS, process tree (MB)", ok(hta, "tree_peak_rss_mb"), ok(holo, "tree_peak_rss_mb"), None, "", ""]
    )
    rows.append(
        [
            "system load avg before / after",
            *(f"{r['loadavg_before']:.1f} / {r['loadavg_after']:.1f}" if r else None for r in (hta, holo)),
            None,
            "",
            "",
        ]
    )
    lines = [f"\n### analyses: {ranks} ranks, {json_mb:,.1f} MB JSON\n", h.markdown_table(headers, rows)]
    lines += [f"\n{tool}: {why}" for tool, why in skipped.items()]
    return "\n".join(lines)


def _sig(x):
    """Seconds to three significant digits (sub-10 ms analyses stay readable)."""
    return "–" if x is None else f"{x:.3g}"


def compare(before_path, after_path):
    """A before/after table of holotrace's figures from two ``--results`` files of the same job: each analysis's
    first call and best of repeated calls, the load, the process wall time and peak memory."""
    import json

    def runs(path):
        with open(path) as f:
            return json.load(f)["runs"]["holotrace"]

    b, a = runs(before_path), runs(after_path)
    rows = []
    ba, aa = b["result"]["analyses"], a["result"]["analyses"]
    for name in [n for n in ANALYSES if n in ba or n in aa]:
        x, y = ba.get(name, {}), aa.get(name, {})
        first = f"{_sig(x.get('seconds'))} -> {_sig(y.get('seconds'))}"
        best = f"{_sig(x.get('best_s'))} -> {_sig(y.get('best_s'))}" if "best_s" in x or "best_s" in y else ""
        rows.append([f"`{name}`", first, best])
    load = lambda r: r["result"].get("load_s")  # noqa: E731
    rows.append(["load, `TraceAnalysis(trace_dir=...)`", f"{_sig(load(b))} -> {_sig(load(a))}", ""])
    rows.append(["process wall time", f"{_sig(b['process_wall_s'])} -> {_sig(a['process_wall_s'])}", ""])
    rows.append(["peak RSS (MB)", f"{b['tree_peak_rss_mb']:,.0f} -> {a['tree_peak_rss_mb']:,.0f}", ""])
    load_avg = lambda r: f"{r['loadavg_before']:.1f}/{r['loadavg_after']:.1f}"  # noqa: E731
    rows.append(["load average before/after", f"{load_avg(b)} -> {load_avg(a)}", ""])
    return h.markdown_table(["analysis", "first call, s (before -> after)", "best of repeated calls, s"], rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=8, help="ranks of the generated job")
    p.add_argument(
        "--size-mb",
        type=float,
        default=10.0,
        help="JSON MB per rank (HTA needs ~3 s per MB of a rank for get_aten_op_kernels_and_delay)",
    )
    p.add_argument("--steps", type=int, default=10, help="profiler steps per rank")
    p.add_argument("--straggler-rank", type=int, default=3, help="slow rank in the generated job (-1: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gzip", action="store_true", help="generate .json.gz files")
    p.add_argument("--trace-dir", help="benchmark this existing job folder instead of a generated one")
    p.add_argument("--analyses", help="comma-separated subset of: " + ", ".join(ANALYSES))
    p.add_argument("--work", default=h.default_work_dir(), help="folder for generated jobs and logs")
    p.add_argument("--results", help="write all measurements as JSON to this file")
    p.add_argument("--hta-python", help=f"interpreter with HTA installed (default: ${h.HTA_ENV})")
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--skip-holotrace", action="store_true")
    p.add_argument("--timeout", type=float, default=3600, help="seconds allowed per tool (load + all analyses)")
    p.add_argument("--analysis-timeout", type=float, default=900, help="seconds allowed per analysis")
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="call each sub-second analysis this many times and also report the fastest call",
    )
    # internal: the measured child process
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="print a before/after table of two --results files (holotrace's figures) and exit",
    )
    p.add_argument("--child", choices=["holotrace", "hta"], help=argparse.SUPPRESS)
    p.add_argument("--child-ranks", dest="child_ranks", help=argparse.SUPPRESS)
    p.add_argument("--child-result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.ranks = args.child_ranks
        return child(args)
    if args.compare:
        print(compare(*args.compare))
        return 0
    if args.analyses:
        unknown = set(args.analyses.split(",")) - set(ANALYSES)
        if unknown:
            p.error(f"unknown analyses: {', '.join(sorted(unknown))}")

    os.makedirs(args.work, exist_ok=True)
    if args.trace_dir:
        folder = args.trace_dir
        files = [f for f in os.listdir(folder) if f.endswith((".json", ".json.gz"))]
        rank_list = list(range(len(files)))
        json_mb = sum(os.path.getsize(os.path.join(folder, f)) for f in files) / 1e6  # on-disk size
        job = {"folder": folder, "files": len(files)}
    else:
        folder, summary = h.ensure_job(
            args.work,
            args.ranks,
            args.size_mb,
            args.steps,
            args.seed,
            gzip_output=args.gzip,
            straggler_rank=args.straggler_rank,
        )
        rank_list = list(range(args.ranks))
        json_mb = summary["json_bytes"] / 1e6
        job = {"folder": folder, **{k: summary[k] for k in ("generator", "json_bytes")}}
        if args.straggler_rank >= 0:
            print(f"generated straggler: rank {args.straggler_rank}")

    hta_python, hta_reason = h.resolve_hta_python(args.hta_python, args.skip_hta)
    holo_reason = "skipped (--skip-holotrace)" if args.skip_holotrace else h.holotrace_status("TraceAnalysis")
    runs, skipped = {}, {}
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    child_args = [
        "--trace-dir",
        folder,
        "--child-ranks",
        ",".join(map(str, rank_list)),
        "--analysis-timeout",
        str(args.analysis_timeout),
        "--repeat",
        str(args.repeat),
    ]
    if args.analyses:
        child_args += ["--analyses", args.analyses]
    for tool, python, reason in (("holotrace", sys.executable, holo_reason), ("hta", hta_python, hta_reason)):
        if reason or python is None:
            skipped[tool] = reason
            print(f"{tool}: {reason}")
            continue
        print(f"{tool} ...", flush=True)
        runs[tool] = h.run_child(
            python, SCRIPT, [tool, *child_args], os.path.join(logs, f"analyses-{tool}.log"), args.timeout
        )
    print(render(runs, skipped, json_mb, len(rank_list)))
    if args.results:
        h.write_child_result(
            args.results,
            {
                "benchmark": "analyses",
                "machine": h.machine_info(),
                "job": job,
                "json_mb": json_mb,
                "runs": runs,
                "skipped": skipped,
            },
        )
        print(f"\nresults written to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
