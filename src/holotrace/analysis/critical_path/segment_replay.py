"""The scale-out replay, in the driver: the job replayed at collective granularity from the ranks' segments
(:mod:`holotrace.analysis.critical_path.segments`), holding no event.

:func:`plan_job` reads every rank's phase 1: it matches the collectives with the one matcher
(:func:`~holotrace.analysis.critical_path.collectives.match_tables`), estimates the clock offsets as the job graph
does, finds each instance's measured arrival (its last member's start), picks the straggler candidates and the
kernels and CPU operators every rank tries, and writes each rank's :class:`SegmentPlan`.

:func:`replay_job` reads every rank's phase 2 and replays each try: a member starts at ``e_src + L`` (the end of
the member its segment hangs off, plus the segment's length; ``L`` itself when it hangs off nothing), an instance
arrives when its last member starts (``A = max s``), a member ends at ``max(s + own, A + transfer)``, a step ends
at the latest of its segments, and the job's step when its slowest rank's does. Instances are replayed in
dependency order, level by level, vectorised over the members of a level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from holotrace.analysis.critical_path import job_what_if as jw
from holotrace.analysis.critical_path.collectives import clock_offsets, match_tables, skew_issue
from holotrace.analysis.critical_path.segments import COMBINED, RankCollectives, RankSegments, SegmentPlan
from holotrace.analysis.critical_path.straggler_fix import pick_stragglers, rank_waits
from holotrace.errors import AnalysisError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["JobPlan", "SegmentReplay", "intern", "plan_job", "replay_job"]

_MATCH_COLUMNS = ["rank", "row", "step", "group", "kind", "occurrence", "instance"]


@dataclass
class JobPlan:
    """The driver's answers to phase 1: the job's collective members (one row per member id: ``rank, row,
    instance, start, name``; ``start`` in ns from the job's origin, offsets applied), the instances' arrivals,
    what could not be matched, the straggler candidates and one :class:`SegmentPlan` per rank."""

    ranks: list
    members: pd.DataFrame
    arrival: np.ndarray
    issues: list
    stragglers: list
    plans: list
    options: jw.WhatIfOptions
    combine: tuple = ()


@dataclass
class SegmentReplay:
    """The replays: measured and unmodified step ends per rank (``rank, step, start, end``), and per try
    (``(fix, rank, target)``) its step ends and evidence."""

    measured: pd.DataFrame
    base: pd.DataFrame
    tries: dict = field(default_factory=dict)  # key -> (ends, evidence)


def _codes(facts: Sequence[RankCollectives]) -> tuple[pd.DataFrame, list]:
    """Every rank's matcher table in one, ``group`` and ``kind`` as codes of one vocabulary (-1: none), and the
    vocabulary."""
    import pandas as pd

    cols = [c for c in (facts[0].kernels if facts else {}) if c not in ("start", "end", "name")]
    d = {c: np.concatenate([f.kernels[c] for f in facts]) for c in cols}
    if not d:
        return pd.DataFrame(), []
    n = len(d["group"])
    codes, vocab = pd.factorize(np.concatenate([d["group"], d["kind"]]), use_na_sentinel=True)
    d["group"], d["kind"] = codes[:n].astype(np.int64), codes[n:].astype(np.int64)
    return pd.DataFrame(d), list(vocab)


def plan_job(
    facts: Sequence[RankCollectives],
    *,
    options: jw.WhatIfOptions | None = None,
    only: Sequence[str] | None = None,
    combine: Sequence[Sequence[str]] = (),
) -> JobPlan:
    """The driver's phase 1 (see the module docstring)."""
    import pandas as pd

    opts = options or jw.WhatIfOptions()
    facts = sorted(facts, key=lambda f: f.rank)
    ranks = [f.rank for f in facts]
    want = set(only or jw.FIXES) | {x for c in combine for x in c}
    table, vocab = _codes(facts)
    match = match_tables([table], set(ranks), lambda c: vocab[int(c)])
    k = match.kernels
    cat = lambda c: np.concatenate([f.kernels[c] for f in facts]) if facts else np.zeros(0)  # noqa: E731
    times = pd.DataFrame({c: cat(c) for c in ("rank", "row", "start", "end", "name")})
    m = k.merge(times, on=["rank", "row"], how="left", sort=False)
    inst, rk = m["instance"].to_numpy(np.int64), m["rank"].to_numpy(np.int64)
    first = {f.rank: f.first_ns for f in facts}
    origin = min(first.values()) if first else 0
    placed = pd.Series({r: first[r] - origin for r in ranks}, dtype=np.int64)  # the fit where it is applied
    end = m["end"].to_numpy(np.float64) + placed.reindex(rk).to_numpy(np.float64)
    offsets, skew = clock_offsets(end, inst, rk, ranks)
    shift = pd.Series({r: first[r] - origin + offsets.get(r, 0) for r in ranks}, dtype=np.int64)
    start = (m["start"].to_numpy(np.int64) + shift.reindex(rk).to_numpy()).astype(np.float64)
    n_inst = match.n_instances
    arrival = np.full(n_inst, -np.inf)
    np.maximum.at(arrival, inst, start)
    members = pd.DataFrame({"rank": rk, "row": m["row"].to_numpy(), "instance": inst, "start": start})
    members["name"] = m["name"].to_numpy(dtype=object)
    issues = list(match.unmatched) + [x for x in [skew_issue(skew)] if x]
    # the straggler candidates, and what every rank's fixes agree on
    stragglers, med = [], None
    compute = {f.rank: f.series("compute") for f in facts if len(f.totals["compute"][1])}
    if "straggler" in want and len(ranks) > 1 and compute:
        per = pd.Series({r: float(c.sum()) for r, c in compute.items()})
        stragglers = pick_stragglers(rank_waits(inst, rk, start), (per.index.to_numpy(), per.to_numpy()))
        host = {f.rank: f.series("host") for f in facts if len(f.totals["host"][1])}
        med_h = pd.DataFrame(host).median(axis=1) if host else pd.Series(dtype=np.float64)
        by_name = pd.DataFrame({f.rank: f.series("kernel_time") for f in facts}).median(axis=1)
        med = (pd.DataFrame(compute).median(axis=1), med_h, by_name)
    if opts.kernel_match is None and opts.kernels is None:
        opts = dataclasses.replace(opts, kernels=_top(facts, "kernel_time", opts.top))
    if opts.cpu_ops is None:
        opts = dataclasses.replace(opts, cpu_ops=_top(facts, "cpu_op_time", opts.top))
    fixes = tuple(f for f in jw.FIXES if f in want and f != "straggler")
    combos = tuple(tuple(c) for c in combine)
    plans = []
    order = np.argsort(rk, kind="stable")
    cut = np.searchsorted(rk[order], ranks + [np.iinfo(np.int64).max])
    for i, r in enumerate(ranks):
        sel = order[cut[i] : cut[i + 1]]
        uniq, local = np.unique(inst[sel], return_inverse=True)
        kr = {c: k[c].to_numpy()[sel] for c in _MATCH_COLUMNS}
        kr["instance"] = local.reshape(-1).astype(np.int64)
        plans.append(
            SegmentPlan(
                r,
                kr,
                sel.astype(np.int64),
                arrival[uniq],
                int(offsets.get(r, 0)),
                skew,
                origin,
                opts,
                fixes,
                med if r in stragglers else None,
                bool(stragglers) and r == stragglers[0],
                combos,
            )
        )
    return JobPlan(ranks, members, arrival, issues, stragglers, plans, opts, combos)


def _top(facts, attr: str, n: int) -> tuple:
    """The ``n`` names holding the most time over every rank (ties: by name)."""
    import pandas as pd

    parts = [f.series(attr) for f in facts if len(f.totals[attr][1])]
    if not parts:
        return ()
    tot = pd.concat(parts).groupby(level=0).sum()
    tot = tot[tot > 0]
    return tuple(sorted(tot.index, key=lambda x: (-tot[x], x))[:n])


def replay_job(plan: JobPlan, results: Sequence[RankSegments]) -> SegmentReplay:
    """The driver's replay of every try (see the module docstring)."""
    import pandas as pd

    results = sorted(results, key=lambda x: x.rank)
    members = plan.members
    inst = members["instance"].to_numpy(np.int64)
    n_inst = len(plan.arrival)
    measured = pd.concat(
        [
            pd.DataFrame(
                {"rank": np.int64(x.rank), "step": x.steps, "start": x.measured[:, 0], "end": x.measured[:, 1]}
            )
            for x in results
            if len(x.steps)
        ]
        or [pd.DataFrame({"rank": [], "step": [], "start": [], "end": []})],
        ignore_index=True,
    )
    base = {x.rank: x.segments(0) for x in results}
    keys: dict = {}
    for x in results:
        for key, ev in zip(x.keys[1:], x.evidence[1:]):
            keys.setdefault(key, []).append(ev)
    out = SegmentReplay(measured, _ends(results, base, inst, n_inst))
    order = sorted(keys, key=lambda kk: _key_order(plan, kk))
    evidence = {k: _evidence(keys[k], plan.options.top, k[0]) for k in order if not k[0].startswith(COMBINED)}
    for key in order:
        name, ev = key[0], evidence.get(key)
        if name.startswith(COMBINED):  # named by the fixes tried, each its first candidate's evidence (none: left out)
            parts = [next((k for k in evidence if k[0] == f), None) for f in name[len(COMBINED) :].split("+")]
            parts = [k for k in parts if k is not None]
            if not parts:
                continue
            name, ev = "+".join(k[0] for k in parts), [e for k in parts for e in evidence[k]]
        segs = {x.rank: x.segments(x.keys.index(key)) if key in x.keys else base[x.rank] for x in results}
        out.tries[(name, key[1], key[2])] = (_ends(results, segs, inst, n_inst), ev)
    return out


def intern(x: RankSegments, pool: dict) -> RankSegments:
    """``x`` with its keys and evidence shared with the other ranks' (``pool``): what the driver keeps of a rank's
    phase 2 as it arrives."""
    x.keys = [pool.setdefault(k, k) for k in x.keys]
    x.evidence = [pool.setdefault(("evidence", e), e) for e in x.evidence]
    return x


def _key_order(plan: JobPlan, key) -> tuple:
    fix, rank, target = key
    if fix.startswith(COMBINED):
        joined = [COMBINED + "+".join(c) for c in plan.combine]
        return (len(jw.FIXES), joined.index(fix) if fix in joined else 0, 0)
    names = {"kernel": plan.options.kernels or (), "cpu_op": plan.options.cpu_ops or ()}.get(fix, ())
    sub = plan.stragglers.index(rank) if fix == "straggler" and rank in plan.stragglers else 0
    return (jw.FIXES.index(fix), sub, list(names).index(target) if target in names else 0)


def _evidence(lists: list, n: int, fix: str) -> list:
    """One evidence list from the ranks' (those of a rank-local fix are the same on every rank): names by how many
    ranks name them, then by rank order."""
    if fix == "straggler" or len(lists) == 1:
        return list(lists[0])
    count: dict = {}
    for ev in lists:
        for e in ev:
            c = count.setdefault(e, [0, len(count)])
            c[0] += 1
    return [e for e, _ in sorted(count.items(), key=lambda kv: (-kv[1][0], kv[1][1]))][: max(n, 1)]


def _ends(results, segs: dict, inst: np.ndarray, n_inst: int) -> pd.DataFrame:
    """Step ends per rank (``rank, step, start, end``) of one try, ``segs`` the rank's segments."""
    import pandas as pd

    n = len(inst)
    src, length = np.full((2, n), -1, np.int64), np.zeros((2, n))
    own, xfer = np.zeros(n), np.full(n, -np.inf)
    for x in results:
        s = segs[x.rank]
        src[:, x.member], length[:, x.member], own[x.member], xfer[x.member] = s.src, s.length, s.own, s.xfer
    e = _run(inst, n_inst, src, length, own, xfer)

    def at(src_, len_):
        return np.where(src_ >= 0, e[np.maximum(src_, 0)] if n else 0.0, 0.0) + len_

    rows = []
    for x in results:
        s = segs[x.rank]
        if not len(x.steps):
            continue
        end = pd.Series(at(s.end_src, s.end_len)).groupby(s.end_step).max()
        rows.append(
            pd.DataFrame(
                {
                    "rank": np.int64(x.rank),
                    "step": x.steps,
                    "start": at(s.start_src, s.start_len).max(axis=0),
                    "end": end.reindex(np.arange(len(x.steps))).to_numpy(),
                }
            )
        )
    if not rows:
        return pd.DataFrame({"rank": [], "step": [], "start": [], "end": []})
    return pd.concat(rows, ignore_index=True)


def _run(inst, n_inst, src, length, own, xfer) -> np.ndarray:
    """Every member's end: instances level by level (an instance after those its members' segments hang off);
    ``src``, ``length``: each member start's segments, one per row (the start is the latest)."""
    n = len(inst)
    e = np.full(n, np.nan)
    if not n:
        return e
    lvl = _levels(inst, src, n_inst)
    order = np.argsort(lvl[inst], kind="stable")
    li = lvl[inst][order]
    cut = np.flatnonzero(np.r_[True, li[1:] != li[:-1], True])
    arrival = np.full(n_inst, -np.inf)
    for a, b in zip(cut[:-1].tolist(), cut[1:].tolist()):
        m = order[a:b]
        sm = (np.where(src[:, m] >= 0, e[np.maximum(src[:, m], 0)], 0.0) + length[:, m]).max(axis=0)
        np.maximum.at(arrival, inst[m], sm)
        e[m] = np.maximum(sm + own[m], arrival[inst[m]] + xfer[m])
    return e


def _levels(inst: np.ndarray, src: np.ndarray, n_inst: int) -> np.ndarray:
    """Per instance: 0 when no member's segment hangs off a member end, else one more than the highest level its
    members' segments hang off."""
    lvl = np.zeros(n_inst, dtype=np.int64)
    for _ in range(n_inst + 1):
        new = np.zeros(n_inst, dtype=np.int64)
        for row in src:
            has = row >= 0
            np.maximum.at(new, inst[has], lvl[inst[row[has]]] + 1)
        if np.array_equal(new, lvl):
            return lvl
        lvl = new
    raise AnalysisError(
        "the collectives' segments depend on each other in a circle: the job cannot be replayed at collective "
        "granularity",
        fix="run with --replay graph on a machine that holds the job",
    )
