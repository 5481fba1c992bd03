"""Straggler detection (spec 26 §2) and a per-step view of who waits for whom in collectives.

Two views, both over a :class:`~holotrace.model.view.JobView` under a rule set:

* :func:`potential_stragglers` — HTA's method: among the long communication kernels, pick the
  ``(stream, kernel)`` whose duration varies most across ranks; per step, the ranks that start its
  last instance latest are the candidates. Communication kernels are those of
  :meth:`~holotrace.model.classify.RuleSet.is_communication` on HTA's tables, the view's ``kernel_type`` on
  holotrace's (every family of the rule table, and work launched under a collective; docs/rules.md).
  Without ``hta_quirks`` (holotrace's fixes):
  every NCCL/RCCL/HCCL family (``ncclDevKernel_*`` included), stream 0 and step 0 count, a trace
  without ``ProfilerStep`` annotations is one step, and degenerate inputs (one rank, no collective)
  give ``[]`` instead of an exception. With ``hta_quirks``: HTA's ``ncclKernel*``/``stream > 0``/
  ``iteration > 0`` selection and ranking.
* :func:`collective_waits` / :func:`straggler_report` (:mod:`holotrace.analysis.waits`) — holotrace's view: the k-th instance of a
  collective kernel in a step is the same collective on every rank; all ranks leave it together, so
  a rank's extra time in it over the fastest rank is time spent waiting for the others, and the
  fastest rank (the last to arrive) is the one they waited for. Durations are compared, not start
  times, so clock skew between hosts does not matter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis import steps as _steps
from holotrace.analysis.topk import group_stats
from holotrace.analysis.waits import (
    _key_changes,
    collective_waits,
    collective_waits_table,
    straggler_report,
    straggler_report_table,
    straggler_summary,
    straggler_summary_table,
)
from holotrace.model.classify import KernelType, RuleSet
from holotrace.model.link import isin_ids
from holotrace.model.view import resolve, wide
from holotrace.order_stats import distinct
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SymbolTableView",
    "collective_waits",
    "collective_waits_table",
    "straggler_report_table",
    "straggler_summary_table",
    "potential_stragglers",
    "straggler_report",
    "straggler_scores",
    "straggler_steps",
    "straggler_summary",
]

log = logging.getLogger(__name__)


class SymbolTableView:
    """The two lookups HTA's pluggable straggler scorers use (``get_sym_table``, ``get_sym_id_map``)."""

    def __init__(self, strings: Sequence[str]):
        self.sym_table = list(strings)
        self.sym_index = {s: i for i, s in enumerate(self.sym_table)}

    def get_sym_table(self) -> list[str]:
        return self.sym_table

    def get_sym_id_map(self) -> dict[str, int]:
        return self.sym_index


def straggler_steps(
    source, profiler_steps: Sequence[int] | None = None, *, rules: RuleSet | None = None
) -> list[int] | None:
    """The steps the straggler analysis uses: ``profiler_steps`` that exist (all when None).

    Returns None when the whole trace counts as one step (no ``ProfilerStep`` at all, no steps asked
    for, rules without ``hta_quirks``).

    Raises:
        ValueError: no requested (or, with ``hta_quirks``, no available) step exists (as HTA).
    """
    view = resolve(source, rules)
    rules = view.rules
    available = _steps.profiler_steps(view, rules=rules)
    selected = available if profiler_steps is None else [s for s in profiler_steps if s in available]
    if selected:
        return selected
    if profiler_steps is None and not available and not rules.hta_quirks:
        return None
    raise ValueError(
        f"invalid value for argument: profiler_steps={profiler_steps}; available profiler steps={available}"
    )


def straggler_scores(
    source,
    *,
    rules: RuleSet | None = None,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    num_candidates: int = 2,
) -> tuple[pd.Series, pd.DataFrame]:
    """HTA's default scorer (see :func:`straggler_score_arrays`): ``(scores, metric)`` as pandas objects."""
    import pandas as pd

    rank, score, metric = straggler_score_arrays(
        source, rules=rules, ranks=ranks, steps=steps, num_candidates=num_candidates
    )
    if not len(rank):
        return pd.Series([], dtype=np.int64), pd.DataFrame()
    return pd.Series(score, index=pd.Index(rank, name="rank"), dtype=np.int64), metric.to_pandas()


def straggler_score_arrays(
    source,
    *,
    rules: RuleSet | None = None,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    num_candidates: int = 2,
) -> tuple[np.ndarray, np.ndarray, Table]:
    """HTA's default scorer: how often each rank starts the dominant communication kernel late.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job).
        ranks: default all.
        steps: the steps to score (:func:`straggler_steps`); None: the whole trace is one step.
        num_candidates: k, the late starters flagged per step.

    Returns:
        ``(ranks, scores, metric)``: per-rank score (steps in which the rank was among the k latest starters;
        ranks ascending) and the metric rows (``rank, stream, iteration, name, ts, dur,
        normalized_start_time, duration``; ``name`` a string id, times in the view's unit on the
        job's common clock). Both empty when no communication kernel qualifies.
    """
    view = resolve(source, rules)
    rules = view.rules
    k = max(int(num_candidates), 1)
    chosen = view.select(ranks)
    cut = {}
    present: set = set()
    t_min = max_end = None
    for r in chosen:
        v = view[r]
        it = v["iteration"]
        if steps is None:  # the whole trace is one step
            it = np.zeros(len(it), dtype=np.int64)
            keep = None
            present.add(0)
        elif it.dtype.kind in "iu":  # integer steps: flag arrays, no sort or hash
            keep = isin_ids(it, np.asarray(steps, dtype=np.int64))
            present.update(_values_present(it[keep], steps))
        else:  # HTA's iterations with NaN
            keep = np.isin(it, steps)
            present.update(distinct(it[keep]).tolist())
        ts, ends, dur = v["ts"], v["end"], v["dur"]
        if v.clock_offset:  # onto the job's common clock
            ts, ends = ts + v.clock_offset, ends + v.clock_offset
        if len(ts) and (keep is None or keep.any()):
            where = True if keep is None else keep
            start = ts.min(initial=np.iinfo(np.int64).max, where=where)
            end = ends.max(initial=-np.inf if ends.dtype.kind == "f" else np.iinfo(ends.dtype).min, where=where)
            t_min = start if t_min is None else min(t_min, start)
            max_end = end if max_end is None else max(max_end, end)
        cut[r] = (v, keep, it, ts, dur)
    iters = [x for x in present if x != -1]
    if not iters or t_min is None:
        return _empty()
    mean_iter = (max_end - t_min) / float(len(iters))
    picked = []
    for r in chosen:
        v, keep, it, ts, dur = cut[r]
        long = _long_rows(v["stream"], it, dur, mean_iter * 0.01, rules.hta_quirks)
        if keep is not None:
            long = long[keep[long]]
        picked.append((r, long, v["stream"], it, ts, dur, v["name"], v["kernel_type"]))
    ids = np.concatenate([p[6][p[1]] for p in picked]) if picked else np.empty(0, dtype=np.int64)
    if not len(ids):
        return _empty()
    if view.rules.hta_table:  # HTA's tables: the communication rule by name, once per distinct name of the long rows
        uniq, inv = np.unique(ids, return_inverse=True)
        comm = np.array([rules.is_communication(view.strings[int(i)]) for i in uniq.tolist()], dtype=bool)[
            inv.reshape(-1)
        ]
    else:  # holotrace's view: its kernel types (the rule table, by name and by the launching collective)
        comm = np.concatenate([p[7][p[1]] == int(KernelType.COMMUNICATION) for p in picked])
    cols: dict[str, list] = {c: [] for c in ("rank", "stream", "iteration", "name", "ts", "dur")}
    at = 0
    for r, long, stream, it, ts, dur, name, _ in picked:
        rows = long[comm[at : at + len(long)]]
        at += len(long)
        for c, x in (
            ("rank", np.full(len(rows), r, dtype=np.int64)),
            ("stream", wide(stream[rows])),
            ("iteration", wide(it[rows])),
            ("name", wide(name[rows])),
            ("ts", ts[rows]),
            ("dur", dur[rows]),
        ):
            cols[c].append(x)
    return _scores_of_long_kernels({c: np.concatenate(x) for c, x in cols.items()}, t_min, mean_iter, k)


def _long_rows(
    stream: np.ndarray, iteration: np.ndarray, dur: np.ndarray, min_duration: float, hta_quirks: bool
) -> np.ndarray:
    """Positions of the rows long enough, on a kernel stream and in a step, for HTA's scorer."""
    ok_stream = stream > 0 if hta_quirks else stream >= 0
    ok_iter = iteration > (0 if hta_quirks else -1)
    return np.flatnonzero(ok_stream & ok_iter & (dur >= min_duration))


def _values_present(values: np.ndarray, candidates) -> list:
    """Which of a few integer ``candidates`` occur in ``values`` (every value is one of them)."""
    if not len(values) or not len(candidates):
        return []
    lo = min(candidates)
    seen = np.zeros(max(candidates) - lo + 1, dtype=bool)
    seen[values - lo] = True
    return [c for c in candidates if seen[c - lo]]


def _empty() -> tuple[np.ndarray, np.ndarray, Table]:
    """No scores, no metric rows."""
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), Table()


def _scores_of_long_kernels(long, t_min, mean_iter, k: int) -> tuple[np.ndarray, np.ndarray, Table]:
    """HTA's scoring on the long communication kernels (``rank, stream, iteration, name, ts, dur``; a frame or a dict)."""
    cols = {c: np.asarray(long[c]) for c in ("rank", "stream", "iteration", "name", "ts", "dur")}
    if not len(cols["rank"]):
        return _empty()
    r, st, it, nm = cols["rank"], cols["stream"], cols["iteration"], cols["name"]
    # the last instance of each (rank, stream, step, kernel), in key order (HTA: groupby(...).tail(1), sorted)
    order = np.lexsort((np.arange(len(r)), nm, it, st, r))
    changes = _key_changes(order, r, st, it, nm)
    last = order[np.r_[changes[1:] - 1, len(order) - 1]]
    last_cols = {c: v[last] for c, v in cols.items()}
    last_cols["normalized_start_time"] = (last_cols["ts"] - t_min) / mean_iter
    last_cols["duration"] = last_cols["dur"] / mean_iter
    lr, ls, li, ln, ld = (last_cols[c] for c in ("rank", "stream", "iteration", "name", "duration"))
    # spread of the duration across ranks per (stream, step, kernel); then its mean over steps per (stream, kernel)
    g = np.lexsort((lr, ln, li, ls))
    gstart = _key_changes(g, ls, li, ln)
    _, count, _, _, _, _, std = group_stats(np.repeat(np.arange(len(gstart)), np.diff(np.r_[gstart, len(g)])), ld[g])
    spread = np.where(count > 1, std, np.nan)  # pandas' std of a single value is NaN
    gs, gi, gn = ls[g[gstart]], li[g[gstart]], ln[g[gstart]]
    h = np.lexsort((gi, gn, gs))  # groups of (stream, kernel), sorted
    hstart = _key_changes(h, gs, gn)
    valid = ~np.isnan(spread[h])
    n_valid = np.add.reduceat(valid.astype(np.int64), hstart)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.add.reduceat(np.where(valid, spread[h], 0.0), hstart) / n_valid  # NaN where no step had a spread
    if np.isnan(avg).all():
        return _empty()
    best = int(np.nanargmax(avg))  # first maximum in (stream, kernel) order, as idxmax
    stream_pick, name_pick = gs[h[hstart[best]]], gn[h[hstart[best]]]
    chosen = (ls == stream_pick) & (ln == name_pick)
    metric = Table(
        {
            c: last_cols[c][chosen]
            for c in ("rank", "stream", "iteration", "name", "ts", "dur", "normalized_start_time", "duration")
        }
    )
    nst = last_cols["normalized_start_time"][chosen]
    m_rank, m_iter = last_cols["rank"][chosen], last_cols["iteration"][chosen]
    flags = np.zeros(len(metric), dtype=np.int64)
    steps = distinct(m_iter)
    if len(steps) <= 1:
        vals = np.sort(nst)[::-1]
        threshold = vals[min(k, vals.size) - 1]
        flags = (nst >= threshold).astype(np.int64)
        ranks, scores = m_rank, flags
    else:
        for itv in steps:  # one pass per step
            if itv < 0:
                continue
            sel = m_iter == itv
            vals = np.sort(nst[sel])[::-1]
            threshold = vals[min(k, vals.size) - 1]
            flags[sel] = (nst[sel] >= threshold).astype(np.int64)
        ranks, inv = np.unique(m_rank, return_inverse=True)
        scores = np.bincount(inv.reshape(-1), weights=flags, minlength=len(ranks))
    return np.asarray(ranks, dtype=np.int64), np.asarray(scores).astype(np.int64), metric


def potential_stragglers(
    source,
    *,
    rules: RuleSet | None = None,
    profiler_steps: Sequence[int] | None = None,
    num_candidates: int = 2,
    scorer: Callable[[list[int] | None], pd.Series] | None = None,
) -> list[int]:
    """The ranks most likely to hold the others back, most likely first (HTA's ``get_potential_stragglers``).

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job).
        profiler_steps: steps to use (unknown ones dropped); ``None``: all (:func:`straggler_steps`).
        num_candidates: how many ranks to return (at least 1).
        scorer: replaces :func:`straggler_scores`: called with the selected steps (None: the whole trace
            is one step), returns a score per rank (index = rank).

    Returns:
        Rank numbers, most likely straggler first; ``[]`` (with a warning) when the traces cannot tell
        (no communication kernel, a single rank). Without ``hta_quirks`` only ranks with a positive
        score are returned and ties on the score go to the rank that started the metric kernel later on
        average (then the lower rank); with ``hta_quirks``, HTA's order (ties by rank, zero scores
        included).

    Raises:
        ValueError: ``profiler_steps`` names no available step (as HTA).
    """
    view = resolve(source, rules)
    rules = view.rules
    k = max(int(num_candidates), 1)
    steps = straggler_steps(view, profiler_steps, rules=rules)
    metric = None
    if scorer is not None:
        scores = scorer(steps)
        rank, score = np.asarray(scores.index), np.asarray(scores)
    else:
        rank, score, metric = straggler_score_arrays(view, rules=rules, steps=steps, num_candidates=k)
    if len(score) == 0:
        log.warning(
            "no straggler candidates: needs communication kernels longer than 1% of a step on at least two ranks"
        )
        return []
    if rules.hta_quirks:
        order = np.argsort(-score, kind="stable")  # ties in their order
        return [int(r) for r in rank[order][:k]]
    # ties on the score: the later average start of the metric kernel first, then the lower rank
    late = np.zeros(len(rank))
    if metric is not None and len(metric):  # mean normalized start of the metric kernel per rank
        m_rank = np.asarray(metric["rank"])
        seen, inv = np.unique(m_rank, return_inverse=True)
        inv = inv.reshape(-1)
        means = np.bincount(inv, weights=np.asarray(metric["normalized_start_time"])) / np.bincount(inv)
        at = np.searchsorted(seen, rank)
        found = (at < len(seen)) & (seen[np.minimum(at, len(seen) - 1)] == rank)
        late = np.where(found, means[np.minimum(at, len(seen) - 1)], -np.inf)
    keep = np.flatnonzero(score > 0)
    order = keep[np.lexsort((rank[keep], -late[keep], -score[keep]))]
    return [int(r) for r in rank[order][:k]]
