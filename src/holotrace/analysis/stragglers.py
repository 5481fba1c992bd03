"""Straggler detection (spec 26 §2) and a per-step view of who waits for whom in collectives.

Two views:

* :func:`hta_potential_stragglers` — HTA's method: among the long
  communication kernels, pick the ``(stream, kernel)`` whose duration varies
  most across ranks; per step, the ranks that start its last instance latest
  are the candidates. By default communication kernels are recognised through
  the shared rule table (every NCCL/RCCL/HCCL family, ``ncclDevKernel_*``
  included), stream 0 counts, step 0 counts, a trace without ``ProfilerStep``
  annotations is one step, and degenerate inputs (one rank, no collective)
  give ``[]`` instead of an exception. ``hta_compat=True`` restores HTA's
  ``ncclKernel*``/``stream > 0``/``iteration > 0`` selection.
* :func:`collective_waits` / :func:`straggler_report` — holotrace's view:
  the k-th instance of a collective kernel in a step is the same collective on
  every rank; all ranks leave it together, so a rank's extra time in it over
  the fastest rank is time spent waiting for the others, and the fastest rank
  (the last to arrive) is the one they waited for. Durations are compared,
  not start times, so clock skew between hosts does not matter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from holotrace.analysis.topk import group_stats
from holotrace.model.link import isin_ids

__all__ = [
    "SymbolTableView",
    "collective_waits",
    "hta_potential_stragglers",
    "hta_straggler_scores",
    "straggler_report",
    "straggler_summary",
]

log = logging.getLogger(__name__)



class SymbolTableView:
    """The two lookups HTA's pluggable straggler scorers use (``get_sym_table``, ``get_sym_id_map``)."""

    def __init__(self, strings: Sequence[str]):
        self.sym_table = list(strings)
        self.sym_index = {s: i for i, s in enumerate(self.sym_table)}

    def get_sym_table(self) -> list[str]:
        return self.sym_table

    def get_sym_id_map(self) -> dict[str, int]:
        return self.sym_index


def _default_scores(tables, ranks, selected, k: int, hta_compat: bool, id_names) -> tuple[pd.Series, pd.DataFrame]:
    """HTA's default scorer without stacking the tables: each rank is cut to its long rows first.

    ``tables``: ``{rank: table}``, DataFrames or dicts of numpy columns. Same result as
    :func:`hta_straggler_scores` on the stacked, step-filtered tables.
    """
    cut = {}
    present: set = set()
    t_min = max_end = None
    for r in ranks:
        t = tables[r]
        it = np.asarray(t["iteration"])
        if selected is None:  # the whole trace is one step
            it = np.zeros(len(it), dtype=np.int64)
            keep = None
            present.add(0)
        else:
            if it.dtype.kind in "iu":  # integer steps: flag arrays, no sort or hash
                keep = isin_ids(it, np.asarray(selected, dtype=np.int64))
                present.update(_values_present(it[keep], selected))
            else:
                keep = np.isin(it, selected)
                present.update(pd.unique(it[keep]).tolist())
        ts, dur = np.asarray(t["ts"]), np.asarray(t["dur"])
        if len(ts) and (keep is None or keep.any()):
            start = ts.min(initial=np.iinfo(np.int64).max, where=True if keep is None else keep)
            end = (ts + dur).max(initial=-np.inf, where=True if keep is None else keep)
            t_min = start if t_min is None else min(t_min, start)
            max_end = end if max_end is None else max(max_end, end)
        cut[r] = (t, keep, it, ts, dur)
    iters = [x for x in present if x != -1]
    if not iters or t_min is None:
        return _empty()
    mean_iter = (max_end - t_min) / float(len(iters))
    picked = []
    for r in ranks:
        t, keep, it, ts, dur = cut[r]
        stream = np.asarray(t["stream"])
        long = _long_rows(stream, it, dur, mean_iter * 0.01, hta_compat)
        if keep is not None:
            long = long[keep[long]]
        picked.append((r, long, stream, it, ts, dur, np.asarray(t["name"])))
    # classify each distinct name of the long rows once, over every rank
    ids = np.concatenate([p[6][p[1]] for p in picked]) if picked else np.empty(0, dtype=np.int64)
    if not len(ids):
        return _empty()
    codes, uniq = pd.factorize(ids)
    if id_names is not None:
        names = np.array([id_names[int(i)] if i >= 0 else "" for i in uniq], dtype=object)
    else:
        first = np.flatnonzero(codes > np.maximum.accumulate(np.r_[-1, codes[:-1]]))
        texts = np.concatenate([np.asarray(tables[r]["s_name"].to_numpy(dtype=object))[long] for r, long, *_ in picked])
        names = texts[first]
    comm = _comm_mask(names, hta_compat)[codes]
    cols: dict[str, list] = {c: [] for c in ("rank", "stream", "iteration", "name", "ts", "dur")}
    at = 0
    for r, long, stream, it, ts, dur, name in picked:
        rows = long[comm[at:at + len(long)]]
        at += len(long)
        for c, v in (("rank", np.full(len(rows), r, dtype=np.int64)), ("stream", stream[rows]), ("iteration", it[rows]),
                     ("name", name[rows]), ("ts", ts[rows]), ("dur", dur[rows])):
            cols[c].append(v)
    return _scores_of_long_kernels({c: np.concatenate(v) for c, v in cols.items()}, t_min, mean_iter, k)


def _comm_mask(names: np.ndarray, hta_compat: bool) -> np.ndarray:
    from holotrace.model.classify import is_communication_kernel_names

    uniq, codes = np.unique(pd.Series(names, dtype=object).fillna("").astype(str).to_numpy(), return_inverse=True)
    if hta_compat:
        hit = np.array([u.startswith("ncclKernel") for u in uniq], dtype=bool)
    else:
        hit = is_communication_kernel_names(list(uniq)) if len(uniq) else np.zeros(0, dtype=bool)
    return hit[codes] if len(uniq) else np.zeros(len(names), dtype=bool)


def hta_straggler_scores(
    df: pd.DataFrame, num_candidates: int = 2, *, hta_compat: bool = False, id_names: Sequence[str] | None = None
) -> tuple[pd.Series, pd.DataFrame]:
    """HTA's default scorer (late start of the dominant communication kernel).

    Args:
        df: every rank's table stacked with a ``rank`` column, restricted to the
            selected steps (``iteration``), with ``ts, dur, stream, s_name``.
        num_candidates: k.
        hta_compat: HTA's kernel selection (see module docstring).
        id_names: the strings the ``name`` ids index, used when ``df`` has no ``s_name`` column.

    Returns:
        ``(scores, metric)``: per-rank score (how many steps the rank was among
        the k latest starters; index = rank, ascending) and the metric rows
        (``rank, stream, iteration, ts, dur, normalized_start_time, duration``).
        Both empty when no communication kernel qualifies or fewer than two
        ranks have one.
    """
    k = max(int(num_candidates), 1)
    it = df["iteration"].to_numpy()
    iters = np.unique(it[it != -1])
    if iters.size == 0 or df.empty:
        return _empty()
    df = df[np.isin(it, iters)]
    t_min = df["ts"].min()
    mean_iter = ((df["ts"] + df["dur"]).max() - t_min) / float(iters.size)
    rows = _long_rows(df["stream"].to_numpy(), df["iteration"].to_numpy(), df["dur"].to_numpy(), mean_iter * 0.01, hta_compat)
    if "s_name" in df.columns:
        names = df["s_name"].to_numpy(dtype=object)[rows] if len(rows) else np.empty(0, dtype=object)
    else:  # ids only: ``id_names`` decodes them
        names = np.array([id_names[int(i)] if i >= 0 else "" for i in df["name"].to_numpy()[rows]], dtype=object)
    long = df.iloc[rows[_comm_mask(names, hta_compat)]]
    return _scores_of_long_kernels(long, t_min, mean_iter, k)


def _long_rows(stream: np.ndarray, iteration: np.ndarray, dur: np.ndarray, min_duration: float, hta_compat: bool) -> np.ndarray:
    """Positions of the rows long enough, on a kernel stream and in a step, for HTA's scorer."""
    ok_stream = stream > 0 if hta_compat else stream >= 0
    ok_iter = iteration > (0 if hta_compat else -1)
    return np.flatnonzero(ok_stream & ok_iter & (dur >= min_duration))


def _values_present(values: np.ndarray, candidates) -> list:
    """Which of a few integer ``candidates`` occur in ``values`` (every value is one of them)."""
    if not len(values) or not len(candidates):
        return []
    lo = min(candidates)
    seen = np.zeros(max(candidates) - lo + 1, dtype=bool)
    seen[values - lo] = True
    return [c for c in candidates if seen[c - lo]]


def _empty() -> tuple[pd.Series, pd.DataFrame]:
    """No scores, no metric rows."""
    return pd.Series([], dtype=np.int64), pd.DataFrame()


def _key_changes(order: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """Positions in ``order`` where any of ``keys`` (read in that order) differs from the previous row; 0 first."""
    if not len(order):
        return np.empty(0, dtype=np.intp)
    diff = np.zeros(len(order) - 1, dtype=bool)
    for k in keys:
        v = k[order]
        diff |= v[1:] != v[:-1]
    return np.r_[0, np.flatnonzero(diff) + 1]


def _scores_of_long_kernels(long, t_min, mean_iter, k: int) -> tuple[pd.Series, pd.DataFrame]:
    """HTA's scoring on the long communication kernels (``rank, stream, iteration, name, ts, dur``; a frame or a dict)."""
    cols = {c: np.asarray(long[c]) for c in ("rank", "stream", "iteration", "name", "ts", "dur")}
    if not len(cols["rank"]):
        return _empty()
    r, st, it, nm = cols["rank"], cols["stream"], cols["iteration"], cols["name"]
    # the last instance of each (rank, stream, step, kernel), in key order (HTA: groupby(...).tail(1), sorted)
    order = np.lexsort((np.arange(len(r)), nm, it, st, r))
    changes = _key_changes(order, r, st, it, nm)
    last = order[np.r_[changes[1:] - 1, len(order) - 1]]
    last_cols = {c: v[last] for c, v in cols.items()}
    last_cols["normalized_start_time"] = (last_cols["ts"] - t_min) / mean_iter
    last_cols["duration"] = last_cols["dur"] / mean_iter
    lr, ls, li, ln, ld = (last_cols[c] for c in ("rank", "stream", "iteration", "name", "duration"))
    # spread of the duration across ranks per (stream, step, kernel); then its mean over steps per (stream, kernel)
    g = np.lexsort((lr, ln, li, ls))
    gstart = _key_changes(g, ls, li, ln)
    _, count, _, _, _, _, std = group_stats(np.repeat(np.arange(len(gstart)), np.diff(np.r_[gstart, len(g)])), ld[g])
    spread = np.where(count > 1, std, np.nan)  # pandas' std of a single value is NaN
    gs, gi, gn = ls[g[gstart]], li[g[gstart]], ln[g[gstart]]
    h = np.lexsort((gi, gn, gs))  # groups of (stream, kernel), sorted
    hstart = _key_changes(h, gs, gn)
    valid = ~np.isnan(spread[h])
    n_valid = np.add.reduceat(valid.astype(np.int64), hstart)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.add.reduceat(np.where(valid, spread[h], 0.0), hstart) / n_valid  # NaN where no step had a spread
    if np.isnan(avg).all():
        return _empty()
    best = int(np.nanargmax(avg))  # first maximum in (stream, kernel) order, as idxmax
    stream_pick, name_pick = gs[h[hstart[best]]], gn[h[hstart[best]]]
    chosen = (ls == stream_pick) & (ln == name_pick)
    metric = pd.DataFrame({c: last_cols[c][chosen] for c in
                           ("rank", "stream", "iteration", "name", "ts", "dur", "normalized_start_time", "duration")})
    nst = last_cols["normalized_start_time"][chosen]
    m_rank, m_iter = last_cols["rank"][chosen], last_cols["iteration"][chosen]
    flags = np.zeros(len(metric), dtype=np.int64)
    steps = np.unique(m_iter)
    if len(steps) <= 1:
        vals = np.sort(nst)[::-1]
        threshold = vals[min(k, vals.size) - 1]
        flags = (nst >= threshold).astype(np.int64)
        scores = pd.Series(flags, index=m_rank)
    else:
        for itv in steps:  # one pass per step
            if itv < 0:
                continue
            sel = m_iter == itv
            vals = np.sort(nst[sel])[::-1]
            threshold = vals[min(k, vals.size) - 1]
            flags[sel] = (nst[sel] >= threshold).astype(np.int64)
        ranks, inv = np.unique(m_rank, return_inverse=True)
        scores = pd.Series(np.bincount(inv, weights=flags, minlength=len(ranks)).astype(np.int64), index=ranks)
    scores.index.name = "rank"
    return scores.astype(np.int64), metric


def hta_potential_stragglers(
    frames: Mapping[int, pd.DataFrame],
    profiler_steps: Sequence[int] | None = None,
    num_candidates: int = 2,
    *,
    hta_compat: bool = False,
    scorer: Callable[..., pd.Series] | None = None,
    symbol_table: SymbolTableView | None = None,
    id_names: Sequence[str] | None = None,
    columns: Mapping[int, Mapping[str, np.ndarray]] | None = None,
) -> list[int]:
    """HTA's ``get_potential_stragglers`` on HTA-style tables.

    Args:
        frames: ``{rank: table}``.
        profiler_steps: steps to use (unknown ones dropped); ``None``: all.
        num_candidates: how many ranks to return (at least 1).
        hta_compat: HTA's kernel selection and ranking (zero-score ranks may be returned).
        scorer: an HTA-style ``straggler_identification_impl(df, symbol_table, k, visualize)``.
        symbol_table: passed to ``scorer`` (decodes the ``name`` ids).
        id_names: the strings the ``name`` ids index, when known (saves decoding ``s_name``).
        columns: the same tables as dicts of numpy columns (``hta_view.hta_columns``), read faster.

    Returns:
        Rank numbers, most likely straggler first; ``[]`` (with a warning) when
        the traces cannot tell (no communication kernel, a single rank). By
        default only ranks with a positive score are returned and ties on the
        score go to the rank that started the metric kernel later on average
        (then the lower rank); ``hta_compat`` keeps HTA's order (ties by rank,
        zero scores included).

    Raises:
        ValueError: ``profiler_steps`` names no available step (as HTA).
    """
    k = max(int(num_candidates), 1)
    available = _step_numbers(columns or frames, id_names)  # TRANSITIONAL: replaced by steps.profiler_steps(view)
    if profiler_steps is None:
        selected = available
    else:
        selected = [s for s in profiler_steps if s in available]
    whole_trace = False
    if not selected:
        if profiler_steps is None and not available and not hta_compat:
            whole_trace = True  # no ProfilerStep annotations: the whole trace is one step
        else:
            raise ValueError(
                f"invalid value for argument: profiler_steps={profiler_steps}; available profiler steps={available}"
            )
    ranks = sorted(frames)
    metric = None
    if scorer is not None:
        parts = []
        for r in ranks:
            f = frames[r]
            if not whole_trace:
                f = f[np.isin(f["iteration"].to_numpy(), selected)]
            else:
                f = f.assign(iteration=np.zeros(len(f), dtype=np.int64))
            parts.append(f.assign(rank=np.int64(r)))
        df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        scores = scorer(df, symbol_table, k, False)
    else:
        scores, metric = _default_scores(columns or frames, ranks, None if whole_trace else selected, k, hta_compat, id_names)
    if len(scores) == 0:
        log.warning(
            "no straggler candidates: needs communication kernels longer than 1%% of a step on at least two ranks"
        )
        return []
    if hta_compat:
        order = scores.sort_values(ascending=False, kind="stable")
        return [int(r) for r in order.index[:k]]
    # ties on the score: the later average start of the metric kernel first, then the lower rank
    rank, score = scores.index.to_numpy(), scores.to_numpy()
    late = np.zeros(len(rank))
    if metric is not None and len(metric):  # mean normalized start of the metric kernel per rank
        m_rank = metric["rank"].to_numpy()
        seen, inv = np.unique(m_rank, return_inverse=True)
        means = np.bincount(inv, weights=metric["normalized_start_time"].to_numpy()) / np.bincount(inv)
        at = np.searchsorted(seen, rank)
        found = (at < len(seen)) & (seen[np.minimum(at, len(seen) - 1)] == rank)
        late = np.where(found, means[np.minimum(at, len(seen) - 1)], -np.inf)
    keep = np.flatnonzero(score > 0)
    order = keep[np.lexsort((rank[keep], -late[keep], -score[keep]))]
    return [int(r) for r in rank[order][:k]]


# --------------------------------------------------------------------------- native view
def collective_waits(job, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """Every communication kernel instance matched across ranks, with each rank's waiting time.

    The k-th occurrence of a communication kernel name within a step on one rank
    is matched with the k-th occurrence on every other rank. Kernels outside any
    ``ProfilerStep`` belong to step -1.

    Returns:
        One row per (instance, rank) where at least two ranks have the instance:
        ``step, collective, occurrence, rank, start_us, dur_us, wait_us,
        last_arrival`` — ``wait_us`` = the rank's duration minus the shortest
        duration of the instance; ``last_arrival`` = the rank with the shortest
        duration (latest start breaks ties), whom the others waited for.
    """
    from holotrace.analysis._select import job_ranks
    from holotrace.model.classify import KernelType, Kind

    parts = []
    for r in job_ranks(job, ranks):
        rt = job.rank(r)
        ev = rt.events
        sel = (ev["kind"].to_numpy() == int(Kind.KERNEL)) & (ev["kernel_type"].to_numpy() == int(KernelType.COMMUNICATION))
        if not sel.any():
            continue
        d = pd.DataFrame(
            {
                "step": ev["iteration"].to_numpy()[sel],
                "name": ev["name"].to_numpy()[sel],
                "rank": np.int64(r),
                "start_us": (ev["ts_ns"].to_numpy()[sel] + rt.clock_offset_ns - job.origin_ns) / 1e3,
                "dur_us": ev["dur_ns"].to_numpy()[sel] / 1e3,
            }
        ).sort_values(["step", "name", "start_us"], kind="stable")
        d["occurrence"] = d.groupby(["step", "name"], sort=False).cumcount().to_numpy()
        parts.append(d)
    cols = ["step", "collective", "occurrence", "rank", "start_us", "dur_us", "wait_us", "last_arrival"]
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "collective" else np.float64) for c in cols})
    d = pd.concat(parts, ignore_index=True)
    key = ["step", "name", "occurrence"]
    g = d.groupby(key, sort=False)
    d["n_ranks"] = g["rank"].transform("size")
    d = d[d["n_ranks"] >= 2].copy()
    if d.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object if c == "collective" else np.float64) for c in cols})
    g = d.groupby(key, sort=False)
    d["wait_us"] = d["dur_us"] - g["dur_us"].transform("min")
    # last arrival: shortest duration; ties -> latest start, then lowest rank
    srt = d.sort_values(key + ["dur_us", "start_us", "rank"], ascending=[True, True, True, True, False, True], kind="stable")
    last = srt.groupby(key, sort=False).head(1).set_index(key)["rank"]
    d["last_arrival"] = last.reindex(pd.MultiIndex.from_frame(d[key])).to_numpy()
    d["collective"] = job.strings.decode(d["name"].to_numpy())
    out = d[cols].sort_values(["step", "start_us", "collective", "occurrence", "rank"], kind="stable", ignore_index=True)
    out["step"] = out["step"].astype(np.int64)
    out["occurrence"] = out["occurrence"].astype(np.int64)
    out["rank"] = out["rank"].astype(np.int64)
    out["last_arrival"] = out["last_arrival"].astype(np.int64)
    return out


def straggler_report(job, ranks: Sequence[int] | None = None, waits: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per step and rank: time spent waiting in collectives, and time the others waited for it.

    Returns:
        ``step, rank, collectives, wait_us, waited_for_us, straggler,
        worst_collective, worst_collective_wait_us`` — ``waited_for_us`` sums,
        over the collectives the rank arrived at last, the others' waiting time;
        ``straggler`` marks the rank(s) with the largest positive
        ``waited_for_us`` of the step; ``worst_collective`` is the collective in
        which the others waited longest for this rank (empty when none).
    """
    w = collective_waits(job, ranks) if waits is None else waits
    cols = ["step", "rank", "collectives", "wait_us", "waited_for_us", "straggler", "worst_collective", "worst_collective_wait_us"]
    if w.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols})
    inst = ["step", "collective", "occurrence"]
    per_rank = w.groupby(["step", "rank"], sort=True).agg(collectives=("dur_us", "size"), wait_us=("wait_us", "sum")).reset_index()
    caused = w.groupby(inst + ["last_arrival"], sort=False)["wait_us"].sum().reset_index()
    caused = caused.rename(columns={"last_arrival": "rank", "wait_us": "caused_us"})
    blame = caused.groupby(["step", "rank"], sort=True)["caused_us"].sum().rename("waited_for_us")
    worst = caused.sort_values(["step", "rank", "caused_us"], ascending=[True, True, False], kind="stable").groupby(["step", "rank"]).head(1)
    worst = worst.set_index(["step", "rank"])
    out = per_rank.set_index(["step", "rank"])
    out["waited_for_us"] = blame.reindex(out.index).fillna(0.0)
    out["worst_collective"] = worst["collective"].reindex(out.index).fillna("")
    out["worst_collective_wait_us"] = worst["caused_us"].reindex(out.index).fillna(0.0)
    out = out.reset_index()
    top = out.groupby("step")["waited_for_us"].transform("max")
    out["straggler"] = (out["waited_for_us"] >= top) & (out["waited_for_us"] > 0)
    out["collectives"] = out["collectives"].astype(np.int64)
    return out[cols]


def straggler_summary(job, report: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per rank over all steps: how often it was the straggler and how long others waited for it.

    Returns:
        ``rank, steps_as_straggler, waited_for_us, wait_us`` sorted by
        ``waited_for_us`` descending (ties: rank).
    """
    rep = straggler_report(job) if report is None else report
    cols = ["rank", "steps_as_straggler", "waited_for_us", "wait_us"]
    if rep.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.float64) for c in cols})
    s = rep.groupby("rank", sort=True).agg(
        steps_as_straggler=("straggler", "sum"), waited_for_us=("waited_for_us", "sum"), wait_us=("wait_us", "sum")
    ).reset_index()
    s["steps_as_straggler"] = s["steps_as_straggler"].astype(np.int64)
    return s.sort_values(["waited_for_us", "rank"], ascending=[False, True], kind="stable", ignore_index=True)[cols]


def _step_numbers(frames, id_names):  # TRANSITIONAL
    from holotrace.model.classify import hta_profiler_step_number

    found = set()
    for df in frames.values():
        for i in pd.unique(np.asarray(df["name"])):
            k = hta_profiler_step_number(id_names[int(i)]) if i >= 0 else -1
            if k >= 0:
                found.add(k)
    return sorted(found)
