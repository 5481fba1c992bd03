"""What to fix first in the whole job, and which rank costs the job most: the one analysis behind ``advise``,
``stragglers``, the summary and the report.

``job_advice(job)`` builds the job graph, replays it, tries every fix of
:mod:`holotrace.analysis.critical_path.job_what_if` and ranks them by the job step time they save (mean over the
analysed steps). ``costliest_rank(job)`` answers "which rank costs this job most, and why" from the same replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from holotrace.analysis.critical_path import job_what_if as jw
from holotrace.analysis.critical_path.job_graph import (
    JobGraph,
    NodeType,
    build_job_graph,
)
from holotrace.analysis.critical_path.replay import Replay, shared_base
from holotrace.analysis.critical_path.straggler_fix import waits_of
from holotrace.errors import AnalysisError

__all__ = [
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

LONGEST_VS_LAST = (
    "'Longest step' is the rank whose own step takes longest; 'arrives last' is the rank the others "
    "wait for in collectives: a rank can have the longest step only because it waits for a late one."
)


@dataclass
class CostliestRank:
    """The rank whose fix saves the job most, why (one sentence, evidence named), and the two ranks the
    question is often confused with."""

    rank: int | None
    why: str
    saving_ms: float = 0.0
    arrives_last: int | None = None
    longest_step: int | None = None

    def as_dict(self) -> dict:
        return {"rank": self.rank, "why": self.why}


@dataclass
class Advice:
    """``fixes``: ranked, one row per fix (``fix, rank, target, step, saving_ms, saving_pct, predicted_step_ms,
    evidence``; ``step`` None when averaged over several steps); ``per_step``: every fix on every step; ``replay``:
    measured and replayed job step times; ``costliest``; ``issues``: what the graph could not match."""

    fixes: pd.DataFrame
    per_step: pd.DataFrame
    replay: pd.DataFrame
    costliest: CostliestRank
    issues: list = field(default_factory=list)
    graph: JobGraph | None = field(default=None, repr=False)
    base: Replay | None = field(default=None, repr=False)


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
) -> Advice:
    """Every fix (or ``only`` these) tried on the replay of the whole job, ranked by the mean job step time it
    saves (``ranks``: fixes job-wide or on those ranks; ``steps``: savings over those steps only).

    ``replay``: ``"graph"`` replays the job graph of every rank; ``"segments"`` replays the job at collective
    granularity from each rank's segments (:mod:`holotrace.analysis.critical_path.segment_replay`: what a map over
    ranks does, here in this process).

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
    info = jw.node_info(g)
    needed = set(only or jw.FIXES) | {x for c in combine for x in c}
    cands = jw.candidates(g, base, info, opts, only=sorted(needed))
    combos = [list(c) for c in combine]
    ref, per = jw.evaluate(g, base, cands, combine=combos)
    m = np.flatnonzero((g.node_coll >= 0) & (g.node_type == NodeType.GPU))
    names = lambda: [g.view.strings[int(g.view[int(r)]["name"][row])] for r, row in zip(g.node_rank[m], g.node_row[m])]
    facts = JobFacts(
        list(g.ranks()),
        g.node_coll[m],
        g.node_rank[m],
        g.point_time[2 * m],
        names,
    )
    return _finish(facts, ref.steps, ref.rank_steps, per, ranks, steps, list(g.issues), g, ref)


@dataclass
class JobFacts:
    """What the costliest-rank sentence reads of a job, whichever replay made it: the ranks, and per collective
    member its instance, rank, measured start (on the job's common clock) and kernel name (``names()``, read only
    when a sentence needs one)."""

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
    from holotrace.analysis.critical_path.replay import replay_tables, step_table
    from holotrace.analysis.critical_path.segment_replay import plan_job, replay_job

    plan = plan_job(phase1(), options=options, only=only, combine=combine)
    results = phase2(plan.plans)
    plan.plans = []  # sent: what is left of them is in the results
    rep = replay_job(plan, results)
    steps_df, rank_steps = replay_tables(rep.measured, rep.base)
    measured = steps_df.set_index("step")["measured_ms"]
    replayed = steps_df.set_index("step")["replayed_ms"]
    rows = []
    for (fix, rank, target), (ends, ev) in rep.tries.items():
        tab = step_table(ends)
        t = pd.Series(tab["time"].to_numpy() / 1e6, index=tab["step"].astype(np.int64))
        rows += jw.saving_rows(fix, rank, target, ev, t, measured, replayed)
    per = pd.DataFrame(rows, columns=jw.SAVING_COLUMNS)
    mem = plan.members
    jf = JobFacts(
        list(plan.ranks),
        mem["instance"].to_numpy(),
        mem["rank"].to_numpy(),
        mem["start"].to_numpy(),
        lambda: mem["name"].tolist(),
    )
    return _finish(jf, steps_df, rank_steps, per, ranks, steps, list(plan.issues))


def _finish(facts: JobFacts, rep, rank_steps, per, ranks, steps, issues, g=None, ref=None) -> Advice:
    """The advice from the replay's step tables and every fix's savings per step, whichever replay made them."""
    if steps is not None:
        wanted = [int(s) for s in steps]
        missing = sorted(set(wanted) - set(rep["step"].tolist()))
        if missing:
            have = rep["step"].tolist()
            raise AnalysisError(
                f"step(s) {missing} not in the job",
                fix=f"pass --step with one of {have}" if have and have != [-1] else "leave --step out: no ProfilerStep",
            )
        rep = rep[rep["step"].isin(wanted)].reset_index(drop=True)
        per = per[per["step"].isin(wanted)].reset_index(drop=True)
    costliest = _costliest(facts, rank_steps, per, rep)
    shown = per if ranks is None else per[per["rank"].isna() | per["rank"].isin(list(ranks))]
    fixes = _rank_fixes(shown, len(rep))
    replay_rows = rep[["step", "measured_ms", "replayed_ms", "error_pct"]].reset_index(drop=True)
    return Advice(fixes, per, replay_rows, costliest, issues, g, ref)


def _rank_fixes(per: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    cols = ["fix", "rank", "target", "step", "saving_ms", "saving_pct", "predicted_step_ms", "evidence"]
    if per.empty:
        return pd.DataFrame({c: [] for c in cols})
    key = ["fix", "rank", "target"]
    p = per.assign(
        rank=per["rank"].astype(object).where(per["rank"].notna(), None),
        target=per["target"].where(per["target"].notna(), ""),
    )
    g = p.groupby(key, sort=False, dropna=False)
    agg = g.agg(
        saving_ms=("saving_ms", "mean"),
        measured=("measured_ms", "mean"),
        step=("step", "first"),
        evidence=("evidence", "first"),
    ).reset_index()
    agg["saving_pct"] = np.where(agg["measured"] > 0, 100.0 * agg["saving_ms"] / agg["measured"], 0.0)
    agg["predicted_step_ms"] = agg["measured"] - agg["saving_ms"]
    if n_steps != 1:
        agg["step"] = None
    agg["target"] = agg["target"].astype(object).where(agg["target"] != "", None)
    agg["rank"] = pd.Series([None if r is None or pd.isna(r) else int(r) for r in agg["rank"]], dtype=object)
    # one straggler row: the rank that saves most
    strag = agg[agg["fix"] == "straggler"].sort_values("saving_ms", ascending=False, kind="stable")
    agg = agg.drop(index=strag.index[1:])
    waste_first = ~agg["fix"].isin(SPEEDUPS) & (agg["saving_pct"] >= WASTE_FIRST_PCT)
    agg = agg.assign(_tier=np.where(waste_first, 0, 1))
    agg = agg.sort_values(
        ["_tier", "saving_ms", "fix"], ascending=[True, False, True], kind="stable", ignore_index=True
    )
    return agg[cols]


def _costliest(facts: JobFacts, rank_steps: pd.DataFrame, per: pd.DataFrame, rep: pd.DataFrame) -> CostliestRank:
    ranks = facts.ranks
    if not ranks:
        return CostliestRank(None, "no rank has runtime calls or GPU work to compare")
    rs = rank_steps[rank_steps["step"].isin(rep["step"])]
    mean_step = rs.groupby("rank")["measured_ms"].mean()
    longest = int(mean_step.sort_values(ascending=False, kind="stable").index[0]) if len(mean_step) else ranks[0]
    if len(ranks) == 1:
        return CostliestRank(ranks[0], f"rank {ranks[0]} is the only rank", 0.0, None, ranks[0])
    n = max(len(rep), 1)
    caused = waits_of(facts.inst, facts.rank, facts.start)
    last = (
        int(caused.sort_values(ascending=False, kind="stable").index[0]) if len(caused) and caused.max() > 0 else None
    )
    strag = (
        per[per["fix"] == "straggler"].groupby("rank")["saving_ms"].mean().sort_values(ascending=False, kind="stable")
    )
    step_ms = float(rep["measured_ms"].mean()) if len(rep) else 0.0
    if len(strag) and strag.iloc[0] > 0.01 * step_ms:
        r = int(strag.index[0])
        ev = per[(per["fix"] == "straggler") & (per["rank"] == r)]["evidence"].iloc[0]
        coll = _worst_collective(facts, r)
        waited = float(caused.get(r, 0.0)) / 1e6 / n
        if r == last:
            why = (
                f"rank {r} arrives last at the collectives ({coll}): the other ranks wait {waited:.2f} ms per step "
                f"in all for it, because its {ev[1]}"
            )
        else:
            why = f"rank {r}: its {ev[1]}"
        if len(ev) > 2:
            why += f" (most of it in {ev[2]})"
        why += f"; bringing it to the median saves {strag.iloc[0]:.2f} ms per step."
        if longest != r:
            why += f" Rank {longest} has the longest step because it waits for rank {r}. " + LONGEST_VS_LAST
        return CostliestRank(r, why, float(strag.iloc[0]), last, longest)
    why = f"rank {longest} has the longest step ({mean_step[longest]:.2f} ms per step); "
    if len(strag) and strag.iloc[0] > 0:
        why += (
            f"bringing any rank's compute to the median saves at most {strag.iloc[0]:.2f} ms per step (rank "
            f"{int(strag.index[0])}), under 1% of the job step."
        )
    else:
        why += "no rank's compute, brought to the median, shortens the job's step."
    if last is not None and last != longest:
        why += f" Rank {last} arrives last at collectives. " + LONGEST_VS_LAST
    return CostliestRank(longest, why, 0.0, last, longest)


def _worst_collective(facts: JobFacts, r: int) -> str:
    """The collective kernel (full name) at which the others waited longest for rank ``r``."""
    df = pd.DataFrame({"inst": facts.inst, "rank": facts.rank, "start": facts.start, "at": np.arange(len(facts.inst))})
    arrive = df.groupby("inst")["start"].transform("max")
    df["wait"] = arrive - df["start"]
    lastr = df.sort_values(["inst", "start"], ascending=[True, False], kind="stable").groupby("inst").head(1)
    mine = lastr[lastr["rank"] == r]
    if mine.empty:
        return "none"
    w = df.groupby("inst")["wait"].sum().reindex(mine["inst"])
    return str(facts.names()[int(mine.set_index("inst").loc[w.idxmax(), "at"])])


def costliest_rank(source, *, replay: str = "graph") -> CostliestRank:
    """Which rank costs the job most, and why: the rank whose compute brought to the median saves the job most
    (:func:`job_advice` with the straggler fix alone), else the rank with the longest step."""
    return job_advice(source, only=("straggler",), replay=replay).costliest
