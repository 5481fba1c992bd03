"""``TraceAnalysis``: Holistic Trace Analysis's API on holotrace's analyses.

An HTA notebook runs by changing its import line::

    # from hta.trace_analysis import TraceAnalysis
    from holotrace import TraceAnalysis

    analyzer = TraceAnalysis(trace_dir="traces/")
    analyzer.get_temporal_breakdown()

Method names, parameters, defaults, column names and row order are HTA 0.6.1's, except that every
``visualize`` defaults to ``False`` (plots need the ``plot`` extra: ``pip install holotrace[plot]``).

Each method is an adapter: it takes the job's view under HTA's rules (built once, when the object is
constructed, as HTA's constructor loads its tables), calls the one analysis of :mod:`holotrace.analysis`
with HTA's rule set, and shapes HTA's columns. Where HTA has a bug, the fixed behaviour is the default
and ``hta_compat=True`` (per call, or on the constructor) reproduces HTA: the rule set becomes
:data:`~holotrace.model.classify.HTA` instead of :data:`~holotrace.model.classify.HTA_FIXED`. Every
difference is listed in docs/compatibility.md. Nothing here mutates the loaded job or the view.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from holotrace.analysis import annotations as _anno
from holotrace.analysis import aten_ops as _aten
from holotrace.analysis import launches as _launch
from holotrace.analysis import sequences as _seq
from holotrace.analysis import stragglers as _strag
from holotrace.analysis.callstack import CallGraph, call_graph
from holotrace.analysis import idle as _idle
from holotrace.analysis import kernels as _kern
from holotrace.analysis.overlap import comm_comp_overlap
from holotrace.analysis.steps import profiler_steps
from holotrace.analysis.temporal import breakdown
from holotrace.compat.hta_table import hta_table
from holotrace.compat.inputs import load_inputs
from holotrace.errors import PlottingUnavailableError
from holotrace.model.classify import HTA, HTA_FIXED, RuleSet
from holotrace.model.view import JobView, job_view

__all__ = ["TraceAnalysis", "PlottingUnavailableError", "DEFAULT_TRACE_DIR"]

log = logging.getLogger("holotrace.compat")

DEFAULT_TRACE_DIR = str(Path(tempfile.gettempdir()) / "trace")  # HTA's default folder, for signature compatibility


def _plots():
    try:
        import plotly  # noqa: F401
    except ImportError:
        raise PlottingUnavailableError(
            "visualize=True needs plotly, which is not installed",
            fix="pip install 'holotrace[plot]', or call with visualize=False (the default) to get the data only",
        ) from None
    from holotrace.render import plots

    return plots


class TraceAnalysis:
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
        self.hta_compat = bool(hta_compat)
        if job is None:
            job = load_inputs(trace_files, trace_dir, cache=cache, workers=workers, strict=strict)
        self.job = job
        self.include_last_profiler_step = bool(include_last_profiler_step)
        self.figures: list = []
        # like HTA's constructor, leave every rank ready: each analysis call is then cheap
        self.view: JobView = job_view(job, HTA, include_last_step=self.include_last_profiler_step)
        self._tables: dict[tuple[int, bool], pd.DataFrame] = {}
        self._graphs: dict[tuple[int, bool], CallGraph] = {}

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

    def _figures(self, build: Callable[[object], list], show: bool = True, renderer: str = "") -> None:
        """Build (and, inside a notebook, show) the figures of a method; requires plotly."""
        plots = _plots()
        self.figures = build(plots)
        if show:
            plots.show(self.figures, renderer=renderer)

    # ------------------------------------------------------------------ breakdowns
    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        """Idle, compute and non-compute GPU time (µs) and their percentages per rank.

        ``kernel_time(us)`` is the span from the first to the last GPU activity of the rank. A rank
        with no GPU activity gets zeros and NaN percentages (HTA raises ``IndexError``).
        """
        t = breakdown(self.view)
        out = pd.DataFrame({"rank": t["rank"], "idle_time(us)": t["idle_us"], "compute_time(us)": t["compute_us"],
                            "non_compute_time(us)": t["non_compute_us"], "kernel_time(us)": t["span_us"]})
        for c in ("idle", "compute", "non_compute"):
            out[f"{c}_time_pctg"] = np.round(t[f"{c}_pctg"].to_numpy(), 2)
        if visualize:
            self._figures(lambda p: p.temporal_figures(out))
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
        cuts by count; kept rows of a folded group show per-name totals): it is
        part of HTA's definitions (``rules.hta_table``), so ``hta_compat`` does
        not change it. Elementary type segments are cut with ends before starts
        at equal times: HTA's zero-length ``sum = 0`` rows never appear.
        """
        t = _kern.type_breakdown(self.view, include_memory=include_memory_kernels)
        types = pd.DataFrame({"kernel_type": t["kernel_type"], "sum": t["time_us"].to_numpy().astype(np.int64),
                              "percentage": np.round(t["pctg"].to_numpy(dtype=np.float64), 1)})
        k = _kern.kernel_stats(self.view, num_kernels=num_kernels, duration_ratio=duration_ratio,
                               include_memory=include_memory_kernels).sort_values(["kernel_type", "name", "rank"], kind="stable")
        kernels = pd.DataFrame({"name": k["name"].to_numpy(), "sum (us)": k["sum_us"].to_numpy(), "max (us)": k["max_us"].to_numpy(),
                                "min (us)": k["min_us"].to_numpy(), "stddev": k["std_us"].to_numpy(),
                                "mean (us)": k["mean_us"].to_numpy(), "kernel_type": k["kernel_type"].to_numpy(),
                                "rank": k["rank"].to_numpy()})
        if visualize:
            self._figures(lambda p: p.kernel_figures(types, kernels), renderer=image_renderer)
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
        numbers are µs). Returns ``(idle_df, stats_df or None)``. Fixed by
        default: ``index_correlation == 0`` means "no launch" (HTA takes the
        event with index 0 for the launch; so does a facade constructed with
        ``hta_compat=True``), and a rank without GPU kernels gives no rows (HTA
        raises).
        """
        kw = dict(rules=self._rules(), ranks=self._ranks_arg(ranks), streams=streams,
                  consecutive_kernel_delay_us=consecutive_kernel_delay)
        b = _idle.idle_breakdown(self.view, **kw)
        b = b[b["operations"].to_numpy() > 0]  # HTA lists the categories that occur
        idle = pd.DataFrame({"rank": b["rank"].to_numpy(), "stream": b["stream"].to_numpy(),
                             "idle_category": b["idle_category"].to_numpy(), "idle_time": np.round(b["idle_us"].to_numpy(), 2),
                             "idle_time_ratio": np.round(b["idle_ratio"].to_numpy(), 2)})
        stats = None
        if show_idle_interval_stats:
            s = _idle.idle_interval_stats(self.view, **kw)
            cols = {"rank": "rank", "stream": "stream", "count": "count", "mean": "mean_us", "std": "std_us",
                    "min": "min_us", "25%": "p25_us", "50%": "p50_us", "75%": "p75_us", "max": "max_us"}
            stats = pd.DataFrame({h: s[c].to_numpy() for h, c in cols.items()}).astype({"count": np.float64}).round(2)
            stats.index = pd.Index(s["idle_category"].to_numpy(), name="idle_category")
        if visualize:
            self._figures(lambda p: p.idle_figures(idle, visualize_pctg))
        return idle, stats

    def get_comm_comp_overlap(self, visualize: bool = False) -> pd.DataFrame:
        """Percent of communication time overlapped by computation, per rank (NaN without communication)."""
        o = comm_comp_overlap(self.view)
        pctg = np.where(o["has_communication"], np.round(o["overlap_pctg"].to_numpy(), 2), np.nan)
        out = pd.DataFrame({"rank": o["rank"].to_numpy(), "comp_comm_overlap_pctg": pctg})
        if visualize:
            self._figures(lambda p: p.overlap_figures(out))
        return out

    def get_profiler_steps(self) -> List[int]:
        """Sorted ``ProfilerStep#N`` numbers present after loading (the last step is dropped by default)."""
        return profiler_steps(self.view)

    # ------------------------------------------------------------------ launches
    def get_cuda_kernel_launch_stats(
        self,
        ranks: list[int] | None = None,
        runtime_cutoff: int = 50,
        launch_delay_cutoff: int = 100,
        include_memory_events: bool = True,
        visualize: bool = False,
        hta_compat: bool | None = None,
    ) -> dict[int, pd.DataFrame]:
        """CPU launch duration, GPU duration and launch delay (µs) of every launch, per rank.

        Columns ``correlation, cpu_duration, gpu_duration, launch_delay`` (HTA's),
        plus the boolean sets HTA only plots: ``short_kernel`` (``cpu_duration <=
        runtime_cutoff`` and ``gpu_duration < cpu_duration``), ``runtime_outlier``
        (``cpu_duration > runtime_cutoff``) and ``launch_delay_outlier``
        (``launch_delay > launch_delay_cutoff``).

        By default every launch API of the rule table is paired (driver API,
        HIP, CUDA graphs; HTA only knows ``cudaLaunchKernel``/``cudaLaunchKernelExC``,
        MTIA's ``runFunction`` and the CUDA memcpy/memset calls), and only the
        launch call itself is the CPU side. ``hta_compat=True``: HTA's pairing.
        """
        out = _launch.launch_stats(self.view, rules=self._rules(hta_compat), ranks=self._ranks_arg(ranks),
                                   runtime_cutoff=runtime_cutoff, launch_delay_cutoff=launch_delay_cutoff,
                                   include_memory_events=include_memory_events)
        if visualize:
            self._figures(lambda p: p.launch_figures(out, runtime_cutoff, launch_delay_cutoff))
        return out

    def get_aten_op_kernels_and_delay(
        self,
        ranks: list[int] | None = None,
        sort_by: list[str] | None = None,
        visualize: bool = False,
        hta_compat: bool | None = None,
    ) -> dict[int, pd.DataFrame]:
        """Per ATen operator and kernel sequence: occurrences and mean delays (µs), per rank.

        ``avg_aten_op_launch_delay`` = operator start → first launch call;
        ``avg_runtime_delay`` = that call's start → its kernel's start.
        Fixed by default: each rank's frame holds that rank only (HTA carries
        the rows of earlier ranks into later ones), operator and launch must be
        on the same thread, HIP/driver launches count, launches without exactly
        one GPU partner are skipped with a warning (HTA raises), and a rank
        without records gives an empty frame (HTA: ``KeyError``).
        ``hta_compat=True`` reproduces the carry-over and the thread-blind match.
        """
        out = _aten.aten_op_kernels(self.view, rules=self._rules(hta_compat), ranks=self._ranks_arg(ranks),
                                    sort_by=sort_by)
        if visualize:
            self._figures(lambda p: p.aten_figures(out))
        return out

    # ------------------------------------------------------------------ kernel sequences
    def get_frequent_cuda_kernel_sequences(
        self,
        operator_name: str,
        output_dir: str,
        min_pattern_len: int = 3,
        rank: int = 0,
        top_k: int = 5,
        visualize: bool = False,
        compress_other_kernels: bool = True,
        hta_compat: bool | None = None,
    ) -> pd.DataFrame:
        """The most frequent GPU kernel sequences launched under operators named like ``operator_name``.

        ``operator_name`` is matched as a substring (as HTA) against every event
        name, user annotations included. Roots are the matching events with no
        matching ancestor (``hta_compat=True``: only those at the shallowest
        matching depth) that have at least ``min_pattern_len`` kernels below.
        Writes ``overlaid_<trace file>`` with the ``top_k`` patterns into
        ``output_dir`` (the input trace is never modified). Works on traces
        whose zero/negative durations make HTA's call-stack builder raise.

        Returns:
            ``pattern, count, GPU kernel duration (us), CPU op duration (us)``
            sorted by count (descending) then pattern; an empty frame (and no
            file) when nothing qualifies or the arguments are invalid.
        """
        rules = self._rules(hta_compat)
        if not operator_name:
            log.error("operator_name must be a non-empty string and a valid operator name in the trace file.")
            return pd.DataFrame()
        problem = _writable_dir_problem(output_dir)
        if problem:
            log.error("Argument output_dir `%s` is not a valid output path: %s.", output_dir, problem)
            return pd.DataFrame()
        res = _seq.frequent_kernel_sequences(self.view, operator_name, rules=rules, rank=rank,
                                             min_pattern_len=min_pattern_len, graph=self._call_graph(rank, rules))
        if res.patterns.empty:
            log.error("operator_name %s not found in the trace file, or no frequent cuda kernel sequences found.", operator_name)
            return pd.DataFrame() if rules.hta_quirks else res.patterns
        path = _seq.write_overlay(res, self.job.rank(rank).file, output_dir, top_k,
                                  strings=self.job.strings if compress_other_kernels else None)
        log.info("Overlaid trace file for rank %s has been generated at %s.", rank, path)
        if visualize:
            self._figures(lambda p: p.sequence_figures(res.patterns.head(top_k), rank))
        return res.patterns

    # ------------------------------------------------------------------ user annotations
    def get_gpu_kernels_with_user_annotations(
        self,
        rank: int,
        expand_names: bool = True,
        shorten_names: bool = True,
        hta_compat: bool | None = None,
    ) -> pd.DataFrame | None:
        """Every GPU operation of ``rank`` with the innermost GPU user annotation it runs under.

        Output: the rank table's GPU rows (kernels, memcpy/memset, stream syncs,
        ``Event Sync``/``Context Sync``) with ``end = ts + dur``, ``user_annotation``
        (name id, −1 for none) and, with ``expand_names``, ``s_name``, ``s_cat``,
        ``s_user_annotation`` (shortened with ``shorten_names``). ``None`` when
        the trace has no ``gpu_user_annotation`` events. Zero-duration operations
        are attributed to the annotation containing their start (HTA under
        pandas 3 never attributes them; ``hta_compat=True`` keeps that).
        """
        from holotrace.compat.hta_table import text_column

        names = self.view[rank]["name"]
        if self.job.strings.id("gpu_user_annotation") < 0:
            log.warning("Trace for rank %s does not contain any GPU user annotations", rank)
            return None
        ops, ann = _anno.annotate_gpu_ops(self.view, rank, rules=self._rules(hta_compat))
        table = self._table(rank, args=True)  # HTA returns the table's rows, every column but the names
        out = table.iloc[ops, table.columns.get_indexer(table.columns.drop(["s_name", "s_cat"]))]
        out = out.assign(end=out["ts"] + out["dur"], user_annotation=np.where(ann >= 0, names[np.clip(ann, 0, None)], -1))
        if expand_names:
            def text(ids):  # each distinct name decoded (and shortened) once
                return text_column(*_anno.shortened_ids(self.job.strings, ids) if shorten_names else (self.job.strings, ids))

            out = out.assign(s_name=text(names[ops]), s_cat=text(self.view[rank]["cat"][ops]),
                             s_user_annotation=text(out["user_annotation"].to_numpy()))
        return out.reset_index(drop=True)

    def get_gpu_user_annotation_breakdown(
        self,
        use_gpu_annotation: bool = True,
        visualize: bool = False,
        duration_ratio: float = 0.8,
        num_kernels: int = 1000,
        allowlist_patterns: list[str] | None = None,
        image_renderer: str | None = None,
        regex: bool = False,
    ) -> pd.DataFrame | None:
        """Time per user annotation per rank, top-k with ``others`` (HTA's aggregation, quirks kept).

        ``use_gpu_annotation``: GPU-timeline ranges (``gpu_user_annotation``);
        otherwise the CPU ranges (``user_annotation``, ``ProfilerStep#N`` included).
        ``allowlist_patterns`` are literal substrings as in HTA (whose
        documentation claims regular expressions); ``regex=True`` makes them
        regular expressions. ``None`` when the trace has no such annotations.
        """
        category = "gpu_user_annotation" if use_gpu_annotation else "user_annotation"
        if self.job.strings.id(category) < 0:
            log.warning("Trace does not contain any %s", category)
            return None
        allow = _anno.allowlisted_names(self.job.strings.table, allowlist_patterns, regex=regex)
        t = _anno.annotation_time(self.view, rules=HTA, gpu=use_gpu_annotation, num_kernels=num_kernels,
                                  duration_ratio=duration_ratio, allowlist=allow, sort="name")
        out = pd.DataFrame({"name": t["name"], **{k: t[c].to_numpy() for k, c in (
            ("sum (us)", "sum_us"), ("max (us)", "max_us"), ("min (us)", "min_us"), ("stddev", "std_us"),
            ("mean (us)", "mean_us"), ("rank", "rank"))}})
        if visualize:
            self._figures(lambda p: p.annotation_figures(out), renderer=image_renderer or "")
        return out

    # ------------------------------------------------------------------ stragglers
    def get_potential_stragglers(
        self,
        profiler_steps: list[int] | None = None,
        num_candidates: int = 2,
        visualize: bool = False,
        straggler_identification_impl: Callable[..., pd.Series] | None = None,
        hta_compat: bool | None = None,
    ) -> list[int]:
        """Ranks most likely to hold the others back, most likely first (HTA's late-start method).

        Fixed by default: communication kernels are recognised by the shared
        rule table (``ncclDevKernel_*`` and every other family; HTA only knows
        ``ncclKernel*``), stream 0 and step 0 count, a trace without
        ``ProfilerStep`` annotations is analysed as one step, only ranks with a
        positive score are returned (ties by rank), and a job that cannot tell
        (one rank, no long collective) gives ``[]`` with a warning instead of an
        exception. ``straggler_identification_impl`` takes an HTA-style scorer
        ``f(df, symbol_table, k, visualize) -> Series``. See
        :func:`holotrace.analysis.stragglers.straggler_report` for who waits
        for whom, with evidence.

        Raises:
            ValueError: ``profiler_steps`` names no available step.
        """
        def hta_scorer(steps):  # HTA's scorer reads every rank's table, cut to the steps, stacked
            parts = []
            for r in self.view.ranks:
                t = self._table(r, args=False)
                t = t.assign(iteration=0) if steps is None else t[np.isin(t["iteration"].to_numpy(), steps)]
                parts.append(t.assign(rank=np.int64(r)))
            symbols = _strag.SymbolTableView(self.job.strings.table)
            return straggler_identification_impl(pd.concat(parts, ignore_index=True), symbols, max(int(num_candidates), 1), False)

        out = _strag.potential_stragglers(self.view, rules=self._rules(hta_compat), profiler_steps=profiler_steps,
                                          num_candidates=num_candidates,
                                          scorer=hta_scorer if straggler_identification_impl else None)
        if visualize:
            self._figures(lambda p: p.straggler_figures(out))
        return out


def _writable_dir_problem(path) -> str | None:
    """Why ``path`` cannot take the overlay file, or None."""
    try:
        p = Path(path)
    except TypeError:
        return "not a path"
    if not p.exists():
        return "path does not exist"
    if not p.is_dir():
        return "path is not a directory"
    if not os.access(p, os.R_OK | os.W_OK):
        return "path is not readable and writable"
    return None
