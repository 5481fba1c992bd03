#!/usr/bin/env python3
"""Scale-out benchmark (not a test): map over ranks + reduce, local pool vs Ray, on generated jobs.

For each rank count (default 64 and 256 ranks of about 5 MB each, generated under /tmp once) and each
executor, one fresh process runs ``holotrace.scale.summarize`` (no cache) and reports wall time, the
driver's peak RSS, the largest worker peak RSS (reported by the tasks), the per-rank summary size and the
per-rank map time. The driver's memory should not grow with the number of ranks: only summaries travel.

    python benchmarks/bench_scale.py                    # 64 and 256 ranks, local and ray
    python benchmarks/bench_scale.py --ranks 64 --executors local --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from holotrace.exec.executor import get_executor
from holotrace.scale import summarize
path, name, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
with get_executor(name, workers=workers) as ex:
    t1 = time.perf_counter()
    js = summarize(path, executor=ex, cache=False, progress_bar=False)
    t2 = time.perf_counter()
infos = js.summary_bytes
print(json.dumps({"ranks": len(js.ranks), "wall_s": t2 - t1, "startup_s": t1 - t0,
                  "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "summary_kb_mean": sum(infos) / len(infos) / 1024, "summary_kb_max": max(infos) / 1024}))
"""

_WORKER = r"""
import json, sys
from holotrace.exec.executor import get_executor
from holotrace.scale.run import summarize_file
from holotrace.ingest.discover import discover
path, name, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = discover(path).files
with get_executor(name, workers=workers) as ex:
    out = ex.map(summarize_file, [(f.path, f.rank, False, None, None) for f in files])
rss = [o.info["worker_peak_rss"] for o in out if hasattr(o, "info")]
sec = [o.info["map_seconds"] for o in out if hasattr(o, "info")]
print(json.dumps({"worker_peak_rss_mb": max(rss) / 2**20, "map_s_mean": sum(sec) / len(sec), "map_s_max": max(sec)}))
"""


def generate(n: int, mb: float, root: Path) -> Path:
    out = root / f"scale{n}x{mb:g}mb"
    if not (out / f"rank-{n - 1}.pt.trace.json").exists():
        subprocess.run(
            [
                sys.executable,
                str(HERE / "generate.py"),
                "--out",
                str(out),
                "--ranks",
                str(n),
                "--target-mb",
                str(mb),
                "--steps",
                "3",
                "--straggler-rank",
                "3",
            ],
            check=True,
            capture_output=True,
        )
    return out


def run(code: str, path: Path, name: str, workers: int) -> dict:
    env = dict(os.environ, RAY_DEDUP_LOGS="0")
    r = subprocess.run(
        [sys.executable, "-c", code, str(path), name, str(workers)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if r.returncode:
        raise SystemExit(f"{name} on {path} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--mb", type=float, default=5.0, help="MB of JSON per rank (default 5)")
    ap.add_argument("--executors", nargs="+", default=["local", "ray"], choices=["local", "ray"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--root", default="/tmp", help="where generated jobs are kept (default /tmp)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args()
    rows = []
    for n in args.ranks:
        path = generate(n, args.mb, Path(args.root))
        size = sum(p.stat().st_size for p in path.iterdir()) / 1e6
        for name in args.executors:
            row = {
                "ranks": n,
                "job_mb": round(size, 1),
                "executor": name,
                **run(_CHILD, path, name, args.workers),
                **run(_WORKER, path, name, args.workers),
            }
            rows.append(row)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    for name in args.executors:
        by = {r["ranks"]: r for r in rows if r["executor"] == name}
        if len(by) >= 2:
            lo, hi = min(by), max(by)
            ratio = by[hi]["driver_peak_rss_mb"] / by[lo]["driver_peak_rss_mb"]
            print(
                f"{name}: driver peak RSS {hi} ranks / {lo} ranks = {ratio:.3f} ({'within' if ratio <= 1.2 else 'OVER'} 20 %)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
