#!/usr/bin/env python3
"""Critical path of one profiler step, holotrace beside HTA: graph + breakdown time after load, peak memory.

Each measurement runs in its own process: load the rank with ``TraceAnalysis``, then time
``critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=0)`` and
``get_critical_path_breakdown()``: the first call (it includes holotrace's per-rank HTA-view columns, built on
first use) and the best of ``--repeat`` (one run for HTA). Peak memory is the
process's maximum resident set size (load included) and its growth during the analysis.

    python benchmarks/bench_critical_path.py jobs/one100 jobs/one500 \
        --hta-python "$HOLOTRACE_HTA_PYTHON" --json cp_bench.json

Each PATH is a folder with one rank file (benchmarks/generate.py --ranks 1 --target-mb N --out PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20
def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
path, tool, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
if tool == "hta":
    import logging
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    ta = TraceAnalysis(trace_dir=path)
else:
    from holotrace import TraceAnalysis
    ta = TraceAnalysis(trace_dir=path, cache=False)
load_s = time.perf_counter() - t0
rss_load, peak_load = rss_mb(), peak_mb()
best, first = None, None
for _ in range(repeat):
    t1 = time.perf_counter()
    graph, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=0)
    t2 = time.perf_counter()
    df = graph.get_critical_path_breakdown()
    t3 = time.perf_counter()
    first = first or t3 - t1
    if best is None or t3 - t1 < best[0]:
        best = (t3 - t1, t2 - t1, t3 - t2)
print(json.dumps({"tool": tool, "load_s": load_s, "first_s": first, "cp_s": best[0], "graph_s": best[1], "breakdown_s": best[2],
                  "path_edges": int(len(df)), "path_us": float(df.duration.sum()), "rss_after_load_mb": rss_load,
                  "peak_mb": peak_mb(), "peak_growth_mb": max(peak_mb() - peak_load, 0.0)}))
"""


def measure(python: str, path: str, tool: str, repeat: int) -> dict:
    out = subprocess.run([python, "-c", CHILD, path, tool, str(repeat)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tool} on {path} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def size_mb(path: str) -> float:
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) / 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="folders holding one generated rank each")
    p.add_argument("--hta-python", default=os.environ.get("HOLOTRACE_HTA_PYTHON"), help="interpreter with HTA")
    p.add_argument("--repeat", type=int, default=3, help="holotrace runs per process (best kept)")
    p.add_argument("--json", help="also write the results here")
    a = p.parse_args(argv)
    rows = []
    print(
        "| rank file | holotrace graph + breakdown, first / best | HTA graph + breakdown | speed-up (first) "
        "| path edges (both) | holotrace peak RSS | HTA peak RSS |"
    )
    print("|---|---|---|---|---|---|---|")
    for path in a.paths:
        ours = measure(sys.executable, path, "holotrace", a.repeat)
        hta = measure(a.hta_python, path, "hta", 1) if a.hta_python else None
        rows.append({"path": path, "mb": size_mb(path), "holotrace": ours, "hta": hta})
        h = f"{hta['cp_s']:.2f} s" if hta else "-"
        sp = f"{hta['cp_s'] / ours['first_s']:.0f}x" if hta else "-"
        pe = f"{ours['path_edges']} / {hta['path_edges']}" if hta else f"{ours['path_edges']}"
        hp = f"{hta['peak_mb']:.0f} MB" if hta else "-"
        print(
            f"| {rows[-1]['mb']:.0f} MB | {ours['first_s']:.3f} / {ours['cp_s']:.3f} s | {h} | {sp} | {pe} | {ours['peak_mb']:.0f} MB "
            f"(+{ours['peak_growth_mb']:.0f} in the analysis) | {hp} |",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
