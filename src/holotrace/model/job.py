"""The trace model: a ``Job`` of per-rank ``RankTrace`` tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.errors import RankNotFoundError
from holotrace.model import classify, link
from holotrace.findings import Finding  # noqa: F401  (re-exported: part of the model's API)
from holotrace.model.strings import StringTable
from holotrace.schema import STR_ARGS as _STR_ID_COLUMNS


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

    def __init__(self, rank: int, file: str, meta: dict, events: dict[str, np.ndarray], side: dict[str, dict[str, np.ndarray]],
                 strings: StringTable, *, ts_is_float: bool, n_trace_events: int, phase_counts: dict[str, int],
                 raw_args: Optional[list] = None, format: str = "object"):
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
        self.raw_args = raw_args
        self._derive()

    def _derive(self) -> None:
        c = self._columns
        if "kind" not in c:
            c.update(derive_columns(c, self._strings.table))
        is_step = c["is_step"]
        self.has_steps = bool(is_step.any())
        self.step_table = self._steps(is_step, c["step_number"])

    def _steps(self, is_step: np.ndarray, step_num: np.ndarray) -> pd.DataFrame:
        c = self._columns
        s = np.flatnonzero(is_step)
        return pd.DataFrame({
            "step": step_num[s],
            "ts_ns": c["ts_ns"][s],
            "dur_ns": c["dur_ns"][s],
            "end_ns": c["end_ns"][s],
        }).sort_values(["ts_ns", "step"], kind="stable").reset_index(drop=True)

    # ------------------------------------------------------------------ public views
    @property
    def events(self) -> pd.DataFrame:
        """The events table, built on first use (call stacks: :func:`holotrace.analysis.callstack.call_graph`)."""
        if self._events is None:
            self._events = pd.DataFrame({k: _widen(k, v) for k, v in self._columns.items()}, copy=False)
        return self._events

    @property
    def columns(self) -> dict[str, np.ndarray]:
        """The raw column arrays, cheap to access."""
        return self._columns

    @property
    def instants(self) -> pd.DataFrame:
        return pd.DataFrame(self._side.get("instants", {}))

    @property
    def counters(self) -> pd.DataFrame:
        return pd.DataFrame(self._side.get("counters", {}))

    @property
    def flows(self) -> pd.DataFrame:
        return pd.DataFrame(self._side.get("flows", {}))

    @property
    def names(self) -> pd.DataFrame:
        return pd.DataFrame(self._side.get("names", {}))

    @property
    def n_events(self) -> int:
        return len(self._columns["ts_ns"])

    @property
    def device_type(self) -> str:
        """HTA's device inference: MTIA, NVIDIA GPU, AMD GPU or UNKNOWN GPU."""
        backend = (self.meta.get("distributedInfo") or {}).get("backend") if isinstance(self.meta.get("distributedInfo"), dict) else None
        if isinstance(backend, str) and "mtia:hccl" in backend:
            return "MTIA"
        s = self._strings
        names = set(np.unique(self._columns["name"]).tolist())
        for sym, label in (("cudaLaunchKernel", "NVIDIA GPU"), ("hipLaunchKernel", "AMD GPU"),
                           ("runFunction - job_prep_and_submit_for_execution", "MTIA")):
            i = s.id(sym)
            if i >= 0 and i in names:
                return label
        return "UNKNOWN GPU"

    @property
    def clock_offset_ns(self) -> int:
        """Add to ``ts_ns`` to place this rank on the job's common clock."""
        base = self.meta.get("baseTimeNanoseconds")
        ts = self._columns["ts_ns"]
        if isinstance(base, int) and len(ts) and int(ts.min()) < 10**16:  # ts relative to base, not epoch
            return base
        return 0

    def __repr__(self) -> str:
        return f"RankTrace(rank={self.rank}, file={self.file!r}, events={self.n_events})"


@dataclass
class Job:
    """All ranks of one profiled run, with what validation found."""

    traces: dict[int, RankTrace]
    strings: StringTable
    findings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (file, why)
    path: str = ""

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
        starts = [int(t.columns["ts_ns"].min()) + t.clock_offset_ns for t in self.traces.values() if t.n_events]
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


def derive_columns(c: dict[str, np.ndarray], table: list[str]) -> dict[str, np.ndarray]:
    """Classification and links of one rank's raw columns (ids into ``table``)."""
    n_str = len(table)
    lut = classify.classify_strings(table)
    cat, name = c["cat"], c["name"]
    safe_name = np.where(name >= 0, name, n_str)

    def per_name(key: str, missing):
        arr = lut[key]
        full = np.empty(n_str + 1, dtype=arr.dtype)
        full[:-1] = arr
        full[-1] = missing
        return full[safe_name]

    out: dict[str, np.ndarray] = {}
    kind = classify.kinds(cat, name, table)
    out["end_ns"] = c["ts_ns"] + c["dur_ns"]
    out["kind"] = kind
    gpu_activity = np.isin(kind, [int(k) for k in classify.GPU_ACTIVITY])
    on_gpu = (kind >= 10) & (kind < 20)
    out["kernel_type"] = np.where(gpu_activity, per_name("kernel_type", -1), -1).astype(np.int8)
    cpu_side = (kind == classify.Kind.RUNTIME) | (kind == classify.Kind.DRIVER)
    out["is_launch"] = per_name("is_launch", False) & cpu_side
    gpu_side = on_gpu & (kind != classify.Kind.GPU_ANNOTATION)
    partner = link.correlate(c["correlation"], cpu_side, gpu_side)
    out["partner"] = partner
    step_num = per_name("step", -1)
    is_step = (step_num >= 0) & ((kind == classify.Kind.USER_ANNOTATION) | (kind == classify.Kind.CPU_OP))
    out["is_step"] = is_step
    out["step_number"] = np.where(is_step, step_num, -1)
    it = np.full(len(kind), -1, dtype=np.int64)
    if is_step.any():
        s = np.flatnonzero(is_step)
        it_cpu = link.containing_step(c["ts_ns"], c["ts_ns"][s], out["end_ns"][s], step_num[s])
        it = np.where(~on_gpu, it_cpu, -1)
        linked = gpu_side & (partner >= 0)
        it[linked] = it_cpu[partner[linked]]
    out["iteration"] = it
    return out
