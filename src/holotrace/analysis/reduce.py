"""The job's tables from per-rank summaries only (:mod:`holotrace.analysis.rank_summary`).

:func:`reduce_summaries` gives the frames ``holotrace summary`` shows, equal to the analyses run on the
whole job: per-rank tables are the ranks' rows stacked; the job's kernel-type table sums the ranks' rows;
top kernels and per-rank kernel distributions combine per-name totals; collective waits and stragglers
run :func:`holotrace.analysis.stragglers.collective_waits` on the ranks' collective records. Besides,
``kernel_moments`` merges every rank's moments into job-wide kernel statistics (count, sum, min, max,
mean, sample std), and ``launch_overview`` reads launch-delay quantiles from the merged sketches.
Differences from the analyses on the whole job are last-bit float rounding of sums over ranks (top
kernels, the distribution's choice of kernels on exact ties) and the launch-delay median and p95 (within
:data:`~holotrace.analysis.rank_summary.SKETCH_ACCURACY`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import kernels, stragglers
from holotrace.analysis.rank_summary import COLLECTIVE_COLUMNS, RankSummary, sketch_quantiles
from holotrace.model.classify import NATIVE
from holotrace.model.strings import StringTable
from holotrace.model.view import JobView, RankView

__all__ = ["reduce_summaries", "job_origin_ns", "merge_moments"]

_STACKED = ("temporal", "temporal_by_step", "kernel_types_by_rank", "kernel_stats", "idle", "idle_interval_stats", "overlap")


def job_origin_ns(summaries: Sequence[RankSummary]) -> int:
    """The job's first event on the common clock (what the analyses measure ``start_us``/``ts`` from)."""
    firsts = [s.info["first_ns"] for s in summaries if s.info.get("first_ns") is not None]
    return min(firsts) if firsts else 0


def _stack(summaries: Sequence[RankSummary], key: str) -> pd.DataFrame:
    return _stack_frames([s.frames[key] for s in summaries], summaries, key)


def _shift_us(t_us: np.ndarray, by_ns: int) -> np.ndarray:
    """``t_us`` (integer ns / 1000, as the analyses compute it) moved by ``by_ns``, rounded as the analyses
    would have computed it from the other origin."""
    ns = np.rint(np.asarray(t_us, dtype=np.float64) * 1000.0).astype(np.int64)
    return (ns + np.int64(by_ns)) / 1000.0


def reduce_summaries(summaries: Sequence[RankSummary], *, top: int = 10) -> dict[str, object]:
    """The job's frames from the summaries of its ranks (any order; each rank once)."""
    summ = sorted(summaries, key=lambda s: s.rank)
    out: dict[str, object] = {k: _stack(summ, k) for k in _STACKED}
    origin = job_origin_ns(summ)
    st = []
    for s in summ:
        f = s.frames["steps"]
        if len(f):
            f = f.copy()
            f["start_us"] = _shift_us(f["start_us"].to_numpy(), s.info["origin_ns"] - origin)
        st.append(f)
    out["steps"] = _stack_frames(st, summ, "steps")
    types = out["kernel_types_by_rank"]
    job_types = types.groupby("kernel_type", sort=True)["time_us"].sum().reset_index() if len(types) else types[["kernel_type", "time_us"]]
    out["kernel_types"] = kernels._with_pctg(job_types)
    out["top_kernels"] = _top_kernels(_stack(summ, "gpu_ops"), top)
    rank_stats = _stack(summ, "kernel_rank_stats")
    out["kernel_rank_distribution"] = _rank_distribution(rank_stats, top)
    out["kernel_moments"] = merge_moments(rank_stats)
    waits = stragglers.collective_waits(_collective_view(summ), rules=NATIVE)
    out["collective_waits"] = waits
    out["straggler_report"] = stragglers.straggler_report(None, rules=NATIVE, waits=waits)
    out["straggler_summary"] = stragglers.straggler_summary(None, rules=NATIVE, report=out["straggler_report"])
    out["launch_overview"], out["launch_worst"] = _launches(summ, origin)
    out["profiler_steps"] = sorted({x for s in summ for x in s.info.get("profiler_steps", [])})
    return out


def _stack_frames(parts: list, summ, key: str) -> pd.DataFrame:
    nonempty = [p for p in parts if len(p)]
    if not nonempty:
        return summ[0].frames[key].iloc[:0].reset_index(drop=True) if summ else pd.DataFrame()
    return pd.concat(nonempty, ignore_index=True).astype(summ[0].frames[key].dtypes.to_dict())


def _top_kernels(ops: pd.DataFrame, top: int) -> pd.DataFrame:
    """:func:`holotrace.analysis.kernels.top_kernels` from per-rank per-name totals (ranks ascending)."""
    cols = ["kernel_type", "name", "count", "sum_us", "mean_us"]
    if ops.empty:
        return ops.reindex(columns=cols)
    g = ops.groupby("name", sort=True)
    total, count = g["sum_us"].sum(), g["count"].sum().astype(np.int64)
    ktype = g["kernel_type"].first()
    names = total.index.to_numpy(dtype=object)
    pick = np.lexsort((names.astype(str), -total.to_numpy()))[:top]
    t, c = total.to_numpy()[pick], count.to_numpy()[pick]
    return pd.DataFrame({"kernel_type": pd.Series(ktype.to_numpy()[pick], dtype=object), "name": pd.Series(names[pick], dtype=object),
                         "count": c, "sum_us": t, "mean_us": t / np.maximum(c, 1)})


def _rank_distribution(stats: pd.DataFrame, top: int) -> pd.DataFrame:
    """:func:`holotrace.analysis.kernels.rank_distribution` from every rank's per-kernel rows."""
    cols = ["kernel_type", "name", "rank", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us", "sum_vs_median"]
    if stats.empty:
        return stats.assign(sum_vs_median=pd.Series(dtype=np.float64))[cols]
    totals = stats.groupby("name", sort=True)["sum_us"].sum()
    order = pd.DataFrame({"name": totals.index.to_numpy(dtype=object), "total": totals.to_numpy()})
    chosen = order.sort_values("total", ascending=False, kind="stable").head(top).reset_index(drop=True)
    pos = pd.Series(np.arange(len(chosen)), index=chosen["name"])
    sel = stats[stats["name"].isin(chosen["name"])].copy()
    first_type = sel.groupby("name", sort=False)["kernel_type"].first()  # stats are by rank: the lowest rank's type
    sel["kernel_type"] = first_type.reindex(sel["name"]).to_numpy()
    med = sel.groupby("name")["sum_us"].transform("median")
    sel["sum_vs_median"] = np.where(med > 0, sel["sum_us"] / med.where(med > 0, 1.0), np.nan)
    sel["_pos"] = pos.reindex(sel["name"]).to_numpy()
    sel = sel.sort_values(["_pos", "rank"], ignore_index=True)
    sel["count"] = sel["count"].astype(np.int64)
    return sel[cols]


def merge_moments(stats: pd.DataFrame) -> pd.DataFrame:
    """Job-wide statistics per kernel from per-rank moments (parallel algorithm of Chan et al.).

    Args:
        stats: rows ``kernel_type, name, rank, count, sum_us, max_us, min_us, mean_us, std_us`` (sample std).

    Returns:
        Columns ``kernel_type, name, ranks, count, sum_us, min_us, max_us, mean_us, std_us`` (sample std, 0 for
        one instance), by ``sum_us`` descending, name ascending among ties.
    """
    cols = ["kernel_type", "name", "ranks", "count", "sum_us", "min_us", "max_us", "mean_us", "std_us"]
    if stats.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("kernel_type", "name") else np.float64) for c in cols})
    n = stats["count"].to_numpy(np.float64)
    mean = stats["mean_us"].to_numpy(np.float64)
    m2 = np.square(stats["std_us"].to_numpy(np.float64)) * np.maximum(n - 1, 0)
    df = pd.DataFrame({"kernel_type": stats["kernel_type"].to_numpy(object), "name": stats["name"].to_numpy(object),
                       "n": n, "s": stats["sum_us"].to_numpy(np.float64), "mn": stats["min_us"].to_numpy(np.float64),
                       "mx": stats["max_us"].to_numpy(np.float64), "nm": n * mean, "m2": m2})
    g = df.groupby("name", sort=True)
    tot_n, tot_nm = g["n"].sum(), g["nm"].sum()
    job_mean = (tot_nm / tot_n).reindex(df["name"]).to_numpy()
    # M2 of the union = Σ M2_i + Σ n_i (mean_i − mean)²
    df["between"] = n * np.square(mean - job_mean)
    m2_tot = g["m2"].sum() + df.groupby("name", sort=True)["between"].sum()
    out = pd.DataFrame({"kernel_type": g["kernel_type"].first().to_numpy(object), "name": tot_n.index.to_numpy(object),
                        "ranks": g["n"].size().to_numpy(np.int64), "count": tot_n.to_numpy().astype(np.int64),
                        "sum_us": g["s"].sum().to_numpy(), "min_us": g["mn"].min().to_numpy(), "max_us": g["mx"].max().to_numpy(),
                        "mean_us": (tot_nm / tot_n).to_numpy()})
    cnt = out["count"].to_numpy(np.float64)
    out["std_us"] = np.where(cnt > 1, np.sqrt(np.maximum(m2_tot.to_numpy(), 0) / np.maximum(cnt - 1, 1)), 0.0)
    return out.sort_values(["sum_us", "name"], ascending=[False, True], kind="stable", ignore_index=True)[cols]


def _collective_view(summ: Sequence[RankSummary]) -> JobView:
    """A job view holding each rank's collective records (and first event), with one string table."""
    strings = StringTable()
    views = {}
    for s in summ:
        f = s.frames["collectives"]
        names = f["name"].to_numpy(dtype=object)
        uniq, inv = np.unique(names.astype(str), return_inverse=True) if len(names) else (np.empty(0, dtype=str), np.empty(0, dtype=np.int64))
        ids = np.array([strings.add(str(x)) for x in uniq], dtype=np.int64)  # distinct collective names: a few
        cols = {c: f[c].to_numpy() for c in COLLECTIVE_COLUMNS if c != "name"}
        cols["name"] = ids[inv.reshape(-1)] if len(names) else np.empty(0, dtype=np.int64)
        cols["row"] = np.arange(len(f), dtype=np.int64)
        views[s.rank] = RankView(s.rank, cols, {}, int(s.info.get("clock_offset_ns", 0)))
    return JobView(views, strings, NATIVE, 1, True)


def _launches(summ: Sequence[RankSummary], origin: int) -> tuple[dict, pd.DataFrame]:
    """Launch-delay overview over every rank (median and p95 from the merged sketches) and the worst launches."""
    sketches = [s.frames["launch_sketch"] for s in summ if len(s.frames["launch_sketch"])]
    sketch = pd.concat(sketches, ignore_index=True) if sketches else pd.DataFrame({"bucket": [], "count": []})
    med, p95 = sketch_quantiles(sketch, [0.5, 0.95])
    overview = {"launches": int(sum(s.info.get("launches", 0) for s in summ)), "median_us": med, "p95_us": p95,
                "outliers": int(sum(s.info.get("launch_outliers", 0) for s in summ))}
    worst = []
    for s in summ:
        f = s.frames["launch_worst"]
        if len(f):
            f = f.copy()
            f["ts"] = _shift_us(f["ts"].to_numpy(), s.info["origin_ns"] - origin)
            worst.append(f)
    if not worst:
        return overview, summ[0].frames["launch_worst"].iloc[:0] if summ else pd.DataFrame()
    w = pd.concat(worst, ignore_index=True)
    n = max(len(s.frames["launch_worst"]) for s in summ)
    w = w.sort_values(["launch_delay", "rank", "ts"], ascending=[False, True, True], kind="stable").head(n).reset_index(drop=True)
    return overview, w

