"""HTA's breakdown methods: temporal, kernel, idle time, communication overlap, profiler steps."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis import idle as _idle
from holotrace.analysis import kernels as _kern
from holotrace.analysis.overlap import comm_comp_overlap
from holotrace.analysis.steps import profiler_steps
from holotrace.analysis.temporal import breakdown
from holotrace.compat.facade_base import FacadeBase

__all__ = ["BreakdownMethods"]


class BreakdownMethods(FacadeBase):
    """HTA's breakdown methods: temporal, kernel, idle time, communication overlap, profiler steps."""

    # ------------------------------------------------------------------ breakdowns
    def get_temporal_breakdown(self, visualize: bool = False) -> pd.DataFrame:
        """Idle, compute and non-compute GPU time (µs) and their percentages per rank.

        ``kernel_time(us)`` is the span from the first to the last GPU activity of the rank. A rank
        with no GPU activity gets zeros and NaN percentages (HTA raises ``IndexError``).
        """
        t = breakdown(self.view)
        out = pd.DataFrame(
            {
                "rank": t["rank"],
                "idle_time(us)": t["idle_us"],
                "compute_time(us)": t["compute_us"],
                "non_compute_time(us)": t["non_compute_us"],
                "kernel_time(us)": t["span_us"],
            }
        )
        for c in ("idle", "compute", "non_compute"):
            out[f"{c}_time_pctg"] = np.round(t[f"{c}_pctg"].to_numpy(), 2)
        if visualize:
            self._figures(lambda p: p.temporal_breakdown(out))
        return out

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = False,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Time by kernel type over all ranks, and per-kernel statistics per rank and type.

        Returns ``(kernel_type_df, kernel_df)`` exactly as HTA: the top-k cut
        is HTA's (``duration_ratio`` is a quantile of cumulative sums, so it
        cuts by count; kept rows of a folded group show per-name totals): it is
        part of HTA's definitions (``rules.hta_table``), so ``hta_compat`` does
        not change it. Elementary type segments are cut with ends before starts
        at equal times: HTA's zero-length ``sum = 0`` rows never appear.
        """
        t = _kern.type_breakdown(self.view, include_memory=include_memory_kernels)
        types = pd.DataFrame(
            {
                "kernel_type": t["kernel_type"],
                "sum": t["time_us"].to_numpy().astype(np.int64),
                "percentage": np.round(t["pctg"].to_numpy(dtype=np.float64), 1),
            }
        )
        k = _kern.kernel_stats(
            self.view, num_kernels=num_kernels, duration_ratio=duration_ratio, include_memory=include_memory_kernels
        ).sort_values(["kernel_type", "name", "rank"], kind="stable")
        kernels = pd.DataFrame(
            {
                "name": k["name"].to_numpy(),
                "sum (us)": k["sum_us"].to_numpy(),
                "max (us)": k["max_us"].to_numpy(),
                "min (us)": k["min_us"].to_numpy(),
                "stddev": k["std_us"].to_numpy(),
                "mean (us)": k["mean_us"].to_numpy(),
                "kernel_type": k["kernel_type"].to_numpy(),
                "rank": k["rank"].to_numpy(),
            }
        )
        if visualize:
            self._figures(lambda p: [p.kernel_type_pie(types), *p.kernel_per_rank(kernels)], renderer=image_renderer)
        return types, kernels

    def get_idle_time_breakdown(
        self,
        ranks: Optional[list[int]] = None,
        streams: Optional[list[int]] = None,
        visualize: bool = False,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """Idle time per stream split into host_wait, kernel_wait and other.

        ``consecutive_kernel_delay`` is in µs (HTA's docstring says ns; its
        numbers are µs). Returns ``(idle_df, stats_df or None)``. Fixed by
        default: ``index_correlation == 0`` means "no launch" (HTA takes the
        event with index 0 for the launch; so does a facade constructed with
        ``hta_compat=True``), and a rank without GPU kernels gives no rows (HTA
        raises).
        """
        kw = dict(
            rules=self._rules(),
            ranks=self._ranks_arg(ranks),
            streams=streams,
            consecutive_kernel_delay_us=consecutive_kernel_delay,
        )
        b = _idle.idle_breakdown(self.view, **kw)
        b = b[b["operations"].to_numpy() > 0]  # HTA lists the categories that occur
        idle = pd.DataFrame(
            {
                "rank": b["rank"].to_numpy(),
                "stream": b["stream"].to_numpy(),
                "idle_category": b["idle_category"].to_numpy(),
                "idle_time": np.round(b["idle_us"].to_numpy(), 2),
                "idle_time_ratio": np.round(b["idle_ratio"].to_numpy(), 2),
            }
        )
        stats = None
        if show_idle_interval_stats:
            s = _idle.idle_interval_stats(self.view, **kw)
            cols = {
                "rank": "rank",
                "stream": "stream",
                "count": "count",
                "mean": "mean_us",
                "std": "std_us",
                "min": "min_us",
                "25%": "p25_us",
                "50%": "p50_us",
                "75%": "p75_us",
                "max": "max_us",
            }
            stats = pd.DataFrame({h: s[c].to_numpy() for h, c in cols.items()}).astype({"count": np.float64}).round(2)
            stats.index = pd.Index(s["idle_category"].to_numpy(), name="idle_category")
        if visualize:
            self._figures(lambda p: p.idle_per_stream(idle, visualize_pctg))
        return idle, stats

    def get_comm_comp_overlap(self, visualize: bool = False) -> pd.DataFrame:
        """Percent of communication time overlapped by computation, per rank (NaN without communication)."""
        o = comm_comp_overlap(self.view)
        pctg = np.where(o["has_communication"], np.round(o["overlap_pctg"].to_numpy(), 2), np.nan)
        out = pd.DataFrame({"rank": o["rank"].to_numpy(), "comp_comm_overlap_pctg": pctg})
        if visualize:
            self._figures(lambda p: p.comm_overlap(out["rank"], out["comp_comm_overlap_pctg"]))
        return out

    def get_profiler_steps(self) -> list[int]:
        """Sorted ``ProfilerStep#N`` numbers present after loading (the last step is dropped by default)."""
        return profiler_steps(self.view)
