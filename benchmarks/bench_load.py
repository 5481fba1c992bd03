#!/usr/bin/env python3
"""Load benchmark: holotrace.load versus HTA's TraceAnalysis on generated Kineto traces.

Every measurement runs in a fresh subprocess:

* holotrace, cold cache  - ``holotrace.load(folder, cache_dir=<new empty folder>)``
* holotrace, cached      - the same call again in a new process, reusing that cache folder
* HTA                    - ``TraceAnalysis(trace_dir=folder)`` in the HTA interpreter
  (``--hta-python`` or the ``HOLOTRACE_HTA_PYTHON`` environment variable; skipped with a
  reason when unset or unusable)

The job's files are read once before each run (``_harness.warm``): every tool finds them in the page cache.

Scenarios: ``single`` (one rank of an 8-GPU job, ``--size-mb`` MB of JSON), ``job8`` (8 ranks of
``--job8-size-mb`` MB each), ``all``.  Generated jobs are cached under ``--work``.

Example::

    HOLOTRACE_HTA_PYTHON=/path/to/hta-venv/bin/python \\
        python benchmarks/bench_load.py --scenario all --results load.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as h  # noqa: E402

SCRIPT = os.path.abspath(__file__)


# ---- child side (runs in the measured process) ------------------------------------------------


def child(args):
    out = {"tool": args.child}
    try:
        t = time.perf_counter()
        if args.child == "hta":
            from hta.trace_analysis import TraceAnalysis

            out["import_s"] = time.perf_counter() - t
            t = time.perf_counter()
            analysis = TraceAnalysis(trace_dir=args.trace_dir)
            out["load_s"] = time.perf_counter() - t
            out["ranks"] = len(analysis.t.traces)
            out["rows"] = sum(len(df) for df in analysis.t.traces.values())
        else:
            holotrace = h.import_holotrace()
            out["import_s"] = time.perf_counter() - t
            phases = _time_phases()
            t = time.perf_counter()
            job = holotrace.load(args.trace_dir, cache_dir=args.cache_dir, progress_bar=False)
            out["load_s"] = time.perf_counter() - t
            out["ranks"] = len(job.ranks)
            from holotrace.ingest import cache as cache_mod

            cache_mod.flush()
            out["phases_s"] = phases
    except BaseException as e:  # report anything, including MemoryError / KeyboardInterrupt
        out["error"] = f"{type(e).__name__}: {e}"
    out.update(h.child_rusage())
    h.write_child_result(args.child_result, out)
    return 1 if "error" in out else 0


def _time_phases():
    """Seconds spent in each stage of holotrace's load (in this process; workers' stages are not seen)."""
    from holotrace import loader

    one_file = getattr(loader, "one_file", loader)  # (where a file is decoded, derived and packed)
    spent = {}

    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t

        return run

    for mod, attr, name in (
        (one_file, "decode_into", "decode"),
        (one_file, "derive", "classify+links+steps"),
        (loader, "validate_job", "validate"),
        (loader, "discover", "discover"),
    ):
        if hasattr(mod, attr):
            setattr(mod, attr, timed(name, getattr(mod, attr)))
    try:  # the decoder is imported by the task that decodes a file, from its own module
        from holotrace.ingest import decode as decode_mod

        decode_mod.decode_into = timed("decode", decode_mod.decode_into)
    except ImportError:
        pass
    if hasattr(loader, "Spill"):
        loader.Spill.pack = timed("pack columns", loader.Spill.pack)
    if hasattr(loader, "cache_mod"):  # the entry is committed on a thread after load() returns: timed there
        loader.cache_mod.commit = timed("cache commit (background)", loader.cache_mod.commit)
    return spent


# ---- parent side ------------------------------------------------------------------------------

SCENARIOS = {
    # name: (rank files, world size, size option)
    "single": (1, 8, "size_mb"),
    "job8": (8, 8, "job8_size_mb"),
}


def run_scenario(name, args, hta_python, holo_reason):
    ranks, world, size_opt = SCENARIOS[name]
    size_mb = getattr(args, size_opt)
    print(f"\n=== scenario {name}: {ranks} rank(s) x {size_mb:g} MB ===")
    folder, summary = h.ensure_job(args.work, ranks, size_mb, args.steps, args.seed, world, args.gzip)
    json_mb = summary["json_bytes"] / 1e6
    runs, skipped = {}, {}
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)

    if holo_reason:
        skipped["holotrace"] = holo_reason
    else:
        cache = tempfile.mkdtemp(prefix="holotrace-cache-", dir=args.work)
        try:
            for phase in ("cold", "cached"):
                print(f"holotrace ({'cold cache' if phase == 'cold' else 'cached'}) ...", flush=True)
                h.warm(folder)
                runs[f"holotrace_{phase}"] = h.run_child(
                    sys.executable,
                    SCRIPT,
                    ["holotrace", "--trace-dir", folder, "--cache-dir", cache],
                    os.path.join(logs, f"load-{name}-holotrace-{phase}.log"),
                    args.timeout,
                )
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    if hta_python is None:
        skipped["hta"] = args.hta_reason
    else:
        print("HTA ...", flush=True)
        h.warm(folder)
        runs["hta"] = h.run_child(
            hta_python, SCRIPT, ["hta", "--trace-dir", folder], os.path.join(logs, f"load-{name}-hta.log"), args.timeout
        )

    for run in runs.values():
        r = run.get("result", {})
        if r.get("load_s"):
            run["mb_per_s"] = json_mb / r["load_s"]
        run["rss_per_json_mb"] = run["tree_peak_rss_mb"] / json_mb if run["status"] == "ok" else None
    print(render(name, summary, json_mb, runs, skipped))
    return {
        "job": {k: summary[k] for k in ("generator", "json_bytes")},
        "folder": folder,
        "json_mb": json_mb,
        "file_mb": sum(f["file_bytes"] for f in summary["files"]) / 1e6,
        "runs": runs,
        "skipped": skipped,
    }


ROWS = [  # label, getter, "higher is better"
    ("load time, in process (s)", lambda r: r.get("result", {}).get("load_s"), False),
    ("throughput (MB/s of JSON)", lambda r: r.get("mb_per_s"), True),
    ("process wall time (s)", lambda r: r.get("process_wall_s"), False),
    ("peak RSS, process tree (MB)", lambda r: r.get("tree_peak_rss_mb") if r["status"] == "ok" else None, False),
    ("peak RSS / JSON size", lambda r: r.get("rss_per_json_mb"), False),
    ("max RSS, main process (MB)", lambda r: r.get("result", {}).get("self_max_rss_mb"), False),
    ("max RSS, largest child (MB)", lambda r: r.get("result", {}).get("children_max_rss_mb"), False),
    ("max RSS, /usr/bin/time (MB)", lambda r: r.get("time_v_max_rss_mb"), False),
    ("ranks loaded", lambda r: r.get("result", {}).get("ranks"), True),
    (
        "load stages, in process (s)",
        lambda r: "; ".join(f"{k} {v:.2f}" for k, v in r.get("result", {}).get("phases_s", {}).items()) or None,
        None,
    ),
    ("system load avg before / after", lambda r: f"{r['loadavg_before']:.1f} / {r['loadavg_after']:.1f}", None),
    ("status", lambda r: r["status"], None),
]


def render(name, summary, json_mb, runs, skipped):
    cols = [("holotrace_cold", "holotrace (cold cache)"), ("holotrace_cached", "holotrace (cached)"), ("hta", "HTA")]
    headers = ["metric", *(label for _, label in cols), "holotrace cold vs HTA"]
    rows = []
    for label, get, higher in ROWS:
        values = [get(runs[key]) if key in runs else None for key, _ in cols]
        if higher is None:
            gain = None
        elif higher:
            gain = h.ratio(values[0], values[2])
        else:
            gain = h.ratio(values[2], values[0])
        rows.append([label, *values, f"{gain:.1f}x" if gain else None])
    gen = summary["generator"]
    lines = [
        f"\n### {name}: {gen['ranks']} rank(s), {json_mb:,.1f} MB JSON"
        f" ({gen['steps']} steps, {gen['blocks']} blocks, {'gzip' if gen['gzip'] else 'plain json'})\n",
        h.markdown_table(headers, rows),
    ]
    lines += [f"\n{tool}: {why}" for tool, why in skipped.items()]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=["single", "job8", "all"], default="all")
    p.add_argument(
        "--size-mb",
        default="500",
        help="JSON MB of the single-rank scenario; several, comma-separated, "
        "run one single-rank scenario each (e.g. 100,500,1000)",
    )
    p.add_argument("--job8-size-mb", type=float, default=60.0, help="JSON MB per rank of the 8-rank scenario")
    p.add_argument("--steps", type=int, default=10, help="profiler steps per generated rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gzip", action="store_true", help="benchmark .json.gz files (MB/s still counts JSON bytes)")
    p.add_argument("--work", default=h.default_work_dir(), help="folder for generated jobs, caches and logs")
    p.add_argument("--results", help="write all measurements as JSON to this file")
    p.add_argument("--hta-python", help=f"interpreter with HTA installed (default: ${h.HTA_ENV})")
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--skip-holotrace", action="store_true")
    p.add_argument("--timeout", type=float, default=3600, help="seconds allowed per measured process")
    # internal: the measured child process
    p.add_argument("--child", choices=["holotrace", "hta"], help=argparse.SUPPRESS)
    p.add_argument("--trace-dir", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    p.add_argument("--child-result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)

    os.makedirs(args.work, exist_ok=True)
    hta_python, args.hta_reason = h.resolve_hta_python(args.hta_python, args.skip_hta)
    if args.hta_reason:
        print(f"HTA: {args.hta_reason}")
    holo_reason = "skipped (--skip-holotrace)" if args.skip_holotrace else h.holotrace_status("load")
    if holo_reason:
        print(f"holotrace: {holo_reason}")
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    results = {"benchmark": "load", "machine": h.machine_info(), "scenarios": {}}
    sizes = [float(x) for x in str(args.size_mb).split(",")]
    for name in names:
        for size in sizes if name == "single" else [None]:
            key = name if size is None or len(sizes) == 1 else f"{name}-{size:g}mb"
            if size is not None:
                args.size_mb = size
            results["scenarios"][key] = run_scenario(name, args, hta_python, holo_reason)
            if args.results:  # write after every scenario so a later failure keeps earlier numbers
                h.write_child_result(args.results, results)
    if args.results:
        print(f"\nresults written to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
