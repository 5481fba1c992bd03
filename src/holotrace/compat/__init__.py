"""HTA-compatible API: ``TraceAnalysis`` with Holistic Trace Analysis's names, parameters and columns."""

from __future__ import annotations


def __getattr__(name: str):
    if name == "TraceAnalysis":
        from holotrace.compat.trace_analysis import TraceAnalysis

        return TraceAnalysis
    raise AttributeError(f"module 'holotrace.compat' has no attribute {name!r}")
