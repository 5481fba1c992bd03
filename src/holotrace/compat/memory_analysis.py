"""HTA's ``MemoryAnalysis`` (``hta.memory_analysis``) on PyTorch's memory-timeline export.

The input is the file ``profile.export_memory_timeline("name.raw.json.gz")`` writes (not a Kineto trace).
``_process_raw_events()`` gives HTA's ``(times, sizes)`` lists exactly; ``plot_memory_timeline`` draws HTA's
stacked areas (``plot`` extra). Additions: plain ``.json`` files are read too, :meth:`MemoryAnalysis.timeline`
returns the data as a frame (HTA's duplicate first instant merged unless ``hta_compat``) and
:meth:`MemoryAnalysis.peaks` the peak per category.
"""

from __future__ import annotations

import os
from typing import List, Tuple

import pandas as pd

from holotrace.analysis import memory as _memory
from holotrace.errors import PlottingUnavailableError

__all__ = ["MemoryAnalysis"]


class MemoryAnalysis:
    """Memory used by each category (parameters, activations, gradients ...) over time."""

    def __init__(self, path):
        self.path = path

    def _process_raw_events(self) -> Tuple[List[int], List[List[int]]]:
        """HTA's ``([timestamps ns], [[bytes per category] per timestamp])``."""
        from holotrace.render.timeline import memory_export_figure, write_figure

        times, sizes = _memory.memory_export_series(_memory.read_memory_export(self.path), hta_compat=True)
        return times.tolist(), sizes.tolist()

    def timeline(self, hta_compat: bool = False) -> pd.DataFrame:
        """``ts`` (ns) and live bytes per category after each instant."""
        return _memory.memory_export_timeline(self.path, hta_compat=hta_compat)

    def peaks(self) -> pd.DataFrame:
        """Peak live bytes per category and in total, with the time of each peak."""
        return _memory.memory_export_peaks(self.path)

    def plot_memory_timeline(self, save_graph: bool = False):
        """Stacked memory per category over time; ``save_graph`` writes ``images/memory_plot.png``.

        Returns the figure (HTA returns None and shows it).
        """
        try:
            import plotly  # noqa: F401
        except ImportError:  # pragma: no cover - plotly missing
            raise PlottingUnavailableError("plot_memory_timeline needs plotly, which is not installed",
                                           fix="pip install 'holotrace[plot]', or use MemoryAnalysis.timeline()") from None
        from holotrace.render.timeline import memory_export_figure, write_figure

        times, sizes = _memory.memory_export_series(_memory.read_memory_export(self.path), hta_compat=True)
        fig = memory_export_figure(times, sizes, _memory.MEMORY_CATEGORIES)
        if save_graph:
            os.makedirs("images", exist_ok=True)
            write_figure(fig, "images/memory_plot.png")
        else:
            fig.show()
        return fig
