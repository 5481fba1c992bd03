"""Collective kernels matched across ranks: the one matching the straggler analysis and the job graph share.

A communication kernel belongs to a process group (``Process Group Name`` on the kernel, else the job's one
unnamed group) and is of a kind (``Collective name`` on the kernel, else its kernel name). Within a step, the
k-th kernel of one (group, kind) on a rank is the k-th on every member rank (spec 27 §2; the autograd
``Sequence number`` is not a collective counter and is not used). Where the members of a group disagree on how
many kernels of a kind a step has, that (step, group, kind) is not matched and is reported instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from holotrace.model.classify import NATIVE, KernelType, Kind, RuleSet
from holotrace.model.view import job_view

__all__ = ["CollectiveMatch", "match_collectives"]


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


def _rank_kernels(view, r: int) -> pd.DataFrame:
    v = view[r]
    sel = np.flatnonzero((v["kind"] == int(Kind.KERNEL)) & (v["kernel_type"] == int(KernelType.COMMUNICATION)))
    group = (
        v.arg("process_group_name")[sel].astype(np.int64) if "process_group_name" in v.model else np.full(len(sel), -1)
    )
    coll = v.arg("collective_name")[sel].astype(np.int64) if "collective_name" in v.model else np.full(len(sel), -1)
    kind = np.where(coll >= 0, coll, v["name"][sel])
    d = pd.DataFrame(
        {
            "rank": np.int64(r),
            "row": sel,
            "step": np.nan_to_num(v["iteration"][sel], nan=-1).astype(np.int64),
            "group": group,
            "kind": kind,
            "ts": v["ts"][sel],
        }
    )
    d = d.sort_values(["step", "group", "kind", "ts"], kind="stable")
    d["occurrence"] = d.groupby(["step", "group", "kind"], sort=False).cumcount().to_numpy()
    return d


def match_collectives(source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None) -> CollectiveMatch:
    """Match every communication kernel of the job with its peers on the other ranks (see the module docstring).

    Instances held by one rank only are left out (nothing to match); a (step, group, kind) whose ranks hold
    different counts is left out and named in ``unmatched``."""
    view = job_view(source, rules or getattr(source, "rules", NATIVE))
    parts = [_rank_kernels(view, r) for r in view.select(ranks)]
    parts = [p for p in parts if len(p)]
    cols = ["rank", "row", "step", "group", "kind", "occurrence", "instance"]
    if not parts:
        return CollectiveMatch(pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in cols}))
    d = pd.concat(parts, ignore_index=True)
    key = ["step", "group", "kind"]
    counts = d.groupby(key + ["rank"], sort=True).size().rename("n").reset_index()
    spread = counts.groupby(key, sort=True)["n"].agg(["min", "max", "size"]).reset_index()
    bad = spread[spread["min"] != spread["max"]]
    unmatched = []
    for t in bad.itertuples(index=False):
        name = view.strings[int(t.kind)] if t.kind >= 0 else "?"
        grp = f" of group {view.strings[int(t.group)]}" if t.group >= 0 else ""
        unmatched.append(
            f"step {t.step}: the ranks hold {t.min} to {t.max} '{name}' collectives{grp}; not matched across ranks"
        )
    if len(bad):
        drop = d.merge(bad[key], on=key, how="left", indicator=True)["_merge"].to_numpy() == "both"
        d = d[~drop]
    key2 = key + ["occurrence"]
    d = d[d.groupby(key2, sort=False)["rank"].transform("size").to_numpy() >= 2]
    d = d.sort_values(key2 + ["rank"], kind="stable", ignore_index=True)
    d["instance"] = d.groupby(key2, sort=False).ngroup().to_numpy().astype(np.int64)
    return CollectiveMatch(d[cols].reset_index(drop=True), unmatched)
