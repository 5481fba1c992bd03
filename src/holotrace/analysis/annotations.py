"""User annotations: which annotation each GPU operation runs under, and time per annotation (spec 26 §3-4).

* :func:`assign_annotations` — the innermost (shortest) annotation overlapping each operation on its
  ``(pid, tid)`` track, the rule of HTA's ``get_gpu_kernels_with_user_annotations``, without HTA's loop
  over annotations: the track's timeline is cut at every annotation boundary, each elementary segment
  gets its winning annotation, and each operation takes the best segment it touches (a sparse-table
  range minimum).
* :func:`annotate_gpu_ops` — per rank of a view: the GPU operations and the annotation of each, by
  overlap with the GPU-timeline copies (``gpu_user_annotation``) or through the launch call's stack
  (CPU ``user_annotation``).
* :func:`annotation_time` and :func:`kernel_time_by_annotation` — time per annotation, and GPU time
  attributed to each, per rank.

Which rows are GPU operations and annotations, and their times, follow the rule set: holotrace's
(kernels, memcpy and memset; annotations by kind; exact ns) or HTA's (rows with a stream and a
correlation, plus ``Event Sync``/``Context Sync``; annotations by their exact category; HTA's µs).

Zero-duration operations: HTA under pandas 3 never attributes them (an empty interval overlaps
nothing). holotrace attributes a zero-length operation at ``t`` to an annotation ``a`` when
``a.ts <= t < a.end``; rules with ``hta_quirks`` keep HTA's behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis.callstack import call_graph
from holotrace.analysis.topk import group_stats, top_k
from holotrace.model.classify import (
    HTA_SYNC_EVENT_NAMES,
    Kind,
    RuleSet,
)
from holotrace.model.strings import StringTable
from holotrace.model.view import JobView, RankView, resolve
from holotrace.text import hta_short_name

__all__ = [
    "allowlisted_names",
    "annotate_gpu_ops",
    "annotation_time",
    "assign_annotations",
    "kernel_time_by_annotation",
    "shortened_ids",
]

GPU_CATEGORY, CPU_CATEGORY = "gpu_user_annotation", "user_annotation"


# --------------------------------------------------------------------------- name shortening
def shortened_ids(strings, ids: np.ndarray) -> tuple[StringTable, np.ndarray]:
    """``(table, codes)``: a string table of HTA's shortened names of ``ids`` (each distinct id shortened once;
    −1 reads as ``""``) and, per id, the position of its shortened name in that table."""
    inv, uniq = pd.factorize(np.asarray(ids, dtype=np.int64))
    table = StringTable()
    lut = np.array([table.add(hta_short_name(strings[int(i)])) for i in uniq.tolist()], dtype=np.int64)
    return table, lut[inv] if len(uniq) else np.zeros(0, dtype=np.int64)


def allowlisted_names(
    strings: Sequence[str], patterns: Iterable[str] | None, *, regex: bool = False
) -> list[str] | None:
    """Strings containing any of ``patterns`` (literal substrings, as HTA; ``regex=True``: ``re.search``)."""
    if patterns is None:
        return None
    pats = list(patterns)
    if not pats:
        return []
    rx = re.compile("|".join(p if regex else re.escape(p) for p in pats))
    return [s for s in strings if rx.search(s)]


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
    if zero_length not in ("contain", "never"):
        raise ValueError(f"unknown zero_length rule {zero_length!r}; use 'contain' or 'never'")
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
        khi = np.where(zero, klo + 1 if zero_length == "contain" else klo, khi)
        klo = np.clip(klo, 0, nseg)
        khi = np.clip(khi, 0, nseg)
        best = _range_min(seg_best, klo, khi, none)
        hit = best < none
        out[ki[hit]] = prio_order[best[hit]]
    return out


def _track_codes(pid: np.ndarray, tid: np.ndarray, *parts: np.ndarray) -> list[np.ndarray]:
    """Common integer ``(pid, tid)`` codes of several row sets (``parts``: row positions)."""
    rows = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    pc = pd.factorize(pid[rows])[0].astype(np.int64)
    tc, tu = pd.factorize(tid[rows])
    return np.split(pc * max(len(tu), 1) + tc, np.cumsum([len(p) for p in parts])[:-1])


def _gpu_ops(view: JobView, v: RankView, rules: RuleSet) -> np.ndarray:
    """Rows of the GPU operations annotations are assigned to, under ``rules``."""
    if rules.hta_table:  # HTA: rows with a stream and a correlation, and the CPU-side sync calls
        sync = view.name_ids(set(HTA_SYNC_EVENT_NAMES))
        return np.flatnonzero(((v["stream"] >= 0) & (v["correlation"] >= 0)) | np.isin(v["name"], sync))
    return np.flatnonzero(v["gpu"])


def _annotations(view: JobView, v: RankView, rules: RuleSet, gpu: bool) -> np.ndarray:
    """Rows of the rank's GPU-timeline (``gpu``) or CPU user annotations, under ``rules``."""
    if rules.hta_table:  # HTA selects by the exact category string
        cid = view.strings.id(GPU_CATEGORY if gpu else CPU_CATEGORY)
        return v.rows_where("cat", cid) if cid >= 0 else np.empty(0, dtype=np.int64)
    return v.rows_where("kind", int(Kind.GPU_ANNOTATION if gpu else Kind.USER_ANNOTATION))


def annotate_gpu_ops(
    source, rank: int, *, rules: RuleSet | None = None, gpu: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The GPU operations of one rank and the innermost user annotation of each.

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rank: the rank.
        rules: the rule set (default: the view's, or holotrace's for a job).
        gpu: by overlap with the ``gpu_user_annotation`` ranges on the operation's ``(pid, tid)`` track
            (device stream); otherwise through the launch call: the innermost CPU ``user_annotation``
            on the launching thread's call stack.

    Returns:
        ``(ops, annotation)``: row positions in the view of the GPU operations (ascending) and, per
        operation, the row of its annotation (−1: none).
    """
    view = resolve(source, rules)
    rules = view.rules
    v = view[rank]
    ops = _gpu_ops(view, v, rules)
    if not gpu:
        label = call_graph(view, rank, rules=rules).subtree_labels(_annotations(view, v, rules, False))
        return ops, label[ops]
    ann = _annotations(view, v, rules, True)
    k_track, a_track = _track_codes(v["pid"], v["tid"], ops, ann)
    pos = assign_annotations(
        k_track,
        v["ts"][ops],
        v["dur"][ops],
        a_track,
        v["ts"][ann],
        v["dur"][ann],
        zero_length="never" if rules.hta_quirks else "contain",
    )
    return ops, np.where(pos >= 0, ann[np.clip(pos, 0, None)] if len(ann) else -1, -1).astype(np.int64)


# --------------------------------------------------------------------------- time per annotation
def _by_name(view: JobView, name_ids: np.ndarray, durations: np.ndarray):
    """Per-name statistics (µs) grouped on name ids; a missing name (−1) groups as ``""``."""
    missing = len(view.strings)
    codes, count, total, high, low, mean, std = group_stats(np.where(name_ids >= 0, name_ids, missing), durations)
    text = np.array([view.strings[int(c)] if c < missing else "" for c in codes.tolist()], dtype=object)
    return text, count, *(view.us(x) for x in (total, high, low, mean, std))


def annotation_time(
    source,
    *,
    rules: RuleSet | None = None,
    ranks: Sequence[int] | None = None,
    gpu: bool = True,
    num_kernels: int | None = None,
    duration_ratio: float = 0.8,
    allowlist: Sequence[str] | None = None,
    sort: str = "time",
) -> pd.DataFrame:
    """Time per user annotation per rank (µs).

    Args:
        source: a :class:`~holotrace.model.job.Job` or a :class:`~holotrace.model.view.JobView`.
        rules: the rule set (default: the view's, or holotrace's for a job).
        ranks: default all.
        gpu: ``gpu_user_annotation`` ranges (GPU time) when True, else CPU ``user_annotation`` ranges
            (``ProfilerStep#N`` included).
        num_kernels, duration_ratio, allowlist: when ``num_kernels`` is given and a rank has more names,
            the names beyond the top-k cut fold into one ``others`` row (allow-listed names never fold),
            by :func:`~holotrace.analysis.topk.top_k` under the rule set (HTA's cut, quirks Q1-Q3, under
            ``rules.hta_table``: the rows then describe per-name totals).

        sort: ``"time"``: rows by rank, then ``sum_us`` descending, then name; ``"name"``: by rank, then name.

    Returns:
        ``rank, name, count, sum_us, mean_us, min_us, max_us, std_us`` (``std_us``: sample deviation,
        0 for one instance).
    """
    if sort not in ("time", "name"):
        raise ValueError(f"unknown sort {sort!r}; use 'time' or 'name'")
    view = resolve(source, rules)
    rules = view.rules
    chosen = view.select(ranks)
    picked = [(r, _annotations(view, view[r], rules, gpu)) for r in chosen]
    picked = [(r, rows) for r, rows in picked if len(rows)]
    parts = []
    if picked:
        # one grouping over every rank: key = (rank position, name id); a missing name (-1) groups as ""
        width = len(view.strings) + 1
        key = np.concatenate(
            [
                k * width + np.where(view[r]["name"][rows] >= 0, view[r]["name"][rows], width - 1)
                for k, (r, rows) in enumerate(picked)
            ]
        )
        dur = np.concatenate([view[r]["dur"][rows] for r, rows in picked])
        codes, count, total, high, low, mean, std = group_stats(key, dur)
        which, ids = codes // width, codes % width
        text = np.array([view.strings[int(i)] if i < width - 1 else "" for i in ids.tolist()], dtype=object)
        stats = dict(
            zip(
                ("name", "count", "sum_us", "max_us", "min_us", "mean_us", "std_us"),
                (text, count, *(view.us(x) for x in (total, high, low, mean, std))),
            )
        )
        for k, (r, rows) in enumerate(picked):
            sel = which == k
            part = {c: a[sel] for c, a in stats.items()}
            if num_kernels is not None and len(part["name"]) > num_kernels:
                part = _fold(view, view[r], rows, rules, num_kernels, duration_ratio, allowlist)
            part["rank"] = np.full(len(part["name"]), int(r), dtype=np.int64)
            parts.append(part)
    cols = ["rank", "name", "count", "sum_us", "mean_us", "min_us", "max_us", "std_us"]
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "name" else np.float64) for c in cols})
    data = {c: np.concatenate([p[c] for p in parts]) for c in cols}
    by_name = np.empty(len(data["name"]), dtype=np.int64)
    by_name[np.argsort(data["name"], kind="stable")] = np.arange(len(by_name))
    order = np.lexsort((by_name, -data["sum_us"], data["rank"]) if sort == "time" else (by_name, data["rank"]))
    return pd.DataFrame(
        {
            c: pd.Series(data[c][order], dtype=object)
            if c == "name"
            else data[c][order].astype(np.int64 if c in ("rank", "count") else np.float64)
            for c in cols
        }
    )


def _fold(
    view: JobView, v: RankView, rows: np.ndarray, rules: RuleSet, num_kernels: int, duration_ratio: float, allowlist
) -> dict:
    """One rank's per-name statistics after the rule set's top-k cut (see :func:`annotation_time`)."""
    t = top_k(view.names(v["name"][rows]), view.us(v["dur"][rows]), num_kernels, duration_ratio, allowlist, rules=rules)
    return {
        "name": t["name"].to_numpy(dtype=object),
        "count": t["count"].to_numpy(np.int64),
        "sum_us": t["sum"].to_numpy(np.float64),
        "max_us": t["max"].to_numpy(np.float64),
        "min_us": t["min"].to_numpy(np.float64),
        "mean_us": t["mean"].to_numpy(np.float64),
        "std_us": t["std"].to_numpy(np.float64),
    }


def kernel_time_by_annotation(
    source, *, rules: RuleSet | None = None, ranks: Sequence[int] | None = None, gpu: bool = True
) -> pd.DataFrame:
    """GPU work attributed to its innermost user annotation (µs); see :func:`annotate_gpu_ops`.

    Returns:
        ``rank, annotation, kernels, kernel_time_us`` (``""`` = not annotated), sorted by rank, then
        time descending, then annotation.
    """
    view = resolve(source, rules)
    rules = view.rules
    parts = []
    for r in view.select(ranks):
        v = view[r]
        ops, ann = annotate_gpu_ops(view, r, rules=rules, gpu=gpu)
        if not len(ops):
            continue
        label = np.where(ann >= 0, v["name"][np.clip(ann, 0, None)], -1)
        text, count, total, *_ = _by_name(view, label, v["dur"][ops])
        parts.append(
            pd.DataFrame(
                {
                    "rank": np.full(len(text), int(r), dtype=np.int64),
                    "annotation": text,
                    "kernels": count.astype(np.int64),
                    "kernel_time_us": total,
                }
            )
        )
    cols = ["rank", "annotation", "kernels", "kernel_time_us"]
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "annotation" else np.float64) for c in cols})
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(
        ["rank", "kernel_time_us", "annotation"], ascending=[True, False, True], kind="stable", ignore_index=True
    )[cols]
