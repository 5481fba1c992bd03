"""What to fix first: re-time each step's critical-path graph under counterfactuals and rank the savings.

For every analysed step the graph of :mod:`holotrace.analysis.critical_path` is re-weighted and its longest
path recomputed (the path may move to other edges, so a saving is never the naive sum of the removed edges):

* ``launch_overhead`` — kernel launch delays and the launch calls' own duration shrunk to 0;
* ``kernel_gaps`` — kernel-to-kernel gaps removed;
* ``communication`` — communication fully overlapped with compute: each communication kernel loses its
  transfer time (on a multi-rank job the shortest duration of that collective instance across ranks, since the
  rest is waiting for other ranks; on one rank its whole duration);
* ``slowest_rank`` — the rank that arrives last at each collective brought to the median: this rank's wait in
  the collective shrinks to what it would be if the last rank arrived like the median one (from
  :func:`holotrace.analysis.stragglers.collective_waits`; multi-rank jobs only);
* ``top_kernels`` — the ``top_n`` longest kernels on the path ``k``× faster;
* ``data_loading`` — edges attributed to ``data_load_events`` removed (only with ``data_load_events``).

``what_if(job, rank=..., steps=...)`` returns one row per step and fix: ``step, fix, saving, pct, path_length,
edges, evidence`` (saving and length in µs; evidence names the events carrying the saving), ranked by saving.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.analysis.critical_path.graph import EdgeType
from holotrace.analysis.critical_path.path import CriticalPath, longest_path
from holotrace.analysis.critical_path.steps import step_graphs
from holotrace.model import classify
from holotrace.model.classify import KernelType, Kind, RuleSet
from holotrace.model.view import resolve

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["what_if", "FIXES"]

FIXES = ("launch_overhead", "kernel_gaps", "communication", "slowest_rank", "top_kernels", "data_loading")


def _counterfactuals(cp: CriticalPath, jv, cross, *, k: float, top_n: int, data_load_events) -> dict:
    """Per fix: ``(edge mask, counterfactual weights)``; the mask marks the edges the fix re-times."""
    g, v = cp.graph, cp.view
    attr = np.where(g.attr >= 0, g.attr, 0)
    has = g.attr >= 0
    name = np.where(has, v["name"][attr], -1)
    op = g.type == EdgeType.OPERATOR_KERNEL
    launch_ids = jv.name_ids(
        set(cp.rules.launch_apis) | set(cp.rules.memory_launch_apis) | set(classify.HTA_LAUNCH_APIS)
    )
    gpu = has & (v["stream"][attr] != -1)
    if jv.rules.hta_table:
        comm = gpu & op & jv.lookup(name, jv.per_string(classify.is_communication_kernel, missing=False, dtype=bool))
    else:  # the view's kernel types (the rule table, by name and by the launching collective)
        comm = gpu & op & (v["kernel_type"][attr] == int(KernelType.COMMUNICATION))
    w0 = g.weight

    def scaled(mask, factor):
        w = w0.copy()
        w[mask] = w[mask] * factor
        return mask, w

    def minus(mask, amount):
        w = w0.copy()
        w[mask] = np.maximum(w[mask] - amount[mask], 0.0)
        return mask, w

    out = {
        "launch_overhead": scaled(
            (g.type == EdgeType.KERNEL_LAUNCH_DELAY) | (op & has & np.isin(name, launch_ids)), 0.0
        ),
        "kernel_gaps": scaled(g.type == EdgeType.KERNEL_KERNEL_DELAY, 0.0),
    }
    if cross is None:
        out["communication"] = scaled(comm, 0.0)
    else:
        transfer, slow, _ = cross
        t = transfer[attr]
        out["communication"] = minus(comm, np.where(np.isnan(t), w0, t))
        sv = np.where(comm, np.nan_to_num(slow[attr]), 0.0)
        out["slowest_rank"] = minus(comm & (sv > 0), sv)
    # the top-N kernels on the path (by their weight there), every edge of theirs k x faster
    on_path = np.zeros(len(g.src), dtype=bool)
    on_path[cp.path_edges] = True
    kern = on_path & op & gpu & ~comm
    if kern.any():
        w = cp.graph_weight[kern]
        top = g.attr[kern][np.argsort(-w, kind="stable")]
        _, first = np.unique(top, return_index=True)
        chosen = top[np.sort(first)][:top_n]
        out["top_kernels"] = scaled(op & np.isin(g.attr, chosen), 1.0 / k)
    if data_load_events:
        pats = list(data_load_events)
        dl = jv.per_string(lambda s: classify.is_data_loading(s, pats), missing=0, dtype=bool)
        out["data_loading"] = scaled(op & has & jv.lookup(name, dl), 0.0)
    return out


def _cross_rank(source, rules: RuleSet, rank: int, jv):
    """Per row of ``rank``'s view: the transfer time of its collective instance (shortest duration across
    ranks) and the wait it would lose if the last-arriving rank arrived like the median one (NaN elsewhere, view
    unit); None when none of its collectives is matched across ranks."""
    import pandas as pd

    from holotrace.analysis.stragglers import collective_waits

    rv, unit_ns = jv[rank], jv.unit_ns
    w = collective_waits(source, rules=rules)
    if w.empty or not (w["rank"] == rank).any():
        return None
    key = ["step", "collective", "occurrence"]
    w = w.sort_values(key + ["dur_us"], kind="stable")
    g = w.groupby(key, sort=False)["dur_us"]
    lo = g.transform("min")
    nth = g.cumcount()
    second = w["dur_us"].where(nth == 1).groupby([w[c] for c in key], sort=False).transform("max")
    target = np.minimum(second, g.transform("median"))  # the last arrival's duration once it is on time
    w = w.assign(transfer=lo, saving=np.clip(np.minimum(w["wait_us"], target - lo), 0.0, None))
    mine = w[w["rank"] == rank]
    # this rank's communication kernels, numbered as collective_waits numbers them
    sel = np.flatnonzero((rv["kind"] == int(Kind.KERNEL)) & (rv["kernel_type"] == int(KernelType.COMMUNICATION)))
    rows = pd.DataFrame(
        {
            "row": sel,
            "step": np.nan_to_num(rv["iteration"][sel], nan=-1).astype(np.int64),
            "name": rv["name"][sel],
            "ts": rv["ts"][sel],
        }
    ).sort_values(["step", "name", "ts"], kind="stable")
    rows["occurrence"] = rows.groupby(["step", "name"], sort=False).cumcount()
    rows["collective"] = jv.names(rows["name"].to_numpy())
    m = rows.merge(mine[key + ["transfer", "saving", "last_arrival"]], on=key, how="inner")
    per_us = 1000.0 / unit_ns
    transfer = np.full(rv.n, np.nan)
    slow = np.full(rv.n, np.nan)
    transfer[m["row"].to_numpy()] = np.rint(m["transfer"].to_numpy() * per_us)
    slow[m["row"].to_numpy()] = np.rint(m["saving"].to_numpy() * per_us)
    late = np.full(rv.n, -1, dtype=np.int64)
    late[m["row"].to_numpy()] = m["last_arrival"].to_numpy()
    return transfer, slow, late


def _evidence(cp: CriticalPath, mask: np.ndarray, strings, n: int = 3) -> tuple[int, str]:
    """Edges of the current path the fix touches, and the events carrying most of them."""
    e = cp.path_edges[mask[cp.path_edges]]
    if not len(e):
        return 0, ""
    g = cp.graph
    w = cp.graph_weight[e]
    rows = np.where(g.attr[e] >= 0, g.attr[e], g.node_row[g.dst[e]])
    names = cp.view["name"][rows]
    uniq, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=w, minlength=len(uniq))
    order = np.argsort(-tot)[:n]
    from holotrace.text import hta_short_names as shorten_names

    short = shorten_names(strings.decode(uniq[order]))
    text = ", ".join(f"{short[j]} ({tot[i] / 1e3 if cp.unit_ns == 1 else tot[i]:.0f} us)" for j, i in enumerate(order))
    return int(len(e)), text


def what_if(
    source,
    *,
    rank: int = 0,
    steps: Optional[Sequence[int]] = None,
    rules: Optional[RuleSet] = None,
    k: float = 2.0,
    top_n: int = 5,
    data_load_events: Optional[Sequence[str]] = None,
) -> pd.DataFrame:
    """Ranked counterfactual savings per step (see the module docstring)."""
    import pandas as pd

    jv = resolve(source, rules, ranks=[rank])
    rules = jv.rules  # the one rule set: a view's own unless others are asked for
    to_us = 1.0 / 1000.0 if jv.unit_ns == 1 else 1.0
    cross = _cross_rank(source, rules, rank, jv)
    out = []
    for s, cp in step_graphs(
        jv, rank=rank, steps=steps, rules=rules, data_load_events=data_load_events, whole_rank=True
    ):
        if not cp.success:
            continue
        g, rv = cp.graph, cp.view
        base = cp.length
        for fix, (mask, weight) in _counterfactuals(
            cp, jv, cross, k=k, top_n=top_n, data_load_events=data_load_events
        ).items():
            if not mask.any():
                continue
            alt = _length(g, rv, weight)
            n_edges, ev = _evidence(cp, mask, jv.strings)
            if fix == "slowest_rank" and n_edges:
                e = cp.path_edges[mask[cp.path_edges]]
                late = sorted(set(cross[2][g.attr[e]].tolist()) - {-1})
                ev = f"waiting for rank {', '.join(map(str, late))}: {ev}"
            saving = max(base - alt, 0.0)
            out.append(
                {
                    "step": s,
                    "fix": fix,
                    "saving": saving * to_us,
                    "pct": 100.0 * saving / base if base else 0.0,
                    "path_length": base * to_us,
                    "edges": n_edges,
                    "evidence": ev,
                }
            )
    df = pd.DataFrame(out, columns=["step", "fix", "saving", "pct", "path_length", "edges", "evidence"])
    return df.sort_values(["saving", "step"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _length(g, rv, weight: np.ndarray) -> float:
    """Longest path length of ``g`` with other edge weights."""
    from dataclasses import replace

    ok, w, _, edges = longest_path(replace(g, weight=weight), rv)
    return float(w[edges].sum()) if ok else 0.0
