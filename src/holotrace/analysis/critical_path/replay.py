"""Replay of the job graph: every point re-timed as the latest of its incoming edges.

Each edge gets a **delay**. The edge that explains a point's measured time (its latest source, the smallest lag;
the chain edge on ties) keeps its measured lag, so time nothing explains (a thread busy between calls, a stream
idle for no traced reason) stays as measured slack; every other edge gets ``min(lag, floor)``. The unmodified
replay therefore gives back the measured times wherever the measured edges agree with each other (the error left
is where they do not: clocks of two ranks that disagree, operations that overlap on one stream). A what-if changes
delays (:mod:`holotrace.analysis.critical_path.job_what_if`) and replays.

Solving: along a chain ``v[k] = max(x[k], v[k-1] + d[k])`` is a running maximum after subtracting the chain's
cumulative delays, so each pass solves every chain at once for given cross-chain inputs ``x``; passes repeat until
nothing moves (one pass per cross-chain hop of the longest dependency path).

Steps: a rank's step ends when its ``ProfilerStep`` range ends or, if later, when the last GPU operation of the
step ends; a step of the job ends when its slowest rank's step ends. A job step's time is the time from the end
of the job's previous step (the first: from its earliest ``ProfilerStep`` start).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from holotrace.analysis.critical_path.job_graph import JobGraph, NodeType

__all__ = ["Delays", "Replay", "base_delays", "gpu_idle", "replay", "solve", "step_ends", "step_table"]

MAX_PASSES = 100_000


@dataclass
class Delays:
    """What a replay re-times with: one delay per chain position and per cross edge, and which cross edges hold."""

    chain: np.ndarray
    cross: np.ndarray
    keep: np.ndarray

    def copy(self) -> Delays:
        return Delays(self.chain.copy(), self.cross.copy(), self.keep.copy())


def base_delays(g: JobGraph) -> Delays:
    """Delays of the unmodified replay: the binding edge keeps its lag, the others ``min(lag, floor)``."""
    n_pts = len(g.point_time)
    best = np.full(n_pts, np.inf)
    best[g.chain_order] = np.where(g.chain_first, np.inf, g.chain_lag)
    np.minimum.at(best, g.dst, g.lag)
    chain_bind = (~g.chain_first) & (g.chain_lag <= best[g.chain_order])
    chain = np.where(chain_bind, g.chain_lag, np.minimum(g.chain_lag, g.chain_floor))
    chain[g.chain_first] = 0.0
    chain_wins = np.zeros(n_pts, dtype=bool)
    chain_wins[g.chain_order] = chain_bind
    cross_bind = (g.lag <= best[g.dst]) & ~chain_wins[g.dst]
    cross = np.where(cross_bind, g.lag, np.minimum(g.lag, g.floor))
    return Delays(chain, cross, np.ones(len(g.src), dtype=bool))


def solve(g: JobGraph, d: Delays) -> tuple[np.ndarray, int]:
    """Replayed time of every point, and the number of passes it took."""
    n_pts = len(g.point_time)
    order, first = g.chain_order, g.chain_first
    src, dst, w = g.src[d.keep], g.dst[d.keep], d.cross[d.keep]
    srt = np.argsort(dst, kind="stable")
    src, dst, w = src[srt], dst[srt], w[srt]
    cut = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else np.zeros(0, dtype=np.int64)
    targets = dst[cut]
    has_in = np.zeros(n_pts, dtype=bool)
    has_in[targets] = True
    fixed = order[first & ~has_in[order]]
    dd = np.where(first, 0.0, d.chain)
    cs = np.cumsum(dd)
    start_at = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    c_cum = cs - cs[start_at]
    chain = pd.Series(g.chain_id)
    v = np.full(n_pts, -np.inf)
    for passes in range(1, MAX_PASSES + 1):
        x = np.full(n_pts, -np.inf)
        if len(dst):
            x[targets] = np.maximum.reduceat(v[src] + w, cut)
        x[fixed] = g.point_time[fixed]
        run = pd.Series(x[order] - c_cum).groupby(chain.values, sort=False).cummax().to_numpy()
        new = np.empty(n_pts)
        new[order] = c_cum + run
        done = np.array_equal(np.isfinite(new), np.isfinite(v)) and (
            not np.isfinite(new).any() or np.nanmax(np.abs(np.where(np.isfinite(new), new - v, 0.0))) < 0.5)
        v = new
        if done:
            return v, passes
    raise RuntimeError("the job graph's replay did not settle: a dependency cycle gains time")


def step_ends(g: JobGraph, t: np.ndarray) -> pd.DataFrame:
    """Per (rank, step): the step's start (its ``ProfilerStep`` start) and end (the later of its ``ProfilerStep``
    end and its last GPU operation's end), from point times ``t``."""
    nt, rk, st = g.node_type, g.node_rank, g.node_step
    marks = np.flatnonzero(nt == NodeType.STEP_START)
    ends = np.flatnonzero(nt == NodeType.STEP_END)
    if not len(marks):
        return pd.DataFrame({"rank": [], "step": [], "start": [], "end": []})
    out = pd.DataFrame({"rank": rk[marks], "step": st[marks], "start": t[2 * marks]}).set_index(["rank", "step"])
    out["end"] = pd.Series(t[2 * ends + 1], index=pd.MultiIndex.from_arrays([rk[ends], st[ends]]))
    gpu = np.flatnonzero((nt == NodeType.GPU) & (st >= 0))
    if len(gpu):
        last = pd.Series(t[2 * gpu + 1]).groupby([rk[gpu], st[gpu]]).max()
        last = last.reindex(out.index)
        out["end"] = np.fmax(out["end"].to_numpy(), last.to_numpy())
    return out.reset_index()


def step_table(ends: pd.DataFrame) -> pd.DataFrame:
    """Job step times from :func:`step_ends`: ``step, start, end, time`` (ns) and ``slowest`` (the rank whose step
    ended last)."""
    if ends.empty:
        return pd.DataFrame({"step": [], "start": [], "end": [], "time": [], "slowest": []})
    e = ends.sort_values(["step", "end", "rank"], ascending=[True, False, True], kind="stable")
    last = e.groupby("step", sort=True).head(1).set_index("step")
    job = ends.groupby("step", sort=True).agg(start=("start", "min"), end=("end", "max"))
    prev = job["end"].shift(1)
    job["time"] = job["end"] - np.where(prev.notna() & (prev > job["start"]), prev, job["start"])
    job["slowest"] = last["rank"].reindex(job.index).to_numpy()
    return job.reset_index()


@dataclass
class Replay:
    """A replay of the job graph: the point times and the job's steps (measured and replayed, ms)."""

    graph: JobGraph
    delays: Delays
    times: np.ndarray
    passes: int
    steps: pd.DataFrame      # step, measured_ms, replayed_ms, error_pct, slowest_rank
    rank_steps: pd.DataFrame  # rank, step, measured_ms, replayed_ms


def _rank_times(ends: pd.DataFrame) -> pd.Series:
    e = ends.sort_values(["rank", "step"], kind="stable")
    prev = e.groupby("rank")["end"].shift(1)
    t = e["end"] - np.where(prev.notna() & (prev > e["start"]), prev, e["start"])
    return pd.Series(t.to_numpy(), index=pd.MultiIndex.from_frame(e[["rank", "step"]]))


def replay(g: JobGraph, delays: Delays | None = None) -> Replay:
    """Replay ``g`` (unmodified when ``delays`` is None) and compare with the measured steps."""
    d = delays if delays is not None else base_delays(g)
    t, passes = solve(g, d)
    m_ends, r_ends = step_ends(g, g.point_time), step_ends(g, t)
    m, r = step_table(m_ends), step_table(r_ends)
    steps = pd.DataFrame({"step": m["step"].astype(np.int64), "measured_ms": m["time"] / 1e6,
                          "replayed_ms": r["time"].to_numpy() / 1e6})
    steps["error_pct"] = np.where(steps["measured_ms"] > 0,
                                  100.0 * (steps["replayed_ms"] - steps["measured_ms"]) / steps["measured_ms"], 0.0)
    steps["slowest_rank"] = m["slowest"].to_numpy().astype(np.int64) if len(m) else np.zeros(0, np.int64)
    mt, rt = _rank_times(m_ends), _rank_times(r_ends)
    rank_steps = pd.DataFrame({"rank": mt.index.get_level_values(0).astype(np.int64),
                               "step": mt.index.get_level_values(1).astype(np.int64),
                               "measured_ms": mt.to_numpy() / 1e6, "replayed_ms": rt.reindex(mt.index).to_numpy() / 1e6})
    return Replay(g, d, t, passes, steps, rank_steps)


def gpu_idle(g: JobGraph) -> pd.DataFrame:
    """Measured GPU idle time per (rank, step) in ms, within the job's step (:func:`step_table`: from the end of
    the job's previous step to the end of this one): the step's time minus the union of the rank's GPU
    operations inside it, a collective kernel counting from its last member's arrival (its wait is idle)."""
    job = step_table(step_ends(g, g.point_time))
    if job.empty:
        return pd.DataFrame({"rank": [], "step": [], "idle_ms": []})
    hi = job["end"].to_numpy()
    lo = hi - job["time"].to_numpy()
    arrival = np.full(max(int(g.node_coll.max()) + 1, 0) if len(g.node_coll) else 0, -np.inf)
    arr = np.flatnonzero(g.node_type == NodeType.ARRIVAL)
    arrival[g.node_coll[arr]] = g.point_time[2 * arr]
    rows = []
    for r in sorted(set(g.node_rank[g.node_rank >= 0].tolist())):
        gpu = np.flatnonzero((g.node_rank == r) & (g.node_type == NodeType.GPU))
        start = g.point_time[2 * gpu]
        c = g.node_coll[gpu]
        start = np.where(c >= 0, np.maximum(start, arrival[np.maximum(c, 0)]), start)
        busy = _covered(start, g.point_time[2 * gpu + 1], lo, hi)
        rows.append(pd.DataFrame({"rank": r, "step": job["step"].to_numpy(), "idle_ms": (hi - lo - busy) / 1e6}))
    return pd.concat(rows, ignore_index=True)


def _covered(s: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of the union of intervals ``[s, e)`` inside each window ``[lo, hi)``."""
    if not len(s):
        return np.zeros(len(lo))
    o = np.argsort(s, kind="stable")
    s, e = s[o], np.maximum.accumulate(e[o])
    new = np.r_[True, s[1:] > e[:-1]]
    us = s[new]
    ue = np.r_[e[np.flatnonzero(new)[1:] - 1], e[-1:]]
    cum = np.r_[0.0, np.cumsum(ue - us)]

    def upto(x):
        i = np.searchsorted(us, x, side="right")
        j = np.maximum(i - 1, 0)
        return np.where(i > 0, cum[j] + np.clip(np.minimum(x, ue[j]) - us[j], 0, None), 0.0)

    return upto(hi) - upto(lo)
