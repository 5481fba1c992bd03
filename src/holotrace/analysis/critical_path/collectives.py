"""Collective kernels matched across ranks: the one matching the straggler analysis and the job graph share.

A communication kernel belongs to a process group (``Process Group Name`` on the kernel, else the job's one
unnamed group) and is of a kind (``Collective name`` on the kernel, else its kernel name). Within a step, the
k-th kernel of one (group, kind) on a rank is the k-th on every member rank (spec 27 §2; the autograd
``Sequence number`` is not a collective counter and is not used). Where the members of a group disagree on how
many kernels of a kind a step has, that (step, group, kind) is not matched and is reported instead.

Point-to-point transfers are paired by peer where the trace names it (``Dst Rank`` on a ``send``, ``Src Rank``
on a ``recv``, global ranks): within a step, the k-th send from rank A to rank B is the k-th recv on B from A.
A send or recv whose partner is missing (the peer's counts differ, or the peer rank is not in the job) is
reported, not guessed. Transfers that do not name their peer are matched by order as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from holotrace.model.classify import NATIVE, KernelType, Kind, RuleSet
from holotrace.model.view import job_view

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CollectiveMatch",
    "clock_offsets",
    "match_collectives",
    "match_tables",
    "rank_kernels",
    "skew_issue",
    "view_clock_offsets",
]


@dataclass
class CollectiveMatch:
    """``kernels``: one row per matched kernel: ``rank, row, step, group, kind, occurrence, instance`` (``row``:
    position in the rank's view; ``instance``: an id shared by the members of one collective, 0..n-1; ``group``
    and ``kind`` are string ids, -1 when absent). ``unmatched``: one line per (step, group, kind) whose ranks
    disagree on the count."""

    kernels: pd.DataFrame
    unmatched: list = field(default_factory=list)

    @property
    def n_instances(self) -> int:
        return int(self.kernels["instance"].max()) + 1 if len(self.kernels) else 0


P2P_KINDS = {"send": 0, "recv": 1}  # a point-to-point kind (``Collective name``) and its role


def _arg(v, column: str, n_sel: int, sel: np.ndarray) -> np.ndarray:
    return v.arg(column)[sel].astype(np.int64) if column in v.model else np.full(n_sel, -1, dtype=np.int64)


def rank_kernels(view, r: int) -> pd.DataFrame:
    """One rank's communication kernels, the table the matcher reads: ``rank, row, step, group, kind, ts, role,
    sender, receiver, occurrence`` (``group``/``kind``: string ids of the view)."""
    import pandas as pd

    v = view[r]
    sel = np.flatnonzero((v["kind"] == int(Kind.KERNEL)) & (v["kernel_type"] == int(KernelType.COMMUNICATION)))
    group = _arg(v, "process_group_name", len(sel), sel)
    coll = _arg(v, "collective_name", len(sel), sel)
    kind = np.where(coll >= 0, coll, v["name"][sel])
    # point to point: role (0 send, 1 recv, -1 neither) and the peer the trace names (-1 none)
    ids, inv = np.unique(coll, return_inverse=True)  # a few distinct names
    roles = np.array([P2P_KINDS.get(str(view.strings[int(i)]).strip().lower(), -1) if i >= 0 else -1 for i in ids])
    role = roles[inv.reshape(-1)] if len(sel) else np.zeros(0, dtype=np.int64)
    src, dst = _arg(v, "p2p_src", len(sel), sel), _arg(v, "p2p_dst", len(sel), sel)
    peer = np.where(role == 0, dst, np.where(role == 1, src, -1))
    role = np.where(peer >= 0, role, -1)
    d = pd.DataFrame(
        {
            "rank": np.int64(r),
            "row": sel,
            "step": np.nan_to_num(v["iteration"][sel], nan=-1).astype(np.int64),
            "group": group,
            "kind": kind,
            "ts": v["ts"][sel],
            "role": role,
            "sender": np.where(role == 0, r, peer),  # -1 for collectives
            "receiver": np.where(role == 0, peer, np.where(role == 1, r, -1)),
        }
    )
    d = d.sort_values(["step", "group", "kind", "ts"], kind="stable")
    d["occurrence"] = d.groupby(["step", "group", "kind", "sender", "receiver"], sort=False).cumcount().to_numpy()
    return d


def _pair_p2p(d: pd.DataFrame, ranks: set) -> tuple[pd.DataFrame, list]:
    """Sends and recvs that name their peer, paired (k-th send A→B with k-th recv on B from A, per step and
    group); the rest reported."""
    key = ["step", "group", "sender", "receiver"]
    counts = d.groupby(key + ["role"], sort=True).size().unstack("role", fill_value=0)
    counts = counts.reindex(columns=[0, 1], fill_value=0).reset_index()
    bad = counts[counts[0] != counts[1]]
    unmatched = []
    absent = bad[~bad["sender"].isin(ranks) | ~bad["receiver"].isin(ranks)]
    for (a, b), g in absent.groupby(["sender", "receiver"], sort=True):
        n = int(g[0].sum() + g[1].sum())
        who = a if a not in ranks else b
        unmatched.append(f"{n} transfer(s) from rank {a} to rank {b} not paired: rank {who} is not in the job")
    for t in bad[bad["sender"].isin(ranks) & bad["receiver"].isin(ranks)].itertuples(index=False):
        unmatched.append(
            f"step {t.step}: rank {t.sender} sends {t[4]} transfer(s) to rank {t.receiver}, which receives "
            f"{t[5]} from it; not paired"
        )
    if len(bad):
        drop = d.merge(bad[key], on=key, how="left", indicator=True)["_merge"].to_numpy() == "both"
        d = d[~drop]
    return d, unmatched


def match_collectives(source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None) -> CollectiveMatch:
    """Match every communication kernel of the job with its peers on the other ranks (see the module docstring).

    Instances held by one rank only are left out (nothing to match); a (step, group, kind) whose ranks hold
    different counts, and a send or recv without its partner, are left out and named in ``unmatched``."""
    view = job_view(source, rules or getattr(source, "rules", NATIVE))
    chosen = view.select(ranks)
    return match_tables([rank_kernels(view, r) for r in chosen], set(chosen), lambda i: view.strings[int(i)])


def match_tables(parts: Sequence[pd.DataFrame], ranks: set, name) -> CollectiveMatch:
    """:func:`match_collectives` on the ranks' tables of :func:`rank_kernels` (``group`` and ``kind`` codes shared
    by every table; ``name(code)`` gives the text the unmatched lines show): the one matcher, whether the tables
    come from a job held here or from the ranks' maps."""
    import pandas as pd

    parts = [p for p in parts if len(p)]
    cols = ["rank", "row", "step", "group", "kind", "occurrence", "instance"]
    if not parts:
        return CollectiveMatch(pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in cols}))
    d = pd.concat(parts, ignore_index=True)
    p2p = d["role"].to_numpy() >= 0
    pairs, unmatched = _pair_p2p(d[p2p], ranks) if p2p.any() else (d[p2p], [])
    d = d[~p2p]
    key = ["step", "group", "kind"]
    counts = d.groupby(key + ["rank"], sort=True).size().rename("n").reset_index()
    spread = counts.groupby(key, sort=True)["n"].agg(["min", "max", "size"]).reset_index()
    bad = spread[spread["min"] != spread["max"]]
    for t in bad.itertuples(index=False):
        what = name(t.kind) if t.kind >= 0 else "?"
        grp = f" of group {name(t.group)}" if t.group >= 0 else ""
        unmatched.append(
            f"step {t.step}: the ranks hold {t.min} to {t.max} '{what}' collectives{grp}; not matched across ranks"
        )
    if len(bad):
        drop = d.merge(bad[key], on=key, how="left", indicator=True)["_merge"].to_numpy() == "both"
        d = d[~drop]
    key2 = key + ["occurrence"]
    d = d[d.groupby(key2, sort=False)["rank"].transform("size").to_numpy() >= 2]
    d = d.sort_values(key2 + ["rank"], kind="stable", ignore_index=True)
    d["instance"] = d.groupby(key2, sort=False).ngroup().to_numpy().astype(np.int64)
    if len(pairs):
        pkey = ["step", "group", "sender", "receiver", "occurrence"]
        pairs = pairs.sort_values(pkey + ["rank"], kind="stable", ignore_index=True)
        first = int(d["instance"].max()) + 1 if len(d) else 0
        pairs["instance"] = first + pairs.groupby(pkey, sort=False).ngroup().to_numpy().astype(np.int64)
        d = pd.concat([d, pairs], ignore_index=True)
    return CollectiveMatch(d[cols].reset_index(drop=True), unmatched)


def clock_offsets(end: np.ndarray, inst: np.ndarray, rk: np.ndarray, all_ranks) -> tuple[dict, float]:
    """Per-rank offsets (ns, every rank of ``all_ranks``) that make the members of each collective instance end
    together (median fit), and the residual spread; ``end``: each member's end (ns from its rank's first event),
    ``inst`` its instance, ``rk`` its rank."""
    import pandas as pd

    ranks = sorted(set(rk.tolist()))
    if len(ranks) < 2 or not len(end):
        return {r: 0 for r in all_ranks}, 0.0
    off = {r: 0.0 for r in ranks}
    for _ in range(3):
        adj = end + np.array([off[r] for r in rk])
        mean = pd.Series(adj).groupby(inst).transform("mean").to_numpy()
        resid = pd.Series(mean - adj).groupby(rk).median()
        for r in ranks:
            off[r] += float(resid[r])
        shift = off[ranks[0]]
        off = {r: o - shift for r, o in off.items()}
    adj = end + np.array([off[r] for r in rk])
    by_inst = pd.Series(adj).groupby(inst)
    spread = by_inst.max() - by_inst.min()
    out = {r: round(off.get(r, 0.0)) for r in all_ranks}
    return out, float(spread.median()) if len(spread) else 0.0


def view_clock_offsets(view, match, placed) -> tuple[dict, float]:
    """:func:`clock_offsets` of a job view's matched collectives (``match``): per-rank offsets (ns) that make them
    end together (median fit), and the residual spread. ``placed``: per rank, what takes its view's times onto the common clock before any offset (ns from the job's
    origin), so the offsets are fitted where they are applied, whenever each rank's first event was recorded."""
    k = match.kernels
    end = np.empty(len(k), dtype=np.float64)
    for r in sorted(set(k["rank"].tolist())):
        sel = (k["rank"] == r).to_numpy()
        end[sel] = (view[r]["end"][k["row"].to_numpy()[sel]] + placed[r]).astype(np.float64)
    return clock_offsets(end, k["instance"].to_numpy(), k["rank"].to_numpy(), view.ranks)


def skew_issue(skew: float) -> str | None:
    """The line that reports a residual clock skew too large to trust cross-rank waits (None when it is not)."""
    if skew <= 50_000:
        return None
    return (
        f"members of a collective still end {skew / 1e3:.0f} us apart (median) after aligning the "
        "ranks' clocks: cross-rank waits are uncertain by about that much"
    )
