#!/usr/bin/env python3
"""Scale-out replay benchmark (not a test): ``advise`` by the replay at collective granularity, its two phases
mapped over the rank files, on generated jobs of many small ranks (a planted straggler).

For each rank count (default 256 and 1,024 ranks, generated under the work folder once) one fresh process runs
``holotrace.scale.segment_run.segment_advice`` on the local pool (through a cache of its own, so phase 2 reads
the packed files phase 1 wrote) and reports wall time, the driver's own CPU time, its peak RSS and what it found.
The driver holds no event, only each rank's collectives and segments: its memory should stay flat in the rank
count. Timings are noisy on a shared machine: the load average is printed with each row.

    python benchmarks/bench_segment_replay.py                       # 256 and 1024 ranks
    python benchmarks/bench_segment_replay.py --ranks 64 256 --layers 2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_GEN = r"""
import sys
sys.path.insert(0, sys.argv[5])
from plantedjob import planted_job
planted_job(sys.argv[1], ranks=int(sys.argv[2]), steps=1, layers=int(sys.argv[3]), straggler=int(sys.argv[4]))
"""

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from holotrace.scale.segment_run import segment_advice
path, cache, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
from holotrace.exec.executor import get_executor
with get_executor("local", workers=workers) as ex:
    t1 = time.perf_counter()
    a = segment_advice(path, executor=ex, cache=True, cache_dir=cache)
    t2 = time.perf_counter()
me = resource.getrusage(resource.RUSAGE_SELF)
first = a.fixes.iloc[0]
print(json.dumps({"wall_s": t2 - t1, "startup_s": t1 - t0, "driver_cpu_s": me.ru_utime + me.ru_stime,
                  "driver_peak_rss_mb": me.ru_maxrss / 1024, "costliest": a.costliest.rank,
                  "first_fix": [str(first["fix"]), None if first["rank"] is None else int(first["rank"])],
                  "replay_error_pct": float(a.replay["error_pct"].abs().max())}))
"""


def generate(n: int, layers: int, straggler: int, root: Path) -> Path:
    out = root / f"segments{n}x{layers}"
    if not (out / f"rank-{n - 1}.pt.trace.json").exists() and not any(out.glob(f"*{n - 1}*")):
        subprocess.run(
            [sys.executable, "-c", _GEN, str(out), str(n), str(layers), str(straggler), str(REPO / "tests")],
            check=True,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--layers", type=int, default=4, help="layers of the generated step (default 4)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "holotrace-bench-segments")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.ranks:
        job = generate(n, args.layers, n * 2 // 3, args.work)
        cache = args.work / f"cache{n}"
        shutil.rmtree(cache, ignore_errors=True)
        load = os.getloadavg()[0]
        r = subprocess.run(
            [sys.executable, "-c", _CHILD, str(job), str(cache), str(args.workers)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
        row = {"ranks": n, "planted": n * 2 // 3, "load_avg_1m": load, **json.loads(r.stdout.strip().splitlines()[-1])}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
