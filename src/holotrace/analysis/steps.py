"""Profiler steps: which ``ProfilerStep#N`` a job has, and how long each took per rank.

Both functions follow a rule set: holotrace's (every ``ProfilerStep#N`` CPU op or annotation in the
files, nothing dropped) or HTA's (any row named ``ProfilerStep…``, read from HTA's view, where the
last step has been dropped unless ``include_last_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from holotrace.analysis import intervals
from holotrace.model.classify import Kind, RuleSet, kind_in
from holotrace.model.view import JobView, RankView, resolve
from holotrace.table import Table

__all__ = ["profiler_steps", "step_times", "step_times_table", "step_rows"]


def step_rows(view: JobView, v: RankView, rules: RuleSet) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, step numbers)`` of the rank's ``ProfilerStep`` events under ``rules``.

    HTA counts any row whose name gives a step number; holotrace only CPU ops and user annotations. Found once
    per rank view and rules (treat the arrays as read-only).
    """
    return v.derived(("step_rows", rules.step_number, bool(rules.hta_table)), lambda: _step_rows(view, v, rules))


def _step_rows(view: JobView, v: RankView, rules: RuleSet) -> tuple[np.ndarray, np.ndarray]:
    per = view.per_string(rules.step_number, prefix="ProfilerStep")  # id −1 reads the last entry: −1
    names = v["name"]
    rows = np.flatnonzero((per >= 0)[names])  # the few rows named ProfilerStep#N, then their kind
    if not rules.hta_table:
        rows = rows[kind_in(v["kind"][rows], (Kind.CPU_OP, Kind.USER_ANNOTATION))]
    num = per[names[rows]]
    rows.flags.writeable = num.flags.writeable = False
    return rows, num


def profiler_steps(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None) -> list[int]:
    """Sorted distinct ``ProfilerStep#N`` numbers over the ranks (empty when the trace has none)."""
    view = resolve(source, rules)
    rules = view.rules
    found: set[int] = set()
    for rank in view.select(ranks):
        found.update(step_rows(view, view[rank], rules)[1].tolist())
    return sorted(found)


def step_times(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None):
    """:func:`step_times_table` as a pandas frame."""
    return step_times_table(source, rules=rules, ranks=ranks).to_pandas()


def step_times_table(source, *, rules: Optional[RuleSet] = None, ranks: Optional[Sequence[int]] = None) -> Table:
    """Per rank and step: the CPU step span and the GPU work launched in it.

    Times are in µs; ``start_us`` is relative to the job's time origin (earliest event over all
    ranks, on the common clock).

    Returns:
        Columns ``rank, step, start_us, dur_us, gpu_events, gpu_busy_us, gpu_span_us``: ``dur_us``
        is the step's span (earliest start to latest end of its ``ProfilerStep#N`` events); GPU
        columns cover the GPU work launched from the step (union length and first-start-to-last-end
        span; 0 when none). One row per (rank, step), by rank then step. A rank without
        ProfilerStep annotations has no rows.
    """
    view = resolve(source, rules)
    rules = view.rules
    chosen = view.select(ranks)
    origin = view.first_ts()
    cols = {
        "rank": np.int64,
        "step": np.int64,
        "start_us": np.float64,
        "dur_us": np.float64,
        "gpu_events": np.int64,
        "gpu_busy_us": np.float64,
        "gpu_span_us": np.float64,
    }
    parts = {c: [] for c in cols}
    for rank in chosen:
        v = view[rank]
        rows, num = step_rows(view, v, rules)
        if not len(rows):
            continue
        steps, inv = np.unique(num, return_inverse=True)
        first = np.full(len(steps), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, inv, v["ts"][rows].astype(np.int64))
        last = np.full(len(steps), -np.inf)
        np.maximum.at(last, inv, v["end"][rows].astype(np.float64))
        it = v["iteration"]
        g = np.flatnonzero(v["gpu"] & (it >= 0))
        g = g[intervals.stable_order(it[g])]  # each step's GPU rows in their order
        lo, hi = np.searchsorted(it[g], steps, "left"), np.searchsorted(it[g], steps, "right")
        busy = np.zeros(len(steps))
        gspan = np.zeros(len(steps))
        for k in range(len(steps)):
            u = intervals.merge(*v.bounds(g[lo[k] : hi[k]]))
            busy[k], gspan[k] = intervals.total_length(u), intervals.span(u)
        for c, a in (
            ("rank", np.full(len(steps), int(rank), dtype=np.int64)),
            ("step", steps.astype(np.int64)),
            ("start_us", view.us(first + v.clock_offset - origin)),
            ("dur_us", view.us(last - first)),
            ("gpu_events", (hi - lo).astype(np.int64)),
            ("gpu_busy_us", view.us(busy)),
            ("gpu_span_us", view.us(gspan)),
        ):
            parts[c].append(a)
    if not parts["rank"]:
        return Table({c: np.empty(0, dtype=t) for c, t in cols.items()})
    return Table({c: np.concatenate(parts[c]).astype(t, copy=False) for c, t in cols.items()})
