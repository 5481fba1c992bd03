"""The steps of a rank and the critical-path graph of each: the one step loop that the per-step critical path,
the what-ifs and the job replay share.

``step_rows(rv, strings, rules)`` lists a rank's ``ProfilerStep`` ranges; ``step_graphs(source, rank=...)``
yields ``(step, CriticalPath)`` per step (solved); ``step_paths`` / ``per_step`` are its public uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.graph import build_graph, clip, cpu_rows
from holotrace.errors import AnalysisError
from holotrace.model import classify
from holotrace.model.classify import RuleSet
from holotrace.model.view import resolve

if TYPE_CHECKING:
    import pandas as pd

    from holotrace.analysis.critical_path.path import CriticalPath

__all__ = ["per_step", "step_graphs", "step_paths", "step_rows", "step_windows"]


def step_rows(rv, strings, rules, nums: np.ndarray | None = None) -> list[tuple[int, int]]:
    """``(step number, row)`` of the rank's CPU ``ProfilerStep`` ranges, ordered by start: one row per step number
    (the first to start). GPU-timeline copies (``gpu_user_annotation``) are not steps, even when they carry no
    stream. ``nums``: each string's step number under ``rules`` (-1: not a step; the last entry for id -1), when
    the caller keeps it for every rank."""
    if nums is None:
        nums = np.array(
            [
                rules.step_number(x) if hasattr(rules, "step_number") else classify.profiler_step_number(x)
                for x in strings.table
            ]
            + [-1],
            dtype=np.int64,
        )
    name = rv["name"]
    sn = nums[np.where(name >= 0, name, len(nums) - 1)]
    rows = np.flatnonzero((sn >= 0) & cpu_rows(rv))
    rows = rows[np.argsort(rv["ts"][rows], kind="stable")]
    _, first = np.unique(sn[rows], return_index=True)
    rows = rows[np.sort(first)]
    return list(zip(sn[rows].tolist(), rows.tolist()))


def step_windows(
    rv, strings, rules, steps: Sequence[int] | None = None, *, rank: int = 0, whole_rank: bool = False
) -> list[tuple[int, tuple[float, float]]]:
    """``(step number, (start, end))`` of the wanted steps of one rank's view, in time order (view unit).

    ``whole_rank``: a rank without any step gives one window ``(-1, (first ts, inf))``. Raises ``ValueError``
    naming the rank's steps when a requested step is not there."""
    rows = step_rows(rv, strings, rules)
    if not rows and whole_rank and steps is None:
        return [(-1, (float(rv["ts"].min()) if rv.n else 0.0, float("inf")))]
    numbers = [s for s, _ in rows]
    wanted = numbers if steps is None else [int(s) for s in steps]
    missing = sorted(set(wanted) - set(numbers))
    if missing:
        have = f"{numbers[0]}..{numbers[-1]}" if numbers else "none"
        raise AnalysisError(
            f"step(s) {missing} not on rank {rank} (its ProfilerStep numbers: {have})",
            fix="pass a step number of that rank",
        )
    keep = set(wanted)
    return [(s, (float(rv["ts"][r]), float(rv["ts"][r] + rv["dur"][r]))) for s, r in rows if s in keep]


def step_graphs(
    source,
    *,
    rank: int = 0,
    steps: Sequence[int] | None = None,
    rules: RuleSet | None = None,
    data_load_events: Sequence[str] | None = None,
    whole_rank: bool = False,
) -> Iterator[tuple[int, CriticalPath]]:
    """``(step number, solved CriticalPath)`` for every ``ProfilerStep`` of ``rank`` (or the given step numbers),
    in time order; ``whole_rank``: a rank without steps gives one graph of the whole rank, numbered -1."""
    from holotrace.analysis.critical_path.path import CriticalPath, solve  # (the job's analyses need only step_rows)

    view = resolve(source, rules, ranks=[rank])
    rules = view.rules  # the one rule set: a view's own unless others are asked for
    rv = view[rank]
    dle = list(data_load_events) if data_load_events else None
    for s, win in step_windows(rv, view.strings, rules, steps, rank=rank, whole_rank=whole_rank):
        rows = clip(rv, view.strings, *win)
        g = build_graph(view, rank, rows, win, rules=rules, data_load_events=data_load_events)
        yield s, solve(CriticalPath(g, rv, view.strings, rules, view.unit_ns, dle))


def step_paths(
    source,
    *,
    rank: int = 0,
    steps: Sequence[int] | None = None,
    rules: RuleSet | None = None,
    data_load_events: Sequence[str] | None = None,
):
    """``(step number, CriticalPath)`` for every ``ProfilerStep`` of ``rank`` (or the given step numbers), in
    time order. Raises ``ValueError`` naming the rank's steps when a requested step is not there."""
    return step_graphs(source, rank=rank, steps=steps, rules=rules, data_load_events=data_load_events)


def per_step(
    source,
    *,
    rank: int = 0,
    steps: Sequence[int] | None = None,
    rules: RuleSet | None = None,
    data_load_events: Sequence[str] | None = None,
    paths: dict | None = None,
) -> pd.DataFrame:
    """Critical path of every ``ProfilerStep`` (or the given step numbers) of ``rank``: one row per step and
    class with ``step, bound_by, duration, pct, path_length, zeroed_edges`` (durations in the view's unit;
    ``zeroed_edges``: negative edge weights of the step's graph set to 0). ``paths``: a dict that receives each
    step's :class:`CriticalPath`."""
    import pandas as pd

    from holotrace.analysis.critical_path.path import breakdown

    out = []
    for s, cp in step_graphs(source, rank=rank, steps=steps, rules=rules, data_load_events=data_load_events):
        if paths is not None:
            paths[s] = cp
        df = breakdown(cp)
        if df is None:
            continue
        total = df.duration.sum()
        agg = df.groupby("bound_by").duration.sum()
        for k, d in agg.items():
            out.append(
                {
                    "step": s,
                    "bound_by": k,
                    "duration": float(d),
                    "pct": float(d / total * 100) if total else 0.0,
                    "path_length": float(total),
                    "zeroed_edges": cp.zeroed_edges,
                }
            )
    return pd.DataFrame(out, columns=["step", "bound_by", "duration", "pct", "path_length", "zeroed_edges"])
