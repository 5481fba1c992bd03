"""HTA-compatible launch, aten-op delay, kernel-sequence, user-annotation and straggler methods.

:class:`LaunchAndAnnotationMethods` is a mixin of
:class:`holotrace.compat.hta.TraceAnalysis`. It reads only shared, read-only
state of the facade:

* ``self.job`` — the loaded :class:`holotrace.model.job.Job`;
* ``self.include_last_profiler_step`` — the constructor flag;
* ``self._frame(rank)`` / ``self._frames()`` — HTA's per-rank tables (``hta_view.hta_frame``);
* ``self._ranks_arg(ranks)`` — HTA's ``None``/``[]`` → ``[0]`` rule;
* ``self._figures(method, build)`` — the ``visualize=True`` path.

Every method has HTA 0.6.1's name, parameters, defaults (``visualize``
defaults to ``False``), columns and row order. Where HTA has a bug the fixed
behaviour is the default and ``hta_compat=True`` (per call, or a
``hta_compat`` attribute on the instance) reproduces HTA; the differences are
listed in docs/compatibility.md. Nothing is mutated: results never depend on
call order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from holotrace.analysis import annotations as _anno
from holotrace.analysis import aten_ops as _aten
from holotrace.analysis import launches as _launch
from holotrace.analysis import sequences as _seq
from holotrace.analysis import stragglers as _strag
from holotrace.analysis.callstack import CallGraph, hta_call_graph

__all__ = ["LaunchAndAnnotationMethods"]

log = logging.getLogger("holotrace.compat")


def _kernel_launch_api_names() -> list[str]:
    from holotrace.model.classify import LAUNCH_APIS

    return sorted(n for n in LAUNCH_APIS if "Memcpy" not in n and "Memset" not in n)


class LaunchAndAnnotationMethods:
    """Mixin with HTA's launch/annotation/straggler methods."""

    # ------------------------------------------------------------------ helpers
    def _compat(self, hta_compat: bool | None) -> bool:
        if hta_compat is not None:
            return bool(hta_compat)
        return bool(getattr(self, "hta_compat", False))

    def _hta_call_graph(self, rank: int, hta_compat: bool) -> CallGraph:
        """The call graph of a rank's HTA table (cached on the job, keyed by everything it depends on)."""
        key = ("holotrace.hta_call_graph", int(rank), bool(self.include_last_profiler_step), bool(hta_compat))
        memo = getattr(self.job, "_memo", None)
        if memo is not None and key in memo:
            return memo[key]
        graph = hta_call_graph(self._frame(rank), hta_compat=hta_compat)
        if memo is not None:
            memo[key] = graph
        return graph

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
        compat = self._compat(hta_compat)
        out: dict[int, pd.DataFrame] = {}
        chosen = self._ranks_arg(ranks)
        columns = self._columns(chosen)
        for r in chosen:
            out[r] = _launch.hta_launch_stats(self._frame(r), include_memory_events, hta_compat=compat,
                                              strings=self.job.strings, columns=columns[r],
                                              flags=(runtime_cutoff, launch_delay_cutoff))
        if visualize:
            self._figures("get_cuda_kernel_launch_stats", lambda p: _launch_figures(out, runtime_cutoff, launch_delay_cutoff))
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
        compat = self._compat(hta_compat)
        chosen = self._ranks_arg(ranks)
        out: dict[int, pd.DataFrame] = {}
        carried: list[pd.DataFrame] = []
        for r in chosen:
            rec, skipped = _aten.aten_launch_records(
                self._frame(r),
                same_thread=not compat,
                launch_names=None if compat else _kernel_launch_api_names(),
            )
            if skipped:
                log.warning("rank %s: %d launch call(s) inside an ATen op without exactly one GPU event were skipped", r, skipped)
            if compat:
                carried.append(rec)
                rec = pd.concat(carried, ignore_index=True)
            out[r] = _aten.aggregate_aten_records(rec, sort_by)
        if visualize:
            self._figures("get_aten_op_kernels_and_delay", lambda p: _aten_figures(out))
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
        compat = self._compat(hta_compat)
        if not operator_name:
            log.error("operator_name must be a non-empty string and a valid operator name in the trace file.")
            return pd.DataFrame()
        problem = _writable_dir_problem(output_dir)
        if problem:
            log.error("Argument output_dir `%s` is not a valid output path: %s.", output_dir, problem)
            return pd.DataFrame()
        frame = self._frame(rank)
        graph = self._hta_call_graph(rank, compat)
        names = frame["s_name"].astype(object).fillna("").to_numpy()
        cand = _seq.match_names(names, operator_name, "substring")
        res = _seq.kernel_sequences(
            graph, names, frame["ts"].to_numpy(), frame["dur"].to_numpy(), frame["index"].to_numpy(),
            cand, min_pattern_len, "hta" if compat else "outermost",
        )
        if res.patterns.empty:
            log.error(
                "operator_name %s not found in the trace file, or no frequent cuda kernel sequences found.", operator_name
            )
            return pd.DataFrame() if compat else _seq.empty_patterns()
        k = min(int(top_k), len(res.patterns))
        ids = {s: i for i, s in enumerate(self.job.strings.table)} if compress_other_kernels else None
        path = _seq.write_overlaid_trace(
            self.job.rank(rank).file, output_dir, _seq.overlay_patterns(res, k),
            compress_other_kernels=compress_other_kernels, symbol_ids=ids,
        )
        log.info("Overlaid trace file for rank %s has been generated at %s.", rank, path)
        if visualize:
            self._figures("get_frequent_cuda_kernel_sequences", lambda p: _sequence_figures(res.patterns.head(k), rank))
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
        compat = self._compat(hta_compat)
        frame = self._frame(rank, full=True)  # the result carries every column of the table
        if self.job.strings.id("gpu_user_annotation") < 0:
            log.warning("Trace for rank %s does not contain any GPU user annotations", rank)
            return None
        return _anno.hta_gpu_kernels_with_user_annotations(
            frame, expand_names=expand_names, shorten=shorten_names, hta_compat=compat
        )

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
        out = _anno.hta_user_annotation_breakdown(
            self._frames(), category, duration_ratio=duration_ratio, num_kernels=num_kernels, allowlist=allow,
            strings=self.job.strings, columns=self._columns(),
        )
        if visualize:
            self._figures("get_gpu_user_annotation_breakdown", lambda p: _annotation_figures(out), renderer=image_renderer or "")
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
        compat = self._compat(hta_compat)
        symtab = _strag.SymbolTableView(self.job.strings.table) if straggler_identification_impl else None
        out = _strag.hta_potential_stragglers(
            self._frames(), profiler_steps, num_candidates, hta_compat=compat,
            scorer=straggler_identification_impl, symbol_table=symtab, id_names=self.job.strings.table,
            columns=self._columns(),
        )
        if visualize:
            self._figures("get_potential_stragglers", lambda p: _straggler_figures(out))
        return out


# ---------------------------------------------------------------------- helpers
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


def _launch_figures(stats: dict[int, pd.DataFrame], runtime_cutoff, launch_delay_cutoff) -> list:
    import plotly.express as px

    figs = []
    for r, df in stats.items():
        figs.append(px.histogram(df[df["short_kernel"]], x="cpu_duration",
                                 title=f"Short GPU kernels (gpu op duration < cpu op duration) on rank {r}"))
        figs.append(px.histogram(df[df["runtime_outlier"]], x="cpu_duration", nbins=300,
                                 title=f"Runtime Event Duration Outliers (duration > {runtime_cutoff} us) on rank {r}"))
        figs.append(px.histogram(df[df["launch_delay_outlier"]], x="launch_delay", nbins=300,
                                 title=f"Launch Delay Outliers (duration > {launch_delay_cutoff} us) on rank {r}"))
    return figs


def _aten_figures(out: dict[int, pd.DataFrame]) -> list:
    import plotly.graph_objects as go

    figs = []
    for r, df in out.items():
        figs.append(go.Figure(data=[go.Table(header={"values": list(df.columns)},
                                             cells={"values": [df[c] for c in df.columns]})],
                              layout={"title": f"ATen Operations, Associated Kernels, ATen and Runtime Delays for Rank {r}"}))
    return figs


def _sequence_figures(top: pd.DataFrame, rank: int) -> list:
    import plotly.express as px

    vis = top.assign(pattern=top["pattern"].str.replace("|", "<br>", regex=False))
    return [px.bar(vis, x=vis.index, y="count", hover_data=["pattern", "count"],
                   title=f"Top {len(top)} frequent patterns for rank {rank}")]


def _annotation_figures(out: pd.DataFrame) -> list:
    import plotly.express as px

    return [px.pie(part, values="sum (us)", names="name", title=f"Rank {r}") for r, part in out.groupby("rank")]


def _straggler_figures(ranks: list[int]) -> list:
    import plotly.express as px

    return [px.bar(x=[str(r) for r in ranks], y=list(range(len(ranks), 0, -1)), title="Potential stragglers")]
