"""HTA's ``CriticalPathAnalysis`` (``hta.analyzers.critical_path_analysis``): its class methods over a loaded
``Trace``, as adapters of ``TraceAnalysis``'s methods."""

from __future__ import annotations

from holotrace.compat.cp_graph import CPGraph
from holotrace.compat.trace_analysis import TraceAnalysis

__all__ = ["CriticalPathAnalysis"]


class CriticalPathAnalysis:
    """HTA's ``CriticalPathAnalysis``: its two class methods over a loaded ``Trace`` (``TraceAnalysis(...).t``)."""

    def __init__(self):
        self.cp_nodes: dict = {}

    @classmethod
    def critical_path_analysis(cls, t, rank: int, annotation: str, instance_id, data_load_events=None):
        """``TraceAnalysis.critical_path_analysis`` on ``t`` (``(CPGraph, success)`` or None)."""
        return TraceAnalysis.of_trace(t).critical_path_analysis(rank, annotation, instance_id, data_load_events)

    @classmethod
    def overlay_critical_path_analysis(
        cls,
        t,
        rank: int,
        critical_path_graph: CPGraph,
        output_dir: str,
        only_show_critical_events: bool,
        show_all_edges: bool,
    ) -> str:
        """``TraceAnalysis.overlay_critical_path_analysis`` on ``t``; returns the written file's path."""
        return TraceAnalysis.of_trace(t).overlay_critical_path_analysis(
            rank, critical_path_graph, output_dir, only_show_critical_events, show_all_edges
        )
