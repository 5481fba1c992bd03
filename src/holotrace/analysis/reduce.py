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
The frames are :class:`~holotrace.table.Table` objects. Besides, ``kernel_moments`` merges every rank's moments
into job-wide kernel statistics (count, sum, min, max, mean, sample std), and ``launch_overview`` reads
launch-delay quantiles from the merged sketches.
Differences from the analyses on the whole job are last-bit float rounding of sums over ranks (top
kernels, the distribution's choice of kernels on exact ties) and the launch-delay median and p95 (within
:data:`~holotrace.analysis.rank_summary.SKETCH_ACCURACY`). :func:`reduce_summaries` folds a list.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from holotrace.analysis import kernels, stragglers
from holotrace.analysis.grouped import group_first_row, group_max, group_median, group_min, group_sum
from holotrace.analysis.intervals import stable_order
from holotrace.analysis.rank_summary import (
    COLLECTIVE_COLUMNS,
    COLLECTIVE_INT_ARGS,
    COLLECTIVE_TEXT_ARGS,
    RankSummary,
    merge_sketch,
    sketch_quantiles,
)
from holotrace.model.classify import NATIVE
from holotrace.model.strings import StringTable
from holotrace.model.view import JobView, RankView
from holotrace.table import Table

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

    def compact(self, col: np.ndarray) -> np.ndarray:
        """The column as a numpy array of its own (no view into the table), texts shared."""
        a = np.asarray(col)
        if a.dtype != object:
            return a.copy()
        known = self.known
        out = np.empty(len(a), dtype=object)
        out[:] = [known.setdefault(x, x) if isinstance(x, str) else x for x in a.tolist()]  # a rank's rows: few
        return out

    def codes(self, col: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distinct texts sorted, shared; int32 position of each row's text)."""
        names = np.asarray(col, dtype=object)
        if not len(names):
            return np.empty(0, dtype=object), np.empty(0, dtype=np.int32)
        uniq, inv = np.unique(names.astype(str), return_inverse=True)
        shared = np.empty(len(uniq), dtype=object)
        for i, u in enumerate(uniq.tolist()):
            shared[i] = self.known.setdefault(u, u)
        return shared, inv.reshape(-1).astype(np.int32)


class _Rows:
    """One table's rows from many ranks in compact columns; :meth:`table` stacks them in rank order."""

    __slots__ = ("chunks", "template", "template_rank")

    def __init__(self):
        self.chunks: list = []  # (rank of each row, {column: array})
        self.template = None  # the lowest rank's table, empty: columns and types of the stacked table
        self.template_rank = None

    def add(self, rank: int, t: Table, text: _Text) -> None:
        if self.template_rank is None or rank < self.template_rank:
            self.template, self.template_rank = t.head(0), rank
        if not len(t):
            return
        self.chunks.append((np.full(len(t), rank, dtype=np.int64), {c: text.compact(a) for c, a in t.items()}))
        if len(self.chunks) > _JOIN_AFTER:
            self.chunks = [self._joined()]

    def _joined(self) -> tuple:
        ranks = np.concatenate([c[0] for c in self.chunks])
        return ranks, {c: np.concatenate([ch[1][c] for ch in self.chunks]) for c in self.chunks[0][1]}

    def table(self, shift: str = "", by_rank: dict | None = None) -> Table:
        """The rows in rank order (each rank's rows in their order), with the lowest rank's column types;
        ``shift`` (a column of µs) moved by ``by_rank[rank]`` ns."""
        if self.template is None:
            return Table()
        if not self.chunks:
            return self.template
        ranks, cols = self._joined()
        order = stable_order(ranks)
        out = {c: v[order] for c, v in cols.items()}
        if shift:
            uniq, inv = np.unique(ranks[order], return_inverse=True)
            by = np.array([by_rank[int(r)] for r in uniq], dtype=np.int64)
            out[shift] = _shift_us(out[shift], by[inv.reshape(-1)])
        kinds = dict(self.template.items())
        return Table(
            {c: v.astype(kinds[c].dtype, copy=False) if c in kinds else v for c, v in out.items()}, n=len(ranks)
        )


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
            self._rows[k].add(s.rank, Table.of(s.frames[k]), self._text)
        self._worst_n = max(self._worst_n, len(s.frames["launch_worst"]))
        if s.rank not in self._coll:
            self.add_collectives(s.rank, s.frames["collectives"], int(s.info.get("clock_offset_ns", 0)))
        sk = Table.of(s.frames["launch_sketch"])
        if len(sk):
            self._buckets, self._counts = merge_sketch(
                np.concatenate([self._buckets, np.asarray(sk["bucket"], dtype=np.int64)]),
                np.concatenate([self._counts, np.asarray(sk["count"], dtype=np.int64)]),
            )

    def add_collectives(self, rank: int, f: Table, clock_offset_ns: int) -> None:
        """Fold in one rank's collective records (the ``collectives`` table of its summary) ahead of the rest of
        its summary, so that :meth:`stragglers` can answer before every summary is in."""
        if rank in self._coll:
            raise ValueError(f"rank {rank}'s collectives were already reduced")
        f = Table.of(f)
        names, codes = self._text.codes(f["name"])
        cols = {c: np.array(f[c]) for c in COLLECTIVE_COLUMNS if c != "name"}
        for c in COLLECTIVE_INT_ARGS:
            cols[c] = np.array(f[c], dtype=np.int64)
        args = {c: self._text.codes(f[c]) for c in COLLECTIVE_TEXT_ARGS}  # "" when the kernel has none
        self._coll[rank] = (cols, names, codes, int(clock_offset_ns), args)
        self._straggler_frames = None

    def stragglers(self) -> dict:
        """``collective_waits``, ``straggler_report`` and ``straggler_summary`` over the collectives folded in so
        far (kept until more are added)."""
        if self._straggler_frames is None:
            waits = stragglers.collective_waits_table(self._collective_view(), rules=NATIVE)
            report = stragglers.straggler_report_table(waits)
            self._straggler_frames = {
                "collective_waits": waits,
                "straggler_report": report,
                "straggler_summary": stragglers.straggler_summary_table(report),
            }
        return self._straggler_frames

    def origin_ns(self) -> int:
        firsts = [i["first_ns"] for i in self.infos.values() if i.get("first_ns") is not None]
        return min(firsts) if firsts else 0

    def frames(self, *, top: int = 10) -> dict[str, object]:
        """The job's tables (as :func:`reduce_summaries`)."""
        out: dict[str, object] = {k: self._rows[k].table() for k in _STACKED}
        origin = self.origin_ns()
        moved = {r: int(i["origin_ns"]) - origin for r, i in self.infos.items()}
        out["steps"] = self._rows["steps"].table("start_us", moved)
        out["kernel_types"] = _job_kernel_types(out["kernel_types_by_rank"])
        ops = self._rows["gpu_ops"].table()
        out["top_kernels"] = _top_kernels(ops, top)
        out["gpu_ops_sum_us"] = float(np.sum(ops["sum_us"])) if len(ops) else 0.0  # what top_kernels' rows share
        rank_stats = self._rows["kernel_rank_stats"].table()
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

    def _launches(self, moved: dict) -> tuple[dict, Table]:
        """Launch-delay overview over every rank (median and p95 from the merged sketch) and the worst launches."""
        med, p95 = sketch_quantiles(Table({"bucket": self._buckets, "count": self._counts}), [0.5, 0.95])
        infos = self.infos.values()
        cutoff = max((float(i["launch_delay_cutoff"]) for i in infos if "launch_delay_cutoff" in i), default=100.0)
        overview = {
            "launches": int(sum(i.get("launches", 0) for i in infos)),
            "median_us": med,
            "p95_us": p95,
            "outliers": int(sum(i.get("launch_outliers", 0) for i in infos)),
            "cutoff_us": cutoff,
        }
        w = self._rows["launch_worst"].table("ts", moved)
        if not len(w):
            return overview, w
        order = np.lexsort((w["ts"], w["rank"], -np.asarray(w["launch_delay"], dtype=np.float64)))  # stable
        return overview, w.take(order[: self._worst_n])


def reduce_summaries(summaries: Sequence[RankSummary], *, top: int = 10) -> dict[str, object]:
    """The job's tables from the summaries of its ranks (any order; each rank once)."""
    red = Reducer()
    for s in summaries:
        red.add(s)
    return red.frames(top=top)


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys sorted, each row's group), as a sorted groupby numbers its groups."""
    uniq, codes = np.unique(np.asarray(keys), return_inverse=True)
    return uniq, codes.reshape(-1)


def _int_sums(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, codes, np.asarray(values, dtype=np.int64))
    return out


def _text_column(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _job_kernel_types(types: Table) -> Table:
    """The job's time per kernel type (the ranks' rows summed per type), with ``pctg`` of the total, largest
    first, type ascending among ties (as :func:`holotrace.analysis.kernels.type_breakdown`)."""
    if not len(types):
        kinds = {c: types[c] if c in types else np.empty(0, dtype=object) for c in ("kernel_type", "time_us")}
        return Table({**kinds, "pctg": np.empty(0, dtype=np.float64)}, n=0)
    return kernels.type_totals_table(types["kernel_type"], types["time_us"])


def _top_kernels(ops: Table, top: int) -> Table:
    """:func:`holotrace.analysis.kernels.top_kernels` from per-rank per-name totals (ranks ascending)."""
    cols = ["kernel_type", "name", "count", "sum_us", "mean_us"]
    if ops.empty:
        return Table({c: ops[c] if c in ops else np.empty(0, dtype=object) for c in cols}, n=0)
    names, codes = _groups(ops["name"])
    total = group_sum(codes, np.asarray(ops["sum_us"], dtype=np.float64), len(names))
    count = _int_sums(codes, ops["count"], len(names))
    ktype = np.asarray(ops["kernel_type"])[group_first_row(codes, len(names))]
    pick = np.lexsort((names.astype(str), -total))[:top]
    t, c = total[pick], count[pick]
    return Table(
        {
            "kernel_type": _text_column(ktype[pick]),
            "name": _text_column(names[pick]),
            "count": c,
            "sum_us": t,
            "mean_us": t / np.maximum(c, 1),
        }
    )


def _rank_distribution(stats: Table, top: int) -> Table:
    """:func:`holotrace.analysis.kernels.rank_distribution` from every rank's per-kernel rows."""
    cols = ["kernel_type", "name", "rank", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us", "sum_vs_median"]
    if stats.empty:
        got = {c: stats[c] if c in stats else np.empty(0, dtype=object) for c in cols[:-1]}
        return Table({**got, "sum_vs_median": np.empty(0, dtype=np.float64)}, n=0)
    names, codes = _groups(stats["name"])
    sums = np.asarray(stats["sum_us"], dtype=np.float64)
    totals = group_sum(codes, sums, len(names))
    chosen = np.argsort(-totals, kind="stable")[:top]  # names sorted: ties keep name order
    pos = np.full(len(names), -1, dtype=np.int64)
    pos[chosen] = np.arange(len(chosen))
    rows = np.flatnonzero(pos[codes] >= 0)
    g = codes[rows]
    ktype = np.asarray(stats["kernel_type"])[group_first_row(codes, len(names))]  # stats are by rank: the lowest rank's
    m = group_median(g, sums[rows], len(names))[g]
    ratio = np.where(m > 0, sums[rows] / np.where(m > 0, m, 1.0), np.nan)
    order = np.lexsort((np.asarray(stats["rank"])[rows], pos[g]))
    rows, g = rows[order], g[order]
    out = {c: np.asarray(stats[c])[rows] for c in cols[:-1]}
    out["kernel_type"] = ktype[g]
    out["count"] = out["count"].astype(np.int64)
    out["sum_vs_median"] = ratio[order]
    return Table(out, n=len(rows))


def merge_moments(stats) -> Table:
    """Job-wide statistics per kernel from per-rank moments (parallel algorithm of Chan et al.).

    Args:
        stats: rows ``kernel_type, name, rank, count, sum_us, max_us, min_us, mean_us, std_us`` (sample std): a
            table or frame.

    Returns:
        Columns ``kernel_type, name, ranks, count, sum_us, min_us, max_us, mean_us, std_us`` (sample std, 0 for
        one instance), by ``sum_us`` descending, name ascending among ties.
    """
    stats = Table.of(stats)
    cols = ["kernel_type", "name", "ranks", "count", "sum_us", "min_us", "max_us", "mean_us", "std_us"]
    if stats.empty:
        return Table({c: np.empty(0, dtype=object if c in ("kernel_type", "name") else np.float64) for c in cols})
    n = np.asarray(stats["count"], dtype=np.float64)
    mean = np.asarray(stats["mean_us"], dtype=np.float64)
    m2 = np.square(np.asarray(stats["std_us"], dtype=np.float64)) * np.maximum(n - 1, 0)
    names, codes = _groups(stats["name"])
    k = len(names)
    tot_n, tot_nm = group_sum(codes, n, k), group_sum(codes, n * mean, k)
    job_mean = (tot_nm / tot_n)[codes]
    # M2 of the union = Σ M2_i + Σ n_i (mean_i − mean)²
    between = n * np.square(mean - job_mean)
    m2_tot = group_sum(codes, m2, k) + group_sum(codes, between, k)
    count = tot_n.astype(np.int64)
    cnt = count.astype(np.float64)
    out = {
        "kernel_type": _text_column(np.asarray(stats["kernel_type"])[group_first_row(codes, k)]),
        "name": _text_column(names),
        "ranks": np.bincount(codes, minlength=k).astype(np.int64),
        "count": count,
        "sum_us": group_sum(codes, np.asarray(stats["sum_us"], dtype=np.float64), k),
        "min_us": group_min(codes, np.asarray(stats["min_us"], dtype=np.float64), k),
        "max_us": group_max(codes, np.asarray(stats["max_us"], dtype=np.float64), k),
        "mean_us": tot_nm / tot_n,
        "std_us": np.where(cnt > 1, np.sqrt(np.maximum(m2_tot, 0) / np.maximum(cnt - 1, 1)), 0.0),
    }
    return Table(out).take(np.argsort(-out["sum_us"], kind="stable"))  # names sorted: ties keep name order
