"""The job's critical path: per step, the chain of edges that decides when the job's step ends, across ranks.

Walked back on the replay from the point that ends the job's step (the slowest rank's step end): at each point the
input that gives its replayed time (its chain predecessor or a cross edge: launch, stream wait, host sync,
collective arrival or transfer), until the step's start. Consecutive segments of one rank and kind are merged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path.job_graph import (
    EDGE_KIND_NAMES,
    EdgeKind,
    JobGraph,
    NodeType,
)
from holotrace.analysis.critical_path.replay import Replay
from holotrace.analysis.critical_path.step_times import job_step_table, step_ends_table

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["job_critical_path", "job_path_hops", "path_summary"]


def _end_point(g: JobGraph, t: np.ndarray, rank: int, step: int) -> int:
    """The point that ends ``rank``'s step: its ProfilerStep end or its last GPU operation of the step."""
    nt, rk, st = g.node_type, g.node_rank, g.node_step
    cand = np.flatnonzero(
        (rk == rank) & (((nt == NodeType.STEP_END) & (st == step)) | ((nt == NodeType.GPU) & (st == step)))
    )
    if not len(cand):
        cand = np.flatnonzero((rk == rank) & ((nt == NodeType.CALL) | (nt == NodeType.GPU)))
    ends = 2 * cand + 1
    return int(ends[np.argmax(t[ends])])


def _walk(rep: Replay) -> list:
    """``(step, source point, destination point, edge kind, step start)`` of every path edge, walked back from the
    end of each job step (see the module docstring)."""
    g, t, d = rep.graph, rep.times, rep.delays
    job = job_step_table(step_ends_table(g, t))
    if not len(job):
        return []
    pos_of = np.empty(len(g.chain_order), dtype=np.int64)
    pos_of[g.chain_order] = np.arange(len(g.chain_order))
    keep = np.flatnonzero(d.keep)
    srt = keep[np.argsort(g.dst[keep], kind="stable")]
    dsts = g.dst[srt]
    rows = []
    for s, end_t, time, slow in zip(*(job[c].tolist() for c in ("step", "end", "time", "slowest"))):
        lo = end_t - time
        p = _end_point(g, t, int(slow), int(s))
        for _ in range(len(g.point_time)):
            if t[p] <= lo + 0.5:
                break
            pos = pos_of[p]
            best, src, kind = -np.inf, -1, -1
            if not g.chain_first[pos]:
                best, src, kind = (
                    t[g.chain_order[pos - 1]] + d.chain[pos],
                    int(g.chain_order[pos - 1]),
                    int(g.chain_kind[pos]),
                )
            a, b = np.searchsorted(dsts, p), np.searchsorted(dsts, p, side="right")
            for e in srt[a:b]:
                val = t[g.src[e]] + d.cross[e]
                if val > best + 0.5:
                    best, src, kind = val, int(g.src[e]), int(g.kind[e])
            if src < 0:
                break
            rows.append((int(s), src, int(p), kind, lo))
            p = src
    return rows[::-1]


def job_critical_path(rep: Replay) -> pd.DataFrame:
    """One row per path segment, in time order per step: ``step, rank, kind, name, start_ms, dur_ms`` (times from
    the job's origin on the replay, which is the measured time when unmodified; ``name`` the event the segment ends
    in; ``rank`` -1 for a collective's arrival point)."""
    import pandas as pd

    g, t = rep.graph, rep.times
    cols = ["step", "rank", "kind", "name", "start_ms", "dur_ms"]
    raw = _walk(rep)
    if not raw:
        return pd.DataFrame({c: [] for c in cols})
    st, src, dst, kind, lo = (np.array(x) for x in zip(*raw))
    start = np.maximum(t[src], lo)
    df = pd.DataFrame(
        {
            "step": st,
            "rank": g.node_rank[dst // 2].astype(np.int64),
            "kind": kind,
            "node": dst // 2,
            "start": start,
            "dur": t[dst] - start,
        }
    )
    df = df[df["dur"] > 0]
    df = df.sort_values(["step", "start"], kind="stable", ignore_index=True)
    names = np.full(len(df), "", dtype=object)
    for r in sorted(set(df["rank"].tolist()) - {-1}):
        m = (df["rank"] == r).to_numpy()
        nodes = df["node"].to_numpy()[m]
        ids = g.view[r]["name"][g.node_row[nodes]]
        names[m] = g.view.names(ids)
    names[(df["rank"] == -1).to_numpy()] = "collective arrival"
    out = pd.DataFrame(
        {
            "step": df["step"],
            "rank": df["rank"],
            "kind": EDGE_KIND_NAMES[df["kind"].to_numpy()],
            "name": names,
            "start_ms": df["start"] / 1e6,
            "dur_ms": df["dur"] / 1e6,
        }
    )
    # merge consecutive segments of one rank, kind and name
    key = (out[["step", "rank", "kind", "name"]] != out[["step", "rank", "kind", "name"]].shift()).any(axis=1).cumsum()
    merged = out.groupby(key, sort=False).agg(
        step=("step", "first"),
        rank=("rank", "first"),
        kind=("kind", "first"),
        name=("name", "first"),
        start_ms=("start_ms", "first"),
        dur_ms=("dur_ms", "sum"),
    )
    return merged.reset_index(drop=True)[cols]


def job_path_hops(rep: Replay) -> pd.DataFrame:
    """The path's hops from one track to another (a launch, a stream wait, a host sync, a collective's last arrival
    to a member's end), for flow arrows: ``step, kind, from_rank, from_row, from_end, to_rank, to_row, to_end``
    (rows of the ranks' model columns; ``*_end``: the hop leaves from / lands on the event's end, else its start)."""
    import pandas as pd

    g = rep.graph
    cols = ["step", "kind", "from_rank", "from_row", "from_end", "to_rank", "to_row", "to_end"]
    raw = _walk(rep)
    hops = []
    cross = {int(EdgeKind.LAUNCH), int(EdgeKind.STREAM), int(EdgeKind.SYNC)}
    for i, (s, src, dst, kind, _) in enumerate(raw):
        if kind == int(EdgeKind.XFER) and i and raw[i - 1][3] == int(EdgeKind.ARRIVE):
            src = raw[i - 1][1]  # from the last member's start, through the arrival point
        elif kind not in cross:
            continue
        a, b = src // 2, dst // 2
        if g.node_rank[a] < 0 or g.node_rank[b] < 0 or (a == b):
            continue
        hops.append(
            (
                s,
                EDGE_KIND_NAMES[kind],
                int(g.node_rank[a]),
                int(g.node_row[a]),
                bool(src % 2),
                int(g.node_rank[b]),
                int(g.node_row[b]),
                bool(dst % 2),
            )
        )
    df = pd.DataFrame(hops, columns=cols).sort_values("step", kind="stable", ignore_index=True)
    for side in ("from", "to"):  # view rows -> model rows
        for r in sorted(set(df[f"{side}_rank"].tolist())):
            m = (df[f"{side}_rank"] == r).to_numpy()
            df.loc[m, f"{side}_row"] = g.view[r]["row"][df.loc[m, f"{side}_row"].to_numpy()]
    return df


def path_summary(path: pd.DataFrame) -> pd.DataFrame:
    """Time on the path per step, rank and edge kind (ms), longest first within a step."""
    import pandas as pd

    if path.empty:
        return pd.DataFrame({"step": [], "rank": [], "kind": [], "ms": []})
    s = path.groupby(["step", "rank", "kind"], sort=False)["dur_ms"].sum().rename("ms").reset_index()
    return s.sort_values(["step", "ms"], ascending=[True, False], kind="stable", ignore_index=True)
