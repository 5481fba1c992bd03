"""Who waits for whom in collectives: holotrace's view of stragglers (see :mod:`holotrace.analysis.stragglers`).

The k-th instance of a collective kernel in a step is the same collective on every rank; all ranks leave it
together, so a rank's extra time in it over the fastest rank is time spent waiting for the others, and the
fastest rank (the last to arrive) is the one they waited for. Durations are compared, not start times, so clock
skew between hosts does not matter. Each answer has a core returning a :class:`~holotrace.table.Table` (what
the commands read) and a public function returning the pandas frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.grouped import group_max, group_min, group_sum
from holotrace.model.classify import RuleSet
from holotrace.model.view import resolve
from holotrace.order_stats import distinct
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "collective_waits",
    "collective_waits_table",
    "straggler_report",
    "straggler_report_table",
    "straggler_summary",
    "straggler_summary_table",
]


def _key_changes(order: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """Positions in ``order`` where any of ``keys`` (read in that order) differs from the previous row; 0 first."""
    if not len(order):
        return np.empty(0, dtype=np.intp)
    diff = np.zeros(len(order) - 1, dtype=bool)
    for k in keys:
        v = k[order]
        diff |= v[1:] != v[:-1]
    return np.r_[0, np.flatnonzero(diff) + 1]


_WAIT_COLUMNS = ["step", "collective", "occurrence", "rank", "start_us", "dur_us", "wait_us", "last_arrival"]
_REPORT_COLUMNS = [
    "step",
    "rank",
    "collectives",
    "wait_us",
    "waited_for_us",
    "straggler",
    "worst_collective",
    "worst_collective_wait_us",
]
_SUMMARY_COLUMNS = ["rank", "steps_as_straggler", "waited_for_us", "wait_us"]


def _group_codes(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's group, first row of each group): groups of equal ``keys`` numbered in key order (a sorted
    groupby's order)."""
    order = np.lexsort(keys[::-1])
    starts = _key_changes(order, *keys)
    codes = np.empty(len(order), dtype=np.int64)
    codes[order] = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    return codes, order[starts]


def _text_codes(text: np.ndarray) -> np.ndarray:
    """Codes of text values in sorted order (equal text, equal code)."""
    return np.unique(np.asarray(text, dtype=object), return_inverse=True)[1].reshape(-1)


def collective_waits_table(source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None) -> Table:
    """:func:`collective_waits` as a :class:`~holotrace.table.Table` (``collective`` an object array of str)."""
    from holotrace.analysis.critical_path.collectives import match_collectives

    view = resolve(source, rules)
    starts = [int(view[r]["ts"].min()) + view[r].clock_offset for r in view.ranks if view[r].n]
    origin = min(starts) if starts else 0
    m = match_collectives(view, rules=view.rules, ranks=ranks).table
    if m.empty:
        return Table({c: np.empty(0, dtype=object if c == "collective" else np.float64) for c in _WAIT_COLUMNS})
    by = np.argsort(np.asarray(m["rank"]), kind="stable")  # the ranks in order, each rank's rows in their order
    m_rank, m_row = np.asarray(m["rank"])[by], np.asarray(m["row"])[by]
    parts: dict[str, list] = {c: [] for c in ("name", "start_us", "dur_us")}
    for r in distinct(m_rank).tolist():
        v, rows = view[int(r)], m_row[m_rank == r]
        parts["name"].append(v["name"][rows])
        parts["start_us"].append(view.us(v["ts"][rows] + v.clock_offset - origin))
        parts["dur_us"].append(view.us(v["dur"][rows]))
    name, start, dur = (np.concatenate(parts[c]) for c in ("name", "start_us", "dur_us"))
    start, dur = start.astype(np.float64, copy=False), dur.astype(np.float64, copy=False)
    step, occurrence = np.asarray(m["step"])[by], np.asarray(m["occurrence"])[by]
    instance, rank = np.asarray(m["instance"])[by], m_rank.astype(np.int64)
    inst, first = _group_codes(instance)
    shortest = group_min(inst, dur, len(first))
    wait = dur - shortest[inst]
    # last arrival: shortest duration; ties -> latest start, then lowest rank
    order = np.lexsort((rank, -start, dur, inst))
    heads = order[_key_changes(order, inst)]
    last = np.empty(len(first), dtype=np.int64)
    last[inst[heads]] = rank[heads]
    collective = view.names(name)
    out = np.lexsort((rank, occurrence, _text_codes(collective), start, step))
    return Table(
        {
            "step": step[out].astype(np.int64),
            "collective": np.asarray(collective, dtype=object)[out],
            "occurrence": occurrence[out].astype(np.int64),
            "rank": rank[out],
            "start_us": start[out],
            "dur_us": dur[out],
            "wait_us": wait[out],
            "last_arrival": last[inst][out],
        }
    )


def collective_waits(source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """Every communication kernel instance matched across ranks, with each rank's waiting time.

    Kernels are matched by :func:`holotrace.analysis.critical_path.collectives.match_collectives`: the k-th
    collective of one process group and kind within a step on one rank is the k-th on every other rank (a
    (step, group, kind) whose ranks disagree on the count is left out). Kernels outside any
    ``ProfilerStep`` belong to step -1. Kernels and their types follow the rule set
    (default: the view's, or holotrace's for a job).

    Returns:
        One row per (instance, rank) where at least two ranks have the instance:
        ``step, collective, occurrence, rank, start_us, dur_us, wait_us,
        last_arrival`` — ``start_us`` from the job's earliest event on the common
        clock; ``wait_us`` = the rank's duration minus the shortest duration of
        the instance; ``last_arrival`` = the rank with the shortest duration
        (latest start breaks ties), whom the others waited for.
    """
    return collective_waits_table(source, rules=rules, ranks=ranks).to_pandas()


def straggler_report_table(waits) -> Table:
    """:func:`straggler_report` of the rows of :func:`collective_waits` (a table or frame) as a table."""
    w = Table.of(waits)
    if w.empty:
        return Table({c: np.empty(0, dtype=object) for c in _REPORT_COLUMNS})
    step, rank = np.asarray(w["step"]), np.asarray(w["rank"])
    coll = np.asarray(w["collective"], dtype=object)
    occ, last = np.asarray(w["occurrence"]), np.asarray(w["last_arrival"])
    wait = np.asarray(w["wait_us"], dtype=np.float64)
    per, per_first = _group_codes(step, rank)  # (step, rank), sorted
    n = len(per_first)
    # what each rank made the others wait, per collective instance it arrived at last (groups in order of appearance)
    inst, inst_first = _group_codes(step, _text_codes(coll), occ, last)
    seen = np.argsort(inst_first, kind="stable")
    renumber = np.empty(len(seen), dtype=np.int64)
    renumber[seen] = np.arange(len(seen))
    caused = group_sum(renumber[inst], wait, len(seen))
    c_rows = inst_first[seen]
    c_step, c_rank, c_coll = step[c_rows], last[c_rows], coll[c_rows]
    # the caused rows' (step, rank) among the report's rows, by a key in (step, rank) order
    lo = min(int(rank.min()), int(c_rank.min()))
    span = max(int(rank.max()), int(c_rank.max())) - lo + 1
    pair = step[per_first].astype(np.int64) * span + (rank[per_first].astype(np.int64) - lo)
    key = c_step.astype(np.int64) * span + (c_rank.astype(np.int64) - lo)
    at = np.minimum(np.searchsorted(pair, key), n - 1)
    found = pair[at] == key  # always, as every rank that arrived last waited in the instance too
    at, caused, c_coll = at[found], caused[found], c_coll[found]
    waited_for = group_sum(at, caused, n)
    worst_order = np.lexsort((-caused, at))  # per (step, rank): the largest first, ties in order of appearance
    heads = worst_order[_key_changes(worst_order, at)]
    worst_coll = np.full(n, "", dtype=object)
    worst_wait = np.zeros(n)
    worst_coll[at[heads]] = c_coll[heads]
    worst_wait[at[heads]] = caused[heads]
    p_step = step[per_first]
    steps_of, s_code = np.unique(p_step, return_inverse=True)
    top = group_max(s_code.reshape(-1), waited_for, len(steps_of))
    return Table(
        {
            "step": p_step,
            "rank": rank[per_first],
            "collectives": np.bincount(per, minlength=n).astype(np.int64),
            "wait_us": group_sum(per, wait, n),
            "waited_for_us": waited_for,
            "straggler": (waited_for >= top[s_code.reshape(-1)]) & (waited_for > 0),
            "worst_collective": worst_coll,
            "worst_collective_wait_us": worst_wait,
        }
    )


def straggler_report(
    source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None, waits=None
) -> pd.DataFrame:
    """Per step and rank: time spent waiting in collectives, and time the others waited for it.

    Returns:
        ``step, rank, collectives, wait_us, waited_for_us, straggler,
        worst_collective, worst_collective_wait_us`` — ``waited_for_us`` sums,
        over the collectives the rank arrived at last, the others' waiting time;
        ``straggler`` marks the rank(s) with the largest positive
        ``waited_for_us`` of the step; ``worst_collective`` is the collective in
        which the others waited longest for this rank (empty when none).
    """
    w = collective_waits_table(source, rules=rules, ranks=ranks) if waits is None else waits
    return straggler_report_table(w).to_pandas()


def straggler_summary_table(report) -> Table:
    """:func:`straggler_summary` of the rows of :func:`straggler_report` (a table or frame) as a table."""
    rep = Table.of(report)
    if rep.empty:
        return Table({c: np.empty(0, dtype=np.float64) for c in _SUMMARY_COLUMNS})
    ranks, codes = np.unique(np.asarray(rep["rank"]), return_inverse=True)
    codes = codes.reshape(-1)
    k = len(ranks)
    waited_for = group_sum(codes, np.asarray(rep["waited_for_us"], dtype=np.float64), k)
    out = Table(
        {
            "rank": ranks,
            "steps_as_straggler": np.bincount(codes[np.asarray(rep["straggler"], dtype=bool)], minlength=k).astype(
                np.int64
            ),
            "waited_for_us": waited_for,
            "wait_us": group_sum(codes, np.asarray(rep["wait_us"], dtype=np.float64), k),
        }
    )
    return out.take(np.argsort(-waited_for, kind="stable"))  # ranks ascending: ties keep rank order


def straggler_summary(source, *, rules: RuleSet | None = None, report=None) -> pd.DataFrame:
    """One row per rank over all steps: how often it was the straggler and how long others waited for it.

    Returns:
        ``rank, steps_as_straggler, waited_for_us, wait_us`` sorted by
        ``waited_for_us`` descending (ties: rank).
    """
    rep = straggler_report_table(collective_waits_table(source, rules=rules)) if report is None else report
    return straggler_summary_table(rep).to_pandas()
