"""The trace model: a ``Job`` of per-rank ``RankTrace`` tables."""

from __future__ import annotations

import mmap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from holotrace.errors import RankNotFoundError
from holotrace.findings import Finding  # noqa: F401  (re-exported: part of the model's API)
from holotrace.model.derive import derive_columns
from holotrace.model.strings import StringTable
from holotrace.order_stats import distinct
from holotrace.schema import STR_ARGS as _STR_ID_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from holotrace.model.rule_table import RuleTable

__all__ = ["Job", "RankTrace", "derive_columns"]


def _widen(name: str, a: np.ndarray) -> np.ndarray:
    """Columns are stored in the smallest integer type; views give the documented dtypes."""
    if a.dtype.kind != "i":
        return a
    if name in ("cat", "name") or name in _STR_ID_COLUMNS:
        return a.astype(np.int32, copy=False)
    if name in ("kind", "kernel_type"):
        return a.astype(np.int8, copy=False)
    return a.astype(np.int64, copy=False)


class RankTrace:
    """Everything one rank's trace file holds, as columns.

    ``events`` is a pandas DataFrame in file order (see docs/architecture.md
    for its columns). Treat it as read-only: analyses never modify it.
    """

    def __init__(
        self,
        rank: int,
        file: str,
        meta: dict,
        events: dict[str, np.ndarray],
        side: dict[str, dict[str, np.ndarray]],
        strings: StringTable,
        *,
        ts_is_float: bool,
        n_trace_events: int,
        phase_counts: dict[str, int],
        raw_args: Optional[list] = None,
        format: str = "object",
    ):
        self.rank = rank
        self.file = file
        self.meta = meta
        self.ts_is_float = ts_is_float
        self.n_trace_events = n_trace_events
        self.phase_counts = phase_counts
        self.format = format
        self._strings = strings
        self._columns = events
        self._side = side
        self._events: Optional[pd.DataFrame] = None
        self._step_table: Optional[pd.DataFrame] = None
        self._first_ts: Optional[int] = None
        self.raw_args = raw_args
        #: where columns derived from these (the rules' columns) are kept between loads: the rank's cache entry
        #: (set by the loader for columns mapped from one), else None
        self.derived_store = None
        self._derive()

    def _derive(self) -> None:
        c = self._columns
        if "kind" not in c:
            c.update(derive_columns(c, self._strings.table))
        self.has_steps = bool(c["is_step"].any())

    @property
    def step_table(self) -> pd.DataFrame:
        """The ``ProfilerStep`` rows: step, ts_ns, dur_ns, end_ns, sorted by start (built on first use)."""
        if self._step_table is None:
            self._step_table = self._steps()
        return self._step_table

    def _steps(self) -> pd.DataFrame:
        import pandas as pd

        c = self._columns
        s = np.flatnonzero(c["is_step"])
        step_num = c["step_number"]
        return (
            pd.DataFrame(
                {
                    "step": step_num[s],
                    "ts_ns": c["ts_ns"][s],
                    "dur_ns": c["dur_ns"][s],
                    "end_ns": c["end_ns"][s],
                }
            )
            .sort_values(["ts_ns", "step"], kind="stable")
            .reset_index(drop=True)
        )

    # ------------------------------------------------------------------ public views
    @property
    def events(self) -> pd.DataFrame:
        """The events table, built on first use (call stacks: :func:`holotrace.analysis.callstack.call_graph`)."""
        import pandas as pd

        if self._events is None:
            self._events = pd.DataFrame({k: _widen(k, v) for k, v in self._columns.items()}, copy=False)
        return self._events

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The raw column arrays, cheap to access."""
        return self._columns

    @property
    def instants(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._side.get("instants", {}))

    @property
    def counters(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._side.get("counters", {}))

    @property
    def flows(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._side.get("flows", {}))

    @property
    def names(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self._side.get("names", {}))

    @property
    def first_ts_ns(self) -> int:
        """The earliest event start (``ts_ns``), 0 without events; read in chunks once, then kept."""
        if self._first_ts is None:
            ts = self._columns["ts_ns"]
            step = 1 << 20
            self._first_ts = min((int(ts[a : a + step].min()) for a in range(0, len(ts), step)), default=0)
            self.release_pages()
        return self._first_ts

    def release_pages(self) -> None:
        """Give back the memory pages of columns mapped from a file (see :mod:`holotrace.ingest.store`): the
        operating system keeps them cached and pages them in again when they are read. Columns in the heap
        are left alone."""
        release_mapped(a for side in (self._columns, *self._side.values()) for a in side.values())

    @property
    def n_events(self) -> int:
        return len(self._columns["ts_ns"])

    @property
    def device_type(self) -> str:
        """HTA's device inference: MTIA, NVIDIA GPU, AMD GPU or UNKNOWN GPU."""
        backend = (
            (self.meta.get("distributedInfo") or {}).get("backend")
            if isinstance(self.meta.get("distributedInfo"), dict)
            else None
        )
        if isinstance(backend, str) and "mtia:hccl" in backend:
            return "MTIA"
        s = self._strings
        names = set(distinct(self._columns["name"]).tolist())
        for sym, label in (
            ("cudaLaunchKernel", "NVIDIA GPU"),
            ("hipLaunchKernel", "AMD GPU"),
            ("runFunction - job_prep_and_submit_for_execution", "MTIA"),
        ):
            i = s.id(sym)
            if i >= 0 and i in names:
                return label
        return "UNKNOWN GPU"

    @property
    def clock_offset_ns(self) -> int:
        """Add to ``ts_ns`` to place this rank on the job's common clock."""
        base = self.meta.get("baseTimeNanoseconds")
        if isinstance(base, int) and self.n_events and self.first_ts_ns < 10**16:  # ts relative to base, not epoch
            return base
        return 0

    def __repr__(self) -> str:
        return f"RankTrace(rank={self.rank}, file={self.file!r}, events={self.n_events})"


def release_mapped(arrays) -> None:
    """Give back the memory pages of the file mappings under ``arrays`` (each mapping once; arrays in the heap are
    left alone): the operating system keeps the pages cached and maps them in again when they are read, so the
    arrays stay valid and their values the same."""
    seen = set()
    for a in arrays:
        base = getattr(a, "base", None)
        if base is None or id(base) in seen:
            continue
        seen.add(id(base))
        release = getattr(base, "release_pages", None)  # a mapping made by the store
        mm = getattr(base, "obj", None)  # or Python's mmap, where the C library's is not used
        try:
            if release is not None:
                release()
            elif isinstance(mm, mmap.mmap):
                mm.madvise(mmap.MADV_DONTNEED)
        except (AttributeError, OSError, ValueError):  # no madvise here, or the mapping is closed
            pass


def trim_heap() -> None:
    """Give the free pages of the process's heap back to the operating system (the C library's ``malloc_trim``,
    where it has one: glibc). Freed arrays stay in the heap for reuse; a command that has let go of much (its view's
    columns once its analyses are made) and goes on with less calls this, so what it no longer holds stops counting
    in its memory."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes

            _malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", False)
        except (OSError, AttributeError, TypeError):  # no C library to ask (or not this one)
            pass
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None  # the C library's malloc_trim, False where there is none (found at first use)


@dataclass
class Job:
    """All ranks of one profiled run, with what validation found."""

    traces: dict[int, RankTrace]
    strings: StringTable
    findings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (file, why)
    path: str = ""
    #: the rule table holotrace's rule set classifies this job's events with (the built-in table with the user's
    #: rules first, from ``load(rules=...)`` or ``$HOLOTRACE_RULES``); None: resolved when a view is built
    rule_table: Optional[RuleTable] = None
    # the job's views, built once per rule-set shape and ranks (holotrace.model.view.resolve); never pickled
    _views: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_views"] = {}
        return state

    def forget_views(self) -> None:
        """Drop the views built for this job (their memory is freed once no analysis holds them)."""
        self._views.clear()

    @property
    def ranks(self) -> list[int]:
        return sorted(self.traces)

    @property
    def files(self) -> dict[int, str]:
        return {r: t.file for r, t in sorted(self.traces.items())}

    def rank(self, r: int) -> RankTrace:
        try:
            return self.traces[int(r)]
        except (KeyError, ValueError, TypeError):
            raise RankNotFoundError(f"rank {r} is not in this job (ranks: {self.ranks})") from None

    @property
    def origin_ns(self) -> int:
        """Earliest event start over all ranks, on the common clock."""
        starts = [t.first_ts_ns + t.clock_offset_ns for t in self.traces.values() if t.n_events]
        return min(starts) if starts else 0

    @property
    def world_size(self) -> Optional[int]:
        for t in self.traces.values():
            di = t.meta.get("distributedInfo")
            if isinstance(di, dict) and isinstance(di.get("world_size"), int):
                return di["world_size"]
        return None

    @property
    def cross_rank_warning(self) -> Optional[str]:
        """A sentence to print beside any cross-rank number, from the findings whose code is ``cross_rank``
        (ranks missing, duplicated, out of range or from other jobs; clocks that cannot be compared)."""
        bad = [f for f in self.findings if f.code.cross_rank]
        if not bad:
            return None
        return "; ".join(f.message for f in bad)

    def __repr__(self) -> str:
        return f"Job(ranks={self.ranks}, findings={len(self.findings)})"
