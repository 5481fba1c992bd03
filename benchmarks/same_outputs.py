#!/usr/bin/env python3
"""Do two source trees give the same outputs? ``advise``, ``summary`` and ``stragglers`` as JSON and ``report`` as
HTML, for every job folder given, byte for byte (and the same exit status and messages): the check behind a change
made for speed only.

    python benchmarks/same_outputs.py --before /path/to/old/src --after src JOB [JOB ...]
    python benchmarks/same_outputs.py --before OLD --after src --planted 4,8   # and planted-cause jobs

Each tree runs in fresh processes with its own cache folder. ``--planted N,M``: the planted-cause jobs of
``planted_causes.py`` (each cause, N and M ranks, 3 steps) are written to a temporary folder and checked too.
Prints one line per difference and the number of outputs compared; exit status 1 when any differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMMANDS = ("advise", "summary", "stragglers")


def outputs(src: str, job: str, work: Path, cache: str) -> dict:
    """``{name: bytes}`` of every command's output, status and messages for ``job`` under the tree ``src``."""
    env = dict(os.environ, PYTHONPATH=src, HOLOTRACE_CACHE_DIR=cache)
    run = lambda *a: subprocess.run([sys.executable, "-m", "holotrace.cli", *a], env=env, capture_output=True)  # noqa: E731
    out = {}
    for c in COMMANDS:
        r = run(c, job, "--format", "json")
        out[c] = r.stdout
        out[c + " status"] = f"{r.returncode} {r.stderr.decode(errors='replace')}".encode()
    html = work / "report.html"
    r = run("report", job, "-o", str(html))
    out["report"] = html.read_bytes() if html.exists() else b""
    out["report status"] = f"{r.returncode} {r.stderr.decode(errors='replace')}".encode()
    html.unlink(missing_ok=True)
    return out


def planted(folder: Path, ranks: list[int]) -> list[str]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from plantedjob import planted_job  # noqa: PLC0415

    sys.path.insert(0, str(HERE))
    from planted_causes import CASES  # noqa: PLC0415

    jobs = []
    for n in ranks:
        for i, (_, causes, _) in enumerate(CASES):
            jobs.append(str(planted_job(folder / f"r{n}-{i}", ranks=n, steps=3, **causes)))
    return jobs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the old tree's src folder")
    p.add_argument("--after", required=True, help="the new tree's src folder")
    p.add_argument("--planted", default=None, metavar="N,M", help="also the planted-cause jobs at these rank counts")
    p.add_argument("jobs", nargs="*")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        jobs = list(a.jobs) + (planted(tmp / "planted", [int(x) for x in a.planted.split(",")]) if a.planted else [])
        caches = {t: str(tmp / f"cache-{t}") for t in ("before", "after")}
        n = bad = 0
        for job in jobs:
            old = outputs(a.before, job, tmp, caches["before"])
            new = outputs(a.after, job, tmp, caches["after"])
            for k in old:
                n += 1
                if old[k] != new[k]:
                    bad += 1
                    print(f"differs: {job}: {k}")
        print(f"{n} outputs of {len(jobs)} jobs compared, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
