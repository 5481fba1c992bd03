"""``TraceAnalysis``: Holistic Trace Analysis's API on holotrace's loader.

An HTA notebook runs by changing its import line::

    # from hta.trace_analysis import TraceAnalysis
    from holotrace import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir="traces/")
    analyzer.get_temporal_breakdown()

Method names, parameters, defaults, column names and row order are HTA
0.6.1's, except that every ``visualize`` defaults to ``False`` (plots need
the ``plot`` extra: ``pip install holotrace[plot]``). The analyses read
``holotrace.model.hta_view.hta_frame`` — HTA's own per-rank table rebuilt
from holotrace's model — so the numbers match HTA's. Where HTA crashes
(CPU-only ranks, rounding artefacts) these methods return a meaningful result
instead; every deliberate difference is listed in docs/compatibility.md.

Nothing here mutates the loaded job; every call returns new frames.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd

from holotrace.analysis.idle import hta_idle_time_breakdown
from holotrace.analysis.kernels import hta_kernel_breakdown
from holotrace.analysis.overlap import hta_comm_comp_overlap
from holotrace.analysis.steps import hta_profiler_steps
from holotrace.analysis.temporal import hta_temporal_breakdown
from holotrace.compat.hta_launches import LaunchAndAnnotationMethods
from holotrace.errors import PlottingUnavailableError, RankNotFoundError

__all__ = ["TraceAnalysis", "PlottingUnavailableError", "DEFAULT_TRACE_DIR"]

DEFAULT_TRACE_DIR = str(Path(tempfile.gettempdir()) / "trace")  # HTA's default folder, for signature compatibility


def _plotly():
    try:
        import plotly  # noqa: F401
    except ImportError:
        raise PlottingUnavailableError(
            "visualize=True needs plotly, which is not installed",
            fix="pip install 'holotrace[plot]', or call with visualize=False (the default) to get the data only",
        ) from None
    from holotrace.render import plots

    return plots


class TraceAnalysis(LaunchAndAnnotationMethods):
    """HTA-compatible analysis of one job's traces.

    Args:
        trace_files: a ``{rank: file}`` map (files relative to ``trace_dir``
            unless absolute) or a list of files; ``None`` loads every trace
            file in ``trace_dir``.
        trace_dir: folder of the job's trace files.
        include_last_profiler_step: keep the last ``ProfilerStep`` (HTA drops
            it, and everything launched in it, by default).
        job: an already loaded :class:`holotrace.model.job.Job` (skips loading).
        cache, workers, strict: passed to :func:`holotrace.load`.

    Attributes:
        job: the loaded job (read-only).
        figures: the plotly figures of the last call made with ``visualize=True``.
    """

    def __init__(
        self,
        trace_files: Optional[Union[Dict[int, str], List[str]]] = None,
        trace_dir: str = DEFAULT_TRACE_DIR,
        include_last_profiler_step: Optional[bool] = False,
        *,
        job=None,
        cache: bool = True,
        workers: Optional[int] = None,
        strict: bool = False,
        hta_compat: bool = False,
    ):
        """HTA's constructor; the keyword-only arguments are holotrace's.

        ``hta_compat=True`` makes the launch, kernel-sequence, user-annotation and straggler methods
        reproduce HTA's known bugs too (see docs/compatibility.md); each of those methods also takes
        ``hta_compat`` per call. The breakdown methods always return HTA's numbers.
        """
        self.hta_compat = bool(hta_compat)
        if job is None:
            job = _load(trace_files, trace_dir, cache=cache, workers=workers, strict=strict)
        self.job = job
        self.include_last_profiler_step = bool(include_last_profiler_step)
        self.figures: list = []
        self._frame_cache: dict[tuple[int, bool], pd.DataFrame] = {}
        # like HTA's constructor, leave the per-rank tables ready: every analysis call is then cheap
        self._frames()

    # ------------------------------------------------------------------ shared state (read-only)
    def _frame(self, rank: int, full: bool = False) -> pd.DataFrame:
        """HTA's loaded table of one rank (cached; callers must not modify it).

        Without ``full``, only the columns the analyses read (``hta_frame(lean=True)``); ``full``
        gives every column of HTA's table, for methods that return table rows.
        """
        from holotrace.model.hta_view import hta_frame

        rank = int(rank)
        key = (rank, bool(full))
        if key not in self._frame_cache:
            if rank not in self.job.traces:
                raise RankNotFoundError(f"rank {rank} is not in this job (ranks: {self.job.ranks})")
            self._frame_cache[key] = hta_frame(self.job, rank, self.include_last_profiler_step, lean=not full)
        return self._frame_cache[key]

    def _frames(self) -> dict[int, pd.DataFrame]:
        """``{rank: HTA table}`` for every loaded rank, ascending."""
        missing = [r for r in self.job.ranks if (int(r), False) not in self._frame_cache]
        if len(missing) > 1:
            from holotrace.model.hta_view import hta_frames

            for r, df in hta_frames(self.job, missing, self.include_last_profiler_step, lean=True).items():
                self._frame_cache[(r, False)] = df
        return {r: self._frame(r) for r in self.job.ranks}

    def _columns(self, ranks: Optional[Sequence[int]] = None) -> dict[int, dict]:
        """``{rank: the lean table's columns as numpy arrays}`` (see ``hta_view.hta_columns``); default every rank."""
        from holotrace.model.hta_view import hta_columns

        if ranks is None:
            self._frames()
            ranks = self.job.ranks
        out = {}
        for r in ranks:
            self._frame(r)  # checks the rank and builds its table
            out[int(r)] = hta_columns(self.job, int(r), self.include_last_profiler_step, lean=True)
        return out

    def _ranks_arg(self, ranks: Optional[Sequence[int]]) -> list[int]:
        """HTA's per-rank argument rule: ``None`` or ``[]`` → ``[0]``; unknown ranks raise."""
        chosen = [0] if not ranks else [int(r) for r in ranks]
        for r in chosen:
            if r not in self.job.traces:
                raise RankNotFoundError(f"rank {r} is not in this job (ranks: {self.job.ranks})")
        return chosen

    def _figures(self, method: str, build: Callable[[object], list], show: bool = True, renderer: str = "") -> None:
        """Build (and, inside a notebook, show) the figures of ``method``; requires plotly."""
        plots = _plotly()
        self.figures = build(plots)
        if show:
            plots.show(self.figures, renderer=renderer)

    # ------------------------------------------------------------------ analyses
    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        """Idle, compute and non-compute GPU time (µs) and their percentages per rank.

        ``kernel_time(us)`` is the span from the first to the last GPU
        activity of the rank. A rank with no GPU activity gets zeros and NaN
        percentages (HTA raises ``IndexError``).
        """
        out = hta_temporal_breakdown(self._frames())
        if visualize:
            self._figures("get_temporal_breakdown", lambda p: p.temporal_figures(out))
        return out

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = False,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """Time by kernel type over all ranks, and per-kernel statistics per rank and type.

        Returns ``(kernel_type_df, kernel_df)`` exactly as HTA: the top-k cut
        is HTA's (``duration_ratio`` is a quantile of cumulative sums, so it
        cuts by count; kept rows of a folded group show per-name totals). The
        native :func:`holotrace.analysis.kernels.kernel_stats` has the fixed
        definition.
        """
        types, kernels = hta_kernel_breakdown(self._frames(), duration_ratio, num_kernels, include_memory_kernels)
        if visualize:
            self._figures("get_gpu_kernel_breakdown", lambda p: p.kernel_figures(types, kernels), renderer=image_renderer)
        return types, kernels

    def get_idle_time_breakdown(
        self,
        ranks: Optional[List[int]] = None,
        streams: Optional[List[int]] = None,
        visualize: bool = False,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """Idle time per stream split into host_wait, kernel_wait and other.

        ``consecutive_kernel_delay`` is in µs (HTA's docstring says ns; its
        numbers are µs). Returns ``(idle_df, stats_df or None)``.
        """
        chosen = self._ranks_arg(ranks)
        idle, stats = hta_idle_time_breakdown(
            {r: self._frame(r) for r in chosen}, chosen, streams, show_idle_interval_stats, consecutive_kernel_delay
        )
        if visualize:
            self._figures("get_idle_time_breakdown", lambda p: p.idle_figures(idle, visualize_pctg))
        return idle, stats

    def get_comm_comp_overlap(self, visualize: bool = False) -> pd.DataFrame:
        """Percent of communication time overlapped by computation, per rank (NaN without communication)."""
        out = hta_comm_comp_overlap(self._frames())
        if visualize:
            self._figures("get_comm_comp_overlap", lambda p: p.overlap_figures(out))
        return out

    def get_profiler_steps(self) -> List[int]:
        """Sorted ``ProfilerStep#N`` numbers present after loading (the last step is dropped by default)."""
        return hta_profiler_steps(self._frames())


def _load(trace_files, trace_dir: str, *, cache: bool, workers: Optional[int], strict: bool):
    """Load what HTA's constructor names: a rank→file map, a list of files, or a folder."""
    from holotrace import load

    base = Path(trace_dir)
    if trace_files is None:
        return load(base, cache=cache, workers=workers, strict=strict)
    if isinstance(trace_files, dict):
        wanted = {int(r): _resolve(base, f) for r, f in trace_files.items()}
        job = load([wanted[r] for r in sorted(wanted)], cache=cache, workers=workers, strict=strict)
        return _rekey(job, wanted)
    if isinstance(trace_files, (list, tuple)):
        return load([_resolve(base, f) for f in trace_files], cache=cache, workers=workers, strict=strict)
    raise TypeError(f"trace_files must be a dict {{rank: file}} or a list of files, not {type(trace_files).__name__}")


def _resolve(base: Path, f: str) -> str:
    p = Path(f)
    return str(p if p.is_absolute() or p.exists() else base / p)


def _rekey(job, wanted: dict[int, str]):
    """Use the caller's rank numbers when an explicit ``{rank: file}`` map disagrees with the files."""
    from dataclasses import replace

    by_file = {str(Path(t.file).resolve()): r for r, t in job.traces.items()}
    mapping = {}
    for rank, f in wanted.items():
        r = by_file.get(str(Path(f).resolve()))
        if r is not None:
            mapping[r] = rank
    if all(k == v for k, v in mapping.items()):
        return job
    return replace(job, traces={mapping.get(r, r): t for r, t in job.traces.items()}, _memo={})
