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

from holotrace.analysis.grouped import group_max, group_mean, group_median, group_min
from holotrace.model.classify import NATIVE, KernelType, Kind, RuleSet
from holotrace.model.view import job_view
from holotrace.order_stats import median
from holotrace.table import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CollectiveMatch",
    "clock_offsets",
    "kernel_table",
    "match_collectives",
    "match_tables",
    "rank_kernels",
    "skew_issue",
    "view_clock_offsets",
]


COLUMNS = ["rank", "row", "step", "group", "kind", "occurrence", "instance"]


@dataclass
class CollectiveMatch:
    """``table``: one row per matched kernel: ``rank, row, step, group, kind, occurrence, instance`` (``row``:
    position in the rank's view; ``instance``: an id shared by the members of one collective, 0..n-1; ``group``
    and ``kind`` are string ids, -1 when absent); ``kernels``: the same as a pandas frame. ``unmatched``: one line
    per (step, group, kind) whose ranks disagree on the count."""

    table: Table
    unmatched: list = field(default_factory=list)

    @property
    def kernels(self) -> pd.DataFrame:
        return self.table.to_pandas()

    @property
    def n_instances(self) -> int:
        return int(self.table["instance"].max()) + 1 if len(self.table) else 0


P2P_KINDS = {"send": 0, "recv": 1}  # a point-to-point kind (``Collective name``) and its role
KERNEL_COLUMNS = ["rank", "row", "step", "group", "kind", "ts", "role", "sender", "receiver", "occurrence"]


def _arg(v, column: str, n_sel: int, sel: np.ndarray) -> np.ndarray:
    return v.arg(column)[sel].astype(np.int64) if column in v.model else np.full(n_sel, -1, dtype=np.int64)


def _keys(*cols) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of integer columns (ascending, as a sorted groupby's keys) and each row's code."""
    if not len(cols[0]):
        return np.zeros((0, len(cols)), dtype=np.int64), np.zeros(0, dtype=np.int64)
    a = [np.asarray(c, dtype=np.int64) for c in cols]
    order = np.lexsort(a[::-1])  # the rows in ascending order, the first column first (np.unique(axis=0)'s order)
    s = [c[order] for c in a]
    new = np.zeros(len(order), dtype=bool)
    new[0] = True
    for c in s:
        new[1:] |= c[1:] != c[:-1]
    code = np.cumsum(new, dtype=np.int64) - 1
    inv = np.empty(len(order), dtype=np.int64)
    inv[order] = code
    return np.stack([c[new] for c in s], axis=1), inv


def _cumcount(codes: np.ndarray) -> np.ndarray:
    """Each row's position among the earlier rows of its group (``groupby().cumcount()``)."""
    o = np.argsort(codes, kind="stable")
    sc = codes[o]
    idx = np.arange(len(o))
    first = np.maximum.accumulate(np.where(np.r_[True, sc[1:] != sc[:-1]], idx, 0)) if len(o) else idx
    out = np.empty(len(o), dtype=np.int64)
    out[o] = idx - first
    return out


def kernel_table(view, r: int) -> Table:
    """One rank's communication kernels, the table the matcher reads: ``rank, row, step, group, kind, ts, role,
    sender, receiver, occurrence`` (``group``/``kind``: string ids of the view), by step, group, kind and start."""
    return _kernel_rows(view, r)[0]


def rank_kernels(view, r: int) -> pd.DataFrame:
    """:func:`kernel_table` as a pandas frame (its index: each row's position before the sort)."""
    tab, order = _kernel_rows(view, r)
    df = tab.to_pandas()
    df.index = order
    return df


def _kernel_rows(view, r: int) -> tuple[Table, np.ndarray]:
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
    cols = {
        "rank": np.full(len(sel), r, dtype=np.int64),
        "row": sel,
        "step": np.nan_to_num(v["iteration"][sel], nan=-1).astype(np.int64),
        "group": group,
        "kind": kind,
        "ts": v["ts"][sel],
        "role": role,
        "sender": np.where(role == 0, r, peer),  # -1 for collectives
        "receiver": np.where(role == 0, peer, np.where(role == 1, r, -1)),
    }
    o = np.lexsort((cols["ts"], cols["kind"], cols["group"], cols["step"]))
    cols = {c: a[o] for c, a in cols.items()}
    _, code = _keys(*(cols[c] for c in ("step", "group", "kind", "sender", "receiver")))
    cols["occurrence"] = _cumcount(code)
    return Table(cols), o


def _pair_p2p(d: Table, ranks: set) -> tuple[Table, list]:
    """Sends and recvs that name their peer, paired (k-th send A→B with k-th recv on B from A, per step and
    group); the rest reported."""
    keys, code = _keys(d["step"], d["group"], d["sender"], d["receiver"])
    role = d["role"]
    sends = np.bincount(code[role == 0], minlength=len(keys))
    recvs = np.bincount(code[role == 1], minlength=len(keys))
    bad = np.flatnonzero(sends != recvs)  # keys ascending
    unmatched = []
    known = np.array([int(x) in ranks for x in keys[:, 2].tolist()], dtype=bool) if len(keys) else np.zeros(0, bool)
    known_to = np.array([int(x) in ranks for x in keys[:, 3].tolist()], dtype=bool) if len(keys) else known
    absent = bad[~known[bad] | ~known_to[bad]]
    if len(absent):
        pairs, at = _keys(keys[absent, 2], keys[absent, 3])
        n = np.bincount(at, weights=(sends[absent] + recvs[absent]).astype(np.float64), minlength=len(pairs))
        for (a, b), k in zip(pairs.tolist(), n.tolist()):
            who = a if a not in ranks else b
            unmatched.append(f"{int(k)} transfer(s) from rank {a} to rank {b} not paired: rank {who} is not in the job")
    for i in bad[known[bad] & known_to[bad]].tolist():
        step, _, a, b = keys[i].tolist()
        unmatched.append(
            f"step {step}: rank {a} sends {sends[i]} transfer(s) to rank {b}, which receives {recvs[i]} from it; "
            "not paired"
        )
    if len(bad):
        d = d.take(~np.isin(code, bad))
    return d, unmatched


def match_collectives(source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None) -> CollectiveMatch:
    """Match every communication kernel of the job with its peers on the other ranks (see the module docstring).

    Instances held by one rank only are left out (nothing to match); a (step, group, kind) whose ranks hold
    different counts, and a send or recv without its partner, are left out and named in ``unmatched``."""
    view = job_view(source, rules or getattr(source, "rules", NATIVE))
    chosen = view.select(ranks)
    return match_tables([kernel_table(view, r) for r in chosen], set(chosen), lambda i: view.strings[int(i)])


def _concat(parts: list) -> Table:
    return Table({c: np.concatenate([np.asarray(p[c]) for p in parts]) for c in KERNEL_COLUMNS})


def _numbered(d: Table, key: list) -> Table:
    """``d`` sorted by ``key`` and rank (stably), each row numbered by its key (0.. in that order)."""
    o = np.lexsort([d["rank"]] + [d[c] for c in reversed(key)])
    d = d.take(o)
    new = np.zeros(len(d), dtype=bool)
    new[:1] = True
    for c in key:
        new[1:] |= d[c][1:] != d[c][:-1]
    return Table({**{c: d[c] for c in d.columns}, "instance": (np.cumsum(new) - 1).astype(np.int64)})


def match_tables(parts: Sequence, ranks: set, name) -> CollectiveMatch:
    """:func:`match_collectives` on the ranks' tables of :func:`kernel_table` (tables or frames; ``group`` and
    ``kind`` codes shared by every table; ``name(code)`` gives the text the unmatched lines show): the one matcher,
    whether the tables come from a job held here or from the ranks' maps."""
    parts = [Table.of(p) for p in parts if len(p)]
    if not parts:
        return CollectiveMatch(Table({c: np.zeros(0, dtype=np.int64) for c in COLUMNS}))
    d = _concat(parts)
    p2p = d["role"] >= 0
    pairs, unmatched = _pair_p2p(d.take(p2p), ranks) if p2p.any() else (d.take(p2p), [])
    d = d.take(~p2p)
    # a (step, group, kind) whose ranks hold different counts is not matched
    keys, code = _keys(d["step"], d["group"], d["kind"])
    per, at = _keys(code, d["rank"])
    n = np.bincount(at, minlength=len(per))
    lo, hi = np.full(len(keys), np.iinfo(np.int64).max), np.full(len(keys), -1)
    np.minimum.at(lo, per[:, 0], n)
    np.maximum.at(hi, per[:, 0], n)
    bad = np.flatnonzero(lo != hi)
    for i in bad.tolist():
        step, group, kind = keys[i].tolist()
        what = name(kind) if kind >= 0 else "?"
        grp = f" of group {name(group)}" if group >= 0 else ""
        unmatched.append(
            f"step {step}: the ranks hold {lo[i]} to {hi[i]} '{what}' collectives{grp}; not matched across ranks"
        )
    if len(bad):
        d = d.take(~np.isin(code, bad))
    # an occurrence held by one rank only: nothing to match
    _, occ = _keys(d["step"], d["group"], d["kind"], d["occurrence"])
    d = d.take(np.bincount(occ, minlength=occ.max() + 1 if len(occ) else 0)[occ] >= 2)
    d = _numbered(d, ["step", "group", "kind", "occurrence"])
    out = {c: d[c] for c in COLUMNS}
    if len(pairs):
        pairs = _numbered(pairs, ["step", "group", "sender", "receiver", "occurrence"])
        first = int(d["instance"].max()) + 1 if len(d) else 0
        out = {c: np.concatenate([out[c], pairs[c] + (first if c == "instance" else 0)]) for c in COLUMNS}
    return CollectiveMatch(Table({c: np.asarray(out[c], dtype=np.int64) for c in COLUMNS}), unmatched)


def clock_offsets(end: np.ndarray, inst: np.ndarray, rk: np.ndarray, all_ranks) -> tuple[dict, float]:
    """Per-rank offsets (ns, every rank of ``all_ranks``) that make the members of each collective instance end
    together (median fit), and the residual spread; ``end``: each member's end (ns from its rank's first event),
    ``inst`` its instance, ``rk`` its rank."""
    ranks = sorted(set(rk.tolist()))
    if len(ranks) < 2 or not len(end):
        return {r: 0 for r in all_ranks}, 0.0
    insts, ic = np.unique(inst, return_inverse=True)
    ic = ic.reshape(-1)
    by_rank, rc = np.unique(rk, return_inverse=True)
    rc = rc.reshape(-1)
    off = {r: 0.0 for r in ranks}
    for _ in range(3):
        adj = end + np.array([off[r] for r in rk])
        mean = group_mean(ic, adj, len(insts))[ic]
        resid = dict(zip(by_rank.tolist(), group_median(rc, mean - adj, len(by_rank)).tolist()))
        for r in ranks:
            off[r] += float(resid[r])
        shift = off[ranks[0]]
        off = {r: o - shift for r, o in off.items()}
    adj = end + np.array([off[r] for r in rk])
    spread = group_max(ic, adj, len(insts)) - group_min(ic, adj, len(insts))
    out = {r: round(off.get(r, 0.0)) for r in all_ranks}
    return out, float(_median(spread)) if len(spread) else 0.0


def _median(x: np.ndarray) -> float:
    """A series' median: NaN skipped."""
    x = x[~np.isnan(x)]
    return median(x) if len(x) else float("nan")


def view_clock_offsets(view, match, placed) -> tuple[dict, float]:
    """:func:`clock_offsets` of a job view's matched collectives (``match``): per-rank offsets (ns) that make them
    end together (median fit), and the residual spread. ``placed``: per rank, what takes its view's times onto the common clock before any offset (ns from the job's
    origin), so the offsets are fitted where they are applied, whenever each rank's first event was recorded."""
    k = match.table
    end = np.empty(len(k), dtype=np.float64)
    for r in sorted(set(k["rank"].tolist())):
        sel = k["rank"] == r
        end[sel] = (view[r]["end"][k["row"][sel]] + placed[r]).astype(np.float64)
    return clock_offsets(end, k["instance"], k["rank"], view.ranks)


def skew_issue(skew: float) -> str | None:
    """The line that reports a residual clock skew too large to trust cross-rank waits (None when it is not)."""
    if skew <= 50_000:
        return None
    return (
        f"members of a collective still end {skew / 1e3:.0f} us apart (median) after aligning the "
        "ranks' clocks: cross-rank waits are uncertain by about that much"
    )
