"""Every rank of a job merged into one Chrome-trace file on the job's common clock, for Perfetto UI.

One process per rank (``pid`` = rank, named ``rank R``), its CPU threads and GPU streams inside as threads
(a GPU stream's ``tid`` is its stream number; a CPU thread whose id equals a stream number of the same rank is
moved to ``tid + 2**31`` so the two never share a track). Each duration event keeps its name, category,
duration and the args that link work across threads (``correlation``, ``External id``, and ``stream`` /
``device`` on the GPU). Times are written in µs with three decimals (exact ns) relative to the job's origin,
which is the file's ``baseTimeNanoseconds``: loading the file back puts every event at its original place on
the common clock. Findings become instant events (``"ph": "i"``) at the start of their rank (or of the job).

Critical paths (``critical_paths={rank: [(step, CriticalPath), ...]}``, computed under holotrace's rules) are
drawn as flow arrows (``"ph": "s"/"f"``, ``cat`` ``critical_path``) for each path edge that hops between two
events other than a call into or out of a nested operator on the same thread (launch delays, kernel-to-kernel
gaps, dependencies, syncs, any edge across tracks), with ids above every flow id of the job; the path's events carry ``args.critical_path = <step>``. An arrow's end on an event's
end instant is placed 1 ns inside it, so that Perfetto binds it to that event. The job's cross-rank critical
path (``job_path``: the hops of :func:`holotrace.analysis.critical_path.job_path.job_path_hops`) is drawn the
same way, ``cat`` ``job_critical_path``, from one rank's process to another's where it crosses ranks.

:func:`merged_events` yields the JSON text of the events; :func:`write_merged_trace` writes the file
(gzip-compressed when the name ends in ``.gz``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from holotrace.render.trace_file import gzip_bytes, write_atomic

__all__ = ["merged_events", "write_merged_trace", "first_free_flow_id", "CPU_TID_SHIFT"]

CPU_TID_SHIFT = 2**31


def _json_strings(strings, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct id its JSON string literal (decoded and escaped once); returns (literals, inverse)."""
    uniq, inv = np.unique(ids, return_inverse=True)
    lits = np.array([json.dumps(strings[int(i)] if i >= 0 else "") for i in uniq.tolist()], dtype=object)
    return lits, inv.reshape(-1)


def _ts_text(ns: np.ndarray) -> list[str]:
    """Exact µs text with three decimals of non-negative ns values."""
    q, r = np.divmod(ns, 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def _tracks(job, r: int, gpu_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows written, their tid in the merged file, the rank's GPU streams)``."""
    c = job.rank(r).columns
    stream = c["stream"].astype(np.int64)
    rows = np.flatnonzero(stream >= 0) if gpu_only else np.arange(len(stream))
    gpu = stream[rows] >= 0
    tid = c["tid"][rows].astype(np.int64)
    streams = np.unique(stream[rows][gpu])
    return rows, np.where(gpu, stream[rows], np.where(np.isin(tid, streams), tid + CPU_TID_SHIFT, tid)), streams


def _rank_events(job, r: int, origin: int, gpu_only: bool, critical: Optional[np.ndarray] = None) -> Iterator[str]:
    t = job.rank(r)
    c = t.columns
    stream = c["stream"].astype(np.int64)
    rows, tid, streams = _tracks(job, r, gpu_only)
    if not len(rows):
        return
    gpu = stream[rows] >= 0
    ts = c["ts_ns"][rows].astype(np.int64) + int(t.clock_offset_ns) - origin
    dur = np.maximum(c["dur_ns"][rows].astype(np.int64), 0)
    names, ninv = _json_strings(job.strings, c["name"][rows].astype(np.int64))
    cats, cinv = _json_strings(job.strings, c["cat"][rows].astype(np.int64))
    corr = c["correlation"][rows].astype(np.int64)
    ext = c["external_id"][rows].astype(np.int64)
    dev = c["device"][rows].astype(np.int64)
    args = np.full(len(rows), "", dtype=object)
    has = corr >= 0
    args[has] = [f',"correlation":{v}' for v in corr[has].tolist()]
    has = ext >= 0
    args[has] = args[has] + np.array([f',"External id":{v}' for v in ext[has].tolist()], dtype=object)
    args[gpu] = args[gpu] + np.array(
        [f',"stream":{s},"device":{d}' for s, d in zip(stream[rows][gpu].tolist(), np.maximum(dev[gpu], 0).tolist())],
        dtype=object,
    )
    if critical is not None:
        has = critical[rows] >= 0
        args[has] = args[has] + np.array([f',"critical_path":{v}' for v in critical[rows][has].tolist()], dtype=object)
    tss, durs = _ts_text(ts), _ts_text(dur)
    nl, cl = names[ninv].tolist(), cats[cinv].tolist()
    a = [("{" + x[1:] + "}") if x else "{}" for x in args.tolist()]
    tl = tid.tolist()
    yield from (
        f'{{"ph":"X","name":{n},"cat":{k},"pid":{r},"tid":{d},"ts":{s},"dur":{u},"args":{g}}}'
        for n, k, d, s, u, g in zip(nl, cl, tl, tss, durs, a)
    )
    yield (
        f'{{"ph":"M","name":"process_name","pid":{r},"tid":0,"args":{{"name":"rank {r}"}}}},'
        f'{{"ph":"M","name":"process_sort_index","pid":{r},"tid":0,"args":{{"sort_index":{r}}}}}'
    )
    for s in streams.tolist():
        yield (
            f'{{"ph":"M","name":"thread_name","pid":{r},"tid":{s},"args":{{"name":"GPU stream {s}"}}}},'
            f'{{"ph":"M","name":"thread_sort_index","pid":{r},"tid":{s},"args":{{"sort_index":{100000 + s}}}}}'
        )


def _finding_events(job, origin: int, starts: dict) -> Iterator[str]:
    for f in job.findings:
        d = f.as_dict()
        r = d.get("rank")
        text = json.dumps(f"{d['severity']} {d['code']}: {d['message']}")
        if r is not None and r in starts:
            yield (
                f'{{"ph":"i","s":"p","name":{text},"cat":"holotrace_finding","pid":{int(r)},"tid":0,'
                f'"ts":{_ts_text(np.array([starts[r]]))[0]},"args":{{"code":{json.dumps(str(d["code"]))}}}}}'
            )
        else:
            yield (
                f'{{"ph":"i","s":"g","name":{text},"cat":"holotrace_finding","pid":0,"tid":0,"ts":0.000,'
                f'"args":{{"code":{json.dumps(str(d["code"]))}}}}}'
            )


def _critical_rows(job, r: int, paths) -> np.ndarray:
    """Per model row of rank ``r``: the step whose critical path holds the event, −1 none."""
    out = np.full(job.rank(r).n_events, -1, dtype=np.int64)
    for step, cp in paths:
        if cp.success:
            out[cp.view["row"][cp.graph.node_row[cp.path_nodes]]] = step
    return out


def _flow_events(job, r: int, origin: int, gpu_only: bool, paths, first_id: int) -> tuple[list[str], int]:
    """Flow arrows of rank ``r``'s critical paths, ids from ``first_id``; returns (JSON texts, next id)."""
    from holotrace.analysis.critical_path.graph import EDGE_TYPE_NAMES, EdgeType

    t = job.rank(r)
    c = t.columns
    rows, tid_w, _ = _tracks(job, r, gpu_only)
    tid = np.full(t.n_events, -1, dtype=np.int64)
    written = np.zeros(t.n_events, dtype=bool)
    tid[rows], written[rows] = tid_w, True
    start = c["ts_ns"].astype(np.int64) + int(t.clock_offset_ns) - origin
    dur = np.maximum(c["dur_ns"].astype(np.int64), 0)
    out: list[str] = []
    for step, cp in paths:
        if not cp.success:
            continue
        g, e = cp.graph, cp.path_edges
        mrow = cp.view["row"][g.node_row]
        a, b = mrow[g.src[e]], mrow[g.dst[e]]
        hop = np.isin(
            g.type[e],
            (EdgeType.DEPENDENCY, EdgeType.KERNEL_LAUNCH_DELAY, EdgeType.KERNEL_KERNEL_DELAY, EdgeType.SYNC_DEPENDENCY),
        ) | (tid[a] != tid[b])
        e = e[(a != b) & hop & written[a] & written[b]]
        if not len(e):
            continue
        ends = []
        for nodes in (g.src[e], g.dst[e]):
            m = mrow[nodes]
            ends.append((m, np.where(g.node_start[nodes], start[m], start[m] + np.maximum(dur[m] - 1, 0))))
        (sa, ta), (sb, tb) = ends
        ids = first_id + np.arange(len(e))
        first_id += len(e)
        w = np.rint(cp.graph_weight[e]).astype(np.int64).tolist()
        typ = [json.dumps(x) for x in EDGE_TYPE_NAMES[g.type[e]].tolist()]
        for i, p, q, x, y, wt, ty in zip(ids.tolist(), sa.tolist(), sb.tolist(), _ts_text(ta), _ts_text(tb), w, typ):
            args = f'{{"step":{step},"weight_ns":{wt},"type":{ty}}}'
            out.append(
                f'{{"ph":"s","id":{i},"name":"critical_path","cat":"critical_path","pid":{r},"tid":{tid[p]},'
                f'"ts":{x},"args":{args}}},'
                f'{{"ph":"f","bp":"e","id":{i},"name":"critical_path","cat":"critical_path","pid":{r},'
                f'"tid":{tid[q]},"ts":{y},"args":{args}}}'
            )
    return out, first_id


def _job_flow_events(job, origin: int, gpu_only: bool, hops, first_id: int) -> tuple[list[str], int]:
    """Flow arrows of the job's cross-rank critical path (``hops``: rows of
    :func:`holotrace.analysis.critical_path.job_path.job_path_hops`), ids from ``first_id``."""
    tids, starts, ends = {}, {}, {}
    for r in set(hops["from_rank"].tolist()) | set(hops["to_rank"].tolist()):
        t = job.rank(r)
        c = t.columns
        rows, tid_w, _ = _tracks(job, r, gpu_only)
        tid = np.full(t.n_events, -1, dtype=np.int64)
        tid[rows] = tid_w
        s = c["ts_ns"].astype(np.int64) + int(t.clock_offset_ns) - origin
        tids[r], starts[r], ends[r] = tid, s, s + np.maximum(c["dur_ns"].astype(np.int64) - 1, 0)
    out: list[str] = []
    for h in hops.itertuples(index=False):
        a, b = int(h.from_row), int(h.to_row)
        ta, tb = tids[h.from_rank][a], tids[h.to_rank][b]
        if ta < 0 or tb < 0:
            continue
        xa = (ends if h.from_end else starts)[h.from_rank][a]
        xb = (ends if h.to_end else starts)[h.to_rank][b]
        (x, y), args = _ts_text(np.array([xa, xb])), f'{{"step":{int(h.step)},"kind":{json.dumps(str(h.kind))}}}'
        out.append(
            f'{{"ph":"s","id":{first_id},"name":"job_critical_path","cat":"job_critical_path",'
            f'"pid":{int(h.from_rank)},"tid":{ta},"ts":{x},"args":{args}}},'
            f'{{"ph":"f","bp":"e","id":{first_id},"name":"job_critical_path","cat":"job_critical_path",'
            f'"pid":{int(h.to_rank)},"tid":{tb},"ts":{y},"args":{args}}}'
        )
        first_id += 1
    return out, first_id


def first_free_flow_id(job) -> int:
    """One above every flow id of the job's files."""
    top = -1
    for r in job.ranks:
        f = job.rank(r).flows
        if len(f) and "flow_id" in f:
            top = max(top, int(np.max(f["flow_id"].to_numpy())))
    return top + 1


def merged_events(
    job,
    *,
    ranks: Optional[Sequence[int]] = None,
    gpu_only: bool = False,
    findings: bool = True,
    critical_paths: Optional[dict] = None,
    job_path=None,
) -> tuple[int, Iterator[str]]:
    """``(origin_ns, events)``: the job's origin on the common clock and the JSON text of every event."""
    chosen = [r for r in job.ranks if ranks is None or r in set(ranks)]
    starts, origin = {}, None
    for r in chosen:
        t = job.rank(r)
        if t.n_events:
            starts[r] = int(t.columns["ts_ns"].min()) + int(t.clock_offset_ns)
    origin = min(starts.values()) if starts else 0
    rel = {r: s - origin for r, s in starts.items()}

    def gen():
        next_id = first_free_flow_id(job)
        for r in chosen:
            paths = (critical_paths or {}).get(r)
            yield from _rank_events(job, r, origin, gpu_only, _critical_rows(job, r, paths) if paths else None)
            if paths:
                flows, next_id = _flow_events(job, r, origin, gpu_only, paths, next_id)
                yield from flows
        if job_path is not None and len(job_path):
            hops = job_path[job_path["from_rank"].isin(chosen) & job_path["to_rank"].isin(chosen)]
            flows, next_id = _job_flow_events(job, origin, gpu_only, hops, next_id)
            yield from flows
        if findings:
            yield from _finding_events(job, origin, rel)

    return origin, gen()


def write_merged_trace(
    job,
    output,
    *,
    ranks: Optional[Sequence[int]] = None,
    gpu_only: bool = False,
    findings: bool = True,
    critical_paths: Optional[dict] = None,
    job_path=None,
) -> tuple[int, int]:
    """Write the merged trace to ``output`` (``.gz``: gzip); returns ``(events written, bytes written)``."""
    origin, events = merged_events(
        job, ranks=ranks, gpu_only=gpu_only, findings=findings, critical_paths=critical_paths, job_path=job_path
    )
    body = list(events)
    head = json.dumps(
        {
            "schemaVersion": 1,
            "displayTimeUnit": "ns",
            "baseTimeNanoseconds": origin,
            "traceName": f"holotrace merged timeline of {Path(str(job.path)).name}",
            "otherData": {
                "source": str(job.path),
                "ranks": [int(r) for r in job.ranks if ranks is None or r in set(ranks)],
            },
        }
    )
    data = (head[:-1] + ',"traceEvents":[\n' + ",\n".join(body) + "\n]}\n").encode("utf-8")
    out = Path(output)
    if str(out).endswith(".gz"):
        data = gzip_bytes(data)
    write_atomic(out, lambda fh: fh.write(data))
    return sum(b.count('"ph":') for b in body), len(data)
