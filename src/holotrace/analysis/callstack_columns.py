"""Per-row call-stack columns of a :class:`~holotrace.analysis.callstack.CallGraph` (spec 12 §1.3).

:func:`stack_columns` gives, for one rank of a view, HTA's eight call-graph columns: ``parent`` (as an event
``index``; top-level CPU events get the negative thread root ``-|tid|``, rows outside the graph −1), ``depth``,
``height`` (kernel 0; CPU node ``max(1, 1 + max child height)``), ``num_kernels``, ``kernel_dur_sum``,
``first_kernel_start``, ``last_kernel_end`` and ``kernel_span`` of the GPU work below each node (rows without
kernels: 0 / −1). Times are the view's (``end = ts + dur`` on one clock, so ``kernel_span`` is a real span).
"""

from __future__ import annotations

import numpy as np

from holotrace.analysis.callstack import CallGraph

__all__ = ["STACK_COLUMNS", "stack_columns"]

STACK_COLUMNS = (
    "parent",
    "depth",
    "height",
    "first_kernel_start",
    "last_kernel_end",
    "num_kernels",
    "kernel_dur_sum",
    "kernel_span",
)


def _levels(g: CallGraph):
    order = g.order
    bounds = np.flatnonzero(np.diff(g.depth[order])) + 1
    return np.split(order, bounds)


def stack_columns(g: CallGraph, rv) -> dict[str, np.ndarray]:
    """HTA's call-graph columns for the rows of ``rv`` (a RankView), from its graph ``g``."""
    n = len(g.parent)
    ts = rv["ts"].astype(np.float64)
    end = ts + np.maximum(np.nan_to_num(rv["dur"].astype(np.float64)), 0)
    height = np.full(n, -1, dtype=np.int64)
    height[g.in_graph] = np.where(g.is_kernel[g.in_graph], 0, 1)
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    first[g.is_kernel] = ts[g.is_kernel]
    last[g.is_kernel] = end[g.is_kernel]
    detached = (g.num_kernels == 0) & g.is_kernel  # kernels of subtrees HTA never visits keep no kernel info
    first[detached], last[detached] = np.inf, -np.inf
    for chunk in reversed(_levels(g)):  # bottom-up, one numpy pass per depth level
        p = g.parent[chunk]
        ok = p >= 0
        c, pp = chunk[ok], p[ok]
        np.maximum.at(height, pp, np.maximum(1, height[c] + 1))
        np.minimum.at(first, pp, first[c])
        np.maximum.at(last, pp, last[c])
    has = g.num_kernels > 0
    index = rv["index"]
    parent = np.where(g.parent >= 0, index[np.clip(g.parent, 0, None)], -1)
    top = g.in_graph & (g.parent < 0) & ~g.is_kernel
    parent[top] = -np.abs(rv["tid"][top])
    fks = np.where(has, first, -1.0)
    lke = np.where(has, last, -1.0)
    return {
        "parent": parent.astype(np.int64),
        "depth": g.depth.astype(np.int64),
        "height": height,
        "first_kernel_start": fks,
        "last_kernel_end": lke,
        "num_kernels": np.where(has, g.num_kernels, 0).astype(np.int64),
        "kernel_dur_sum": np.where(has, g.kernel_dur_sum, 0.0),
        "kernel_span": np.where(has, lke - fks, 0.0),
    }
