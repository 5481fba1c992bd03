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

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import build_call_graph
from holotrace.errors import AnalysisError
from holotrace.model.classify import NATIVE, Kind
from holotrace.model.view import job_view

__all__ = ["MEMORY_EVENT", "memory_events", "memory_timeline", "memory_peaks", "allocations_by_operator",
           "device_label"]

MEMORY_EVENT = "[memory]"
OPERATOR_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)  # what "operator" means here (not Python frames, not runtime calls)
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
        raise AnalysisError("the memory analysis reads the trace's [memory] events, which a view does not hold",
                            fix="pass the loaded Job (holotrace.load(path)) instead of a JobView")
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
    out = pd.DataFrame({
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
    })
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
    return pd.DataFrame({
        "rank": ev["rank"], "device": ev["device"], "ts": ev["ts"], "bytes": ev["bytes"],
        "allocated": np.where(has_totals, ev["total_allocated"], by_events).astype(np.int64),
        "reserved": np.where(has_totals, ev["total_reserved"], -1).astype(np.int64),
        "allocated_by_events": by_events.astype(np.int64), "index": ev["index"],
    })


def _cpu_ops(job, rank: int):
    view = job_view(job, NATIVE, ranks=[rank])
    rv = view[rank]
    ops = np.flatnonzero(np.isin(rv["kind"], [int(k) for k in OPERATOR_KINDS]))
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
        rows.append({
            "rank": int(rank), "device": device, "peak_allocated": int(peak["allocated"]),
            "peak_ts": int(peak["ts"]), "peak_reserved": int(peak["reserved"]),
            "max_reserved": int(g["reserved"].max()), "events": len(g),
            "alloc_bytes": int(b[b > 0].sum()), "freed_bytes": int(-b[b < 0].sum()),
            "live_operators": _live_at(job, int(rank), int(peak["ts"])),
        })
    cols = ["rank", "device", "peak_allocated", "peak_ts", "peak_reserved", "max_reserved", "events",
            "alloc_bytes", "freed_bytes", "live_operators"]
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
        frames.append(pd.DataFrame({
            "rank": rank, "device": ev["device"].to_numpy(), "operator": view.names(name_id),
            "allocations": (b > 0).astype(np.int64), "alloc_bytes": np.where(b > 0, b, 0),
            "frees": (b < 0).astype(np.int64), "freed_bytes": np.where(b < 0, -b, 0),
        }))
    cols = ["rank", "device", "operator", "allocations", "alloc_bytes", "frees", "freed_bytes", "net_bytes"]
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.concat(frames, ignore_index=True)
    out = df.groupby(["rank", "device", "operator"], sort=False, as_index=False).sum()
    out["net_bytes"] = out["alloc_bytes"] - out["freed_bytes"]
    return out.sort_values(["rank", "device", "alloc_bytes"], ascending=[True, True, False],
                           kind="stable").reset_index(drop=True)[cols]
