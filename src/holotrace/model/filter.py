"""A job restricted to some ranks, steps, a time window, some names, or what ran under an operator.

:func:`filter_view` gives a :class:`~holotrace.model.view.JobView` of the kept rows (every analysis accepts
it as its ``source``); :func:`filter_job` gives a :class:`~holotrace.model.job.Job` of the kept rows, so
commands and analyses that read the job (findings, step tables, HTA's view) see only them.

Selection (every given criterion must hold):

* ``ranks``: these ranks only;
* ``steps``: rows whose ``iteration`` is one of these ``ProfilerStep`` numbers (CPU rows by containment in
  the step, GPU rows through their launch);
* ``time_range_us``: ``(start, end)`` in µs from the job's first event (on the common clock); rows that
  lie fully inside, bounds included;
* ``names``: rows whose name matches the regular expression anywhere (``re.search``);
* ``under``: rows on the same thread as an event named exactly ``under`` and inside it (every occurrence;
  the operator itself included).

With ``names`` or ``under``, the GPU work launched by a kept row is kept too (``launched=True``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE, RuleSet
from holotrace.model.view import JobView, RankView, job_view, resolve, restrict

__all__ = ["TraceFilter", "filter_view", "filter_job", "parse_int_ranges", "row_masks"]


@dataclass(frozen=True)
class TraceFilter:
    """What to keep (None: no restriction)."""

    ranks: Optional[tuple] = None
    steps: Optional[tuple] = None
    time_range_us: Optional[tuple] = None
    names: Optional[str] = None
    under: Optional[str] = None
    launched: bool = True

    @property
    def rows_filtered(self) -> bool:
        return any(x is not None for x in (self.steps, self.time_range_us, self.names, self.under))

    @property
    def empty(self) -> bool:
        return self.ranks is None and not self.rows_filtered


MAX_LISTED = 1_000_000  # values a rank/step list may expand to (a typo like 0-2000000000 is not a request)


def parse_int_ranges(text: str, what: str = "value") -> tuple:
    """``"0-3,7"`` → ``(0, 1, 2, 3, 7)``; bad text, or a list over :data:`MAX_LISTED` values, raises a one-line
    :class:`AnalysisError`."""
    out: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        m = re.fullmatch(r"(-?\d+)(?:-(-?\d+))?", part)
        if not m:
            raise AnalysisError(f"cannot read {what} list {text!r}", fix="write numbers and ranges, e.g. 0-3,7")
        a, b = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if b < a:
            raise AnalysisError(f"{what} range {part!r} ends before it starts", fix="write the smaller number first")
        if len(out) + (b - a + 1) > MAX_LISTED:
            raise AnalysisError(
                f"{what} list {text!r} names more than {MAX_LISTED:,} values", fix="name the ranks or steps the job has"
            )
        out.extend(range(a, b + 1))
    return tuple(dict.fromkeys(out))


def _under_mask(view: JobView, v: RankView, name: str) -> np.ndarray:
    keep = np.zeros(v.n, dtype=bool)
    op_ids = view.name_ids({name})
    occ = np.flatnonzero(np.isin(v["name"], op_ids)) if len(op_ids) else np.empty(0, dtype=np.int64)
    if not len(occ):
        return keep
    ts, end, pid, tid = v["ts"], v["end"], v["pid"], v["tid"]
    for p, t in set(zip(pid[occ].tolist(), tid[occ].tolist())):  # a few threads: one sweep each
        o = occ[(pid[occ] == p) & (tid[occ] == t)]
        o = o[np.argsort(ts[o], kind="stable")]
        reach = np.maximum.accumulate(end[o])  # the latest end of the occurrences started so far
        rows = np.flatnonzero((pid == p) & (tid == t) & (v["stream"] == -1))
        k = np.searchsorted(ts[o], ts[rows], side="right") - 1
        inside = k >= 0
        inside[inside] = end[rows[inside]] <= reach[k[inside]]
        keep[rows[inside]] = True
    return keep


def row_masks(view: JobView, flt: TraceFilter) -> dict[int, np.ndarray]:
    """``{rank: kept-row mask}`` of the filter's ranks (every rank of the view when ``ranks`` is None)."""
    ranks = view.select(None if flt.ranks is None else [r for r in flt.ranks])
    origin = 0
    if flt.time_range_us is not None:
        start, stop = (float(x) for x in flt.time_range_us)
        if stop < start:
            raise AnalysisError(f"time range {flt.time_range_us} ends before it starts", fix="give (start, end) in µs")
        firsts = [int(view[r]["ts"].min()) + view[r].clock_offset for r in view.ranks if view[r].n]
        origin = min(firsts) if firsts else 0
    match = None
    if flt.names is not None:
        try:
            rx = re.compile(flt.names)
        except re.error as e:
            raise AnalysisError(
                f"bad name pattern {flt.names!r}: {e}", fix="pass a Python regular expression"
            ) from None
        match = view.per_string(lambda s: rx.search(s) is not None, missing=False, dtype=bool)
    out = {}
    for r in ranks:
        v = view[r]
        keep = np.ones(v.n, dtype=bool)
        if flt.steps is not None:
            it = v["iteration"]
            keep &= np.isin(it, np.asarray(flt.steps, dtype=it.dtype))
        if flt.time_range_us is not None:
            scale = 1000.0 / view.unit_ns
            rel0 = v["ts"] + v.clock_offset - origin
            rel1 = v["end"] + v.clock_offset - origin
            keep &= (rel0 >= start * scale) & (rel1 <= stop * scale)
        picked = None
        if match is not None:
            picked = view.lookup(v["name"], match)
        if flt.under is not None:
            u = _under_mask(view, v, flt.under)
            picked = u if picked is None else picked & u
        if picked is not None:
            if flt.launched:
                p = v["partner"][picked]
                picked = picked.copy()
                picked[p[(p >= 0)]] = True
            keep &= picked
        out[r] = keep
    return out


def filter_view(source, flt: Optional[TraceFilter] = None, *, rules: Optional[RuleSet] = None, **criteria) -> JobView:
    """The view of ``source`` (a Job or a JobView) restricted by ``flt`` or by the keyword criteria of
    :class:`TraceFilter` (``ranks=``, ``steps=``, ``time_range_us=``, ``names=``, ``under=``)."""
    flt = replace(flt or TraceFilter(), **{k: _tuple(k, x) for k, x in criteria.items()})
    view = resolve(source, rules)
    masks = row_masks(view, flt)
    return restrict(view, {r: np.flatnonzero(m) for r, m in masks.items()})


def filter_job(job, flt: TraceFilter):
    """A :class:`~holotrace.model.job.Job` of the kept ranks and rows (the job itself when nothing is filtered).

    Findings are kept; the side tables (memory events, counters) are restricted by rank only.
    """
    from holotrace.model.job import RankTrace

    if flt.empty:
        return job
    chosen = [job.rank(r).rank for r in (flt.ranks if flt.ranks is not None else job.ranks)]
    if not flt.rows_filtered:
        return replace(job, traces={r: job.traces[r] for r in chosen})
    masks = row_masks(job_view(job, NATIVE, ranks=chosen), replace(flt, ranks=tuple(chosen)))
    traces = {}
    for r in chosen:
        t = job.rank(r)
        keep = np.flatnonzero(masks[r])  # native view rows are the model's rows
        cols = {k: a[keep] for k, a in t.columns.items()}
        new_pos = np.full(t.n_events + 1, -1, dtype=np.int64)
        new_pos[keep] = np.arange(len(keep))
        cols["partner"] = new_pos[cols["partner"].astype(np.int64)].astype(cols["partner"].dtype)
        raw = [t.raw_args[i] for i in keep.tolist()] if t.raw_args is not None else None
        traces[r] = RankTrace(
            r,
            t.file,
            t.meta,
            cols,
            t._side,
            job.strings,
            ts_is_float=t.ts_is_float,
            n_trace_events=t.n_trace_events,
            phase_counts=t.phase_counts,
            raw_args=raw,
            format=t.format,
        )
    return replace(job, traces=traces)


def _tuple(key: str, x):
    if key in ("ranks", "steps") and x is not None:
        if isinstance(x, str):
            return parse_int_ranges(x, key[:-1])
        if isinstance(x, (int, np.integer)):
            return (int(x),)
        return tuple(int(i) for i in x)
    return x
