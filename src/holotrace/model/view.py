"""What every analysis reads: the events of each rank as numpy columns, under a rule set.

``job_view(job, rules)`` is the one input type of the analyses. It holds, per rank, the same columns
whatever the rules, so each analysis has one implementation:

=================== ======== =========================================================================
column              dtype    meaning
=================== ======== =========================================================================
``row``             int64    position of the event in the rank's model columns (``RankTrace.columns``)
``index``           int64    position in the file's ``traceEvents`` (stable event id)
``cat``             int64    id into ``job.strings`` (−1: absent)
``name``            int*     id into ``job.strings`` (−1: absent)
``pid``, ``tid``    int64    as written (GPU rows: device, stream)
``ts``, ``end``     int64    start; end = ts + dur (``float64`` end under HTA's rules)
``dur``             *        duration: int64 ns (holotrace) or float64 µs (HTA)
``stream``          int*     GPU stream, −1 for CPU events
``correlation``     int*     launch ↔ GPU correlation id, −1 when absent
``kind``            int8     :class:`holotrace.model.classify.Kind`
``gpu``             bool     GPU work the breakdowns analyse (holotrace: kernels, memcpy, memset; HTA: every
                             row that carries a stream)
``kernel_type``     int8     :class:`~holotrace.model.classify.KernelType` of ``gpu`` rows under the rules, −1 else
                             (holotrace's rules: by name, or by the collective op the row was launched under)
``comm_kind``       int8     :class:`~holotrace.model.rule_table.CommKind` of communication rows (GPU work, and CPU
                             ops that are collectives, e.g. ``gloo:all_reduce``), −1 else
``rule``            int32    id of the rule that decided (``JobView.table.rules[id]``), −1 none
``comm_op``         int*     position (in this view) of the collective op a GPU row was launched under, −1 none
                             (its args hold the process group and size); −1 under HTA's rules
``partner``         int*     position (in this view) of the correlated launch ↔ GPU row, −1 if none
``index_correlation`` int64  HTA's link column: −1 no correlation, 0 partner absent, else the partner's ``index``
``iteration``       *        ``ProfilerStep`` number (CPU rows by containment, GPU rows through their launch), −1
                             none (float64 with NaN under HTA's rules where HTA leaves it undefined)
=================== ======== =========================================================================

``int*``: int64 under HTA's rules; under holotrace's, int32 or int64 as the model holds them (ids and positions, so
half the memory of int64 for most traces; a key that multiplies them widens first, and a result frame holds them
as int64, :func:`wide`). ``pid`` and ``tid`` are int64 (thread keys are packed from them).

Times are in the rules' unit: exact integer nanoseconds on the rank's own clock (holotrace), or HTA's
rounded, job-aligned microseconds (see :mod:`holotrace.model.view_hta`). ``JobView.us`` converts.
A view never shares writable memory with the model: a model column that is already int64 and read-only (mapped
from the cache) is held as it is, the others are copied; treat every array of a view as read-only. Under holotrace's
rules the columns an analysis may not read (``row``, ``cat``, ``pid``, ``tid``, ``stream``, ``correlation``,
``iteration``, ``index_correlation``) are made on first use (:class:`Columns`), once per view, and the rules' columns
(``kernel_type``, ``comm_kind``, ``rule``, ``comm_op``) together at the first read of one of them: a view is built at
once, and a command's threads classify the ranks they reach first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Optional

import numpy as np

from holotrace.errors import RankNotFoundError
from holotrace.exec.pool import thread_map
from holotrace.model import classify
from holotrace.model.classify import NATIVE, RuleSet
from holotrace.model.comm_evidence import classify_rank
from holotrace.model.job import release_mapped, trim_heap
from holotrace.model.lazy_columns import Columns
from holotrace.model.rule_table import RuleTable, hta_table, resolve_table
from holotrace.model.strings import StringTable

__all__ = [
    "Columns",
    "RankView",
    "JobView",
    "resolve",
    "job_view",
    "build_view",
    "COLUMNS",
    "take_rows",
    "restrict",
    "wide",
]

COLUMNS = (
    "row",
    "index",
    "cat",
    "name",
    "pid",
    "tid",
    "ts",
    "dur",
    "end",
    "stream",
    "correlation",
    "kind",
    "gpu",
    "kernel_type",
    "comm_kind",
    "rule",
    "comm_op",
    "partner",
    "index_correlation",
    "iteration",
)


@dataclass(frozen=True)
class RankView(Mapping):
    """One rank's events under a rule set: a read-only mapping of column name → numpy array."""

    rank: int
    cols: Mapping[str, np.ndarray]
    model: Mapping[str, np.ndarray] = field(repr=False)  # the rank's model columns (other args by ``row``)
    clock_offset: int = 0  # add to ``ts`` to put the rank on the job's common clock (rules' unit)
    _rows: dict = field(default_factory=dict, repr=False, compare=False)
    #: where the rules' columns of the rank's whole model are kept between commands (its cache entry), or None
    store: object = field(default=None, repr=False, compare=False)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.cols[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.cols)

    def __len__(self) -> int:
        return len(self.cols)

    @property
    def n(self) -> int:
        """Number of events."""
        return len(self.cols["ts"])

    def rows_where(self, column: str, value: int) -> np.ndarray:
        """Positions of the rows whose ``column`` equals ``value``, ascending (computed once per view:
        the columns never change)."""
        key = (column, int(value))
        out = self._rows.get(key)
        if out is None:
            out = np.flatnonzero(self.cols[column] == value)
            out.flags.writeable = False  # shared by every analysis that asks
            out = self._rows.setdefault(key, out)
        return out

    def at(self, column: str, rows: np.ndarray) -> np.ndarray:
        """``self[column][rows]``: for ``pid`` and ``tid`` (as int64) read from the model's column at those rows, and
        ``index_correlation`` made at those rows only, when the view has not made the whole column and holds the
        model's rows in order (``row`` not made, as :meth:`arg` reads it): the same values, without the whole
        column."""
        cols = self.cols
        if isinstance(cols, Columns) and not cols.is_made(column) and not cols.is_made("row"):
            if column in ("pid", "tid"):
                return np.asarray(self.model[column])[rows].astype(np.int64)
            if column == "index_correlation" and "partner" in cols:
                return index_correlation(cols["index"], cols["partner"], self.model["correlation"], rows)
        return cols[column][rows]

    def derived(self, key: tuple, make: Callable[[], object]):
        """``make()``, computed once per rank view and kept under ``key`` (a tuple naming the analysis and every
        argument and rule flag the result depends on): for what several analyses of one command derive from
        this rank's columns. Treat the result as read-only."""
        key = ("derived", *key)
        out = self._rows.get(key)
        if out is None:
            out = self._rows.setdefault(key, make())
        return out

    def bounds(self, sel=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)`` of the selected rows in one dtype (HTA's ends are float µs)."""
        end = self.cols["end"][sel]
        return self.cols["ts"][sel].astype(end.dtype, copy=False), end

    def release_pages(self) -> None:
        """Give back the memory pages of the rank's columns mapped from a file (:func:`release_mapped`): for an
        analysis that has made what it needs of this rank (the other ranks' pages are left as they are). They are
        paged in again, from the operating system's cache, when read."""
        release_mapped(self.model.values())

    def arg(self, column: str) -> np.ndarray:
        """Any other model column (e.g. ``bytes``, ``external_id``, ``input_dims``) for this view's rows."""
        if isinstance(self.cols, Columns) and not self.cols.is_made("row"):  # every model row, in order
            return np.array(np.asarray(self.model[column]))
        return self.model[column][self.cols["row"]]


@dataclass(frozen=True)
class JobView:
    """Every rank of a job under one rule set (see the module docstring)."""

    views: Mapping[int, RankView]
    strings: StringTable
    rules: RuleSet
    unit_ns: int  # nanoseconds per time unit of the columns: 1 (holotrace) or 1000 (HTA's µs)
    include_last_step: bool = True
    table: Optional[RuleTable] = None  # the rule table the ``kernel_type``/``comm_kind``/``rule`` columns came from
    _per_string: dict = field(default_factory=dict, repr=False, compare=False)
    _derived: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def ranks(self) -> list[int]:
        return sorted(self.views)

    def __getitem__(self, rank: int) -> RankView:
        try:
            return self.views[int(rank)]
        except (KeyError, ValueError, TypeError):
            raise RankNotFoundError(f"rank {rank} is not in this job (ranks: {self.ranks})") from None

    def shed(self, keep: Collection[str] = ()) -> None:
        """Let go of what was made of the ranks' columns under holotrace's rules: every view column but ``keep``'s
        and every value derived per rank (:meth:`RankView.derived`, :meth:`RankView.rows_where`). Whatever is read
        again is made again, to the same values. For a command whose analyses have read the view and that goes on
        with what they made (a job graph's replays) while the view waits; the view's own derived values (the job
        graph among them) are kept. A view under HTA's rules is left as it is."""
        if self.rules.hta_table or self.table is None:
            return
        for r in self.ranks:
            v = self[r]
            if isinstance(v.cols, Columns):
                v.cols.forget(keep, partial(_remade, v.model, self.strings, self.table, v.store))
            v._rows.clear()
        trim_heap()  # (what was let go, and what the analyses freed before, leaves the heap)

    def release_pages(self) -> None:
        """Give back the memory pages of the ranks' columns mapped from a file (:func:`release_mapped`): for a
        command that has made what it goes on with (a job graph) from columns it read once. They are paged in
        again, from the operating system's cache, when read."""
        for r in self.ranks:
            self[r].release_pages()

    def select(self, ranks: Optional[Sequence[int]] = None) -> list[int]:
        """``ranks`` checked against the job (every rank, ascending, when None)."""
        if ranks is None:
            return self.ranks
        for r in ranks:
            self[r]
        return [int(r) for r in ranks]

    def first_ts(self) -> int:
        """The job's first event on the common clock (the view's unit; 0 when no rank has an event): what
        ``start_us``-style columns are measured from. Computed once per view."""

        def first() -> int:
            starts = [int(v["ts"].min()) + v.clock_offset for v in (self[r] for r in self.ranks) if v.n]
            return min(starts) if starts else 0

        return self.derived(("first_ts",), first)

    def us(self, t):
        """Times of this view in µs (float64)."""
        return np.asarray(t, dtype=np.float64) / (1000.0 / self.unit_ns)

    def names(self, ids: np.ndarray) -> np.ndarray:
        """Decode name/cat ids into an object array of str (``""`` for −1)."""
        return self.strings.decode(np.asarray(ids))

    def per_string(self, rule, *, prefix: str = "", missing=-1, dtype=np.int64) -> np.ndarray:
        """``rule(s)`` for every string of the job (index = id; the last entry, for id −1, is ``missing``).

        Only strings starting with ``prefix`` are tested (the others get ``missing``). For a named rule (a
        module function or a method) the array is computed once per view and kept: a pure function of the job's
        strings, so analyses may share it. A lambda or a function defined inside a call is a new object at every
        call: its array is computed each time and not kept (it could never be found again).
        """
        key = (rule, prefix, missing, np.dtype(dtype).str)
        out = self._per_string.get(key)
        if out is None:
            table = self.strings.table
            out = np.full(len(table) + 1, missing, dtype=dtype)
            for i, s in enumerate(table):
                if s.startswith(prefix):
                    out[i] = rule(s)
            if "<" not in getattr(rule, "__qualname__", "<"):  # "<lambda>", "<locals>": not findable again
                self._per_string[key] = out
        return out

    def derived(self, key, make: Callable[[], object]):
        """``make()``, computed once per view and kept under ``key``: for what several analyses of one command
        derive from the same columns (the job graph of the replay). A relabelled view shares it (the same columns);
        a view of some ranks starts empty."""
        out = self._derived.get(key)
        if out is None:
            out = self._derived[key] = make()
        return out

    def lookup(self, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Gather a :meth:`per_string` array at string ids (−1 reads the array's last entry)."""
        ids = np.asarray(ids)
        return values[np.where(ids >= 0, ids, len(values) - 1)]

    def name_ids(self, test) -> np.ndarray:
        """Ids of the job's strings for which ``test(s)`` is true (a predicate, or a set of strings)."""
        if isinstance(test, (set, frozenset, list, tuple)):
            return np.array(sorted(i for i in (self.strings.id(s) for s in test) if i >= 0), dtype=np.int64)
        return np.array([i for i, s in enumerate(self.strings.table) if test(s)], dtype=np.int64)


def resolve(
    source, rules: Optional[RuleSet] = None, *, ranks: Optional[Sequence[int]] = None, include_last_step: bool = False
) -> JobView:
    """The view an analysis reads: ``source`` under ``rules``, the one place a rule set is resolved.

    ``source`` is a :class:`~holotrace.model.job.Job` or a :class:`JobView`. ``rules`` None means the view's own
    rules (a view) or :data:`~holotrace.model.classify.NATIVE` (a job). A view given with other rules is returned
    relabelled, sharing its columns (the facade reads HTA's table under ``HTA`` or ``HTA_FIXED``; a test may read
    holotrace's columns under HTA's rules): the rules asked for are the ones applied. A job's
    view is built once per shape, ``ranks`` and ``include_last_step`` (HTA's rules only) and kept on the job, so
    every analysis of one command shares it; a view of some ranks is taken from the job's full view when that
    exists. The returned view's ``rules`` are the rules to apply.
    """
    if isinstance(source, JobView):
        if rules is None or rules == source.rules:
            return source
        return replace(source, rules=rules)  # the same columns, read under the rules asked for
    rules = rules or NATIVE
    last = bool(include_last_step) if rules.hta_table else True
    cache = source._views if isinstance(getattr(source, "_views", None), dict) else {}
    chosen = None if ranks is None else tuple(int(source.rank(r).rank) for r in ranks)
    full = cache.get((_shape(rules), last, None))
    if full is not None:
        view = (
            full if chosen is None else replace(full, views={r: full[r] for r in chosen}, _per_string={}, _derived={})
        )
    else:
        key = (_shape(rules), last, chosen)
        view = cache.get(key)
        if view is None:
            view = cache[key] = build_view(source, rules, ranks=chosen, include_last_step=last)
    return view if view.rules == rules else replace(view, rules=rules)


def _shape(rules: RuleSet) -> bool:
    """What the view's columns depend on: HTA's table or holotrace's."""
    return bool(rules.hta_table)


def job_view(
    job, rules: Optional[RuleSet] = None, *, ranks: Optional[Sequence[int]] = None, include_last_step: bool = False
) -> JobView:
    """:func:`resolve` (the name the analyses used first)."""
    return resolve(job, rules, ranks=ranks, include_last_step=include_last_step)


def build_view(
    job, rules: RuleSet = NATIVE, *, ranks: Optional[Sequence[int]] = None, include_last_step: bool = False
) -> JobView:
    """The job's events under ``rules``, built now (every rank unless ``ranks``; on threads). Analyses call
    :func:`resolve`, which keeps what this builds on the job.

    ``include_last_step`` matters under HTA's rules only (HTA drops the last ``ProfilerStep`` and what it
    launched unless asked not to).
    """
    chosen = list(job.ranks) if ranks is None else [job.rank(r).rank for r in ranks]
    if rules.hta_table:
        from holotrace.model import view_hta

        cols = view_hta.hta_rank_columns(job, chosen, include_last_step)
        views = {r: RankView(r, cols[r], job.rank(r).columns, 0) for r in chosen}
        return JobView(views, job.strings, rules, 1000, include_last_step, hta_table())
    table = rule_table_of(job)
    views = thread_map(lambda r: _native(job, r, table), chosen)
    return JobView(views, job.strings, rules, 1, True, table)


def rule_table_of(job) -> RuleTable:
    """The rule table holotrace's rules read for ``job``: the one it was loaded with, else the built-in table with
    the files of ``$HOLOTRACE_RULES``."""
    return job.rule_table if getattr(job, "rule_table", None) is not None else resolve_table(None)


def _native(job, rank: int, table: RuleTable) -> RankView:
    t = job.rank(rank)
    store = getattr(t, "derived_store", None)
    cols, makers, together = _native_columns(t.columns, t.n_events, job.strings, table, store)
    view_cols = Columns(cols, makers, COLUMNS, together)
    return RankView(int(rank), view_cols, t.columns, int(t.clock_offset_ns), store=store)


def _native_columns(
    c: Mapping[str, np.ndarray], n: int, strings: StringTable, table: RuleTable, store=None
) -> tuple[dict, dict, dict]:
    """A rank's view columns under holotrace's rules from its model columns ``c`` (``n`` events): those made now,
    the makers of others, and the function that makes the rules' columns together (keyed by each of them).
    ``store``: where the rules' columns of these model columns are kept between commands (``get(name)`` and
    ``put(name, columns)``: :class:`holotrace.ingest.derived.EntryStore`), read before they are made."""
    i64 = lambda a: _held(a, np.int64)  # noqa: E731
    kind = _held(c["kind"], np.int8)
    gpu = classify.is_gpu_activity(kind)
    partner = _held_narrow(c["partner"])
    index = i64(c["index"])
    cols = {
        "index": index,
        "name": _held_narrow(c["name"]),
        "ts": i64(c["ts_ns"]),
        "dur": i64(c["dur_ns"]),
        "end": i64(c["end_ns"]),
        "kind": kind,
        "gpu": gpu,
        "partner": partner,
    }
    threads = {"pid": c["pid"], "tid": c["tid"]}  # read as the model holds them (compared, never packed)

    def classified() -> dict:  # the rules' columns, made together on first use (a command's threads then start at once)
        name = f"rules-{table.fingerprint()}{_rules_code()}" if store is not None else None
        kept = store.get(name, _CLASSIFIED) if name is not None else None
        if kept is not None:
            return kept
        out = classify_rank({**cols, **threads}, strings, table, gpu=gpu, collective_name=c.get("collective_name"))
        if name is not None:
            store.put(name, out)
        return out

    makers = {
        "row": lambda: np.arange(n, dtype=np.int64),
        "cat": lambda: i64(c["cat"]),
        "pid": lambda: i64(c["pid"]),
        "tid": lambda: i64(c["tid"]),
        "stream": lambda: _held_narrow(c["stream"]),
        "correlation": lambda: _held_narrow(c["correlation"]),
        "index_correlation": lambda: index_correlation(index, partner, c["correlation"]),
        "iteration": lambda: _held_narrow(c["iteration"]),
    }
    return cols, makers, dict.fromkeys(_CLASSIFIED, classified)


_CLASSIFIED = ("kernel_type", "comm_kind", "rule", "comm_op")  # (classify_rank's columns)


def _rules_code() -> str:
    """The digest of the code that makes the rules' columns (what names those kept beside a cache entry)."""
    import sys

    from holotrace.code_digest import code_digest
    from holotrace.model import comm_evidence, rule_table

    return code_digest(comm_evidence, rule_table, classify, sys.modules[__name__])


def _remade(model: Mapping[str, np.ndarray], strings: StringTable, table: RuleTable, store, key: str) -> np.ndarray:
    """One view column of a rank (holotrace's rules) made again from its model columns, after :meth:`JobView.shed`."""
    cols, makers, together = _native_columns(model, len(model["ts_ns"]), strings, table, store)
    return cols[key] if key in cols else makers[key]() if key in makers else together[key]()[key]


def index_correlation(index: np.ndarray, partner: np.ndarray, correlation, rows: Optional[np.ndarray] = None):
    """HTA's ``index_correlation`` under holotrace's rules (at ``rows``, default every row): the partner's ``index``
    (a launch's kernel, a kernel's launch), else 0 for a row with a correlation id, else -1."""
    if rows is not None:
        partner, correlation = partner[rows], np.asarray(correlation)[rows]
    if not len(partner):
        return np.zeros(0, dtype=np.int64) if rows is not None else index.copy()
    icorr = np.where(partner >= 0, index[np.clip(partner, 0, None)], np.where(np.asarray(correlation) >= 0, 0, -1))
    return icorr.astype(np.int64, copy=False)


def _held(a, dtype) -> np.ndarray:
    """A model column as ``dtype``, for the view to hold: the model's own array when it already has that dtype
    and is read-only (mapped from the cache: nothing can write through it), else a copy."""
    a = np.asarray(a)
    if a.dtype == dtype and not a.flags.writeable:
        return a
    return a.astype(dtype)


def wide(a: np.ndarray) -> np.ndarray:
    """A view column's values as int64 when they are integers (the view holds some narrower), floats as they are
    (HTA's iterations): for a result frame, whose columns keep one dtype whatever the view holds."""
    return a.astype(np.int64, copy=False) if a.dtype.kind in "iu" else a


def _held_narrow(a) -> np.ndarray:
    """An id, position or small-number column as the model holds it when that is int32 or int64 (read-only:
    mapped from the cache), else as int32: half the memory of int64 for every rank's ``name``, ``partner``,
    ``stream``, ``correlation`` and ``iteration`` (ids and positions, never multiplied: a key packing them
    widens first)."""
    a = np.asarray(a)
    if a.dtype.kind == "i" and a.dtype.itemsize >= 4:
        return _held(a, a.dtype)
    return a.astype(np.int32)


def take_rows(v: RankView, rows: np.ndarray) -> RankView:
    """The view of ``v``'s rows at positions ``rows`` (ascending); ``partner`` is renumbered (−1 where the
    partner is not kept). Every other column keeps its values, ``row`` included (model columns still read)."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = {k: a[rows] for k, a in v.cols.items()}
    new_pos = np.full(v.n + 1, -1, dtype=np.int64)  # the last entry reads partner −1
    new_pos[rows] = np.arange(len(rows), dtype=np.int64)
    cols["partner"] = new_pos[cols["partner"]]
    if "comm_op" in cols:
        cols["comm_op"] = new_pos[cols["comm_op"]]
    return RankView(v.rank, cols, v.model, v.clock_offset)


def restrict(view: JobView, rows: Mapping[int, np.ndarray]) -> JobView:
    """A view of the ranks in ``rows`` (``{rank: kept row positions}``), each reduced to those rows."""
    views = {int(r): take_rows(view[r], k) for r, k in rows.items()}
    return JobView(views, view.strings, view.rules, view.unit_ns, view.include_last_step, view.table)
