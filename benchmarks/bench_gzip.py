#!/usr/bin/env python3
"""The gzipped rank's first load against the same rank's plain one: interleaved fresh processes, one or more source
trees side by side.

    python benchmarks/bench_gzip.py --size-mb 500 --repeat 9
    python benchmarks/bench_gzip.py --size-mb 500 --src before=/path/to/old/src --src after=src

The generated rank (``generate.py``: one rank of an 8-GPU job) is made once as ``.json`` and once as ``.json.gz``
(level 3) under ``--work``. Each measured process calls ``holotrace.load`` on one file, as a user's first load does
(``cache``: a new empty cache folder, the entry written; ``nocache``: ``cache=False``), and reports the call's wall
time, its CPU (user + system) and the process's peak RSS. The runs go round robin (tree, file, cache mode), so the
machine's drift falls on every cell alike; both files are read once before each run (page cache warm). Reported per
tree and cache mode: the medians and bests, and gzipped / plain of each (the ratio of the medians and of the bests).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _harness import default_work_dir, ensure_job, markdown_table, warm  # noqa: E402

CHILD = """
import json, resource, shutil, sys, tempfile, time
from holotrace.loader import load
cached = sys.argv[2] == "cache"
where = tempfile.mkdtemp() if cached else None
t = time.perf_counter()
load(sys.argv[1], cache=cached, cache_dir=where)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
if where:
    from holotrace.ingest import cache as cm
    cm.flush()
    shutil.rmtree(where, ignore_errors=True)
"""


def measure(src: str | None, path: str, mode: str) -> dict:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = os.path.abspath(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run([sys.executable, "-c", CHILD, path, mode], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"bench_gzip: the load of {path} failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=float, default=500.0, help="JSON MB of the generated rank (default 500)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeat", type=int, default=9, help="runs of each (tree, file, cache mode) (default 9)")
    p.add_argument("--modes", default="cache,nocache", help="cache modes, comma separated (default both)")
    p.add_argument("--src", action="append", default=[], metavar="NAME=PATH", help="a source tree (repeatable)")
    p.add_argument("--work", default=default_work_dir(), help="folder for the generated ranks")
    p.add_argument("--results", help="write every measurement as JSON to this file")
    a = p.parse_args()
    trees = [tuple(s.split("=", 1)) for s in a.src] or [("installed", None)]
    modes = [m for m in a.modes.split(",") if m]
    plain_dir, _ = ensure_job(a.work, 1, a.size_mb, a.steps, world_size=8)
    gz_dir, _ = ensure_job(a.work, 1, a.size_mb, a.steps, world_size=8, gzip_output=True)
    files = {
        "plain": os.path.join(plain_dir, sorted(os.listdir(plain_dir))[0]),
        "gzip": os.path.join(gz_dir, sorted(os.listdir(gz_dir))[0]),
    }
    runs: dict = {}
    for i in range(a.repeat):
        for name, src in trees:
            for kind, path in files.items():
                for mode in modes:
                    warm(path)
                    runs.setdefault((name, kind, mode), []).append(measure(src, path, mode))
        print(f"round {i + 1} of {a.repeat} done", file=sys.stderr)
    rows = []
    for name, _ in trees:
        for mode in modes:
            cell = {}
            for kind in files:
                w = [r["wall"] for r in runs[(name, kind, mode)]]
                cpu = [r["cpu"] for r in runs[(name, kind, mode)]]
                rss = [r["rss_mb"] for r in runs[(name, kind, mode)]]
                cell[kind] = (statistics.median(w), min(w), statistics.median(cpu), max(rss))
            pl, gz = cell["plain"], cell["gzip"]
            rows.append(
                [
                    name,
                    mode,
                    f"{pl[0]:.3f} / {pl[1]:.3f}",
                    f"{gz[0]:.3f} / {gz[1]:.3f}",
                    f"{gz[0] / pl[0]:.2f} / {gz[1] / pl[1]:.2f}",
                    f"{pl[2]:.2f} / {gz[2]:.2f}",
                    f"{pl[3]:.0f} / {gz[3]:.0f}",
                ]
            )
    headers = ["tree", "cache", "plain s (median / best)", "gzip s", "gzip / plain", "CPU s plain / gzip", "peak MB"]
    print(markdown_table(headers, rows))
    if a.results:
        with open(a.results, "w") as f:
            json.dump({"|".join(k): v for k, v in runs.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
