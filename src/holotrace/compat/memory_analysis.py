"""HTA's ``MemoryAnalysis`` (``hta.memory_analysis``) on PyTorch's memory-timeline export.

The input is the file ``profile.export_memory_timeline("name.raw.json.gz")`` writes (not a Kineto trace).
``_process_raw_events()`` gives HTA's ``(times, sizes)`` lists exactly; ``plot_memory_timeline`` draws HTA's
stacked areas (:func:`holotrace.render.plots_timeline.memory_export` drawn by plotly, the ``plot`` extra).
Additions: plain ``.json`` files are read too, :meth:`MemoryAnalysis.timeline` returns the data as a frame
(HTA's duplicate first instant merged unless ``hta_compat``) and :meth:`MemoryAnalysis.peaks` the peak per
category.
"""

from __future__ import annotations

import enum
import os

import pandas as pd

from holotrace.analysis import memory as _memory

__all__ = ["Category", "MemoryAnalysis"]


class Category(enum.Enum):
    """HTA's memory categories (the order of PyTorch's memory-timeline export)."""

    INPUT = enum.auto()
    TEMPORARY = enum.auto()
    ACTIVATION = enum.auto()
    GRADIENT = enum.auto()
    AUTOGRAD_DETAIL = enum.auto()
    PARAMETER = enum.auto()
    OPTIMIZER_STATE = enum.auto()


class MemoryAnalysis:
    """Memory used by each category (parameters, activations, gradients ...) over time."""

    def __init__(self, path):
        self.path = path

    def _process_raw_events(self) -> tuple[list[int], list[list[int]]]:
        """HTA's ``([timestamps ns], [[bytes per category] per timestamp])``."""
        times, sizes = _memory.memory_export_series(_memory.read_memory_export(self.path), hta_compat=True)
        return times.tolist(), sizes.tolist()

    def timeline(self, hta_compat: bool = False) -> pd.DataFrame:
        """``ts`` (ns) and live bytes per category after each instant."""
        return _memory.memory_export_timeline(self.path, hta_compat=hta_compat)

    def peaks(self) -> pd.DataFrame:
        """Peak live bytes per category and in total, with the time of each peak."""
        return _memory.memory_export_peaks(self.path)

    def memory_timeline_figure(self):
        """The plotly figure of :meth:`plot_memory_timeline`: stacked GiB per category over ms."""
        from holotrace.render import plotly_figures, plots_timeline

        plotly_figures.require_plotly("the memory timeline plot")
        times, sizes = _memory.memory_export_series(_memory.read_memory_export(self.path), hta_compat=True)
        return plotly_figures.figure(plots_timeline.memory_export(times, sizes, _memory.MEMORY_CATEGORIES))

    def plot_memory_timeline(self, save_graph: bool = False) -> None:
        """Stacked memory per category over time: shown in a notebook, or written to ``images/memory_plot.png``
        with ``save_graph`` (a static image needs kaleido). :meth:`memory_timeline_figure` returns the figure."""
        from holotrace.render.timeline import show_figure, write_figure

        fig = self.memory_timeline_figure()
        if save_graph:
            os.makedirs("images", exist_ok=True)
            write_figure(fig, os.path.join("images", "memory_plot.png"))
        else:
            show_figure(fig)
