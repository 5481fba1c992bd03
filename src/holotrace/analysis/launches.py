"""Kernel launch statistics: CPU launch time, GPU time and launch delay per launch (spec 23 §1).

Two entry points:

* :func:`hta_launch_stats` — HTA's ``cuda_kernel_launch_stats`` on one rank's
  HTA-style table (``hta_frame``), exactly (``hta_compat=True``) or with the
  rule table's launch APIs and a strict launch ↔ GPU-activity pairing.
* :func:`launch_stats` — the native view on ``RankTrace.events``: one row per
  launch call paired with its GPU work through ``partner``, with names and
  times, plus the outlier flags.

Definitions (µs): ``cpu_duration`` = launch call duration, ``gpu_duration`` =
GPU work duration, ``launch_delay`` = ``max(0, gpu.ts - (cpu.ts + cpu.dur))``.
Flags: *short kernel* ``cpu_duration <= runtime_cutoff and gpu_duration <
cpu_duration``; *runtime outlier* ``cpu_duration > runtime_cutoff``;
*launch-delay outlier* ``launch_delay > launch_delay_cutoff``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "HTA_LAUNCH_NAMES",
    "HTA_MEMORY_LAUNCH_NAMES",
    "STATS_COLUMNS",
    "add_flags",
    "flag_columns",
    "hta_launch_stats",
    "launch_stats",
    "launch_summary",
]

HTA_LAUNCH_NAMES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "runFunction - job_prep_and_submit_for_execution"})
HTA_MEMORY_LAUNCH_NAMES = frozenset({"cudaMemsetAsync", "cudaMemcpyAsync"})
STATS_COLUMNS = ["correlation", "cpu_duration", "gpu_duration", "launch_delay"]
FLAG_COLUMNS = ["short_kernel", "runtime_outlier", "launch_delay_outlier"]
_GPU_CATEGORIES = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "mtia_ccp_events"})


def _is_memory_api(names: pd.Series) -> np.ndarray:
    return names.str.contains("Memcpy", regex=False).to_numpy() | names.str.contains("Memset", regex=False).to_numpy()


def flag_columns(cpu, gpu, delay, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100) -> dict[str, np.ndarray]:
    """The boolean outlier columns (see module docstring) from the three duration columns."""
    cpu, gpu, delay = (np.asarray(x, dtype=np.float64) for x in (cpu, gpu, delay))
    return {"short_kernel": (cpu <= runtime_cutoff) & (gpu < cpu), "runtime_outlier": cpu > runtime_cutoff,
            "launch_delay_outlier": delay > launch_delay_cutoff}


def add_flags(df: pd.DataFrame, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100) -> pd.DataFrame:
    """A copy of ``df`` with the boolean outlier columns (see module docstring) added."""
    cols = {c: df[c].to_numpy() for c in df.columns}
    cols.update(flag_columns(df["cpu_duration"], df["gpu_duration"], df["launch_delay"], runtime_cutoff, launch_delay_cutoff))
    return pd.DataFrame(cols, index=df.index)


def hta_launch_stats(
    frame: pd.DataFrame,
    include_memory_events: bool = True,
    *,
    hta_compat: bool = False,
    strings=None,
    columns=None,
    flags: tuple[float, float] | None = None,
) -> pd.DataFrame:
    """Launch statistics of one rank's HTA-style table.

    Args:
        frame: columns ``stream, correlation, ts, dur, s_name, s_cat``.
        include_memory_events: also pair memset/memcpy calls.
        hta_compat: HTA's rule: launch names are exactly ``cudaLaunchKernel``,
            ``cudaLaunchKernelExC`` and MTIA's ``runFunction - …`` (+
            ``cudaMemsetAsync``/``cudaMemcpyAsync``); the CPU side is every
            stream −1 row with such a correlation and the GPU side every
            stream-bearing row. Otherwise: every launch API of the rule table
            (driver API, HIP, graphs), the CPU side is the launch calls
            themselves and the GPU side kernels/memcpy/memset.
        strings: the string table the ``name``/``cat`` ids index, when known (names are then matched by id).
        columns: the same table as a dict of numpy columns (``hta_view.hta_columns``), read faster.
        flags: ``(runtime_cutoff, launch_delay_cutoff)``: also add the three flag columns (as :func:`add_flags`).

    Returns:
        ``correlation, cpu_duration, gpu_duration, launch_delay`` (float64 µs),
        one row per (launch, GPU work) pair, in CPU table order then GPU order.
    """
    from holotrace.analysis._select import name_mask
    from holotrace.model.classify import LAUNCH_APIS
    from holotrace.model.link import isin_ids

    t = frame if columns is None else columns
    stream = np.asarray(t["stream"])
    corr = np.asarray(t["correlation"])

    def names_in(test, column: str = "s_name") -> np.ndarray:
        if strings is None:
            return name_mask(frame, test, column)
        # a flag per string of the job (and a last False one for id -1): one gather over the rows
        flag = np.zeros(len(strings) + 1, dtype=bool)
        flag[[i for i in map(strings.id, test) if i >= 0]] = True
        return flag[np.asarray(t["name" if column == "s_name" else "cat"])]

    if hta_compat:
        wanted = set(HTA_LAUNCH_NAMES) | (set(HTA_MEMORY_LAUNCH_NAMES) if include_memory_events else set())
        is_launch = names_in(wanted)
        cset = corr[is_launch]
        cpu_mask = (stream == -1) & isin_ids(corr, cset)
        gpu_mask = stream != -1  # the inner join keeps those with a CPU row of the set
    else:
        apis = frozenset(LAUNCH_APIS)
        if not include_memory_events:
            apis = frozenset(n for n in apis if "Memcpy" not in n and "Memset" not in n)
        is_launch = names_in(apis)
        is_launch &= corr >= 0
        cset = corr[is_launch]
        cpu_mask = is_launch
        # GPU rows whose correlation has no launch drop out in the inner join below
        gpu_mask = (stream != -1) & names_in(_GPU_CATEGORIES, "s_cat")
    ts, dur = np.asarray(t["ts"]), np.asarray(t["dur"], dtype=np.float64)
    c_rows, g_rows = np.flatnonzero(cpu_mask), np.flatnonzero(gpu_mask)  # positions: cheaper to gather than masks
    cpu = {"correlation": corr.take(c_rows), "cpu_ts": ts.take(c_rows), "cpu_duration": dur.take(c_rows)}
    gpu = {"correlation": corr.take(g_rows), "gpu_ts": ts.take(g_rows), "gpu_duration": dur.take(g_rows)}
    j = _inner_join_on_correlation(cpu, gpu)
    delay = j["gpu_ts"] - j["cpu_ts"].astype(np.float64) - j["cpu_duration"]
    out = {
        "correlation": j["correlation"],
        "cpu_duration": j["cpu_duration"],
        "gpu_duration": j["gpu_duration"],
        "launch_delay": np.clip(delay, 0, None),
    }
    if flags is not None:
        out.update(flag_columns(out["cpu_duration"], out["gpu_duration"], out["launch_delay"], *flags))
    return pd.DataFrame(out, copy=False)


def _inner_join_on_correlation(cpu: dict, gpu: dict) -> dict:
    """Inner join of two column dicts on ``correlation``, as ``DataFrame.merge(how="inner", sort=False)``:
    CPU rows in order, each followed by its GPU matches in their order."""
    keys = pd.Index(gpu["correlation"])
    if keys.is_unique:  # one GPU row per correlation (the usual case): a hash lookup
        right = keys.get_indexer(cpu["correlation"])
        left = np.flatnonzero(right >= 0)
        out = {k: v[left] for k, v in cpu.items()}
        out.update({k: v[right[left]] for k, v in gpu.items() if k != "correlation"})
        return out
    order = np.argsort(gpu["correlation"], kind="stable")
    g_corr = gpu["correlation"][order]
    lo = np.searchsorted(g_corr, cpu["correlation"], side="left")
    hi = np.searchsorted(g_corr, cpu["correlation"], side="right")
    n = hi - lo
    left = np.repeat(np.arange(len(n)), n)
    # positions lo..hi-1 of every CPU row, in order
    starts = np.repeat(lo - np.r_[0, np.cumsum(n)[:-1]], n) if len(n) else np.empty(0, dtype=np.int64)
    right = order[starts + np.arange(len(left))] if len(left) else np.empty(0, dtype=np.int64)
    out = {k: v[left] for k, v in cpu.items()}
    out.update({k: v[right] for k, v in gpu.items() if k != "correlation"})
    return out


def launch_stats(
    job,
    ranks: Sequence[int] | None = None,
    runtime_cutoff: float = 50,
    launch_delay_cutoff: float = 100,
    include_memory_events: bool = True,
) -> dict[int, pd.DataFrame]:
    """Native launch statistics, one frame per rank (all steps, ns precision).

    Args:
        job: a loaded :class:`~holotrace.model.job.Job`.
        ranks: ranks to analyse (default: all).
        runtime_cutoff, launch_delay_cutoff: µs thresholds of the flags.
        include_memory_events: also memcpy/memset launches.

    Returns:
        ``{rank: frame}`` with columns ``correlation, launch, kernel, stream,
        iteration, ts (µs from the job's start), cpu_duration, gpu_duration,
        launch_delay`` and the three flags, in launch order.
    """
    from holotrace.analysis._select import gpu_activity, job_ranks

    out: dict[int, pd.DataFrame] = {}
    for r in job_ranks(job, ranks):
        rt = job.rank(r)
        ev = rt.events
        is_launch = ev["is_launch"].to_numpy()
        partner = ev["partner"].to_numpy()
        gpu = gpu_activity(ev)
        rows = np.flatnonzero(is_launch & (partner >= 0))
        rows = rows[gpu[partner[rows]]]
        names = job.strings.decode(ev["name"].to_numpy()[rows])
        if not include_memory_events:
            keep = ~_is_memory_api(pd.Series(names, dtype=object).astype(str))
            rows, names = rows[keep], names[keep]
        g = partner[rows]
        ts = ev["ts_ns"].to_numpy()
        dur = ev["dur_ns"].to_numpy()
        end = ev["end_ns"].to_numpy()
        origin = job.origin_ns - rt.clock_offset_ns
        delay_ns = np.clip(ts[g] - end[rows], 0, None)
        frame = pd.DataFrame(
            {
                "correlation": ev["correlation"].to_numpy()[rows],
                "launch": names,
                "kernel": job.strings.decode(ev["name"].to_numpy()[g]),
                "stream": ev["stream"].to_numpy()[g],
                "iteration": ev["iteration"].to_numpy()[rows],
                "ts": (ts[rows] - origin) / 1e3,
                "cpu_duration": dur[rows] / 1e3,
                "gpu_duration": dur[g] / 1e3,
                "launch_delay": delay_ns / 1e3,
            }
        )
        out[r] = add_flags(frame, runtime_cutoff, launch_delay_cutoff)
    return out


def launch_summary(stats: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """One row per rank: launch count, duration statistics and flag counts.

    Args:
        stats: output of :func:`launch_stats` (or any frames with the same columns).

    Returns:
        Columns ``rank, launches, cpu_mean_us, cpu_max_us, gpu_mean_us,
        delay_median_us, delay_p95_us, delay_max_us, short_kernels,
        runtime_outliers, launch_delay_outliers``.
    """
    rows = []
    for r, df in stats.items():
        n = len(df)
        cpu = df["cpu_duration"].to_numpy(dtype=np.float64)
        gpu = df["gpu_duration"].to_numpy(dtype=np.float64)
        dl = df["launch_delay"].to_numpy(dtype=np.float64)
        rows.append(
            {
                "rank": int(r),
                "launches": n,
                "cpu_mean_us": float(cpu.mean()) if n else np.nan,
                "cpu_max_us": float(cpu.max()) if n else np.nan,
                "gpu_mean_us": float(gpu.mean()) if n else np.nan,
                "delay_median_us": float(np.median(dl)) if n else np.nan,
                "delay_p95_us": float(np.percentile(dl, 95)) if n else np.nan,
                "delay_max_us": float(dl.max()) if n else np.nan,
                "short_kernels": int(df["short_kernel"].sum()) if n else 0,
                "runtime_outliers": int(df["runtime_outlier"].sum()) if n else 0,
                "launch_delay_outliers": int(df["launch_delay_outlier"].sum()) if n else 0,
            }
        )
    return pd.DataFrame(rows, columns=[
        "rank", "launches", "cpu_mean_us", "cpu_max_us", "gpu_mean_us", "delay_median_us", "delay_p95_us",
        "delay_max_us", "short_kernels", "runtime_outliers", "launch_delay_outliers",
    ])
