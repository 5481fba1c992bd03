"""Former home of :class:`TraceAnalysis`; see :mod:`holotrace.compat.trace_analysis`."""

from holotrace.compat.trace_analysis import DEFAULT_TRACE_DIR, PlottingUnavailableError, TraceAnalysis

__all__ = ["TraceAnalysis", "PlottingUnavailableError", "DEFAULT_TRACE_DIR"]
