"""CUPTI range-profiler counters attributed to operators, and the FLOPs / arithmetic intensity they give.

Traces recorded in CUPTI range-profiler mode carry one event per profiled kernel, of category
``cuda_profiler_range``, whose ``args`` are the counter values; the ranges have synthetic times and no
correlation, so the i-th range (by time) is paired with the i-th kernel launch call (by time; the rules are
``classify.is_cupti_launch_name`` and ``classify.is_cupti_launch_category``). The launch's operator stack
(``cpu_op`` events enclosing it, outermost first) comes from the call graph of the range's own rank.

* :func:`counter_data` — one rank: the ranges with their counters, launch and operator stack.
* :func:`counters_with_operators` — every asked rank, as plain frames (native API).
* :func:`flops` — FLOPs per kernel from the SASS instruction counters
  (:data:`CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`), DRAM bytes and arithmetic intensity where the DRAM byte
  counters are present, and the same summed per operator: the inputs of a roofline in one call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import msgspec
import numpy as np
import pandas as pd

from holotrace.analysis.callstack import CallGraph, call_graph
from holotrace.errors import JobConsistencyError
from holotrace.model import classify
from holotrace.model.view import JobView, resolve

log = logging.getLogger("holotrace.analysis")

__all__ = [
    "CUDA_SASS_INSTRUCTION_COUNTER_FLOPS",
    "DRAM_BYTE_COUNTERS",
    "CounterData",
    "counter_data",
    "counters_with_operators",
    "flops",
    "has_ranges",
    "hta_frame",
]

#: FLOPs per executed SASS instruction counter (fused multiply-add = 2)
CUDA_SASS_INSTRUCTION_COUNTER_FLOPS: dict[str, float] = {
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum": 2 if "fma" in op else 1
    for op in ("ffma", "fmul", "fadd", "hfma", "hmul", "hadd", "dfma", "dmul", "dadd")
}
#: counters whose sum is the bytes moved to/from DRAM (either the total, or read + write)
DRAM_BYTE_COUNTERS = ("dram__bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")


@dataclass
class CounterData:
    """One rank's CUPTI ranges. ``frame`` is None when the rank cannot be paired (see ``problems``)."""

    rank: int
    frame: Optional[pd.DataFrame]
    counters: list = field(default_factory=list)
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # view rows of the ranges
    launch_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    problems: list = field(default_factory=list)


def has_ranges(view: JobView) -> bool:
    """The job has any CUPTI range event."""
    return view.strings.id(classify.CUPTI_RANGE_CATEGORY) >= 0


def _raw_args(rank: int, job, raw_args) -> Optional[list]:
    """The rank's raw ``args`` texts: given, or kept by the job (``load(..., all_args=True)``)."""
    if raw_args is not None:
        return raw_args
    t = job.rank(rank) if job is not None else None
    return t.raw_args if t is not None else None


def _counters(texts: list) -> tuple[list, dict]:
    """Counter names (first appearance order) and their int64 columns (−1 where a range lacks one)."""
    decoded = [msgspec.json.decode(t) if t else {} for t in texts]
    names: dict[str, None] = {}
    for d in decoded:
        for k, v in d.items() if isinstance(d, dict) else ():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                names.setdefault(k, None)
    cols = {
        k: np.array([int(d.get(k, -1)) if isinstance(d, dict) else -1 for d in decoded], dtype=np.int64) for k in names
    }
    return list(names), cols


def counter_data(
    source,
    rank: int,
    *,
    rules=None,
    job=None,
    raw_args: Optional[list] = None,
    graph: Optional[CallGraph] = None,
    strict: bool = False,
) -> CounterData:
    """One rank's CUPTI ranges paired with their launches.

    ``frame`` columns: ``index`` (the range's event id), ``name`` (kernel name or ``__missing__``), ``ts``,
    ``dur`` (the view's unit; synthetic in this trace mode), ``index_runtime`` (the launch's event id),
    ``launch_ts``, ``op_stack`` (list of operator names, outermost first), ``top_level_op``,
    ``bottom_level_op`` (``""`` for a launch outside any operator), then one int64 column per counter
    (−1 where absent). The counter values are the ranges' raw ``args``: ``raw_args`` (the rank's list, one
    text per model row), else those the job kept (load it with ``all_args=True``); pass ``job`` when
    ``source`` is a view. Different range and launch counts: ``frame`` is None and the
    problem names the rank and both counts (``strict=True`` raises :class:`JobConsistencyError`).
    """
    if job is None and not isinstance(source, JobView):
        job = source
    view = resolve(source, rules)
    rv = view[rank]
    res = CounterData(int(rank), None)
    cat_id = view.strings.id(classify.CUPTI_RANGE_CATEGORY)
    if cat_id < 0:
        res.problems.append(
            f"rank {rank}: no events of category 'cuda_profiler_range' (was the trace recorded in CUPTI "
            f"range-profiler mode?)"
        )
        return res
    ranges = np.flatnonzero(rv["cat"] == cat_id)
    ranges = ranges[np.argsort(rv["ts"][ranges], kind="stable")]
    launch_test = view.per_string(classify.is_cupti_launch_name, prefix="cudaLaunchKernel", missing=False, dtype=bool)
    cat_test = view.per_string(classify.is_cupti_launch_category, prefix="cuda_runtime", missing=False, dtype=bool)
    launches = np.flatnonzero(view.lookup(rv["name"], launch_test) & view.lookup(rv["cat"], cat_test))
    launches = launches[np.argsort(rv["ts"][launches], kind="stable")]
    if len(ranges) != len(launches):
        msg = (
            f"rank {rank}: {len(ranges)} CUPTI counter ranges but {len(launches)} kernel launches; they are paired "
            f"by position, so the rank is skipped"
        )
        if strict:
            raise JobConsistencyError(msg, fix="profile the same kernels that were launched, or drop the rank")
        res.problems.append(msg)
        return res
    res.rows, res.launch_rows = ranges, launches
    graph = graph if graph is not None else call_graph(view, rank, rules=view.rules)
    stacks = _op_stacks(view, rv, graph, launches)
    names = view.names(rv["name"][ranges])
    frame = pd.DataFrame(
        {
            "index": rv["index"][ranges],
            "name": names,
            "ts": rv["ts"][ranges],
            "dur": rv["dur"][ranges],
            "index_runtime": rv["index"][launches],
            "launch_ts": rv["ts"][launches],
            "op_stack": stacks,
            "top_level_op": [s[0] if s else "" for s in stacks],
            "bottom_level_op": [s[-1] if s else "" for s in stacks],
        }
    )
    texts = _raw_args(rank, job, raw_args)
    if texts is not None and len(ranges):
        res.counters, cols = _counters([texts[int(i)] for i in rv["row"][ranges].tolist()])
        for k in res.counters:
            frame[k] = cols[k]
    elif texts is None and len(ranges):
        res.problems.append(f"rank {rank}: the counter values were not kept: load the job with all_args=True")
    _check_names(view, rv, ranges, launches, res)
    res.frame = frame
    return res


def _op_stacks(view: JobView, rv, graph: CallGraph, launches: np.ndarray) -> list:
    """The ``cpu_op`` ancestors of each launch, outermost first (by start time), as lists of names."""
    cpu_op = view.strings.id("cpu_op")
    pairs_i, pairs_row = [], []
    cur = graph.parent[launches].copy() if len(launches) else np.zeros(0, dtype=np.int64)
    owner = np.arange(len(launches))
    while len(cur):  # one pass per call-stack level
        ok = cur >= 0
        cur, owner = cur[ok], owner[ok]
        hit = rv["cat"][cur] == cpu_op
        pairs_i.append(owner[hit])
        pairs_row.append(cur[hit])
        cur = graph.parent[cur]
    stacks: list = [[] for _ in range(len(launches))]
    if not pairs_i:
        return stacks
    who = np.concatenate(pairs_i)
    row = np.concatenate(pairs_row)
    order = np.lexsort((graph.depth[row], rv["ts"][row], who))
    who, row = who[order], row[order]
    uniq, inv = np.unique(rv["name"][row], return_inverse=True)
    text = view.names(uniq)
    labels = text[inv.reshape(-1)].tolist()
    for w, s in zip(who.tolist(), labels):
        stacks[w].append(s)
    return stacks


def _check_names(view: JobView, rv, ranges: np.ndarray, launches: np.ndarray, res: CounterData) -> None:
    """Warn where a named range and the kernel its paired launch started disagree (positional pairing)."""
    partner = rv["partner"][launches]
    has = partner >= 0
    if not has.any():
        return
    missing = view.strings.id(classify.CUPTI_MISSING_NAME)
    rn = rv["name"][ranges][has]
    kn = rv["name"][partner[has]]
    bad = (rn != kn) & (rn != missing)
    if bad.any():
        first = int(np.flatnonzero(has)[np.flatnonzero(bad)[0]])
        res.problems.append(
            f"rank {res.rank}: {int(bad.sum())} of {int(has.sum())} CUPTI ranges name a different kernel "
            f"than their paired launch started (first: range index {int(rv['index'][ranges[first]])}); "
            f"their counters may belong to other kernels"
        )


def counters_with_operators(
    job, *, rules=None, ranks: Optional[Sequence[int]] = None, strict: bool = False
) -> dict[int, pd.DataFrame]:
    """:func:`counter_data` of every asked rank that pairs (``{rank: frame}``; load the job with
    ``all_args=True`` for the counter values); problems are logged at info level (a rank without counters
    is no error: most traces are not recorded with the range profiler, and the ``cupti`` command says so)."""
    view = resolve(job, rules)
    out = {}
    for r in view.select(ranks):
        res = counter_data(view, r, job=job, strict=strict)
        for p in res.problems:
            log.info(p)
        if res.frame is not None:
            out[r] = res.frame
    return out


def flops(
    frame: pd.DataFrame, *, by: str = "top_level_op", weights: Optional[dict] = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """FLOPs per kernel and per operator from a counter frame (:func:`counter_data` or the facade's).

    Returns ``(kernels, operators)``. ``kernels``: ``index``, ``name``, ``top_level_op``,
    ``bottom_level_op``, ``flops`` (Σ counter × FLOPs per instruction, absent counters count 0),
    ``dram_bytes`` and ``arithmetic_intensity`` (FLOPs per DRAM byte) when DRAM byte counters are present
    (else NaN). ``operators``: per value of ``by``: ``kernels``, ``flops``, ``dram_bytes``,
    ``arithmetic_intensity``, sorted by FLOPs (descending).
    """
    weights = CUDA_SASS_INSTRUCTION_COUNTER_FLOPS if weights is None else weights
    n = len(frame)
    total = np.zeros(n, dtype=np.float64)
    for k, w in weights.items():
        if k in frame.columns:
            total += np.clip(frame[k].to_numpy(dtype=np.float64), 0, None) * float(w)
    if "dram__bytes.sum" in frame.columns:
        dram = np.clip(frame["dram__bytes.sum"].to_numpy(dtype=np.float64), 0, None)
    elif "dram__bytes_read.sum" in frame.columns or "dram__bytes_write.sum" in frame.columns:
        dram = np.zeros(n)
        for k in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            if k in frame.columns:
                dram += np.clip(frame[k].to_numpy(dtype=np.float64), 0, None)
    else:
        dram = np.full(n, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        ai = np.where(dram > 0, total / dram, np.nan)
    keep = [c for c in ("index", "name", "top_level_op", "bottom_level_op") if c in frame.columns]
    kernels = frame[keep].reset_index(drop=True).assign(flops=total, dram_bytes=dram, arithmetic_intensity=ai)
    if by not in kernels.columns:
        by = keep[-1] if keep else "name"
    g = kernels.groupby(by, sort=True)
    ops = pd.DataFrame({"kernels": g.size(), "flops": g["flops"].sum(), "dram_bytes": g["dram_bytes"].sum(min_count=1)})
    with np.errstate(invalid="ignore", divide="ignore"):
        ops["arithmetic_intensity"] = np.where(ops["dram_bytes"] > 0, ops["flops"] / ops["dram_bytes"], np.nan)
    ops = ops.reset_index().sort_values(["flops", by], ascending=[False, True], kind="stable", ignore_index=True)
    return kernels, ops


def hta_frame(res: CounterData, table: pd.DataFrame) -> pd.DataFrame:
    """HTA's frame of one rank: the ranges' rows of HTA's table (``name``/``cat`` as text), the call-graph
    columns (constant for ranges, which are not call-graph nodes), the counters, ``index_runtime``,
    ``op_stack``, ``top_level_op``, ``bottom_level_op``."""
    f = res.frame
    rows = table.loc[f["index"].to_numpy()].reset_index(drop=True)
    rows["name"] = rows.pop("s_name")
    rows["cat"] = rows.pop("s_cat")
    n = len(rows)
    for col, val in (
        ("depth", -1),
        ("height", -1),
        ("parent", -1),
        ("num_kernels", 0),
        ("kernel_dur_sum", 0.0),
        ("kernel_span", 0.0),
        ("first_kernel_start", -1.0),
        ("last_kernel_end", -1.0),
    ):
        rows[col] = np.full(n, val)
    for k in res.counters:
        rows[k] = f[k].to_numpy()
    for col in ("index_runtime", "op_stack", "top_level_op", "bottom_level_op"):
        rows[col] = f[col].to_numpy() if col != "op_stack" else list(f[col])
    return rows
