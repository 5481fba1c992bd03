"""Device memory over time, from the trace's own ``[memory]`` instant events.

PyTorch's profiler (``profile_memory=True``) writes one instant event per allocation and free of the caching
allocator: ``Bytes`` (negative for a free), ``Addr``, ``Device Type`` / ``Device Id``, and the allocator's
``Total Allocated`` / ``Total Reserved`` for that device after the event. The functions here read them from
``job.rank(r).instants`` (a :class:`~holotrace.model.job.Job` is needed: views hold no side tables):

* :func:`memory_events` — one row per ``[memory]`` event: ``rank, device, ts, bytes, addr, total_allocated,
  total_reserved, index, tid``, in time order (``ts`` in ns on the rank's own clock);
* :func:`memory_timeline` — allocated and reserved bytes per rank and device over time (the events' own
  totals), with ``allocated_by_events`` (the running sum of ``bytes`` from the first event's total), which
  equals ``total_allocated`` when no event is missing;
* :func:`memory_peaks` — per rank and device the peak of ``total_allocated``, when it happened, the event
  that reached it, and the CPU operators live at that instant;
* :func:`allocations_by_operator` — allocations and frees grouped by the innermost CPU operator on the same
  thread (the nesting rule of :mod:`holotrace.analysis.callstack`; a zero-length event at an operator's
  boundary belongs to it).

Devices are labelled ``cpu``, ``cuda:N`` (c10 device type 1), or ``type<T>:N`` for other device types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import build_call_graph
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE, Kind, kind_in
from holotrace.model.view import job_view

__all__ = [
    "MEMORY_EVENT",
    "memory_events",
    "memory_timeline",
    "memory_peaks",
    "allocations_by_operator",
    "device_label",
    "MEMORY_CATEGORIES",
    "read_memory_export",
    "memory_export_series",
    "memory_export_timeline",
    "memory_export_peaks",
]

MEMORY_EVENT = "[memory]"
OPERATOR_KINDS = (
    Kind.CPU_OP,
    Kind.USER_ANNOTATION,
)  # what "operator" means here (not Python frames, not runtime calls)
_EVENT_COLUMNS = ["rank", "device", "ts", "bytes", "addr", "total_allocated", "total_reserved", "index", "tid"]


def device_label(device_type: int, device_id: int) -> str:
    """``cpu``, ``cuda:N`` or ``type<T>:N`` (c10's device type numbers: 0 CPU, 1 CUDA)."""
    if device_type == 0:
        return "cpu"
    if device_type == 1:
        return f"cuda:{device_id}"
    return f"type{device_type}:{device_id}"


def _job(source):
    if not hasattr(source, "rank") or not hasattr(source, "strings"):
        raise AnalysisError(
            "the memory analysis reads the trace's [memory] events, which a view does not hold",
            fix="pass the loaded Job (holotrace.load(path)) instead of a JobView",
        )
    return source


def _rank_events(job, rank: int) -> pd.DataFrame:
    t = job.rank(rank)
    inst = t.instants
    mem_id = job.strings.id(MEMORY_EVENT)
    if inst.empty or mem_id < 0 or "mem_bytes" not in inst:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "device" else object) for c in _EVENT_COLUMNS})
    sel = inst[np.asarray(inst["name"]) == mem_id]
    i64 = lambda c: np.asarray(sel[c]).astype(np.int64)  # noqa: E731
    dtype, did = i64("mem_device_type"), i64("mem_device_id")
    pairs = pd.MultiIndex.from_arrays([dtype, did])
    codes, uniq = pd.factorize(pairs)
    labels = np.array([device_label(int(a), int(b)) for a, b in uniq], dtype=object)
    out = pd.DataFrame(
        {
            "rank": np.full(len(sel), int(rank), dtype=np.int64),
            "device": labels[codes] if len(sel) else np.empty(0, dtype=object),
            "ts": i64("ts_ns"),
            "bytes": i64("mem_bytes"),
            "addr": i64("mem_addr"),
            "total_allocated": i64("mem_total_allocated"),
            "total_reserved": i64("mem_total_reserved"),
            "index": i64("index"),
            "tid": i64("tid"),
            "_pid": i64("pid"),
        }
    )
    return out.sort_values(["ts", "index"], kind="stable").reset_index(drop=True)


def memory_events(source, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Every ``[memory]`` event of the chosen ranks (see the module docstring for the columns)."""
    job = _job(source)
    chosen = list(job.ranks) if ranks is None else [int(r) for r in ranks]
    frames = [_rank_events(job, r) for r in chosen]
    df = pd.concat(frames, ignore_index=True) if frames else _rank_events(job, job.ranks[0]).iloc[:0]
    return df.drop(columns="_pid", errors="ignore")


def memory_timeline(source, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Allocated and reserved bytes per rank and device after each ``[memory]`` event.

    Columns: ``rank, device, ts, bytes, allocated, reserved, allocated_by_events, index``; sorted by rank,
    device, time. ``allocated``/``reserved`` are the events' ``Total Allocated``/``Total Reserved``; on a
    device whose events lack them (traces before PyTorch 1.10) ``allocated`` is the running sum of ``bytes``
    from 0 and ``reserved`` is −1.
    """
    ev = memory_events(source, ranks=ranks)
    ev = ev.sort_values(["rank", "device", "ts", "index"], kind="stable").reset_index(drop=True)
    grp = ev.groupby(["rank", "device"], sort=False)
    first_total = (grp["total_allocated"].transform("first") - grp["bytes"].transform("first")).clip(lower=0)
    has_totals = grp["total_allocated"].transform("min") >= 0
    by_events = np.where(has_totals, first_total, 0) + grp["bytes"].cumsum()
    return pd.DataFrame(
        {
            "rank": ev["rank"],
            "device": ev["device"],
            "ts": ev["ts"],
            "bytes": ev["bytes"],
            "allocated": np.where(has_totals, ev["total_allocated"], by_events).astype(np.int64),
            "reserved": np.where(has_totals, ev["total_reserved"], -1).astype(np.int64),
            "allocated_by_events": by_events.astype(np.int64),
            "index": ev["index"],
        }
    )


def _cpu_ops(job, rank: int):
    view = job_view(job, NATIVE, ranks=[rank])
    rv = view[rank]
    ops = np.flatnonzero(kind_in(rv["kind"], OPERATOR_KINDS))
    return view, rv, ops


def memory_peaks(source, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Per rank and device: the peak of allocated bytes and the CPU operators live at that instant.

    Columns: ``rank, device, peak_allocated, peak_ts, peak_reserved, max_reserved, events, alloc_bytes,
    freed_bytes, live_operators`` (``peak_reserved``/``max_reserved`` −1 without totals; names of the CPU
    operators/annotations of the rank whose interval holds the
    peak instant, outermost first, ``" > "``-joined per thread, threads ``" | "``-joined).
    """
    job = _job(source)
    tl = memory_timeline(job, ranks=ranks)
    rows = []
    for (rank, device), g in tl.groupby(["rank", "device"], sort=True):  # one pass per device, not per event
        i = int(np.argmax(g["allocated"].to_numpy()))
        peak = g.iloc[i]
        b = g["bytes"].to_numpy()
        rows.append(
            {
                "rank": int(rank),
                "device": device,
                "peak_allocated": int(peak["allocated"]),
                "peak_ts": int(peak["ts"]),
                "peak_reserved": int(peak["reserved"]),
                "max_reserved": int(g["reserved"].max()),
                "events": len(g),
                "alloc_bytes": int(b[b > 0].sum()),
                "freed_bytes": int(-b[b < 0].sum()),
                "live_operators": _live_at(job, int(rank), int(peak["ts"])),
            }
        )
    cols = [
        "rank",
        "device",
        "peak_allocated",
        "peak_ts",
        "peak_reserved",
        "max_reserved",
        "events",
        "alloc_bytes",
        "freed_bytes",
        "live_operators",
    ]
    return pd.DataFrame(rows, columns=cols)


def _live_at(job, rank: int, t: int) -> str:
    view, rv, ops = _cpu_ops(job, rank)
    ts, end = rv["ts"][ops], rv["end"][ops]
    live = ops[(ts <= t) & (end >= t)]
    if not live.size:
        return ""
    order = np.lexsort((-rv["end"][live], rv["ts"][live], rv["tid"][live]))
    live = live[order]
    names = view.names(rv["name"][live])
    tids = rv["tid"][live]
    parts = [" > ".join(names[tids == tid].tolist()) for tid in pd.unique(tids)]
    return " | ".join(parts)


def allocations_by_operator(source, *, ranks: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """Allocations and frees per innermost CPU operator (same process and thread, time containment).

    Columns: ``rank, device, operator, allocations, alloc_bytes, frees, freed_bytes, net_bytes``, sorted by
    ``alloc_bytes`` descending. Events outside any operator get ``operator = ""``.
    """
    job = _job(source)
    chosen = list(job.ranks) if ranks is None else [int(r) for r in ranks]
    frames = []
    for rank in chosen:
        ev = _rank_events(job, rank)
        if ev.empty:
            continue
        view, rv, ops = _cpu_ops(job, rank)
        k, m = len(ops), len(ev)
        pid = np.concatenate([rv["pid"][ops], ev["_pid"].to_numpy()])
        tid = np.concatenate([rv["tid"][ops], ev["tid"].to_numpy()])
        thread = pd.factorize(pd.MultiIndex.from_arrays([pid, tid]))[0].astype(np.int64)
        ts = np.concatenate([rv["ts"][ops], ev["ts"].to_numpy()])
        dur = np.concatenate([rv["dur"][ops], np.zeros(m, dtype=np.int64)])
        index = np.concatenate([rv["index"][ops], ev["index"].to_numpy()])
        g = build_call_graph(thread, ts, dur, index, np.ones(k + m, dtype=bool), np.full(k + m, -1, dtype=np.int64))
        owner = g.parent[k:].copy()
        while True:  # a memory event nested under another zero-length memory event: go up
            up = owner >= k
            if not up.any():
                break
            owner[up] = g.parent[owner[up]]
        name_id = np.where(owner >= 0, rv["name"][ops][np.clip(owner, 0, None)], -1) if k else np.full(m, -1)
        b = ev["bytes"].to_numpy()
        frames.append(
            pd.DataFrame(
                {
                    "rank": rank,
                    "device": ev["device"].to_numpy(),
                    "operator": view.names(name_id),
                    "allocations": (b > 0).astype(np.int64),
                    "alloc_bytes": np.where(b > 0, b, 0),
                    "frees": (b < 0).astype(np.int64),
                    "freed_bytes": np.where(b < 0, -b, 0),
                }
            )
        )
    cols = ["rank", "device", "operator", "allocations", "alloc_bytes", "frees", "freed_bytes", "net_bytes"]
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.concat(frames, ignore_index=True)
    out = df.groupby(["rank", "device", "operator"], sort=False, as_index=False).sum()
    out["net_bytes"] = out["alloc_bytes"] - out["freed_bytes"]
    return out.sort_values(["rank", "device", "alloc_bytes"], ascending=[True, True, False], kind="stable").reset_index(
        drop=True
    )[cols]


# ----------------------------------------------------------------------------------------------------------------
# PyTorch's memory-timeline export (``profile.export_memory_timeline("x.raw.json.gz")``), not a Kineto trace:
# a JSON array of ``[timestamp_ns, action, bytes, category]`` (spec 14 §1).

MEMORY_CATEGORIES = (
    "Parameter",
    "Optimizer state",
    "Input",
    "Temporary",
    "Activation",
    "Gradient",
    "Autograd",
    "Unknown",
)


def read_memory_export(path) -> np.ndarray:
    """The export's entries as an ``(n, 4)`` int64 array; gzip or plain JSON, by content."""
    import gzip
    import json

    from holotrace.errors import TraceFormatError, TraceNotFoundError

    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise TraceNotFoundError(
            "no such memory-timeline file",
            path=path,
            fix="pass the file written by export_memory_timeline(...raw.json.gz)",
        ) from None
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        arr = np.array(json.loads(raw), dtype=np.int64)
    except (ValueError, TypeError, OverflowError):
        raise TraceFormatError(
            "not a memory-timeline export (expected a JSON array of [time, action, bytes, category])",
            path=path,
            fix='export it with profile.export_memory_timeline("name.raw.json.gz")',
        ) from None
    arr = arr.reshape(0, 4) if arr.size == 0 else arr
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise TraceFormatError(
            "memory-timeline entries must have 4 fields [time, action, bytes, category]",
            path=path,
            fix='export it with profile.export_memory_timeline("name.raw.json.gz")',
        )
    bad = (arr[:, 3] < 0) | (arr[:, 3] >= len(MEMORY_CATEGORIES))
    if bad.any():
        raise TraceFormatError(
            f"category {int(arr[bad][0, 3])} is not one of the {len(MEMORY_CATEGORIES)} memory categories",
            path=path,
            fix="check the file is a PyTorch memory-timeline export",
        )
    return arr


def memory_export_series(entries: np.ndarray, *, hta_compat: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Live bytes per category after each instant: ``(times, sizes)`` with ``sizes`` of shape ``(rows, 8)``.

    A row starts wherever an entry's time differs from the previous entry's (the file is in time order);
    pre-existing allocations (time −1) get the first real time. ``hta_compat``: exactly HTA's rows, where the
    pre-existing bucket and the first real instant are two rows with the same time and the first time is
    HTA's running minimum rule; otherwise those two rows are merged.
    """
    t, nbytes, cat = entries[:, 0], entries[:, 2], entries[:, 3]
    n = len(t)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, len(MEMORY_CATEGORIES)), dtype=np.int64)
    onehot = np.zeros((n, len(MEMORY_CATEGORIES)), dtype=np.int64)
    onehot[np.arange(n), cat] = nbytes
    running = np.cumsum(onehot, axis=0)
    last = np.flatnonzero(np.r_[t[1:] != t[:-1], True])  # last entry of each row
    times, sizes = t[last].copy(), running[last]
    set_ = t[t != -1]
    t_min = -1 if not set_.size else (int(set_[0]) if set_[0] <= 0 else int(set_[set_ > 0].min()))
    times[times < 0] = t_min
    if not hta_compat and len(times) > 1:
        keep = np.r_[times[1:] != times[:-1], True]
        times, sizes = times[keep], sizes[keep]
    return times, sizes


def memory_export_timeline(path, *, hta_compat: bool = False) -> pd.DataFrame:
    """The export as a frame: ``ts`` (ns) and one column of live bytes per category (HTA's order)."""
    times, sizes = memory_export_series(read_memory_export(path), hta_compat=hta_compat)
    df = pd.DataFrame(sizes, columns=list(MEMORY_CATEGORIES))
    df.insert(0, "ts", times)
    return df


def memory_export_peaks(path) -> pd.DataFrame:
    """Per category: the peak of live bytes and when (``category, peak_bytes, peak_ts``), plus a ``Total`` row."""
    df = memory_export_timeline(path)
    vals = df[list(MEMORY_CATEGORIES)]
    total = vals.sum(axis=1)
    rows = [(c, int(vals[c].max()), int(df["ts"].iloc[int(vals[c].to_numpy().argmax())])) for c in MEMORY_CATEGORIES]
    rows.append(("Total", int(total.max()), int(df["ts"].iloc[int(total.to_numpy().argmax())])))
    return pd.DataFrame(rows, columns=["category", "peak_bytes", "peak_ts"])
