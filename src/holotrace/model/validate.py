"""Invariants of a loaded job, turned into findings.

Each check is a small vectorised function of one rank's columns (or of the
whole job) returning ``Finding`` objects; ``validate_job`` runs them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from holotrace.findings import Finding, FindingCode
from holotrace.model import classify
from holotrace.model.job import Job, RankTrace
from holotrace.order_stats import distinct

SKEW_WARN_NS = 1_000_000_000  # first events of ranks more than 1 s apart


def _example(c: dict, table: list[str], row: int) -> str:
    name = int(c["name"][row])
    return (
        f"event #{int(c['index'][row])} {table[name] if name >= 0 else ''!r} ts={int(c['ts_ns'][row]) / 1000:.3f}us "
        f"dur={int(c['dur_ns'][row]) / 1000:.3f}us"
    )


CHUNK_ROWS = 1 << 18  # rows checked at a time: the working memory does not grow with the file


def check_rank(job: Job, t: RankTrace) -> list[Finding]:
    """Findings of one rank's events: unknown or missing categories, overlapping GPU activity on a stream,
    GPU activity without a launch, launches without GPU activity (:func:`rank_checks` on its columns)."""
    return [_finding(x, t) for x in rank_checks(t.columns, job.strings.table, t.release_pages)]


def _finding(x: dict, t: RankTrace) -> Finding:
    """A finding of :func:`rank_checks` (plain values, perhaps read back from a cache entry) on rank ``t``."""
    return Finding(x["severity"], x["code"], x["message"], t.rank, t.file, x["count"], x["example"])


def rank_checks(c: dict, table: list[str], release=None) -> list[dict]:
    """:func:`check_rank`'s findings of the events' columns ``c`` (string ids into ``table``) as plain values
    (severity, code, message, count, example): they depend on the file alone, so a cache entry keeps them.

    The events are read in chunks of rows, and ``release()`` (a mapped rank's pages given back) runs after each,
    so the check's memory is its chunk and the GPU rows' times (for the overlap check), not the rank's size.
    """
    out: list[Finding] = []
    n = len(c["ts_ns"])
    if n == 0:
        out.append(Finding.of(FindingCode.NO_EVENTS, "the trace has no events with a duration (metadata only?)"))
        return _plain(out)
    counts = np.zeros(len(table), dtype=np.int64)
    nocat = n_gpu = n_orph = n_il = 0
    first_nocat = first_orph = first_il = -1
    streams = _StreamOverlaps()
    for a in range(0, n, CHUNK_ROWS):
        b = min(n, a + CHUNK_ROWS)
        cat, kind, partner = c["cat"][a:b], c["kind"][a:b], c["partner"][a:b]
        has = cat >= 0
        counts += np.bincount(cat[has], minlength=len(table))[: len(table)]
        k = len(cat) - int(has.sum())
        if k and first_nocat < 0:
            first_nocat = a + int(np.argmin(has))
        nocat += k
        gpu = classify.is_gpu_activity(kind)
        n_gpu += int(gpu.sum())
        orph = gpu & (partner < 0)
        first_orph, n_orph = _first(orph, a, first_orph), n_orph + int(orph.sum())
        il = c["is_launch"][a:b] & (partner < 0)
        first_il, n_il = _first(il, a, first_il), n_il + int(il.sum())
        g = np.flatnonzero(gpu & (c["stream"][a:b] >= 0))
        if len(g):
            streams.add(g + a, c["pid"][a:b][g], c["stream"][a:b][g], c["ts_ns"][a:b][g], c["end_ns"][a:b][g])
        if release is not None:
            release()
    unknown = classify.unknown_category_counts(counts, table)
    if unknown:
        out.append(
            Finding.of(
                FindingCode.UNKNOWN_CATEGORY,
                "events of categories no rule knows were kept as OTHER: "
                + ", ".join(f"{k} ({v})" for k, v in sorted(unknown.items())),
                None,
                None,
                sum(unknown.values()),
            )
        )
    if nocat:
        out.append(
            Finding.of(
                FindingCode.NO_CATEGORY,
                f"{nocat} events have no 'cat' (HTA drops them)",
                None,
                None,
                nocat,
                _example(c, table, first_nocat),
            )
        )
    n_ov, first_ov = streams.result(c, n)
    if n_ov:
        out.append(
            Finding.of(
                FindingCode.OVERLAPPING_KERNELS,
                f"{n_ov} GPU activities start before the previous one on the same stream ends",
                None,
                None,
                n_ov,
                _example(c, table, first_ov),
            )
        )
    if n_orph:
        out.append(
            Finding.of(
                FindingCode.GPU_WITHOUT_LAUNCH,
                f"{n_orph} of {n_gpu} GPU activities have no CPU launch in the trace",
                None,
                None,
                n_orph,
                _example(c, table, first_orph),
            )
        )
    if n_il:
        out.append(
            Finding.of(
                FindingCode.LAUNCH_WITHOUT_GPU,
                f"{n_il} launch calls have no GPU activity in the trace",
                None,
                None,
                n_il,
                _example(c, table, first_il),
            )
        )
    if release is not None:
        release()
    return _plain(out)


def _plain(findings: list[Finding]) -> list[dict]:
    return [
        {"severity": x.severity, "code": x.code.value, "message": x.message, "count": x.count, "example": x.example}
        for x in findings
    ]


def _first(mask: np.ndarray, a: int, first: int) -> int:
    """The first row so far where ``mask`` holds (``first`` if already found)."""
    return first if first >= 0 or not mask.any() else a + int(np.argmax(mask))


class _StreamOverlaps:
    """GPU activities that start before the previous one on their (pid, stream) ends, counted as chunks
    of rows arrive.

    A stream whose activities appear in the file in start order (the usual case) is checked as it goes,
    keeping only its last start and end; a stream found out of order is checked again at the end, its
    rows gathered and sorted by start (ties in file order).
    """

    def __init__(self):
        self.last: dict[tuple, tuple[int, int]] = {}  # stream -> (last start, last end)
        self.found: dict[tuple, tuple[int, int]] = {}  # stream -> (overlaps, first row)
        self.unsorted: set = set()

    def add(self, rows, pid, stream, ts, end) -> None:
        for p in distinct(pid).tolist():  # few processes and streams: a loop over them
            in_p = pid == p
            for s in distinct(stream[in_p]).tolist():
                sel = np.flatnonzero(in_p & (stream == s))
                self._add((p, s), rows[sel], ts[sel], end[sel])

    def _add(self, key: tuple, r: np.ndarray, t: np.ndarray, e: np.ndarray) -> None:
        if key in self.unsorted:
            return
        prev = self.last.get(key)
        if prev is not None:
            t, e, r = np.concatenate(([prev[0]], t)), np.concatenate(([prev[1]], e)), np.concatenate(([-1], r))
        if len(t) > 1 and bool((t[1:] < t[:-1]).any()):
            self.unsorted.add(key)
            self.found.pop(key, None)
            return
        ov = t[1:] < e[:-1]
        cnt, first = self.found.get(key, (0, -1))
        if ov.any() and first < 0:
            first = int(r[int(np.argmax(ov)) + 1])
        self.found[key] = (cnt + int(ov.sum()), first)
        self.last[key] = (int(t[-1]), int(e[-1]))

    def result(self, c: dict, n: int) -> tuple[int, int]:
        """(overlaps, row of the first in (pid, stream, start) order, -1 if none)."""
        for key in sorted(self.unsorted):
            self.found[key] = _sorted_overlaps(c, n, key)
        total = sum(cnt for cnt, _ in self.found.values())
        first = next((r for _, (cnt, r) in sorted(self.found.items()) if cnt), -1)
        return total, first


def _sorted_overlaps(c: dict, n: int, key: tuple) -> tuple[int, int]:
    """Overlaps of one stream whose activities are out of start order in the file: its rows sorted."""
    pid, stream = key
    parts = []
    for a in range(0, n, CHUNK_ROWS):
        b = min(n, a + CHUNK_ROWS)
        m = (c["pid"][a:b] == pid) & (c["stream"][a:b] == stream) & classify.is_gpu_activity(c["kind"][a:b])
        g = np.flatnonzero(m)
        if len(g):
            parts.append((g + a, c["ts_ns"][a:b][g], c["end_ns"][a:b][g]))
    rows, ts, end = (np.concatenate(x) for x in zip(*parts))
    order = np.argsort(ts, kind="stable")
    ov = ts[order][1:] < end[order][:-1]
    cnt = int(ov.sum())
    return cnt, (int(rows[order[int(np.argmax(ov)) + 1]]) if cnt else -1)


@dataclass(frozen=True)
class RankFacts:
    """What the job-wide checks read of each rank (from its trace, or from a summary of it)."""

    rank: int
    n_events: int
    has_steps: bool
    first_ts_ns: int  # on the rank's own clock
    clock_offset_ns: int

    @classmethod
    def of(cls, t: RankTrace) -> RankFacts:
        return cls(t.rank, t.n_events, t.has_steps, t.first_ts_ns, t.clock_offset_ns)


def check_job(job: Job) -> list[Finding]:
    """The job-wide checks (:func:`check_ranks`) on the job's traces."""
    return check_ranks([RankFacts.of(t) for t in job.traces.values()])


def check_ranks(facts: Sequence[RankFacts]) -> list[Finding]:
    """Findings across ranks: profiler steps on some ranks only, clocks that cannot be compared."""
    out: list[Finding] = []
    ranks = [t for t in facts if t.n_events]
    if ranks and not any(t.has_steps for t in ranks):
        out.append(
            Finding.of(
                FindingCode.NO_PROFILER_STEPS, "no ProfilerStep#N annotations: the whole trace is treated as one step"
            )
        )
    elif ranks:
        without = [t.rank for t in ranks if not t.has_steps]
        if without:
            out.append(
                Finding.of(
                    FindingCode.STEPS_MISSING_ON_RANKS,
                    f"ranks {without} have no ProfilerStep#N annotations while others do",
                    count=len(without),
                )
            )
    if len(ranks) > 1:
        starts = {t.rank: t.first_ts_ns + t.clock_offset_ns for t in ranks}
        lo, hi = min(starts.values()), max(starts.values())
        based = {t.rank for t in ranks if t.clock_offset_ns}
        if based and len(based) != len(ranks):
            out.append(
                Finding.of(
                    FindingCode.CLOCK_SKEW,
                    f"ranks {sorted(based)} give times relative to baseTimeNanoseconds and ranks "
                    f"{sorted(set(starts) - based)} do not: their clocks cannot be compared",
                    count=len(ranks),
                    severity="error",
                )
            )
        elif hi - lo > SKEW_WARN_NS:
            late = max(starts, key=starts.get)
            early = min(starts, key=starts.get)
            out.append(
                Finding.of(
                    FindingCode.CLOCK_SKEW,
                    f"first events of ranks differ by {(hi - lo) / 1e9:.3f} s (rank {early} earliest, rank {late} latest): "
                    f"clocks may be skewed, so cross-rank timing comparisons are unreliable",
                    count=len(ranks),
                    example=", ".join(f"rank {r}: +{(s - lo) / 1e6:.3f} ms" for r, s in sorted(starts.items())),
                )
            )
    return out


def findings_from_problems(problems, rank: int, file: str) -> list[Finding]:
    """Findings of a file's decoding problems; a problem's code string must be a ``FindingCode`` value."""
    return [Finding(p.severity, p.code, p.message, rank, file, p.count, p.example) for p in problems]


def validate_job(job: Job, checked: Optional[dict] = None) -> list[Finding]:
    """Every check of the job; ``checked``: {rank: :func:`rank_checks` of its file} known already (a cache entry's),
    used instead of reading those ranks' columns again."""
    out: list[Finding] = []
    for t in job.traces.values():
        known = None if checked is None else checked.get(t.rank)
        out.extend(check_rank(job, t) if known is None else [_finding(x, t) for x in known])
    out.extend(check_job(job))
    return out
