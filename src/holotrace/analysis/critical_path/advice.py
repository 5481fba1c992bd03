"""What to fix first in the whole job, and which rank costs the job most: the one analysis behind ``advise``,
``stragglers``, the summary and the report.

``job_advice(job)`` builds the job graph, replays it, tries every fix of
:mod:`holotrace.analysis.critical_path.job_what_if` and ranks them by the job step time they save (mean over the
analysed steps). ``costliest_rank(job)`` answers "which rank costs this job most, and why" from the same replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path import job_what_if as jw
from holotrace.analysis.critical_path.costliest import LONGEST_VS_LAST, CostliestRank, one_rank, only_rank
from holotrace.analysis.critical_path.job_graph import (
    JobGraph,
    NodeType,
    build_job_graph,
)
from holotrace.analysis.critical_path.replay import Replay, shared_base
from holotrace.analysis.critical_path.straggler_fix import rank_waits
from holotrace.analysis.grouped import group_mean, group_sum
from holotrace.errors import AnalysisError
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GRAPH_WHAT_IFS_READ",
    "LONGEST_VS_LAST",
    "REPLAYS",
    "Advice",
    "CostliestRank",
    "JobFacts",
    "costliest_rank",
    "job_advice",
    "segment_advice",
]

SPEEDUPS = ("kernel", "cpu_op")  # fixes that assume work can be made faster, not waste removed
WASTE_FIRST_PCT = 5.0  # a waste fix saving at least this % of the step ranks before every speed-up
#: the view columns the what-ifs and the sentences read once the job graph is built (a command that sheds the
#: view's other columns meanwhile, :meth:`~holotrace.model.view.JobView.shed`, keeps these; any other is made again)
GRAPH_WHAT_IFS_READ = ("name", "kernel_type")


@dataclass
class Advice:
    """``fix_table``: ranked, one row per fix (``fix, rank, target, step, saving_ms, saving_pct, predicted_step_ms,
    evidence``; ``step`` None when averaged over several steps); ``step_savings``: every fix on every step;
    ``replay_table``: measured and replayed job step times; ``costliest``; ``issues``: what the graph could not
    match. The three tables also as pandas frames: ``fixes``, ``per_step``, ``replay``."""

    fix_table: Table
    step_savings: Table
    replay_table: Table
    costliest: CostliestRank
    issues: list = field(default_factory=list)
    graph: JobGraph | None = field(default=None, repr=False)
    base: Replay | None = field(default=None, repr=False)

    @property
    def fixes(self) -> pd.DataFrame:
        import pandas as pd

        df = self.fix_table.to_pandas()
        if len(df):  # (a fix without a target: None, never a missing text)
            df["target"] = pd.Series(self.fix_table["target"], dtype=object)
        return df

    @property
    def per_step(self) -> pd.DataFrame:
        return self.step_savings.to_pandas()

    @property
    def replay(self) -> pd.DataFrame:
        return self.replay_table.to_pandas()


def _fix_for(name: str) -> str:
    aliases = {
        "comm-overlap": "communication",
        "comm": "communication",
        "launch": "launch_overhead",
        "sync": "host_sync",
        "host-sync": "host_sync",
        "data": "data_loading",
        "data-loading": "data_loading",
        "gaps": "kernel_gaps",
        "kernel-gaps": "kernel_gaps",
        "cpu": "cpu_op",
        "launch-overhead": "launch_overhead",
    }
    fix = aliases.get(name.strip(), name.strip())
    if fix not in jw.FIXES:
        raise AnalysisError(
            f"unknown fix {name.strip()!r} in --what-if",
            fix=f"name fixes among {', '.join(jw.FIXES)} (or comm-overlap), e.g. 'straggler,comm-overlap'",
        )
    return fix


def parse_combination(text: str | None) -> list[list[str]]:
    """``'straggler,comm-overlap;host_sync,kernel_gaps'`` → ``[['straggler', 'communication'], [...]]``; an
    unknown name raises :class:`~holotrace.errors.AnalysisError`."""
    if not text:
        return []
    return [[_fix_for(x) for x in part.split(",") if x.strip()] for part in text.split(";") if part.strip()]


REPLAYS = ("graph", "segments")


def job_advice(
    source,
    *,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    options: jw.WhatIfOptions | None = None,
    combine: Sequence[Sequence[str]] = (),
    only: Sequence[str] | None = None,
    replay: str = "graph",
    keep_times: bool = True,
) -> Advice:
    """Every fix (or ``only`` these) tried on the replay of the whole job, ranked by the mean job step time it
    saves (``ranks``: fixes job-wide or on those ranks; ``steps``: savings over those steps only).

    ``replay``: ``"graph"`` replays the job graph of every rank; ``"segments"`` replays the job at collective
    granularity from each rank's segments (:mod:`holotrace.analysis.critical_path.segment_replay`: what a map over
    ranks does, here in this process). ``keep_times`` False: the graph's unmodified replay lets go of its point
    times once its step tables are made (made again if read, e.g. by the job's critical path): for a caller that
    reads the steps alone.

    Ranking: fixes that remove measured waste (a straggler, exposed communication, launch overhead, host
    synchronisation, data loading, kernel gaps) by their saving; a speed-up that assumes a kernel or CPU operator
    can be made ``speedup`` times faster ranks after every waste fix that saves at least ``WASTE_FIRST_PCT`` % of
    the step, and by its saving among the rest."""
    opts = options or jw.WhatIfOptions()
    if replay == "segments":
        from holotrace.analysis.critical_path.segments import rank_collectives, rank_segments
        from holotrace.model.classify import NATIVE
        from holotrace.model.view import job_view

        view = job_view(source, NATIVE)
        return segment_advice(
            lambda: [rank_collectives(view, r) for r in view.ranks],
            lambda plans: [rank_segments(view, p) for p in plans],
            ranks=ranks,
            steps=steps,
            options=opts,
            combine=combine,
            only=only,
        )
    if replay != "graph":
        raise AnalysisError(f"unknown replay {replay!r}", fix=f"use one of {', '.join(REPLAYS)}")
    g = build_job_graph(source)
    base = shared_base(g)
    needed = set(only or jw.FIXES) | {x for c in combine for x in c}
    # (each replayed while the next is made; the nodes' names and kinds read as the unmodified replay starts)
    cands = jw.iter_candidates(g, base, None, opts, only=sorted(needed))
    combos = [list(c) for c in combine]
    ref, per = jw.evaluate(g, base, cands, combine=combos, keep_times=keep_times)
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    facts = JobFacts(
        list(g.ranks()), g.node_coll[m], g.node_rank[m].astype(np.int64), g.point_time[2 * m], lambda: _Names(g, m)
    )
    return _finish(facts, ref.step_tab, ref.rank_tab, per, ranks, steps, list(g.issues), g, ref)


class _Names:
    """The kernel names of graph nodes, read one at a time (a sentence names one or two)."""

    def __init__(self, g: JobGraph, nodes: np.ndarray):
        self.g, self.nodes = g, nodes

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, i: int) -> str:
        n = int(self.nodes[i])
        return self.g.view.strings[int(self.g.view[int(self.g.node_rank[n])]["name"][self.g.node_row[n]])]


@dataclass
class JobFacts:
    """What the costliest-rank sentence reads of a job, whichever replay made it: the ranks, and per collective
    member its instance, rank, measured start (on the job's common clock) and kernel name (``names()``: a sequence,
    read only when a sentence needs one)."""

    ranks: list
    inst: np.ndarray
    rank: np.ndarray
    start: np.ndarray
    names: object


def segment_advice(
    phase1,
    phase2,
    *,
    ranks: Sequence[int] | None = None,
    steps: Sequence[int] | None = None,
    options: jw.WhatIfOptions | None = None,
    combine: Sequence[Sequence[str]] = (),
    only: Sequence[str] | None = None,
) -> Advice:
    """:func:`job_advice` from the ranks' phase 1 (``phase1()``: a :class:`~.segments.RankCollectives` per rank,
    let go once planned) and ``phase2`` (a function of the ranks' :class:`~.segments.SegmentPlan` returning their
    :class:`~.segments.RankSegments`): each run in this process, or mapped over the ranks on any executor."""

    from holotrace.analysis.critical_path.replay import job_step_table, replay_step_tables
    from holotrace.analysis.critical_path.segment_replay import plan_job, replay_job

    plan = plan_job(phase1(), options=options, only=only, combine=combine)
    results = phase2(plan.plans)
    plan.plans = []  # sent: what is left of them is in the results
    rep = replay_job(plan, results)
    steps_tab, rank_steps = replay_step_tables(rep.measured, rep.base)
    ref = steps_tab["step"], steps_tab["measured_ms"], steps_tab["replayed_ms"]
    rows = []
    for (fix, rank, target), (ends, ev) in rep.tries.items():
        tab = job_step_table(ends)
        rows += jw.saving_rows(fix, rank, target, ev, (tab["step"].astype(np.int64), tab["time"] / 1e6), *ref)
    per = Table.from_records(rows, jw.SAVING_COLUMNS)
    mem = plan.members
    jf = JobFacts(
        list(plan.ranks),
        mem["instance"].to_numpy(),
        mem["rank"].to_numpy(),
        mem["start"].to_numpy(),
        lambda: mem["name"].tolist(),
    )
    return _finish(jf, steps_tab, rank_steps, per, ranks, steps, list(plan.issues))


FIX_COLUMNS = ["fix", "rank", "target", "step", "saving_ms", "saving_pct", "predicted_step_ms", "evidence"]


def _finish(facts: JobFacts, rep: Table, rank_steps: Table, per: Table, ranks, steps, issues, g=None, ref=None):
    """The advice from the replay's step tables and every fix's savings per step, whichever replay made them."""
    if steps is not None:
        wanted = [int(s) for s in steps]
        have = rep["step"].tolist()
        missing = sorted(set(wanted) - set(have))
        if missing:
            raise AnalysisError(
                f"step(s) {missing} not in the job",
                fix=f"pass --step with one of {have}" if have and have != [-1] else "leave --step out: no ProfilerStep",
            )
        rep = rep.take(np.isin(rep["step"], wanted))
        per = per.take(np.isin(per["step"], wanted)) if len(per) else per
    costliest = _costliest(facts, rank_steps, per, rep)
    if ranks is None or not len(per):
        shown = per
    else:
        keep = {int(r) for r in ranks}
        shown = per.take(np.array([_missing(x) or x in keep for x in per["rank"].tolist()], dtype=bool))
    fixes = _rank_fixes(shown, len(rep))
    replay_rows = Table({c: rep[c] for c in ("step", "measured_ms", "replayed_ms", "error_pct")})
    return Advice(fixes, per, replay_rows, costliest, issues, g, ref)


def _missing(x) -> bool:
    return x is None or x != x


def _objects(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _descending(x: np.ndarray) -> np.ndarray:
    """Sort codes of ``x`` for a descending stable sort (NaN last), as pandas' multi-column sort makes them."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    u, code = np.unique(x[~nan], return_inverse=True)
    out = np.full(len(x), len(u), dtype=np.int64)
    out[~nan] = len(u) - 1 - code.reshape(-1)
    return out


def _rank_fixes(per: Table, n_steps: int) -> Table:
    """One row per fix (its savings averaged over the steps), the best straggler only, ranked."""
    if not len(per):
        return Table({c: np.empty(0, dtype=object) for c in FIX_COLUMNS})
    # groups of (fix, rank, target) in the order they first appear (a missing rank or target is a key too)
    ranks = [None if _missing(r) else r for r in per["rank"].tolist()]
    targets = ["" if _missing(t) else t for t in per["target"].tolist()]
    codes, keys = {}, []
    at = np.empty(len(per), dtype=np.int64)
    for i, key in enumerate(zip(per["fix"].tolist(), ranks, targets)):
        c = codes.get(key)
        if c is None:
            c = codes[key] = len(keys)
            keys.append((key, i))
        at[i] = c
    n = len(keys)
    first = np.array([i for _, i in keys], dtype=np.int64)
    saving = group_mean(at, per["saving_ms"], n)
    measured = group_mean(at, per["measured_ms"], n)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(measured > 0, 100.0 * saving / measured, 0.0)
    fix = _objects([k[0] for k, _ in keys])
    step = per["step"][first] if n_steps == 1 else _objects([None] * n)
    rank = _objects([None if k[1] is None else int(k[1]) for k, _ in keys])
    target = _objects([k[2] if k[2] != "" else None for k, _ in keys])
    evidence = per["evidence"][first]
    # one straggler row: the rank that saves most
    strag = np.flatnonzero(fix == "straggler")
    keep = np.ones(n, dtype=bool)
    if len(strag) > 1:
        keep[strag[np.argsort(_descending(saving[strag]), kind="stable")[1:]]] = False
    waste_first = ~np.isin(fix, SPEEDUPS) & (pct >= WASTE_FIRST_PCT)
    tier = np.where(waste_first, 0, 1)
    rows = np.flatnonzero(keep)
    _, fix_code = np.unique(fix[rows].astype(str), return_inverse=True)
    order = rows[np.lexsort((fix_code.reshape(-1), _descending(saving[rows]), tier[rows]))]
    return Table(
        {
            "fix": fix[order],
            "rank": rank[order],
            "target": target[order],
            "step": step[order],
            "saving_ms": saving[order],
            "saving_pct": pct[order],
            "predicted_step_ms": (measured - saving)[order],
            "evidence": evidence[order],
        }
    )


def _first_max(keys: np.ndarray, values: np.ndarray):
    """The key of the largest value (the first of equal ones, NaN last), None when there is none."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return None
    return keys[int(np.argsort(_descending(v), kind="stable")[0])]


def _costliest(facts: JobFacts, rank_steps: Table, per: Table, rep: Table) -> CostliestRank:
    ranks = facts.ranks
    if not ranks:
        return CostliestRank(None, "no rank has runtime calls or GPU work to compare")
    rs = rank_steps.take(np.isin(rank_steps["step"], rep["step"]))
    by_rank, at = np.unique(rs["rank"], return_inverse=True)
    mean_step = group_mean(at.reshape(-1), rs["measured_ms"], len(by_rank))
    longest = int(_first_max(by_rank, mean_step)) if len(by_rank) else ranks[0]
    if len(ranks) == 1:
        return only_rank(ranks[0])
    n = max(len(rep), 1)
    c_ranks, caused = rank_waits(facts.inst, facts.rank, facts.start)
    top = _first_max(c_ranks, caused)
    last = int(top) if top is not None and (caused > 0).any() else None
    s_rows = per.take(per["fix"] == "straggler") if len(per) else per
    s_ranks, s_at = (
        np.unique(np.asarray(s_rows["rank"], dtype=np.float64), return_inverse=True)
        if len(s_rows)
        else (
            np.zeros(0),
            np.zeros(0, dtype=np.int64),
        )
    )
    s_mean = group_mean(s_at.reshape(-1), s_rows["saving_ms"], len(s_ranks)) if len(s_rows) else np.zeros(0)
    s_order = np.argsort(_descending(s_mean), kind="stable")
    strag_rank, strag_ms = s_ranks[s_order], s_mean[s_order]
    measured = np.asarray(rep["measured_ms"], dtype=np.float64)
    ok = ~np.isnan(measured)
    step_ms = float(np.where(ok, measured, 0.0).sum() / ok.sum()) if len(rep) else 0.0
    if len(strag_ms) and strag_ms[0] > 0.01 * step_ms:
        r = int(strag_rank[0])
        ev = s_rows["evidence"][int(np.flatnonzero(np.asarray(s_rows["rank"], dtype=np.float64) == r)[0])]
        coll = _worst_collective(facts, r)
        mine = np.flatnonzero(c_ranks == r)
        waited = float(caused[mine[0]] if len(mine) else 0.0) / 1e6 / n
        if r == last:
            why = (
                f"rank {r} arrives last at the collectives ({coll}): the other ranks wait {waited:.2f} ms per step "
                f"in all for it, because its {ev[1]}"
            )
        else:
            why = f"rank {r}: its {ev[1]}"
        if len(ev) > 2:
            why += f" (most of it in {ev[2]})"
        why += f"; bringing it to the median saves {strag_ms[0]:.2f} ms per step."
        if longest != r:
            why += f" Rank {longest} has the longest step because it waits for rank {r}. " + LONGEST_VS_LAST
        return CostliestRank(r, why, float(strag_ms[0]), last, longest)
    why = f"rank {longest} has the longest step ({mean_step[np.flatnonzero(by_rank == longest)[0]]:.2f} ms per step); "
    if len(strag_ms) and strag_ms[0] > 0:
        why += (
            f"bringing any rank's compute to the median saves at most {strag_ms[0]:.2f} ms per step (rank "
            f"{int(strag_rank[0])}), under 1% of the job step."
        )
    else:
        why += "no rank's compute, brought to the median, shortens the job's step."
    if last is not None and last != longest:
        why += f" Rank {last} arrives last at collectives. " + LONGEST_VS_LAST
    return CostliestRank(longest, why, 0.0, last, longest)


def _worst_collective(facts: JobFacts, r: int) -> str:
    """The collective kernel (full name) at which the others waited longest for rank ``r``."""
    inst, rank = np.asarray(facts.inst), np.asarray(facts.rank)
    start = np.asarray(facts.start, dtype=np.float64)
    u, k = np.unique(inst, return_inverse=True)
    k = k.reshape(-1)
    arrive = np.full(len(u), np.nan)
    np.fmax.at(arrive, k, start)  # each instance's last arrival
    wait = arrive[k] - start
    o = np.lexsort((_descending(start), inst))  # per instance, the latest member first (the first of equal ones)
    last = o[np.r_[True, inst[o][1:] != inst[o][:-1]]] if len(o) else o
    mine = last[rank[last] == r]
    if not len(mine):
        return "none"
    w = group_sum(k, wait, len(u))[k[mine]]
    return str(facts.names()[int(mine[int(np.argsort(_descending(w), kind="stable")[0])])])


def costliest_rank(source, *, replay: str = "graph") -> CostliestRank:
    """Which rank costs the job most, and why: the rank whose compute brought to the median saves the job most
    (:func:`job_advice` with the straggler fix alone), else the rank with the longest step. A job of one rank
    with nodes is answered without a replay (:func:`~.costliest.one_rank`): that rank is the answer whatever the
    replay finds."""
    if replay == "graph":
        answer = one_rank(source)
        if answer is not None:
            return answer
    return job_advice(source, only=("straggler",), replay=replay, keep_times=False).costliest  # (steps alone)
