"""The job's tables from per-rank summaries only (:mod:`holotrace.analysis.rank_summary`), folded in as they arrive.

:class:`Reducer` takes one summary at a time (:meth:`Reducer.add`, any order, each rank once) and keeps only
what the job's tables need, in compact columns (numpy arrays, each distinct text once): the per-rank rows of
the stacked tables, the per-rank kernel rows, the collective records (a few columns per communication
kernel, names as small codes), the merged launch-delay sketch and each rank's facts. The summary itself can
then be dropped, so a driver folding summaries as its workers return them holds a few KB per rank instead
of the summaries. :meth:`Reducer.frames` gives the frames ``holotrace summary`` shows, equal to the analyses
run on the whole job: per-rank tables are the ranks' rows stacked; the job's kernel-type table sums the
ranks' rows; top kernels and per-rank kernel distributions combine per-name totals; collective waits and
stragglers run :func:`holotrace.analysis.stragglers.collective_waits` on the ranks' collective records.
Besides, ``kernel_moments`` merges every rank's moments into job-wide kernel statistics (count, sum, min,
max, mean, sample std), and ``launch_overview`` reads launch-delay quantiles from the merged sketches.
Differences from the analyses on the whole job are last-bit float rounding of sums over ranks (top
kernels, the distribution's choice of kernels on exact ties) and the launch-delay median and p95 (within
:data:`~holotrace.analysis.rank_summary.SKETCH_ACCURACY`). :func:`reduce_summaries` folds a list.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from holotrace.analysis import kernels, stragglers
from holotrace.analysis.intervals import stable_order
from holotrace.analysis.rank_summary import (
    COLLECTIVE_COLUMNS,
    COLLECTIVE_INT_ARGS,
    COLLECTIVE_TEXT_ARGS,
    RankSummary,
    sketch_quantiles,
)
from holotrace.model.classify import NATIVE
from holotrace.model.strings import StringTable
from holotrace.model.view import JobView, RankView

__all__ = ["Reducer", "reduce_summaries", "job_origin_ns", "merge_moments"]

_STACKED = (
    "temporal",
    "temporal_by_step",
    "kernel_types_by_rank",
    "kernel_stats",
    "idle",
    "idle_interval_stats",
    "overlap",
)
# frames kept as per-rank rows, stacked in rank order at the end
_ROWS = _STACKED + ("steps", "gpu_ops", "kernel_rank_stats", "launch_worst")
_JOIN_AFTER = 32  # a table's chunks are joined into one past this many (few arrays, whatever the rank count)


def job_origin_ns(summaries: Sequence[RankSummary]) -> int:
    """The job's first event on the common clock (what the analyses measure ``start_us``/``ts`` from)."""
    firsts = [s.info["first_ns"] for s in summaries if s.info.get("first_ns") is not None]
    return min(firsts) if firsts else 0


def _shift_us(t_us: np.ndarray, by_ns) -> np.ndarray:
    """``t_us`` (integer ns / 1000, as the analyses compute it) moved by ``by_ns`` (one value or one per row),
    rounded as the analyses would have computed it from the other origin."""
    ns = np.rint(np.asarray(t_us, dtype=np.float64) * 1000.0).astype(np.int64)
    return (ns + np.asarray(by_ns, dtype=np.int64)) / 1000.0


class _Text:
    """Each distinct text once, however many ranks repeat it (kernel names are long and shared)."""

    def __init__(self):
        self.known: dict = {}

    def compact(self, col: pd.Series) -> np.ndarray:
        """The column as a numpy array of its own (no view into the frame), texts shared."""
        a = col.to_numpy()
        if a.dtype != object:
            return a.copy()
        codes, uniq = pd.factorize(a)
        shared = np.empty(len(uniq), dtype=object)
        for i, u in enumerate(uniq):  # distinct values of one rank's table: a few dozen
            shared[i] = self.known.setdefault(u, u)
        out = np.empty(len(a), dtype=object)
        out[:] = a
        hit = codes >= 0
        out[hit] = shared[codes[hit]]
        return out

    def codes(self, col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        """(distinct texts sorted, shared; int32 position of each row's text)."""
        names = col.to_numpy(dtype=object)
        if not len(names):
            return np.empty(0, dtype=object), np.empty(0, dtype=np.int32)
        uniq, inv = np.unique(names.astype(str), return_inverse=True)
        shared = np.empty(len(uniq), dtype=object)
        for i, u in enumerate(uniq.tolist()):
            shared[i] = self.known.setdefault(u, u)
        return shared, inv.reshape(-1).astype(np.int32)


class _Rows:
    """One table's rows from many ranks in compact columns; :meth:`frame` stacks them in rank order."""

    __slots__ = ("chunks", "template", "template_rank")

    def __init__(self):
        self.chunks: list = []  # (rank of each row, {column: array})
        self.template = None  # the lowest rank's frame, empty: columns and dtypes of the stacked frame
        self.template_rank = None

    def add(self, rank: int, df: pd.DataFrame, text: _Text) -> None:
        if self.template_rank is None or rank < self.template_rank:
            self.template, self.template_rank = df.iloc[:0].reset_index(drop=True), rank
        if not len(df):
            return
        self.chunks.append((np.full(len(df), rank, dtype=np.int64), {c: text.compact(df[c]) for c in df.columns}))
        if len(self.chunks) > _JOIN_AFTER:
            self.chunks = [self._joined()]

    def _joined(self) -> tuple:
        ranks = np.concatenate([c[0] for c in self.chunks])
        return ranks, {c: np.concatenate([ch[1][c] for ch in self.chunks]) for c in self.chunks[0][1]}

    def frame(self, shift: str = "", by_rank: dict | None = None) -> pd.DataFrame:
        """The rows in rank order (each rank's rows in their order), with the lowest rank's dtypes; ``shift``
        (a column of µs) moved by ``by_rank[rank]`` ns."""
        if self.template is None:
            return pd.DataFrame()
        if not self.chunks:
            return self.template
        ranks, cols = self._joined()
        order = stable_order(ranks)
        df = pd.DataFrame({c: v[order] for c, v in cols.items()})
        if shift:
            uniq, inv = np.unique(ranks[order], return_inverse=True)
            by = np.array([by_rank[int(r)] for r in uniq], dtype=np.int64)
            df[shift] = _shift_us(df[shift].to_numpy(), by[inv.reshape(-1)])
        return df.astype(self.template.dtypes.to_dict())


class Reducer:
    """Folds rank summaries in as they arrive (:meth:`add`) and gives the job's frames (:meth:`frames`).

    Holds, per rank, its rows of the job's tables and its collective records in compact columns, and its
    ``info``; kernel texts once for the job; the launch-delay sketch merged as it goes.
    """

    def __init__(self):
        self._text = _Text()
        self._rows = {k: _Rows() for k in _ROWS}
        self._coll: dict = {}  # rank -> ({column: array}, distinct names, name codes)
        self._buckets = np.empty(0, dtype=np.int64)
        self._counts = np.empty(0, dtype=np.int64)
        self._worst_n = 0
        self.infos: dict = {}  # rank -> the summary's info
        self._straggler_frames = None

    @property
    def ranks(self) -> list:
        return sorted(self.infos)

    def add(self, s: RankSummary) -> None:
        """Fold one rank's summary in (each rank once); the summary is not kept."""
        if s.rank in self.infos:
            raise ValueError(f"rank {s.rank} was already reduced")
        self.infos[s.rank] = s.info
        for k in _ROWS:
            self._rows[k].add(s.rank, s.frames[k], self._text)
        self._worst_n = max(self._worst_n, len(s.frames["launch_worst"]))
        if s.rank not in self._coll:
            self.add_collectives(s.rank, s.frames["collectives"], int(s.info.get("clock_offset_ns", 0)))
        sk = s.frames["launch_sketch"]
        if len(sk):
            b = np.concatenate([self._buckets, sk["bucket"].to_numpy(np.int64)])
            c = np.concatenate([self._counts, sk["count"].to_numpy(np.int64)])
            self._buckets, inv = np.unique(b, return_inverse=True)
            self._counts = np.zeros(len(self._buckets), dtype=np.int64)
            np.add.at(self._counts, inv.reshape(-1), c)

    def add_collectives(self, rank: int, f: pd.DataFrame, clock_offset_ns: int) -> None:
        """Fold in one rank's collective records (the ``collectives`` frame of its summary) ahead of the rest of
        its summary, so that :meth:`stragglers` can answer before every summary is in."""
        if rank in self._coll:
            raise ValueError(f"rank {rank}'s collectives were already reduced")
        names, codes = self._text.codes(f["name"])
        cols = {c: f[c].to_numpy().copy() for c in COLLECTIVE_COLUMNS if c != "name"}
        for c in COLLECTIVE_INT_ARGS:
            cols[c] = f[c].to_numpy(np.int64).copy()
        args = {c: self._text.codes(f[c]) for c in COLLECTIVE_TEXT_ARGS}  # "" when the kernel has none
        self._coll[rank] = (cols, names, codes, int(clock_offset_ns), args)
        self._straggler_frames = None

    def stragglers(self) -> dict:
        """``collective_waits``, ``straggler_report`` and ``straggler_summary`` over the collectives folded in so
        far (kept until more are added)."""
        if self._straggler_frames is None:
            waits = stragglers.collective_waits(self._collective_view(), rules=NATIVE)
            report = stragglers.straggler_report(None, rules=NATIVE, waits=waits)
            self._straggler_frames = {
                "collective_waits": waits,
                "straggler_report": report,
                "straggler_summary": stragglers.straggler_summary(None, rules=NATIVE, report=report),
            }
        return self._straggler_frames

    def origin_ns(self) -> int:
        firsts = [i["first_ns"] for i in self.infos.values() if i.get("first_ns") is not None]
        return min(firsts) if firsts else 0

    def frames(self, *, top: int = 10) -> dict[str, object]:
        """The job's frames (as :func:`reduce_summaries`)."""
        out: dict[str, object] = {k: self._rows[k].frame() for k in _STACKED}
        origin = self.origin_ns()
        moved = {r: int(i["origin_ns"]) - origin for r, i in self.infos.items()}
        out["steps"] = self._rows["steps"].frame("start_us", moved)
        types = out["kernel_types_by_rank"]
        job_types = (
            types.groupby("kernel_type", sort=True)["time_us"].sum().reset_index()
            if len(types)
            else types[["kernel_type", "time_us"]]
        )
        out["kernel_types"] = kernels._with_pctg(job_types)
        ops = self._rows["gpu_ops"].frame()
        out["top_kernels"] = _top_kernels(ops, top)
        out["gpu_ops_sum_us"] = float(ops["sum_us"].sum()) if len(ops) else 0.0  # what top_kernels' rows share
        rank_stats = self._rows["kernel_rank_stats"].frame()
        out["kernel_rank_distribution"] = _rank_distribution(rank_stats, top)
        out["kernel_moments"] = merge_moments(rank_stats)
        out.update(self.stragglers())
        out["launch_overview"], out["launch_worst"] = self._launches(moved)
        out["profiler_steps"] = sorted({x for i in self.infos.values() for x in i.get("profiler_steps", [])})
        return out

    def _collective_view(self) -> JobView:
        """A job view holding each rank's collective records (and first event), with one string table."""
        strings = StringTable()
        views = {}
        for r in sorted(self._coll):
            cols, names, codes, offset, args = self._coll[r]
            ids = np.array([strings.add(str(x)) for x in names], dtype=np.int64)  # distinct collective names: a few
            cols = dict(cols, name=ids[codes] if len(codes) else np.empty(0, dtype=np.int64))
            cols["row"] = np.arange(len(codes), dtype=np.int64)
            model = {c: cols.pop(c) for c in COLLECTIVE_INT_ARGS}
            for c, (texts, at) in args.items():  # the matching reads group and kind as string ids, -1 when absent
                tid = np.array([strings.add(str(x)) if x else -1 for x in texts], dtype=np.int64)
                model[c] = tid[at] if len(at) else np.empty(0, dtype=np.int64)
            views[r] = RankView(r, cols, model, offset)
        return JobView(views, strings, NATIVE, 1, True)

    def _launches(self, moved: dict) -> tuple[dict, pd.DataFrame]:
        """Launch-delay overview over every rank (median and p95 from the merged sketch) and the worst launches."""
        sketch = (
            pd.DataFrame({"bucket": self._buckets, "count": self._counts})
            if len(self._buckets)
            else pd.DataFrame({"bucket": [], "count": []})
        )
        med, p95 = sketch_quantiles(sketch, [0.5, 0.95])
        infos = self.infos.values()
        cutoff = max((float(i["launch_delay_cutoff"]) for i in infos if "launch_delay_cutoff" in i), default=100.0)
        overview = {
            "launches": int(sum(i.get("launches", 0) for i in infos)),
            "median_us": med,
            "p95_us": p95,
            "outliers": int(sum(i.get("launch_outliers", 0) for i in infos)),
            "cutoff_us": cutoff,
        }
        w = self._rows["launch_worst"].frame("ts", moved)
        if not len(w):
            return overview, w
        w = (
            w.sort_values(["launch_delay", "rank", "ts"], ascending=[False, True, True], kind="stable")
            .head(self._worst_n)
            .reset_index(drop=True)
        )
        return overview, w


def reduce_summaries(summaries: Sequence[RankSummary], *, top: int = 10) -> dict[str, object]:
    """The job's frames from the summaries of its ranks (any order; each rank once)."""
    red = Reducer()
    for s in summaries:
        red.add(s)
    return red.frames(top=top)


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
    return pd.DataFrame(
        {
            "kernel_type": pd.Series(ktype.to_numpy()[pick], dtype=object),
            "name": pd.Series(names[pick], dtype=object),
            "count": c,
            "sum_us": t,
            "mean_us": t / np.maximum(c, 1),
        }
    )


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
    df = pd.DataFrame(
        {
            "kernel_type": stats["kernel_type"].to_numpy(object),
            "name": stats["name"].to_numpy(object),
            "n": n,
            "s": stats["sum_us"].to_numpy(np.float64),
            "mn": stats["min_us"].to_numpy(np.float64),
            "mx": stats["max_us"].to_numpy(np.float64),
            "nm": n * mean,
            "m2": m2,
        }
    )
    g = df.groupby("name", sort=True)
    tot_n, tot_nm = g["n"].sum(), g["nm"].sum()
    job_mean = (tot_nm / tot_n).reindex(df["name"]).to_numpy()
    # M2 of the union = Σ M2_i + Σ n_i (mean_i − mean)²
    df["between"] = n * np.square(mean - job_mean)
    m2_tot = g["m2"].sum() + df.groupby("name", sort=True)["between"].sum()
    out = pd.DataFrame(
        {
            "kernel_type": g["kernel_type"].first().to_numpy(object),
            "name": tot_n.index.to_numpy(object),
            "ranks": g["n"].size().to_numpy(np.int64),
            "count": tot_n.to_numpy().astype(np.int64),
            "sum_us": g["s"].sum().to_numpy(),
            "min_us": g["mn"].min().to_numpy(),
            "max_us": g["mx"].max().to_numpy(),
            "mean_us": (tot_nm / tot_n).to_numpy(),
        }
    )
    cnt = out["count"].to_numpy(np.float64)
    out["std_us"] = np.where(cnt > 1, np.sqrt(np.maximum(m2_tot.to_numpy(), 0) / np.maximum(cnt - 1, 1)), 0.0)
    return out.sort_values(["sum_us", "name"], ascending=[False, True], kind="stable", ignore_index=True)[cols]
