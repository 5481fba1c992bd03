"""What to fix first: re-time each step's critical-path graph under counterfactuals and rank the savings.

For every analysed step the graph of :mod:`holotrace.analysis.critical_path` is re-weighted and its longest
path recomputed (the path may move to other edges, so a saving is never the naive sum of the removed edges):

* ``launch_overhead`` — kernel launch delays and the launch calls' own duration shrunk to 0;
* ``kernel_gaps`` — kernel-to-kernel gaps removed;
* ``communication`` — communication kernels fully overlapped (their duration off the path);
* ``top_kernels`` — the ``top_n`` longest kernels on the path ``k``× faster;
* ``data_loading`` — edges attributed to ``data_load_events`` removed (only with ``data_load_events``).

``what_if(job, rank=..., steps=...)`` returns one row per step and fix: ``step, fix, saving, pct, path_length,
edges, evidence`` (saving and length in µs; evidence names the events carrying the saving), ranked by saving.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis.critical_path import CriticalPath, _step_rows, longest_path
from holotrace.analysis.critical_path_graph import EdgeType, build_graph, clip
from holotrace.model import classify
from holotrace.model.classify import NATIVE, KernelType, RuleSet
from holotrace.model.view import job_view

__all__ = ["what_if", "FIXES"]

FIXES = ("launch_overhead", "kernel_gaps", "communication", "top_kernels", "data_loading")


def _masks(cp: CriticalPath, jv, *, top_n: int, data_load_events) -> dict:
    """Per fix: ``(edge mask, factor)`` — the weights of masked edges are multiplied by ``factor``."""
    g, v = cp.graph, cp.view
    attr = np.where(g.attr >= 0, g.attr, 0)
    has = g.attr >= 0
    name = np.where(has, v["name"][attr], -1)
    op = g.type == EdgeType.OPERATOR_KERNEL
    launch_ids = jv.name_ids(set(cp.rules.launch_apis) | set(cp.rules.memory_launch_apis) | set(classify.CP_QUEUE_LAUNCH_APIS))
    gpu = has & (v["stream"][attr] != -1)
    comm_str = jv.per_string(lambda s: classify.kernel_type_of_name(s) == KernelType.COMMUNICATION, missing=0, dtype=bool)
    comm = gpu & op & jv.lookup(name, comm_str)
    out = {
        "launch_overhead": ((g.type == EdgeType.KERNEL_LAUNCH_DELAY) | (op & has & np.isin(name, launch_ids)), 0.0),
        "kernel_gaps": (g.type == EdgeType.KERNEL_KERNEL_DELAY, 0.0),
        "communication": (comm, 0.0),
    }
    # the top-N kernels on the path (by their weight there), every edge of theirs k x faster
    on_path = np.zeros(len(g.src), dtype=bool)
    on_path[cp.path_edges] = True
    kern = on_path & op & gpu & ~comm
    if kern.any():
        w = cp.graph_weight[kern]
        top = g.attr[kern][np.argsort(-w, kind="stable")]
        _, first = np.unique(top, return_index=True)
        chosen = top[np.sort(first)][:top_n]
        out["top_kernels"] = (op & np.isin(g.attr, chosen), None)
    else:
        out["top_kernels"] = (np.zeros(len(g.src), dtype=bool), None)
    if data_load_events:
        pats = list(data_load_events)
        dl = jv.per_string(lambda s: any(p in s for p in pats), missing=0, dtype=bool)
        out["data_loading"] = (op & has & jv.lookup(name, dl), 0.0)
    return out


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
    from holotrace.analysis.annotations import shorten_names

    short = shorten_names(strings.decode(uniq[order]))
    text = ", ".join(f"{short[j]} ({tot[i] / 1e3 if cp.unit_ns == 1 else tot[i]:.0f} us)"
                     for j, i in enumerate(order))
    return int(len(e)), text


def what_if(source, *, rank: int = 0, steps: Optional[Sequence[int]] = None, rules: Optional[RuleSet] = None,
            k: float = 2.0, top_n: int = 5, data_load_events: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Ranked counterfactual savings per step (see the module docstring)."""
    rules = rules or NATIVE
    jv = job_view(source, rules, ranks=[rank])
    rv = jv[rank]
    step_rows = _step_rows(rv, jv.strings, rules)
    if not step_rows:
        step_rows = [(-1, -1)]
    wanted = None if steps is None else {int(s) for s in steps}
    to_us = 1.0 / 1000.0 if jv.unit_ns == 1 else 1.0
    out = []
    for s, row in step_rows:
        if wanted is not None and s not in wanted:
            continue
        win = (float(rv["ts"].min()), float("inf")) if row < 0 else (float(rv["ts"][row]), float(rv["ts"][row] + rv["dur"][row]))
        g = build_graph(jv, rank, clip(rv, jv.strings, *win), win, rules=rules, data_load_events=data_load_events)
        cp = CriticalPath(g, rv, jv.strings, rules, jv.unit_ns, list(data_load_events) if data_load_events else None)
        cp.success, cp.graph_weight, cp.path_nodes, cp.path_edges = longest_path(g, rv)
        if not cp.success:
            continue
        base = cp.length
        for fix, (mask, factor) in _masks(cp, jv, top_n=top_n, data_load_events=data_load_events).items():
            if not mask.any():
                continue
            weight = g.weight.copy()
            weight[mask] = weight[mask] * (1.0 / k if factor is None else factor)
            alt = _length(g, rv, weight)
            n_edges, ev = _evidence(cp, mask, jv.strings)
            saving = max(base - alt, 0.0)
            out.append({"step": s, "fix": fix, "saving": saving * to_us, "pct": 100.0 * saving / base if base else 0.0,
                        "path_length": base * to_us, "edges": n_edges, "evidence": ev})
    df = pd.DataFrame(out, columns=["step", "fix", "saving", "pct", "path_length", "edges", "evidence"])
    return df.sort_values(["saving", "step"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _length(g, rv, weight: np.ndarray) -> float:
    """Longest path length of ``g`` with other edge weights."""
    from dataclasses import replace

    ok, w, _, edges = longest_path(replace(g, weight=weight), rv)
    return float(w[edges].sum()) if ok else 0.0
