#!/usr/bin/env python3
"""Diff benchmark: holotrace's native diff of two jobs versus HTA's ``TraceDiff.compare_traces``.

Two generated jobs (the same model with two seeds; 8 ranks x 20 MB x 8 steps by default) are compared
by each tool, in turns, ``--repeat`` times; each run is a fresh process. Measured per run:

* HTA: ``LabeledTrace(trace_dir=...)`` for both jobs (HTA parses the JSON each time: it has no cache), then
  ``compare_traces`` over every rank and iteration; the process's wall time from start to exit;
* holotrace: ``holotrace.load`` of both jobs from the cache (warmed once before the runs), then
  ``analysis.diff.diff_jobs``; and ``holotrace diff BASE NEW`` as a whole process (start, imports,
  cached load, diff, report on stdout, exit).

Example::

    HOLOTRACE_HTA_PYTHON=/path/to/hta-venv/bin/python python benchmarks/bench_diff.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness as h  # noqa: E402

SCRIPT = os.path.abspath(__file__)


# ---- children ---------------------------------------------------------------------------------


def child_hta(base, new):
    t0 = time.perf_counter()
    from hta.trace_diff import LabeledTrace, TraceDiff

    t1 = time.perf_counter()
    c, n = LabeledTrace("base", trace_dir=base), LabeledTrace("new", trace_dir=new)
    t2 = time.perf_counter()
    df = TraceDiff.compare_traces(c, n, c.ranks(), n.ranks(), c.iterations(), n.iterations())
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "load_s": t2 - t1, "compute_s": t3 - t2, "rows": len(df)}


def child_holotrace(base, new, cache_dir):
    t0 = time.perf_counter()
    h.import_holotrace()
    import holotrace
    from holotrace.analysis.diff import diff_jobs

    t1 = time.perf_counter()
    jobs = [holotrace.load(p, cache_dir=cache_dir, progress_bar=False) for p in (base, new)]
    t2 = time.perf_counter()
    d = diff_jobs(*jobs)
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "load_s": t2 - t1, "compute_s": t3 - t2, "rows": len(d.ops)}


# ---- parent -----------------------------------------------------------------------------------


def _child(python, tool, base, new, cache_dir, log):
    out = h.run_child(python, SCRIPT, [tool, base, new, cache_dir], log, timeout=1800)
    return out.get("result") if out["status"] == "ok" else None


def _cli(base, new, cache_dir):
    cmd = [sys.executable, "-m", "holotrace.cli", "diff", base, new, "--cache-dir", cache_dir, "--quiet"]
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    wall = time.perf_counter() - t
    if r.returncode not in (0, 1):
        print(f"  holotrace diff failed: {r.stderr.strip()[-500:]}")
        return None
    return wall


def _env():
    src = os.path.join(h.REPO, "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default=h.default_work_dir(), help="folder of generated jobs and the cache")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--size-mb", type=float, default=20)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seeds", type=int, nargs=2, default=(1, 2), metavar=("BASE", "NEW"))
    p.add_argument("--repeat", type=int, default=3, help="runs per tool (median reported)")
    p.add_argument("--hta-python", help=f"interpreter with HTA (default ${h.HTA_ENV})")
    p.add_argument("--skip-hta", action="store_true")
    p.add_argument("--results", help="write the figures as JSON to this file")
    p.add_argument("--child", nargs=4, metavar=("TOOL", "BASE", "NEW", "CACHE"), help=argparse.SUPPRESS)
    p.add_argument("--child-result", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        tool, base, new, cache_dir = a.child
        try:
            res = child_hta(base, new) if tool == "hta" else child_holotrace(base, new, cache_dir)
        except Exception as e:  # reported by the parent
            res = {"error": f"{type(e).__name__}: {e}"}
        h.write_child_result(a.child_result, {**res, **h.child_rusage()})
        return 0

    os.makedirs(a.work, exist_ok=True)
    base, _ = h.ensure_job(a.work, a.ranks, a.size_mb, a.steps, seed=a.seeds[0])
    new, _ = h.ensure_job(a.work, a.ranks, a.size_mb, a.steps, seed=a.seeds[1])
    cache_dir = os.path.join(a.work, "diff-cache")
    hta_python, why = h.resolve_hta_python(a.hta_python, a.skip_hta)
    if why:
        print(f"HTA side left out: {why}")
    print("warming the cache ...")
    _child(sys.executable, "holotrace", base, new, cache_dir, os.path.join(a.work, "diff-warm.log"))
    runs = {"hta": [], "holotrace": [], "cli": []}
    for i in range(a.repeat):  # in turns, so that load on the machine hits both tools alike
        if hta_python:
            out = h.run_child(
                hta_python,
                SCRIPT,
                ["hta", base, new, cache_dir],
                os.path.join(a.work, f"diff-hta-{i}.log"),
                timeout=1800,
            )
            if out["status"] == "ok":
                runs["hta"].append({**out["result"], "process_s": out["process_wall_s"]})
        out = h.run_child(
            sys.executable,
            SCRIPT,
            ["holotrace", base, new, cache_dir],
            os.path.join(a.work, f"diff-holotrace-{i}.log"),
            timeout=1800,
        )
        if out["status"] == "ok":
            runs["holotrace"].append({**out["result"], "process_s": out["process_wall_s"]})
        wall = _cli(base, new, cache_dir)
        if wall is not None:
            runs["cli"].append({"process_s": wall})
        print(f"run {i + 1}/{a.repeat} done")

    med = {
        t: {k: statistics.median(r[k] for r in rs) for k in rs[0] if isinstance(rs[0][k], (int, float))}
        for t, rs in runs.items()
        if rs
    }
    H, N, C = med.get("hta", {}), med.get("holotrace", {}), med.get("cli", {})
    hta_work = H["load_s"] + H["compute_s"] if H else None
    rows = [
        [
            "HTA load + compare_traces  vs  holotrace diff_jobs (cached jobs in memory)",
            hta_work,
            N.get("compute_s"),
            h.ratio(hta_work, N.get("compute_s")),
        ],
        [
            "HTA load + compare_traces  vs  holotrace cached load + diff_jobs",
            hta_work,
            N and N["load_s"] + N["compute_s"],
            h.ratio(hta_work, N and N["load_s"] + N["compute_s"]),
        ],
        [
            "compare_traces alone  vs  diff_jobs alone",
            H.get("compute_s"),
            N.get("compute_s"),
            h.ratio(H.get("compute_s"), N.get("compute_s")),
        ],
        [
            "whole process: HTA script  vs  `holotrace diff BASE NEW`",
            H.get("process_s"),
            C.get("process_s"),
            h.ratio(H.get("process_s"), C.get("process_s")),
        ],
        ["imports (in the process)", H.get("import_s"), N.get("import_s"), None],
    ]
    print(
        f"\njobs: {base} vs {new} ({a.ranks} ranks x {a.size_mb:g} MB x {a.steps} steps); median of "
        f"{a.repeat} runs; {h.machine_info()}\n"
    )
    print(h.markdown_table(["measure (s)", "HTA 0.6.1", "holotrace", "speed-up"], rows))
    if a.results:
        with open(a.results, "w") as f:
            json.dump({"runs": runs, "median": med, "machine": h.machine_info()}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
