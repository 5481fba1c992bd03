"""Step times of a replay: when each rank's step starts and ends under given point times, the job's steps (a step
of the job ends when its slowest rank's step ends), and the tables a replay reports (measured against replayed).

A rank's step ends when its ``ProfilerStep`` range ends or, if later, when the last GPU operation of the step ends.
A job step's time is the time from the end of the job's previous step (the first: from its earliest
``ProfilerStep`` start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.job_graph import JobGraph, NodeType
from holotrace.order_stats import distinct
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "job_step_table",
    "replay_step_tables",
    "replay_tables",
    "step_ends",
    "step_ends_of",
    "step_ends_table",
    "step_points",
    "step_table",
]


def step_ends_table(g: JobGraph, t: np.ndarray) -> Table:
    """Per (rank, step): the step's start (its ``ProfilerStep`` start) and end (the later of its ``ProfilerStep``
    end and its last GPU operation's end), from point times ``t``. A job without any ``ProfilerStep`` is one step,
    numbered -1, per rank from its first call or GPU operation to the end of its last."""
    idx = _step_index(g)
    if idx is None:
        return _step_ends_grouped(g, t)
    marks, ends, gpu, _, _ = idx
    return _ends_table(g, idx, t[2 * marks], t[2 * ends + 1], t[2 * gpu + 1])


def step_points(g: JobGraph) -> tuple | None:
    """The points :func:`step_ends_table` reads (each step's start, its ``ProfilerStep`` end, its GPU operations'
    ends), None when the steps are grouped by label; :func:`step_ends_of` takes their times."""
    idx = _step_index(g)
    if idx is None:
        return None
    marks, ends, gpu, _, _ = idx
    return 2 * marks, 2 * ends + 1, 2 * gpu + 1


def step_ends_of(g: JobGraph, start: np.ndarray, end: np.ndarray, gpu_end: np.ndarray) -> Table:
    """:func:`step_ends_table` from the times of the :func:`step_points` alone."""
    return _ends_table(g, _step_index(g), start, end, gpu_end)


def _ends_table(g: JobGraph, idx: tuple, start: np.ndarray, end: np.ndarray, gpu_end: np.ndarray) -> Table:
    marks, _, gpu, cut, row = idx
    end = end.astype(np.float64)
    if len(gpu):
        last = np.full(len(marks), np.nan)
        last[row] = np.maximum.reduceat(gpu_end, cut)
        end = np.fmax(end, last)
    rank, step = g.node_rank[marks].astype(np.int64), g.node_step[marks].astype(np.int64)  # (the graph's: int32)
    return Table({"rank": rank, "step": step, "start": start, "end": end})


def step_ends(g: JobGraph, t: np.ndarray) -> pd.DataFrame:
    """:func:`step_ends_table` as a pandas frame."""
    import pandas as pd

    tab = step_ends_table(g, t)
    return tab.to_pandas() if len(tab) else pd.DataFrame({c: [] for c in ("rank", "step", "start", "end")})


def _step_index(g: JobGraph):
    """The nodes :func:`step_ends` reads, whatever the times (kept on the graph): each step's start and end marks,
    the GPU operations of the steps grouped by step (``gpu``, cut at ``cut``) and each group's step (``row``);
    None when the marks do not pair up one to one (then the steps are grouped by label)."""
    if "steps" in g.memo:
        return g.memo["steps"]
    nt, rk, st = g.node_type, g.node_rank, g.node_step
    marks = np.flatnonzero(nt == NodeType.STEP_START)
    ends = np.flatnonzero(nt == NodeType.STEP_END)
    # (keys in int64: the graph's ranks and steps may be int32, their products not)
    span = int(st.max()) + 2 if len(st) else 1
    key = rk[marks].astype(np.int64) * span + st[marks] if len(marks) else np.zeros(0, np.int64)
    paired = (
        len(marks)
        and len(marks) == len(ends)
        and np.array_equal(rk[marks], rk[ends])
        and np.array_equal(st[marks], st[ends])
        and len(distinct(key)) == len(key)
        and (st[marks] >= 0).all()
    )
    out = None
    if paired:
        gpu = np.flatnonzero((nt == NodeType.GPU) & (st >= 0))
        gkey = rk[gpu].astype(np.int64) * span + st[gpu]
        srt = np.argsort(key, kind="stable")
        at = np.minimum(np.searchsorted(key[srt], gkey), len(key) - 1)
        hit = key[srt][at] == gkey
        gpu, grow = gpu[hit], srt[at[hit]]
        o = np.argsort(grow, kind="stable")
        gpu, grow = gpu[o], grow[o]
        cut = np.flatnonzero(np.r_[True, grow[1:] != grow[:-1]]) if len(grow) else np.zeros(0, dtype=np.int64)
        out = (marks, ends, gpu, cut, grow[cut])
    g.memo["steps"] = out
    return out


def _step_ends_grouped(g: JobGraph, t: np.ndarray) -> Table:
    nt, rk, st = g.node_type, g.node_rank.astype(np.int64), g.node_step.astype(np.int64)  # (the graph's: int32)
    marks = np.flatnonzero(nt == NodeType.STEP_START)
    ends = np.flatnonzero(nt == NodeType.STEP_END)
    if not len(marks):
        work = np.flatnonzero((nt == NodeType.CALL) | (nt == NodeType.GPU))
        if not len(work):
            return Table({"rank": rk[:0], "step": np.zeros(0, np.int64), "start": t[:0], "end": t[:0]})
        ranks, at = np.unique(rk[work], return_inverse=True)  # each rank's earliest start and latest end, NaN skipped
        start, end = np.full(len(ranks), np.nan), np.full(len(ranks), np.nan)
        np.fmin.at(start, at, t[2 * work])
        np.fmax.at(end, at, t[2 * work + 1])
        return Table({"rank": ranks, "step": np.full(len(ranks), -1, np.int64), "start": start, "end": end})
    import pandas as pd  # (marks that do not pair up one to one: a damaged trace, aligned by label)

    out = pd.DataFrame({"rank": rk[marks], "step": st[marks], "start": t[2 * marks]}).set_index(["rank", "step"])
    out["end"] = pd.Series(t[2 * ends + 1], index=pd.MultiIndex.from_arrays([rk[ends], st[ends]]))
    gpu = np.flatnonzero((nt == NodeType.GPU) & (st >= 0))
    if len(gpu):
        last = pd.Series(t[2 * gpu + 1]).groupby([rk[gpu], st[gpu]]).max()
        last = last.reindex(out.index)
        out["end"] = np.fmax(out["end"].to_numpy(), last.to_numpy())
    return Table.of(out.reset_index())


def job_step_table(ends) -> Table:
    """Job step times from :func:`step_ends_table` (a table or frame): ``step, start, end, time`` (ns) and
    ``slowest`` (the rank whose step ended last)."""
    ends = Table.of(ends)
    if not len(ends):
        z = np.zeros(0)
        return Table({"step": np.zeros(0, np.int64), "start": z, "end": z, "time": z, "slowest": np.zeros(0, np.int64)})
    step, rank = ends["step"], ends["rank"]
    start, end = ends["start"], ends["end"]
    # the slowest rank of each step: the latest end (NaN last), the lowest rank among ties, then the row order
    last = np.lexsort((rank, -end, step))
    last = last[np.r_[True, step[last][1:] != step[last][:-1]]]
    # each step's earliest start and latest end (NaN skipped), steps ascending
    by_step = np.argsort(step, kind="stable")
    cut = np.flatnonzero(np.r_[True, step[by_step][1:] != step[by_step][:-1]])
    j_start, j_end = np.fmin.reduceat(start[by_step], cut), np.fmax.reduceat(end[by_step], cut)
    prev = np.r_[np.nan, j_end[:-1]]
    with np.errstate(invalid="ignore"):  # (inf - inf is NaN, as in a frame)
        time = j_end - np.where(~np.isnan(prev) & (prev > j_start), prev, j_start)
    return Table({"step": step[by_step[cut]], "start": j_start, "end": j_end, "time": time, "slowest": rank[last]})


def step_table(ends) -> pd.DataFrame:
    """:func:`job_step_table` as a pandas frame."""
    import pandas as pd

    if not len(ends):
        return pd.DataFrame({"step": [], "start": [], "end": [], "time": [], "slowest": []})
    return job_step_table(ends).to_pandas()


def _rank_times(ends: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each rank's step times (``end`` less the later of its start and its previous step's end): ``rank, step,
    time``, by rank and step."""
    rank, step = ends["rank"], ends["step"]
    o = np.lexsort((step, rank))
    rank, step, start, end = rank[o], step[o], ends["start"][o], ends["end"][o]
    prev = np.r_[np.nan, end[:-1]] if len(o) else end
    if len(o):
        prev[1:][rank[1:] != rank[:-1]] = np.nan
    with np.errstate(invalid="ignore"):
        t = end - np.where(~np.isnan(prev) & (prev > start), prev, start)
    return rank, step, t


def _aligned(keys: tuple, to: tuple, values: np.ndarray) -> np.ndarray:
    """``values`` (by the (rank, step) pairs ``keys``) at the pairs ``to``; NaN where a pair is missing."""
    if len(keys[0]) == len(to[0]) and all(np.array_equal(a, b) for a, b in zip(keys, to)):
        return values
    at = {(int(r), int(s)): i for i, (r, s) in enumerate(zip(*keys))}
    out = np.full(len(to[0]), np.nan)
    for j, (r, s) in enumerate(zip(*to)):
        i = at.get((int(r), int(s)))
        if i is not None:
            out[j] = values[i]
    return out


def replay_step_tables(m_ends, r_ends) -> tuple[Table, Table]:
    """:class:`Replay`'s ``step_tab`` and ``rank_tab`` from the measured and replayed :func:`step_ends_table`
    (whichever replay gave them: the job graph's, or the scale-out replay's at collective granularity)."""
    m_ends, r_ends = Table.of(m_ends), Table.of(r_ends)
    m, r = job_step_table(m_ends), job_step_table(r_ends)
    measured, replayed = m["time"] / 1e6, r["time"] / 1e6
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.where(measured > 0, 100.0 * (replayed - measured) / measured, 0.0)
    steps = Table(
        {
            "step": m["step"].astype(np.int64),
            "measured_ms": measured,
            "replayed_ms": replayed,
            "error_pct": error,
            "slowest_rank": m["slowest"].astype(np.int64),
        }
    )
    mr, ms, mt = _rank_times(m_ends)
    rr, rs, rt = _rank_times(r_ends)
    rank_steps = Table(
        {
            "rank": mr.astype(np.int64),
            "step": ms.astype(np.int64),
            "measured_ms": mt / 1e6,
            "replayed_ms": _aligned((rr, rs), (mr, ms), rt) / 1e6,
        }
    )
    return steps, rank_steps


def replay_tables(m_ends, r_ends) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`replay_step_tables` as pandas frames."""
    steps, rank_steps = replay_step_tables(m_ends, r_ends)
    return steps.to_pandas(), rank_steps.to_pandas()
