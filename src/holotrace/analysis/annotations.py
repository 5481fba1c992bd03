"""User annotations: which annotation each GPU operation runs under, and time per annotation (spec 26 §3-4).

* :func:`assign_annotations` — attribute GPU operations to the innermost
  (shortest) overlapping annotation on the same ``(pid, tid)`` track, the rule
  of HTA's ``get_gpu_kernels_with_user_annotations``, without HTA's loop over
  annotations: the track's timeline is cut at every annotation boundary, each
  elementary segment gets its winning annotation, and each operation takes the
  best segment it touches (a sparse-table range minimum).
* :func:`hta_gpu_kernels_with_user_annotations` and
  :func:`hta_user_annotation_breakdown` — the HTA methods on HTA-style tables.
* :func:`annotation_time` and :func:`kernel_time_by_annotation` — the native
  views on ``RankTrace.events`` (every step kept), for CPU ``user_annotation``
  ranges and their GPU-timeline copies (``gpu_user_annotation``).

Zero-duration operations: HTA under pandas 3 never attributes them (an empty
interval overlaps nothing). holotrace attributes a zero-length operation at
``t`` to an annotation ``a`` when ``a.ts <= t < a.end``; ``hta_compat=True``
keeps HTA's behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis._select import name_codes, name_mask
from holotrace.model.hta_view import default_text_dtype
from holotrace.analysis.topk import group_stats, top_k_hta

__all__ = [
    "BREAKDOWN_COLUMNS",
    "allowlisted_names",
    "annotation_time",
    "assign_annotations",
    "hta_gpu_kernels_with_user_annotations",
    "hta_user_annotation_breakdown",
    "kernel_time_by_annotation",
    "shorten_names",
]

BREAKDOWN_COLUMNS = ["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "rank"]
_SYNC_NAMES = ("Event Sync", "Context Sync")
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")


# --------------------------------------------------------------------------- name shortening
def _shorten_one(name: str) -> str:
    """HTA's ``shorten_name`` (spec 20 C6) for one string."""
    if _MEMORY.match(name) or ("<" not in name and "(" not in name):
        return name
    s = name.replace("->", "")
    stack: list[str] = []
    for ch in s:
        if ch == ">" or ch == ")":
            opener = "<" if ch == ">" else "("
            while stack and stack[-1] != opener:
                stack.pop()
            if stack:
                stack.pop()
        else:
            stack.append(ch)
    return "".join(stack).split(" ")[-1]


def shorten_names(names: Iterable[str]) -> np.ndarray:
    """HTA's name shortening applied to each distinct string once (object array).

    TODO(model): share one implementation with the kernel breakdown once the model exposes it.
    """
    arr = pd.Series(np.asarray(list(names) if not isinstance(names, np.ndarray) else names, dtype=object))
    codes, uniq = pd.factorize(arr.fillna(""), sort=False)
    short = np.array([_shorten_one(str(u)) for u in uniq], dtype=object)
    return short[codes] if len(uniq) else np.array([], dtype=object)


def _text_of(frame: pd.DataFrame, rows: np.ndarray, id_column: str, text_column: str, shorten: bool):
    """The decoded (and optionally shortened) text of ``rows`` (-1: ""), as pandas' default text array.

    Each distinct name is decoded and shortened once; the column is gathered by pyarrow.
    """

    valid = rows >= 0
    cat = name_codes(frame, rows[valid], id_column, text_column)
    distinct = ["" if pd.isna(x) else str(x) for x in cat.categories]
    if shorten:
        distinct = [_shorten_one(x) for x in distinct]
    codes = np.full(len(rows), len(distinct), dtype=np.int64)  # the appended "" for -1 rows and missing names
    got = np.asarray(cat.codes, dtype=np.int64)
    codes[valid] = np.where(got >= 0, got, len(distinct))
    values = np.array([*distinct, ""], dtype=object)
    dtype = default_text_dtype()
    if dtype is not None:
        import pyarrow as pa

        return pd.arrays.ArrowStringArray(pa.array(values, type=pa.large_string()).take(pa.array(codes)), dtype=dtype)
    return pd.array(values[codes], dtype="str")


# --------------------------------------------------------------------------- attribution
def _range_min(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, empty: int) -> np.ndarray:
    """min(values[lo:hi]) per query (``empty`` where lo >= hi)."""
    out = np.full(lo.shape, empty, dtype=np.int64)
    n = len(values)
    ok = hi > lo
    if n == 0 or not ok.any():
        return out
    table = [values.astype(np.int64)]
    k = 1
    while (1 << k) <= n:
        prev = table[-1]
        half = 1 << (k - 1)
        table.append(np.minimum(prev[:-half], prev[half:]))
        k += 1
    length = hi[ok] - lo[ok]
    lvl = np.floor(np.log2(length)).astype(np.int64)
    res = np.empty(length.shape, dtype=np.int64)
    for k in np.unique(lvl).tolist():  # one pass per power of two
        sel = lvl == k
        a = lo[ok][sel]
        b = hi[ok][sel] - (1 << k)
        res[sel] = np.minimum(table[k][a], table[k][b])
    out[ok] = res
    return out


def assign_annotations(
    k_track: np.ndarray,
    k_ts: np.ndarray,
    k_dur: np.ndarray,
    a_track: np.ndarray,
    a_ts: np.ndarray,
    a_dur: np.ndarray,
    *,
    zero_length: str = "contain",
) -> np.ndarray:
    """The innermost annotation overlapping each operation on its track.

    Overlap of ``[k.ts, k.end)`` and ``[a.ts, a.end)``: ``k.ts < a.end and
    a.ts < k.end``. Among overlapping annotations the shortest wins; equal
    lengths: the later one in input order (HTA paints annotations longest
    first, later ones overwrite).

    Args:
        k_track, a_track: integer track codes (operations only match annotations of their track).
        k_ts, k_dur, a_ts, a_dur: starts and durations (negative durations count as 0).
        zero_length: ``"contain"`` — a zero-length operation at ``t`` belongs to
            ``a`` when ``a.ts <= t < a.end``; ``"never"`` — HTA under pandas 3.

    Returns:
        Annotation position per operation, or -1.
    """
    nk, na = len(k_ts), len(a_ts)
    out = np.full(nk, -1, dtype=np.int64)
    if nk == 0 or na == 0:
        return out
    k_ts = np.asarray(k_ts, dtype=np.float64)
    a_ts = np.asarray(a_ts, dtype=np.float64)
    k_end = k_ts + np.maximum(np.nan_to_num(np.asarray(k_dur, dtype=np.float64)), 0)
    a_end = a_ts + np.maximum(np.nan_to_num(np.asarray(a_dur, dtype=np.float64)), 0)
    a_len = a_end - a_ts
    # priority rank: shorter first, then later input position
    prio_order = np.lexsort((-np.arange(na), a_len))
    prio = np.empty(na, dtype=np.int64)
    prio[prio_order] = np.arange(na)
    none = np.int64(na)
    for trk in np.unique(a_track).tolist():  # one pass per track (device stream), not per event
        ai = np.flatnonzero(a_track == trk)
        ki = np.flatnonzero(k_track == trk)
        if ki.size == 0:
            continue
        b = np.unique(np.concatenate([a_ts[ai], a_end[ai]]))
        nseg = b.size - 1
        if nseg <= 0:
            continue
        lo = np.searchsorted(b, a_ts[ai], side="left")
        hi = np.searchsorted(b, a_end[ai], side="left")
        lens = hi - lo
        tot = int(lens.sum())
        seg_best = np.full(nseg, none, dtype=np.int64)
        if tot:
            owner = np.repeat(ai, lens)
            start = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
            seg = start + np.arange(tot)
            np.minimum.at(seg_best, seg, prio[owner])
        kt, ke = k_ts[ki], k_end[ki]
        zero = ke <= kt
        klo = np.searchsorted(b, kt, side="right") - 1
        khi = np.searchsorted(b, ke, side="left")
        if zero_length == "contain":
            khi = np.where(zero, klo + 1, khi)
        elif zero_length == "never":
            khi = np.where(zero, klo, khi)
        else:
            raise ValueError(f"unknown zero_length rule {zero_length!r}")
        klo = np.clip(klo, 0, nseg)
        khi = np.clip(khi, 0, nseg)
        best = _range_min(seg_best, klo, khi, none)
        hit = best < none
        out[ki[hit]] = prio_order[best[hit]]
    return out


def _track_codes(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Common integer codes for (pid, tid) pairs of several row sets."""
    sizes = [len(p[0]) for p in pairs]
    pid = np.concatenate([np.asarray(p[0]) for p in pairs]) if pairs else np.array([], dtype=np.int64)
    tid = np.concatenate([np.asarray(p[1]) for p in pairs]) if pairs else np.array([], dtype=np.int64)
    codes = pd.MultiIndex.from_arrays([pd.Index(pid), pd.Index(tid)]).factorize()[0] if len(pid) else np.zeros(0, dtype=np.int64)
    return np.split(codes.astype(np.int64), np.cumsum(sizes)[:-1])


# --------------------------------------------------------------------------- HTA methods
def hta_gpu_kernels_with_user_annotations(
    frame: pd.DataFrame,
    *,
    expand_names: bool = True,
    shorten: bool = True,
    hta_compat: bool = False,
) -> pd.DataFrame:
    """HTA's ``get_gpu_kernels_with_user_annotations`` on one rank's HTA-style table.

    Args:
        frame: the rank's table (``hta_frame``: ids in ``name``/``cat``, decoded
            names in ``s_name``/``s_cat``).
        expand_names: add ``s_name``, ``s_cat``, ``s_user_annotation``.
        shorten: shorten the decoded names (HTA's ``shorten_name``).
        hta_compat: never attribute zero-duration operations (HTA under pandas 3).

    Returns:
        GPU rows (``(stream >= 0 and correlation >= 0)`` or ``Event Sync``/``Context Sync``)
        in table order with every table column, ``end = ts + dur``, then
        ``user_annotation`` (the annotation's name id, or -1) and the decoded
        columns. ``RangeIndex``.
    """
    stream = frame["stream"].to_numpy()
    corr = frame["correlation"].to_numpy()
    # names are tested once per distinct id; strings are made only for the rows returned
    gpu = ((stream >= 0) & (corr >= 0)) | name_mask(frame, frozenset(_SYNC_NAMES))
    anno = name_mask(frame, {"gpu_user_annotation"}, "s_cat")
    base = frame.drop(columns=[c for c in ("s_name", "s_cat", "s_user_annotation", "user_annotation") if c in frame.columns])
    out = base[gpu].copy()
    out["end"] = out["ts"] + out["dur"]
    pid, tid = frame["pid"].to_numpy(), frame["tid"].to_numpy()
    k_track, a_track = _track_codes((pid[gpu], tid[gpu]), (pid[anno], tid[anno]))
    pos = assign_annotations(
        k_track, frame["ts"].to_numpy()[gpu], frame["dur"].to_numpy()[gpu],
        a_track, frame["ts"].to_numpy()[anno], frame["dur"].to_numpy()[anno],
        zero_length="never" if hta_compat else "contain",
    )
    a_name_ids = frame["name"].to_numpy()[anno].astype(np.int64)
    out["user_annotation"] = np.where(pos >= 0, a_name_ids[np.clip(pos, 0, None)], -1).astype(np.int64)
    if expand_names:
        anno_rows = np.flatnonzero(anno)
        a_rows = np.where(pos >= 0, anno_rows[np.clip(pos, 0, None)] if len(anno_rows) else -1, -1)
        out["s_name"] = _text_of(frame, np.flatnonzero(gpu), "name", "s_name", shorten)
        out["s_cat"] = _text_of(frame, np.flatnonzero(gpu), "cat", "s_cat", shorten)
        out["s_user_annotation"] = _text_of(frame, a_rows, "name", "s_name", shorten)
    return out.reset_index(drop=True)


def allowlisted_names(strings: Sequence[str], patterns: Iterable[str] | None, *, regex: bool = False) -> list[str] | None:
    """Strings containing any of ``patterns`` (literal substrings, as HTA; ``regex=True``: ``re.search``)."""
    if patterns is None:
        return None
    pats = list(patterns)
    if not pats:
        return []
    rx = re.compile("|".join(p if regex else re.escape(p) for p in pats))
    return [s for s in strings if rx.search(s)]


def hta_user_annotation_breakdown(
    frames: Mapping[int, pd.DataFrame],
    category: str,
    *,
    duration_ratio: float = 0.8,
    num_kernels: int = 1000,
    allowlist: Sequence[str] | None = None,
    strings=None,
    columns: Mapping[int, Mapping[str, np.ndarray]] | None = None,
) -> pd.DataFrame:
    """HTA's ``get_gpu_user_annotation_breakdown`` over every rank's table.

    Args:
        frames: ``{rank: HTA-style table}``.
        category: ``"gpu_user_annotation"`` or ``"user_annotation"``.
        duration_ratio, num_kernels: HTA's top-k parameters (spec 20 §3, quirks kept).
        allowlist: names never folded into ``others``.
        strings: the :class:`~holotrace.model.strings.StringTable` the tables' ``name``/``cat`` ids
            index, when known: rows are then selected and grouped on ids alone.
        columns: the same tables as dicts of numpy columns (``hta_view.hta_columns``), read faster.

    Returns:
        ``name, sum (us), max (us), min (us), stddev, mean (us), rank`` sorted by
        ``(rank, name)``, ``RangeIndex``.
    """
    if strings is not None:
        fast = _breakdown_by_id(columns or frames, strings, category, num_kernels)
        if fast is not None:
            return fast
    parts = []
    for rank in sorted(frames):
        f = frames[rank]
        sel = np.flatnonzero(name_mask(f, {category}, "s_cat"))
        names = name_codes(f, sel)  # grouped by name id: no Python string per row
        if (np.asarray(names.codes) < 0).any():  # a missing name counts as "" (as HTA's fillna)
            names = f["s_name"].astype(object).fillna("").to_numpy()[sel]
        durs = f["dur"].to_numpy(dtype=np.float64)[sel]
        agg = top_k_hta(names, durs, num_kernels=num_kernels, duration_ratio=duration_ratio, allowlist=allowlist)
        agg["rank"] = np.int64(rank)
        parts.append(agg)
    if parts:
        out = pd.concat(parts, ignore_index=True)
    else:
        out = pd.DataFrame(columns=["name", "sum", "max", "min", "mean", "std", "rank"])
    out = out.rename(columns={"sum": "sum (us)", "mean": "mean (us)", "max": "max (us)", "min": "min (us)", "std": "stddev"})
    out = out.sort_values(["rank", "name"], kind="stable", ignore_index=True)
    for c in ["sum (us)", "max (us)", "min (us)", "stddev", "mean (us)"]:
        out[c] = out[c].astype(np.float64)
    out["rank"] = out["rank"].astype(np.int64)
    out["name"] = out["name"].astype(object)
    return out[BREAKDOWN_COLUMNS]


def _breakdown_by_id(tables: Mapping, strings, category: str, num_kernels: int) -> pd.DataFrame | None:
    """The breakdown computed on name ids over every rank at once; None when a rank needs the general path."""
    per_rank = []
    for rank in sorted(tables):
        part = _annotation_stats_by_id(tables[rank], strings, category, num_kernels)
        if part is None:
            return None
        per_rank.append((rank, part))
    cols = {k: np.concatenate([p[k] for _, p in per_rank]) if per_rank else np.empty(0) for k in
            ("id", "sum", "max", "min", "std", "mean")}
    rank = np.concatenate([np.full(len(p["id"]), r, dtype=np.int64) for r, p in per_rank]) if per_rank else np.empty(0, np.int64)
    # sort by (rank, name): names ranked once per distinct id
    uniq, inv = np.unique(cols["id"].astype(np.int64), return_inverse=True)
    text = np.array([strings.table[int(i)] for i in uniq], dtype=object)
    by_text = np.empty(len(uniq), dtype=np.int64)
    by_text[np.argsort(text, kind="stable")] = np.arange(len(uniq))
    order = np.lexsort((by_text[inv], rank))
    return pd.DataFrame({
        "name": pd.Series(text[inv[order]], dtype=object),
        "sum (us)": cols["sum"][order].astype(np.float64), "max (us)": cols["max"][order].astype(np.float64),
        "min (us)": cols["min"][order].astype(np.float64), "stddev": cols["std"][order].astype(np.float64),
        "mean (us)": cols["mean"][order].astype(np.float64), "rank": rank[order],
    }, copy=False)


def _annotation_stats_by_id(f: pd.DataFrame, strings, category: str, num_kernels: int) -> dict | None:
    """Per-name statistics of one table's ``category`` rows, grouped on name ids.

    None when HTA's top-k would fold names (more than ``num_kernels``): the caller then takes the
    general path. Without folding, HTA's result is exactly the per-name statistics.
    """
    cid = strings.id(category)
    cat = np.asarray(f["cat"])
    rows = np.flatnonzero(cat == cid) if cid >= 0 else np.empty(0, dtype=np.intp)
    ids = np.asarray(f["name"])[rows]
    if len(ids) and ids.min() < 0:
        return None  # a missing name: the general path turns it into ""
    codes, count, total, high, low, mean, std = group_stats(ids, np.asarray(f["dur"], dtype=np.float64)[rows])
    if len(codes) > num_kernels:
        return None
    return {"id": codes, "sum": total, "max": high, "min": low, "mean": mean, "std": std}


# --------------------------------------------------------------------------- native views
def _kind_codes():
    from holotrace.model.classify import Kind

    return int(Kind.USER_ANNOTATION), int(Kind.GPU_ANNOTATION)


def annotation_time(job, *, gpu: bool = True, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """Time per user annotation per rank (all steps; µs).

    Args:
        job: a loaded job.
        gpu: ``gpu_user_annotation`` ranges (GPU time) when True, else CPU ``user_annotation`` ranges.
        ranks: default all.

    Returns:
        ``rank, name, count, sum_us, mean_us, min_us, max_us`` sorted by rank then ``sum_us`` descending.
    """
    from holotrace.analysis._select import job_ranks

    cpu_kind, gpu_kind = _kind_codes()
    want = gpu_kind if gpu else cpu_kind
    parts = []
    for r in job_ranks(job, ranks):
        ev = job.rank(r).events
        sel = ev["kind"].to_numpy() == want
        if not sel.any():
            continue
        d = pd.DataFrame({"name": job.strings.decode(ev["name"].to_numpy()[sel]), "dur": ev["dur_ns"].to_numpy()[sel] / 1e3})
        g = d.groupby("name", sort=True)["dur"].agg(["count", "sum", "mean", "min", "max"]).reset_index()
        g.insert(0, "rank", np.int64(r))
        parts.append(g)
    cols = ["rank", "name", "count", "sum_us", "mean_us", "min_us", "max_us"]
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "name" else np.float64) for c in cols})
    out = pd.concat(parts, ignore_index=True).rename(columns={"sum": "sum_us", "mean": "mean_us", "min": "min_us", "max": "max_us"})
    out["count"] = out["count"].astype(np.int64)
    return out.sort_values(["rank", "sum_us", "name"], ascending=[True, False, True], kind="stable", ignore_index=True)[cols]


def kernel_time_by_annotation(job, *, gpu: bool = True, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """GPU work (kernels, memcpy, memset) attributed to its innermost user annotation (µs).

    ``gpu=True``: by overlap with ``gpu_user_annotation`` ranges on the same
    device stream (zero-length operations included, see the module docstring).
    ``gpu=False``: through the launch call — the innermost CPU ``user_annotation``
    on the launching thread's call stack.

    Returns:
        ``rank, annotation, kernels, kernel_time_us`` ("" = not annotated),
        sorted by rank then time descending.
    """
    from holotrace.analysis._select import gpu_activity, job_ranks

    cpu_kind, gpu_kind = _kind_codes()
    parts = []
    for r in job_ranks(job, ranks):
        ev = job.rank(r).events
        kind = ev["kind"].to_numpy()
        work = gpu_activity(ev)
        names = ev["name"].to_numpy()
        if gpu:
            anno = kind == gpu_kind
            kt, at = _track_codes((ev["pid"].to_numpy()[work], ev["tid"].to_numpy()[work]),
                                  (ev["pid"].to_numpy()[anno], ev["tid"].to_numpy()[anno]))
            pos = assign_annotations(kt, ev["ts_ns"].to_numpy()[work], ev["dur_ns"].to_numpy()[work],
                                     at, ev["ts_ns"].to_numpy()[anno], ev["dur_ns"].to_numpy()[anno])
            label = np.where(pos >= 0, names[anno][np.clip(pos, 0, None)] if anno.any() else -1, -1)
        else:
            graph = _native_graph(job, r)
            anno_rows = np.flatnonzero(kind == cpu_kind)
            lab = graph.subtree_labels(anno_rows)
            wrows = np.flatnonzero(work)
            label = np.where(lab[wrows] >= 0, names[np.clip(lab[wrows], 0, None)], -1)
        d = pd.DataFrame({"annotation": job.strings.decode(label.astype(np.int64)),
                          "dur": ev["dur_ns"].to_numpy()[work] / 1e3})
        g = d.groupby("annotation", sort=True)["dur"].agg(["count", "sum"]).reset_index()
        g.insert(0, "rank", np.int64(r))
        parts.append(g)
    cols = ["rank", "annotation", "kernels", "kernel_time_us"]
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "annotation" else np.float64) for c in cols})
    out = pd.concat(parts, ignore_index=True).rename(columns={"count": "kernels", "sum": "kernel_time_us"})
    out["kernels"] = out["kernels"].astype(np.int64)
    return out.sort_values(["rank", "kernel_time_us", "annotation"], ascending=[True, False, True], kind="stable", ignore_index=True)[cols]


def _native_graph(job, rank: int):
    """Call graph of a rank's native events (CPU kinds nested per thread, GPU work under its launch)."""
    from holotrace.analysis.callstack import native_call_graph

    return native_call_graph(job, rank)
