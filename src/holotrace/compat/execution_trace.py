"""HTA's execution-trace correlation (``hta.common.execution_trace``) on :mod:`holotrace.analysis.execution_trace`.

``correlate_execution_trace(trace, rank, et)`` writes ``et_node`` into the :class:`~holotrace.compat.trace.Trace`'s
rank table (as HTA does; the analyses never read it) and returns the match report (HTA returns None). Where the
trace's External-id range does not contain the ET's ``rf_id`` range HTA refuses; holotrace joins what matches
unless ``hta_compat=True``.
"""

from __future__ import annotations

import logging

from holotrace.analysis.execution_trace import (
    ET_SUPPORTED_CATEGORIES,
    ExecutionTrace,
    et_attribute,
    et_node_column,
    load_execution_trace,
)

__all__ = [
    "load_execution_trace",
    "correlate_execution_trace",
    "add_et_column",
    "ExecutionTrace",
    "EXECUTION_TRACE_SUPPORTED_EVENTS",
]

log = logging.getLogger("holotrace.compat")
EXECUTION_TRACE_SUPPORTED_EVENTS = list(ET_SUPPORTED_CATEGORIES)


def correlate_execution_trace(trace, rank: int, et: ExecutionTrace, *, hta_compat: bool = False):
    df = trace.get_trace(rank)
    supported = df["s_cat"].isin(ET_SUPPORTED_CATEGORIES).to_numpy()
    node, report = et_node_column(df["external_id"].to_numpy(), supported, et)
    if hta_compat and not report["contained"]:
        log.error("Trace and execution trace do not overlap, this mode is not currently supported")
        return None
    df["et_node"] = node
    return report


def add_et_column(trace_df, et: ExecutionTrace, column: str) -> None:
    if "et_node" not in trace_df.columns:
        log.error("Please run correlate_execution_trace() first")
        return
    trace_df[column] = et_attribute(trace_df["et_node"].to_numpy(), et, column)
