"""``TraceAnalysis``: Holistic Trace Analysis's API on holotrace's analyses.

An HTA notebook runs by changing its import line::

    # from hta.trace_analysis import TraceAnalysis
    from holotrace import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir="traces/")
    analyzer.get_temporal_breakdown()

Method names, parameters, defaults, column names and row order are HTA 0.6.1's, except that every
``visualize`` defaults to ``False`` (plots need the ``plot`` extra: ``pip install holotrace[plot]``).

The class is assembled from one group of methods per topic (``compat/methods_*.py``, on the shared
state of ``compat/facade_base.py``). Each method is an adapter: it takes the job's view under HTA's rules (built once, when the object is
constructed, as HTA's constructor loads its tables), calls the one analysis of :mod:`holotrace.analysis`
with HTA's rule set, and shapes HTA's columns. Where HTA has a bug, the fixed behaviour is the default
and ``hta_compat=True`` (per call, or on the constructor) reproduces HTA: the rule set becomes
:data:`~holotrace.model.classify.HTA` instead of :data:`~holotrace.model.classify.HTA_FIXED`. Every
difference is listed in docs/compatibility.md. Nothing here mutates the loaded job or the view.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Optional, Union

import pandas as pd

from holotrace.analysis.callstack import CallGraph
from holotrace.compat.inputs import load_inputs
from holotrace.compat.methods_annotations import AnnotationMethods
from holotrace.compat.methods_breakdown import BreakdownMethods
from holotrace.compat.methods_counters import CounterMethods, TimeSeriesTypes
from holotrace.compat.methods_critical_path import CriticalPathMethods
from holotrace.compat.methods_launches import LaunchMethods
from holotrace.errors import PlottingUnavailableError
from holotrace.model.classify import HTA
from holotrace.model.view import JobView, job_view

__all__ = ["TraceAnalysis", "PlottingUnavailableError", "DEFAULT_TRACE_DIR", "TimeSeriesTypes"]

log = logging.getLogger("holotrace.compat")

DEFAULT_TRACE_DIR = str(Path(tempfile.gettempdir()) / "trace")  # HTA's default folder, for signature compatibility


class TraceAnalysis(BreakdownMethods, LaunchMethods, AnnotationMethods, CounterMethods, CriticalPathMethods):
    """HTA-compatible analysis of one job's traces.

    Args:
        trace_files: a ``{rank: file}`` map (files relative to ``trace_dir`` unless absolute) or a list
            of files; ``None`` loads every trace file in ``trace_dir``.
        trace_dir: folder of the job's trace files.
        include_last_profiler_step: keep the last ``ProfilerStep`` (HTA drops it, and everything
            launched in it, by default).
        job: an already loaded :class:`holotrace.model.job.Job` (skips loading).
        cache, workers, strict: passed to :func:`holotrace.load`.
        hta_compat: reproduce HTA's known bugs in the methods that fix them (see docs/compatibility.md);
            each of those methods also takes ``hta_compat`` per call. The breakdowns always give HTA's numbers.

    Attributes:
        job: the loaded job (read-only).
        view: the job's events under HTA's rules (:class:`holotrace.model.view.JobView`, read-only).
        figures: the plotly figures of the last call made with ``visualize=True``.
    """

    def __init__(
        self,
        trace_files: Optional[Union[dict[int, str], list[str]]] = None,
        trace_dir: str = DEFAULT_TRACE_DIR,
        include_last_profiler_step: Optional[bool] = False,
        *,
        job=None,
        cache: bool = True,
        workers: Optional[int] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        if job is None:
            job = load_inputs(trace_files, trace_dir, cache=cache, workers=workers, strict=strict)
        # like HTA's constructor, leave every rank ready: each analysis call is then cheap
        self._setup(job, job_view(job, HTA, include_last_step=bool(include_last_profiler_step)), hta_compat)

    def _setup(self, job, view: JobView, hta_compat: bool) -> None:
        self.hta_compat = bool(hta_compat)
        self.job = job
        self.include_last_profiler_step = bool(view.include_last_step)
        self.figures: list = []
        self.view: JobView = view
        self._tables: dict[tuple[int, bool], pd.DataFrame] = {}
        self._graphs: dict[tuple[int, bool], CallGraph] = {}

    @classmethod
    def of_trace(cls, t, hta_compat: bool = False) -> TraceAnalysis:
        """The analyses over a loaded :class:`~holotrace.compat.trace.Trace` (its job and view, not rebuilt)."""
        t.load_traces()
        obj = cls.__new__(cls)
        obj._setup(t.job, t.view, hta_compat)
        obj.__dict__["_trace"] = t
        return obj
