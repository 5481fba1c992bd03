"""The straggler and launch lines of a job's summary (``holotrace summary``, the report), from its frames.

Both read a :class:`~holotrace.analysis.job_summary.JobSummary`, so the lines are the same whatever ran the
per-rank work (a job in this process, the local pool, Ray, an ingest folder).
"""

from __future__ import annotations

from holotrace.analysis.job_summary import JobSummary
from holotrace.text import fit_name, fit_names, sanitize

__all__ = ["straggler_lines", "launch_lines"]


def straggler_lines(js: JobSummary) -> list[str]:
    """The straggler line: the rank the others waited for, how long, in how many steps, its worst collective."""
    rep, summ = js.frames["straggler_report"], js.frames["straggler_summary"]
    if len(js.ranks) < 2:
        return ["stragglers: one rank, nothing to compare"]
    if rep.empty:
        return ["stragglers: no communication kernel occurs on two or more ranks"]
    top = summ.iloc[0]
    if top["waited_for_us"] <= 0:
        return ["stragglers: none (collectives take the same time on every rank)"]
    st = rep[(rep["rank"] == top["rank"]) & rep["straggler"]]
    worst = st.sort_values("worst_collective_wait_us", ascending=False).head(1)
    ev = ""
    if len(worst):
        w = worst.iloc[0]
        ev = (
            f"; worst: {fit_name(str(w['worst_collective']), 50)} in step {int(w['step'])}, "
            f"{w['worst_collective_wait_us'] / 1e3:.3f} ms"
        )
    return [
        f"straggler: rank {int(top['rank'])} (the others waited {top['waited_for_us'] / 1e3:.3f} ms for it; "
        f"straggler in {int(top['steps_as_straggler'])}/{rep['step'].nunique()} steps{ev})"
    ]


def launch_lines(js: JobSummary) -> list[str]:
    """The launch-delay overview (median and p95 from the ranks' merged sketches) and the worst launches."""
    o, worst = js.frames["launch_overview"], js.frames["launch_worst"]
    if not o["launches"]:
        return ["launch delay: no launch call paired with GPU work"]
    cutoff = o.get("cutoff_us", 100.0)
    lines = [
        f"launch delay: median {o['median_us']:.1f} us, p95 {o['p95_us']:.1f} us (within 1 %) over "
        f"{o['launches']} launches; {o['outliers']} above {cutoff:g} us"
    ]
    names = fit_names([str(k) for k in worst["kernel"]], 60)  # together: two kernels never read alike
    for row, name in zip(worst.itertuples(index=False), names):
        step = f" step {row.iteration}" if row.iteration >= 0 else ""
        lines.append(
            f"  rank {row.rank}{step} at {row.ts / 1e3:.3f} ms: {name} "
            f"started {row.launch_delay:.1f} us after its {sanitize(str(row.launch))}"
        )
    return lines
