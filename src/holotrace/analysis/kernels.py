"""GPU kernel breakdown: time by kernel type and the top kernels (spec 20 §2).

Native API (holotrace schema, µs in column names):

* :func:`type_breakdown` — wall time during which each combination of kernel
  types (``COMPUTATION``, ``COMMUNICATION``, ``MEMORY``) runs, per rank or
  summed over ranks;
* :func:`kernel_stats` — per rank and type, the top kernels by total time
  with the rest folded into ``others`` (:func:`holotrace.analysis.topk.top_k`);
* :func:`rank_distribution` — for the kernels with the most total time over
  the job, the per-rank duration distribution: the view that exposes a
  straggler rank.

HTA-compatible: :func:`hta_kernel_breakdown` reproduces
``get_gpu_kernel_breakdown`` on HTA's per-rank tables.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import intervals
from holotrace.analysis._select import KernelType, decode, gpu_activity, hta_kernel_types, hta_stream_rows, job_ranks, name_codes
from holotrace.analysis.topk import top_k, top_k_hta

__all__ = [
    "analysed_types",
    "type_label",
    "type_times",
    "type_breakdown",
    "kernel_stats",
    "rank_distribution",
    "hta_kernel_breakdown",
    "HTA_KERNEL_COLUMNS",
    "HTA_TYPE_COLUMNS",
]

HTA_TYPE_COLUMNS = ["kernel_type", "sum", "percentage"]
HTA_KERNEL_COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "kernel_type", "rank"]


def analysed_types(include_memory: bool = True) -> list[KernelType]:
    """The kernel types analysed, in HTA's fixed order (bit i = 1 << i)."""
    types = [KernelType.COMPUTATION, KernelType.COMMUNICATION]
    if include_memory:
        types.append(KernelType.MEMORY)
    return types


def type_label(mask: int, types: Sequence[KernelType]) -> str:
    """``"COMPUTATION overlapping MEMORY"``-style label of a bit mask over ``types``."""
    return " overlapping ".join(t.name for i, t in enumerate(types) if mask & (1 << i))


def type_times(
    start: np.ndarray, end: np.ndarray, ktype: np.ndarray, types: Sequence[KernelType], truncate: bool = False
) -> dict[str, float]:
    """Wall time of each combination of concurrently running kernel types.

    Args:
        start, end, ktype: GPU intervals and their kernel-type codes.
        types: the analysed types (bit order).
        truncate: truncate every elementary segment to an integer (HTA does).

    Returns:
        label → time, only labels with a positive time.
    """
    sets = [intervals.merge(start[ktype == t], end[ktype == t]) for t in types]
    s, e, m = intervals.sweep(sets)
    seg = e - s
    if truncate:
        seg = np.trunc(seg.astype(np.float64)).astype(np.int64)
    masks, totals = intervals.group_sum(m, seg)
    return {type_label(int(k), types): v for k, v in zip(masks, totals) if v > 0}


def _order_types(df: pd.DataFrame, value: str) -> pd.DataFrame:
    """Sort by ``value`` descending, label ascending among ties."""
    return df.sort_values(["kernel_type"], kind="stable").sort_values(
        value, ascending=False, kind="stable", ignore_index=True
    )


def _gpu_table(job, rank: int) -> pd.DataFrame:
    ev = job.rank(rank).events
    g = ev[gpu_activity(ev)]
    return pd.DataFrame(
        {
            "start": g["ts_ns"].to_numpy(),
            "end": g["end_ns"].to_numpy(),
            "dur": g["dur_ns"].to_numpy(),
            "ktype": g["kernel_type"].to_numpy(),
            "name_id": g["name"].to_numpy(),
        }
    )


def type_breakdown(
    job, *, ranks: Optional[Sequence[int]] = None, include_memory: bool = True, by_rank: bool = False
) -> pd.DataFrame:
    """Time by kernel-type combination.

    Args:
        job: a loaded Job.
        ranks: ranks to include (default all).
        include_memory: analyse MEMORY kernels as a third type.
        by_rank: one block of rows per rank instead of sums over ranks.

    Returns:
        Columns ``[rank,] kernel_type, time_us, pctg``: ``kernel_type`` is a
        label such as ``COMPUTATION overlapping COMMUNICATION``; ``pctg`` is the
        percent of the (rank's, or job's) total, unrounded. Rows by time
        descending, label ascending among ties; zero-time labels are omitted.
    """
    types = analysed_types(include_memory)
    rows = []
    for rank in job_ranks(job, ranks):
        g = _gpu_table(job, rank)
        times = type_times(g["start"].to_numpy(), g["end"].to_numpy(), g["ktype"].to_numpy(), types)
        rows += [(rank, label, t / 1000.0) for label, t in times.items()]
    df = pd.DataFrame(rows, columns=["rank", "kernel_type", "time_us"]).astype(
        {"rank": np.int64, "kernel_type": object, "time_us": np.float64}
    )
    if by_rank:
        parts = []
        for rank, part in df.groupby("rank", sort=True):
            part = _order_types(part, "time_us")
            part["pctg"] = 100.0 * part["time_us"] / part["time_us"].sum()
            parts.append(part)
        if parts:
            return pd.concat(parts, ignore_index=True)
        return df.assign(pctg=pd.Series(dtype=np.float64))
    out = df.groupby("kernel_type", sort=True)["time_us"].sum().reset_index()
    out = _order_types(out, "time_us")
    total = out["time_us"].sum()
    out["pctg"] = 100.0 * out["time_us"] / total if total > 0 else np.nan
    return out


_STAT_COLUMNS = ["count", "num_names", "sum_us", "max_us", "min_us", "mean_us", "std_us"]


def kernel_stats(
    job,
    *,
    ranks: Optional[Sequence[int]] = None,
    num_kernels: int = 10,
    duration_ratio: float = 0.8,
    include_memory: bool = True,
) -> pd.DataFrame:
    """Top kernels per rank and kernel type, the rest folded into ``others``.

    Kept kernels carry their per-instance statistics; ``others`` carries
    statistics over all folded instances (see :func:`holotrace.analysis.topk.top_k`).

    Returns:
        Columns ``rank, kernel_type, name, count, num_names, sum_us, max_us,
        min_us, mean_us, std_us`` (``std_us`` sample standard deviation, 0 for
        one instance); rows by rank, type (COMPUTATION, COMMUNICATION, MEMORY),
        then ``sum_us`` descending with ``others`` last.
    """
    types = analysed_types(include_memory)
    parts = []
    for rank in job_ranks(job, ranks):
        g = _gpu_table(job, rank)
        for t in types:
            sel = g[g["ktype"].to_numpy() == t]
            if sel.empty:
                continue
            agg = top_k(decode(job, sel["name_id"].to_numpy()), sel["dur"].to_numpy() / 1000.0,
                        num_kernels=num_kernels, duration_ratio=duration_ratio)
            agg = agg.rename(columns={c: f"{c}_us" for c in ("sum", "max", "min", "mean", "std")})
            agg.insert(0, "kernel_type", t.name)
            agg.insert(0, "rank", np.int64(rank))
            parts.append(agg)
    cols = ["rank", "kernel_type", "name", *_STAT_COLUMNS]
    if not parts:
        return _empty(cols)
    return pd.concat(parts, ignore_index=True)[cols]


def _empty(cols: list[str]) -> pd.DataFrame:
    dtypes = {"rank": np.int64, "count": np.int64, "num_names": np.int64, "kernel_type": object, "name": object}
    return pd.DataFrame({c: pd.Series(dtype=dtypes.get(c, np.float64)) for c in cols})


def rank_distribution(
    job, *, ranks: Optional[Sequence[int]] = None, top: int = 10, include_memory: bool = True
) -> pd.DataFrame:
    """Per-rank duration distribution of the kernels with the most total time over the job.

    Args:
        top: how many kernels (by total time summed over ranks, all analysed types together).

    Returns:
        Columns ``kernel_type, name, rank, count, sum_us, max_us, min_us,
        mean_us, std_us, sum_vs_median`` — ``sum_vs_median`` is the rank's
        ``sum_us`` over the median of ``sum_us`` across the ranks that ran the
        kernel (1.0 = typical; a straggler rank stands out). Rows by the
        kernel's job total descending, then rank.
    """
    types = analysed_types(include_memory)
    frames = []
    for rank in job_ranks(job, ranks):
        g = _gpu_table(job, rank)
        g = g[np.isin(g["ktype"].to_numpy(), [int(t) for t in types])]
        frames.append(g.assign(rank=np.int64(rank)))
    cols = ["kernel_type", "name", "rank", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us", "sum_vs_median"]
    if not frames or sum(len(f) for f in frames) == 0:
        return _empty(cols)
    allg = pd.concat(frames, ignore_index=True)
    allg["dur_us"] = allg["dur"] / 1000.0
    totals = allg.groupby("name_id")["dur_us"].sum()
    names = decode(job, totals.index.to_numpy())
    order = pd.DataFrame({"name_id": totals.index, "name": names, "total": totals.to_numpy()})
    order = order.sort_values("name", kind="stable").sort_values("total", ascending=False, kind="stable")
    chosen = order.head(top).reset_index(drop=True)
    sel = allg[allg["name_id"].isin(chosen["name_id"])]
    stats = sel.groupby(["name_id", "rank"])["dur_us"].agg(["count", "sum", "max", "min", "mean", "std"]).reset_index()
    stats["std"] = stats["std"].fillna(0.0)
    ktype = sel.groupby("name_id")["ktype"].first()
    type_names = np.array([t.name for t in sorted(KernelType)], dtype=object)
    stats["kernel_type"] = type_names[ktype.reindex(stats["name_id"]).to_numpy().astype(np.int64)]
    stats = stats.merge(chosen[["name_id", "name"]].reset_index().rename(columns={"index": "pos"}), on="name_id")
    med = stats.groupby("name_id")["sum"].transform("median")
    stats["sum_vs_median"] = np.where(med > 0, stats["sum"] / med.where(med > 0, 1.0), np.nan)
    stats = stats.sort_values(["pos", "rank"], ignore_index=True)
    stats = stats.rename(columns={"sum": "sum_us", "max": "max_us", "min": "min_us", "mean": "mean_us", "std": "std_us"})
    stats["count"] = stats["count"].astype(np.int64)
    return stats[cols]


# --------------------------------------------------------------------------- HTA compat


def hta_kernel_breakdown(
    frames: Mapping[int, pd.DataFrame],
    duration_ratio: float = 0.8,
    num_kernels: int = 10,
    include_memory_kernels: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """HTA's ``get_gpu_kernel_breakdown`` on HTA-shaped per-rank tables.

    Returns:
        ``(kernel_type_df, kernel_df)`` with HTA's columns, dtypes and row
        order. Deviation (spec 20 §2.1, FIX): elementary segments are cut with
        ends before starts at equal times, so the zero-length combined
        segments HTA sometimes reports as ``sum = 0`` rows never appear.
        ``kernel_df`` duration columns are float64 even where HTA's would be int64.
    """
    types = analysed_types(include_memory_kernels)
    type_rows: list[tuple[str, int]] = []
    kernel_parts = []
    for rank in sorted(frames):
        df = frames[rank]
        rows = hta_stream_rows(df)
        names = name_codes(df, rows)
        ktype = hta_kernel_types(names)
        ts = df["ts"].to_numpy(dtype=np.float64)[rows]
        dur = df["dur"].to_numpy(dtype=np.float64)[rows]
        times = type_times(ts, ts + dur, ktype, types, truncate=True)
        type_rows += [(label, int(v)) for label, v in times.items()]
        for t in types:
            sel = ktype == t
            if not sel.any():
                continue
            agg = top_k_hta(names[sel], dur[sel], num_kernels=num_kernels, duration_ratio=duration_ratio)
            agg["kernel_type"] = t.name
            agg["rank"] = np.int64(rank)
            kernel_parts.append(agg)

    tdf = pd.DataFrame(type_rows, columns=["kernel_type", "sum"]).astype({"kernel_type": object, "sum": np.int64})
    tdf = tdf.groupby("kernel_type", sort=True)["sum"].sum().reset_index()
    tdf = _order_types(tdf, "sum")
    total = tdf["sum"].sum()
    tdf["percentage"] = np.round(tdf["sum"] / total * 100, 1) if total > 0 else pd.Series(dtype=np.float64)
    tdf["sum"] = tdf["sum"].astype(np.int64)
    tdf["percentage"] = tdf["percentage"].astype(np.float64)

    if kernel_parts:
        kdf = pd.concat(kernel_parts, ignore_index=True)
        kdf = kdf.sort_values(["kernel_type", "name", "rank"], kind="stable", ignore_index=True)
    else:
        kdf = pd.DataFrame({c: pd.Series(dtype=object) for c in ["name", "kernel_type"]})
        for c in ("sum", "max", "min", "std", "mean"):
            kdf[c] = pd.Series(dtype=np.float64)
        kdf["rank"] = pd.Series(dtype=np.int64)
    kdf = kdf.rename(columns={"sum": "sum (us)", "max": "max (us)", "min": "min (us)", "std": "stddev", "mean": "mean (us)"})
    kdf = kdf[HTA_KERNEL_COLUMNS]
    for c in ("sum (us)", "max (us)", "min (us)", "stddev", "mean (us)"):
        kdf[c] = kdf[c].astype(np.float64)
    kdf["rank"] = kdf["rank"].astype(np.int64)
    return tdf[HTA_TYPE_COLUMNS], kdf
