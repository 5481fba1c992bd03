#!/usr/bin/env python3
"""Whole commands as a user runs them: ``holotrace summary``, ``report`` and ``advise`` in fresh processes, cold
(an empty cache folder) and cached, for one or more source trees side by side; optionally HTA's load plus the
analyses the summary shows, in HTA's interpreter, in the same run.

    python benchmarks/bench_commands.py --trace-dir JOB --repeat 3
    python benchmarks/bench_commands.py --trace-dir JOB --src before=/path/to/old/src --src after=src
    python benchmarks/bench_commands.py --trace-dir RANK --commands summary --hta-python ~/hta-venv/bin/python

Each process runs as the installed ``holotrace`` console script runs it (``from holotrace.cli import command``) and
is measured from its start until it is reaped: wall time (to the microsecond), CPU time (user + system, its own
resource usage: the steadier figure on a shared machine) and the largest resident set. The trees' cached runs are
interleaved (one run of each tree in turn). A source tree is put first on ``PYTHONPATH``; its cache is a folder of its
own, so trees with other cache formats do not meet. The 1-minute load average is printed with every row: other
work on the machine stretches wall times. The traces are read once before each cold run and before HTA's run
(``_harness.warm``): every run finds them in the page cache, so the disk is not measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _harness import REPO, markdown_table, resolve_hta_python, warm  # noqa: E402

HTA_CHILD = """
import sys, time, json
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
ranks = list(ta.t.traces.keys())
ta.get_temporal_breakdown(visualize=False)
ta.get_gpu_kernel_breakdown(visualize=False)
ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
ta.get_comm_comp_overlap(visualize=False)
ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "analyses_s": t3 - t2}))
"""


# what the installed ``holotrace`` console script runs (not ``-m holotrace.cli``, which adds runpy's imports)
CONSOLE_SCRIPT = "import sys; from holotrace.cli import command; sys.exit(command())"


def timed(cmd: list[str], env: dict) -> dict:
    """Run ``cmd``; its wall time (to the microsecond, from start to reaped), CPU and peak RSS (the child's own
    resource usage, as ``wait4`` reports it)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    res = {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_mb": ru.ru_maxrss / 1024,
        "load": load,
        "ok": p.returncode == 0,
        "stdout": stdout[-2000:],
    }
    if p.returncode != 0:
        res["error"] = (stderr.strip().splitlines() or ["?"])[-1]
    return res


def command_line(command: str, trace_dir: str, cache: str, out_dir: str) -> list[str]:
    cmd = [sys.executable, "-c", CONSOLE_SCRIPT, command, trace_dir, "--cache-dir", cache, "--quiet"]
    if command == "report":
        cmd += ["-o", os.path.join(out_dir, "report.html")]
    if command == "critical-path":
        cmd += ["--job"]  # the whole job's replay (one rank's path is the other benchmark's question)
    return cmd


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace-dir", required=True, help="a job folder or one trace file")
    p.add_argument("--commands", default="summary,report,advise")
    p.add_argument("--repeat", type=int, default=3, help="cached runs per command (default 3)")
    p.add_argument(
        "--src", action="append", default=[], metavar="LABEL=DIR", help="a source tree to measure (default: src/)"
    )
    p.add_argument("--no-cold", action="store_true", help="only cached runs (the cache is filled first)")
    p.add_argument(
        "--cold-repeat", type=int, default=1, help="cold runs per command, each with an empty cache folder (default 1)"
    )
    p.add_argument("--hta-python", default=None, help="HTA's interpreter: its load + the summary's analyses")
    p.add_argument("--results", default=None, help="write every measurement as JSON here")
    a = p.parse_args(argv)
    trees = [s.split("=", 1) for s in a.src] or [["current", os.path.join(REPO, "src")]]
    commands = [c for c in a.commands.split(",") if c]
    rows, raw = [], []
    with tempfile.TemporaryDirectory(prefix="holotrace-bench-cmd-") as tmp:
        envs = {label: {**os.environ, "PYTHONPATH": os.path.abspath(src)} for label, src in trees}
        for command in commands:
            runs = {label: [] for label, _ in trees}
            for k in range(0 if a.no_cold else a.cold_repeat):  # cold runs interleaved too, each in a new folder
                for label, _ in trees:
                    cold_cache = os.path.join(tmp, f"cold-{label}-{command}-{k}")
                    warm(a.trace_dir)  # (the traces in the page cache: the disk is not measured)
                    runs[label].append(
                        ("cold", timed(command_line(command, a.trace_dir, cold_cache, tmp), envs[label]))
                    )
                    shutil.rmtree(cold_cache, ignore_errors=True)  # (its entries' pages leave the page cache with it)
            for label, _ in trees:
                cache = os.path.join(tmp, f"cache-{label}")
                if not os.path.isdir(cache):  # the cached runs' folder, filled once per tree
                    timed(command_line("summary", a.trace_dir, cache, tmp), envs[label])
            for _ in range(a.repeat):  # the trees' cached runs interleaved: a drift of the machine hits them alike
                for label, _ in trees:
                    cache = os.path.join(tmp, f"cache-{label}")
                    runs[label].append(("cached", timed(command_line(command, a.trace_dir, cache, tmp), envs[label])))
            for label, _ in trees:
                for mode in ("cold", "cached"):
                    ms = [m for k, m in runs[label] if k == mode]
                    if not ms:
                        continue
                    bad = [m["error"] for m in ms if not m["ok"]]
                    rows.append(
                        [
                            label,
                            command,
                            mode,
                            len(ms),
                            f"{statistics.median(m['wall_s'] for m in ms):.3f}",
                            f"{min(m['wall_s'] for m in ms):.3f}",
                            f"{statistics.median(m['cpu_s'] for m in ms):.2f}",
                            f"{max(m['peak_mb'] for m in ms):.0f}",
                            f"{min(m['load'] for m in ms):.1f}-{max(m['load'] for m in ms):.1f}",
                            "ok" if not bad else bad[0],
                        ]
                    )
                    raw.append({"tree": label, "command": command, "mode": mode, "runs": ms})
        if a.hta_python:
            hta, reason = resolve_hta_python(a.hta_python)
            if hta is None:
                print(f"HTA not measured: {reason}")
            else:
                warm(a.trace_dir)
                m = timed([hta, "-c", HTA_CHILD, a.trace_dir], dict(os.environ))
                inner = json.loads(m["stdout"].strip().splitlines()[-1]) if m["ok"] else {}
                rows.append(
                    [
                        "HTA 0.6.1",
                        "load + 5 analyses",
                        "-",
                        1,
                        f"{m['wall_s']:.2f}",
                        f"{m['wall_s']:.2f}",
                        f"{m['cpu_s']:.2f}",
                        f"{m['peak_mb']:.0f}",
                        f"{m['load']:.1f}",
                        "ok" if m["ok"] else m.get("error"),
                    ]
                )
                raw.append({"tree": "hta", "command": "load+analyses", "runs": [m], "inner": inner})
                if inner:
                    print(
                        f"HTA in process: import {inner['import_s']:.2f} s, load {inner['load_s']:.2f} s, "
                        f"analyses {inner['analyses_s']:.2f} s"
                    )
    headers = ["tree", "command", "cache", "runs", "wall s (median)", "wall s (best)", "CPU s", "peak MB", "load", ""]
    print(markdown_table(headers, rows))
    if a.results:
        with open(a.results, "w") as f:
            json.dump(raw, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
