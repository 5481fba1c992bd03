"""holotrace: where distributed GPU training wastes time, from PyTorch Profiler traces.

    import holotrace
    job = holotrace.load("traces/")          # a folder of per-rank Kineto files
    job.ranks, job.findings

    from holotrace import TraceAnalysis      # HTA-compatible facade
"""

from __future__ import annotations

from holotrace.errors import HolotraceError
from holotrace.loader import load
from holotrace.model.job import Finding, Job, RankTrace

__version__ = "0.1.0"

__all__ = ["load", "Job", "RankTrace", "Finding", "HolotraceError", "TraceAnalysis", "__version__"]


def __getattr__(name: str):
    if name == "TraceAnalysis":
        from holotrace.compat.trace_analysis import TraceAnalysis

        return TraceAnalysis
    raise AttributeError(f"module 'holotrace' has no attribute {name!r}")
