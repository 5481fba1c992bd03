"""What every group of HTA methods reads: the facade's view, rule sets, cached tables and graphs, figures.

:class:`FacadeBase` is the base of :class:`holotrace.compat.trace_analysis.TraceAnalysis`; the HTA methods
live in one module per topic (``compat/methods_*.py``), as HTA's own analyzers do, and read only the
state set here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Optional

import pandas as pd

from holotrace.analysis.callstack import CallGraph, call_graph
from holotrace.compat.hta_table import hta_table
from holotrace.model.classify import HTA, HTA_FIXED, RuleSet
from holotrace.model.view import JobView

log = logging.getLogger("holotrace.compat")

__all__ = ["FacadeBase", "log"]


def _plots():
    """The plot builders (:mod:`holotrace.render.plots`), once plotly, which draws them here, is known to be there."""
    from holotrace.render import plots
    from holotrace.render.plotly_figures import require_plotly

    require_plotly(
        "visualize=True",
        fix="pip install 'holotrace[plot]', or call with visualize=False (the default) to get the data only",
    )
    return plots


class FacadeBase:
    """State shared by the HTA method groups (set by ``TraceAnalysis.__init__``)."""

    job: object
    view: JobView
    hta_compat: bool
    include_last_profiler_step: bool
    figures: list
    _tables: dict[tuple[int, bool], pd.DataFrame]
    _graphs: dict[tuple[int, bool], CallGraph]

    @property
    def t(self):
        """HTA's ``Trace`` of this job (:class:`holotrace.compat.trace.Trace`): tables built on first access,
        owned by that object (editing them never changes what the analyses read). With ``hta_compat`` their ``end``
        is absolute, as HTA leaves it (``ts`` is aligned); otherwise ``end = ts + dur``."""
        trace = self.__dict__.get("_trace")
        if trace is None:
            from holotrace.compat.trace import Trace

            trace = self.__dict__["_trace"] = Trace.from_job(self.job, self.view, hta_compat=self.hta_compat)
        return trace

    # ------------------------------------------------------------------ shared inputs (read-only)
    def _rules(self, hta_compat: Optional[bool] = None) -> RuleSet:
        """HTA's rules, with its bugs (``hta_compat``) or with holotrace's fixes."""
        compat = self.hta_compat if hta_compat is None else bool(hta_compat)
        return HTA if compat else HTA_FIXED

    def _table(self, rank: int, args: bool = True) -> pd.DataFrame:
        """HTA's loaded table of one rank (cached; callers must not modify it)."""
        key = (int(rank), bool(args))
        if key not in self._tables:
            self._tables[key] = hta_table(self.view[rank], self.job.strings, args=args)
        return self._tables[key]

    def _ranks_arg(self, ranks: Optional[Sequence[int]]) -> list[int]:
        """HTA's per-rank argument rule: ``None`` or ``[]`` → ``[0]``; unknown ranks raise."""
        return self.view.select([0] if not ranks else ranks)

    def _call_graph(self, rank: int, rules: RuleSet) -> CallGraph:
        """The call graph of one rank under HTA's rules (cached per rank and quirk switch)."""
        key = (int(rank), rules.hta_quirks)
        if key not in self._graphs:
            self._graphs[key] = call_graph(self.view, rank, rules=rules)
        return self._graphs[key]

    def _figures(self, build: Callable[[object], object], show: bool = True, renderer: str = "") -> None:
        """Build (and, inside a notebook, show) the figures of a method; requires plotly. ``build`` gets the plot
        builders (:mod:`holotrace.render.plots`) and returns a chart description or a list of them; the plotly
        renderer draws each as one figure."""
        from holotrace.render import plotly_figures

        self.figures = plotly_figures.figures(build(_plots()))
        if show:
            plotly_figures.show(self.figures, renderer=renderer)
