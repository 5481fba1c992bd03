#!/usr/bin/env python3
"""Planted causes with twins, at any number of ranks: does ``advise`` rank the planted cause first, name the right
rank / kernel / operator, and predict the step of the twin generated without the cause?

Uses the simulated data-parallel job of ``tests/plantedjob.py``. Prints one table row per cause: the first fix,
what it names, its saving, and the largest per-step difference between its predicted step and the twin's measured
step (steps after the first), plus the analysis CPU time and the process's peak RSS.

    python benchmarks/planted_causes.py --ranks 64 --steps 3
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "src"))

import holotrace
from holotrace.analysis.critical_path.advice import job_advice
from holotrace.analysis.critical_path.job_graph import build_job_graph
from holotrace.analysis.critical_path.replay import replay
from plantedjob import planted_job

CASES = [
    ("straggler (rank 2 compute x1.3)", {"straggler": 2}, "straggler"),
    ("one kernel x2", {"slow_kernel": True}, "kernel"),
    ("launch-bound CPU", {"launch_bound": True}, "launch_overhead"),
    ("communication, no overlap", {"comm_no_overlap": True}, "communication"),
    ("data-loader stall", {"loader_stall": True}, "data_loading"),
    ("blocking D2H copy each step", {"blocking_copy": True}, "host_sync"),
    ("straggler (rank 1) + no overlap", {"straggler": 1, "comm_no_overlap": True}, "straggler"),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        twin = holotrace.load(str(planted_job(Path(tmp) / "twin", ranks=a.ranks, steps=a.steps)), cache=False)
        tw = replay(build_job_graph(twin)).steps.set_index("step")["measured_ms"]
        print(f"{a.ranks} ranks, {a.steps} steps; twin job step (ms): {', '.join(f'{x:.3f}' for x in tw)}")
        print("| cause | first fix | names | saving % | predicted vs twin (worst step) | replay error | CPU s |")
        print("|---|---|---|---|---|---|---|")
        for label, causes, want in CASES:
            job = holotrace.load(
                str(planted_job(Path(tmp) / want, ranks=a.ranks, steps=a.steps, **causes)), cache=False
            )
            t = time.process_time()
            combo = [["straggler", "communication"]] if len(causes) > 1 else []
            adv = job_advice(job, combine=combo)
            cpu = time.process_time() - t
            single = adv.fixes[~adv.fixes["fix"].str.contains("+", regex=False)]
            first = single.iloc[0]
            fix = "straggler+communication" if combo else first["fix"]
            per = adv.per_step[adv.per_step["fix"] == fix]
            if fix == first["fix"] and first["target"] is not None:
                per = per[per["target"] == first["target"]]
            if fix == "straggler":
                per = per[per["rank"] == first["rank"]]
            pred = per.set_index("step")["predicted_step_ms"]
            worst = max(abs(pred[s] / tw[s] - 1) for s in tw.index[1:]) * 100
            named = (
                f"rank {first['rank']}"
                if first["rank"] is not None
                else (first["target"] or "; ".join(first["evidence"][:1]))[:60]
            )
            ok = "" if first["fix"] == want else " (expected " + want + ")"
            err = adv.replay["error_pct"].abs().max()
            print(
                f"| {label} | {first['fix']}{ok} | {named} | {first['saving_pct']:.1f} | "
                f"{fix}: {worst:.2f}% | {err:.2f}% | {cpu:.2f} |"
            )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
