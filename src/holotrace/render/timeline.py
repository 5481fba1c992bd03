"""Writing and showing the timeline figures.

The figures themselves are chart descriptions built by :mod:`holotrace.render.plots_timeline` and drawn by
:mod:`holotrace.render.plotly_figures` (the ``plot`` extra: a missing plotly is a
:class:`~holotrace.errors.PlottingUnavailableError`); :func:`gpu_timeline_figure` is that pair for the frame of
:func:`holotrace.analysis.timeline.gpu_timeline`.
"""

from __future__ import annotations

import importlib.util

import pandas as pd

from holotrace.errors import PlottingUnavailableError
from holotrace.render import plotly_figures, plots_timeline

__all__ = ["gpu_timeline_figure", "write_figure", "show_figure"]


def gpu_timeline_figure(
    frame: pd.DataFrame, title: str = "GPU timeline", *, color: str = "kernel_type", min_width_us: float = 0.0
):
    """The plotly figure of :func:`holotrace.render.plots_timeline.gpu_operations` (same arguments)."""
    return plotly_figures.figure(plots_timeline.gpu_operations(frame, title, color=color, min_width_us=min_width_us))


def write_figure(fig, path: str) -> None:
    """``.html`` → an HTML page; any other suffix → a static image (needs kaleido)."""
    if str(path).endswith(".html"):
        fig.write_html(path)
        return
    if importlib.util.find_spec("kaleido") is None:
        raise PlottingUnavailableError(
            f"writing the static image {path} needs kaleido, which is not installed",
            path=None,
            fix="pip install kaleido, or save as .html",
        )
    fig.write_image(path)


def show_figure(fig) -> None:
    """Show a figure inside a notebook; elsewhere do nothing (never opens a browser)."""
    plotly_figures.show([fig])
