"""CUDA event synchronisation for the critical-path graph (spec 25 §3.5): which GPU operation a
``Stream Wait Event`` / ``Event Sync`` waits on, and which one a stream wait holds back.

Reads the whole rank (not only the window), as HTA does. Record and wait calls are few; they are matched
with a binary search per (device, stream) or (thread, stream) over the launch calls sorted by start.
"""

from __future__ import annotations

import numpy as np

from holotrace.model import classify

__all__ = ["launch_calls", "sync_sources"]


def launch_calls(view, strings) -> np.ndarray:
    """Rows of launch calls (HTA's runtime launch set) whose GPU partner is in the rank, sorted by start."""
    ids = [i for i in (strings.id(n) for n in classify.HTA_LAUNCH_APIS) if i >= 0]
    p = view["partner"]
    ok = np.isin(view["name"], ids) & (p >= 0) & (view["index_correlation"] > 0)
    ok[ok] = view["stream"][p[ok]] != -1
    rows = np.flatnonzero(ok)
    return rows[np.argsort(view["ts"][rows], kind="stable")]


def _groups(keys: np.ndarray):
    """dict key-tuple -> positions (ascending) for rows of a 2-column key array."""
    if not len(keys):
        return {}
    order = np.lexsort((np.arange(len(keys)), keys[:, 1], keys[:, 0]))  # by key, then position
    k = keys[order]
    cut = np.flatnonzero((k[1:] != k[:-1]).any(axis=1)) + 1
    return {
        tuple(int(x) for x in part[0]): pos.astype(np.int64)  # one entry per (device, stream), not per row
        for part, pos in zip(np.split(k, cut), np.split(order, cut))
    }


def sync_sources(view, strings, gpu_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``gpu_rows``: the GPU operation row it waits on (``Stream Wait Event``/``Event Sync``), and,
    for a stream wait, the GPU operation row held back by it (the next launch on that thread and stream); -1 none."""
    n = len(gpu_rows)
    src = np.full(n, -1, dtype=np.int64)
    dest = np.full(n, -1, dtype=np.int64)
    names = view["name"][gpu_rows]
    swe, esync = strings.id("Stream Wait Event"), strings.id("Event Sync")
    want = np.flatnonzero(((names == swe) & (swe >= 0)) | ((names == esync) & (esync >= 0)))
    rec_id = strings.id("cudaEventRecord")
    if not len(want) or rec_id < 0:
        return src, dest
    p = view["partner"]
    ts = view["ts"]
    corr = view["correlation"]
    launches = launch_calls(view, strings)
    lk = p[launches]
    # event record correlation -> (stream, device) from the sync events that wait on it
    wos = view.arg("wait_on_stream")
    woc = view.arg("wait_on_cuda_event_record_corr_id")
    has = np.flatnonzero(wos > -1)
    rec_stream: dict = {}
    for c, s, d in zip(woc[has].tolist(), wos[has].tolist(), view["pid"][has].tolist()):
        rec_stream.setdefault(c, (s, d))
    recs = np.flatnonzero(view["name"] == rec_id)
    rec_of_corr = dict(zip(corr[recs].tolist(), recs.tolist()))
    by_dev_stream = _groups(np.stack([view["pid"][lk], view["stream"][lk]], axis=1)) if len(lk) else {}
    l_ts = ts[launches]
    for k in want.tolist():
        row = gpu_rows[k]
        c = int(woc[row])
        rec = rec_of_corr.get(c)
        if rec is None or c not in rec_stream:
            continue
        s, d = rec_stream[c]
        pos = by_dev_stream.get((d, s))
        if pos is None:
            continue
        j = np.searchsorted(l_ts[pos], ts[rec], side="right") - 1
        if j < 0:
            continue
        src[k] = p[launches[pos[j]]]
        if names[k] == swe:
            call = p[row]
            if call < 0:
                continue
            key = (view["pid"][call], view["tid"][call], view["stream"][row])
            th = np.flatnonzero(
                (view["pid"][launches] == key[0]) & (view["tid"][launches] == key[1]) & (view["stream"][lk] == key[2])
            )
            jj = np.searchsorted(l_ts[th], ts[call], side="right")
            if jj < len(th):
                dest[k] = p[launches[th[jj]]]
    return src, dest
