"""HTA's kernel-launch methods: launch statistics, ATen-op delays, frequent kernel sequences."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from holotrace.analysis import aten_ops as _aten
from holotrace.analysis import launches as _launch
from holotrace.analysis import sequences as _seq
from holotrace.compat.facade_base import FacadeBase, log

__all__ = ["LaunchMethods"]


class LaunchMethods(FacadeBase):
    """HTA's kernel-launch methods: launch statistics, ATen-op delays, frequent kernel sequences."""

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
        launch call itself is the CPU side. ``hta_compat=True``: HTA's pairing and HTA's four columns only.
        """
        rules = self._rules(hta_compat)
        out = _launch.launch_stats(
            self.view,
            rules=rules,
            ranks=self._ranks_arg(ranks),
            runtime_cutoff=runtime_cutoff,
            launch_delay_cutoff=launch_delay_cutoff,
            include_memory_events=include_memory_events,
        )
        if visualize:
            self._figures(lambda p: p.launch_histograms(out, runtime_cutoff, launch_delay_cutoff))
        if rules.hta_quirks:
            out = {r: df[list(df.columns[:4])] for r, df in out.items()}
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
        out = _aten.aten_op_kernels(
            self.view, rules=self._rules(hta_compat), ranks=self._ranks_arg(ranks), sort_by=sort_by
        )
        if visualize:
            self._figures(lambda p: p.aten_tables(out))
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
        res = _seq.frequent_kernel_sequences(
            self.view,
            operator_name,
            rules=rules,
            rank=rank,
            min_pattern_len=min_pattern_len,
            graph=self._call_graph(rank, rules),
        )
        if res.patterns.empty:
            log.error(
                "operator_name %s not found in the trace file, or no frequent cuda kernel sequences found.",
                operator_name,
            )
            return pd.DataFrame() if rules.hta_quirks else res.patterns
        path = _seq.write_overlay(
            res,
            self.job.rank(rank).file,
            output_dir,
            top_k,
            strings=self.job.strings if compress_other_kernels else None,
        )
        log.info("Overlaid trace file for rank %s has been generated at %s.", rank, path)
        if visualize:
            self._figures(lambda p: p.kernel_sequences(res.patterns.head(top_k), rank))
        return res.patterns


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
