"""The straggler and launch lines of a job's summary (``holotrace summary``, the report), from its tables.

Both read a :class:`~holotrace.analysis.job_summary.JobSummary`, so the lines are the same whatever ran the
per-rank work (a job in this process, the local pool, Ray, an ingest folder).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from holotrace.analysis.job_summary import JobSummary
from holotrace.order_stats import distinct
from holotrace.table import Table
from holotrace.text import fit_name, fit_names, sanitize

__all__ = ["straggler_lines", "launch_lines"]


def _first_largest(values: np.ndarray) -> Optional[int]:
    """The row a descending sort (numpy's default sort of the reversed values, NaN last) puts first."""
    x = np.asarray(values, dtype=np.float64)
    idx = np.flatnonzero(~np.isnan(x))
    if not len(idx):
        return int(np.flatnonzero(np.isnan(x))[0]) if len(x) else None
    rev = idx[::-1]
    return int(rev[np.argsort(x[rev], kind="quicksort")][-1])


def straggler_lines(js: JobSummary) -> list[str]:
    """The straggler line: the rank the others waited for, how long, in how many steps, its worst collective."""
    rep, summ = Table.of(js.frames["straggler_report"]), Table.of(js.frames["straggler_summary"])
    if len(js.ranks) < 2:
        return ["stragglers: one rank, nothing to compare"]
    if rep.empty:
        return ["stragglers: no communication kernel occurs on two or more ranks"]
    waited, rank = float(summ["waited_for_us"][0]), int(summ["rank"][0])
    if waited <= 0:
        return ["stragglers: none (collectives take the same time on every rank)"]
    st = rep.take((np.asarray(rep["rank"]) == rank) & np.asarray(rep["straggler"], dtype=bool))
    i = _first_largest(st["worst_collective_wait_us"])
    ev = ""
    if i is not None:
        ev = (
            f"; worst: {fit_name(str(st['worst_collective'][i]), 50)} in step {int(st['step'][i])}, "
            f"{st['worst_collective_wait_us'][i] / 1e3:.3f} ms"
        )
    steps = len(distinct(np.asarray(rep["step"])))
    return [
        f"straggler: rank {rank} (the others waited {waited / 1e3:.3f} ms for it; "
        f"straggler in {int(summ['steps_as_straggler'][0])}/{steps} steps{ev})"
    ]


def launch_lines(js: JobSummary) -> list[str]:
    """The launch-delay overview (median and p95 from the ranks' merged sketches) and the worst launches."""
    o, worst = js.frames["launch_overview"], Table.of(js.frames["launch_worst"])
    if not o["launches"]:
        return ["launch delay: no launch call paired with GPU work"]
    cutoff = o.get("cutoff_us", 100.0)
    lines = [
        f"launch delay: median {o['median_us']:.1f} us, p95 {o['p95_us']:.1f} us (within 1 %) over "
        f"{o['launches']} launches; {o['outliers']} above {cutoff:g} us"
    ]
    if not len(worst):
        return lines
    names = fit_names([str(k) for k in worst["kernel"].tolist()], 60)  # together: two kernels never read alike
    cols = {c: worst[c].tolist() for c in ("rank", "iteration", "ts", "launch_delay", "launch")}
    for i, name in enumerate(names):
        it = cols["iteration"][i]
        step = f" step {it}" if it >= 0 else ""
        lines.append(
            f"  rank {cols['rank'][i]}{step} at {cols['ts'][i] / 1e3:.3f} ms: {name} "
            f"started {cols['launch_delay'][i]:.1f} us after its {sanitize(str(cols['launch'][i]))}"
        )
    return lines
