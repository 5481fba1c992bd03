"""Invariants of a loaded job, turned into findings.

Each check is a small vectorised function of one rank's columns (or of the
whole job) returning ``Finding`` objects; ``validate_job`` runs them all.
"""

from __future__ import annotations


import numpy as np

from holotrace.model import classify
from holotrace.findings import Finding, FindingCode
from holotrace.model.job import Job, RankTrace

SKEW_WARN_NS = 1_000_000_000  # first events of ranks more than 1 s apart


def _example(t: RankTrace, job: Job, row: int) -> str:
    c = t.columns
    return (f"event #{int(c['index'][row])} {job.strings[int(c['name'][row])]!r} ts={int(c['ts_ns'][row]) / 1000:.3f}us "
            f"dur={int(c['dur_ns'][row]) / 1000:.3f}us")


def check_rank(job: Job, t: RankTrace) -> list[Finding]:
    c = t.columns
    out: list[Finding] = []
    f = t.file
    kind = c["kind"]
    if t.n_events == 0:
        out.append(Finding.of(FindingCode.NO_EVENTS, "the trace has no events with a duration (metadata only?)", t.rank, f))
        return out
    unknown = classify.unknown_categories(c["cat"], job.strings.table)
    if unknown:
        out.append(Finding.of(FindingCode.UNKNOWN_CATEGORY,
                              "events of categories no rule knows were kept as OTHER: " + ", ".join(f"{k} ({v})" for k, v in sorted(unknown.items())),
                              t.rank, f, sum(unknown.values())))
    nocat = int((c["cat"] < 0).sum())
    if nocat:
        out.append(Finding.of(FindingCode.NO_CATEGORY, f"{nocat} events have no 'cat' (HTA drops them)", t.rank, f, nocat,
                              _example(t, job, int(np.argmax(c["cat"] < 0)))))
    gpu = np.isin(kind, [int(k) for k in classify.GPU_ACTIVITY])
    # overlapping activity on one stream
    g = np.flatnonzero(gpu & (c["stream"] >= 0))
    if len(g) > 1:
        order = np.lexsort((c["ts_ns"][g], c["stream"][g], c["pid"][g]))
        r = g[order]
        same = (c["stream"][r][1:] == c["stream"][r][:-1]) & (c["pid"][r][1:] == c["pid"][r][:-1])
        prev_end = c["end_ns"][r][:-1]
        ov = same & (c["ts_ns"][r][1:] < prev_end)
        n_ov = int(ov.sum())
        if n_ov:
            i = int(np.argmax(ov)) + 1
            out.append(Finding.of(FindingCode.OVERLAPPING_KERNELS,
                                  f"{n_ov} GPU activities start before the previous one on the same stream ends", t.rank, f, n_ov,
                                  _example(t, job, int(r[i]))))
    orphans = gpu & (c["partner"] < 0)
    n_orph = int(orphans.sum())
    if n_orph:
        out.append(Finding.of(FindingCode.GPU_WITHOUT_LAUNCH, f"{n_orph} of {int(gpu.sum())} GPU activities have no CPU launch in the trace",
                              t.rank, f, n_orph, _example(t, job, int(np.argmax(orphans)))))
    idle_launch = c["is_launch"] & (c["partner"] < 0)
    n_il = int(idle_launch.sum())
    if n_il:
        out.append(Finding.of(FindingCode.LAUNCH_WITHOUT_GPU, f"{n_il} launch calls have no GPU activity in the trace", t.rank, f, n_il,
                              _example(t, job, int(np.argmax(idle_launch)))))
    return out


def check_job(job: Job) -> list[Finding]:
    out: list[Finding] = []
    ranks = [t for t in job.traces.values() if t.n_events]
    if ranks and not any(t.has_steps for t in ranks):
        out.append(Finding.of(FindingCode.NO_PROFILER_STEPS, "no ProfilerStep#N annotations: the whole trace is treated as one step"))
    elif ranks:
        without = [t.rank for t in ranks if not t.has_steps]
        if without:
            out.append(Finding.of(FindingCode.STEPS_MISSING_ON_RANKS, f"ranks {without} have no ProfilerStep#N annotations while others do",
                                  count=len(without)))
    if len(ranks) > 1:
        starts = {t.rank: int(t.columns["ts_ns"].min()) + t.clock_offset_ns for t in ranks}
        lo, hi = min(starts.values()), max(starts.values())
        based = {t.rank for t in ranks if t.clock_offset_ns}
        if based and len(based) != len(ranks):
            out.append(Finding.of(FindingCode.CLOCK_SKEW, f"ranks {sorted(based)} give times relative to baseTimeNanoseconds and ranks "
                                  f"{sorted(set(starts) - based)} do not: their clocks cannot be compared", count=len(ranks),
                                  severity="error"))
        elif hi - lo > SKEW_WARN_NS:
            late = max(starts, key=starts.get)
            early = min(starts, key=starts.get)
            out.append(Finding.of(FindingCode.CLOCK_SKEW,
                                  f"first events of ranks differ by {(hi - lo) / 1e9:.3f} s (rank {early} earliest, rank {late} latest): "
                                  f"clocks may be skewed, so cross-rank timing comparisons are unreliable", count=len(ranks),
                                  example=", ".join(f"rank {r}: +{(s - lo) / 1e6:.3f} ms" for r, s in sorted(starts.items()))))
    return out


def findings_from_problems(problems, rank: int, file: str) -> list[Finding]:
    """Findings of a file's decoding problems; a problem's code string must be a ``FindingCode`` value."""
    return [Finding(p.severity, p.code, p.message, rank, file, p.count, p.example) for p in problems]


def validate_job(job: Job) -> list[Finding]:
    out: list[Finding] = []
    for t in job.traces.values():
        out.extend(check_rank(job, t))
    out.extend(check_job(job))
    return out
